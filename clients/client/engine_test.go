package client

import (
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/schedule"
)

// Decisions one at a time, from hand-made states (consensus_test.go has
// the rules of following rounds; sim_test.go runs whole simulated runs).

// at is s read at chain time t, by e.
func at(e *engine, s *coordinator.State, t time.Time) *coordinator.View {
	return coordinator.NewView(s, e.me, t)
}

// memberEngine is an engine whose wallet is member i of s.
func memberEngine(s *coordinator.State, i int) *engine {
	e := testEngine()
	e.me = s.Clients[i].Signer
	return e
}

func kinds(acts []action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, a.String())
	}
	return out
}

// A tick is decided by the chain's clock: a client whose own clock runs
// 3 s ahead does not tick early, and one 3 s behind does not stall.
func TestTickByTheChainsClock(t *testing.T) {
	s := testState(t, 2)
	startRound(s, 5, 0)
	s.RunStateStart = 1000
	s.Config.MaxRoundTrainTime = 5
	deadline := time.Unix(1005, 0)
	for _, skew := range []time.Duration{-3 * time.Second, 0, 3 * time.Second} {
		e := memberEngine(s, 0)
		if _, ok := e.tick(at(e, s, deadline.Add(-time.Second)), deadline.Add(-time.Second+skew)); ok {
			t.Errorf("skew %v: ticked a second before the deadline by the chain's clock", skew)
		}
		if _, ok := e.tick(at(e, s, deadline), deadline.Add(skew)); !ok {
			t.Errorf("skew %v: no tick at the deadline by the chain's clock", skew)
		}
		if _, ok := e.tick(at(e, s, deadline.Add(100*time.Millisecond)), deadline.Add(skew+100*time.Millisecond)); ok {
			t.Errorf("skew %v: ticked again within %v", skew, tickEvery)
		}
	}
	// WaitingForMembers is ticked by clients that joined, not by onlookers.
	s.RunState = uint8(coordinator.WaitingForMembers)
	s.Config.WaitingForMembersExtraTime = 2
	e := testEngine()
	if _, ok := e.tick(at(e, s, deadline), deadline); ok {
		t.Error("a client that never joined ticked WaitingForMembers")
	}
}

// A witness waits for every member's payload until witnessMargin before
// the round's train time is up by the chain's clock, then reports what it has.
func TestWitnessWaitsForEveryoneUntilTheDeadline(t *testing.T) {
	if witnessMargin(20*time.Second) != 2*time.Second || witnessMargin(300*time.Second) != 15*time.Second {
		t.Errorf("margins %v at 20 s and %v at 300 s, want 2 s and 15 s", witnessMargin(20*time.Second), witnessMargin(300*time.Second))
	}
	s := testState(t, 3)
	startRound(s, 5, 0)
	s.RunStateStart = 1000
	s.Config.MaxRoundTrainTime = 5
	e := memberEngine(s, 0)
	e.captureRounds(at(e, s, time.Unix(1000, 0)))
	rec := e.rounds[5]
	in := noInputs()
	in.payloads[5] = map[peer.ID]payloadState{}
	deliver := func(i int) p2p.Hash {
		h := p2p.Hash{byte(i + 1)}
		in.payloads[5][rec.peers[i]] = payloadState{h, true}
		return h
	}
	h0, h1 := deliver(0), deliver(1)
	early := time.Unix(1000, 0).Add(5*time.Second - witnessMargin(5*time.Second) - time.Millisecond)
	if _, ok := e.witness(at(e, s, early), in, rec); ok {
		t.Fatal("reported with a member missing before the deadline")
	}
	a, ok := e.witness(at(e, s, early.Add(time.Millisecond)), in, rec)
	if !ok {
		t.Fatal("no report at the deadline")
	}
	w := a.(witnessAction)
	for i, h := range map[int]p2p.Hash{0: h0, 1: h1} {
		m := rec.members[i]
		if !w.report.Participants.Contains(m.Signer) || !w.report.Broadcasts.Contains(Commitment(m.Signer, 5, h)) {
			t.Errorf("member %d delivered but is not in the report", i)
		}
	}
	if w.report.Participants.Contains(rec.members[2].Signer) && w.report.Broadcasts.Contains(Commitment(rec.members[2].Signer, 5, p2p.Hash{3})) {
		t.Error("member 2 never delivered but is in the report")
	}
	deliver(2)
	if a, ok := e.witness(at(e, s, time.Unix(1000, 0)), in, rec); !ok || !a.(witnessAction).all {
		t.Error("no report at once when everyone delivered")
	}
}

