package explorer

import (
	"slices"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	cbindings "github.com/psyche-go/psyche/clients/bindings/competition"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/rules"
)

// compHistory feeds a compData instructions and events as the indexer
// reads them from transactions, in order.
type compHistory struct {
	t    *testing.T
	cd   *compData
	slot uint64
	seed map[uint64][32]byte
}

func newCompHistory(t *testing.T) *compHistory {
	return &compHistory{t: t, cd: &compData{k: competition.Competition{ID: "unit", Address: solana.NewWallet().PublicKey()},
		commits: map[uint16][]uint64{}}, seed: map[uint64][32]byte{}}
}

func (h *compHistory) at() Activity { h.slot++; return Activity{Slot: h.slot, Signature: "sig"} }

func (h *compHistory) ix(disc [8]byte, params interface{ Marshal() ([]byte, error) }) {
	h.t.Helper()
	data, err := params.Marshal()
	if err != nil {
		h.t.Fatal(err)
	}
	h.cd.instruction(append(disc[:], data...), solana.NewWallet().PublicKey(), h.at())
}

func (h *compHistory) create(temp uint32) {
	h.ix(cbindings.Instruction_CompetitionCreate, cbindings.CompetitionCreateParams{Id: "unit", TemperaturePpm: temp, DataLocation: "x"})
}

func (h *compHistory) setTemperature(temp uint32) {
	h.ix(cbindings.Instruction_CompetitionUpdate, cbindings.CompetitionUpdateParams{TemperaturePpm: &temp})
}

func (h *compHistory) commit(entry uint16) {
	h.cd.addEvent(&cbindings.SubmissionCommitted{Index: entry}, h.at())
}

func (h *compHistory) open(round uint64, entries, eligible uint16) {
	h.cd.addEvent(&cbindings.RoundOpened{Round: round, Entries: entries, Eligible: eligible, OpenSlot: h.slot}, h.at())
	seed := [32]byte{byte(round)}
	h.seed[round] = seed
	h.cd.addEvent(&cbindings.RoundSeeded{Round: round, Seed: seed}, h.at())
}

// final has two validators vote wins and invalid (the entries listed),
// and the round pay out paid by the weights of valid at temp.
func (h *compHistory) final(round uint64, wins []uint16, invalid []int, valid []int, temp uint32, paid uint64) ([]uint32, []uint64) {
	h.t.Helper()
	var inv, val [32]byte
	for _, i := range invalid {
		rules.SetBit(&inv, i)
	}
	for _, i := range valid {
		rules.SetBit(&val, i)
	}
	table := [32]byte{0xab, byte(round)}
	for range 2 {
		h.ix(cbindings.Instruction_RoundVote, cbindings.RoundVoteParams{Round: round, TableHash: table, Wins: wins, Invalid: inv})
	}
	w, err := rules.Weights(wins, val, temp)
	if err != nil {
		h.t.Fatal(err)
	}
	payouts := rules.Payouts(paid, w)
	var credited uint64
	for _, p := range payouts {
		credited += p
	}
	digest := rules.VoteDigest(round, h.seed[round], table, wins, inv)
	h.cd.addEvent(&cbindings.RoundFinalized{Round: round, Digest: digest, Paid: paid, Credited: credited, Agreeing: 2}, h.at())
	return w, payouts
}

func checkRound(t *testing.T, v CompetitionRound, eligible []int, temp uint32, w []uint32, payouts []uint64, exact bool, note string) {
	t.Helper()
	fractions := make([]float64, len(w))
	for i, x := range w {
		fractions[i] = float64(x) / float64(rules.WeightOne)
	}
	if v.Outcome != "final" || !slices.Equal(v.Eligible, eligible) || v.TemperaturePPM != temp || !slices.Equal(v.Weights, fractions) ||
		!slices.Equal(v.Payouts, payouts) || v.Exact != exact || !strings.Contains(v.Note, note) || (exact && v.Note != "") {
		t.Errorf("round %d: %+v\nwant eligible %v, temperature %d, weights %v, payouts %v, exact %v, note %q", v.Number, v, eligible, temp, fractions, payouts, exact, note)
	}
	for _, vote := range v.Votes {
		if vote.Agrees == nil || !*vote.Agrees || vote.Digest != v.FinalDigest {
			t.Errorf("round %d: vote %+v does not agree with %s", v.Number, vote, v.FinalDigest)
		}
	}
}

