// Package client is the training client's loop: it follows a run's
// Coordinator account, joins each epoch, trains its share of every round
// with the native trainer, exchanges DeMo payloads over p2p, witnesses,
// applies the updates the witnesses attested, sends health checks and ticks
// the state machine when it is due. README.md states the protocol rules it
// follows, including the exact rule for which payloads are applied.
package client

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Version is the client version this build reports; a run whose on-chain
// client_version differs (other than "test") is left with ErrVersionMismatch.
const Version = "v1"

// ErrVersionMismatch means the run requires another client version; the CLI
// exits with code 10 so a supervisor can fetch the right one and restart.
var ErrVersionMismatch = errors.New("the run requires another client version")

// ErrNotAuthorized means the run refused to let this wallet join.
var ErrNotAuthorized = errors.New("not authorized to join the run")

// Config is what a client needs. Chains, Wallet, RunID, Node and Recorder are required.
type Config struct {
	RunID   string
	Program coordinator.Program
	// Chains are the RPC endpoints, primary first; on an error the client
	// fails over to the next.
	Chains []*chain.Client
	Wallet solana.PrivateKey
	// Authorization is the Authorizer account that lets Wallet join.
	Authorization solana.PublicKey
	Node          *p2p.Node
	Recorder      *status.Recorder
	Log           *slog.Logger
	// Version overrides the Version constant (e.g. $CLIENT_VERSION).
	Version string

	// Data overrides the run's data location; nil opens it (with the run's
	// pinned root). Eval, when set, gives held-out loss on its first
	// EvalSequences sequences every EvalEvery steps.
	Data          provider.Provider
	Eval          provider.Provider
	EvalSequences int
	EvalEvery     int
	// EvalTasks are benchmark tasks the model of every epoch is scored on
	// (every item: Task.Sample picks fewer), the scores recorded and
	// published on chain (benchmark.go).
	EvalTasks []eval.Task
	// PromptTask continues one of eval.Prompts with the model of every
	// epoch, greedily, and publishes the tokens on chain (benchmark.go).
	PromptTask bool
	// EvalSeed picks the prompt task's prompt (eval.PromptFor), so that
	// clients with the same seed continue the same one.
	EvalSeed uint64
	// Tokenizer is the tokenizer.json file of a run whose model names one
	// (checked against the hash the run pins); byte and gpt2 need none.
	Tokenizer string

	MicroBatch int
	Threads    int
	// Device selects the trainer backend.
	Device Device
	// Devices are the CUDA ordinals a GPU trainer spreads each step over
	// (trainer.SetDevices); nil: device 0 alone. They form groups of
	// TensorParallelism devices (0 or 1: one device each), which share
	// each step's token shards (data parallelism): the group count must
	// divide the run's grad_shards, or the run is refused before joining
	// (ErrParallelism).
	Devices           []int
	TensorParallelism int
	// RecomputeActivations has a GPU trainer keep only each layer's input
	// and recompute the layer in backward (trainer.Config.Recompute), even
	// where the model fits without; it is on anyway where it fits only so.
	RecomputeActivations bool
	// Precisions are the numeric contracts (Model.precision, by name:
	// "fp32", "mx8") this client accepts to train under; a run under
	// another is refused before joining (ErrPrecision). nil: every one this
	// build trains (Precisions).
	Precisions []string
	// TrainingDelay is added to every training step, to simulate a slow device.
	TrainingDelay time.Duration
	// DummyTraining skips the model's compute in this member's own steps
	// (dummyTrainer): for testing networks and chains at scale.
	DummyTraining bool
	// CheckpointDir, when set, receives a safetensors checkpoint of the
	// model at the end of every epoch; KeepSteps of them are kept when
	// DeleteOldSteps.
	CheckpointDir  string
	KeepSteps      int
	DeleteOldSteps bool
	// HubUpload makes this client a checkpointer: at the end of every
	// epoch it uploads the model to the run's hub repo (checkpoint kind hub
	// or p2p) with HubToken and announces the revision on chain.
	HubUpload bool
	HubToken  string
	// DataCacheDir keeps verified chunks of the run's data server ("" keeps none).
	DataCacheDir string
	// GradientsDir, when set, receives this client's replay files of every
	// step it trains (trainer.WriteReplayFiles, and the model the step
	// started from), for psyche-client verify; those of its newest
	// GradientsKeep steps are kept.
	GradientsDir  string
	GradientsKeep int

	// WorkDir holds model files shared with joiners; "" uses a temporary
	// directory removed at the end.
	WorkDir string

	// PollInterval is how often the newest Coordinator state is acted on
	// again between notifications (timers, deadlines).
	PollInterval time.Duration
	// Rand spreads ticks between clients; nil seeds one from the clock.
	Rand *rand.Rand
	// Clock is the local time (nil: time.Now). Phase timers are judged by
	// the chain's clock, never by this one.
	Clock func() time.Time

	// Tracer, when set, sees each round's work (tracing.go).
	Tracer Tracer

	// Cheat makes this client dishonest from epoch CheatFrom on: for the
	// verification tests only.
	Cheat     Cheat
	CheatFrom uint32
}

