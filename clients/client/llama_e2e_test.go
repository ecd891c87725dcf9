package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/status"
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
// model on the built-in benchmark task and publishes the scores on chain,
// and runs the prompt task: the tokens it publishes for each epoch's model
// are the greedy continuation of that epoch's prompt by the model of its
// checkpoint of that step, generated again here.
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
	const seed = 7
	ckDir := t.TempDir()
	var prompter solana.PublicKey
	var promptsMu sync.Mutex
	var onChain []*coordinator.PromptReported
	clients, s, e := threeToFinished(t, "e2e-llama", config, func(i int, c *client.Config) {
		if i != 0 {
			return
		}
		c.EvalTasks = []eval.Task{task}
		c.PromptTask, c.EvalSeed, c.CheckpointDir = true, seed, ckDir
		prompter = c.Wallet.PublicKey()
		go c.Chains[0].FollowLogs(t.Context(), []solana.PublicKey{c.Program.ID}, c.Log, func(l chain.LogEntry) {
			if l.Err == nil {
				promptsMu.Lock()
				onChain = append(onChain, coordinator.PromptReports(l.Logs)...)
				promptsMu.Unlock()
			}
		})
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
	ps := clients[0].rec.Snapshot().Prompts
	if len(ps) == 0 || ps[len(ps)-1].Step != 12 {
		t.Errorf("client 0 prompt tasks %+v, want the model of step 12's among them", ps)
	}
	if n := len(clients[1].rec.Snapshot().Prompts); n != 0 {
		t.Errorf("client 1, without the prompt task, recorded %d prompts", n)
	}
	for _, p := range ps {
		ev := awaitPromptReport(t, &promptsMu, &onChain, prompter, uint32(p.Step))
		checkPromptReport(t, ev, p, s, filepath.Join(ckDir, fmt.Sprintf("e2e-llama-step%d.safetensors", p.Step)), seed)
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

// awaitPromptReport is signer's PromptReported event for step among those
// the log subscription collects, waiting a little for its notification.
func awaitPromptReport(t *testing.T, mu *sync.Mutex, evs *[]*coordinator.PromptReported, signer solana.PublicKey, step uint32) *coordinator.PromptReported {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		for _, ev := range *evs {
			if ev.Signer.Equals(signer) && ev.Step == step {
				mu.Unlock()
				return ev
			}
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no PromptReported event on chain for step %d", step)
		}
	}
}

// checkPromptReport checks that the event published the prompt task p
// recorded: the prompt that seed picks for p's epoch, and the tokens and
// text of the greedy continuation by the model of checkpoint (step p.Step).
func checkPromptReport(t *testing.T, ev *coordinator.PromptReported, p status.Prompt, s *coordinator.State, checkpoint string, seed uint64) {
	t.Helper()
	t.Logf("prompt task at step %d (epoch %d): prompt %d, %q", p.Step, p.Epoch, p.Index, p.Prompt+p.Text)
	// The event carries the chain's epoch when the report landed, which the
	// run may have left behind the model's (at Finished it has).
	if want := eval.PromptFor(seed, uint32(p.Epoch)); !p.Published || p.Index != want || int(ev.Prompt) != want || uint64(ev.Epoch) < p.Epoch ||
		p.Prompt != eval.Prompts[want] {
		t.Errorf("prompt task %+v published as %+v; want prompt %d of epoch %d, published", p, ev, want, p.Epoch)
	}
	tr, err := trainer.LoadCheckpoint(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tok, err := client.RunTokenizer(&s.Model, "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := eval.Continue(context.Background(), tr, tok, eval.Prompts[p.Index], coordinator.MaxPromptTokens)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, len(ids))
	for i, id := range ids {
		want[i] = uint32(id)
	}
	if got := ev.Tokens[:ev.Len]; !slices.Equal(got, want) || !slices.Equal(p.Tokens, want) {
		t.Errorf("step %d: published tokens %v, recorded %v; the checkpoint's greedy continuation is %v", p.Step, got, p.Tokens, want)
	}
	if text, err := tok.Decode(want); err != nil || text != p.Text {
		t.Errorf("step %d: recorded text %q, the continuation decodes to %q (%v)", p.Step, p.Text, text, err)
	}
}
