package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// chainWatch follows a run's Coordinator account (-rpc): the commitments
// and verdicts of every round it sees (the account stores the last 4, so
// it must be read at least once every 4 rounds), every dispute by id, and
// the slots of the named clients. It says what it sees as it happens
// (disputes opened and settled, faults) and sums it up at the end.
type chainWatch struct {
	run      coordinator.Run
	c        *chain.Client
	names    map[solana.PublicKey]string
	out      io.Writer
	latest   *coordinator.State
	rounds   map[uint32]*seenRound // by step
	disputes map[uint64]coordinator.Dispute
	parties  map[uint64][2]solana.PublicKey // dispute id -> trainer, accuser
	faulted  map[solana.PublicKey]bool
}

// seenRound is a round as last read: its members' signers in index order
// (learned while it was the current round, or later while the chain still
// tells them) and their commitments.
type seenRound struct {
	signers []solana.PublicKey
	round   coordinator.Round
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
	return &chainWatch{run: run, c: c, names: names, out: out, rounds: map[uint32]*seenRound{},
		disputes: map[uint64]coordinator.Dispute{}, parties: map[uint64][2]solana.PublicKey{}, faulted: map[solana.PublicKey]bool{}}, nil
}

// poll reads the run once and records what changed.
func (w *chainWatch) poll(ctx context.Context) error {
	s, err := w.run.FetchState(ctx, w.c)
	if err != nil {
		return err
	}
	w.latest = s
	w.record(s)
	return nil
}

func (w *chainWatch) record(s *coordinator.State) {
	cur := coordinator.CurrentRound(s)
	for _, r := range coordinator.StoredRoundsOf(s) {
		seen := w.rounds[r.Step]
		if seen == nil || seen.round.Height != r.Height || seen.round.Seed != r.Seed {
			seen = &seenRound{}
			w.rounds[r.Step] = seen
		}
		seen.round = *r
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
	for _, d := range s.Disputes {
		if d.State == coordinator.DisputeFree {
			continue
		}
		before, known := w.disputes[d.Id]
		w.disputes[d.Id] = d
		if !known {
			w.parties[d.Id] = [2]solana.PublicKey{coordinator.SlotSigner(s, d.TrainerSlot), coordinator.SlotSigner(s, d.AccuserSlot)}
			fmt.Fprintf(w.out, "[verify] dispute %d opened: %s accuses %s of step %d (%s); committee %s\n", d.Id,
				w.name(w.parties[d.Id][1]), w.name(w.parties[d.Id][0]), d.Step, coordinator.VerdictName(d.Kind), w.committee(s, &d))
		}
		if d.State != coordinator.DisputeOpen && (!known || before.State == coordinator.DisputeOpen) {
			fmt.Fprintf(w.out, "[verify] dispute %d settled: %s (%s)\n", d.Id, strings.ToUpper(coordinator.DisputeStateName(d.State)), w.outcome(d.Id, d.State))
		}
	}
	for _, cl := range s.Clients {
		if cl.Occupied != 0 && cl.HasFault != 0 && !w.faulted[cl.Signer] {
			w.faulted[cl.Signer] = true
			fmt.Fprintf(w.out, "[verify] %s found at fault: slashed %d, %d points burned\n", w.name(cl.Signer), cl.Slashed, cl.Burned)
		}
	}
}

// outcome says what a settled dispute's outcome means for its parties
// (programs/coordinator/README.md, "Outcomes").
func (w *chainWatch) outcome(id uint64, state uint8) string {
	trainer, accuser := w.name(w.parties[id][0]), w.name(w.parties[id][1])
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

func (w *chainWatch) contributions(seen *seenRound) map[solana.PublicKey]contribution {
	r := &seen.round
	seeded := r.VerifySeed != [32]byte{}
	out := map[solana.PublicKey]contribution{}
	for i, signer := range seen.signers {
		if i >= len(r.Commits) {
			break
		}
		cm := r.Commits[i]
		c := contribution{committed: cm.Flags&coordinator.CommitCommitted != 0, probation: cm.Flags&coordinator.CommitProbation != 0, verdict: cm.Verdict}
		if seeded && c.committed && w.latest != nil {
			c.mustVerify = schedule.MustVerify(w.latest.Config.VerificationPercent, schedule.Seed(r.VerifySeed), uint16(i), c.probation)
			if v, ok := schedule.Verifier(schedule.Seed(r.VerifySeed), uint16(i), r.ClientsLen); ok && int(v) < len(seen.signers) {
				c.verifier, c.hasVerifier = seen.signers[v], true
			}
		}
		out[signer] = c
	}
	return out
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
	c, ok := w.contributions(seen)[signer]
	if !ok || !c.committed {
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
		for id, p := range w.parties {
			if p[0] == signer && w.disputes[id].Step == uint32(step) {
				d = fmt.Sprintf(", dispute %d", id)
			}
		}
		return fmt.Sprintf("  <<< %s%s%s%s: left out", coordinator.VerdictName(c.verdict), by, probation, d)
	case c.mustVerify && w.ended(uint32(step)):
		return "  UNJUDGED (no verdict" + by + probation + "): left out"
	case c.mustVerify:
		return "  to verify" + by + probation
	case seen.round.VerifySeed != [32]byte{}:
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
	var rounds, committed, toVerify, probation, unjudged, pending int
	verdicts := map[uint8]int{}
	for step, seen := range w.rounds {
		hasCommit := false
		for _, c := range w.contributions(seen) {
			if !c.committed {
				continue
			}
			committed++
			hasCommit = true
			if !c.mustVerify {
				continue
			}
			toVerify++
			if c.probation {
				probation++
			}
			switch {
			case c.verdict != coordinator.VerdictNone:
				verdicts[c.verdict]++
			case w.ended(step):
				unjudged++
			default:
				pending++
			}
		}
		if hasCommit {
			rounds++
		}
	}
	fmt.Fprintf(out, "contributions  %d committed in %d rounds; %d to verify (%d on probation): %d MATCH, %d MISMATCH, %d NO_DATA, %d unjudged",
		committed, rounds, toVerify, probation, verdicts[coordinator.VerdictMatch], verdicts[coordinator.VerdictMismatch], verdicts[coordinator.VerdictNoData], unjudged)
	if pending > 0 {
		fmt.Fprintf(out, ", %d still in their round", pending)
	}
	fmt.Fprintln(out)
	outcomes := map[uint8]int{}
	for _, d := range w.disputes {
		outcomes[d.State]++
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
