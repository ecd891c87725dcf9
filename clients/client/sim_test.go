package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/coordinator/coordsim"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/status"
)

// Simulated runs: several clients, each a real engine and executor with a
// real (tiny) trainer and real data, against the real Coordinator logic
// (coordsim: the Rust state machine, in-process), exchanging payloads over
// an in-memory network. Time is simulated: the chain's clock advances in
// 250 ms ticks, and in every tick each client is handed the state it would
// get (or a stale one, or none while its websocket is down) and the p2p
// messages it would receive, in an order the test picks. Nothing waits on a
// wall clock, so epochs take milliseconds.
//
// A live run (newLiveRun) is the same harness run as psyche-client train
// runs: each client's own loop (Client.Run) in a goroutine, real p2p nodes
// on loopback (QUIC and TCP, found through a rendezvous directory), and
// the wall clock as the chain's; only the chain is coordsim's. Its epochs
// take seconds, and faults that need the simulated clock (skews, stale
// states, dead websockets, silent members) do not apply.

// simConfig is a small run: a 1-layer byte-level model, 4 sequences a step,
// rounds of at most 5 s, epochs of 6 s (3-5 rounds), 18 steps.
const simConfig = `
[metadata]
name = "sim"
description = "engine simulation"
num_parameters = 40000
vocab_size = 256

[config]
waiting_for_members_extra_time = 2
warmup_time = 5
max_round_train_time = 5
round_witness_time = 1
cooldown_time = 2
epoch_time = 6
total_steps = 18
init_min_clients = 2
min_clients = 2
witness_nodes = 0
global_batch_size_start = 4
global_batch_size_end = 4
global_batch_size_warmup_tokens = 0

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 1
n_head = 2
n_embd = 32
max_seq_len = 16
data_type = "pretraining"
cold_start_warmup_steps = 0

[model.checkpoint]
kind = "ephemeral"

[model.data]
kind = "http"
location = "http://127.0.0.1:1/"

[model.lr]
schedule = "constant"
learning_rate = 0.001
final_learning_rate = 0.001
warmup_steps = 0
decay_steps = 0

[model.optimizer]
kind = "distro"
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.999
compression_topk = 8
compression_chunk = 32
quantize_1bit = true
`

// simTick is how far the chain's clock moves between two rounds of handling.
const simTick = 250 * time.Millisecond

// simRun is one simulated run.
type simRun struct {
	t       *testing.T
	ctx     context.Context
	sim     *coordsim.Sim
	now     time.Time // the chain's clock
	net     *simNet
	data    string // the prepared training data
	clients []*simClient
	rng     *rand.Rand
	// accused and refused count health checks of each signer and the
	// instructions the program refused, by kind.
	accused map[solana.PublicKey]int
	refused map[opKind]int
	// applied: step -> what each client applied (payload hashes and digest).
	applied map[uint32]map[string]string
	// onSubmit, when set, sees every instruction the program accepted.
	onSubmit func(sc *simClient, o op)
	// exchange, when set, is how long a payload takes to download after
	// its announcement arrives (fetches then finish in a later tick).
	exchange time.Duration
	fetches  []simFetch
	// live: the clients run their own loops over real p2p nodes that find
	// each other through rendezvous, and the chain's clock is the wall
	// clock (newLiveRun). mu guards what the clients' goroutines share
	// there: accused, refused, applied, each client's done, err and
	// backend, and the order of the chain's calls (held through each
	// Submit, so that their clock never goes back).
	live       bool
	rendezvous string
	mu         sync.Mutex
}

// simFetch is a payload download that completes at a chain time.
type simFetch struct {
	at time.Time
	f  func()
}

// simClient is one client of a simRun and the faults it suffers.
type simClient struct {
	name   string
	wallet solana.PrivateKey
	key    crypto.PrivKey
	c      *Client
	dir    string // its checkpoint directory
	cur    *coordinator.State
	done   bool
	err    error
	// skew is how far its local clock is off the chain's.
	skew time.Duration
	// down: its websocket is dead until then (no states, no polling).
	down time.Time
	// stale: it is handed an older state with this probability.
	stale float64
	// silent: its announcements reach nobody (it trains, nobody sees it).
	silent bool
	// honest clients must agree on every step and never be accused.
	honest bool
	// dummy: it trains with Config.DummyTraining.
	dummy bool
	// config, when set, changes its Config last (its logger, its device).
	config func(*Config)
	// backend is its trainer's (Trainer.Backend) when it last applied a step.
	backend string
	// stop, in a live run, ends its loop and waits for it.
	stop func()
}

