package client_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
)

// A run whose model starts from a hub checkpoint: every client starts from
// those weights (its held-out loss at step 0 is theirs, bit for bit), the
// checkpointer uploads the model at the end of the first epoch and announces
// its revision on chain, the file on the hub is the consensus model of that
// step (its replica digest is the one the clients recorded), and a client
// that joins the second epoch loads it from the hub and matches the others.
func TestHubCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hs, err := hub.NewServer(t.TempDir(), hub.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hub.Serve(ctx, ln, hs)
	repo := "http://" + ln.Addr().String() + "/runs/hub-e2e"

	// The "pretrained" weights: the light shape from another seed.
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	pre, err := trainer.New(cfg, 12345)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	prePath := filepath.Join(t.TempDir(), "pretrained.safetensors")
	if err := pre.SaveModel(prePath, map[string]string{"source": "test"}); err != nil {
		t.Fatal(err)
	}
	rev0, err := hub.Upload(ctx, repo, prePath, hub.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Short epochs, so the run has several and every one ends in a Cooldown
	// long enough for the checkpointer's announcement to land.
	config := strings.NewReplacer(
		`kind = "ephemeral"`, fmt.Sprintf("kind = \"hub\"\nrepo = %q\nrevision = %q", repo, rev0),
		"epoch_time = 20", "epoch_time = 10",
		"warmup_time = 10", "warmup_time = 5",
		"max_round_train_time = 10", "max_round_train_time = 5",
		"total_steps = 12", "total_steps = 20",
		"cooldown_time = 1", "cooldown_time = 3",
		// Every contribution is verified (replays run in the background:
		// the race detector watches them); the witness window holds them.
		"round_witness_time = 1", "round_witness_time = 3",
		"witness_nodes = 0", "witness_nodes = 0\nverification_percent = 100",
	).Replace(testConfig)
	e := newRunEnv(ctx, t, "hub-e2e", config)
	preLoss := evalLoss(ctx, t, pre, e.valDir)

	var clients []*trainingClient
	for i := range 3 {
		tc, _ := e.start(ctx, t, i, func(c *client.Config) {
			if i == 0 {
				c.HubUpload, c.CheckpointDir = true, t.TempDir()
			}
		})
		clients = append(clients, tc)
	}
	e.unpause(t)

	// Every revision the chain holds during the run, by first sight.
	var (
		mu        sync.Mutex
		announced []string
	)
	go func() {
		for last := rev0; ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
			s, err := e.run.FetchState(ctx, e.c)
			if err != nil {
				continue
			}
			if r := coordinator.FixedString(s.Model.CheckpointRevision[:]); r != last {
				last = r
				mu.Lock()
				announced = append(announced, r)
				mu.Unlock()
			}
		}
	}()
	// A fourth client starts once the first epoch's model is announced.
	for {
		mu.Lock()
		n := len(announced)
		mu.Unlock()
		if n > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no checkpoint was announced")
		}
		time.Sleep(200 * time.Millisecond)
	}
	logs := &recordingHandler{Handler: testLogger(t, 3).Handler()}
	late, _ := e.start(ctx, t, 3, func(c *client.Config) { c.Log = slog.New(logs) })

	awaitFinished(ctx, t, append(clients, late))

	for i, tc := range clients {
		h := tc.rec.Snapshot().HeldOut
		if len(h) == 0 || h[0].Step != 0 || float32(h[0].Loss) != preLoss {
			t.Errorf("client %d: held-out loss at the start %v, want %v at step 0 (the hub checkpoint's)", i, h, preLoss)
		}
	}
	digests := map[uint64]string{}
	for i, tc := range append(clients, late) {
		for _, st := range tc.rec.Snapshot().Steps {
			sameDigest(t, digests, i, st)
		}
	}
	// Every client replayed others' steps and every verdict was MATCH.
	for i, tc := range append(clients, late) {
		v := tc.rec.Snapshot().Verification
		if v == nil || v.Replays.Posted == 0 || v.Replays.Mismatch+v.Replays.NoData > 0 || v.Commitments.Committed == 0 ||
			v.Commitments.Mismatch+v.Commitments.NoData > 0 || v.Disputes != (status.Disputes{}) {
			t.Errorf("client %d: verification %+v, want replays posted, commitments made, all MATCH and no dispute", i, v)
		} else {
			t.Logf("client %d: %d commitments (%d MATCH, %d unjudged), %d replays posted", i, v.Commitments.Committed,
				v.Commitments.Match, v.Commitments.Unjudged, v.Replays.Posted)
		}
	}
	// Each announced file is the consensus model of the step it names.
	mu.Lock()
	revs := slices.Clone(announced)
	mu.Unlock()
	steps := map[uint32]bool{}
	for _, rev := range revs {
		step := checkAnnounced(ctx, t, repo, rev, digests)
		steps[step] = true
		t.Logf("checkpoint of step %d announced as %s", step, rev)
	}
	if !steps[20] {
		t.Errorf("the final model (step 20) was not announced; announced steps %v", steps)
	}
	first := late.rec.Snapshot().Steps
	if logs.saw("the hub checkpoint is not the model the run's members hold") {
		t.Error("the late client found the announced checkpoint differs from the members' model")
	}
	if len(first) == 0 || !steps[uint32(first[0].Step)-1] || !logs.saw("model loaded from the hub") {
		t.Errorf("the late client should have loaded an announced step %v from the hub and trained the next (its steps: %v)", steps, first)
	} else {
		t.Logf("the late client loaded step %d from the hub", first[0].Step-1)
	}
}

// checkAnnounced fetches an announced checkpoint and checks that it is this
// run's model of the step it names: the replica digest the clients recorded.
func checkAnnounced(ctx context.Context, t *testing.T, repo, rev string, digests map[uint64]string) uint32 {
	t.Helper()
	path, err := hub.Fetch(ctx, repo, rev, t.TempDir(), hub.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := trainer.CheckpointMetadata(path)
	if err != nil {
		t.Fatal(err)
	}
	var step uint32
	if _, err := fmt.Sscan(md["step"], &step); err != nil || md["run_id"] != "hub-e2e" {
		t.Fatalf("announced checkpoint metadata %v", md)
	}
	got, err := trainer.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	d, err := client.ReplicaDigest(got, step)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(d[:]) != digests[uint64(step)] {
		t.Errorf("the announced checkpoint of step %d has digest %x; the clients recorded %s", step, d, digests[uint64(step)])
	}
	return step
}

// evalLoss is what a client's first held-out evaluation measures.
func evalLoss(ctx context.Context, t *testing.T, tr *trainer.Trainer, dir string) float32 {
	t.Helper()
	p, err := provider.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	seqs, err := p.Sequences(ctx, []uint64{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	in, tg, err := provider.InputsAndTargets(p.Info(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := tr.Eval(ctx, in, tg, int(p.Info().SeqLen))
	if err != nil {
		t.Fatal(err)
	}
	return loss
}

// recordingHandler keeps the messages logged through it.
type recordingHandler struct {
	slog.Handler
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *recordingHandler) saw(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if m == msg {
			return true
		}
	}
	return false
}
