//go:build unix

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

const soloRunID = "solo-crash"

// soloRunConfig is a one-client run (init_min_clients = min_clients = 1)
// with short epochs (epoch_time 8 s, then two drain rounds), so that the
// second epoch starts after a few steps and the client has written a
// checkpoint of the first epoch's model when it is killed.
// max_round_train_time is short: the round the dead client never trains
// ends as soon as someone ticks after it.
const soloRunConfig = `
[config]
waiting_for_members_extra_time = 1
warmup_time = 5
max_round_train_time = 5
round_witness_time = 1
cooldown_time = 1
epoch_time = 8
total_steps = 40
init_min_clients = 1
min_clients = 1
witness_nodes = 0
global_batch_size_start = 4
global_batch_size_end = 4
global_batch_size_warmup_tokens = 0

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 2
n_head = 4
n_embd = 64
max_seq_len = 128
data_type = "pretraining"
cold_start_warmup_steps = 0

[model.checkpoint]
kind = "ephemeral"

[model.data]
kind = "http"
location = "%s"
root = "%s"

[model.lr]
schedule = "cosine"
learning_rate = 0.003
final_learning_rate = 0.001
warmup_steps = 2
decay_steps = 40

[model.optimizer]
kind = "distro"
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.999
compression_topk = 32
compression_chunk = 64
quantize_1bit = true
`

// crashedRun is a run whose every client was SIGKILLed (no leave_run) in
// the third round (or later) of an epoch: past the grace a member loading
// the model from peers has.
type crashedRun struct {
	dir, tmp string
	args     [][]string // each client's train flags, for its restart
	ckDirs   []string
	// step is the run's step when the clients were killed.
	step uint32
}

