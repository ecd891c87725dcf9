package explorer

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/rules"
)

// CompetitionList is GET /api/competitions: every competition of the
// Competition program, the most recently active first.
type CompetitionList struct {
	Source       string           `json:"source"`
	Error        string           `json:"error,omitempty"`
	ErrorSince   int64            `json:"error_since,omitempty"`
	Competitions []CompetitionRow `json:"competitions"`
}

// CompetitionRow is one competition in the list.
type CompetitionRow struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// Round is the board's round and Phase its state ("none", "seed
	// pending", "evaluating", "final", "expired"); "" until read.
	Round   uint64 `json:"round"`
	Phase   string `json:"phase"`
	Entries int    `json:"entries"`
	// Validators counts the active ones.
	Validators int `json:"validators"`
	// PoolBalance is the reward pool's tokens; null without a pool.
	PoolBalance  *uint64   `json:"pool_balance"`
	Paused       bool      `json:"paused"`
	Closed       bool      `json:"closed"`
	ReadError    string    `json:"read_error,omitempty"`
	LastActivity *Activity `json:"last_activity"`
}

// CompetitionDetail is GET /api/competitions/{id}: the competition as
// competition.Summary has it (settings, pool, the current round and its
// votes, entries, validators), and from its transactions the rounds, the
// faults and the other events.
type CompetitionDetail struct {
	Source     string `json:"source"`
	Error      string `json:"error,omitempty"`
	ErrorSince int64  `json:"error_since,omitempty"`
	*competition.Summary
	// ReadError is why the last read of the competition failed (the rest
	// is the last read).
	ReadError    string             `json:"read_error,omitempty"`
	LastActivity *Activity          `json:"last_activity"`
	Rounds       []CompetitionRound `json:"rounds"`
	Faults       []CompetitionFault `json:"faults"`
	Events       []EventView        `json:"events"`
}

// CompetitionRound is a round, from the transactions read (and the board,
// for the current one), oldest first.
type CompetitionRound struct {
	Number uint64 `json:"number"`
	// Outcome is "final" or "expired" once the round is decided; for the
	// current round its phase ("seed pending", "evaluating"); "unknown"
	// for an earlier round whose end the transactions read do not show.
	Outcome  string    `json:"outcome"`
	Current  bool      `json:"current"`
	Opened   *Activity `json:"opened"`
	OpenSlot uint64    `json:"open_slot"`
	// Entries is the board's entries when the round opened, and
	// EligibleCount how many of them it evaluates (RoundOpened); Eligible
	// lists them (see Exact).
	Entries       int               `json:"entries"`
	EligibleCount int               `json:"eligible_count"`
	Eligible      []int             `json:"eligible"`
	Seed          string            `json:"seed,omitempty"`
	SeedSlot      uint64            `json:"seed_slot,omitempty"`
	DeadlineSlot  uint64            `json:"deadline_slot,omitempty"`
	Votes         []CompetitionVote `json:"votes"`
	// A final round: its digest, when, the pot (Paid: min(reward per round,
	// the pool's unreserved tokens)) and what its entries were credited
	// (the pot less the rounding), and how many votes agreed.
	FinalDigest string    `json:"final_digest,omitempty"`
	Finalized   *Activity `json:"finalized,omitempty"`
	Paid        uint64    `json:"paid"`
	Credited    uint64    `json:"credited"`
	Agreeing    int       `json:"agreeing"`
	// A final round whose agreeing vote was read: the temperature it was
	// weighed at, and per entry (by index) the wins of the vote, the
	// weights (rules.Weights, as fractions of 1) and the payouts
	// (rules.Payouts of Paid). Null otherwise.
	TemperaturePPM uint32    `json:"temperature_ppm,omitempty"`
	Wins           []uint16  `json:"wins"`
	Weights        []float64 `json:"weights"`
	Payouts        []uint64  `json:"payouts"`
	// Exact: the eligible entries and the temperature are known for sure
	// and the payouts add up to Credited; else Note says what is not.
	Exact   bool     `json:"exact"`
	Note    string   `json:"note,omitempty"`
	Faulted []string `json:"faulted"`
}