var (
	simDataMu   sync.Mutex
	simDataDirs = map[int]string{}
)

// simData prepares (once per test binary) a byte-level dataset of 16-token
// sequences from a generated corpus.
func simData(t *testing.T) string {
	t.Helper()
	return simDataOf(t, 16)
}

// simDataOf is simData with sequences of seqLen tokens (once per length).
func simDataOf(t *testing.T, seqLen int) string {
	t.Helper()
	simDataMu.Lock()
	defer simDataMu.Unlock()
	if dir, ok := simDataDirs[seqLen]; ok {
		return dir
	}
	dir, err := prepareSimData(seqLen)
	if err != nil {
		t.Fatal(err)
	}
	simDataDirs[seqLen] = dir
	return dir
}

func prepareSimData(seqLen int) (string, error) {
	root, err := os.MkdirTemp("", "psyche-sim-data-")
	if err != nil {
		return "", err
	}
	in := filepath.Join(root, "corpus")
	if err := os.MkdirAll(in, 0o755); err != nil {
		return "", err
	}
	words := strings.Fields("the run trains one model together while clients join and leave and every replica applies the same updates in the same order")
	rng := rand.New(rand.NewPCG(1, 1))
	for year := 1990; year < 1994; year++ {
		var b strings.Builder
		for range 3000 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("%d.txt", year)), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	sp, err := corpus.NewSplit("train", 2000)
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "train")
	_, err = prepare.Run(context.Background(), prepare.Options{Input: in, Split: sp, Tokenizer: tokenizer.ByteName, SeqLen: uint32(seqLen), Out: out})
	return out, err
}

func newSimRun(t *testing.T, seed uint64) *simRun {
	t.Helper()
	return newSimRunWith(t, seed, simConfig)
}

// newSimRunWith is newSimRun with another run config.
func newSimRunWith(t *testing.T, seed uint64, config string) *simRun {
	t.Helper()
	return newRun(t, seed, config, false)
}

// newLiveRun is newSimRunWith for a live run: the clients run their own
// loops over real p2p on loopback, by the wall clock; finish waits for
// them. Its data has the config's sequence length.
func newLiveRun(t *testing.T, seed uint64, config string) *simRun {
	t.Helper()
	return newRun(t, seed, config, true)
}

func newRun(t *testing.T, seed uint64, config string, live bool) *simRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sim, err := coordsim.Start(ctx, seed)
	if err != nil {
		t.Fatalf("the Coordinator simulation: %v", err)
	}
	t.Cleanup(func() { sim.Close() })
	rc, err := coordinator.ParseRunConfig("sim.toml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	params, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	seqLen := 16
	if rc.Model != nil && rc.Model.MaxSeqLen > 0 {
		seqLen = int(rc.Model.MaxSeqLen)
	}
	r := &simRun{t: t, ctx: ctx, sim: sim, now: time.Unix(1_800_000_000, 0), net: newSimNet(), data: simDataOf(t, seqLen),
		rng: rand.New(rand.NewPCG(seed, 7)), accused: map[solana.PublicKey]int{}, refused: map[opKind]int{},
		applied: map[uint32]map[string]string{}, live: live}
	if live {
		r.now, r.rendezvous = time.Now(), t.TempDir()
	}
	if err := sim.Create("sim", "test", params, r.now.Unix()); err != nil {
		t.Fatalf("create the run: %v", err)
	}
	return r
}

// add starts a client; it acts from the next tick. opts change it before
// it starts.
func (r *simRun) add(name string, honest bool, opts ...func(*simClient)) *simClient {
	r.t.Helper()
	// Keys from the run's seeded stream, so that a run (its members' order,
	// witnesses and roles) is the same every time.
	var seed [2 * ed25519.SeedSize]byte
	for i := 0; i < len(seed); i += 8 {
		binary.LittleEndian.PutUint64(seed[i:], r.rng.Uint64())
	}
	key, _, err := crypto.GenerateEd25519Key(bytes.NewReader(seed[:ed25519.SeedSize]))
	if err != nil {
		r.t.Fatal(err)
	}
	wallet := solana.PrivateKey(ed25519.NewKeyFromSeed(seed[ed25519.SeedSize:]))
	sc := &simClient{name: name, wallet: wallet, key: key, honest: honest, dir: r.t.TempDir()}
	for _, o := range opts {
		o(sc)
	}
	r.start(sc)
	r.clients = append(r.clients, sc)
	return sc
}

