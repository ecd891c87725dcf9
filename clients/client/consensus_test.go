package client

import (
	"crypto/ed25519"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// testState is a run in RoundTrain with the given members (slots 0..n-1)
// and the current round at ring position head.
func testState(t *testing.T, members int) *coordinator.State {
	t.Helper()
	s := &coordinator.State{}
	s.RunState = uint8(coordinator.RoundTrain)
	copy(s.ClientVersion[:], "test")
	s.Epoch.ClientsLen = uint16(members)
	for i := range members {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Clients[i].Occupied, s.Clients[i].InEpoch = 1, 1
		s.Clients[i].Signer = solana.NewWallet().PublicKey()
		copy(s.Clients[i].P2PIdentity[:], pub)
		s.Epoch.Clients[i].Slot, s.Epoch.Clients[i].State = uint16(i), coordinator.MemberHealthy
	}
	return s
}

// startRound makes (step, height) the current round, as the program does.
func startRound(s *coordinator.State, step, height uint32) {
	s.Epoch.RoundsHead = uint8(height % coordinator.StoredRounds)
	r := coordinator.CurrentRound(s)
	*r = coordinator.Round{Step: step, Height: height, ClientsLen: s.Epoch.ClientsLen, WitnessCount: 1}
	s.Progress.Step = step
	s.RunState = uint8(coordinator.RoundTrain)
}

// witnessAll adds a report of the current round whose participant filter
// holds every member.
func witnessAll(t *testing.T, s *coordinator.State) { witnessReport(t, s, true) }

// witnessReport adds a report of the current round whose filters hold
// every member (all) or none.
func witnessReport(t *testing.T, s *coordinator.State, all bool) {
	t.Helper()
	r := coordinator.CurrentRound(s)
	bits, hashes := schedule.BloomParams(int(r.ClientsLen))
	b, err := schedule.NewBloom(bits, hashes, [8]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range coordinator.Members(s)[:r.ClientsLen] {
		if all {
			b.Add(m.Signer)
		}
	}
	r.Witnesses[0].ParticipantBloom = coordinator.BloomOf(b)
	r.Witnesses[0].BroadcastBloom = coordinator.BloomOf(b)
	r.WitnessesLen = 1
}

func testEngine() *engine {
	return newEngine(solana.NewWallet().PublicKey(), "", "test", [32]byte{7}, rand.New(rand.NewPCG(1, 2)))
}

// view is s as the engine reads it, at chain time 0.
func view(e *engine, s *coordinator.State) *coordinator.View {
	return coordinator.NewView(s, e.me, time.Unix(0, 0))
}

// noInputs is a snapshot in which nothing arrived.
func noInputs() *inputs { return &inputs{payloads: map[uint32]map[peer.ID]payloadState{}} }

// A round's member list is the one of the state in which it was current:
// the program renumbers members when the next round starts, and the record
// must not follow.
func TestCaptureRoundsKeepsTheRoundsMembers(t *testing.T) {
	e := testEngine()
	s := testState(t, 3)
	startRound(s, 5, 0)
	e.captureRounds(view(e, s))
	rec := e.rounds[5]
	if rec == nil || rec.final || len(rec.members) != 3 || e.followFrom != 6 {
		t.Fatalf("after round 5 started: record %+v, followFrom %d", rec, e.followFrom)
	}
	want := coordinator.Members(s)

	witnessAll(t, s)
	s.RunState = uint8(coordinator.RoundWitness)
	e.captureRounds(view(e, s))
	if rec.final {
		t.Fatal("the round's reports are final while it still runs (RoundWitness)")
	}

	// Member 0 is dropped and removed when round 6 starts: indices shift.
	s.Epoch.Clients[0] = s.Epoch.Clients[2]
	s.Epoch.ClientsLen = 2
	startRound(s, 6, 1)
	e.captureRounds(view(e, s))
	if !rec.final || len(rec.participants) != 1 || rec.witnessCount != 1 {
		t.Fatalf("round 5 once round 6 runs: final %v, %d reports, %d elected", rec.final, len(rec.participants), rec.witnessCount)
	}
	for i, m := range rec.members {
		if m.Signer != want[i].Signer {
			t.Errorf("round 5 member %d is %s, was %s when the round ran", i, m.Signer, want[i].Signer)
		}
	}
	if got := e.rounds[6]; got == nil || len(got.members) != 2 {
		t.Fatalf("round 6 record %+v, want its 2 members", got)
	}

	// Rounds over: round 6's reports are final in Cooldown.
	s.RunState = uint8(coordinator.Cooldown)
	e.captureRounds(view(e, s))
	if !e.rounds[6].final {
		t.Error("round 6 not final in Cooldown")
	}
}

// A client that sees no running round starts following from the next step.
func TestCaptureRoundsFollowsFromTheNextRound(t *testing.T) {
	e := testEngine()
	s := testState(t, 3)
	s.RunState = uint8(coordinator.Cooldown)
	s.Progress.Step = 9
	e.captureRounds(view(e, s))
	if e.followFrom != 9 || len(e.rounds) != 0 {
		t.Fatalf("followFrom %d, %d records; want 9 and none", e.followFrom, len(e.rounds))
	}
}

// applyReady drops a replica that missed a round (no record of it, or its
// record left the history before it was final) instead of applying later
// rounds to it, and asks for a model of that step or later.
func TestApplyReadyDropsAReplicaThatMissedARound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record bool
	}{{"never seen", false}, {"seen, never final", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEngine()
			e.model, e.lastStep = modelReady, 4
			s := testState(t, 3)
			if tc.record {
				startRound(s, 5, 0)
				e.captureRounds(view(e, s))
			}
			startRound(s, 7, 2) // rounds 5 and 6 are gone from the ring
			*findRoundAt(s, 0) = coordinator.Round{}
			acts := planned(t, e, s)
			d, ok := only[discardAction](acts)
			if !ok || d.from != 5 {
				t.Fatalf("after a missed round 5: %v, want only a discard from step 5", acts)
			}
			e.discarded(d.from)
			if e.model != modelLoading || e.loadFrom != 5 || e.lastStep != 4 {
				t.Fatalf("after the discard: model %v, loadFrom %d, lastStep %d", e.model, e.loadFrom, e.lastStep)
			}
		})
	}
}

