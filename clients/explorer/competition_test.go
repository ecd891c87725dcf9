package explorer_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/rules"
	"github.com/psyche-go/psyche/clients/explorer"
	"github.com/psyche-go/psyche/clients/explorer/explorertest"
	"github.com/psyche-go/psyche/clients/programtest"
)

// The played competition's settings.
const (
	compReward = 1_000_000
	compStake  = 1_000
	compPages  = 4
	compTemp   = 500_000   // at creation
	compTemp2  = 2_000_000 // from round 2
)

// compBallot is a round as the test plays it: the wins the honest
// validators vote and the temperature it is weighed at.
type compBallot struct {
	wins []uint16
	temp uint32
}

// played is the competition every competition test shows, made once:
// three validators (the third lies) and two miners with made-up models;
// round 1 is final on the honest validators' wins, the liar faulted; the
// temperature is raised; round 2 is final; miner 0 claims.
var played struct {
	once    sync.Once
	k       *explorertest.Competition
	ballots []compBallot
	err     error
}

func playedCompetition(t *testing.T, n *programtest.Net) *explorertest.Competition {
	t.Helper()
	played.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		played.err = func() error {
			k, err := explorertest.NewCompetition(ctx, n, competition.CreateParams{
				Id: "comp-x", Architecture: 0, MaxParams: 1 << 20, TokenizerHash: competition.TokenizerHash("byte"), SeqLen: 32,
				DataRoot: sha256.Sum256([]byte("explorer data")), DataLocation: "file:///explorer-test-data", SequencesPerPage: 4,
				EpsilonStartPpm: 10_000, EpsilonEndPpm: 10_000, PagesPerRound: compPages, TemperaturePpm: compTemp, RoundSlots: 30,
				RewardPerRound: compReward, ValidatorStake: compStake, Quorum: 2,
			}, 1_000_000_000)
			if err != nil {
				return err
			}
			if err := k.JoinValidators(ctx, 3); err != nil {
				return err
			}
			if err := k.Commit(ctx, 2, 1000); err != nil {
				return err
			}
			b, err := k.OpenRound(ctx)
			if err != nil {
				return err
			}
			// The liar votes first: it is faulted when the round becomes final.
			if err := k.Vote(ctx, 2, b.Round.Number, [32]byte{0xba, 0xd}, []uint16{0, 0}); err != nil {
				return err
			}
			if err := playRoundOf(ctx, k, b.Round.Number, []uint16{3, 1}); err != nil {
				return err
			}
			played.ballots = append(played.ballots, compBallot{[]uint16{3, 1}, compTemp})
			temp := uint32(compTemp2)
			if err := k.Update(ctx, competition.UpdateParams{TemperaturePpm: &temp}); err != nil {
				return err
			}
			if b, err = k.OpenRound(ctx); err != nil {
				return err
			}
			if err := playRoundOf(ctx, k, b.Round.Number, []uint16{1, 4}); err != nil {
				return err
			}
			played.ballots = append(played.ballots, compBallot{[]uint16{1, 4}, compTemp2})
			played.k = k
			return k.Claim(ctx, 0)
		}()
	})
	if played.err != nil {
		t.Fatal(played.err)
	}
	return played.k
}

// playRoundOf has the two honest validators vote wins on round.
func playRoundOf(ctx context.Context, k *explorertest.Competition, round uint64, wins []uint16) error {
	table := sha256.Sum256(fmt.Appendf(nil, "round %d's losses", round))
	for v := range 2 {
		if err := k.Vote(ctx, v, round, table, wins); err != nil {
			return err
		}
	}
	return nil
}

// expected is what round b pays each entry: rules.Weights of its wins
// (both entries valid) at its temperature, rules.Payouts of the reward.
func expected(t *testing.T, b compBallot) ([]float64, []uint64) {
	t.Helper()
	var valid [32]byte
	for i := range b.wins {
		rules.SetBit(&valid, i)
	}
	w, err := rules.Weights(b.wins, valid, b.temp)
	if err != nil {
		t.Fatal(err)
	}
	fractions := make([]float64, len(w))
	for i, x := range w {
		fractions[i] = float64(x) / float64(rules.WeightOne)
	}
	return fractions, rules.Payouts(compReward, w)
}