// start builds sc's client (again, for a restart: same wallet, p2p key and
// checkpoint directory, nothing else kept).
func (r *simRun) start(sc *simClient) {
	r.t.Helper()
	id, err := peer.IDFromPrivateKey(sc.key)
	if err != nil {
		r.t.Fatal(err)
	}
	var node network
	if r.live {
		n, err := p2p.New(r.ctx, p2p.Config{RunID: "sim", Identity: sc.key, ListenInterface: "127.0.0.1", RendezvousDir: r.rendezvous,
			DiscoveryInterval: time.Second, RequestTimeout: 10 * time.Second})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { n.Close() })
		node = n
	} else {
		n := r.net.join(id)
		n.silent = func() bool { return sc.silent }
		n.clock = func() time.Time { return r.now }
		node = n
	}
	data, err := provider.OpenLocal(r.data, "")
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { data.Close() })
	rec := status.NewRecorder("sim", status.Options{})
	cfg := Config{RunID: "sim", Wallet: sc.wallet, Recorder: rec, Data: data, MicroBatch: 1, Threads: 1,
		CheckpointDir: sc.dir, WorkDir: r.t.TempDir(), Rand: rand.New(rand.NewPCG(r.rng.Uint64(), 1)), DummyTraining: sc.dummy,
		Clock: func() time.Time { return r.chainNow().Add(sc.skew) }}
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("client", sc.name)
	}
	if sc.config != nil {
		sc.config(&cfg)
	}
	c, err := newClient(cfg, &simChain{r: r, sc: sc}, node)
	if err != nil {
		r.t.Fatal(err)
	}
	if !r.live { // a live client's loop sets its own, and fetches in the background
		c.bg = r.ctx
		c.inbox.spawn = func(f func()) {
			if r.exchange == 0 {
				f() // fetches finish before the next tick
				return
			}
			r.fetches = append(r.fetches, simFetch{r.now.Add(r.exchange), f})
		}
	}
	c.onApply = func(step uint32, payloads [][]byte, digest string) {
		h := sha256.New()
		for _, p := range payloads {
			sum := sha256.Sum256(p)
			h.Write(sum[:])
		}
		backend := c.tr.Backend()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.applied[step] == nil {
			r.applied[step] = map[string]string{}
		}
		r.applied[step][sc.name] = hex.EncodeToString(h.Sum(nil)) + "/" + digest
		sc.backend = backend
	}
	sc.c, sc.cur, sc.done, sc.err = c, nil, false, nil
	if r.live {
		ctx, cancel := context.WithCancel(r.ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			err := c.Run(ctx)
			r.mu.Lock()
			defer r.mu.Unlock()
			if ctx.Err() == nil {
				sc.err = err
			}
			sc.done = true
		}()
		sc.stop = func() { cancel(); <-stopped }
		r.t.Cleanup(sc.stop) // before the node closes
	}
}

// chainNow is the chain's clock: the simulated one, or in a live run the
// wall clock.
func (r *simRun) chainNow() time.Time {
	if r.live {
		return time.Now()
	}
	return r.now
}

// restart stops sc's client as a crash would (no leave_run) and starts a
// fresh one in its place.
func (r *simRun) restart(sc *simClient) {
	sc.c.close()
	r.net.leave(sc.c.node.ID())
	r.start(sc)
}

// step advances the chain's clock one tick and lets every client act, in
// a random order.
func (r *simRun) step() {
	r.t.Helper()
	r.now = r.now.Add(simTick)
	due := r.fetches[:0:0]
	for _, f := range r.fetches {
		if r.now.Before(f.at) {
			due = append(due, f)
		} else {
			f.f()
		}
	}
	r.fetches = due
	for _, i := range r.rng.Perm(len(r.clients)) {
		sc := r.clients[i]
		if sc.done || r.now.Before(sc.down) {
			continue
		}
		r.net.deliver(r.ctx, sc.c)
		s := r.sim.State()
		if sc.cur != nil && sc.stale > 0 && r.rng.Float64() < sc.stale {
			s = sc.cur // an RPC node behind: the nonce check keeps what we have
		}
		if sc.c.fresh(s) {
			sc.cur = s
		}
		done, err := sc.c.handle(r.ctx, sc.cur, r.now)
		if err != nil {
			sc.err, sc.done = err, true
			r.t.Logf("%s stopped: %v", sc.name, err)
			continue
		}
		sc.done = done
	}
}

