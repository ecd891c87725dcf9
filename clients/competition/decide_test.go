package competition

import (
	"math/rand/v2"
	"testing"
)

func TestDecideTable(t *testing.T) {
	for _, c := range []struct {
		name string
		v    View
		want Action
	}{
		{"closed", View{Closed: true, Member: true, Openable: true}, Stop},
		{"not a member", View{Openable: true}, Stop},
		{"nothing to evaluate", View{Member: true}, Wait},
		{"open a round", View{Member: true, Openable: true}, Tick},
		{"paused: no new round", View{Member: true, Openable: true, Paused: true}, Wait},
		{"next after final", View{Member: true, Openable: true, Phase: PhaseFinal, Round: 3}, Tick},
		{"next after expired", View{Member: true, Openable: true, Phase: PhaseExpired, Round: 3}, Tick},
		{"seed slot not over", View{Member: true, Phase: PhaseSeedPending, Slot: 10, SeedSlot: 10}, Wait},
		{"take the seed", View{Member: true, Phase: PhaseSeedPending, Slot: 11, SeedSlot: 10}, Tick},
		{"paused: no seed", View{Member: true, Phase: PhaseSeedPending, Slot: 11, SeedSlot: 10, Paused: true}, Wait},
		{"evaluate", View{Member: true, Phase: PhaseEvaluating, Slot: 12, Deadline: 20}, Evaluate},
		{"vote", View{Member: true, Phase: PhaseEvaluating, Slot: 12, Deadline: 20, Evaluated: true}, Vote},
		{"voted", View{Member: true, Phase: PhaseEvaluating, Slot: 12, Deadline: 20, Evaluated: true, Voted: true}, Wait},
		{"at the deadline still votes", View{Member: true, Phase: PhaseEvaluating, Slot: 20, Deadline: 20, Evaluated: true}, Vote},
		{"expire", View{Member: true, Phase: PhaseEvaluating, Slot: 21, Deadline: 20}, Tick},
		{"paused: expire anyway", View{Member: true, Phase: PhaseEvaluating, Slot: 21, Deadline: 20, Paused: true}, Tick},
		{"paused: vote anyway", View{Member: true, Phase: PhaseEvaluating, Slot: 12, Deadline: 20, Evaluated: true, Paused: true}, Vote},
	} {
		if got := Decide(c.v); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// sim is the program's round machine as programs/competition/README.md gives it, driven by
// validators that run Decide: each evaluation takes a validator a number of
// slots, and every action lands in the slot it is decided in.
type sim struct {
	slot, roundSlots uint64
	quorum           int
	round            uint64
	phase            Phase
	openSlot         uint64
	seedSlot         uint64
	deadline         uint64
	votes            map[int]bool
	final, expired   int
	refusedTicks     int
}

// due: a round length has passed since the last round opened.
func (s *sim) due() bool { return s.round == 0 || s.slot >= s.openSlot+s.roundSlots }

func (s *sim) tick() bool {
	switch {
	case (s.phase == PhaseNone || s.phase == PhaseFinal || s.phase == PhaseExpired) && s.due():
		s.round++
		s.phase, s.openSlot, s.seedSlot, s.votes = PhaseSeedPending, s.slot, s.slot, map[int]bool{}
	case s.phase == PhaseSeedPending && s.slot > s.seedSlot:
		s.phase, s.deadline = PhaseEvaluating, s.slot+s.roundSlots
	case s.phase == PhaseEvaluating && s.slot > s.deadline:
		s.phase = PhaseExpired
		s.expired++
	default:
		s.refusedTicks++
		return false
	}
	return true
}

type simValidator struct {
	cost      uint64 // slots an evaluation takes
	busyUntil uint64
	evaluated uint64 // round whose evaluation it holds (0: none)
}

// runSim runs validators for slots and returns the machine.
func runSim(t *testing.T, rng *rand.Rand, costs []uint64, quorum int, roundSlots, slots uint64) *sim {
	s := &sim{roundSlots: roundSlots, quorum: quorum}
	vs := make([]simValidator, len(costs))
	for i, c := range costs {
		vs[i].cost = c
	}
	for s.slot = 1; s.slot <= slots; s.slot++ {
		for _, i := range rng.Perm(len(vs)) {
			v := &vs[i]
			if v.busyUntil > s.slot {
				continue
			}
			view := View{Slot: s.slot, Member: true, Round: s.round, Phase: s.phase, SeedSlot: s.seedSlot, Deadline: s.deadline,
				Openable: s.due(), Voted: s.votes[i], Evaluated: v.evaluated == s.round && s.round > 0}
			switch Decide(view) {
			case Tick:
				s.tick()
			case Evaluate:
				v.busyUntil, v.evaluated = s.slot+v.cost, s.round
			case Vote:
				if s.phase != PhaseEvaluating || s.slot > s.deadline || s.votes[i] {
					t.Fatalf("slot %d: validator %d voted in phase %v (deadline %d, voted %v)", s.slot, i, s.phase, s.deadline, s.votes[i])
				}
				s.votes[i] = true
				if len(s.votes) == s.quorum {
					s.phase = PhaseFinal
					s.final++
				}
			case Stop:
				t.Fatalf("slot %d: validator %d stopped", s.slot, i)
			}
		}
	}
	return s
}

// With validators fast enough for the window, every round but the last
// (cut off by the end of the simulation) becomes final; with every
// validator too slow, every round expires and none is final; and the loop
// ticks only when a tick is due, but for the races of validators deciding
// in one slot.
func TestDecideSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 40 {
		n := 1 + rng.IntN(5)
		quorum := 1 + rng.IntN(n)
		roundSlots := 5 + rng.Uint64N(20)
		costs := make([]uint64, n)
		for i := range costs {
			costs[i] = 1 + rng.Uint64N(roundSlots-1) // voting by the deadline even when it starts a slot after the seed
		}
		s := runSim(t, rng, costs, quorum, roundSlots, 400)
		if s.final+s.expired < int(s.round)-1 || s.final+s.expired > int(s.round) {
			t.Fatalf("trial %d: %d rounds, %d final, %d expired", trial, s.round, s.final, s.expired)
		}
		if s.expired > 0 {
			t.Fatalf("trial %d: costs %v within a window of %d slots, yet %d rounds expired", trial, costs, roundSlots, s.expired)
		}
		if s.round < 400/(2*roundSlots+3) || s.round > 400/roundSlots+1 {
			t.Fatalf("trial %d: %d rounds in 400 slots of %d-slot rounds", trial, s.round, roundSlots)
		}
		if s.refusedTicks >= n*int(s.round)*3 {
			t.Fatalf("trial %d: %d refused ticks over %d rounds of %d validators", trial, s.refusedTicks, s.round, n)
		}
		slow := make([]uint64, n)
		for i := range slow {
			slow[i] = roundSlots + 2 + rng.Uint64N(5)
		}
		s = runSim(t, rng, slow, quorum, roundSlots, 400)
		if s.final != 0 || s.expired < int(s.round)-1 {
			t.Fatalf("trial %d: too slow validators: %d final, %d expired of %d", trial, s.final, s.expired, s.round)
		}
	}
}