// The API against a competition played on localnet: the list, the
// settings, pool and board (competition.Summary), each round's votes and
// their agreement, the wins, weights and payouts of the final rounds (as
// rules computes them, at the temperature of their time), the entries'
// earnings and claims, the faulted validator; 404s; and a round played
// while the stream is open arrives on it (polled for).
func TestExplorerCompetition(t *testing.T) {
	n := sharedNet(t)
	k := playedCompetition(t, n)
	start := time.Now()
	_, url, _ := startExplorer(t, n, nil, true)

	var list explorer.CompetitionList
	get(t, url+"/api/competitions", 200, &list)
	i := slices.IndexFunc(list.Competitions, func(c explorer.CompetitionRow) bool { return c.ID == "comp-x" })
	if i < 0 {
		t.Fatalf("competitions: %+v", list.Competitions)
	}
	if c := list.Competitions[i]; c.Address != k.K.Address.String() || c.Round != 2 || c.Phase != "final" || c.Entries != 2 || c.Validators != 2 ||
		c.PoolBalance == nil || *c.PoolBalance == 0 || c.LastActivity == nil || c.LastActivity.Time == 0 || c.ReadError != "" {
		t.Fatalf("comp-x in the list: %+v", c)
	}

	var d explorer.CompetitionDetail
	get(t, url+"/api/competitions/comp-x", 200, &d)
	if d.Summary == nil || d.ID != "comp-x" || d.Architecture != "gpt2" || d.PagesPerRound != compPages || d.Temperature != 2 || d.Quorum != 2 ||
		d.DataLocation != "file:///explorer-test-data" || d.Pool == nil || d.Pool.RewardPerRound != compReward || d.Pool.Forfeited != compStake {
		t.Fatalf("summary: %+v, pool %+v", d.Summary, d.Pool)
	}
	checkRounds(t, k, &d, 2)
	if len(d.Faults) != 1 || d.Faults[0].Validator != k.Validators[2].PublicKey().String() || d.Faults[0].Round != 1 ||
		d.Faults[0].Forfeited != compStake || d.Faults[0].Signature == "" {
		t.Fatalf("faults: %+v", d.Faults)
	}
	for i, v := range d.Validators {
		want, faults, stake := "active", uint32(0), uint64(compStake)
		if i == 2 {
			want, faults, stake = "faulted", 1, 0 // its stake forfeited
		}
		if v.Key != k.Validators[i].PublicKey().String() || v.Status != want || v.Faults != faults || v.Stake != stake {
			t.Errorf("validator %d: %+v", i, v)
		}
	}
	var names []string
	for _, e := range d.Events {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); strings.Count(got, "ValidatorJoined") != 3 || strings.Count(got, "SubmissionCommitted") != 2 ||
		!strings.Contains(got, "ValidatorFaulted") || !strings.Contains(got, "RewardsClaimed") {
		t.Errorf("events: %s", got)
	}

	// Unknown competitions: 404 with a message.
	for _, path := range []string{"/api/competitions/nope", "/api/competitions/nope/stream"} {
		if body := get(t, url+path, 404, nil); !strings.Contains(body, `"error":"no such competition \"nope\" on this cluster"`) {
			t.Errorf("GET %s: %s", path, body)
		}
	}
	if body := get(t, url+"/competitions/nope", 404, nil); !strings.Contains(body, `no such competition &#34;nope&#34; on this cluster`) {
		t.Errorf("GET /competitions/nope: %s", body)
	}
	for _, path := range []string{"/competitions", "/competitions/comp-x"} {
		if page := get(t, url+path, 200, nil); !strings.Contains(page, `<script src="/static/app.js"`) {
			t.Errorf("%s: %s", path, page)
		}
	}

	// A round played now arrives over the stream.
	stream := openStream(t, url+"/api/competitions/comp-x/stream")
	stream.until(t, 10*time.Second, &d, func() bool { return len(d.Rounds) == 2 })
	ctx := testCtx(t, time.Minute)
	b, err := k.OpenRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := playRoundOf(ctx, k, b.Round.Number, []uint16{2, 2}); err != nil {
		t.Fatal(err)
	}
	played.ballots = append(played.ballots, compBallot{[]uint16{2, 2}, compTemp2})
	stream.until(t, 20*time.Second, &d, func() bool { return len(d.Rounds) == 3 && d.Rounds[2].Outcome == "final" && d.Round.Phase == "final" })
	checkRounds(t, k, &d, 3)
	t.Logf("competition API checked in %v", time.Since(start))
}

