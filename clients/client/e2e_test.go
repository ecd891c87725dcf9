package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/server"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// testConfig is a light run with second-scale timers: rounds take about two
// seconds once all witnesses report (max_round_train_time leaves room for a
// slow step on busy CI, so no honest client misses a round), an epoch about
// eight rounds plus the drain, so 12 steps span two epochs. Members get 4 s
// to join before an epoch forms: under the race detector on 2 busy cores a
// client's first join (simulated, data opened, sent) can take 2.
const testConfig = `
[config]
waiting_for_members_extra_time = 4
warmup_time = 10
max_round_train_time = 10
round_witness_time = 1
cooldown_time = 1
epoch_time = 20
total_steps = 12
init_min_clients = 3
min_clients = 2
witness_nodes = 0
global_batch_size_start = 8
global_batch_size_end = 8
global_batch_size_warmup_tokens = 0

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 4
n_head = 4
n_embd = 128
max_seq_len = 128
data_type = "pretraining"
cold_start_warmup_steps = 1

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
decay_steps = 12

[model.optimizer]
kind = "distro"
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.999
compression_topk = 32
compression_chunk = 64
quantize_1bit = true
`

// dataset prepares the byte-level train and validation splits of a slice of
// the default corpus.
func dataset(t *testing.T) (train, validation string) {
	t.Helper()
	src, err := corpus.SOTUDir()
	if err != nil {
		t.Skipf("corpus missing (run scripts/setup.sh): %v", err)
	}
	in := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		// 1990s addresses train, 2010s ones are held out: about 1 MB in all.
		if strings.HasSuffix(name, ".txt") && (strings.HasPrefix(name, "199") || strings.HasPrefix(name, "201")) {
			data, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := t.TempDir()
	for _, split := range []string{"train", "validation"} {
		sp, err := corpus.NewSplit(split, 2000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := prepare.Run(context.Background(), prepare.Options{Input: in, Split: sp, Tokenizer: tokenizer.ByteName,
			SeqLen: 128, Out: filepath.Join(out, split)}); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(out, "train"), filepath.Join(out, "validation")
}

type trainingClient struct {
	rec  *status.Recorder
	err  error
	done chan struct{}
}

// awaitFinished waits for every client to see the run finish, without error.
func awaitFinished(ctx context.Context, t *testing.T, clients []*trainingClient) {
	t.Helper()
	for i, tc := range clients {
		select {
		case <-tc.done:
		case <-ctx.Done():
			t.Fatalf("client %d did not see the run finish: %v", i, ctx.Err())
		}
		if tc.err != nil {
			t.Fatalf("client %d: %v", i, tc.err)
		}
	}
}

// sameDigest records the digest of client i's step st in digests and
// reports a step another client recorded with another digest.
func sameDigest(t *testing.T, digests map[uint64]string, i int, st status.StepStat) {
	t.Helper()
	if d, ok := digests[st.Step]; ok && d != st.Digest {
		t.Errorf("client %d step %d digest %s; another client has %s", i, st.Step, st.Digest, d)
	}
	digests[st.Step] = st.Digest
}

// Three clients train a light run through two epochs to Finished on
// localnet: every step's replica digest is identical on all of them, and the
// held-out loss falls by at least 1.0 nat from the initial model's. A fourth
// member of the first epoch serves malformed payloads (correctly hashed and
// signed): the others reject and ban it, never apply its updates, and drop it
// by health check in the first round that allows one. A fifth client starts
// during the first epoch, joins the second, loads the model from its peers
// and matches their digests from its first step.
func TestThreeClientsTrainToFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newRunEnv(ctx, t, "e2e-light", testConfig)
	v, c, run, authAddr, rendezvous := e.v, e.c, e.run, e.authAddr, e.rendezvous
	var clients []*trainingClient
	var nodes []*p2p.Node
	start := func(i int) *trainingClient {
		var chains []*chain.Client
		if i == 1 {
			// Its primary endpoint answers JSON-RPC but its websocket is
			// dead: the subscription must fail over to the backup (and
			// take the transactions with it).
			chains = []*chain.Client{deadWS(t, v.RPCURL), programtest.Chain(t, v)}
		}
		tc, node := e.start(ctx, t, i, func(cfg *client.Config) {
			if chains != nil {
				cfg.Chains = chains
			}
		})
		nodes = append(nodes, node)
		return tc
	}
	for i := range 3 {
		clients = append(clients, start(i))
	}
	adv := startAdversary(ctx, t, v, run, authAddr, rendezvous)
	e.unpause(t)
	// A fourth client starts once the run is past step 2: it joins the next
	// epoch and must load the model from its peers.
	for len(clients[0].rec.Snapshot().Steps) < 2 && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	late := start(3)

	awaitFinished(ctx, t, append(clients, late))
	s, err := run.FetchState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if coordinator.Phase(s) != coordinator.Finished || s.Progress.Epoch < 2 {
		t.Errorf("run ended %v after %d epochs, want Finished after 2", coordinator.Phase(s), s.Progress.Epoch)
	}

	// Every step was recorded by some client, and every client that recorded
	// a step has the same digest for it. (A client whose join came after an
	// epoch formed sits that epoch out and reloads the model from its peers;
	// the client started late joins in the second epoch.)
	digests := map[uint64]string{}
	for i, tc := range append(clients, late) {
		snap := tc.rec.Snapshot()
		if len(snap.Steps) < 3 {
			t.Errorf("client %d recorded only %d steps", i, len(snap.Steps))
		}
		for _, st := range snap.Steps {
			sameDigest(t, digests, i, st)
		}
		t.Logf("client %d recorded steps %d..%d (%d)", i, snap.Steps[0].Step, snap.Steps[len(snap.Steps)-1].Step, len(snap.Steps))
	}
	for step := uint64(1); step <= 12; step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client recorded step %d", step)
		}
	}
	if late.rec.Snapshot().Steps[0].Step < 3 {
		t.Error("the late client trained from the start; it was meant to join the second epoch")
	}
	select {
	case <-adv.done:
	case <-ctx.Done():
	}
	if adv.err != nil {
		t.Fatalf("adversary: %v", adv.err)
	}
	if adv.droppedAt < 2 || adv.droppedAt > 3 {
		t.Errorf("the adversary was dropped in the round of height %d, want 2 (the first that allows a health check) or 3", adv.droppedAt)
	}
	for i, n := range nodes[:3] {
		if _, banned := n.Banned(adv.node.ID()); !banned {
			t.Errorf("client %d did not ban the peer that sent malformed payloads", i)
		}
	}
	// Held-out loss: the initial model's against the latest any client measured.
	var first, last status.LossPoint
	first.Step = ^uint64(0)
	for _, tc := range append(clients, late) {
		for _, p := range tc.rec.Snapshot().HeldOut {
			if p.Step < first.Step {
				first = p
			}
			if p.Step >= last.Step {
				last = p
			}
		}
	}
	t.Logf("held-out loss %.4f at step %d -> %.4f at step %d", first.Loss, first.Step, last.Loss, last.Step)
	if first.Step != 0 || last.Step < 12 || last.Loss > first.Loss-1.0 {
		t.Errorf("held-out loss %.4f at step %d -> %.4f at step %d: want a drop of at least 1.0 by step 12", first.Loss, first.Step, last.Loss, last.Step)
	}
}

