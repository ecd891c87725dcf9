package coordinator_test

import (
	"slices"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// report_prompt on the deployed program: a registered client's tokens for a
// trained step come back as a PromptReported event from the transaction's
// logs and change no byte of the run's accounts; every refusal leaves them
// unchanged too.
func TestReportPromptOnChain(t *testing.T) {
	e := setup(t, "prompt-run")
	a := e.authority
	c := e.newClients(1)[0]
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	report := coordinator.PromptReport{Step: 2, Prompt: 5, Tokens: []uint32{17, 0, 255}}
	send := func(signer solana.PrivateKey, r coordinator.PromptReport) []solana.Instruction {
		return e.ix(e.run.ReportPrompt(signer.PublicKey(), r))
	}
	e.expectError("RunUninitialized", c.key, send(c.key, report))

	config, model := testRun(t)
	progress := coordinator.Progress{Step: 3} // steps 1 and 2 trained
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model, Progress: &progress})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))
	e.join(c)

	before := e.raw()
	sig := e.mustSend(c.key, send(c.key, report))
	if e.raw() != before {
		t.Error("report_prompt changed the run's accounts")
	}
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	evs := coordinator.PromptReports(logs)
	if len(evs) != 1 {
		t.Fatalf("%d PromptReported events in %q", len(evs), logs)
	}
	ev := evs[0]
	if !ev.Signer.Equals(c.key.PublicKey()) || ev.Epoch != 0 || ev.Step != 2 || ev.Prompt != 5 ||
		!slices.Equal(ev.Tokens[:ev.Len], report.Tokens) || slices.ContainsFunc(ev.Tokens[ev.Len:], func(t uint32) bool { return t != 0 }) {
		t.Errorf("PromptReported %+v", ev)
	}
	if len(coordinator.EvalReports(logs)) != 0 {
		t.Error("a PromptReported event decoded as EvalReported")
	}
	full := report
	full.Tokens = slices.Repeat([]uint32{model.VocabSize - 1}, coordinator.MaxPromptTokens)
	e.mustSend(c.key, send(c.key, full))

	e.expectError("NotAClient", outsider, send(outsider, report))
	for name, edit := range map[string]func(*coordinator.PromptReport){
		"step 0":               func(r *coordinator.PromptReport) { r.Step = 0 },
		"step not yet trained": func(r *coordinator.PromptReport) { r.Step = 3 },
		"no tokens":            func(r *coordinator.PromptReport) { r.Tokens = nil },
		"33 tokens":            func(r *coordinator.PromptReport) { r.Tokens = make([]uint32, coordinator.MaxPromptTokens+1) },
		"id of vocab_size":     func(r *coordinator.PromptReport) { r.Tokens = []uint32{1, model.VocabSize} },
	} {
		t.Log(name) // names the case expectError fails on
		bad := report
		edit(&bad)
		e.expectError("PromptReport", c.key, send(c.key, bad))
	}
}
