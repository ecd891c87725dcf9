package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// keptRounds is how many recent rounds chainWatch keeps in full, for the
// step lines; older ones are only counted.
const keptRounds = 256

// chainWatch follows a run's Coordinator account (-rpc): the commitments
// and verdicts of every round it sees (the account stores the last 4, so
// it must be read at least once every 4 rounds), every dispute by id, and
// the members at fault. It says what it sees as it happens (disputes
// opened and settled, faults) and sums it up at the end.
type chainWatch struct {
	run      coordinator.Run
	c        *chain.Client
	names    map[solana.PublicKey]string
	out      io.Writer
	latest   *coordinator.State
	rounds   map[uint32]*seenRound // the recent ones, by step
	counted  tally                 // the older ones
	disputes map[uint64]seenDispute
	faulted  map[solana.PublicKey]bool
}

// seenRound is a round as last read: its members' signers in index order
// (learned while it was the current round, or later while the chain still
// tells them), its seeds and its members' commitment flags and verdicts.
type seenRound struct {
	height     uint32
	seed       [32]byte
	verifySeed [32]byte
	signers    []solana.PublicKey
	commits    []seenCommit
}

type seenCommit struct{ flags, verdict uint8 }

// seenDispute is a dispute's parties and its state as last read.
type seenDispute struct {
	step             uint32
	state            uint8
	trainer, accuser solana.PublicKey
}

// tally counts contributions: committed, to verify (on probation), by
// verdict, and unjudged once their round ended (pending before).
type tally struct {
	rounds, committed, toVerify, probation, unjudged, pending int
	verdicts                                                  [4]int // by verdict
}

func newChainWatch(ctx context.Context, rpcURL, runID string, names map[solana.PublicKey]string, out io.Writer) (*chainWatch, error) {
	c, err := chain.New(rpcURL, "")
	if err != nil {
		return nil, err
	}
	run, _, err := coordinator.Default().Open(ctx, c, runID)
	if err != nil {
		return nil, err
	}
	w := newWatch(names, out)
	w.run, w.c = run, c
	return w, nil
}

func newWatch(names map[solana.PublicKey]string, out io.Writer) *chainWatch {
	return &chainWatch{names: names, out: out, rounds: map[uint32]*seenRound{}, disputes: map[uint64]seenDispute{}, faulted: map[solana.PublicKey]bool{}}
}

// poll reads the run once and records what changed.
func (w *chainWatch) poll(ctx context.Context) error {
	s, err := w.run.FetchState(ctx, w.c)
	if err != nil {
		return err
	}
	w.record(s)
	return nil
}

// record takes in a newly read state.
func (w *chainWatch) record(s *coordinator.State) {
	w.latest = s
	cur := coordinator.CurrentRound(s)
	for _, r := range coordinator.StoredRoundsOf(s) {
		seen := w.rounds[r.Step]
		if seen == nil || seen.height != r.Height || seen.seed != r.Seed {
			seen = &seenRound{height: r.Height, seed: r.Seed}
			w.rounds[r.Step] = seen
		}
		seen.verifySeed = r.VerifySeed
		seen.commits = seen.commits[:0]
		for _, cm := range r.Commits[:min(int(r.ClientsLen), len(r.Commits))] {
			seen.commits = append(seen.commits, seenCommit{flags: cm.Flags, verdict: cm.Verdict})
		}
		if seen.signers == nil {
			if members := coordinator.Members(s); r == cur && int(r.ClientsLen) <= len(members) {
				for _, m := range members[:r.ClientsLen] {
					seen.signers = append(seen.signers, m.Signer)
				}
			} else if signers, ok := coordinator.RoundSigners(s, r); ok {
				seen.signers = signers
			}
		}
	}
	w.countOld(cur.Step)
	for _, d := range s.Disputes {
		if d.State == coordinator.DisputeFree {
			continue
		}
		seen, known := w.disputes[d.Id]
		if !known {
			seen = seenDispute{step: d.Step, state: coordinator.DisputeOpen,
				trainer: coordinator.SlotSigner(s, d.TrainerSlot), accuser: coordinator.SlotSigner(s, d.AccuserSlot)}
			fmt.Fprintf(w.out, "[verify] dispute %d opened: %s accuses %s of step %d (%s); committee %s\n", d.Id,
				w.name(seen.accuser), w.name(seen.trainer), d.Step, coordinator.VerdictName(d.Kind), w.committee(s, &d))
		}
		if d.State != coordinator.DisputeOpen && seen.state == coordinator.DisputeOpen {
			fmt.Fprintf(w.out, "[verify] dispute %d settled: %s (%s)\n", d.Id, strings.ToUpper(coordinator.DisputeStateName(d.State)), seen.outcome(d.State, w.name))
		}
		seen.state = d.State
		w.disputes[d.Id] = seen
	}
	for _, cl := range s.Clients {
		if cl.Occupied != 0 && cl.HasFault != 0 && !w.faulted[cl.Signer] {
			w.faulted[cl.Signer] = true
			fmt.Fprintf(w.out, "[verify] %s found at fault: slashed %d, %d points burned\n", w.name(cl.Signer), cl.Slashed, cl.Burned)
		}
	}
}

