package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

// llamaConfig is testConfig's run on the Llama architecture, in
// config/llama-tiny.toml's shape (4 query heads on 2 key/value heads,
// SwiGLU 384, rotary base 10000, the lm-head tied).
var llamaConfig = strings.Replace(testConfig, "architecture = \"gpt2\"\n",
	"architecture = \"llama\"\nn_kv_head = 2\nintermediate_size = 384\nrope_theta = 10000.0\n", 1)

// Three clients train a light Llama run to Finished on localnet, starting
// from a Hugging Face model directory that the run pins by the hash of its
// weights and names as a file:// repo: every client starts from those
// weights (its held-out loss at step 0 is theirs, bit for bit), every step
// is recorded, every step's replica digest is identical on all of them, and
// the held-out loss falls by at least 1.0 nat. Client 0 scores each epoch's
// model on the built-in benchmark task and publishes the scores on chain.
func TestLlamaTrainsToFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	pre, err := trainer.New(cfg, 777) // "pretrained": another seed than the run's
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	hfDir := t.TempDir()
	if err := pre.ExportHF(hfDir); err != nil {
		t.Fatal(err)
	}
	rev, err := hub.HashFile(filepath.Join(hfDir, trainer.HFWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	config := strings.Replace(llamaConfig, `kind = "ephemeral"`, fmt.Sprintf("kind = \"hub\"\nrepo = %q\nrevision = %q", "file://"+hfDir, rev), 1)
	task, err := eval.Open(context.Background(), eval.Builtin, 24)
	if err != nil {
		t.Fatal(err)
	}
	clients, s, e := threeToFinished(t, "e2e-llama", config, func(i int, c *client.Config) {
		if i == 0 {
			c.EvalTasks = []eval.Task{task}
		}
	})
	// The final model (step 12) was scored, and every score published.
	bs := clients[0].rec.Snapshot().Benchmarks
	if len(bs) == 0 || bs[len(bs)-1].Step != 12 || bs[len(bs)-1].Task != eval.Builtin || bs[len(bs)-1].Items != 24 {
		t.Errorf("client 0 benchmarks %+v, want the model of step 12 scored on %d items of %s", bs, 24, eval.Builtin)
	}
	for _, b := range bs {
		if !b.Published {
			t.Errorf("benchmark of step %d was not published on chain", b.Step)
		}
		t.Logf("benchmark %s at step %d (epoch %d): acc %.3f, acc_norm %.3f over %d items", b.Task, b.Step, b.Epoch, b.Acc, b.AccNorm, b.Items)
	}
	if n := len(clients[1].rec.Snapshot().Benchmarks); n != 0 {
		t.Errorf("client 1, with no tasks, recorded %d benchmarks", n)
	}
	preLoss := evalLoss(context.Background(), t, pre, e.valDir)
	for i, tc := range clients {
		h := tc.rec.Snapshot().HeldOut
		if len(h) == 0 || h[0].Step != 0 || float32(h[0].Loss) != preLoss {
			t.Errorf("client %d: held-out loss at the start %v, want %v at step 0 (the Hugging Face model's)", i, h, preLoss)
		}
	}
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