// The defaults of Config's zero values; the CLI's flags show the same.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultMicroBatch    = 8
	DefaultEvalEvery     = 5
	DefaultEvalSequences = 16
	DefaultKeepSteps     = 3
	// DefaultGradientsKeep is twice what psyche-client verify needs while
	// the run goes on: the chain holds the commitments of the 4 rounds the
	// Coordinator stores, and every open dispute is about one of them (it
	// is settled within 2 rounds of its step).
	DefaultGradientsKeep = 8
)

// Device is the trainer backend a client asks for.
type Device int

const (
	// DeviceCPU always trains on the CPU (the zero value).
	DeviceCPU Device = iota
	// DeviceAuto uses the GPU when one is usable, else the CPU.
	DeviceAuto
	// DeviceCUDA requires the GPU.
	DeviceCUDA
)

// Client runs one wallet's participation in one run: it carries out what
// the engine decides.
type Client struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	chain coordinatorChain
	node  network
	inbox *inbox
	e     *engine
	// p2pKey is the node's ed25519 public key, sent with join_run.
	p2pKey [32]byte

	// Touched by the loop only; the inbox has its own reference to the
	// trainer, set once it is built.
	tr    replica
	model coordinator.Model
	data  provider.Provider
	owned bool   // data was opened here and is closed here
	mem   Memory // what this client trains in (clientMemory)
	// recompute: the model's trainers recompute activations (memoryPlan,
	// decided when the model is built).
	recompute bool

	lastNonce    uint64
	epoch        uint32    // the run's, as last observed
	participants []peer.ID // sorted, as last given to the p2p node
	peersAt      time.Time
	workDir      string // shared and fetched model files
	ownDir       bool   // workDir was created here and is removed here
	bg           context.Context
	// replay is the trainer replays run on, one at a time (replayMu), in
	// the background; closed with the client.
	replayMu sync.Mutex
	// benchmarking counts benchmark scorings in flight (benchmark.go).
	benchmarking sync.WaitGroup
	replay       *trainer.Trainer
	replayClosed bool
	// snapshots are the weights disputed rounds started from, by step.
	snapshots map[uint32][]float32
	vstats    verifyStats
	faults    faultLog
	// sharingLogged: "sharing the model with joiners" was said at Info.
	sharingLogged bool
	// onApply, when set (tests), sees every applied step's payloads and digest.
	onApply func(step uint32, payloads [][]byte, digest string)
}

// New checks cfg and prepares a client; Run starts it.
func New(cfg Config) (*Client, error) {
	switch {
	case len(cfg.Chains) == 0:
		return nil, errors.New("client: no RPC endpoint")
	case cfg.Wallet == nil:
		return nil, errors.New("client: no wallet")
	case cfg.Node == nil:
		return nil, errors.New("client: a p2p node is required")
	}
	if _, err := cfg.Program.InstanceAddress(cfg.RunID); err != nil {
		return nil, err
	}
	return newClient(cfg, nil, cfg.Node)
}

