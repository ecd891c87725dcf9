package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/status"
)

// locoConfig is testConfig's run in the multi-step mode with overlapped
// rounds: 4 inner AdamW steps per round (each member's 8/3 sequences per
// inner step), top-8 of each 64x64 chunk with 2-bit values and error
// feedback, the aggregate applied one round late.
var locoConfig = func() string {
	i := strings.Index(testConfig, "[model.lr]")
	return strings.Replace(testConfig[:i], "[config]\n", "[config]\noverlap = true\n", 1) + `[model.lr]
schedule = "cosine"
learning_rate = 0.003
final_learning_rate = 0.0003
warmup_steps = 4
decay_steps = 48

[model.optimizer]
kind = "sparseloco"
inner_steps = 4
outer_learning_rate = 1.0
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.95
compression_topk = 8
compression_chunk = 64
value_bits = 2
`
}()

// Three clients train a light run in the multi-step mode with overlapped
// rounds to Finished on localnet: every step's replica digest is identical
// on all of them, payloads are a small fraction of one dense gradient per
// round, and the held-out loss falls by at least 1.0 nat.
func TestSparseLoCoOverlapTrainsToFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	clients, _, _ := threeToFinished(t, "e2e-loco", locoConfig, nil)
	digests := map[uint64]string{}
	for i, tc := range clients {
		snap := tc.rec.Snapshot()
		if len(snap.Steps) < 6 {
			t.Errorf("client %d recorded only %d steps", i, len(snap.Steps))
		}
		for _, st := range snap.Steps {
			sameDigest(t, digests, i, st)
			// A round's payload against one dense fp32 gradient per inner step.
			if st.BytesOut == 0 || st.BytesOut*100 > snap.DenseBytes {
				t.Errorf("client %d step %d sent %d bytes, dense %d: want under 1%%", i, st.Step, st.BytesOut, snap.DenseBytes)
			}
		}
	}
	first, last := heldOutSpan(clients)
	t.Logf("held-out loss %.4f at step %d -> %.4f at step %d; %d steps compared", first.Loss, first.Step, last.Loss, last.Step, len(digests))
	if first.Step != 0 || last.Step < 10 || last.Loss > first.Loss-1.0 {
		t.Errorf("held-out loss %.4f at step %d -> %.4f at step %d: want a drop of at least 1.0 by step 10", first.Loss, first.Step, last.Loss, last.Step)
	}
}

// heldOutSpan returns the earliest and the latest held-out loss any of the
// clients measured.
func heldOutSpan(clients []*trainingClient) (first, last status.LossPoint) {
	first.Step = ^uint64(0)
	for _, tc := range clients {
		for _, p := range tc.rec.Snapshot().HeldOut {
			if p.Step < first.Step {
				first = p
			}
			if p.Step >= last.Step {
				last = p
			}
		}
	}
	return first, last
}

// threeToFinished runs config with three clients on localnet until every
// one of them has seen the run finish, checks that it finished, and returns
// the clients and the run's final state.
func threeToFinished(t *testing.T, runID, config string, opts func(i int, c *client.Config)) ([]*trainingClient, *coordinator.State, *runEnv) {
	t.Helper()
	return threeToFinishedWith(t, runID, config, dataset, opts)
}

// threeToFinishedWith is threeToFinished on the datasets that data prepares.
func threeToFinishedWith(t *testing.T, runID, config string, data func(*testing.T) (train, validation string),
	opts func(i int, c *client.Config)) ([]*trainingClient, *coordinator.State, *runEnv) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newRunEnvWith(ctx, t, runID, config, data)
	var clients []*trainingClient
	for i := range 3 {
		var opt func(*client.Config)
		if opts != nil {
			opt = func(c *client.Config) { opts(i, c) }
		}
		tc, _ := e.start(ctx, t, i, opt)
		clients = append(clients, tc)
	}
	e.unpause(t)
	awaitFinished(ctx, t, clients)
	s, err := e.run.FetchState(ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	if coordinator.Phase(s) != coordinator.Finished {
		t.Errorf("run ended %v, want Finished", coordinator.Phase(s))
	}
	return clients, s, e
}
