// Package client is the training client's loop: it follows a run's
// Coordinator account, joins each epoch, trains its share of every round
// with the native trainer, exchanges DeMo payloads over p2p, witnesses,
// applies the updates the witnesses attested, sends health checks and ticks
// the state machine when it is due. README.md states the protocol rules it
// follows, including the exact rule for which payloads are applied.
package client

import (
	"context"
	"encoding/hex"
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

	MicroBatch int
	Threads    int
	// Device selects the trainer backend.
	Device Device
	// TrainingDelay is added to every training step, to simulate a slow device.
	TrainingDelay time.Duration
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
	// GradientsDir, when set, receives this client's DeMo payload of every step.
	GradientsDir string

	// WorkDir holds model files shared with joiners; "" uses a temporary
	// directory removed at the end.
	WorkDir string

	// PollInterval is how often the newest Coordinator state is acted on
	// again between notifications (timers, deadlines).
	PollInterval time.Duration
	// Rand spreads ticks between clients; nil seeds one from the clock.
	Rand *rand.Rand
}

// The defaults of Config's zero values; the CLI's flags show the same.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultMicroBatch    = 8
	DefaultEvalEvery     = 5
	DefaultEvalSequences = 16
	DefaultKeepSteps     = 3
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

// Client runs one wallet's participation in one run.
type Client struct {
	cfg     Config
	log     *slog.Logger
	chainMu sync.Mutex
	chains  []*chain.Client // guarded by chainMu
	run     coordinator.Run
	me      solana.PublicKey
	p2pKey  [32]byte
	self    peer.ID
	rng     *rand.Rand

	tr    *trainer.Trainer
	model coordinator.Model
	data  provider.Provider
	owned bool // data was opened here and is closed here

	mu          sync.Mutex
	curStep     uint32                                  // newest round step seen, bounds what peers may announce
	appliedStep uint32                                  // newest step applied, announcements up to it are dropped
	anns        map[uint32]map[peer.ID]p2p.Announcement // step -> signer -> announcement
	payloads    map[p2p.Hash][]byte                     // validated payloads by hash
	roots       map[uint32]map[peer.ID]p2p.Hash         // step -> signer -> announced model root
	loaded      *loadedModel                            // a finished background model download

	lastNonce    uint64
	joinedEpoch  int64 // epoch the latest join was for, -1 none
	warmedEpoch  int64
	holdJoin     bool // left the epoch without the model; join again once it is here
	rounds       map[uint32]*roundRecord
	witnessed    uint32
	lastStep     uint32 // newest applied step
	accused      map[[2]uint32]bool
	lastTick     time.Time
	checkpoint   uint32        // newest step written to CheckpointDir
	announced    uint32        // newest step a hub announcement was tried for
	uploaded     uploadedModel // newest model put on the hub
	everMember   bool
	participants []peer.ID // sorted, as last given to the p2p node
	peersAt      time.Time

	workDir string // shared and fetched model files
	ownDir  bool   // workDir was created here and is removed here
	shared  []*sharedModel
	// loading is the model's trainer while its weights are not yet the
	// run's (a joiner's, or a replica that missed a round): it checks
	// payloads, and receives the weights fetched from peers.
	loading *trainer.Trainer
	// followFrom is the first round this client saw whole; loadFrom the
	// oldest model step it may load (after a round it could not apply).
	followFrom, loadFrom uint32
	fetching             bool // a model download is running, until bg ends
	bg                   context.Context
	retryLoad            time.Time // no new download before then
}

// New checks cfg and prepares a client; Run starts it.
func New(cfg Config) (*Client, error) {
	switch {
	case len(cfg.Chains) == 0:
		return nil, errors.New("client: no RPC endpoint")
	case cfg.Wallet == nil:
		return nil, errors.New("client: no wallet")
	case cfg.Node == nil || cfg.Recorder == nil:
		return nil, errors.New("client: a p2p node and a status recorder are required")
	case cfg.MicroBatch < 0 || cfg.Threads < 0 || cfg.EvalEvery < 0 || cfg.EvalSequences < 0 || cfg.KeepSteps < 0:
		return nil, errors.New("client: sizes and counts cannot be negative")
	}
	if _, err := cfg.Program.InstanceAddress(cfg.RunID); err != nil {
		return nil, err
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
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	}
	pub, err := identity.PublicKey(cfg.Node.Host().Peerstore().PrivKey(cfg.Node.ID()))
	if err != nil {
		return nil, fmt.Errorf("client: p2p identity: %w", err)
	}
	c := &Client{
		cfg: cfg, log: cfg.Log, chains: cfg.Chains, me: cfg.Wallet.PublicKey(), self: cfg.Node.ID(), rng: rng,
		anns: map[uint32]map[peer.ID]p2p.Announcement{}, payloads: map[p2p.Hash][]byte{}, roots: map[uint32]map[peer.ID]p2p.Hash{},
		rounds: map[uint32]*roundRecord{}, joinedEpoch: -1, warmedEpoch: -1, accused: map[[2]uint32]bool{},
	}
	copy(c.p2pKey[:], pub)
	c.workDir = cfg.WorkDir
	if c.workDir == "" {
		if c.workDir, err = os.MkdirTemp("", "psyche-client-"); err != nil {
			return nil, fmt.Errorf("client: work directory: %w", err)
		}
		c.ownDir = true
	}
	return c, nil
}

