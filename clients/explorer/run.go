package explorer

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// Bounds on the history kept per run, so that memory and pages stay small
// however long a run is: the newest entries are kept.
const (
	maxSteps    = 16384 // of the loss curve
	maxReports  = 512   // the newest witness reports, for the stored rounds (at most 4 x 32)
	maxEvals    = 4096
	maxPrompts  = 256
	maxTimeline = 512
	maxEvents   = 256
	// maxDisputes bounds the disputes whose parties are remembered (from
	// their DisputeOpened events), to name who a settlement faults.
	maxDisputes = 256
)

// runData is what the indexer knows of one run.
type runData struct {
	id       string
	run      coordinator.Run
	inst     *coordinator.Instance
	state    *coordinator.State // nil until read
	stateErr string             // why the last read failed
	treasury *treasury          // nil: no Treasurer run
	last     Activity
	steps    []stepStats     // by step
	reports  []witnessReport // by step
	evals    []EvalPoint     // by step
	prompts  []PromptPoint   // by step
	timeline []PhaseChange   // by slot
	events   []EventView     // by slot
	disputes map[uint64]disputeParties
	view     cached
}

// disputeParties is who a dispute is about.
type disputeParties struct {
	step             uint32
	trainer, accuser solana.PublicKey
}

// cached is a JSON body built at an indexer version.
type cached struct {
	version uint64
	body    []byte
}

// treasury is a run's Treasurer run as last read.
type treasury struct {
	run          treasurer.Run
	acc          *treasurer.RunAccount // nil until read
	balance      uint64
	mint         treasurer.MintInfo
	participants map[solana.PublicKey]*treasurer.Participant
}

// witnessReport is one witness instruction: the round it reports and the
// metadata it published.
type witnessReport struct {
	step   uint32
	index  uint16
	signer solana.PublicKey
	meta   coordinator.WitnessMetadata
	at     Activity
}

// stepStats sums a step's witness reports (the loss curve).
type stepStats struct {
	step uint32
	loss finiteMean
	tps  float64
	n    int
	time int64
}

// finiteMean averages the finite values added: a NaN or infinite loss a
// witness published does not spoil its step's mean.
type finiteMean struct {
	sum float64
	n   int
}

func (m *finiteMean) add(v float32) {
	if f := float64(v); !math.IsNaN(f) && !math.IsInf(f, 0) {
		m.sum, m.n = m.sum+f, m.n+1
	}
}

// mean is NaN when nothing finite was added.
func (m finiteMean) mean() status.Float {
	if m.n == 0 {
		return status.Float(math.NaN())
	}
	return status.Float(m.sum / float64(m.n))
}

// setState records a read of the run's account and says whether anything
// shown changed (the program bumps the nonce at every change).
func (rd *runData) setState(s *coordinator.State, err error) bool {
	if err != nil {
		changed := rd.stateErr != err.Error()
		rd.stateErr = err.Error()
		return changed
	}
	changed := rd.state == nil || rd.state.Nonce != s.Nonce || rd.stateErr != ""
	rd.state, rd.stateErr = s, ""
	return changed
}

// setTreasury records a read of the run's Treasurer run; it says whether
// anything changed.
func (rd *runData) setTreasury(t *treasury) bool {
	if reflect.DeepEqual(rd.treasury, t) {
		return false
	}
	rd.treasury = t
	return true
}

// touch records a transaction of the run.
func (rd *runData) touch(at Activity) {
	if at.Slot >= rd.last.Slot {
		rd.last = at
	}
}

func (rd *runData) addReport(w witnessReport) {
	rd.reports = insertSorted(rd.reports, w, func(w witnessReport) uint64 { return uint64(w.step) }, maxReports)
	i := sort.Search(len(rd.steps), func(i int) bool { return rd.steps[i].step >= w.step })
	if i == len(rd.steps) || rd.steps[i].step != w.step {
		rd.steps = insertSorted(rd.steps, stepStats{step: w.step}, func(s stepStats) uint64 { return uint64(s.step) }, maxSteps)
		if i = sort.Search(len(rd.steps), func(i int) bool { return rd.steps[i].step >= w.step }); i == len(rd.steps) || rd.steps[i].step != w.step {
			return // older than every step kept
		}
	}
	s := &rd.steps[i]
	s.loss.add(w.meta.Loss)
	s.tps, s.n, s.time = s.tps+float64(w.meta.TokensPerSec), s.n+1, max(s.time, w.at.Time)
}