// CompetitionVote is a validator's vote on a round: its digest
// (rules.VoteDigest of the ballot and the round's seed) and, once the
// round is final, whether it is the final digest.
type CompetitionVote struct {
	Activity
	Validator string   `json:"validator"`
	Digest    string   `json:"digest"`
	Agrees    *bool    `json:"agrees,omitempty"`
	TableHash string   `json:"table_hash,omitempty"`
	Wins      []uint16 `json:"wins,omitempty"`
	Invalid   []int    `json:"invalid,omitempty"`
}

// CompetitionFault is a ValidatorFaulted event: the validator voted
// another digest than the round's final one and forfeited its stake.
type CompetitionFault struct {
	Activity
	Round     uint64 `json:"round"`
	Validator string `json:"validator"`
	Forfeited uint64 `json:"forfeited"`
}

// CompetitionsJSON is the body of GET /api/competitions.
func (x *Indexer) CompetitionsJSON() []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.compList.body == nil || x.compList.version != x.version {
		out := CompetitionList{Source: x.source, Error: x.lastErr, ErrorSince: x.errSinceLocked(), Competitions: []CompetitionRow{}}
		for _, cd := range x.comps {
			out.Competitions = append(out.Competitions, cd.row())
		}
		slot := func(r CompetitionRow) uint64 {
			if r.LastActivity == nil {
				return 0
			}
			return r.LastActivity.Slot
		}
		slices.SortFunc(out.Competitions, func(a, b CompetitionRow) int {
			return cmp.Or(cmp.Compare(slot(b), slot(a)), cmp.Compare(a.ID, b.ID))
		})
		x.compList = cached{x.version, mustJSON(out)}
	}
	return x.compList.body
}

// CompetitionJSON is the body of GET /api/competitions/{id};
// errNoCompetition for one the cluster does not have.
func (x *Indexer) CompetitionJSON(id string) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	cd := x.comps[id]
	if cd == nil {
		return nil, fmt.Errorf("%w %q on this cluster", errNoCompetition, id)
	}
	if cd.view.body == nil || cd.view.version != x.version {
		d := cd.detail()
		d.Source, d.Error, d.ErrorSince = x.source, x.lastErr, x.errSinceLocked()
		cd.view = cached{x.version, mustJSON(d)}
	}
	return cd.view.body, nil
}

func (cd *compData) row() CompetitionRow {
	out := CompetitionRow{ID: cd.k.ID, Address: cd.k.Address.String(), ReadError: cd.readErr}
	if cd.last.Slot > 0 {
		last := cd.last
		out.LastActivity = &last
	}
	s := cd.summary
	if s == nil {
		return out
	}
	out.Round, out.Phase, out.Entries, out.Paused, out.Closed = s.Round.Number, s.Round.Phase, len(s.Entries), s.Paused, s.Closed
	for _, v := range s.Validators {
		if v.Status == "active" {
			out.Validators++
		}
	}
	if s.Pool != nil {
		balance := s.Pool.Balance
		out.PoolBalance = &balance
	}
	return out
}

func (cd *compData) detail() *CompetitionDetail {
	s := &competition.Summary{ID: cd.k.ID, Address: cd.k.Address.String(), Board: cd.k.Board.String()}
	if cd.summary != nil {
		c := *cd.summary
		s = &c
	}
	s.Entries, s.Validators = orEmpty(s.Entries), orEmpty(s.Validators)
	s.Round.Eligible, s.Round.Votes = orEmpty(s.Round.Eligible), orEmpty(s.Round.Votes)
	d := &CompetitionDetail{Summary: s, ReadError: cd.readErr, Rounds: cd.roundViews(),
		Faults: orEmpty(slices.Clone(cd.faults)), Events: orEmpty(slices.Clone(cd.events))}
	if cd.last.Slot > 0 {
		last := cd.last
		d.LastActivity = &last
	}
	return d
}