// checkRounds checks the detail's rounds against the ballots played: each
// final, exact, the votes' agreement, wins, weights and payouts as rules
// has them, and the entries' earnings their sums.
func checkRounds(t *testing.T, k *explorertest.Competition, d *explorer.CompetitionDetail, rounds int) {
	t.Helper()
	if len(d.Rounds) != rounds || len(played.ballots) != rounds {
		t.Fatalf("%d rounds, want %d: %+v", len(d.Rounds), rounds, d.Rounds)
	}
	earned := make([]uint64, 2)
	for i, r := range d.Rounds {
		b := played.ballots[i]
		weights, payouts := expected(t, b)
		var sum uint64
		for j, p := range payouts {
			earned[j] += p
			sum += p
		}
		if r.Number != uint64(i+1) || r.Outcome != "final" || !r.Exact || r.Note != "" || r.Current != (i == rounds-1) || r.Opened == nil ||
			r.Finalized == nil || r.Seed == "" || r.EligibleCount != 2 || !slices.Equal(r.Eligible, []int{0, 1}) || r.Entries != 2 ||
			r.Paid != compReward || r.Credited != sum || r.TemperaturePPM != b.temp || !slices.Equal(r.Wins, b.wins) ||
			!slices.Equal(r.Weights, weights) || !slices.Equal(r.Payouts, payouts) {
			t.Fatalf("round %d: %+v; want wins %v weights %v payouts %v at temperature %d", i+1, r, b.wins, weights, payouts, b.temp)
		}
		voters := []int{0, 1}
		if i == 0 {
			voters = []int{2, 0, 1}
			if !slices.Equal(r.Faulted, []string{k.Validators[2].PublicKey().String()}) {
				t.Errorf("round 1 faulted %v", r.Faulted)
			}
		}
		if len(r.Votes) != len(voters) {
			t.Fatalf("round %d votes: %+v", i+1, r.Votes)
		}
		for j, v := range r.Votes {
			liar := voters[j] == 2
			if v.Validator != k.Validators[voters[j]].PublicKey().String() || v.Agrees == nil || *v.Agrees == liar ||
				(v.Digest == r.FinalDigest) == liar || v.Signature == "" {
				t.Errorf("round %d vote %d: %+v (final digest %s)", i+1, j, v, r.FinalDigest)
			}
		}
	}
	last := d.Rounds[rounds-1]
	for j, e := range d.Entries {
		if e.Miner != k.Miners[j].PublicKey().String() || e.Earned != earned[j] || e.Wins != last.Wins[j] || e.Weight != last.Weights[j] ||
			e.Repo != fmt.Sprintf("explorer-test/miner-%d", j) || e.Revision == "" || e.Excluded {
			t.Errorf("entry %d: %+v; earned by the rounds %d", j, e, earned[j])
		}
	}
	if len(d.Entries) != 2 || d.Entries[0].Claimed == 0 || d.Entries[0].Claimed > d.Entries[0].Earned || d.Entries[1].Claimed != 0 {
		t.Errorf("claims: %+v", d.Entries)
	}
}

