package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

// The model's lifecycle: built once the run's model is configured, given
// the run's weights from a checkpoint or peers, shared with joiners.
//
// Model sharing, for clients that need the model of a step after 1. Every
// client that holds the model of its last applied step shares it (p2p model
// sharing, chunked and hash-verified) and gossips its root in a signed
// Finished{warmup} message: between epochs always (the model does not
// change then), and while rounds run whenever a client may need it (a
// registered client waiting to join, or a member of the epoch that never
// reported ready), the newest step after each round. A superseded model
// stays shared while anyone downloads it. A client without the model takes
// the newest root that a quorum of the model holders announced for a step
// it can catch up from, fetches it in the background, loads it and applies
// the rounds since (follow.go).

// modelMagic starts a shared model file: magic, step (u32), parameter count
// (u32), then the parameters as little-endian fp32.
const modelMagic = "PSYMODL1"

const modelHeader = len(modelMagic) + 8

// shareEvery is how often a holder re-announces its newest shared model, so
// joiners that connect late still hear it.
const shareEvery = 2 * time.Second

// shareLinger is how long a superseded model stays shared after it was last
// served (or superseded), so a download that outlasts rounds completes;
// beyond maxShared files, only models being downloaded are kept.
const (
	shareLinger = 10 * time.Second
	maxShared   = 4
)

type sharedModel struct {
	step       uint32
	root       p2p.Hash
	file       *os.File
	path       string
	announce   time.Time
	superseded time.Time
}

// encodeModel is the shared file's content for the current parameters.
func encodeModel(tr replica, step uint32) ([]byte, error) {
	params, err := tr.Params()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, modelHeader+4*len(params))
	out = append(out, modelMagic...)
	out = binary.LittleEndian.AppendUint32(out, step)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(params)))
	for _, p := range params {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(p))
	}
	return out, nil
}

// decodeModel checks a fetched file against the step and model size.
func decodeModel(data []byte, step uint32, n int) ([]float32, error) {
	if len(data) != modelHeader+4*n || string(data[:len(modelMagic)]) != modelMagic {
		return nil, errors.New("shared model file has the wrong size or magic")
	}
	if got := binary.LittleEndian.Uint32(data[8:]); got != step {
		return nil, fmt.Errorf("shared model is of step %d, want %d", got, step)
	}
	if got := binary.LittleEndian.Uint32(data[12:]); int(got) != n {
		return nil, fmt.Errorf("shared model has %d parameters, want %d", got, n)
	}
	params := make([]float32, n)
	for i := range params {
		params[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[modelHeader+4*i:]))
	}
	return params, nil
}

// modelWanted says whether a client may be waiting for the model: between
// epochs always, while rounds run when a registered client is pending
// without being a member, or a member never reported ready.
func modelWanted(v *coordinator.View) bool {
	switch v.Phase {
	case coordinator.RoundTrain, coordinator.RoundWitness:
	case coordinator.Finished:
		return false
	default:
		return true
	}
	s := v.State
	for i := range s.Clients {
		if slot := &s.Clients[i]; slot.Occupied != 0 && slot.Pending != 0 && slot.InEpoch == 0 {
			return true
		}
	}
	for i := range min(int(s.Epoch.ClientsLen), len(s.Epoch.Clients)) {
		if e := s.Epoch.Clients[i]; e.State == coordinator.MemberHealthy && e.WarmupWitnessed == 0 {
			return true
		}
	}
	return false
}

// share decides sharing the model of step (the last applied) when a
// client may want it, re-announcing the newest shared model, and no longer
// sharing superseded models nobody fetches.
func (e *engine) share(v *coordinator.View, in *inputs, now time.Time, step uint32, add func(action)) {
	n := len(e.shared)
	if e.model == modelReady && step > 0 && modelWanted(v) && (n == 0 || e.shared[n-1].step != step) {
		add(shareModelAction{step}) // announced when shared
	} else if n > 0 {
		if newest := e.shared[n-1]; now.Sub(newest.announce) >= shareEvery {
			add(announceShareAction{newest})
		}
	}
	over := len(e.shared) - maxShared
	keep := e.shared[:0]
	for _, m := range e.shared {
		if m.superseded.IsZero() {
			keep = append(keep, m) // the newest
			continue
		}
		last := in.served[m.root]
		if last.Before(m.superseded) {
			last = m.superseded
		}
		// Past the file bound, a model goes once nobody fetched it for a
		// moment; one still being downloaded stays.
		if idle := now.Sub(last); idle > shareLinger || (over > 0 && idle > shareEvery) {
			add(unshareAction{m})
			over--
			continue
		}
		keep = append(keep, m)
	}
	e.shared = keep
}

