package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// mxConfig is testConfig's run under numeric contract v3 (precision =
// "mx8": block-scaled int8 matrix products), cut to 6 steps.
var mxConfig = strings.Replace(strings.Replace(testConfig, "[model]\n", "[model]\nprecision = \"mx8\"\n", 1),
	"total_steps = 12\n", "total_steps = 6\n", 1)

// Three clients train an mx8 run to Finished on localnet: the run pins
// contract v3 on chain, every client trains under it (its held-out loss of
// the initial weights is the mx8 trainer's, bit for bit, not the fp32
// one's), and every step's replica digest is identical on all of them. A
// fourth client, started with Precisions = ["fp32"] (train --precision
// fp32), refuses the run before joining with one clear line.
func TestMXRunConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	if !strings.Contains(mxConfig, "precision = \"mx8\"") || !strings.Contains(mxConfig, "total_steps = 6\n") {
		t.Fatal("mxConfig did not take testConfig's edits")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newRunEnv(ctx, t, "e2e-mx8", mxConfig)
	fp32Only, _ := e.start(ctx, t, 3, func(c *client.Config) { c.Precisions = []string{trainer.ArithFP32} })
	var clients []*trainingClient
	for i := range 3 {
		tc, _ := e.start(ctx, t, i, nil)
		clients = append(clients, tc)
	}
	e.unpause(t)

	// The fp32-only client stops as soon as it sees the configured run.
	select {
	case <-fp32Only.done:
	case <-ctx.Done():
		t.Fatal("the fp32-only client did not refuse the mx8 run")
	}
	const refusal = "the run trains with numeric contract mx8, and this client was started with --precision fp32 (accepts: fp32)"
	if !errors.Is(fp32Only.err, client.ErrPrecision) || fp32Only.err.Error() != refusal {
		t.Errorf("fp32-only client: %v; want ErrPrecision: %q", fp32Only.err, refusal)
	}

	awaitFinished(ctx, t, clients)
	s, err := e.run.FetchState(ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	if coordinator.Phase(s) != coordinator.Finished || s.Model.Precision != coordinator.PrecisionMX8 {
		t.Errorf("run ended %v with precision tag %d, want Finished with mx8 (%d)", coordinator.Phase(s), s.Model.Precision, coordinator.PrecisionMX8)
	}
	occupied := 0
	for i := range s.Clients {
		if s.Clients[i].Occupied != 0 {
			occupied++
		}
	}
	if occupied != 3 {
		t.Errorf("%d client slots taken, want 3: the fp32-only client must not join", occupied)
	}

	// The clients trained under mx8: the initial model's held-out loss they
	// measured is the mx8 trainer's, which differs from the fp32 one's.
	cfg, err := client.TrainerConfig(&s.Model, 8)
	if err != nil {
		t.Fatal(err)
	}
	initLoss := func(arith string) float32 {
		c := cfg
		c.Arith = arith
		tr, err := trainer.New(c, client.InitSeed(e.runID))
		if err != nil {
			t.Fatalf("build the %s trainer: %v", arith, err)
		}
		defer tr.Close()
		return evalLoss(ctx, t, tr, e.valDir)
	}
	mx8, fp32 := initLoss(trainer.ArithMX8), initLoss(trainer.ArithFP32)
	if mx8 == fp32 {
		t.Errorf("the initial model's held-out loss is %v under mx8 and fp32 alike: the test cannot tell them apart", mx8)
	}
	for i, tc := range clients {
		h := tc.rec.Snapshot().HeldOut
		if len(h) == 0 || h[0].Step != 0 || float32(h[0].Loss) != mx8 {
			t.Errorf("client %d: held-out loss at the start %v, want %v at step 0 (mx8; fp32 gives %v)", i, h, mx8, fp32)
		}
	}

	digests := map[uint64]string{}
	for i, tc := range clients {
		for _, st := range tc.rec.Snapshot().Steps {
			sameDigest(t, digests, i, st)
		}
	}
	for step := uint64(1); step <= 6; step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client recorded step %d", step)
		}
	}
	first, last := heldOutSpan(clients)
	t.Logf("held-out loss %.4f at step %d -> %.4f at step %d; %d steps compared", first.Loss, first.Step, last.Loss, last.Step, len(digests))
}