// runUntil steps until cond holds, at most limit of chain time.
func (r *simRun) runUntil(limit time.Duration, cond func() bool) bool {
	r.t.Helper()
	end := r.now.Add(limit)
	for r.now.Before(end) {
		if cond() {
			return true
		}
		r.step()
	}
	return cond()
}

func (r *simRun) phase() coordinator.RunState { return coordinator.Phase(r.sim.State()) }

// stuck fails the test for a run that did not get where it should, with
// what a reader needs to tell why: the run's phase, step and epoch, the
// members, the instructions refused and each client's own state.
func (r *simRun) stuck(what string) {
	r.t.Helper()
	s := r.sim.State()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s at step %d, epoch %d, %d members, refused %v, accused %d", what, r.phase(), s.Progress.Step,
		s.Progress.Epoch, s.Epoch.ClientsLen, r.refused, len(r.accused))
	for _, sc := range r.clients {
		fmt.Fprintf(&b, "\n  %s: done %v, err %v, model %v, last step %d, warmed epoch %d", sc.name, sc.done, sc.err,
			sc.c.e.model, sc.c.e.lastStep, sc.c.e.warmedEpoch)
	}
	r.t.Fatal(b.String())
}

// finished says whether the run is Finished and every live client saw it.
func (r *simRun) finished() bool {
	if r.phase() != coordinator.Finished {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sc := range r.clients {
		if !sc.done {
			return false
		}
	}
	return true
}

// check asserts the invariants: honest clients applied the same payloads
// and hold the same weights at every step, none was accused, and no client
// stopped with an error.
func (r *simRun) check() {
	r.t.Helper()
	for step, by := range r.applied {
		want, who := "", ""
		for _, sc := range r.clients {
			got, ok := by[sc.name]
			if !ok || !sc.honest {
				continue
			}
			if want == "" {
				want, who = got, sc.name
			} else if got != want {
				r.t.Errorf("step %d: %s applied %s, %s applied %s", step, who, want, sc.name, got)
			}
		}
	}
	for _, sc := range r.clients {
		if sc.honest && r.accused[sc.wallet.PublicKey()] > 0 {
			r.t.Errorf("honest %s was health-checked", sc.name)
		}
		if sc.err != nil {
			r.t.Errorf("%s: %v", sc.name, sc.err)
		}
	}
}

// appliedBy is the number of steps sc applied.
func (r *simRun) appliedBy(sc *simClient) int {
	n := 0
	for _, by := range r.applied {
		if _, ok := by[sc.name]; ok {
			n++
		}
	}
	return n
}

// simChain is one client's view of the simulated chain. A simulation is
// answered as the program would answer the instruction only where the
// client relies on it: a tick is checked by sending it (the client sends
// it right after a successful simulation anyway), a join always passes
// (authorization is not simulated).
type simChain struct {
	r  *simRun
	sc *simClient
}

// Follow, in a live run, sends every new state as an account subscription
// would (the newest replaces one not yet taken); the simulated clock hands
// states over itself.
func (ch *simChain) Follow(ctx context.Context, out chan observed) {
	if !ch.r.live {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(livePoll)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := ch.r.sim.State()
		if s == nil || s.Nonce == nonce {
			continue
		}
		nonce = s.Nonce
		select {
		case <-out:
		default:
		}
		out <- observed{state: s, chain: ch.r.chainNow()}
	}
}

// livePoll is how often a live run's clients look for a new state: a
// validator's notifications come about that late.
const livePoll = 50 * time.Millisecond

func (ch *simChain) Read(context.Context) (*observed, error) {
	return &observed{state: ch.r.sim.State(), chain: ch.r.chainNow()}, nil
}

// Submit sends o to the simulated program; r.onSubmit sees what it
// accepted (with r.mu held).
func (ch *simChain) Submit(_ context.Context, o op, simulate bool) error {
	if simulate {
		return nil
	}
	ch.r.mu.Lock()
	defer ch.r.mu.Unlock()
	r, me, now := ch.r, ch.sc.wallet.PublicKey(), ch.r.chainNow().Unix()
	var err error
	switch o.kind {
	case opJoin:
		err = r.sim.Join(me, ch.sc.c.p2pKey, now)
	case opLeave:
		err = r.sim.Leave(me, now)
	case opTick:
		err = r.sim.Tick(me, now)
	case opWarmup:
		err = r.sim.WarmupWitness(me, now)
	case opWitness:
		err = r.sim.Witness(me, o.report, now)
	case opHealthCheck:
		if err = r.sim.HealthCheck(me, o.step, o.index, o.accused, now); err == nil {
			r.accused[o.accused]++
		}
	case opCheckpoint:
		err = r.sim.Checkpoint(me, o.repo, o.rev, now)
	case opCommit:
		err = r.sim.Commit(me, o.commit, now)
	case opVerify:
		err = r.sim.Verify(me, o.verify, now)
	case opJudge:
		err = r.sim.JudgeDispute(me, o.dispute, o.vote, now)
	case opAnswer:
		err = r.sim.AnswerDispute(me, o.dispute, o.claim[0], o.claim[1], now)
	case opReportEval:
		err = r.sim.ReportEval(me, o.eval, now)
	case opReportPrompt:
		err = r.sim.ReportPrompt(me, o.prompt, now)
	}
	var te *chain.TxError
	if errors.As(err, &te) {
		r.refused[o.kind]++
	}
	if err == nil && r.onSubmit != nil {
		r.onSubmit(ch.sc, o)
	}
	return err
}

// simNet is an in-memory p2p network: gossip is queued per receiver and
// handed over by the simRun, blobs and shared models are read from the
// publisher's store.
type simNet struct {
	mu     sync.Mutex
	nodes  map[peer.ID]*simNode
	blobs  map[p2p.Hash][]byte
	models map[p2p.Hash]*simModel
	// served: what each node serves by hash without announcing it.
	served map[peer.ID]map[p2p.Hash][]byte
	// compute, when set, delays every gossip message by that much chain
	// time: a payload is announced only after its training would be done.
	compute time.Duration
}

// simMsg is a queued gossip message and the chain time it arrives.
type simMsg struct {
	at time.Time
	m  p2p.Message
}

type simModel struct {
	owner  peer.ID
	src    io.ReaderAt
	size   int64
	served time.Time
}

type simNode struct {
	net    *simNet
	id     peer.ID
	queue  []simMsg
	banned map[peer.ID]string
	msgs   chan p2p.Message
	silent func() bool
	clock  func() time.Time
}

func newSimNet() *simNet {
	return &simNet{nodes: map[peer.ID]*simNode{}, blobs: map[p2p.Hash][]byte{}, models: map[p2p.Hash]*simModel{},
		served: map[peer.ID]map[p2p.Hash][]byte{}}
}

func (n *simNet) join(id peer.ID) *simNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	node := &simNode{net: n, id: id, banned: map[peer.ID]string{}, msgs: make(chan p2p.Message)}
	n.nodes[id] = node
	return node
}

