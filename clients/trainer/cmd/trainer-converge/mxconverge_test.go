package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// Contract v3 (mx8) against v2 (fp32) on real text, a short version of the
// trainer README's "mx8 convergence" measurement: the light config, AdamW on
// one node (ddp with 1 client of 4 sequences of 64 tokens a step), 400 steps
// of the State of the Union addresses up to 2000 (the tool's batches: the
// same tokens for both contracts), warmup 10 steps, cosine to 10% of the
// peak lr 1e-3, clipping 1, init seed 31; held-out loss on 32 windows of the
// addresses after 2000. The mx8 loss must be within +1% of fp32's. Results
// are bit-exact, so every run gives the same numbers:
//
//	fp32 2.6122, mx8 2.6117 (-0.02%).
//
// The bound can fail: fp32's own loss after half the tokens (step 200,
// 2.679, +2.6%) exceeds it, which the test checks, so an mx8 that needed
// twice fp32's tokens to reach its loss would fail it, as would anything
// that breaks training outright. At lr 2e-3 this short run has loss spikes
// (one step's training loss jumps to 5-7) that land differently in every
// variant of the arithmetic, and the final gap moved between -1.6% and
// +1.9% with the GEMMs' slices; at 1e-3 it has none, and the contract's own
// effect shows. About 20 s on 2 cores.
func TestMXConvergence(t *testing.T) {
	needCorpus(t)
	const steps, half = 400, 200
	args := []string{"-configs", "light", "-arith", "fp32,mx8", "-methods", "ddp", "-adam-lr", "1e-3",
		"-clients", "1", "-per-client", "4", "-steps", "400", "-every", "200", "-threads", "2"}
	var out, progress bytes.Buffer
	results, err := measure(context.Background(), args, &out, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	loss := map[string]result{}
	for _, r := range results {
		loss[r.arith] = r
	}
	fp, mx := loss[trainer.ArithFP32], loss[trainer.ArithMX8]
	if len(results) != 2 || fp.curve == nil || mx.curve == nil {
		t.Fatalf("want one fp32 and one mx8 run, got:\n%s", out.String())
	}
	gap := mx.loss/fp.loss - 1
	t.Logf("held-out loss after %d steps of 256 tokens: fp32 %.4f, mx8 %.4f (%+.2f%%)", steps, fp.loss, mx.loss, 100*gap)
	if mx.loss == fp.loss {
		t.Errorf("mx8 and fp32 both %.4f: the contract had no effect", fp.loss)
	}
	if !(gap <= mxTolerance) {
		t.Errorf("mx8 held-out loss %.4f is %+.2f%% from fp32's %.4f: want at most %+.0f%%", mx.loss, 100*gap, fp.loss, 100*mxTolerance)
	}
	var atHalf float64
	for _, p := range fp.curve {
		if p.step == half {
			atHalf = p.loss
		}
	}
	if !(atHalf/fp.loss-1 > mxTolerance) {
		t.Errorf("fp32 after %d steps %.4f, after %d %.4f: half the tokens is within %+.0f%%, so the bound does not tell a slower mx8 apart",
			half, atHalf, steps, fp.loss, 100*mxTolerance)
	}
}