// Joining: a client that is not a member joins at once (the first time
// simulated); a pending one waits; a member that cannot train by the
// epoch's second round steps aside and joins again only once it holds the model.
func TestMembershipDecisions(t *testing.T) {
	s := testState(t, 3)
	startRound(s, 5, 0)
	e := testEngine()
	if a, ok := e.membership(at(e, s, time.Time{}), false); !ok || !a.(joinAction).first {
		t.Fatalf("an outsider: %v %v, want its first join", a, ok)
	}
	e.dataOpen, e.joinedEpoch = true, int64(s.Progress.Epoch)
	if _, ok := e.membership(at(e, s, time.Time{}), false); ok {
		t.Error("joined again in the same epoch")
	}

	m := memberEngine(s, 1)
	m.model = modelLoading
	if _, ok := m.membership(at(m, s, time.Time{}), false); ok {
		t.Error("a member loading the model left in the epoch's first round")
	}
	startRound(s, 7, 2)
	m.model = modelNone // restarted: it looks for a checkpoint before anything else
	if a, ok := m.membership(at(m, s, time.Time{}), false); ok {
		t.Errorf("a member stepped aside before building its model: %v", a)
	}
	m.model = modelLoading
	if a, ok := m.membership(at(m, s, time.Time{}), false); !ok || a.String() != (stepAsideAction{}).String() {
		t.Fatalf("a member without the model in round 2: %v %v, want to step aside", a, ok)
	}
	if _, ok := m.membership(at(m, s, time.Time{}), true); ok {
		t.Error("a member holding the model stepped aside or joined")
	}
	// Out of the epoch (dropped from it), still loading: it waits.
	s.Epoch.ClientsLen = 0
	m.holdJoin, m.dataOpen = true, true
	if _, ok := m.membership(at(m, s, time.Time{}), false); ok {
		t.Error("joined again before holding the model")
	}
	if a, ok := m.membership(at(m, s, time.Time{}), true); !ok || a.(joinAction).first {
		t.Errorf("holding the model again: %v %v, want a (not first) join", a, ok)
	}
}

// A run that wants another client version ends the client.
func TestDecideVersionMismatch(t *testing.T) {
	s := testState(t, 1)
	clear(s.ClientVersion[:])
	copy(s.ClientVersion[:], "v9")
	e := testEngine()
	e.version = "v1"
	if _, err := e.decide(view(e, s), noInputs(), time.Now()); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("err %v, want ErrVersionMismatch", err)
	}
}

// From the third round of an epoch, members of the previous round that a
// quorum of its witnesses did not see deliver are accused, once each; the
// client never accuses itself.
func TestHealthChecksOnce(t *testing.T) {
	s := testState(t, 3)
	startRound(s, 6, 1)
	prev := coordinator.CurrentRound(s)
	bits, hashes := schedule.BloomParams(3)
	b, _ := schedule.NewBloom(bits, hashes, [8]byte{1})
	b.Add(s.Clients[0].Signer)
	b.Add(s.Clients[1].Signer) // member 2 did not deliver
	prev.Witnesses[0].ParticipantBloom, prev.WitnessesLen = coordinator.BloomOf(b), 1
	startRound(s, 7, 2)
	e := memberEngine(s, 0)
	var acts []action
	e.healthChecks(at(e, s, time.Time{}), func(a action) { acts = append(acts, a) })
	hc, ok := only[healthCheckAction](acts)
	if !ok || hc.index != 2 || hc.step != 7 {
		t.Fatalf("health checks %v, want member 2 at step 7", kinds(acts))
	}
	acts = nil
	e.healthChecks(at(e, s, time.Time{}), func(a action) { acts = append(acts, a) })
	if len(acts) != 0 {
		t.Errorf("accused again: %v", kinds(acts))
	}
	self := memberEngine(s, 2)
	acts = nil
	self.healthChecks(at(self, s, time.Time{}), func(a action) { acts = append(acts, a) })
	if len(acts) != 0 {
		t.Errorf("a client accused itself: %v", kinds(acts))
	}
}