// The competition in a real browser: the list, and the competition's page
// with its settings, entries, rounds table and the weight and payout
// curves, at desktop and phone width (nothing widens the page), with no
// error in the console.
func TestExplorerCompetitionInBrowser(t *testing.T) {
	path, err := explorertest.Chromium() // scripts/setup.sh installs it
	if err != nil {
		t.Fatal(err)
	}
	n := sharedNet(t)
	k := playedCompetition(t, n)
	_, url, _ := startExplorer(t, n, nil, true)
	b, err := explorertest.NewBrowser(testCtx(t, 2*time.Minute), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	artifacts := os.Getenv("PSYCHE_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := explorertest.Eval[any](b, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	const fits = `document.documentElement.scrollWidth <= window.innerWidth &&
		[...document.querySelectorAll('table')].every((t) => t.parentElement.classList.contains('table-wrap') &&
			t.parentElement.getBoundingClientRect().right <= window.innerWidth + 0.5)`
	rows := func(id string) float64 {
		return eval(`document.querySelectorAll('#` + id + ` tbody tr').length`).(float64)
	}
	miner := k.Miners[0].PublicKey().String()
	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		if err := b.Viewport(size.width, size.height, size.mobile); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Load(url+"/competitions", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := eval(`[...document.querySelectorAll('#competitions tbody tr')].some((tr) =>
			tr.cells[0].textContent === 'comp-x' && tr.cells[1].textContent === 'final' && tr.cells[3].textContent === '2')`); got != true {
			t.Fatalf("%s: the competitions table does not show comp-x: %v", size.name, eval(`document.getElementById('app').innerText`))
		}
		if eval(fits) != true {
			t.Errorf("%s: the competitions list overflows the window (scroll width %v)", size.name, eval(`document.documentElement.scrollWidth`))
		}

		if _, err := b.Load(url+"/competitions/comp-x", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if h1 := eval(`document.querySelector('h1').textContent`); h1 != "comp-x final" {
			t.Errorf("%s: heading %q", size.name, h1)
		}
		if got := eval(`[...document.querySelectorAll('.facts div')].find((d) => d.firstChild.textContent === 'Temperature').lastChild.textContent`); got != "2.000" {
			t.Errorf("%s: temperature %v", size.name, got)
		}
		if rows("entries") != 2 || rows("validators") != 3 || rows("faults") != 1 || rows("round-votes") != 2 || rows("competition-rounds") < 2 {
			t.Errorf("%s: rows: entries %v, validators %v, faults %v, votes %v, rounds %v", size.name, rows("entries"), rows("validators"),
				rows("faults"), rows("round-votes"), rows("competition-rounds"))
		}
		// The miner's key shortened, the full one in the title.
		if got := eval(`document.querySelector('#entries tbody tr').cells[1].textContent`); got != miner[:4]+"…"+miner[len(miner)-4:] {
			t.Errorf("%s: entry 0's miner shows as %v", size.name, got)
		}
		// Round 1 (the oldest row): entry 0's wins · weight · payout.
		weights, payouts := expected(t, compBallot{[]uint16{3, 1}, compTemp})
		want := fmt.Sprintf("3 · %.1f%% · %s", weights[0]*100, commas(payouts[0]))
		if got := eval(`[...document.querySelectorAll('#competition-rounds tbody tr')].at(-1).cells[7].textContent`); got != want {
			t.Errorf("%s: round 1, entry 0: %v, want %s", size.name, got, want)
		}
		for _, chart := range []string{"weight-chart", "payout-chart"} {
			if got := eval(`document.querySelectorAll('#` + chart + ` polyline').length`); got != 2.0 {
				t.Errorf("%s: %s has %v curves, want 2 (one per entry)", size.name, chart, got)
			}
			if got := eval(`document.querySelector('#` + chart + ` polyline').points.numberOfItems`).(float64); got < 2 {
				t.Errorf("%s: %s's curve has %v points", size.name, chart, got)
			}
			if w := eval(`document.getElementById('` + chart + `').getBoundingClientRect().width`).(float64); w > float64(size.width) || w < 300 {
				t.Errorf("%s: %s is %v px wide in a %d px window", size.name, chart, w, size.width)
			}
		}
		if eval(fits) != true {
			t.Errorf("%s: the competition page overflows the window (scroll width %v)", size.name, eval(`document.documentElement.scrollWidth`))
		}
		if errs := b.Errors(); len(errs) > 0 {
			t.Errorf("%s: the console has errors: %q", size.name, errs)
		}
		png, err := b.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(artifacts, "explorer-competition-"+size.name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

// commas writes v as the page does (en-US grouping).
func commas(v uint64) string {
	s := fmt.Sprint(v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
