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
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Model sharing for clients that join a run after step 1. In Warmup every
// member that holds the model of the last step shares it (p2p model
// sharing, chunked and hash-verified) and gossips its root in a signed
// Finished{warmup} message, every few seconds until the rounds start. A
// member without the model takes a root that a quorum of the other members
// announced for that step, fetches it, and loads it.

// modelMagic starts a shared model file: magic, step (u32), parameter count
// (u32), then the parameters as little-endian fp32.
const modelMagic = "PSYMODL1"

const modelHeader = len(modelMagic) + 8

// shareEvery is how often a holder re-announces its shared model in Warmup,
// so joiners that connect late still hear it.
const shareEvery = 2 * time.Second

type sharedModel struct {
	step     uint32
	root     p2p.Hash
	file     *os.File
	path     string
	announce time.Time
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

// shareModel shares the model of the last applied step and (re)announces it.
func (c *Client) shareModel(ctx context.Context) error {
	if c.tr == nil || c.lastStep == 0 {
		return nil
	}
	if c.shared == nil || c.shared.step != c.lastStep {
		c.stopSharing()
		data, err := encodeModel(c.tr, c.lastStep)
		if err != nil {
			return err
		}
		path := filepath.Join(c.workDir, fmt.Sprintf("model-step%d.bin", c.lastStep))
		if err := writeAtomic(path, data); err != nil {
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
		c.shared = &sharedModel{step: c.lastStep, root: c.cfg.Node.ShareModel(m, f), file: f, path: path}
		c.log.Info("sharing the model with joiners", "step", c.lastStep, "root", c.shared.root)
	}
	if time.Since(c.shared.announce) >= shareEvery {
		if _, err := c.cfg.Node.Finish(ctx, p2p.Finished{Step: uint64(c.shared.step), Warmup: true, Digest: c.shared.root}); err == nil {
			c.shared.announce = time.Now()
		}
	}
	return nil
}

func (c *Client) stopSharing() {
	if c.shared == nil {
		return
	}
	c.cfg.Node.StopSharing(c.shared.root)
	c.shared.file.Close()
	os.Remove(c.shared.path)
	c.shared = nil
}

// recordShare keeps a member's announced model root for a step.
func (c *Client) recordShare(f *p2p.Finished) {
	if !f.Warmup {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roots == nil || c.rootsStep != uint32(f.Step) {
		if c.wantStep != uint32(f.Step) {
			return // only the step a joiner waits for is kept
		}
		c.roots, c.rootsStep = map[peer.ID]p2p.Hash{}, uint32(f.Step)
	}
	c.roots[f.Signer] = f.Digest
}

// fetchSharedModel loads the model of step from peers once a quorum of the
// other members announced the same root; ok is false while it waits.
func (c *Client) fetchSharedModel(ctx context.Context, s *coordinator.State, step uint32, tr *trainer.Trainer) (ok bool, err error) {
	c.mu.Lock()
	c.wantStep = step
	votes := map[p2p.Hash]int{}
	for _, root := range c.roots {
		votes[root]++
	}
	c.mu.Unlock()
	need := int(schedule.Quorum(uint16(max(len(coordinator.Members(s))-1, 1))))
	var root p2p.Hash
	for r, n := range votes {
		if n >= need {
			root = r
		}
	}
	if root == (p2p.Hash{}) {
		return false, nil
	}
	dst := filepath.Join(c.workDir, fmt.Sprintf("fetched-step%d.bin", step))
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := c.cfg.Node.FetchModel(fctx, root, dst, p2p.FetchModelOptions{}); err != nil {
		c.log.Warn("fetching the model from peers failed; retrying", "root", root, "err", err)
		return false, nil
	}
	data, err := os.ReadFile(dst)
	os.Remove(dst)
	if err != nil {
		return false, err
	}
	params, err := decodeModel(data, step, tr.NumParams())
	if err != nil {
		return false, fmt.Errorf("the model peers shared: %w", err)
	}
	if err := tr.SetParams(params); err != nil {
		return false, err
	}
	c.lastStep = step
	c.log.Info("loaded the model from peers", "step", step, "root", root)
	return true, nil
}