// chain is the endpoint in use; failover rotates the list.
func (c *Client) chain() *chain.Client {
	c.chainMu.Lock()
	defer c.chainMu.Unlock()
	return c.chains[0]
}

// failover moves to the next endpoint after err on the current one.
func (c *Client) failover(err error) { c.failed(c.chain(), err) }

// failed moves past cl when it is the endpoint in use; the subscription
// reports its failures here too, so sends leave a dead node as well.
func (c *Client) failed(cl *chain.Client, err error) {
	c.chainMu.Lock()
	defer c.chainMu.Unlock()
	if len(c.chains) > 1 && c.chains[0] == cl {
		c.log.Warn("RPC endpoint failed; switching to the next", "rpc", cl.RPCURL(), "ws", cl.WSURL(), "next", c.chains[1].RPCURL(), "err", err)
		c.chains = append(c.chains[1:], c.chains[0])
	}
}

// Run follows the run until it is Finished (nil), ctx ends (the client
// leaves the run, then returns ctx's error), or a fatal error.
//
// States arrive by accountSubscribe (watch); every PollInterval the newest
// one is acted on again, so timers are checked between notifications, and
// the account is read over JSON-RPC when no notification came for
// resyncAfter (a subscription that went silent without failing).
func (c *Client) Run(ctx context.Context) error {
	run, err := c.open(ctx)
	if err != nil {
		return err
	}
	c.run = run
	defer c.close()
	// The gossip reader and the subscription end with Run, Finished included.
	bg, stop := context.WithCancel(ctx)
	defer stop()
	c.bg = bg
	go c.receive(bg)
	states := make(chan *coordinator.State, 1)
	go c.watch(bg, append([]*chain.Client(nil), c.chains...), states)
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	var cur *coordinator.State
	var heard time.Time
	for {
		select {
		case <-ctx.Done():
			c.leave()
			return ctx.Err()
		case s := <-states:
			heard = time.Now()
			if s.Nonce < c.lastNonce {
				continue // an RPC node behind the one we heard from before
			}
			c.lastNonce, cur = s.Nonce, s
		case <-t.C:
			if cur == nil || time.Since(heard) > resyncAfter {
				s, err := c.readState(ctx)
				if err != nil {
					if ctx.Err() != nil {
						c.leave()
						return ctx.Err()
					}
					return err
				}
				if s != nil {
					heard, cur = time.Now(), s
				}
			}
		}
		if cur == nil {
			continue
		}
		done, err := c.handle(ctx, cur)
		if err != nil || done {
			if ctx.Err() != nil {
				c.leave()
				return ctx.Err()
			}
			if err != nil && c.joinedEpoch >= 0 {
				c.leave() // a registered client that stops must not hold up an epoch
			}
			return err
		}
	}
}

// resyncAfter is how long the client trusts a silent subscription before it
// reads the account itself. The Coordinator changes at least every round.
const resyncAfter = 5 * time.Second

func (c *Client) open(ctx context.Context) (coordinator.Run, error) {
	var last error
	for range c.chains {
		run, _, err := c.cfg.Program.Open(ctx, c.chain(), c.cfg.RunID)
		if err == nil || errors.Is(err, chain.ErrAccountNotFound) || errors.Is(err, coordinator.ErrNotCoordinator) {
			return run, err
		}
		last = err
		c.failover(err)
	}
	return coordinator.Run{}, last
}

func (c *Client) close() {
	c.stopSharing()
	if c.tr != nil {
		c.tr.Close()
	}
	if c.loading != nil {
		c.loading.Close()
	}
	if c.ownDir {
		os.RemoveAll(c.workDir)
	}
	if c.owned && c.data != nil {
		c.data.Close()
	}
}