func (n *simNet) leave(id peer.ID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, id)
	for root, m := range n.models {
		if m.owner == id {
			delete(n.models, root)
		}
	}
}

// deliver hands c the messages queued for it that have arrived.
func (n *simNet) deliver(ctx context.Context, c *Client) {
	n.mu.Lock()
	node := n.nodes[c.node.ID()]
	var now []p2p.Message
	later := node.queue[:0:0]
	for _, q := range node.queue {
		if node.clock().Before(q.at) {
			later = append(later, q)
		} else {
			now = append(now, q.m)
		}
	}
	node.queue = later
	n.mu.Unlock()
	for _, m := range now {
		c.inbox.deliver(ctx, m)
	}
}

// gossip queues m for every other node.
func (n *simNet) gossip(from *simNode, m p2p.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if from.silent != nil && from.silent() {
		return
	}
	at := from.clock().Add(n.compute)
	for id, node := range n.nodes {
		if id != from.id {
			if _, banned := node.banned[from.id]; !banned {
				node.queue = append(node.queue, simMsg{at, m})
			}
		}
	}
}

func (s *simNode) ID() peer.ID                  { return s.id }
func (s *simNode) Messages() <-chan p2p.Message { return s.msgs }
func (s *simNode) SetParticipants([]peer.ID)    {}
func (s *simNode) Snapshot() p2p.Snapshot       { return p2p.Snapshot{} }
func (s *simNode) PruneBefore(uint64)           {}