// addEvent files one of the Coordinator's events: phase changes make the
// timeline, scores the evaluation curves; the rounds' own events are shown
// by the rounds, and the rest (membership, verification, disputes,
// checkpoints, epochs) are listed as they are.
func (rd *runData) addEvent(ev any, at Activity) {
	bySlot := func(v Activity) uint64 { return v.Slot }
	switch ev := ev.(type) {
	case *bindings.StateChanged:
		rd.timeline = insertSorted(rd.timeline, PhaseChange{Activity: at, From: coordinator.RunState(ev.From).String(),
			To: coordinator.RunState(ev.To).String(), Epoch: ev.Epoch, Step: ev.Step},
			func(p PhaseChange) uint64 { return bySlot(p.Activity) }, maxTimeline)
	case *bindings.EvalReported:
		rd.evals = insertSorted(rd.evals, EvalPoint{Activity: at, Step: ev.Step, Epoch: ev.Epoch, Task: coordinator.FixedString(ev.Task[:]),
			Acc: float(ev.Acc), AccNorm: float(ev.AccNorm), Count: ev.Count, Signer: ev.Signer.String()},
			func(p EvalPoint) uint64 { return uint64(p.Step) }, maxEvals)
	case *bindings.PromptReported:
		rd.prompts = insertSorted(rd.prompts, PromptPoint{Activity: at, Step: ev.Step, Epoch: ev.Epoch, Prompt: ev.Prompt,
			Tokens: slices.Clone(ev.Tokens[:min(int(ev.Len), len(ev.Tokens))]), Signer: ev.Signer.String()},
			func(p PromptPoint) uint64 { return uint64(p.Step) }, maxPrompts)
	case *bindings.RoundStarted, *bindings.WitnessReported:
	default:
		if o, ok := ev.(*bindings.DisputeOpened); ok {
			rd.rememberDispute(o)
		}
		rd.listEvent(reflect.TypeOf(ev).Elem().Name(), describe(ev), ev, at)
		if d, ok := ev.(*bindings.DisputeSettled); ok {
			if f, ok := rd.faultOf(d); ok {
				rd.listEvent(MemberFaulted, f.describe(), f, at)
			}
		}
	}
}

// listEvent adds an event to the run's list.
func (rd *runData) listEvent(name, text string, fields any, at Activity) {
	data, err := json.Marshal(fields)
	if err != nil {
		return
	}
	rd.events = insertSorted(rd.events, EventView{Activity: at, Name: name, Text: text, Data: data},
		func(e EventView) uint64 { return e.Activity.Slot }, maxEvents)
}

// MemberFaulted names the event the explorer adds after a DisputeSettled
// that found a member at fault: the program does not log one, and its
// DisputeSettled names the dispute only.
const MemberFaulted = "MemberFaulted"

// memberFault is a MemberFaulted event's fields.
type memberFault struct {
	Member  solana.PublicKey `json:"member"`
	Role    string           `json:"role"` // "trainer" (its step was wrong) or "accuser" (its accusation was)
	Dispute uint64           `json:"dispute"`
	Step    uint32           `json:"step"` // the disputed step
	Trainer solana.PublicKey `json:"trainer"`
}

func (f memberFault) describe() string {
	why := fmt.Sprintf("its step %d was found wrong", f.Step)
	if f.Role == "accuser" {
		why = fmt.Sprintf("its accusation of %s's step %d was refuted", f.Trainer, f.Step)
	}
	return fmt.Sprintf("%s faulted by dispute %d (%s): slashed, unvested points burned, out of the epoch", f.Member, f.Dispute, why)
}