// newClient prepares a client on any chain and network (ch nil: the RPC
// endpoints of cfg, opened by Run).
func newClient(cfg Config, ch coordinatorChain, node network) (*Client, error) {
	switch {
	case cfg.Recorder == nil:
		return nil, errors.New("client: a status recorder is required")
	case cfg.MicroBatch < 0 || cfg.Threads < 0 || cfg.EvalEvery < 0 || cfg.EvalSequences < 0 || cfg.KeepSteps < 0 || cfg.GradientsKeep < 0:
		return nil, errors.New("client: sizes and counts cannot be negative")
	}
	precisionsGiven := cfg.Precisions != nil
	if precisionsGiven {
		p, err := ParsePrecisions(cfg.Precisions)
		if err != nil {
			return nil, fmt.Errorf("client: Precisions: %w", err)
		}
		cfg.Precisions = p
	} else {
		cfg.Precisions = Precisions
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = Version
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MicroBatch == 0 {
		cfg.MicroBatch = DefaultMicroBatch
	}
	if cfg.EvalEvery == 0 {
		cfg.EvalEvery = DefaultEvalEvery
	}
	if cfg.EvalSequences == 0 {
		cfg.EvalSequences = DefaultEvalSequences
	}
	if cfg.KeepSteps == 0 {
		cfg.KeepSteps = DefaultKeepSteps
	}
	if cfg.GradientsKeep == 0 {
		cfg.GradientsKeep = DefaultGradientsKeep
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if err := trainer.GPUAvailable(); cfg.Device == DeviceAuto && err != nil {
		// Said once, here: the model is built again after a reload.
		cfg.Log.Info("training on the CPU", "why", err)
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	}
	pub, err := node.ID().ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("client: p2p identity: %w", err)
	}
	raw, err := pub.Raw()
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("client: p2p identity is not an ed25519 key: %v", err)
	}
	if cfg.Tracer != nil {
		node = tracedNetwork{node, cfg.Tracer}
	}
	var salt [32]byte
	if _, err := crand.Read(salt[:]); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, log: cfg.Log, now: cfg.Clock, chain: ch, node: node, inbox: newInbox(node, cfg.Log),
		e: newEngine(cfg.Wallet.PublicKey(), node.ID(), cfg.Version, salt, rng), snapshots: map[uint32][]float32{}}
	c.e.checkpoints, c.e.hubUpload, c.e.benchmarks = cfg.CheckpointDir != "", cfg.HubUpload, len(cfg.EvalTasks) > 0 || cfg.PromptTask
	c.e.precisions, c.e.precisionsGiven = cfg.Precisions, precisionsGiven
	c.e.devices = groups(cfg)
	c.mem = clientMemory(cfg)
	c.e.fits = fitsMemory(c.mem, cfg.MicroBatch, cfg.Threads, cfg.RecomputeActivations)
	copy(c.p2pKey[:], raw)
	c.workDir = cfg.WorkDir
	if c.workDir == "" {
		if c.workDir, err = os.MkdirTemp("", "psyche-client-"); err != nil {
			return nil, fmt.Errorf("client: work directory: %w", err)
		}
		c.ownDir = true
	}
	return c, nil
}

// Run follows the run until it is Finished (nil), ctx ends (the client
// leaves the run, then returns ctx's error), or a fatal error.
//
// States arrive by accountSubscribe; every PollInterval the newest one is
// acted on again, so timers are checked between notifications, and the
// account is read over JSON-RPC when no notification came for resyncAfter
// (a subscription that went silent without failing).
func (c *Client) Run(ctx context.Context) error {
	if c.chain == nil {
		rc, err := openChain(ctx, &c.cfg, c.p2pKey, c.log)
		if err != nil {
			return err
		}
		c.chain = rc
	}
	defer c.close()
	// The gossip reader and the subscription end with Run, Finished included.
	bg, stop := context.WithCancel(ctx)
	defer stop()
	c.bg = bg
	go c.inbox.run(bg)
	states := make(chan observed, 1)
	go c.chain.Follow(bg, states)
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	var cur *observed
	var heard time.Time
	for {
		select {
		case <-ctx.Done():
			return c.stopped(ctx, nil)
		case o := <-states:
			heard = c.now()
			if !c.fresh(o.state) {
				continue
			}
			cur = &o
		case <-t.C:
			if cur == nil || c.now().Sub(heard) > resyncAfter {
				o, err := c.chain.Read(ctx)
				if err != nil {
					return c.stopped(ctx, err)
				}
				if o != nil && c.fresh(o.state) {
					heard, cur = c.now(), o
				}
			}
		}
		if cur == nil {
			continue
		}
		// A state acted on again: the chain's clock moved on since it was read.
		done, err := c.handle(ctx, cur.state, cur.chain.Add(c.now().Sub(heard)))
		if err != nil || done {
			return c.stopped(ctx, err)
		}
	}
}

