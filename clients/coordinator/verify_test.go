package coordinator_test

import (
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// The deployed program takes commitments, verdicts and a dispute's vote:
// three members commit, their drawn verifiers judge, a MISMATCH opens a
// dispute whose one-member committee puts the trainer at fault; every
// rejection leaves the accounts unchanged.
func TestVerificationOnChain(t *testing.T) {
	e := setup(t, "verify-run")
	a := e.authority
	clients := e.newClients(3)
	keys := byKey(clients)
	config, model := testRun(t)
	config.VerificationPercent, config.RoundWitnessTime = 100, 10
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))
	for _, c := range clients {
		e.join(c)
	}
	s := e.waitFor(coordinator.RoundTrain, a)
	r := coordinator.CurrentRound(s)
	members := coordinator.Members(s)[:r.ClientsLen]
	commit := func(i uint16) coordinator.CommitArgs {
		return coordinator.CommitArgs{Step: r.Step, Index: i, Payload: [32]byte{byte(i), 1}, StateBefore: [32]byte{byte(i), 2},
			StateAfter: [32]byte{byte(i), 3}, Fresh: true}
	}
	for _, m := range members {
		e.mustSend(keys[m.Signer].key, e.ix(e.run.Commit(m.Signer, commit(m.Index))))
	}
	first := keys[members[0].Signer].key
	e.expectError("AlreadyCommitted", first, e.ix(e.run.Commit(first.PublicKey(), commit(0))))
	linked := commit(0)
	linked.Fresh, linked.StateBefore = false, [32]byte{9}
	e.expectError("AlreadyCommitted", first, e.ix(e.run.Commit(first.PublicKey(), linked)))
	s = e.state()
	if got := coordinator.CurrentRound(s).Commits[0]; got.Payload != commit(0).Payload || got.Flags&coordinator.CommitCommitted == 0 {
		t.Fatalf("stored commitment %+v", got)
	}
	for _, m := range members {
		if schedule.IsWitness(m.Index, r.ClientsLen, s.Config.WitnessNodes, schedule.Seed(r.Seed)) {
			e.mustSend(keys[m.Signer].key, e.ix(e.run.Witness(m.Signer, e.report(s, m.Index, keys))))
		}
	}
	s = e.state()
	if coordinator.Phase(s) != coordinator.RoundWitness {
		t.Fatalf("after the witnesses: %v", coordinator.Phase(s))
	}
	// The verify seed comes from a later slot: a tick draws it.
	for coordinator.CurrentRound(s).VerifySeed == ([32]byte{}) {
		e.tick()
		s = e.state()
	}
	r = coordinator.CurrentRound(s)
	seed := schedule.Seed(r.VerifySeed)
	verify := func(trainer uint16, verdict uint8) (coordinator.VerifyArgs, *client) {
		v, _ := schedule.Verifier(seed, trainer, r.ClientsLen)
		args := coordinator.VerifyArgs{Step: r.Step, VerifierIndex: v, Index: trainer, Verdict: verdict}
		if verdict == coordinator.VerdictMismatch {
			args.ClaimedPayload, args.ClaimedAfter = [32]byte{0xaa}, [32]byte{0xbb}
		}
		return args, keys[members[v].Signer]
	}
	args, verifier := verify(0, coordinator.VerdictMismatch)
	other := keys[members[3-args.VerifierIndex].Signer] // neither the trainer (0) nor the verifier
	wrong := args
	wrong.VerifierIndex = 3 - args.VerifierIndex
	e.expectError("NotTheVerifier", other.key, e.ix(e.run.Verify(other.key.PublicKey(), wrong)))
	e.mustSend(verifier.key, e.ix(e.run.Verify(verifier.key.PublicKey(), args)))
	e.expectError("AlreadyJudged", verifier.key, e.ix(e.run.Verify(verifier.key.PublicKey(), args)))
	args1, verifier1 := verify(1, coordinator.VerdictMatch)
	e.mustSend(verifier1.key, e.ix(e.run.Verify(verifier1.key.PublicKey(), args1)))

	s = e.state()
	d, ok := coordinator.FindDispute(s, 1)
	if !ok || d.State != coordinator.DisputeOpen || d.CommitteeLen != 1 || d.ClaimedAfter != args.ClaimedAfter {
		t.Fatalf("dispute %+v", d)
	}
	trainer := keys[members[0].Signer].key
	e.expectError("RerunDiffers", trainer, e.ix(e.run.AnswerDispute(trainer.PublicKey(), 1, [32]byte{0xaa}, [32]byte{0xcc})))
	judge := keys[s.Clients[d.Committee[0]].Signer].key
	e.expectError("InvalidVote", judge, e.ix(e.run.JudgeDispute(judge.PublicKey(), 1, 7)))
	e.mustSend(judge, e.ix(e.run.JudgeDispute(judge.PublicKey(), 1, coordinator.VerdictMismatch)))
	s = e.state()
	if d, _ := coordinator.FindDispute(s, 1); d.State != coordinator.DisputeTrainerFault || s.Epoch.Clients[0].State != coordinator.MemberFaulted {
		t.Fatalf("after the vote: dispute %d, trainer %d", d.State, s.Epoch.Clients[0].State)
	}
	e.expectError("DisputeNotOpen", trainer, e.ix(e.run.AnswerDispute(trainer.PublicKey(), 1, [32]byte{0xaa}, [32]byte{0xbb})))
}
