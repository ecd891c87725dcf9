package main

import (
	"bytes"
	"context"
	"testing"
)

// A short version of the trainer README's overlap sweep: SparseLoCo with
// its defaults (10 inner steps, top-6, 2-bit values, outer rate 8 summed
// over members: 1 up to 8 clients, 1/2 at 16) on the light config, 300
// global steps of the State of the Union addresses at 2, 8 and 16 clients,
// each round applied at its end and one round late (compensated, as an
// overlapping client trains). No run may end above the untrained model's
// held-out loss, and a delayed run may not end more than overlapTolerance
// above the same run without delay. Results are bit-exact, so every run
// gives the same numbers: 2 clients 2.8315 without delay, 2.8471 delayed
// (+0.6%); 8 clients 2.6878 and 2.7771 (+3.3%); 16 clients 2.6838 and
// 2.7694 (+3.2%; the cost shrinks with training: +1.6% and +1.1% after 900
// steps). Earlier outer steps fail: rate 1 at 16 clients (outer rate 16)
// ends at 2.6863 and 2.8489 delayed (+6.1%), and the mean of the payloads
// times 2 per member diverged at 8 clients (2.7427 without delay, 38.4202
// delayed). About 2 minutes on 2 cores.
func TestOverlapDoesNotDiverge(t *testing.T) {
	needCorpus(t)
	const overlapTolerance = 0.05
	args := []string{"-configs", "light", "-methods", "loco10,loco10+delay", "-adam-lr", "", "-demo-lr", "",
		"-clients", "2,8,16", "-steps", "300", "-every", "100", "-threads", "2"}
	var out, progress bytes.Buffer
	results, err := measure(context.Background(), args, &out, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(results) != 6 {
		t.Fatalf("want 6 runs, got:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
	for _, d := range results {
		if d.diverged() {
			t.Errorf("%s, %d clients: held-out loss %.4f, untrained %.4f: diverged", d.m, d.clients, d.loss, d.untrained)
		}
		if !d.m.delay {
			continue
		}
		for _, r := range results {
			if r.clients == d.clients && !r.m.delay {
				if gap := d.loss/r.loss - 1; !(gap <= overlapTolerance) {
					t.Errorf("%d clients: delayed %.4f, not delayed %.4f (%+.1f%%): want at most %+.0f%%",
						d.clients, d.loss, r.loss, 100*gap, 100*overlapTolerance)
				}
			}
		}
	}
}