// fresh says whether s is not older than a state already acted on (an RPC
// node behind the one we heard from before).
func (c *Client) fresh(s *coordinator.State) bool {
	if s.Nonce < c.lastNonce {
		return false
	}
	c.lastNonce = s.Nonce
	return true
}

// stopped ends Run: a client that stops for ctx or an error leaves the run
// (a registered client must not hold up an epoch).
func (c *Client) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		c.leave()
		return ctx.Err()
	}
	if err != nil && c.e.joinedEpoch >= 0 {
		c.leave()
	}
	return err
}

// resyncAfter is how long the client trusts a silent subscription before it
// reads the account itself. The Coordinator changes at least every round.
const resyncAfter = 5 * time.Second

// maxPasses bounds how often one state is decided again after an action
// that changed the model.
const maxPasses = 4

// handle acts on one state, read at chain time chainNow: it records what
// is observable, asks the engine what to do, and does it. It reports
// whether the run is finished.
func (c *Client) handle(ctx context.Context, s *coordinator.State, chainNow time.Time) (bool, error) {
	v := coordinator.NewView(s, c.e.me, chainNow)
	c.observe(v)
	for range maxPasses {
		steps := make([]uint32, 0, len(c.e.rounds))
		for st := range c.e.rounds {
			steps = append(steps, st)
		}
		in := c.inbox.snapshot(steps, c.e.model == modelLoading && !c.e.fetching)
		in.served = c.served()
		acts, err := c.e.decide(v, in, c.now())
		if err != nil {
			return false, err
		}
		again, done, err := c.execute(ctx, v, acts)
		if err != nil || done || !again {
			return done, err
		}
	}
	return false, nil
}

// execute carries out a plan in order. It stops after an action that
// changed the model (again: decide anew) and at the first apply that fails.
func (c *Client) execute(ctx context.Context, v *coordinator.View, acts []action) (again, done bool, err error) {
	for _, a := range acts {
		c.log.Debug("engine", "action", a.String())
		end := c.traceAction(v, a)
		switch a := a.(type) {
		case takeModelAction:
			err = c.takeModel(ctx, a.loaded)
		case buildModelAction:
			err = c.buildModel(ctx, v)
		case discardAction:
			c.discard(a)
		case applyAction:
			if err = c.apply(ctx, v, a); errors.Is(err, errMissed) {
				end(err)
				c.discard(discardAction{a.rec.step, err})
				return true, false, nil
			}
		case checkpointAction:
			c.saveCheckpoint(a.step)
		case announceCheckpointAction:
			c.uploadCheckpoint(ctx, a)
		case benchmarkAction:
			err = c.startBenchmark(c.bg, a)
		case finishedAction:
			c.benchmarking.Wait()
			c.log.Info("the run is finished", "step", c.e.lastStep)
			return false, true, nil
		case joinAction:
			err = c.join(ctx, v, a)
		case stepAsideAction:
			c.stepAside(ctx, v)
		case warmupAction:
			c.warmup(ctx, v)
		case loadModelAction:
			c.loadModel(a)
		case restoreAction:
			err = c.restore(ctx, v, a)
		case roleAction:
			c.setRole(a)
		case trainAction:
			err = c.train(ctx, a)
		case witnessAction:
			c.sendWitness(ctx, a)
		case replayAction:
			err = c.startReplay(c.bg, a)
		case verdictAction:
			c.postVerdict(ctx, a)
		case judgeAction:
			err = c.startJudge(c.bg, v, a)
		case voteAction:
			c.sendVote(ctx, a)
		case answerAction:
			c.sendAnswer(ctx, a)
		case rerunAction:
			c.startRerunFetch(c.bg, v, a)
		case healthCheckAction:
			c.healthCheck(ctx, a)
		case tickAction:
			c.sendTick(ctx, a)
		case shareModelAction:
			if err := c.shareModel(ctx); err != nil {
				c.log.Warn("sharing the model failed", "err", err)
			}
		case announceShareAction:
			c.announceShare(ctx, a.model)
		case unshareAction:
			c.unshare(a.model)
		default:
			err = fmt.Errorf("client: no executor for %T", a)
		}
		end(err)
		if err != nil {
			return false, false, err
		}
		if _, ok := a.(replanning); ok {
			return true, false, nil
		}
	}
	return false, false, nil
}