// shareModel shares the model of the last applied step and announces it.
func (c *Client) shareModel(ctx context.Context) error {
	step := c.e.lastStep
	data, err := encodeModel(c.tr, step)
	if err != nil {
		return err
	}
	path := filepath.Join(c.workDir, fmt.Sprintf("model-step%d.bin", step))
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("share the model: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	m, err := p2p.BuildManifest(f, int64(len(data)), p2p.DefaultChunkSize)
	if err != nil {
		f.Close()
		return err
	}
	now := c.now()
	if n := len(c.e.shared); n > 0 {
		c.e.shared[n-1].superseded = now
	}
	sm := &sharedModel{step: step, root: c.node.ShareModel(m, f), file: f, path: path}
	c.e.shared = append(c.e.shared, sm)
	// Models are shared again at every step a joiner may want: said once.
	level := slog.LevelDebug
	if !c.sharingLogged {
		level, c.sharingLogged = slog.LevelInfo, true
	}
	c.log.Log(ctx, level, "sharing the model with joiners", "step", sm.step, "root", sm.root.String())
	c.announceShare(ctx, sm)
	return nil
}

// announceShare gossips the root of a shared model.
func (c *Client) announceShare(ctx context.Context, m *sharedModel) {
	if _, err := c.node.Finish(ctx, p2p.Finished{Step: uint64(m.step), Warmup: true, Digest: m.root}); err == nil {
		m.announce = c.now()
	}
}

func (c *Client) unshare(m *sharedModel) {
	c.node.StopSharing(m.root)
	m.file.Close()
	os.Remove(m.path)
}

// stopSharing stops sharing every model (the replica is dropped, or the client stops).
func (c *Client) stopSharing() {
	for _, m := range c.e.shared {
		c.unshare(m)
	}
	c.e.shared = nil
}

// served is when each superseded shared model was last served.
func (c *Client) served() map[p2p.Hash]time.Time {
	out := map[p2p.Hash]time.Time{}
	for _, m := range c.e.shared {
		if !m.superseded.IsZero() {
			out[m.root], _ = c.node.ModelLastServed(m.root)
		}
	}
	return out
}

// modelHolders are the peers whose announced roots count: the epoch's
// healthy members, or between epochs those that finished the last one.
func (e *engine) modelHolders(v *coordinator.View) map[peer.ID]bool {
	out := map[peer.ID]bool{}
	add := func(key [32]byte) {
		if id, err := identity.PeerIDFromPublicKey(key[:]); err == nil && id != e.self {
			out[id] = true
		}
	}
	for _, m := range v.Members {
		if m.State == coordinator.MemberHealthy {
			add(m.P2PIdentity)
		}
	}
	s := v.State
	if len(out) == 0 && v.Epoch > 0 {
		for i := range s.Clients {
			slot := &s.Clients[i]
			if slot.Occupied != 0 && slot.HasFinished != 0 && slot.LastFinishedEpoch == v.Epoch-1 {
				add(slot.P2PIdentity)
			}
		}
	}
	return out
}

// loadRetry is the pause after a failed model download; the retry takes the
// newest announced root then.
const loadRetry = time.Second

// loadedModel is the outcome of a background model download.
type loadedModel struct {
	step   uint32
	root   p2p.Hash
	params []float32
	err    error
}

// startLoad decides downloading the newest model a quorum of holders
// announced for a step this client can catch up from: one whose following
// rounds it saw whole (from followFrom on), and no older than loadFrom.
// When no peer can give the model, it decides resuming from a checkpoint
// instead (restoreDue).
func (e *engine) startLoad(v *coordinator.View, in *inputs, now time.Time) (action, bool) {
	if e.model != modelLoading || e.fetching || now.Before(e.retryLoad) {
		return nil, false
	}
	holders := e.modelHolders(v)
	if a, ok := e.restoreDue(v, in, holders, now); ok {
		return a, true
	}
	if e.followFrom == 0 {
		return nil, false
	}
	minStep := max(e.loadFrom, e.followFrom-1, 1)
	var step uint32
	var root p2p.Hash
	for st, byPeer := range in.roots {
		if st < minStep || st <= step || st >= v.Step+1 {
			continue
		}
		if r, ok := quorumRoot(holders, byPeer); ok {
			step, root = st, r
		}
	}
	if root == (p2p.Hash{}) {
		return nil, false
	}
	e.fetching = true
	return loadModelAction{step, root}, true
}

// Resuming when no peer holds the model. A run whose every holder of the
// model crashed (a one-client run killed mid-epoch, or all its members) has
// nobody to load it from: the restarted clients resume from the newest
// checkpoint of the run they or the hub have, as the model of the step
// before the current one; the rounds after that checkpoint are lost.
const (
	// holderSilence is how long a client waits for a root from any model
	// holder, while holders would be sharing the model (modelWanted),
	// before it concludes that none holds it (each restarted too): they
	// announce every shareEvery.
	holderSilence = 30 * time.Second
	// restoreRetry is how often a client that found no checkpoint to
	// resume from looks again; restoreWarnEvery how often it says so at WARN.
	restoreRetry     = 30 * time.Second
	restoreWarnEvery = 10 * time.Minute
)

// recovery is the engine's state for resuming from a checkpoint.
type recovery struct {
	silentSince time.Time // since when no holder announced a root while the model may be wanted
	next        time.Time // no attempt before then
	warned      time.Time // the last WARN that nothing can be resumed from
}

// restoreAction resumes from the newest checkpoint as the model of step.
type restoreAction struct {
	step    uint32
	holders int // model holders on chain, none of which announced the model
}

func (restoreAction) replans() {}
func (a restoreAction) String() string {
	return fmt.Sprintf("resume from the newest checkpoint as the model of step %d", a.step)
}

// restoreDue decides resuming from a checkpoint: at once when the chain
// names no model holder but this client (every member that held it
// crashed), or after holderSilence without a root from any holder while
// they would be sharing it. At step 1 the seed weights are the model.
func (e *engine) restoreDue(v *coordinator.View, in *inputs, holders map[peer.ID]bool, now time.Time) (action, bool) {
	if v.Step <= 1 || now.Before(e.recovery.next) {
		return nil, false
	}
	if len(holders) > 0 {
		if !modelWanted(v) || anyRoot(holders, in.roots) {
			e.recovery.silentSince = time.Time{}
			return nil, false
		}
		if e.recovery.silentSince.IsZero() {
			e.recovery.silentSince = now
		}
		if now.Sub(e.recovery.silentSince) < holderSilence {
			return nil, false
		}
	}
	e.recovery.next = now.Add(restoreRetry)
	return restoreAction{step: v.Step - 1, holders: len(holders)}, true
}

// anyRoot says whether any holder announced a model root, of any step.
func anyRoot(holders map[peer.ID]bool, roots map[uint32]map[peer.ID]p2p.Hash) bool {
	for _, byPeer := range roots {
		for id := range byPeer {
			if holders[id] {
				return true
			}
		}
	}
	return false
}

// quorumRoot is the root that a quorum of the model holders announced for
// one step (roots by announcer), if any.
func quorumRoot(holders map[peer.ID]bool, roots map[peer.ID]p2p.Hash) (p2p.Hash, bool) {
	need := int(schedule.Quorum(uint16(max(len(holders), 1))))
	votes := map[p2p.Hash]int{}
	for id, r := range roots {
		if holders[id] {
			votes[r]++
		}
	}
	for r, n := range votes {
		if n >= need {
			return r, true
		}
	}
	return p2p.Hash{}, false
}

// sharedRoot is the root under which tr's model of step is shared with
// joiners: what holders announce and quorumRoot compares.
func sharedRoot(tr replica, step uint32) (p2p.Hash, error) {
	data, err := encodeModel(tr, step)
	if err != nil {
		return p2p.Hash{}, err
	}
	m, err := p2p.BuildManifest(bytes.NewReader(data), int64(len(data)), p2p.DefaultChunkSize)
	if err != nil {
		return p2p.Hash{}, err
	}
	return m.Root(), nil
}

// loadModel downloads the model in the background; the loop takes it from
// the inbox when it is here.
func (c *Client) loadModel(a loadModelAction) {
	n := c.tr.NumParams()
	c.inbox.spawn(func() {
		params, err := c.fetchModel(c.bg, a.root, a.step, n)
		c.inbox.finishLoad(&loadedModel{step: a.step, root: a.root, params: params, err: err})
	})
}

// fetchModel downloads and decodes the shared model of step.
func (c *Client) fetchModel(ctx context.Context, root p2p.Hash, step uint32, n int) ([]float32, error) {
	dst := filepath.Join(c.workDir, fmt.Sprintf("fetched-step%d.bin", step))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := c.node.FetchModel(ctx, root, dst, p2p.FetchModelOptions{}); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(dst)
	os.Remove(dst)
	if err != nil {
		return nil, err
	}
	params, err := decodeModel(data, step, n)
	if err != nil {
		return nil, fmt.Errorf("the model peers shared: %w", err)
	}
	c.log.Info("fetched the model from peers", "step", step, "root", root.String(), "bytes", len(data), "seconds", time.Since(start).Seconds())
	return params, nil
}

// loadedFrom records that the model now holds the weights of step.
func (e *engine) loadedFrom(step uint32) {
	e.model, e.lastStep = modelReady, step
	e.recovery = recovery{}
	for st := range e.rounds {
		if st <= step {
			delete(e.rounds, st)
		}
	}
}

// takeModel makes a finished download the client's model; the rounds since
// its step are applied next.
func (c *Client) takeModel(ctx context.Context, l *loadedModel) error {
	if l.err != nil {
		if ctx.Err() == nil {
			c.log.Warn("fetching the model from peers failed; retrying", "step", l.step, "root", l.root.String(), "err", l.err)
		}
		return nil
	}
	if err := c.tr.SetParams(l.params); err != nil {
		return err
	}
	c.e.loadedFrom(l.step)
	c.inbox.prune(l.step)
	c.log.Info("loaded the model from peers", "step", l.step, "root", l.root.String())
	return c.ready(ctx)
}

// buildModel builds the model's trainer and gives it the run's weights
// from what this client has at hand: its own checkpoint of the step before
// the current one (momentum included), the run's hub checkpoint, or at
// step 1 the seed weights. Otherwise the model waits for weights from
// peers, or resumes from an older checkpoint when none holds it (startLoad).
func (c *Client) buildModel(ctx context.Context, v *coordinator.View) error {
	model := v.State.Model
	cfg, err := TrainerConfig(&model, c.cfg.MicroBatch)
	if err != nil {
		return err
	}
	threads := c.cfg.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	c.recompute, _ = memoryPlan(v.State, c.mem, c.cfg.MicroBatch, threads, c.cfg.RecomputeActivations)
	cfg.Recompute = c.recompute
	if c.recompute && !c.cfg.RecomputeActivations {
		c.log.Info("recomputing activations: the model fits this GPU's memory only so (the same bits, a forward pass more a step)")
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
	if err := c.placeTrainer(tr, c.cfg.Devices); err != nil {
		tr.Close()
		return err
	}
	c.tr, c.model = tr, model
	c.inbox.setValidator(tr, model)
	c.e.model = modelLoading
	if v.Step > 1 && c.loadLocalCheckpoint(v.Step-1) {
		return c.ready(ctx)
	}
	switch loaded, err := c.loadHubCheckpoint(ctx, v); {
	case err != nil:
		return err
	case loaded:
		return c.ready(ctx)
	}
	if v.Step <= 1 {
		c.e.loadedFrom(0)
		return c.ready(ctx)
	}
	if len(c.e.modelHolders(v)) > 0 {
		c.log.Info("waiting for the model from peers", "run_step", v.Step)
	} // else nobody can send it: the engine resumes from a checkpoint next (restoreDue)
	return nil
}

// placeTrainer puts a new trainer on the backend Config.Device names:
// DeviceCPU on the CPU (a CUDA build's trainer starts on the GPU when one is
// found), DeviceCUDA, and DeviceAuto with a usable GPU, on the GPU, spread
// over devices when there are several (data and tensor parallelism).
func (c *Client) placeTrainer(tr *trainer.Trainer, devices []int) error {
	switch {
	case c.cfg.Device == DeviceCPU:
		return tr.SetGPU(false)
	case c.cfg.Device == DeviceCUDA || c.cfg.Device == DeviceAuto && trainer.GPUAvailable() == nil:
		on := tr.SetGPU(true)
		if len(devices) > 0 {
			on = tr.SetDevices(devices, max(c.cfg.TensorParallelism, 1))
		}
		return on
	}
	return nil
}

// ready records that the model holds the run's weights and opens the data.
func (c *Client) ready(ctx context.Context) error {
	c.e.model = modelReady
	// A round's optimizer steps: inner_steps (1 for DeMo, the program's rule).
	if err := c.cfg.Recorder.SetDense(uint64(c.tr.NumParams()), uint64(max(c.model.InnerSteps, 1))); err != nil {
		return err
	}
	if c.data == nil {
		if err := c.openData(ctx); err != nil {
			return err
		}
		c.e.dataOpen = true
	}
	d, err := ReplicaDigest(c.tr, c.e.lastStep)
	if err != nil {
		return err
	}
	c.log.Info("model ready", "step", c.e.lastStep, "parameters", c.tr.NumParams(), "backend", c.tr.Backend(),
		"precision", coordinator.PrecisionName(c.model.Precision), "grad_shards", coordinator.GradShards(c.model.GradShardsLog2), "digest", hex.EncodeToString(d[:]))
	return c.eval(ctx, c.e.lastStep)
}

func (c *Client) openData(ctx context.Context) error {
	if c.cfg.Data != nil {
		c.data = c.cfg.Data
		return c.checkData()
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
	if err := DataFits(&c.model, c.data.Info()); err != nil {
		return err
	}
	if c.cfg.Eval != nil {
		if err := DataFits(&c.model, c.cfg.Eval.Info()); err != nil {
			return fmt.Errorf("held-out data: %w", err)
		}
	}
	return nil
}

// ErrData means the run's data does not fit its model: another shape,
// tokenizer, or kind (a fine-tuning run needs loss-masked data, and a
// pretraining run refuses it). Restarting will not help.
var ErrData = errors.New("the data does not fit the run")

// DataFits says whether data described by info fits the run's model m.
func DataFits(m *coordinator.Model, info provider.Info) error {
	switch ft := coordinator.FineTuning(m); {
	case info.SeqLen != m.MaxSeqLen || info.VocabSize > m.VocabSize || info.NumSequences == 0:
		return fmt.Errorf("%w: the data (sequence length %d, vocabulary %d, %d sequences) does not fit the run's model (sequence length %d, vocabulary %d)",
			ErrData, info.SeqLen, info.VocabSize, info.NumSequences, m.MaxSeqLen, m.VocabSize)
	case info.Tokenizer != runTokenizerName(m):
		return fmt.Errorf("%w: the data was tokenized by %s, but the run's model names %s", ErrData, info.Tokenizer, runTokenizerName(m))
	case ft && !info.LossMask:
		return fmt.Errorf("%w: the run fine-tunes (data_type \"finetuning\"), but its data (root %s) has no loss mask: prepare chat or prompt/completion examples with psyche-client data prepare --examples", ErrData, info.Root)
	case !ft && info.LossMask:
		return fmt.Errorf("%w: the run pretrains (data_type \"pretraining\"), but its data (root %s) is fine-tuning data with a loss mask", ErrData, info.Root)
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
	info := c.cfg.Eval.Info()
	in, tg, err := provider.InputsAndTargets(info, seqs)
	if err != nil {
		return err
	}
	loss, err := c.tr.Eval(ctx, in, tg, int(info.SeqLen))
	if err != nil {
		return err
	}
	c.log.Info("held-out loss", "step", step, "loss", loss)
	return c.cfg.Recorder.RecordEval(uint64(step), float64(loss))
}
