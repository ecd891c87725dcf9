package client_test

import (
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
)

// llamaConfig is testConfig's run on the Llama architecture, in
// config/llama-light.toml's shape (4 query heads on 2 key/value heads,
// SwiGLU 384, rotary base 10000, the lm-head tied).
var llamaConfig = strings.Replace(testConfig, "architecture = \"gpt2\"\n",
	"architecture = \"llama\"\nn_kv_head = 2\nintermediate_size = 384\nrope_theta = 10000.0\n", 1)

// Three clients train a light Llama run to Finished on localnet: every step
// recorded, every step's replica digest identical on all of them, and the
// held-out loss falls by at least 1.0 nat.
func TestLlamaTrainsToFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	clients, s := threeToFinished(t, "e2e-llama", llamaConfig)
	if s.Model.Architecture != coordinator.ArchLlama || s.Model.NKvHead != 2 {
		t.Errorf("the run's model is architecture %d with %d key heads, want llama with 2", s.Model.Architecture, s.Model.NKvHead)
	}
	digests := map[uint64]string{}
	for i, tc := range clients {
		for _, st := range tc.rec.Snapshot().Steps {
			sameDigest(t, digests, i, st)
		}
	}
	for step := uint64(1); step <= 12; step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client recorded step %d", step)
		}
	}
	first, last := heldOutSpan(clients)
	t.Logf("held-out loss %.4f at step %d -> %.4f at step %d; %d steps compared", first.Loss, first.Step, last.Loss, last.Step, len(digests))
	if first.Step != 0 || last.Step < 10 || last.Loss > first.Loss-1.0 {
		t.Errorf("held-out loss %.4f at step %d -> %.4f at step %d: want a drop of at least 1.0 by step 10", first.Loss, first.Step, last.Loss, last.Step)
	}
}