// runEnv is a localnet with the programs deployed, a data server with the
// byte-level corpus slice, and a permissionless run configured from a TOML
// config (its data location and root filled in), still paused.
type runEnv struct {
	v          *localnet.Validator
	c          *chain.Client
	authority  solana.PrivateKey
	program    coordinator.Program
	run        coordinator.Run
	runID      string
	authAddr   solana.PublicKey
	valDir     string
	rendezvous string
}

func newRunEnv(ctx context.Context, t *testing.T, runID, config string) *runEnv {
	t.Helper()
	return newRunEnvWith(ctx, t, runID, config, dataset)
}

// newRunEnvWith is newRunEnv with the train and held-out datasets that data
// prepares.
func newRunEnvWith(ctx context.Context, t *testing.T, runID, config string, data func(*testing.T) (train, validation string)) *runEnv {
	t.Helper()
	trainDir, valDir := data(t)
	srv, err := server.New(ctx, trainDir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve(ctx, ln, srv)
	dataURL := "http://" + ln.Addr().String() + "/"

	e := createRun(ctx, t, runID, fmt.Sprintf(config, dataURL, srv.Manifest().Root))
	me := e.authority.PublicKey()
	auth := authorizer.Default()
	create, authAddr, err := auth.Create(me, me, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		t.Fatal(err)
	}
	activate, err := auth.SetActive(me, authAddr, true)
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, e.c, e.authority, []solana.Instruction{create, activate})
	e.authAddr, e.valDir = authAddr, valDir
	return e
}

// createRun starts a localnet with the programs deployed and creates a run
// configured from config (TOML), still paused.
func createRun(ctx context.Context, t *testing.T, runID, config string) *runEnv {
	t.Helper()
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	program := coordinator.Program{ID: programtest.Deploy(t, v, "psyche_coordinator")}
	c := programtest.Chain(t, v)
	authority := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	me := authority.PublicKey()
	account := solana.NewWallet().PrivateKey
	ixs, run, err := program.CreateRun(ctx, c, me, account.PublicKey(), coordinator.CreateParams{
		RunID: runID, MainAuthority: me, JoinAuthority: me, ClientVersion: client.Version})
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, c, authority, ixs, account)
	rc, err := coordinator.ParseRunConfig(runID+".toml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	params, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	update, err := run.Update(me, params)
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, c, authority, []solana.Instruction{update})
	return &runEnv{v: v, c: c, authority: authority, program: program, run: run, runID: runID, rendezvous: t.TempDir()}
}

