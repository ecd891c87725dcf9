package competition

// Phase is the board's round state (the program's Board.round.state).
type Phase uint8

const (
	PhaseNone Phase = iota
	PhaseSeedPending
	PhaseEvaluating
	PhaseFinal
	PhaseExpired
)

var phaseNames = [...]string{"none", "seed pending", "evaluating", "final", "expired"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// View is what a validator's loop decides from: the chain as last read and
// what the validator itself holds.
type View struct {
	Slot   uint64
	Paused bool
	Closed bool
	// Member: the validator is an active validator of the competition.
	Member bool
	Round  uint64
	Phase  Phase
	// SeedSlot and Deadline are the round's (SeedPending: its seed comes
	// from the first slot after SeedSlot; Evaluating: votes until Deadline).
	SeedSlot, Deadline uint64
	// Openable: a tick now would open a round (a round length has passed
	// since the last one opened, and some entry is eligible).
	Openable bool
	// Voted: the board holds this validator's vote for Round.
	Voted bool
	// Evaluated: the validator holds its table and wins for Round.
	Evaluated bool
}

// Action is the next thing a validator does.
type Action uint8

const (
	// Wait for the chain to move (a new slot, another validator's tick).
	Wait Action = iota
	// Tick sends round_tick: open a round, take its seed, or expire it.
	Tick
	// Evaluate computes the round's loss table and wins.
	Evaluate
	// Vote posts the evaluation.
	Vote
	// Stop: the competition is closed, or the validator is not (or no
	// longer: faulted, left) one of its validators.
	Stop
)

var actionNames = [...]string{"wait", "tick", "evaluate", "vote", "stop"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// Decide is the validator's loop as a pure function of what it sees, so that
// simulations can drive it (decide_test.go). Anyone may tick; every
// validator does when a tick is due, and the losers of that race get
// NothingToTick, which the loop ignores.
func Decide(v View) Action {
	switch {
	case v.Closed || !v.Member:
		return Stop
	case v.Phase == PhaseSeedPending:
		if v.Slot > v.SeedSlot && !v.Paused {
			return Tick
		}
		return Wait
	case v.Phase == PhaseEvaluating:
		switch {
		case v.Slot > v.Deadline:
			return Tick
		case v.Voted:
			return Wait
		case v.Evaluated:
			return Vote
		default:
			return Evaluate
		}
	case v.Paused || !v.Openable:
		// A paused competition opens and seeds no round; a round being
		// evaluated still takes its votes and expires.
		return Wait
	default:
		return Tick
	}
}