func (s *simNode) Ban(id peer.ID, reason string) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	s.banned[id] = reason
}

func (s *simNode) Publish(_ context.Context, step uint64, batch p2p.BatchID, payload []byte) (p2p.Announcement, error) {
	a := p2p.Announcement{Step: step, Batch: batch, Hash: p2p.HashOf(payload), Size: uint64(len(payload)), Signer: s.id}
	s.net.mu.Lock()
	s.net.blobs[a.Hash] = payload
	s.net.mu.Unlock()
	s.net.gossip(s, p2p.Message{From: s.id, Announcement: &a})
	return a, nil
}

func (s *simNode) FetchBlob(_ context.Context, a p2p.Announcement) ([]byte, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	b, ok := s.net.blobs[a.Hash]
	if !ok {
		return nil, errors.New("no peer serves it")
	}
	return b, nil
}

func (s *simNode) Serve(_ uint64, data []byte) (p2p.Hash, error) {
	h := p2p.HashOf(data)
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.net.served[s.id] == nil {
		s.net.served[s.id] = map[p2p.Hash][]byte{}
	}
	s.net.served[s.id][h] = data
	return h, nil
}

func (s *simNode) FetchFrom(_ context.Context, p peer.ID, h p2p.Hash, max uint64) ([]byte, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	b, ok := s.net.served[p][h]
	if _, up := s.net.nodes[p]; !ok || !up || uint64(len(b)) > max {
		return nil, fmt.Errorf("%s does not serve %s", p, h)
	}
	return b, nil
}

func (s *simNode) Finish(_ context.Context, f p2p.Finished) (p2p.Finished, error) {
	f.Signer = s.id
	s.net.gossip(s, p2p.Message{From: s.id, Finished: &f})
	return f, nil
}

func (s *simNode) ShareModel(m *p2p.Manifest, src io.ReaderAt) p2p.Hash {
	root := m.Root()
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	s.net.models[root] = &simModel{owner: s.id, src: src, size: int64(m.TotalSize)}
	return root
}

func (s *simNode) StopSharing(root p2p.Hash) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if m, ok := s.net.models[root]; ok && m.owner == s.id {
		delete(s.net.models, root)
	}
}

func (s *simNode) ModelLastServed(root p2p.Hash) (time.Time, bool) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	m, ok := s.net.models[root]
	if !ok {
		return time.Time{}, false
	}
	return m.served, true
}

func (s *simNode) FetchModel(_ context.Context, root p2p.Hash, dst string, _ p2p.FetchModelOptions) (*p2p.Manifest, error) {
	s.net.mu.Lock()
	m, ok := s.net.models[root]
	if ok {
		m.served = s.clock()
	}
	s.net.mu.Unlock()
	if !ok {
		return nil, errors.New("no peer shares that model")
	}
	buf := make([]byte, m.size)
	if _, err := m.src.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	man, err := p2p.BuildManifest(bytes.NewReader(buf), m.size, p2p.DefaultChunkSize)
	if err != nil {
		return nil, err
	}
	if man.Root() != root {
		return nil, errors.New("the shared model does not match its root")
	}
	if err := os.WriteFile(dst, buf, 0o644); err != nil {
		return nil, err
	}
	return man, nil
}

var _ network = (*simNode)(nil)

// simLimit bounds a simulated run by the chain's clock: 18 steps in epochs
// of a few steps take well under a minute.
const simLimit = 5 * time.Minute

// liveLimit bounds a live run by the wall clock.
const liveLimit = 2 * time.Minute

// finish runs r to Finished and checks the invariants. A live run is
// waited for (at most liveLimit) and its clients stopped first.
func (r *simRun) finish() {
	r.t.Helper()
	if r.live {
		r.finishLive()
		return
	}
	start := r.now
	if !r.runUntil(simLimit, r.finished) {
		r.stuck(fmt.Sprintf("not finished after %v of chain time", simLimit))
	}
	r.t.Logf("finished after %d epochs, %v of chain time", r.sim.State().Progress.Epoch, r.now.Sub(start))
	r.check()
}

