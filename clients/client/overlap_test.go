package client

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
)

// Overlapped rounds, one decision at a time (the rule is in consensus.go;
// overlap_sim_test.go runs whole simulated runs).

// overlapState is a running overlapped round (step, height) of 3 members.
func overlapState(t *testing.T, step, height uint32) *coordinator.State {
	s := testState(t, 3)
	s.Config.Overlap = 1
	s.Config.TotalSteps = 100
	s.Config.MaxRoundTrainTime = 10
	startRound(s, step, height)
	return s
}

// witnessNone adds a report of the current round whose filters are empty:
// in an overlapped round it attests nobody's payload of the round before,
// so that round applies with nothing and needs no payload here.
func witnessNone(t *testing.T, s *coordinator.State) { witnessReport(t, s, false) }

// trains is the train action in acts, if any.
func trains(acts []action) (trainAction, bool) {
	for _, a := range acts {
		if t, ok := a.(trainAction); ok {
			return t, true
		}
	}
	return trainAction{}, false
}

// A member trains an overlapped round on the model of two steps before
// (one before in an epoch's first round); a round is applied with the next
// round's reports, so once the round after it is over.
func TestOverlappedRoundsTrainAndApplyOneLate(t *testing.T) {
	s := overlapState(t, 5, 0)
	e := memberEngine(s, 0)
	e.model, e.lastStep, e.joinedEpoch, e.warmedEpoch = modelReady, 4, 0, 0
	now := time.Unix(0, 0)
	acts, err := e.decide(view(e, s), noInputs(), now)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := trains(acts); !ok || a.rec.step != 5 {
		t.Fatalf("epoch's first round, model of step 4: %v, want to train step 5", kinds(acts))
	}
	e.rounds[5].trained = &trainStats{}

	// Round 6 starts with round 5's reports final: round 5 is not applied
	// (its payloads are attested by round 6's reports), and round 6 trains
	// on the model of step 4.
	witnessNone(t, s)
	startRound(s, 6, 1)
	acts, err = e.decide(view(e, s), noInputs(), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if _, ok := a.(applyAction); ok {
			t.Fatalf("round 6 running: %v, want round 5 not applied yet", kinds(acts))
		}
	}
	if a, ok := trains(acts); !ok || a.rec.step != 6 {
		t.Fatalf("round 6 with the model of step 4: %v, want to train step 6", kinds(acts))
	}
	e.rounds[6].trained = &trainStats{}

	// Round 7: round 6's reports (which attest round 5) are final.
	witnessNone(t, s)
	startRound(s, 7, 2)
	acts, err = e.decide(view(e, s), noInputs(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) == 0 {
		t.Fatal("round 7: nothing decided")
	}
	a, ok := acts[0].(applyAction)
	if !ok || a.rec.step != 5 {
		t.Fatalf("round 7: %v, want to apply step 5 first", kinds(acts))
	}
	if len(a.rec.broadcasts) != 1 || a.rec.unattested {
		t.Errorf("step 5 applied with %d reports (unattested %v), want round 6's one", len(a.rec.broadcasts), a.rec.unattested)
	}
	e.applied(a.rec)
	acts, _ = e.decide(view(e, s), noInputs(), now)
	if tr, ok := trains(acts); !ok || tr.rec.step != 7 {
		t.Fatalf("round 7 with the model of step 5: %v, want to train step 7", kinds(acts))
	}
}

// The last round of an epoch is attested by nobody: it is applied empty
// once the rounds are over, the round before it with its reports; members
// do not train a round they know to be the last.
func TestOverlappedEpochEnd(t *testing.T) {
	s := overlapState(t, 7, 2)
	e := memberEngine(s, 0)
	e.model, e.lastStep, e.joinedEpoch, e.warmedEpoch = modelReady, 6, 0, 0
	e.captureRounds(view(e, s))
	witnessNone(t, s)
	startRound(s, 8, 3)
	e.captureRounds(view(e, s))
	witnessNone(t, s)
	startRound(s, 9, 4)
	s.Epoch.LastStep = 10 // round 9 is the drain's last
	acts, err := e.decide(view(e, s), noInputs(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) == 0 {
		t.Fatal("round 9: nothing decided")
	}
	if a, ok := acts[0].(applyAction); !ok || a.rec.step != 7 {
		t.Fatalf("round 9: %v, want to apply step 7 first", kinds(acts))
	} else {
		e.applied(a.rec)
	}
	if a, ok := trains(acts); ok {
		t.Fatalf("trained %v in the epoch's last round", a)
	}
	witnessNone(t, s)
	s.RunState = uint8(coordinator.Cooldown)
	s.Progress.Step = 10
	var applied []*roundRecord
	for _, a := range planned(t, e, s) {
		if ap, ok := a.(applyAction); ok {
			applied = append(applied, ap.rec)
		}
	}
	if len(applied) != 2 || applied[0].step != 8 || applied[0].unattested || applied[1].step != 9 || !applied[1].unattested {
		t.Fatalf("in Cooldown: applied %v, want step 8 attested and step 9 unattested", applied)
	}
	if acc, err := acceptedPayloads(applied[1], noInputs()); err != nil || len(acc) != 0 {
		t.Errorf("the unattested round accepts %v (%v), want nothing", acc, err)
	}
}

// A round before an epoch that began right after it is unattested too,
// even when the client never saw that epoch's first round.
func TestOverlappedRoundEndedByANewEpoch(t *testing.T) {
	s := overlapState(t, 8, 3)
	e := memberEngine(s, 0)
	e.captureRounds(view(e, s))
	rec := e.rounds[8]
	for i := range s.Epoch.Rounds {
		s.Epoch.Rounds[i] = coordinator.Round{}
	}
	s.Epoch.StartStep = 9
	startRound(s, 10, 1)
	e.captureRounds(view(e, s))
	if !rec.final || !rec.unattested {
		t.Fatalf("round 8 before an epoch that began at step 9: final %v unattested %v", rec.final, rec.unattested)
	}
}

// An overlapped round's witness reports the previous round's payloads,
// and only once every member of its own round announced (finished
// training) and the previous round's payloads are all here, or at the
// deadline.
func TestOverlappedWitness(t *testing.T) {
	s := overlapState(t, 5, 1)
	s.RunStateStart = 1000
	e := memberEngine(s, 0)
	startRound(s, 4, 0)
	e.captureRounds(at(e, s, time.Unix(1000, 0)))
	startRound(s, 5, 1)
	e.captureRounds(at(e, s, time.Unix(1000, 0)))
	prev, rec := e.rounds[4], e.rounds[5]
	in := noInputs()
	in.payloads[4] = map[peer.ID]payloadState{}
	in.payloads[5] = map[peer.ID]payloadState{}
	for i := range 3 {
		in.payloads[4][prev.peers[i]] = payloadState{p2p.Hash{4, byte(i)}, true}
	}
	early := at(e, s, time.Unix(1001, 0))
	if _, ok := e.witness(early, in, rec); ok {
		t.Fatal("reported before the round's members announced")
	}
	for i := range 3 {
		in.payloads[5][rec.peers[i]] = payloadState{p2p.Hash{5, byte(i)}, false} // announced, not fetched
	}
	a, ok := e.witness(early, in, rec)
	if !ok || !a.(witnessAction).all {
		t.Fatal("no report once round 4 was delivered and round 5 announced")
	}
	w := a.(witnessAction).report
	if w.Step != 5 {
		t.Errorf("report for step %d, want the current round's 5", w.Step)
	}
	// A filter has false positives (a few percent at 3 members), so round
	// 5's payloads count as in the report only if all of them test positive.
	in5 := 0
	for i, m := range prev.members {
		if !w.Broadcasts.Contains(Commitment(m.Signer, 4, p2p.Hash{4, byte(i)})) || !w.Participants.Contains(m.Signer) {
			t.Errorf("round 4 member %d delivered but is not in the report", i)
		}
		if w.Broadcasts.Contains(Commitment(rec.members[i].Signer, 5, p2p.Hash{5, byte(i)})) {
			in5++
		}
	}
	if in5 == len(rec.members) {
		t.Error("round 5's payloads are in the report")
	}
	// A payload of round 4 missing: wait until the deadline.
	in.payloads[4][prev.peers[2]] = payloadState{p2p.Hash{4, 2}, false}
	if _, ok := e.witness(early, in, rec); ok {
		t.Error("reported with a round-4 payload missing before the deadline")
	}
	if _, ok := e.witness(at(e, s, time.Unix(1000, 0).Add(10*time.Second-witnessMargin(10*time.Second))), in, rec); !ok {
		t.Error("no report at the deadline")
	}
}