// crashClients starts the run (init_min_clients = n) and n clients, each
// with a checkpoint directory if checkpoints, and kills them all in epoch
// epoch.
func crashClients(ctx context.Context, t *testing.T, n int, epoch uint32, checkpoints bool) crashedRun {
	t.Helper()
	builtCLI(t)
	dir := t.TempDir()
	lr := startLocalRun(ctx, t, dir, soloRunID, func(dataURL, root string) string {
		return strings.Replace(fmt.Sprintf(soloRunConfig, dataURL, root), "init_min_clients = 1", fmt.Sprintf("init_min_clients = %d", n), 1)
	})
	cr := crashedRun{dir: dir, tmp: filepath.Join(dir, "tmp")}
	if err := os.Mkdir(cr.tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	procs := make([]*trainProc, n)
	var key solana.PrivateKey
	for i := range n {
		var wallet string
		wallet, key = keyFile(t, lr.v, 2*solana.LAMPORTS_PER_SOL)
		ident := filepath.Join(dir, fmt.Sprintf("p2p-%d.key", i))
		mustRunCLI(t, "create-static-p2p-identity", ident)
		args := append([]string{"train", "--run-id", soloRunID, "-w", wallet, "-i", ident,
			"--logs", "json", "--metrics-local-port", "0", "--threads", "1", "--micro-batch-size", "2",
			"--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", filepath.Join(dir, "p2p")}, lr.net...)
		ck := filepath.Join(dir, fmt.Sprintf("checkpoints-%d", i))
		if checkpoints {
			args = append(args, "--checkpoint-dir", ck, "--keep-steps", "20")
		}
		cr.args, cr.ckDirs = append(cr.args, args), append(cr.ckDirs, ck)
		procs[i] = startTrain(t, fmt.Sprintf("client %d", i), filepath.Join(dir, fmt.Sprintf("client-%d.log", i)), cr.tmp, args)
	}
	watch := watchRun(ctx, t, lr.run, lr.c, key.PublicKey())
	waitFor(t, ctx, fmt.Sprintf("epoch %d past its second round", epoch), procs, func() bool {
		o, ok := watch.latest()
		return ok && o.epoch >= epoch && o.inRound() && o.height >= 2
	})
	for _, p := range procs {
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.done
	}
	watch.stop()
	killed, err := lr.run.FetchState(ctx, lr.c)
	if err != nil {
		t.Fatal(err)
	}
	cr.step = killed.Progress.Step
	t.Logf("killed %d client(s) at step %d (epoch %d, %s)", n, cr.step, killed.Progress.Epoch, coordinator.Phase(killed))
	return cr
}

// restart starts killed client i again with the same flags and extra.
func (cr crashedRun) restart(t *testing.T, i int, extra ...string) *trainProc {
	return startTrain(t, fmt.Sprintf("client %d (restarted)", i), filepath.Join(cr.dir, fmt.Sprintf("client-%d-restarted.log", i)), cr.tmp,
		append(slices.Clone(cr.args[i]), extra...))
}

// trainedPast says whether p applied a step after step.
func (p *trainProc) trainedPast(t *testing.T, step uint32) bool {
	return slices.ContainsFunc(slices.Collect(maps.Keys(p.stepDigests(t))), func(s uint64) bool { return s > uint64(step) })
}

// warnings are the entries p logged at WARN or above.
func (p *trainProc) warnings() []map[string]any {
	var out []map[string]any
	for _, e := range p.entries() {
		if lvl, _ := e["level"].(string); lvl == "WARN" || lvl == "ERROR" {
			out = append(out, e)
		}
	}
	return out
}

// TestSoloClientCrashRecovers kills the only client of a run in the middle
// of its second epoch and restarts it with the same wallet, p2p identity and
// checkpoint directory, as run-manager does. Nobody else holds the model of
// the step the run is at, so the restarted client must resume from its own
// newest checkpoint (the replica it logs is that checkpoint's weights),
// train past the step it crashed in, and say nothing at WARN or above on
// the way: the crash is the only thing that went wrong.
func TestSoloClientCrashRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cr := crashClients(ctx, t, 1, 1, true)
	crashStep := cr.step
	ck := newestCheckpoint(t, cr.ckDirs[0], soloRunID)
	if ck.step == 0 || ck.step >= crashStep-1 {
		t.Fatalf("at the kill (step %d): newest checkpoint of step %d; want one of an earlier epoch", crashStep, ck.step)
	}

	restarted := cr.restart(t, 0)
	waitFor(t, ctx, fmt.Sprintf("the restarted client to train past step %d", crashStep), []*trainProc{restarted}, func() bool {
		return restarted.trainedPast(t, crashStep)
	})

	// The model it resumed from is its own checkpoint's weights, as the
	// model of the step before the one the run resumed at.
	ready := restarted.linesWith("model ready")
	if len(ready) == 0 {
		t.Fatal("the restarted client logged no \"model ready\"")
	}
	readyStep := uint32(ready[0]["step"].(float64))
	tr, err := trainer.LoadCheckpoint(ck.path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	want, err := client.ReplicaDigest(tr, readyStep)
	if err != nil {
		t.Fatal(err)
	}
	if got := ready[0]["digest"]; got != hex.EncodeToString(want[:]) {
		t.Errorf("the restarted client's model of step %d has digest %v; its checkpoint of step %d gives %x", readyStep, got, ck.step, want)
	}
	if readyStep < crashStep-1 {
		t.Errorf("the restarted client's model is of step %d; the run was at step %d when it crashed", readyStep, crashStep)
	}
	// Ctrl-C: it leaves the run and exits 0.
	if err := restarted.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFinished(ctx, t, []*trainProc{restarted})
	for _, e := range restarted.warnings() {
		t.Errorf("restarted client logged %s %q: %v", e["level"], e["msg"], e)
	}
	t.Logf("restarted client: resumed from its checkpoint of step %d as the model of step %d, trained through step %d",
		ck.step, readyStep, slices.Max(slices.Collect(maps.Keys(restarted.stepDigests(t)))))
}

// TestSoloClientCrashWithoutCheckpointSaysSo kills the only client of a run
// that keeps no checkpoints in its first epoch, past step 1: the model is
// gone. The restarted client must say so in one WARN line that names what
// is missing and what to do, and not again when it looks again
// (restoreRetry later, at DEBUG), nor warn about anything else.
func TestSoloClientCrashWithoutCheckpointSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cr := crashClients(ctx, t, 1, 0, false)
	restarted := cr.restart(t, 0, "--log-level", "debug")
	const missing = "no client holds the model of step"
	looked := func() int {
		n := 0
		for _, e := range restarted.entries() {
			if m, _ := e["msg"].(string); strings.HasPrefix(m, missing) {
				n++
			}
		}
		return n
	}
	waitFor(t, ctx, "the restarted client to look for a checkpoint twice", []*trainProc{restarted}, func() bool { return looked() >= 2 })
	warns := restarted.warnings()
	if len(warns) != 1 {
		t.Fatalf("%d WARN or ERROR lines, want the one that says the model is gone: %v", len(warns), warns)
	}
	msg, _ := warns[0]["msg"].(string)
	for _, want := range []string{fmt.Sprintf("%s %d", missing, cr.step-1), "train has no --checkpoint-dir", fmt.Sprintf("restart train with --checkpoint-dir DIR holding a checkpoint of this run at or before step %d", cr.step-1), soloRunID + "-stepN.safetensors"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the WARN line %q does not say %q", msg, want)
		}
	}
	if restarted.linesWith("model ready") != nil {
		t.Error("the restarted client has a model, from nowhere")
	}
	t.Logf("the restarted client says: %s", msg)
}