func (r *simRun) finishLive() {
	r.t.Helper()
	start, end := r.now, time.Now().Add(liveLimit)
	failed := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, sc := range r.clients {
			if sc.err != nil {
				return true
			}
		}
		return false
	}
	for !r.finished() && !failed() && time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
	}
	done := r.finished()
	for _, sc := range r.clients {
		sc.stop()
	}
	if !done {
		r.stuck(fmt.Sprintf("not finished after %v", time.Since(start).Round(time.Second)))
	}
	r.t.Logf("finished after %d epochs, %v", r.sim.State().Progress.Epoch, time.Since(start).Round(100*time.Millisecond))
	r.check()
}

// allApplied asserts that sc applied every step of the run from `from`.
func (r *simRun) allApplied(sc *simClient, from uint32) {
	r.t.Helper()
	total := r.sim.State().Config.TotalSteps
	for step := from; step <= total; step++ {
		if _, ok := r.applied[step][sc.name]; !ok {
			r.t.Errorf("%s did not apply step %d", sc.name, step)
		}
	}
}

// Three clients train a run through its epochs to Finished, every replica
// identical at every step, nobody accused, no instruction refused.
func TestSimRunToFinished(t *testing.T) {
	r := newSimRun(t, 1)
	a, b, c := r.add("a", true), r.add("b", true), r.add("c", true)
	r.finish()
	for _, sc := range []*simClient{a, b, c} {
		r.allApplied(sc, 1)
	}
	if r.refused[opTick] > 0 || r.refused[opWitness] > 0 || r.refused[opWarmup] > 0 {
		t.Errorf("refused instructions: %v", r.refused)
	}
}

// A member with DummyTraining computes nothing: it reports no loss, its
// payloads (of a zero gradient) are applied like any other, and every
// replica agrees at every step; the members that train report real losses.
func TestSimDummyTraining(t *testing.T) {
	r := newSimRun(t, 12)
	a, b := r.add("a", true), r.add("b", true)
	d := r.add("dummy", true, func(sc *simClient) { sc.dummy = true })
	r.finish()
	for _, sc := range []*simClient{a, b, d} {
		r.allApplied(sc, 1)
		steps := sc.c.cfg.Recorder.Snapshot().Steps
		if len(steps) == 0 {
			t.Fatalf("%s recorded no steps", sc.name)
		}
		for _, st := range steps {
			if st.Tokens == 0 {
				continue // a step it applied without training
			}
			if trained := float64(st.Loss) > 0; trained == sc.dummy {
				t.Errorf("%s (dummy %v) reported loss %v at step %d", sc.name, sc.dummy, st.Loss, st.Step)
			}
		}
	}
}

// A member whose payloads reach nobody is left out of every round it
// trains, and the health checks drop it; the others agree on every step.
func TestSimMissingPayloads(t *testing.T) {
	r := newSimRun(t, 2)
	r.add("a", true)
	r.add("b", true)
	r.add("c", true)
	mute := r.add("mute", false)
	mute.silent = true
	r.finish()
	if r.accused[mute.wallet.PublicKey()] == 0 {
		t.Error("the member whose payloads never arrived was never health-checked")
	}
}

// A client that starts in the middle of the run loads the model from its
// peers, applies the rounds since, joins, and agrees from its first step.
func TestSimLateJoin(t *testing.T) {
	r := newSimRun(t, 3)
	r.add("a", true)
	r.add("b", true)
	if !r.runUntil(simLimit, func() bool { return r.sim.State().Progress.Step >= 6 }) {
		r.stuck("the run did not reach step 6")
	}
	late := r.add("late", true)
	r.finish()
	if n := r.appliedBy(late); n < 4 {
		t.Errorf("the late client applied %d steps, want the last epoch's at least", n)
	}
	trained := false
	for _, sc := range r.clients {
		if sc == late {
			trained = sc.c.e.warmedEpoch > 0
		}
	}
	if !trained {
		t.Error("the late client never became a member that trains")
	}
}

// A client whose websocket dies for longer than a round misses rounds; it
// drops its replica, loads the model from its peers, and agrees again.
func TestSimDeadWebsocket(t *testing.T) {
	r := newSimRun(t, 4)
	r.add("a", true)
	r.add("b", true)
	r.add("c", true)
	cut := r.add("cut", false)
	if !r.runUntil(simLimit, func() bool { return r.sim.State().Progress.Step >= 3 }) {
		r.stuck("the run did not reach step 3")
	}
	cut.down = r.now.Add(15 * time.Second)
	r.finish()
	last := r.sim.State().Config.TotalSteps
	if _, ok := r.applied[last][cut.name]; !ok {
		t.Errorf("the client whose websocket died never caught up to step %d", last)
	}
	if cut.c.e.loadFrom == 0 {
		t.Error("the client whose websocket died never dropped its replica for a newer model")
	}
}

