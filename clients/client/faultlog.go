package client

import (
	"log/slog"

	"github.com/psyche-go/psyche/clients/coordinator"
)

// faultLog tells the operator, once each, as WARN lines, what the chain
// holds against this client: a verdict against one of its steps, a dispute
// that names it as trainer or accuser and how it was settled, a fault, a
// slash and burned points. Only /status showed these before, so an honest
// operator with faulty hardware never knew.
type faultLog struct {
	primed   bool
	verdicts map[replayKey]bool
	disputes map[uint64]uint8
	slashed  uint64
	burned   uint64
	fault    bool
	epoch    uint32 // of the fault
}

// observe logs what changed since the last view.
func (f *faultLog) observe(v *coordinator.View, log *slog.Logger) {
	if v.Slot == nil {
		return
	}
	if f.verdicts == nil {
		f.verdicts, f.disputes = map[replayKey]bool{}, map[uint64]uint8{}
	}
	slot := v.Slot
	if !f.primed {
		// What predates this process is said once, not replayed.
		f.primed, f.slashed, f.burned = true, slot.Slashed, slot.Burned
		f.fault, f.epoch = slot.HasFault != 0, slot.LastFaultEpoch
		if f.fault && slot.LastFaultEpoch+1 >= v.Epoch {
			log.Warn("this client is on fault probation: it was found at fault in a recent epoch, and every step it trains is verified", "fault_epoch", slot.LastFaultEpoch)
		}
	}
	f.ourVerdicts(v, log)
	f.ourDisputes(v, log)
	if slot.HasFault != 0 && (!f.fault || slot.LastFaultEpoch != f.epoch) {
		log.Warn("this client was found at fault: it leaves the epoch without reward, is slashed, loses its unvested points, and every step it trains this epoch and the next is verified; if it runs honestly, its hardware or trainer build does not replay bit for bit",
			"epoch", slot.LastFaultEpoch)
	}
	f.fault, f.epoch = slot.HasFault != 0, slot.LastFaultEpoch
	if slot.Slashed > f.slashed {
		log.Warn("this client was slashed", "points", slot.Slashed-f.slashed, "total", slot.Slashed)
	}
	if slot.Burned > f.burned {
		log.Warn("this client's unvested points were burned", "points", slot.Burned-f.burned, "total", slot.Burned)
	}
	f.slashed, f.burned = slot.Slashed, slot.Burned
}

// ourVerdicts logs a MISMATCH or NO_DATA verdict on this client's step of
// the current round.
func (f *faultLog) ourVerdicts(v *coordinator.View, log *slog.Logger) {
	r := v.Round
	if !v.Running() || v.Me < 0 || v.Me >= int(r.ClientsLen) || v.Me >= len(r.Commits) {
		return
	}
	c := r.Commits[v.Me]
	key := replayKey{r.Step, uint32(v.Me)}
	if (c.Verdict == coordinator.VerdictMismatch || c.Verdict == coordinator.VerdictNoData) && !f.verdicts[key] {
		f.verdicts[key] = true
		log.Warn("a verifier judged this client's step: it is left out of the round, and a dispute decides who is at fault",
			"step", r.Step, "verdict", coordinator.VerdictName(c.Verdict), "verifier", c.Verifier)
	}
	for k := range f.verdicts {
		if k[0]+disputeSteps < r.Step {
			delete(f.verdicts, k)
		}
	}
}

// ourDisputes logs each dispute naming this client as trainer or accuser
// when it opens and when it is settled.
func (f *faultLog) ourDisputes(v *coordinator.View, log *slog.Logger) {
	me := slotIndex(v.State, v)
	for _, d := range v.State.Disputes {
		trainer, accuser := int(d.TrainerSlot) == me, int(d.AccuserSlot) == me
		if d.State == coordinator.DisputeFree || !(trainer || accuser) {
			continue
		}
		prev, seen := f.disputes[d.Id]
		f.disputes[d.Id] = d.State
		if seen && prev == d.State {
			continue
		}
		role := "trainer"
		if accuser {
			role = "accuser"
		}
		kv := []any{"dispute", d.Id, "step", d.Step, "role", role, "kind", coordinator.VerdictName(d.Kind)}
		switch {
		case d.State == coordinator.DisputeOpen && trainer:
			log.Warn("a dispute names this client: a committee replays the step", kv...)
		case d.State == coordinator.DisputeOpen:
			log.Info("this client's verdict opened a dispute: a committee replays the step", kv...)
		case against(d, trainer):
			log.Warn("a dispute was settled against this client", append(kv, "outcome", coordinator.DisputeStateName(d.State))...)
		default:
			log.Info("a dispute naming this client was settled", append(kv, "outcome", coordinator.DisputeStateName(d.State))...)
		}
	}
}

// against says whether dispute d's outcome counts against its trainer
// (asTrainer) or its accuser.
func against(d coordinator.Dispute, asTrainer bool) bool {
	switch d.State {
	case coordinator.DisputeTrainerFault, coordinator.DisputeTransient:
		return asTrainer
	case coordinator.DisputeAccuserFault, coordinator.DisputeRefuted:
		return !asTrainer
	}
	return false
}