// roundViews rebuilds every round kept: its votes and their digests and,
// once final, the weights and payouts of the agreeing vote's wins.
func (cd *compData) roundViews() []CompetitionRound {
	s := cd.summary
	out := []CompetitionRound{}
	// excluded[i]: when (seq) a final round of those so far last found
	// entry i invalid, which excludes it until its next commit.
	excluded := map[int]uint64{}
	sawCurrent := false
	for _, r := range cd.rounds {
		cur := s != nil && s.Round.Number == r.number
		sawCurrent = sawCurrent || cur
		v := CompetitionRound{Number: r.number, Current: cur, Opened: r.opened, OpenSlot: r.openSlot, Entries: int(r.entries),
			EligibleCount: int(r.eligible), Votes: []CompetitionVote{}, Faulted: []string{}, Outcome: "unknown"}
		if r.seeded {
			v.Seed, v.SeedSlot, v.DeadlineSlot = hex.EncodeToString(r.seed[:]), r.seedSlot, r.deadline
		}
		switch {
		case r.final != nil:
			v.Outcome = competition.PhaseFinal.String()
		case r.expired != nil:
			v.Outcome = competition.PhaseExpired.String()
		case cur:
			v.Outcome = s.Round.Phase
		}
		if cur {
			v.OpenSlot = cmp.Or(v.OpenSlot, s.Round.OpenSlot)
			v.SeedSlot, v.DeadlineSlot, v.Seed = cmp.Or(v.SeedSlot, s.Round.SeedSlot), cmp.Or(v.DeadlineSlot, s.Round.Deadline), cmp.Or(v.Seed, s.Round.Seed)
		}
		for _, k := range r.faulted {
			v.Faulted = append(v.Faulted, k.String())
		}
		var agreeing *compVote
		for i := range r.votes {
			vote := &r.votes[i]
			digest, ok := r.digestOf(vote)
			vv := CompetitionVote{Activity: vote.at, Validator: vote.validator.String(), TableHash: hex.EncodeToString(vote.tableHash[:]),
				Wins: vote.wins, Invalid: bitList(vote.invalid, len(vote.wins))}
			if ok {
				vv.Digest = hex.EncodeToString(digest[:])
			}
			if r.final != nil {
				agrees := ok && digest == r.final.digest
				vv.Agrees = &agrees
				if agrees && agreeing == nil {
					agreeing = vote
				}
			}
			v.Votes = append(v.Votes, vv)
		}
		v.Entries = cmp.Or(v.Entries, len(firstWins(r.votes)))
		if r.final != nil {
			f := r.final
			v.FinalDigest, v.Finalized, v.Paid, v.Credited, v.Agreeing = hex.EncodeToString(f.digest[:]), &f.at, f.paid, f.credited, int(f.agreeing)
			if agreeing != nil {
				cd.weigh(&v, r, agreeing, excluded, cur)
				for _, i := range bitList(agreeing.invalid, len(agreeing.wins)) {
					excluded[i] = f.seq
				}
			} else {
				v.Note = "no vote with the final digest was read"
			}
		}
		if v.Eligible == nil {
			v.Eligible = []int{}
			if cur {
				v.Eligible = orEmpty(s.Round.Eligible)
			}
		}
		out = append(out, v)
	}
	if s != nil && s.Round.Number > 0 && !sawCurrent {
		// No transaction of the current round was read: the board's view.
		v := CompetitionRound{Number: s.Round.Number, Outcome: s.Round.Phase, Current: true, OpenSlot: s.Round.OpenSlot,
			EligibleCount: len(s.Round.Eligible), Eligible: orEmpty(s.Round.Eligible), Seed: s.Round.Seed, SeedSlot: s.Round.SeedSlot,
			DeadlineSlot: s.Round.Deadline, FinalDigest: s.Round.FinalDigest, Paid: s.Round.Paid, Votes: []CompetitionVote{}, Faulted: []string{},
			Note: "none of the round's transactions was read"}
		for _, vs := range s.Round.Votes {
			v.Votes = append(v.Votes, CompetitionVote{Validator: vs.Validator, Digest: vs.Digest, Agrees: vs.Agrees})
		}
		out = append(out, v)
	}
	return out
}

// digestOf is a vote's digest: rules.VoteDigest of its ballot with the
// round's seed, else (the seed was not read) the one VoteCast logged.
func (r *compRound) digestOf(v *compVote) ([32]byte, bool) {
	if r.seeded {
		return rules.VoteDigest(r.number, r.seed, v.tableHash, v.wins, v.invalid), true
	}
	if v.cast != nil {
		return *v.cast, true
	}
	return [32]byte{}, false
}

func firstWins(votes []compVote) []uint16 {
	if len(votes) == 0 {
		return nil
	}
	return votes[0].wins
}