// planned is what planApply plans for s (after recording its rounds).
func planned(t *testing.T, e *engine, s *coordinator.State) []action {
	t.Helper()
	v := view(e, s)
	e.captureRounds(v)
	var acts []action
	e.planApply(v, noInputs(), func(a action) { acts = append(acts, a) })
	return acts
}

// only is the single action of type A in acts.
func only[A action](acts []action) (A, bool) {
	var zero A
	if len(acts) != 1 {
		return zero, false
	}
	a, ok := acts[0].(A)
	return a, ok
}

func findRoundAt(s *coordinator.State, i int) *coordinator.Round { return &s.Epoch.Rounds[i] }

// The round a member waits for is not a gap: it is still running.
func TestApplyReadyWaitsForARunningRound(t *testing.T) {
	e := testEngine()
	e.model, e.lastStep = modelReady, 4
	s := testState(t, 3)
	startRound(s, 5, 0)
	if acts := planned(t, e, s); len(acts) != 0 {
		t.Fatalf("during round 5: %v, want nothing", acts)
	}
}

// A member that has not trained leaves before the health check of the
// epoch's second round could drop it, and not earlier.
func TestPastGrace(t *testing.T) {
	s := testState(t, 3)
	for _, tc := range []struct {
		phase  coordinator.RunState
		height uint32
		want   bool
	}{
		{coordinator.RoundTrain, 0, false},
		{coordinator.RoundWitness, 0, false},
		{coordinator.RoundTrain, 1, false},
		{coordinator.RoundWitness, 1, true},
		{coordinator.RoundTrain, 2, true},
		{coordinator.Warmup, 0, false},
	} {
		startRound(s, 10+tc.height, tc.height)
		s.RunState = uint8(tc.phase)
		if got := pastGrace(coordinator.NewView(s, solana.PublicKey{}, time.Time{})); got != tc.want {
			t.Errorf("%s at height %d: pastGrace %v, want %v", tc.phase, tc.height, got, tc.want)
		}
	}
}