// leave sends leave_run with a fresh context (the caller's has ended).
func (c *Client) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ix, err := c.run.LeaveRun(c.me)
	if err != nil {
		return
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, []solana.Instruction{ix}); err != nil {
		c.log.Warn("leave_run failed", "err", err)
		return
	}
	c.log.Info("left the run")
}

// readState reads the account over JSON-RPC. It returns nil (and fails over to
// the next endpoint) on a transient error, and nil for a state older than
// one already seen.
func (c *Client) readState(ctx context.Context) (*coordinator.State, error) {
	s, err := c.run.FetchState(ctx, c.chain())
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, coordinator.ErrNotCoordinator) {
			return nil, err
		}
		c.failover(err)
		c.log.Warn("reading the coordinator account failed", "err", err)
		return nil, nil
	}
	if s.Nonce < c.lastNonce {
		return nil, nil
	}
	c.lastNonce = s.Nonce
	return s, nil
}

func (c *Client) handle(ctx context.Context, s *coordinator.State) (bool, error) {
	if v := coordinator.FixedString(s.ClientVersion[:]); v != c.cfg.Version && v != "test" {
		return false, fmt.Errorf("%w: the run wants %q, this is %q", ErrVersionMismatch, v, c.cfg.Version)
	}
	phase := coordinator.Phase(s)
	running := phase == coordinator.RoundTrain || phase == coordinator.RoundWitness
	c.cfg.Recorder.SetRunState(phase.String())
	c.cfg.Recorder.SetProgress(uint64(s.Progress.Epoch), uint64(coordinator.CurrentRound(s).Height), uint64(s.Progress.Step))
	members := coordinator.Members(s)
	c.setParticipants(s)
	c.observe(members)
	idx := coordinator.MemberIndex(s, c.me)
	member := idx >= 0 && members[idx].State == coordinator.MemberHealthy
	if idx >= 0 {
		c.everMember = true
	}
	c.mu.Lock()
	c.curStep = s.Progress.Step
	c.mu.Unlock()

	// Follow the run: record its rounds, take a model fetched in the
	// background, and apply every round whose witness reports are final.
	c.captureRounds(s)
	if err := c.takeLoaded(ctx); err != nil {
		return false, err
	}
	if err := c.applyReady(ctx, s); err != nil {
		return false, err
	}

	// The epoch's model is checkpointed in Cooldown, or in any phase after
	// it: a short Cooldown can pass between two notifications we act on.
	if !running && phase != coordinator.Warmup {
		c.saveCheckpoint(s)
	}
	if phase == coordinator.Finished {
		c.announceCheckpoint(ctx, s) // the final model, if Cooldown passed unseen
		c.log.Info("the run is finished", "step", c.lastStep)
		return true, nil
	}
	// Joining comes first: a run that refuses this client says so before
	// the model is built and the data opened.
	if err := c.membership(ctx, s, member); err != nil {
		return false, err
	}
	if c.tr == nil && c.loading == nil && phase != coordinator.Uninitialized { // configured by then
		if err := c.ensureModel(ctx, s); err != nil {
			return false, err
		}
	}
	c.startLoad(s)
	switch {
	case phase == coordinator.Warmup && member:
		if err := c.warmup(ctx, s); err != nil {
			return false, err
		}
	case running && member:
		if err := c.round(ctx, s, uint16(idx)); err != nil {
			return false, err
		}
	case phase == coordinator.Cooldown:
		c.announceCheckpoint(ctx, s)
	}
	c.share(ctx, s)
	c.maybeTick(ctx, s, phase)
	return false, nil
}

// current says whether this client holds the run's model of the step
// before the next one to train: it can train now.
func (c *Client) current(s *coordinator.State) bool {
	return c.tr != nil && c.lastStep+1 >= s.Progress.Step
}