// rememberDispute keeps who a dispute is about, for its settlement.
func (rd *runData) rememberDispute(o *bindings.DisputeOpened) {
	if rd.disputes == nil {
		rd.disputes = map[uint64]disputeParties{}
	}
	rd.disputes[o.Id] = disputeParties{step: o.Step, trainer: o.Trainer, accuser: o.Accuser}
	if len(rd.disputes) > maxDisputes {
		delete(rd.disputes, slices.Min(slices.Collect(maps.Keys(rd.disputes))))
	}
}

// faultOf is the member a settled dispute found at fault, if any: the
// trainer (TRAINER_FAULT) or the accuser (ACCUSER_FAULT), named by the
// dispute's DisputeOpened event or else by the run's dispute table.
func (rd *runData) faultOf(d *bindings.DisputeSettled) (memberFault, bool) {
	if d.Outcome != coordinator.DisputeTrainerFault && d.Outcome != coordinator.DisputeAccuserFault {
		return memberFault{}, false
	}
	p, ok := rd.disputes[d.Id]
	if !ok && rd.state != nil {
		if sd, found := coordinator.FindDispute(rd.state, d.Id); found {
			p, ok = disputeParties{step: sd.Step, trainer: coordinator.SlotSigner(rd.state, sd.TrainerSlot),
				accuser: coordinator.SlotSigner(rd.state, sd.AccuserSlot)}, true
		}
	}
	if !ok {
		return memberFault{}, false
	}
	f := memberFault{Member: p.trainer, Role: "trainer", Dispute: d.Id, Step: p.step, Trainer: p.trainer}
	if d.Outcome == coordinator.DisputeAccuserFault {
		f.Member, f.Role = p.accuser, "accuser"
	}
	return f, true
}

// describe says what an event means, in a line.
func describe(ev any) string {
	switch ev := ev.(type) {
	case *bindings.ClientJoined:
		return fmt.Sprintf("%s joined (slot %d)", ev.Signer, ev.Slot)
	case *bindings.ClientLeft:
		return fmt.Sprintf("%s left", ev.Signer)
	case *bindings.ClientDropped:
		return fmt.Sprintf("%s removed from the epoch at step %d and slashed: %s's health check found it missing", ev.Client, ev.Step, ev.Reporter)
	case *bindings.WarmupWitnessed:
		return fmt.Sprintf("%s has the model loaded", ev.Signer)
	case *bindings.EpochEnded:
		if !ev.Success {
			return fmt.Sprintf("epoch %d ended without quorum", ev.Epoch)
		}
		return fmt.Sprintf("epoch %d ended: %d clients rewarded", ev.Epoch, ev.Rewarded)
	case *bindings.PauseRequested:
		return fmt.Sprintf("pause requested at step %d", ev.Step)
	case *bindings.PauseCancelled:
		return "pause cancelled"
	case *bindings.CheckpointUpdated:
		return fmt.Sprintf("%s uploaded a checkpoint", ev.Signer)
	case *bindings.Verified:
		return fmt.Sprintf("step %d of %s judged %s by %s", ev.Step, ev.Trainer, coordinator.VerdictName(ev.Verdict), ev.Verifier)
	case *bindings.DisputeOpened:
		return fmt.Sprintf("dispute %d opened by %s against %s's step %d", ev.Id, ev.Accuser, ev.Trainer, ev.Step)
	case *bindings.DisputeSettled:
		return fmt.Sprintf("dispute %d settled: %s", ev.Id, coordinator.DisputeStateName(ev.Outcome))
	}
	return ""
}

// insertSorted inserts v after the elements whose key is not above its own
// (in order of arrival among equals) and keeps the max last elements.
func insertSorted[T any](s []T, v T, key func(T) uint64, max int) []T {
	k := key(v)
	i := sort.Search(len(s), func(i int) bool { return key(s[i]) > k })
	s = slices.Insert(s, i, v)
	if len(s) > max {
		s = slices.Delete(s, 0, len(s)-max)
	}
	return s
}