// Stale and out-of-order states (RPC nodes behind others) change nothing.
func TestSimStaleStates(t *testing.T) {
	r := newSimRun(t, 5)
	for _, name := range []string{"a", "b", "c"} {
		r.add(name, true).stale = 0.3
	}
	r.finish()
}

// Clients whose clocks are 3 s off the chain's neither tick early nor stall.
func TestSimClockSkew(t *testing.T) {
	r := newSimRun(t, 6)
	r.add("fast", true).skew = 3 * time.Second
	r.add("slow", true).skew = -3 * time.Second
	r.add("fast2", true).skew = 3 * time.Second
	start := r.now
	r.finish()
	if r.refused[opTick] > 0 {
		t.Errorf("%d ticks refused", r.refused[opTick])
	}
	t.Logf("finished in %v of chain time", r.now.Sub(start))
}

// A member that crashes mid-epoch and restarts (same wallet, a fresh
// process) catches up from its peers and trains again.
func TestSimRestartMidEpoch(t *testing.T) {
	r := newSimRun(t, 7)
	r.add("a", true)
	r.add("b", true)
	x := r.add("x", false)
	if !r.runUntil(simLimit, func() bool {
		s := r.sim.State()
		return coordinator.Phase(s) == coordinator.RoundTrain && coordinator.CurrentRound(s).Height == 1 && s.Progress.Epoch == 1
	}) {
		r.stuck("the run did not reach the second round of its second epoch")
	}
	before := r.appliedBy(x)
	r.restart(x)
	r.finish()
	if after := r.appliedBy(x); after <= before {
		t.Errorf("the restarted client applied nothing after its restart (%d steps before)", before)
	}
}

// A random walk: clients in random order, random stale states, clock
// skews up to 3 s, short websocket drops, a client joining at a random
// time. However it goes, honest clients apply the same payloads at every
// step and are never health-checked, and the run finishes.
func TestSimRandomWalk(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newSimRun(t, 100+seed)
			rng := rand.New(rand.NewPCG(seed, 99))
			fault := func(sc *simClient) {
				sc.skew = time.Duration(rng.IntN(7)-3) * time.Second
				sc.stale = []float64{0, 0.2}[rng.IntN(2)]
			}
			for i := range 3 {
				fault(r.add(fmt.Sprint("c", i), true))
			}
			joinAt := r.now.Add(time.Duration(rng.IntN(60)) * time.Second)
			joined := false
			done := r.runUntil(simLimit, func() bool {
				if !joined && !r.now.Before(joinAt) {
					fault(r.add("joiner", true))
					joined = true
				}
				if rng.IntN(40) == 0 { // a drop of up to 750 ms
					sc := r.clients[rng.IntN(len(r.clients))]
					sc.down = r.now.Add(time.Duration(1+rng.IntN(3)) * simTick)
				}
				return r.finished()
			})
			if !done {
				t.Fatalf("not finished after %v: %s at step %d", simLimit, r.phase(), r.sim.State().Progress.Step)
			}
			r.check()
		})
	}
}

// A run paused mid-epoch and resumed: clients neither join nor tick while
// it is Paused, then train on from where it stopped (a cold start).
func TestSimPauseAndResume(t *testing.T) {
	r := newSimRun(t, 8)
	r.add("a", true)
	r.add("b", true)
	r.add("c", true)
	if !r.runUntil(simLimit, func() bool { return r.sim.State().Progress.Step >= 5 }) {
		r.stuck("the run did not reach step 5")
	}
	if err := r.sim.SetPaused(true, r.now.Unix()); err != nil {
		t.Fatal(err)
	}
	refused := r.refused[opTick] + r.refused[opJoin]
	r.runUntil(10*time.Second, func() bool { return false })
	if r.phase() != coordinator.Paused || r.refused[opTick]+r.refused[opJoin] != refused {
		t.Fatalf("while paused: %s, %d ticks and joins refused", r.phase(), r.refused[opTick]+r.refused[opJoin]-refused)
	}
	if err := r.sim.SetPaused(false, r.now.Unix()); err != nil {
		t.Fatal(err)
	}
	r.finish()
	for _, sc := range r.clients {
		r.allApplied(sc, 1)
	}
}