// weigh fills in a final round's wins, weights and payouts from its
// agreeing vote: the weights of the wins among the valid entries
// (eligible, not invalid) at the temperature of the time, the payouts
// their shares of the pot.
func (cd *compData) weigh(v *CompetitionRound, r *compRound, vote *compVote, excluded map[int]uint64, cur bool) {
	eligible, exact, note := cd.eligibleOf(r, vote, excluded, cur)
	temp, known := cd.temperatureAt(r.final.seq)
	if !known {
		exact, note = false, cmp.Or(note, "the temperature at the round's end is not in the transactions read: the current one is used")
	}
	if temp == 0 {
		v.Note = cmp.Or(note, "the competition was not read yet")
		return
	}
	var valid [32]byte
	for i := range 32 {
		valid[i] = eligible[i] &^ vote.invalid[i]
	}
	weights, err := rules.Weights(vote.wins, valid, temp)
	if err != nil {
		v.Note = err.Error()
		return
	}
	payouts := rules.Payouts(r.final.paid, weights)
	var sum uint64
	for _, p := range payouts {
		sum += p
	}
	if sum != r.final.credited {
		exact, note = false, cmp.Or(note, fmt.Sprintf("the payouts add up to %d, the program credited %d", sum, r.final.credited))
	}
	v.TemperaturePPM, v.Wins, v.Payouts, v.Exact, v.Note = temp, vote.wins, payouts, exact, note
	v.Eligible = bitList(eligible, len(vote.wins))
	v.Weights = make([]float64, len(weights))
	for i, w := range weights {
		v.Weights[i] = float64(w) / float64(rules.WeightOne)
	}
}

// eligibleOf is the entries round r evaluated: the board's list for the
// current round; else rebuilt from the history read: every entry the round
// opened with, but those a final round found invalid and not committed
// again since (and at least those the agreeing vote gives wins or finds
// invalid). Exact when that many are what RoundOpened counted.
func (cd *compData) eligibleOf(r *compRound, vote *compVote, excluded map[int]uint64, cur bool) ([32]byte, bool, string) {
	var out [32]byte
	if cur && cd.summary != nil {
		for _, i := range cd.summary.Round.Eligible {
			rules.SetBit(&out, i)
		}
		return out, true, ""
	}
	for i, w := range vote.wins {
		if w > 0 || rules.Bit(vote.invalid, i) {
			rules.SetBit(&out, i)
		}
	}
	if r.opened == nil {
		return out, false, "the round's opening was not read: the eligible entries are taken to be those the final vote gives wins or finds invalid"
	}
	for i := range int(r.entries) {
		if at, ok := excluded[i]; !ok || cd.lastCommitBefore(uint16(i), r.openSeq) > at {
			rules.SetBit(&out, i)
		}
	}
	if n := len(bitList(out, rules.MaxEntries)); n != int(r.eligible) {
		return out, false, fmt.Sprintf("%d eligible entries rebuilt from the transactions read, the round opened with %d", n, r.eligible)
	}
	return out, true, ""
}

// lastCommitBefore is when (seq) entry i last committed before seq; 0 if
// not in the history read.
func (cd *compData) lastCommitBefore(i uint16, seq uint64) uint64 {
	c := cd.commits[i]
	j := sort.Search(len(c), func(j int) bool { return c[j] >= seq })
	if j == 0 {
		return 0
	}
	return c[j-1]
}

// temperatureAt is the competition's temperature (ppm) at seq: as set by
// the last competition_create or competition_update read before it; with
// none read before, the current one, known for sure if none was read after
// either.
func (cd *compData) temperatureAt(seq uint64) (uint32, bool) {
	var set *tempChange
	for i := range cd.temps {
		if cd.temps[i].seq < seq {
			set = &cd.temps[i]
		}
	}
	if set != nil {
		return set.ppm, true
	}
	if cd.summary == nil {
		return 0, false
	}
	return uint32(math.Round(cd.summary.Temperature * 1e6)), len(cd.temps) == 0
}

// bitList lists the bits set among the first n of bitmap.
func bitList(bitmap [32]byte, n int) []int {
	out := []int{}
	for i := range min(n, rules.MaxEntries) {
		if rules.Bit(bitmap, i) {
			out = append(out, i)
		}
	}
	return out
}