// countOld moves the rounds more than keptRounds before step into the
// counts.
func (w *chainWatch) countOld(step uint32) {
	for s, seen := range w.rounds {
		if s+keptRounds < step {
			w.count(&w.counted, s, seen)
			delete(w.rounds, s)
		}
	}
}

// outcome says what a dispute's settled state means for its parties
// (programs/coordinator/README.md, "Outcomes").
func (d seenDispute) outcome(state uint8, name func(solana.PublicKey) string) string {
	trainer, accuser := name(d.trainer), name(d.accuser)
	switch state {
	case coordinator.DisputeTrainerFault:
		return trainer + " at fault"
	case coordinator.DisputeAccuserFault:
		return accuser + " at fault"
	case coordinator.DisputeTransient:
		return "the committee fetched " + trainer + "'s rerun and it gave " + accuser + "'s bits: nondeterminism, forgiven forgive_per_epoch times an epoch"
	case coordinator.DisputeRefuted:
		return "the committee got the data " + accuser + " said was withheld: forgiven forgive_per_epoch times an epoch"
	case coordinator.DisputeUnresolved:
		return "nobody penalized"
	}
	return "unknown outcome"
}

func (w *chainWatch) committee(s *coordinator.State, d *coordinator.Dispute) string {
	var names []string
	for _, slot := range d.Committee[:min(int(d.CommitteeLen), len(d.Committee))] {
		names = append(names, w.name(coordinator.SlotSigner(s, slot)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// name is a client's name on the command line, else its key.
func (w *chainWatch) name(k solana.PublicKey) string {
	if n, ok := w.names[k]; ok {
		return n
	}
	return k.String()
}

// contribution is what became of one member's commitment in a round.
type contribution struct {
	committed, mustVerify, probation bool
	verdict                          uint8
	verifier                         solana.PublicKey
	hasVerifier                      bool
}

// contributions are the round's, by member index.
func (w *chainWatch) contributions(seen *seenRound) []contribution {
	seeded := seen.verifySeed != [32]byte{}
	seed, n := schedule.Seed(seen.verifySeed), uint16(len(seen.commits))
	out := make([]contribution, len(seen.commits))
	for i, cm := range seen.commits {
		c := contribution{committed: cm.flags&coordinator.CommitCommitted != 0, probation: cm.flags&coordinator.CommitProbation != 0, verdict: cm.verdict}
		if seeded && c.committed && w.latest != nil {
			c.mustVerify = schedule.MustVerify(w.latest.Config.VerificationPercent, seed, uint16(i), c.probation)
			if v, ok := schedule.Verifier(seed, uint16(i), n); ok && int(v) < len(seen.signers) {
				c.verifier, c.hasVerifier = seen.signers[v], true
			}
		}
		out[i] = c
	}
	return out
}

// count adds a round's contributions to t.
func (w *chainWatch) count(t *tally, step uint32, seen *seenRound) {
	hasCommit := false
	for _, c := range w.contributions(seen) {
		if !c.committed {
			continue
		}
		t.committed++
		hasCommit = true
		if !c.mustVerify {
			continue
		}
		t.toVerify++
		if c.probation {
			t.probation++
		}
		switch {
		case c.verdict != coordinator.VerdictNone:
			t.verdicts[c.verdict%4]++
		case w.ended(step):
			t.unjudged++
		default:
			t.pending++
		}
	}
	if hasCommit {
		t.rounds++
	}
}

// ended says whether the round of step can take no more verdicts.
func (w *chainWatch) ended(step uint32) bool {
	if w.latest == nil {
		return false
	}
	ph := coordinator.Phase(w.latest)
	return coordinator.CurrentRound(w.latest).Step != step || (ph != coordinator.RoundTrain && ph != coordinator.RoundWitness)
}

// note describes the chain's verdict on signer's contribution to step, for
// its step line: empty when the chain holds none (a round not seen, or no
// commitment).
func (w *chainWatch) note(signer solana.PublicKey, step uint64) string {
	seen := w.rounds[uint32(step)]
	if seen == nil {
		return ""
	}
	i := slices.Index(seen.signers, signer)
	if i < 0 || i >= len(seen.commits) {
		return ""
	}
	c := w.contributions(seen)[i]
	if !c.committed {
		return ""
	}
	probation := ""
	if c.probation {
		probation = ", probation"
	}
	by := ""
	if c.hasVerifier {
		by = " by " + w.name(c.verifier)
	}
	switch {
	case c.verdict == coordinator.VerdictMatch:
		return "  verified MATCH" + by + probation
	case c.verdict != coordinator.VerdictNone:
		d := ""
		for id, seen := range w.disputes {
			if seen.trainer == signer && seen.step == uint32(step) {
				d = fmt.Sprintf(", dispute %d", id)
			}
		}
		return fmt.Sprintf("  <<< %s%s%s%s: left out", coordinator.VerdictName(c.verdict), by, probation, d)
	case c.mustVerify && w.ended(uint32(step)):
		return "  UNJUDGED (no verdict" + by + probation + "): left out"
	case c.mustVerify:
		return "  to verify" + by + probation
	case seen.verifySeed != [32]byte{}:
		return "  not sampled"
	}
	return ""
}

// summary sums up the run's verification as the chain holds it.
func (w *chainWatch) summary(out io.Writer) {
	s := w.latest
	if s == nil {
		fmt.Fprintln(out, "verification: the run's account was never read")
		return
	}
	if s.Config.VerificationPercent == 0 {
		fmt.Fprintln(out, "verification   off (verification_percent = 0)")
		return
	}
	fmt.Fprintf(out, "verification   %d%% of contributions sampled, all of a member's in its first epoch and after a fault\n", s.Config.VerificationPercent)
	t := w.counted
	for step, seen := range w.rounds {
		w.count(&t, step, seen)
	}
	fmt.Fprintf(out, "contributions  %d committed in %d rounds; %d to verify (%d on probation): %d MATCH, %d MISMATCH, %d NO_DATA, %d unjudged",
		t.committed, t.rounds, t.toVerify, t.probation, t.verdicts[coordinator.VerdictMatch], t.verdicts[coordinator.VerdictMismatch], t.verdicts[coordinator.VerdictNoData], t.unjudged)
	if t.pending > 0 {
		fmt.Fprintf(out, ", %d still in their round", t.pending)
	}
	fmt.Fprintln(out)
	outcomes := map[uint8]int{}
	for _, d := range w.disputes {
		outcomes[d.state]++
	}
	fmt.Fprintf(out, "disputes       %d opened: %d TRAINER_FAULT, %d ACCUSER_FAULT, %d TRANSIENT, %d UNRESOLVED, %d REFUTED, %d open\n",
		s.DisputesOpened, outcomes[coordinator.DisputeTrainerFault], outcomes[coordinator.DisputeAccuserFault], outcomes[coordinator.DisputeTransient],
		outcomes[coordinator.DisputeUnresolved], outcomes[coordinator.DisputeRefuted], outcomes[coordinator.DisputeOpen])
	var faults []string
	var burned, slashed uint64
	for _, cl := range s.Clients {
		if cl.Occupied == 0 {
			continue
		}
		burned += cl.Burned
		slashed += cl.Slashed
		if cl.HasFault != 0 {
			faults = append(faults, fmt.Sprintf("%s (slashed %d, %d points burned)", w.name(cl.Signer), cl.Slashed, cl.Burned))
		}
	}
	if len(faults) == 0 {
		faults = []string{"none"}
	}
	fmt.Fprintf(out, "faults         %s\n", strings.Join(faults, "; "))
	fmt.Fprintf(out, "points         %d burned, %d slashed in all\n", burned, slashed)
}
