package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

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
func encodeModel(tr *trainer.Trainer, step uint32) ([]byte, error) {
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
func modelWanted(s *coordinator.State) bool {
	switch coordinator.Phase(s) {
	case coordinator.RoundTrain, coordinator.RoundWitness:
	case coordinator.Finished:
		return false
	default:
		return true
	}
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

// share shares the model of the last applied step when a client may want
// it, re-announces it, and stops sharing superseded models nobody fetches.
func (c *Client) share(ctx context.Context, s *coordinator.State) {
	if c.tr != nil && c.lastStep > 0 && modelWanted(s) {
		if err := c.shareModel(); err != nil {
			c.log.Warn("sharing the model failed", "err", err)
		}
	}
	if n := len(c.shared); n > 0 {
		if newest := c.shared[n-1]; time.Since(newest.announce) >= shareEvery {
			if _, err := c.cfg.Node.Finish(ctx, p2p.Finished{Step: uint64(newest.step), Warmup: true, Digest: newest.root}); err == nil {
				newest.announce = time.Now()
			}
		}
	}
	over := len(c.shared) - maxShared
	keep := c.shared[:0]
	for _, m := range c.shared {
		if m.superseded.IsZero() {
			keep = append(keep, m) // the newest
			continue
		}
		last, _ := c.cfg.Node.ModelLastServed(m.root)
		if last.Before(m.superseded) {
			last = m.superseded
		}
		// Past the file bound, a model goes once nobody fetched it for a
		// moment; one still being downloaded stays.
		if idle := time.Since(last); idle > shareLinger || (over > 0 && idle > shareEvery) {
			c.unshare(m)
			over--
			continue
		}
		keep = append(keep, m)
	}
	c.shared = keep
}

// shareModel shares the model of the last applied step (once per step).
func (c *Client) shareModel() error {
	if n := len(c.shared); n > 0 && c.shared[n-1].step == c.lastStep {
		return nil
	}
	data, err := encodeModel(c.tr, c.lastStep)
	if err != nil {
		return err
	}
	path := filepath.Join(c.workDir, fmt.Sprintf("model-step%d.bin", c.lastStep))
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
	if n := len(c.shared); n > 0 {
		c.shared[n-1].superseded = time.Now()
	}
	sm := &sharedModel{step: c.lastStep, root: c.cfg.Node.ShareModel(m, f), file: f, path: path}
	c.shared = append(c.shared, sm)
	c.log.Info("sharing the model with joiners", "step", sm.step, "root", sm.root.String())
	return nil
}

func (c *Client) unshare(m *sharedModel) {
	c.cfg.Node.StopSharing(m.root)
	m.file.Close()
	os.Remove(m.path)
}

// stopSharing stops sharing every model (the replica is dropped, or the client stops).
func (c *Client) stopSharing() {
	for _, m := range c.shared {
		c.unshare(m)
	}
	c.shared = nil
}

// recordShare keeps a peer's announced model root for a recent step.
func (c *Client) recordShare(f *p2p.Finished) {
	if !f.Warmup {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	step := uint32(f.Step)
	if uint64(step) > uint64(c.curStep) || step+maxBufferedSteps < c.curStep {
		return // a peer cannot make us keep roots of far steps
	}
	if c.roots[step] == nil {
		c.roots[step] = map[peer.ID]p2p.Hash{}
	}
	c.roots[step][f.Signer] = f.Digest
	for st := range c.roots {
		if st+maxBufferedSteps < c.curStep {
			delete(c.roots, st)
		}
	}
}

// modelHolders are the peers whose announced roots count: the epoch's
// healthy members, or between epochs those that finished the last one.
func (c *Client) modelHolders(s *coordinator.State) map[peer.ID]bool {
	out := map[peer.ID]bool{}
	add := func(key [32]byte) {
		if id, err := identity.PeerIDFromPublicKey(key[:]); err == nil && id != c.self {
			out[id] = true
		}
	}
	for _, m := range coordinator.Members(s) {
		if m.State == coordinator.MemberHealthy {
			add(m.P2PIdentity)
		}
	}
	if len(out) == 0 && s.Progress.Epoch > 0 {
		for i := range s.Clients {
			slot := &s.Clients[i]
			if slot.Occupied != 0 && slot.HasFinished != 0 && slot.LastFinishedEpoch == s.Progress.Epoch-1 {
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

// startLoad begins downloading the newest model a quorum of holders
// announced for a step this client can catch up from: one whose following
// rounds it saw whole (from followFrom on), and no older than loadFrom.
func (c *Client) startLoad(s *coordinator.State) {
	if c.tr != nil || c.loading == nil || c.fetching || c.followFrom == 0 || time.Now().Before(c.retryLoad) {
		return
	}
	holders := c.modelHolders(s)
	need := int(schedule.Quorum(uint16(max(len(holders), 1))))
	minStep := max(c.loadFrom, c.followFrom-1, 1)
	var step uint32
	var root p2p.Hash
	c.mu.Lock()
	for st, byPeer := range c.roots {
		if st < minStep || st <= step || st >= s.Progress.Step+1 {
			continue
		}
		votes := map[p2p.Hash]int{}
		for id, r := range byPeer {
			if holders[id] {
				votes[r]++
			}
		}
		for r, n := range votes {
			if n >= need {
				step, root = st, r
			}
		}
	}
	c.mu.Unlock()
	if root == (p2p.Hash{}) {
		return
	}
	c.fetching = true
	n := c.loading.NumParams()
	go func() {
		params, err := c.fetchModel(c.bg, root, step, n)
		c.mu.Lock()
		c.loaded = &loadedModel{step: step, root: root, params: params, err: err}
		c.mu.Unlock()
	}()
}

// fetchModel downloads and decodes the shared model of step.
func (c *Client) fetchModel(ctx context.Context, root p2p.Hash, step uint32, n int) ([]float32, error) {
	dst := filepath.Join(c.workDir, fmt.Sprintf("fetched-step%d.bin", step))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := c.cfg.Node.FetchModel(ctx, root, dst, p2p.FetchModelOptions{}); err != nil {
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

// takeLoaded makes a finished download the client's model; the rounds
// since its step are applied next. A failed one is retried with the newest
// root then.
func (c *Client) takeLoaded(ctx context.Context) error {
	c.mu.Lock()
	l := c.loaded
	c.loaded = nil
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	c.fetching = false
	if l.err != nil {
		c.retryLoad = time.Now().Add(loadRetry)
		if ctx.Err() == nil {
			c.log.Warn("fetching the model from peers failed; retrying", "step", l.step, "root", l.root.String(), "err", l.err)
		}
		return nil
	}
	if c.loading == nil || c.tr != nil {
		return nil
	}
	if err := c.loading.SetParams(l.params); err != nil {
		return err
	}
	c.lastStep = l.step
	for step := range c.rounds {
		if step <= l.step {
			delete(c.rounds, step)
		}
	}
	c.prune(l.step)
	c.log.Info("loaded the model from peers", "step", l.step, "root", l.root.String())
	tr := c.loading
	c.loading = nil
	return c.ready(ctx, tr, c.model)
}
