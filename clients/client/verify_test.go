package client

import (
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// The verification part of the consensus rule: committed to this payload,
// and either not to be verified or judged MATCH.
func TestVerificationRule(t *testing.T) {
	payload := [32]byte{1}
	var seed [32]byte
	unsampled := -1
	for i := range 64 { // an index the seed does not sample at 25%
		if !schedule.Sampled(seed, uint16(i), 25) {
			unsampled = i
			break
		}
	}
	commit := func(verdict uint8, probation bool) commitRecord {
		return commitRecord{committed: true, payload: payload, verdict: verdict, probation: probation}
	}
	cases := []struct {
		name string
		c    commitRecord
		hash [32]byte
		want bool
	}{
		{"not committed", commitRecord{}, payload, false},
		{"another payload than committed", commit(coordinator.VerdictMatch, false), [32]byte{2}, false},
		{"not sampled, not judged", commit(coordinator.VerdictNone, false), payload, true},
		{"on probation, not judged", commit(coordinator.VerdictNone, true), payload, false},
		{"on probation, MATCH", commit(coordinator.VerdictMatch, true), payload, true},
		{"on probation, MISMATCH", commit(coordinator.VerdictMismatch, true), payload, false},
		{"on probation, NO_DATA", commit(coordinator.VerdictNoData, true), payload, false},
	}
	for _, tc := range cases {
		commits := make([]commitRecord, unsampled+1)
		commits[unsampled] = tc.c
		vr := &verification{percent: 25, seed: seed, commits: commits}
		if got := vr.admits(unsampled, tc.hash); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
	var off *verification // a run that does not verify
	if !off.admits(0, payload) || off.excludes(0) {
		t.Error("a run without verification left a payload out")
	}
}

// verifyState is a round of 4 members in RoundWitness with every member
// committed and verification_percent 100; the engine is member `me`.
func verifyState(t *testing.T, e *engine, me int) *coordinator.State {
	t.Helper()
	s := testState(t, 4)
	s.Clients[me].Signer = e.me
	s.Config.VerificationPercent = 100
	startRound(s, 5, 2)
	r := coordinator.CurrentRound(s)
	r.VerifySeed = [32]byte{9}
	for i := range 4 {
		r.Commits[i].Flags = coordinator.CommitCommitted
		r.Commits[i].Payload = [32]byte{byte(i + 1)}
	}
	e.captureRounds(view(e, s))
	s.RunState = uint8(coordinator.RoundWitness)
	e.model, e.lastStep = modelReady, 4
	return s
}

// A member replays exactly the contributions the seed assigns it, once the
// round's training phase closed and while it holds the round's starting
// weights; it posts each verdict once.
func TestVerifierReplaysItsAssignments(t *testing.T) {
	e := testEngine()
	me, _ := schedule.Verifier([32]byte{9}, 0, 4) // so member 0's is ours
	s := verifyState(t, e, int(me))
	var mine []int
	for i := range 4 {
		if v, ok := schedule.Verifier([32]byte{9}, uint16(i), 4); ok && v == me {
			mine = append(mine, i)
		}
	}
	collect := func(in *inputs, current bool, step uint32) (replays, verdicts []int) {
		var acts []action
		e.verifications(view(e, s), in, current, step, func(a action) { acts = append(acts, a) })
		for _, a := range acts {
			switch a := a.(type) {
			case replayAction:
				replays = append(replays, a.index)
			case verdictAction:
				verdicts = append(verdicts, int(a.idx))
			}
		}
		return replays, verdicts
	}
	s.RunState = uint8(coordinator.RoundTrain)
	if r, _ := collect(noInputs(), true, 4); len(r) > 0 {
		t.Fatalf("replays %v before the training phase closed (the seed is not drawn yet)", r)
	}
	s.RunState = uint8(coordinator.RoundWitness)
	if r, _ := collect(noInputs(), false, 3); len(r) > 0 {
		t.Fatalf("replays %v without the round's starting weights", r)
	}
	r, _ := collect(noInputs(), true, 4)
	if len(r) != len(mine) || r[0] != mine[0] {
		t.Fatalf("replays %v, want the assigned %v", r, mine)
	}
	if again, _ := collect(noInputs(), true, 4); len(again) > 0 {
		t.Fatalf("replays %v started twice", again)
	}
	in := noInputs()
	in.verdicts = map[replayKey]replayResult{{5, uint32(mine[0])}: {verdict: coordinator.VerdictMatch}}
	if _, v := collect(in, true, 4); len(v) != 1 || v[0] != mine[0] {
		t.Fatalf("verdicts %v, want one on member %d", v, mine[0])
	}
	e.posted[replayKey{5, uint32(mine[0])}] = true
	if _, v := collect(in, true, 4); len(v) > 0 {
		t.Fatalf("verdict posted twice: %v", v)
	}
	// A verdict on chain ends it: nothing to replay or post.
	coordinator.CurrentRound(s).Commits[mine[0]].Verdict = coordinator.VerdictMatch
	delete(e.posted, replayKey{5, uint32(mine[0])})
	if r, v := collect(in, true, 4); len(r)+len(v) > 0 {
		t.Fatalf("acted on a judged contribution: replays %v, verdicts %v", r, v)
	}
}

// A committee member replays a disputed step once it holds the weights the
// step started from, then votes; the accused answers only when its rerun
// reproduces the accuser's bits.
func TestDisputeDecisions(t *testing.T) {
	e := testEngine()
	s := verifyState(t, e, 2)
	d := &s.Disputes[0]
	d.State, d.Id, d.Step, d.CommitteeLen = coordinator.DisputeOpen, 7, 5, 2
	d.Committee = [3]uint16{2, 3}
	d.TrainerSlot, d.AccuserSlot, d.Kind = 0, 1, coordinator.VerdictMismatch
	d.ClaimedPayload, d.ClaimedAfter = [32]byte{4}, [32]byte{5}
	decide := func(in *inputs) []action {
		var acts []action
		e.disputes(view(e, s), in, func(a action) { acts = append(acts, a) })
		return acts
	}
	if acts := decide(noInputs()); len(acts) > 0 {
		t.Fatalf("acted without the step's starting weights: %v", acts)
	}
	e.snapshots[5] = true
	acts := decide(noInputs())
	if len(acts) != 1 {
		t.Fatalf("actions %v, want one replay", acts)
	}
	if j, ok := acts[0].(judgeAction); !ok || j.vote != 0 {
		t.Fatalf("action %v, want a replay as committee member 0", acts[0])
	}
	if acts := decide(noInputs()); len(acts) > 0 {
		t.Fatalf("replayed twice: %v", acts)
	}
	in := noInputs()
	in.judgements = map[uint64]replayResult{7: {verdict: coordinator.VerdictMatch}}
	acts = decide(in)
	if v, ok := acts[0].(voteAction); len(acts) != 1 || !ok || v.vote != coordinator.VerdictMatch || v.id != 7 {
		t.Fatalf("actions %v, want a MATCH vote on dispute 7", acts)
	}
	if acts := decide(in); len(acts) > 0 {
		t.Fatalf("voted twice: %v", acts)
	}

	// The accused.
	e2 := testEngine()
	s2 := verifyState(t, e2, 0)
	s2.Disputes[0] = *d
	e2.snapshots[5] = true
	decide2 := func(in *inputs) []action {
		var acts []action
		e2.disputes(view(e2, s2), in, func(a action) { acts = append(acts, a) })
		return acts
	}
	if acts := decide2(noInputs()); len(acts) != 1 {
		t.Fatalf("the accused: actions %v, want its rerun", acts)
	}
	honest := noInputs()
	honest.judgements = map[uint64]replayResult{7: {verdict: coordinator.VerdictMatch, claimPayload: [32]byte{8}, claimAft: [32]byte{9}}}
	if acts := decide2(honest); len(acts) > 0 {
		t.Fatalf("the accused answered with a rerun that does not reproduce the accuser's bits: %v", acts)
	}
	e2.judged = map[uint64]bool{}
	transient := noInputs()
	transient.judgements = map[uint64]replayResult{7: {verdict: coordinator.VerdictMismatch, claimPayload: [32]byte{4}, claimAft: [32]byte{5}}}
	if acts := decide2(transient); len(acts) != 1 {
		t.Fatalf("the accused whose rerun gives the accuser's bits: actions %v, want an answer", acts)
	} else if _, ok := acts[0].(answerAction); !ok {
		t.Fatalf("action %v, want an answer", acts[0])
	}
}