func (c *Client) close() {
	c.stopSharing()
	if c.tr != nil {
		c.tr.Close()
	}
	c.replayMu.Lock()
	if c.replay != nil {
		c.replay.Close()
	}
	c.replay, c.replayClosed = nil, true
	c.replayMu.Unlock()
	if c.ownDir {
		os.RemoveAll(c.workDir)
	}
	if c.owned && c.data != nil {
		c.data.Close()
	}
}

// leave sends leave_run with a fresh context (the caller's has ended).
func (c *Client) leave() {
	if c.chain == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.chain.Submit(ctx, op{kind: opLeave}, false); err != nil {
		if notAClient(err) { // neither pending nor in the epoch: nothing to leave
			c.log.Info("left the run", "note", "it was neither pending nor in the epoch")
			return
		}
		c.log.Warn("leave_run failed", "err", err)
		return
	}
	c.log.Info("left the run")
}

// observe records the run's state, progress and membership, lets every
// registered client gossip with us, and every few seconds records the p2p
// peers.
func (c *Client) observe(v *coordinator.View) {
	c.inbox.setStep(v.Step)
	c.epoch = v.Epoch
	c.cfg.Recorder.SetRunState(v.Phase.String())
	c.cfg.Recorder.SetProgress(uint64(v.Epoch), uint64(v.Round.Height), uint64(v.Step))
	healthy := 0
	for _, m := range v.Members {
		if m.State == coordinator.MemberHealthy {
			healthy++
		}
	}
	_ = c.cfg.Recorder.SetClients(len(v.Members), healthy)
	c.setParticipants(v.State)
	c.faults.observe(v, c.log)
	if v.State.Config.VerificationPercent > 0 && v.Slot != nil {
		c.vstats.observe(v)
		if err := c.cfg.Recorder.SetVerification(c.vstats.Verification); err != nil {
			c.log.Warn("recording verification", "err", err)
		}
	}
	if now := c.now(); now.Sub(c.peersAt) >= peersEvery {
		c.peersAt = now
		var peers []status.Peer
		for _, p := range c.node.Snapshot().Peers {
			if !p.Connected {
				continue
			}
			sp := status.Peer{ID: p.ID.String(), BytesIn: p.BytesIn, BytesOut: p.BytesOut}
			if len(p.ConnectedAddresses) > 0 {
				sp.Address = p.ConnectedAddresses[0]
			}
			peers = append(peers, sp)
		}
		_ = c.cfg.Recorder.SetPeers(peers)
	}
}

// peersEvery is how often the p2p peer list is copied into the Recorder.
const peersEvery = 2 * time.Second

// setParticipants lets every registered client of the run gossip with us:
// the epoch's members, pending joiners and slots kept between epochs, not
// only the current epoch's members. Between epochs the member list is empty,
// and a peer dropped from the participant set is pruned from the gossip mesh
// and backed off for a minute, which would cut off the next epoch's members
// (a restarted client with its old identity among them).
func (c *Client) setParticipants(s *coordinator.State) {
	var ids []peer.ID
	for i := range s.Clients {
		slot := &s.Clients[i]
		if slot.Occupied == 0 {
			continue
		}
		if id, err := identity.PeerIDFromPublicKey(slot.P2PIdentity[:]); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if slices.Equal(ids, c.participants) {
		return
	}
	c.participants = ids
	c.node.SetParticipants(ids)
}