// Rounds rebuilt from a competition's whole history: an entry found
// invalid is excluded from the next round (0 weight, not merely 0 wins)
// until its miner commits again, and each round is weighed at the
// temperature of its time.
func TestCompetitionRoundHistory(t *testing.T) {
	h := newCompHistory(t)
	h.create(1_000_000)
	for e := range uint16(3) {
		h.commit(e)
	}
	h.open(1, 3, 3)
	w1, p1 := h.final(1, []uint16{2, 0, 0}, []int{2}, []int{0, 1}, 1_000_000, 900)
	h.open(2, 3, 2) // entry 2 excluded
	w2, p2 := h.final(2, []uint16{1, 1, 0}, nil, []int{0, 1}, 1_000_000, 900)
	h.commit(2) // back in
	h.setTemperature(3_000_000)
	h.open(3, 3, 3)
	w3, p3 := h.final(3, []uint16{0, 2, 4}, nil, []int{0, 1, 2}, 3_000_000, 1000)
	h.cd.summary = &competition.Summary{Temperature: 3, Round: competition.RoundSummary{Number: 4, Phase: "seed pending", Eligible: []int{0, 1, 2}}}

	rounds := h.cd.roundViews()
	if len(rounds) != 4 {
		t.Fatalf("%d rounds: %+v", len(rounds), rounds)
	}
	checkRound(t, rounds[0], []int{0, 1, 2}, 1_000_000, w1, p1, true, "")
	checkRound(t, rounds[1], []int{0, 1}, 1_000_000, w2, p2, true, "")
	checkRound(t, rounds[2], []int{0, 1, 2}, 3_000_000, w3, p3, true, "")
	if w2[2] != 0 || w3[0] == 0 {
		t.Errorf("weights: round 2 %v (the excluded entry must have none), round 3 %v (a valid entry without wins has some)", w2, w3)
	}
	if r := rounds[3]; r.Number != 4 || !r.Current || r.Outcome != "seed pending" || r.Weights != nil || !slices.Equal(r.Eligible, []int{0, 1, 2}) {
		t.Errorf("the current round: %+v", r)
	}
}

// A history read from its middle: without competition_create, a round
// before a temperature change is weighed at the current temperature and
// said not to be exact; so is a round whose eligible entries cannot be
// told (an exclusion before the history read).
func TestCompetitionRoundHistoryPartial(t *testing.T) {
	h := newCompHistory(t)
	h.open(7, 2, 2)
	h.final(7, []uint16{4, 0}, nil, []int{0, 1}, 2_000_000, 500) // in fact at 2.0
	h.setTemperature(5_000_000)
	h.open(8, 3, 2) // entry 2 was excluded before the history read
	h.final(8, []uint16{1, 3, 0}, nil, []int{0, 1}, 5_000_000, 500)
	h.cd.summary = &competition.Summary{Temperature: 5, Round: competition.RoundSummary{Number: 9, Phase: "evaluating", Eligible: []int{0, 1}}}

	rounds := h.cd.roundViews()
	var all [32]byte
	rules.SetBit(&all, 0)
	rules.SetBit(&all, 1)
	w7now, err := rules.Weights([]uint16{4, 0}, all, 5_000_000)
	if err != nil {
		t.Fatal(err)
	}
	checkRound(t, rounds[0], []int{0, 1}, 5_000_000, w7now, rules.Payouts(500, w7now), false, "the temperature at the round's end is not in the transactions read")
	rules.SetBit(&all, 2)
	w8all, err := rules.Weights([]uint16{1, 3, 0}, all, 5_000_000)
	if err != nil {
		t.Fatal(err)
	}
	checkRound(t, rounds[1], []int{0, 1, 2}, 5_000_000, w8all, rules.Payouts(500, w8all), false, "3 eligible entries rebuilt from the transactions read, the round opened with 2")
}
