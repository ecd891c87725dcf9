package client

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// verifySimConfig is simConfig verifying percent of the contributions, with
// batches of 8 (so 5 members fit an epoch), epochs of about 5 rounds, and
// a witness window that holds the replays.
func verifySimConfig(percent, steps int) string {
	r := strings.NewReplacer(
		"total_steps = 18", fmt.Sprintf("total_steps = %d", steps),
		"epoch_time = 6", "epoch_time = 15",
		// The verdicts are posted in RoundWitness: at least 2 s of it.
		"round_witness_time = 1", "round_witness_time = 3",
		"global_batch_size_start = 4", "global_batch_size_start = 8",
		"global_batch_size_end = 4", "global_batch_size_end = 8",
		"global_batch_size_warmup_tokens = 0", fmt.Sprintf("global_batch_size_warmup_tokens = 0\nverification_percent = %d\nforgive_per_epoch = 1\nvesting_epochs = 1", percent),
	)
	return r.Replace(simConfig)
}

// detectionBound is how many cheating rounds a lone cheater survives with
// probability at most delta when each round's contribution is sampled with
// probability p and every verifier is honest: (1-p)^R <= delta.
func detectionBound(p, delta float64) int {
	return int(math.Ceil(math.Log(delta) / math.Log(1-p)))
}

// A cheater that trains on other sequences whenever it is off probation,
// among 4 honest members, at verification_percent 25, over 1,000 rounds. Every spell of cheating is caught (a
// MISMATCH verdict) within the bound for delta = 1e-6 (49 rounds), its
// updates are never applied (the honest replicas agree at every step),
// every dispute finds the cheater at fault, and no honest member ever is.
func TestSimVerificationCatchesCheater(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-threaded simulation, about 10x slower under the race detector: scripts/test.sh runs it without")
	}
	const rounds = 1000
	r := newSimRunWith(t, 11, verifySimConfig(25, rounds))
	for _, name := range []string{"a", "b", "c", "d"} {
		r.add(name, true)
	}
	cheater := r.add("cheater", false)
	me := cheater.wallet.PublicKey()

	// The cheat is switched on while the cheater is off probation and off
	// after it was caught; the test counts the rounds of each spell through
	// the instructions it sends.
	var spells []int // rounds cheated until caught, per finished spell
	cheated := 0     // rounds cheated in the current spell
	commits := map[[2]uint32]bool{}
	r.onSubmit = func(sc *simClient, o op) {
		switch {
		case sc == cheater && o.kind == opCommit && sc.c.cfg.Cheat != CheatNone:
			cheated++
			commits[[2]uint32{o.commit.Step, uint32(o.commit.Index)}] = true
		case o.kind == opVerify && commits[[2]uint32{o.verify.Step, uint32(o.verify.Index)}] && o.verify.Verdict != coordinator.VerdictMatch:
			spells = append(spells, cheated)
			cheated = 0
			clear(commits)
			cheater.c.cfg.Cheat = CheatNone
		}
	}
	outcomes := map[uint64]coordinator.Dispute{}
	limit := time.Duration(rounds) * 4 * time.Second
	done := r.runUntil(limit, func() bool {
		s := r.sim.State()
		for _, d := range s.Disputes {
			if d.State != 0 {
				outcomes[d.Id] = d
			}
		}
		if slot, ok := coordinator.Slot(s, me); ok && cheater.c.cfg.Cheat == CheatNone && cheated == 0 {
			off := slot.HasFinished != 0 && !schedule.OnProbation(slot.HasFault != 0, slot.LastFaultEpoch, s.Progress.Epoch)
			if off {
				cheater.c.cfg.Cheat = CheatOtherData
			}
		}
		return r.finished()
	})
	if !done {
		t.Fatalf("not finished after %v of chain time: %s at step %d", limit, r.phase(), r.sim.State().Progress.Step)
	}
	r.check()
	if r.refused[opCommit]+r.refused[opVerify] > 0 {
		t.Errorf("refused commitments or verdicts: %v", r.refused)
	}

	bound := detectionBound(0.25, 1e-6)
	total := 0
	for _, n := range spells {
		total += n
		if n > bound {
			t.Errorf("a spell of cheating lasted %d rounds, beyond the bound of %d", n, bound)
		}
	}
	if len(spells) < 5 {
		t.Errorf("%d spells of cheating caught in %d rounds, want at least 5", len(spells), rounds)
	}
	if len(spells) > 0 {
		t.Logf("%d spells caught after %v rounds (mean %.2f; expected 1/p = 4, bound %d at delta 1e-6)",
			len(spells), spells, float64(total)/float64(len(spells)), bound)
	}
	cheaterSlot := -1
	s := r.sim.State()
	for i := range s.Clients {
		if s.Clients[i].Signer.Equals(me) {
			cheaterSlot = i
		}
	}
	faults := 0
	for id, d := range outcomes {
		switch {
		case d.State == coordinator.DisputeTrainerFault && int(d.TrainerSlot) == cheaterSlot:
			faults++
		case d.State == coordinator.DisputeTrainerFault || d.State == coordinator.DisputeAccuserFault:
			t.Errorf("dispute %d: an honest member was found at fault (state %d, trainer slot %d, accuser slot %d)", id, d.State, d.TrainerSlot, d.AccuserSlot)
		}
	}
	if faults == 0 {
		t.Error("no dispute found the cheater at fault")
	}
	if slot := s.Clients[cheaterSlot]; slot.HasFault == 0 {
		t.Error("the cheater's slot records no fault")
	}
}