// A client loading the model downloads the newest root a quorum of the
// model holders announced, for a step it can catch up from.
func TestStartLoadTakesAQuorumRoot(t *testing.T) {
	s := testState(t, 3)
	startRound(s, 9, 3)
	e := testEngine()
	e.model, e.followFrom = modelLoading, 6
	ids := make([]peer.ID, 3)
	for i := range ids {
		ids[i], _ = identity.PeerIDFromPublicKey(s.Clients[i].P2PIdentity[:])
	}
	in := noInputs()
	good, odd := p2p.Hash{1}, p2p.Hash{2}
	in.roots = map[uint32]map[peer.ID]p2p.Hash{
		4: {ids[0]: good, ids[1]: good, ids[2]: good},       // too old: rounds 5.. not seen whole
		7: {ids[0]: good, ids[1]: good, ids[2]: odd},        // a quorum (2 of 3)
		8: {ids[0]: odd, ids[1]: p2p.Hash{3}, ids[2]: good}, // no quorum
	}
	now := time.Unix(1000, 0)
	a, ok := e.startLoad(at(e, s, now), in, now)
	if l, _ := a.(loadModelAction); !ok || l.step != 7 || l.root != good {
		t.Fatalf("%v %v, want the model of step 7 with root %v", a, ok, good)
	}
	if _, ok := e.startLoad(at(e, s, now), in, now); ok {
		t.Error("a second download while one runs")
	}
	// A failed download is retried after loadRetry, not before.
	in.loaded = &loadedModel{step: 7, err: errors.New("gone")}
	e.decide(at(e, s, now), in, now)
	in.loaded = nil
	if _, ok := e.startLoad(at(e, s, now), in, now.Add(loadRetry/2)); ok {
		t.Error("retried a failed download at once")
	}
	if _, ok := e.startLoad(at(e, s, now), in, now.Add(loadRetry)); !ok {
		t.Error("did not retry a failed download after loadRetry")
	}
}

// A client with benchmark tasks scores each epoch's model once, when it is
// current: in Cooldown, or once the run is Finished if Cooldown passed
// unseen; never a model it does not hold yet, and not without tasks.
func TestBenchmarkOncePerModel(t *testing.T) {
	s := testState(t, 2)
	startRound(s, 6, 1)
	s.RunState = uint8(coordinator.Cooldown)
	e := memberEngine(s, 0)
	v := at(e, s, time.Time{})
	if _, ok := e.benchmark(v, true, 5); ok {
		t.Fatal("benchmarked without tasks")
	}
	e.benchmarks = true
	if _, ok := e.benchmark(v, false, 5); ok {
		t.Fatal("benchmarked a model the client does not hold")
	}
	a, ok := e.benchmark(v, true, 5)
	if b, isB := a.(benchmarkAction); !ok || !isB || b.step != 5 || b.epoch != v.Epoch {
		t.Fatalf("benchmark %v %v, want step 5 of epoch %d", a, ok, v.Epoch)
	}
	if _, ok := e.benchmark(v, true, 5); ok {
		t.Error("benchmarked step 5 twice")
	}
	s.RunState = uint8(coordinator.Finished)
	if _, ok := e.benchmark(at(e, s, time.Time{}), true, 5); ok {
		t.Error("benchmarked step 5 again once Finished")
	}
	if _, ok := e.benchmark(at(e, s, time.Time{}), true, 8); !ok {
		t.Error("the final model, unseen in Cooldown, was not benchmarked")
	}
}
