package coordinator_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// report_eval on the deployed program: a registered client's score of a
// trained step comes back as an EvalReported event from the transaction's
// logs and changes no byte of the run's accounts; every refusal leaves them
// unchanged too.
func TestReportEvalOnChain(t *testing.T) {
	e := setup(t, "eval-run")
	a := e.authority
	c := e.newClients(1)[0]
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	report := coordinator.EvalReport{Step: 2, Task: "hellaswag", Acc: 0.25, AccNorm: 0.5, Count: 100}
	send := func(signer solana.PrivateKey, r coordinator.EvalReport) []solana.Instruction {
		return e.ix(e.run.ReportEval(signer.PublicKey(), r))
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
		t.Error("report_eval changed the run's accounts")
	}
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	evs := coordinator.EvalReports(logs)
	if len(evs) != 1 {
		t.Fatalf("%d EvalReported events in %q", len(evs), logs)
	}
	ev := evs[0]
	if !ev.Signer.Equals(c.key.PublicKey()) || ev.Epoch != 0 || ev.Step != 2 || coordinator.FixedString(ev.Task[:]) != "hellaswag" ||
		ev.Acc != 0.25 || ev.AccNorm != 0.5 || ev.Count != 100 {
		t.Errorf("EvalReported %+v", ev)
	}

	e.expectError("NotAClient", outsider, send(outsider, report))
	for name, edit := range map[string]func(*coordinator.EvalReport){
		"step 0":               func(r *coordinator.EvalReport) { r.Step = 0 },
		"step not yet trained": func(r *coordinator.EvalReport) { r.Step = 3 },
		"empty task":           func(r *coordinator.EvalReport) { r.Task = "" },
		"33-byte task":         func(r *coordinator.EvalReport) { r.Task = strings.Repeat("x", coordinator.MaxEvalTaskLen+1) },
		"non-UTF-8 task":       func(r *coordinator.EvalReport) { r.Task = "arc\xff" },
		"acc above 1":          func(r *coordinator.EvalReport) { r.Acc = 1.0001 },
		"negative acc_norm":    func(r *coordinator.EvalReport) { r.AccNorm = -0.5 },
		"count 0":              func(r *coordinator.EvalReport) { r.Count = 0 },
	} {
		t.Log(name) // names the case expectError fails on
		bad := report
		edit(&bad)
		e.expectError("EvalReport", c.key, send(c.key, bad))
	}
	// The Borsh encoder refuses NaN itself (the program would: EvalReport).
	nan := report
	nan.Acc = float32(math.NaN())
	if _, err := e.run.ReportEval(c.key.PublicKey(), nan); err == nil {
		t.Error("a NaN score was encoded")
	}
}