// observe records the epoch's membership and, every few seconds, the p2p peers.
func (c *Client) observe(members []coordinator.Member) {
	healthy := 0
	for _, m := range members {
		if m.State == coordinator.MemberHealthy {
			healthy++
		}
	}
	_ = c.cfg.Recorder.SetClients(len(members), healthy)
	if time.Since(c.peersAt) < peersEvery {
		return
	}
	c.peersAt = time.Now()
	var peers []status.Peer
	for _, p := range c.cfg.Node.Snapshot().Peers {
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
	c.cfg.Node.SetParticipants(ids)
}

// membership joins the epoch that forms next. A client that is not a
// member joins at once, in any phase: a registered client is a p2p
// participant, so it can follow the run and fetch the model while it waits
// for its epoch. A member still loading the model has the Warmup and the
// first two rounds to catch up (health checks start with the third); if it
// cannot train the second round either, it leaves before it would be
// dropped (and slashed), follows the run, and joins again once it holds the
// model. Members of the epoch join for the next one between epochs.
func (c *Client) membership(ctx context.Context, s *coordinator.State, member bool) error {
	phase := coordinator.Phase(s)
	slot, registered := coordinator.Slot(s, c.me)
	pending := registered && slot.Pending != 0
	switch {
	case member && !c.current(s) && pastGrace(s):
		return c.stepAside(ctx, s)
	case pending || member || phase == coordinator.Paused || phase == coordinator.Uninitialized:
		return nil
	case c.holdJoin && !c.current(s):
		return nil
	}
	return c.join(ctx, s)
}

// pastGrace says whether a member that has not trained yet would be
// accused by the next health check: it missed the epoch's second round.
func pastGrace(s *coordinator.State) bool {
	h := coordinator.CurrentRound(s).Height
	switch coordinator.Phase(s) {
	case coordinator.RoundTrain:
		return h >= 2
	case coordinator.RoundWitness:
		return h >= 1
	}
	return false
}

// join registers for the epoch that forms next, once per epoch. The first
// time, the join is simulated before anything else: a run that refuses this
// client says so at once, and one whose data this client cannot read is
// never joined (a member that cannot train holds up every round).
func (c *Client) join(ctx context.Context, s *coordinator.State) error {
	if c.joinedEpoch == int64(s.Progress.Epoch) && !c.holdJoin {
		return nil
	}
	ix, err := c.run.JoinRun(c.me, c.cfg.Authorization, c.p2pKey)
	if err != nil {
		return err
	}
	ixs := []solana.Instruction{ix}
	if c.data == nil {
		if _, err := c.chain().Simulate(ctx, c.cfg.Wallet, ixs); err != nil {
			return c.joinFailed(err)
		}
		c.mu.Lock()
		c.model = s.Model
		c.mu.Unlock()
		if err := c.openData(ctx); err != nil {
			return err
		}
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, ixs); err != nil {
		return c.joinFailed(err)
	}
	c.joinedEpoch, c.holdJoin = int64(s.Progress.Epoch), false
	c.log.Info("joined the run", "epoch", s.Progress.Epoch, "phase", coordinator.Phase(s).String(), "step", s.Progress.Step)
	return nil
}

// joinFailed ends the client when the program refused the join (no or a
// wrong authorization, a full or finished run: retrying will not help);
// other failures are retried.
func (c *Client) joinFailed(err error) error {
	var te *chain.TxError
	if errors.As(err, &te) && te.Code != nil && te.Name != "AlreadyJoined" && te.Name != "WrongPhase" {
		return fmt.Errorf("%w: run %q refused the join (authorization %s): %w", ErrNotAuthorized, c.cfg.RunID, c.cfg.Authorization, err)
	}
	c.log.Warn("join_run failed; retrying", "err", err)
	return nil
}

// stepAside leaves the epoch while this client still loads the model; it
// joins again once it holds it.
func (c *Client) stepAside(ctx context.Context, s *coordinator.State) error {
	ix, err := c.run.LeaveRun(c.me)
	if err != nil {
		return err
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, []solana.Instruction{ix}); err != nil {
		c.log.Warn("leaving the epoch failed; retrying", "err", err)
		return nil
	}
	c.holdJoin = true
	c.log.Warn("left the epoch: the model from peers did not arrive in time to train; joining again once loaded",
		"epoch", s.Progress.Epoch, "run_step", s.Progress.Step, "have_step", c.lastStep)
	return nil
}

// warmup reports ready once this client holds the model, once per epoch.
func (c *Client) warmup(ctx context.Context, s *coordinator.State) error {
	if !c.current(s) || c.warmedEpoch == int64(s.Progress.Epoch) {
		return nil // still loading the model, or reported
	}
	ix, err := c.run.WarmupWitness(c.me)
	if err != nil {
		return err
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, []solana.Instruction{ix}); err != nil {
		c.log.Warn("warmup_witness failed", "err", err)
		return nil
	}
	c.warmedEpoch = int64(s.Progress.Epoch)
	return nil
}

// ensureModel builds the model's trainer and gives it the run's weights
// from what this client has at hand: its own checkpoint of the step before
// the current one (momentum included), the run's hub checkpoint, or at step
// 1 the seed weights. Otherwise the trainer waits in c.loading for a model
// from peers (startLoad).
func (c *Client) ensureModel(ctx context.Context, s *coordinator.State) error {
	model := s.Model
	cfg, err := TrainerConfig(&model, c.cfg.MicroBatch)
	if err != nil {
		return err
	}
	tr, err := trainer.New(cfg, InitSeed(c.cfg.RunID))
	if err != nil {
		return fmt.Errorf("build the model: %w", err)
	}
	if c.cfg.Threads > 0 {
		if err := tr.SetThreads(c.cfg.Threads); err != nil {
			tr.Close()
			return err
		}
	}
	if c.cfg.Device != DeviceCPU {
		if err := tr.SetGPU(true); err != nil && c.cfg.Device == DeviceCUDA {
			tr.Close()
			return err
		}
	}
	if s.Progress.Step > 1 && c.loadLocalCheckpoint(tr, s.Progress.Step-1) {
		return c.ready(ctx, tr, model)
	}
	switch loaded, err := c.loadHubCheckpoint(ctx, tr, s); {
	case err != nil:
		tr.Close()
		return err
	case loaded:
		return c.ready(ctx, tr, model)
	}
	if s.Progress.Step <= 1 {
		return c.ready(ctx, tr, model)
	}
	c.mu.Lock()
	c.loading, c.model = tr, model
	c.mu.Unlock()
	c.log.Info("waiting for the model from peers", "run_step", s.Progress.Step)
	return nil
}

// ready makes tr the client's model and opens the data.
func (c *Client) ready(ctx context.Context, tr *trainer.Trainer, model coordinator.Model) error {
	c.mu.Lock()
	c.tr, c.model = tr, model
	c.mu.Unlock()
	if err := c.cfg.Recorder.SetParameters(uint64(tr.NumParams())); err != nil {
		return err
	}
	if c.data == nil {
		if err := c.openData(ctx); err != nil {
			return err
		}
	}
	d, err := ReplicaDigest(tr, c.lastStep)
	if err != nil {
		return err
	}
	c.log.Info("model ready", "step", c.lastStep, "parameters", tr.NumParams(), "backend", tr.Backend(), "digest", hex.EncodeToString(d[:]))
	return c.eval(ctx, c.lastStep)
}

func (c *Client) openData(ctx context.Context) error {
	if c.cfg.Data != nil {
		c.data = c.cfg.Data
		return nil
	}
	loc := coordinator.FixedString(c.model.DataLocation[:])
	root := ""
	if c.model.DataRoot != ([32]byte{}) {
		root = hex.EncodeToString(c.model.DataRoot[:])
	}
	p, err := provider.Open(ctx, []provider.Source{{Location: loc, Root: root}}, provider.HTTPOptions{CacheDir: c.cfg.DataCacheDir})
	if err != nil {
		return fmt.Errorf("open the run's data (%s): %w; to train from a copy of it, give psyche-client train --data-dir DIR or --data-url URL", loc, err)
	}
	c.data, c.owned = p, true
	return c.checkData()
}

func (c *Client) checkData() error {
	info := c.data.Info()
	if info.SeqLen != c.model.MaxSeqLen || info.VocabSize > c.model.VocabSize || info.NumSequences == 0 {
		return fmt.Errorf("the data (sequence length %d, vocabulary %d, %d sequences) does not fit the run's model (sequence length %d, vocabulary %d)",
			info.SeqLen, info.VocabSize, info.NumSequences, c.model.MaxSeqLen, c.model.VocabSize)
	}
	return nil
}

// eval records the held-out loss at step when an eval set is configured.
func (c *Client) eval(ctx context.Context, step uint32) error {
	if c.cfg.Eval == nil {
		return nil
	}
	n := min(uint64(c.cfg.EvalSequences), c.cfg.Eval.Info().NumSequences)
	idx := make([]uint64, n)
	for i := range idx {
		idx[i] = uint64(i)
	}
	seqs, err := c.cfg.Eval.Sequences(ctx, idx)
	if err != nil {
		return fmt.Errorf("held-out data: %w", err)
	}
	in, tg, err := provider.InputsAndTargets(seqs)
	if err != nil {
		return err
	}
	loss, err := c.tr.Eval(ctx, in, tg, len(seqs[0])-1)
	if err != nil {
		return err
	}
	c.log.Info("held-out loss", "step", step, "loss", loss)
	return c.cfg.Recorder.RecordEval(uint64(step), float64(loss))
}