func (e *runEnv) unpause(t *testing.T) {
	t.Helper()
	ix, err := e.run.SetPaused(e.authority.PublicKey(), false)
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, e.c, e.authority, []solana.Instruction{ix})
}

// start runs training client i (a funded wallet of its own, held-out loss
// every 4 steps) until the run ends; adjust may change its config.
func (e *runEnv) start(ctx context.Context, t *testing.T, i int, adjust func(*client.Config)) (*trainingClient, *p2p.Node) {
	key := localnettest.NewFundedKeypair(t, e.v, 2*solana.LAMPORTS_PER_SOL)
	node, err := p2p.New(ctx, p2p.Config{RunID: e.runID, ListenInterface: "127.0.0.1", RendezvousDir: e.rendezvous,
		DiscoveryInterval: time.Second, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	eval, err := provider.OpenLocal(e.valDir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eval.Close() })
	tc := &trainingClient{rec: status.NewRecorder(e.runID, status.Options{}), done: make(chan struct{})}
	cfg := client.Config{
		RunID: e.runID, Program: e.program, Chains: []*chain.Client{programtest.Chain(t, e.v)}, Wallet: key,
		Authorization: e.authAddr, Node: node, Recorder: tc.rec, Eval: eval, EvalEvery: 4, EvalSequences: 8,
		Threads: 1, Log: testLogger(t, i),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(tc.done)
		tc.err = cl.Run(ctx)
	}()
	return tc, node
}

// deadWS is rpcURL with a websocket URL nothing listens on.
func deadWS(t *testing.T, rpcURL string) *chain.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := chain.New(rpcURL, "ws://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustSend(t *testing.T, c *chain.Client, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Send(ctx, payer, ixs, signers...); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// testLogger sends a client's logs to the test log, prefixed with its number.
func testLogger(t *testing.T, i int) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// adversary is a member that joins the first epoch, reports warmup, and then
// every round publishes a payload that is not a DeMo payload (properly
// hashed, announced and signed, so only payload validation catches it) and
// witnesses only itself.
type adversary struct {
	node      *p2p.Node
	done      chan struct{}
	err       error
	droppedAt uint32 // height of the round in which it was found dropped
}

func startAdversary(ctx context.Context, t *testing.T, v *localnet.Validator, run coordinator.Run, auth solana.PublicKey, rendezvous string) *adversary {
	t.Helper()
	key := localnettest.NewFundedKeypair(t, v, 2*solana.LAMPORTS_PER_SOL)
	node, err := p2p.New(ctx, p2p.Config{RunID: "e2e-light", ListenInterface: "127.0.0.1", RendezvousDir: rendezvous, DiscoveryInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	pub, err := identity.PublicKey(node.Host().Peerstore().PrivKey(node.ID()))
	if err != nil {
		t.Fatal(err)
	}
	c := programtest.Chain(t, v)
	a := &adversary{node: node, done: make(chan struct{})}
	send := func(ix solana.Instruction, err error) error {
		if err != nil {
			return err
		}
		_, err = c.Send(ctx, key, []solana.Instruction{ix})
		return err
	}
	go func() {
		defer close(a.done)
		me := key.PublicKey()
		joined, warmed, published, witnessed := false, false, uint32(0), uint32(0)
		garbage := make([]byte, 15000)
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			s, err := run.FetchState(ctx, c)
			if err != nil {
				continue
			}
			if !joined && coordinator.Phase(s) == coordinator.WaitingForMembers {
				// Joins in the same second as the honest clients, well inside
				// the extra waiting time, so the first epoch forms with it.
				ixs, err := run.JoinRunSigned(me, auth, [32]byte(pub), node.Sign)
				if err == nil {
					_, err = c.Send(ctx, key, ixs)
				}
				if a.err = err; err != nil {
					return
				}
				joined = true
			}
			idx := coordinator.MemberIndex(s, me)
			if s.Progress.Epoch > 0 || idx < 0 {
				if s.Progress.Epoch > 0 {
					a.err = errors.New("still not dropped when the first epoch ended")
					return
				}
				continue
			}
			var ids []peer.ID
			for _, m := range coordinator.Members(s) {
				id, _ := identity.PeerIDFromPublicKey(m.P2PIdentity[:])
				ids = append(ids, id)
			}
			node.SetParticipants(ids)
			r := coordinator.CurrentRound(s)
			switch {
			case coordinator.Members(s)[idx].State == coordinator.MemberDropped:
				a.droppedAt = r.Height
				return
			case coordinator.Phase(s) == coordinator.Warmup && !warmed:
				warmed = send(run.WarmupWitness(me)) == nil
			case coordinator.Phase(s) == coordinator.RoundTrain && published != r.Step:
				_, _ = rand.Read(garbage)
				if _, err := node.Publish(ctx, uint64(r.Step), p2p.BatchID{}, garbage); err == nil {
					published = r.Step
				}
			case coordinator.Phase(s) == coordinator.RoundTrain && witnessed != r.Step:
				bits, hashes := schedule.BloomParams(int(r.ClientsLen))
				pb, _ := schedule.NewBloom(bits, hashes, [8]byte{1})
				bb, _ := schedule.NewBloom(bits, hashes, [8]byte{2})
				pb.Add(me)
				bb.Add(client.Commitment(me, r.Step, p2p.HashOf(garbage)))
				if send(run.Witness(me, coordinator.WitnessReport{Step: r.Step, Index: uint16(idx), Participants: pb, Broadcasts: bb})) == nil {
					witnessed = r.Step
				}
			}
		}
	}()
	return a
}

// A client of another version than the run's is refused. In a permissioned
// run a client without an authorization is refused with a clear error and
// leaves nothing behind; once the join authority grants it
// (join-authorization-create), the same client joins.
func TestPermissionedJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const runID = "e2e-permissioned"
	e := createRun(ctx, t, runID, fmt.Sprintf(testConfig, "http://127.0.0.1:1/", strings.Repeat("ab", 32)))
	e.unpause(t)
	v, c, authority, program, run, me := e.v, e.c, e.authority, e.program, e.run, e.authority.PublicKey()

	user := localnettest.NewFundedKeypair(t, v, 2*solana.LAMPORTS_PER_SOL)
	auth := authorizer.Default()
	addr, _, err := auth.Address(me, user.PublicKey(), authorizer.JoinRunScope)
	if err != nil {
		t.Fatal(err)
	}
	// Data the client can read: it joins only once it has opened it.
	trainDir, _ := dataset(t)
	data, err := provider.Open(ctx, []provider.Source{{Location: trainDir}}, provider.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close() })
	newClient := func(version string, data provider.Provider) *client.Client {
		node, err := p2p.New(ctx, p2p.Config{RunID: runID, ListenInterface: "127.0.0.1", DisableRunDHT: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		cl, err := client.New(client.Config{RunID: runID, Program: program, Chains: []*chain.Client{c}, Wallet: user,
			Authorization: addr, Node: node, Recorder: status.NewRecorder(runID, status.Options{}), Log: testLogger(t, 0), Version: version, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// Another client version is told so before anything else (train exits 10).
	if err := newClient("v2", data).Run(ctx); !errors.Is(err, client.ErrVersionMismatch) {
		t.Fatalf("client v2 on a v1 run: %v, want ErrVersionMismatch", err)
	}
	err = newClient("", data).Run(ctx)
	if !errors.Is(err, client.ErrNotAuthorized) {
		t.Fatalf("unauthorised client: %v, want ErrNotAuthorized", err)
	}
	t.Logf("unauthorised client: %v", err)
	if _, ok := coordinator.Slot(mustState(ctx, t, run, c), user.PublicKey()); ok {
		t.Fatal("a refused client holds a slot")
	}

	create, created, err := auth.Create(me, me, user.PublicKey(), authorizer.JoinRunScope)
	if err != nil || created != addr {
		t.Fatalf("authorization %s, %v; want %s", created, err, addr)
	}
	activate, err := auth.SetActive(me, addr, true)
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, c, authority, []solana.Instruction{create, activate})
	// Authorized, but unable to read the run's data (its server is down):
	// it stops before it takes a slot, which would hold up every round.
	if err := newClient("", nil).Run(ctx); err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("client without the run's data: %v, want an error that says how to give it data", err)
	}
	if _, ok := coordinator.Slot(mustState(ctx, t, run, c), user.PublicKey()); ok {
		t.Fatal("a client that cannot read the run's data holds a slot")
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newClient("", data).Run(runCtx) }()
	for {
		if slot, ok := coordinator.Slot(mustState(ctx, t, run, c), user.PublicKey()); ok && slot.Pending != 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("authorised client stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("the authorised client never joined")
		case <-time.After(200 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client after Ctrl-C: %v", err)
	}
	// Leaving withdrew the pending join.
	if slot, ok := coordinator.Slot(mustState(ctx, t, run, c), user.PublicKey()); ok && slot.Pending != 0 {
		t.Error("the join is still pending after the client left")
	}
}

func mustState(ctx context.Context, t *testing.T, run coordinator.Run, c *chain.Client) *coordinator.State {
	t.Helper()
	s, err := run.FetchState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