// Verification in the multi-step mode: a replay runs a member's H inner
// steps from its committed state. Three honest members and one that always
// trains on other sequences, at verification_percent 50: every replay of an
// honest contribution matches, the cheater's are caught, and the honest
// replicas agree at every step.
func TestSimVerificationSparseLoCo(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-threaded simulation, about 10x slower under the race detector: scripts/test.sh runs it without")
	}
	r := newSimRunWith(t, 12, withSparseLoCo(verifySimConfig(50, 40)))
	for _, name := range []string{"a", "b", "c"} {
		r.add(name, true)
	}
	cheater := r.add("cheater", false)
	cheater.c.cfg.Cheat = CheatOtherData
	me := cheater.wallet.PublicKey()
	by := map[[2]uint32]bool{} // (step, index) of the cheater's commitments
	honest, caught, wrong := 0, 0, 0
	r.onSubmit = func(sc *simClient, o op) {
		switch {
		case o.kind == opCommit:
			by[[2]uint32{o.commit.Step, uint32(o.commit.Index)}] = sc == cheater
		case o.kind == opVerify:
			cheat, ok := by[[2]uint32{o.verify.Step, uint32(o.verify.Index)}]
			switch {
			case !ok:
			case cheat && o.verify.Verdict != coordinator.VerdictMatch:
				caught++
			case !cheat && o.verify.Verdict == coordinator.VerdictMatch:
				honest++
			default:
				wrong++
			}
		}
	}
	if !r.runUntil(200*time.Second, r.finished) {
		t.Fatalf("not finished: %s at step %d", r.phase(), r.sim.State().Progress.Step)
	}
	r.check()
	t.Logf("%d honest replays matched, %d of the cheater's caught", honest, caught)
	if wrong > 0 {
		t.Errorf("%d verdicts wrong (an honest contribution refused or a cheat passed)", wrong)
	}
	if honest < 5 || caught < 1 {
		t.Errorf("%d honest matches and %d catches, want at least 5 and 1", honest, caught)
	}
	if slot, ok := coordinator.Slot(r.sim.State(), me); !ok || slot.HasFault == 0 {
		t.Error("the cheater's slot records no fault")
	}
}

// Colluding verifiers that say NO_DATA of every honest trainer they check,
// to leave honest work out: the committee gets the data and replays it,
// so each accusation is REFUTED, a forgiven mistake, and the next in the
// epoch is the accuser's fault. No accuser ever holds more than its share
// of the dispute table, and no honest member is ever at fault.
func TestSimFalseNoDataCostsTheAccusers(t *testing.T) {
	if raceEnabled {
		t.Skip("a single-threaded simulation, about 10x slower under the race detector: scripts/test.sh runs it without")
	}
	r := newSimRunWith(t, 13, verifySimConfig(100, 30))
	for _, name := range []string{"a", "b", "c", "d"} {
		r.add(name, true)
	}
	colluders := []*simClient{r.add("x", false), r.add("y", false)}
	for _, c := range colluders {
		c.c.cfg.Cheat = CheatFalseNoData
	}
	outcomes := map[uint64]coordinator.Dispute{}
	most := 0
	done := r.runUntil(200*time.Second, func() bool {
		s := r.sim.State()
		held := map[uint16]int{}
		for _, d := range s.Disputes {
			if d.State != 0 {
				outcomes[d.Id] = d
			}
			if d.State == coordinator.DisputeOpen {
				held[d.AccuserSlot]++
				most = max(most, held[d.AccuserSlot])
			}
		}
		return r.finished()
	})
	if !done {
		t.Fatalf("not finished: %s at step %d", r.phase(), r.sim.State().Progress.Step)
	}
	r.check()
	s := r.sim.State()
	bad := map[int]bool{}
	for _, c := range colluders {
		slot := -1
		for i := range s.Clients {
			if s.Clients[i].Signer.Equals(c.wallet.PublicKey()) {
				slot = i
			}
		}
		bad[slot] = true
		refuted, faults := 0, 0
		for _, d := range outcomes {
			if int(d.AccuserSlot) != slot {
				continue
			}
			switch d.State {
			case coordinator.DisputeRefuted:
				refuted++
			case coordinator.DisputeAccuserFault:
				faults++
			}
		}
		t.Logf("colluder %s: %d accusations refuted, %d found it at fault", c.name, refuted, faults)
		if refuted == 0 || faults == 0 || s.Clients[slot].HasFault == 0 {
			t.Errorf("colluder %s: %d refuted, %d faults, has_fault %d: want the first forgiven and the next its fault", c.name, refuted, faults, s.Clients[slot].HasFault)
		}
	}
	for id, d := range outcomes {
		if d.State == coordinator.DisputeTrainerFault || (d.State == coordinator.DisputeAccuserFault && !bad[int(d.AccuserSlot)]) {
			t.Errorf("dispute %d: an honest member was found at fault (state %d, trainer slot %d, accuser slot %d)", id, d.State, d.TrainerSlot, d.AccuserSlot)
		}
	}
	if most > 4 {
		t.Errorf("an accuser held %d open disputes, beyond its share of 4", most)
	}
}