// TestEveryClientCrashRecovers kills both clients of a run in the middle
// of its second epoch and restarts them: nobody holds the model of the
// step the run is at, each resumes from its own newest checkpoint (the same
// step: the replicas agree), and both train past the crash with equal
// replicas, without a WARN. (Restarted mid-epoch, each is still a member
// that holds no model while the chain names the other as a holder, so
// each leaves the epoch first, at INFO: the crash is the news.)
func TestEveryClientCrashRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cr := crashClients(ctx, t, 2, 1, true)
	procs := []*trainProc{cr.restart(t, 0), cr.restart(t, 1)}
	waitFor(t, ctx, fmt.Sprintf("both restarted clients to train past step %d", cr.step), procs, func() bool {
		return procs[0].trainedPast(t, cr.step) && procs[1].trainedPast(t, cr.step)
	})
	a, b := procs[0].stepDigests(t), procs[1].stepDigests(t)
	common := 0
	for step, d := range a {
		if other, ok := b[step]; ok {
			common++
			if other != d {
				t.Errorf("step %d: the restarted clients' replicas differ (%s, %s)", step, d, other)
			}
		}
	}
	if common == 0 {
		t.Error("the restarted clients logged no step in common")
	}
	for _, p := range procs {
		for _, e := range p.warnings() {
			t.Errorf("%s logged %s %q: %v", p.name, e["level"], e["msg"], e)
		}
		if p.linesWith("resuming from this client's checkpoint") == nil {
			t.Errorf("%s did not resume from its checkpoint", p.name)
		}
	}
	t.Logf("both restarted clients trained past step %d, %d steps in common, equal digests", cr.step, common)
}

// checkpointFile is one of a client's checkpoints.
type checkpointFile struct {
	step uint32
	path string
}

// newestCheckpoint is the checkpoint of the highest step runID has in dir.
func newestCheckpoint(t *testing.T, dir, runID string) checkpointFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("checkpoint directory: %v", err)
	}
	name := regexp.MustCompile(`^` + regexp.QuoteMeta(runID) + `-step([0-9]+)\.safetensors$`)
	var out checkpointFile
	for _, e := range entries {
		if m := name.FindStringSubmatch(e.Name()); m != nil {
			if step, err := strconv.ParseUint(m[1], 10, 32); err == nil && uint32(step) > out.step {
				out = checkpointFile{uint32(step), filepath.Join(dir, e.Name())}
			}
		}
	}
	return out
}
