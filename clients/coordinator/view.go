package coordinator

import (
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/schedule"
)

// View is one Coordinator state as one client reads it, computed once per
// state: the phase, the epoch's members and this client's place among
// them, the current and previous rounds, the phase's timer, and the
// chain's clock when the state was read. Everything a client decides from
// a state reads it from here.
type View struct {
	State *State
	Phase RunState
	// Epoch and Step are the run's progress: the epoch, and the step of the
	// round in progress (or the next one, between epochs).
	Epoch, Step uint32
	// Round and Prev are the current and previous rounds (meaningful in
	// RoundTrain, RoundWitness and Cooldown).
	Round, Prev *Round
	Members     []Member
	// Me is this client's member index, -1 when it is not a member.
	Me int
	// Slot is this client's registration, nil when it has none.
	Slot *ClientSlot
	// PhaseStart is when the phase began, by the chain's clock; Deadline is
	// when its timer runs out (zero for phases without one).
	PhaseStart, Deadline time.Time
	// ChainNow is the chain's clock (the Clock sysvar) when the state was read.
	ChainNow time.Time
}

// NewView reads s for the client signing as me, at chain time now.
func NewView(s *State, me solana.PublicKey, now time.Time) *View {
	v := &View{
		State: s, Phase: Phase(s), Epoch: s.Progress.Epoch, Step: s.Progress.Step,
		Round: CurrentRound(s), Prev: PreviousRound(s), Members: Members(s),
		Me: -1, ChainNow: now, PhaseStart: time.Unix(s.RunStateStart, 0),
	}
	for _, m := range v.Members {
		if m.Signer.Equals(me) {
			v.Me = int(m.Index)
		}
	}
	if slot, ok := Slot(s, me); ok {
		v.Slot = slot
	}
	if d, ok := PhaseDuration(s); ok {
		v.Deadline = v.PhaseStart.Add(time.Duration(d) * time.Second)
	}
	return v
}

// Running says whether a round is in progress.
func (v *View) Running() bool { return v.Phase == RoundTrain || v.Phase == RoundWitness }

// Member says whether this client is a healthy member of the epoch.
func (v *View) Member() bool { return v.Me >= 0 && v.Members[v.Me].State == MemberHealthy }

// Pending says whether this client is registered for the epoch that forms next.
func (v *View) Pending() bool { return v.Slot != nil && v.Slot.Pending != 0 }

// TimerUp says whether the phase's timer has run out by the chain's clock.
func (v *View) TimerUp() bool { return !v.Deadline.IsZero() && !v.ChainNow.Before(v.Deadline) }

// SeedPending says whether the round waits in RoundWitness for its verify
// seed: the first instruction in a slot after the one RoundTrain ended in
// draws it (a tick before that is refused, TickTooEarly), and verdicts wait
// for it.
func (v *View) SeedPending() bool {
	return v.Phase == RoundWitness && v.State.Config.VerificationPercent > 0 && v.Round.VerifySeed == [32]byte{}
}

// RoundMembers are the current round's clients, in index order.
func (v *View) RoundMembers() []Member {
	return v.Members[:min(int(v.Round.ClientsLen), len(v.Members))]
}

// Schedule is the current round as clients/schedule computes roles from it.
func (v *View) Schedule() schedule.Round { return ScheduleRound(v.State, v.Round) }

// FindRound is the stored round with the given step and height, if the
// Coordinator still holds it.
func (v *View) FindRound(step, height uint32) *Round {
	for i := range v.State.Epoch.Rounds {
		r := &v.State.Epoch.Rounds[i]
		if r.Step == step && r.Height == height && r.ClientsLen > 0 {
			return r
		}
	}
	return nil
}

// PhaseDuration is how long the phase lasts at most before a tick advances it.
func PhaseDuration(s *State) (seconds int64, ok bool) {
	cfg := s.Config
	switch Phase(s) {
	case WaitingForMembers:
		return int64(cfg.WaitingForMembersExtraTime), true
	case Warmup:
		return int64(cfg.WarmupTime), true
	case RoundTrain:
		return int64(cfg.MaxRoundTrainTime), true
	case RoundWitness:
		return int64(cfg.RoundWitnessTime), true
	case Cooldown:
		return int64(cfg.CooldownTime), true
	}
	return 0, false
}
