package client

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
)

// checkpointPath is where this client keeps its checkpoint of a step.
func (c *Client) checkpointPath(step uint32) string {
	return filepath.Join(c.cfg.CheckpointDir, fmt.Sprintf("%s-step%d.safetensors", c.cfg.RunID, step))
}

// loadLocalCheckpoint restores tr from this client's own checkpoint of step,
// when it has one (a restart after the run paused or every member left, or a
// restart between epochs): the full state, momentum included. A missing or
// unreadable checkpoint leaves tr as it was; the caller then asks peers.
func (c *Client) loadLocalCheckpoint(tr *trainer.Trainer, step uint32) bool {
	if c.cfg.CheckpointDir == "" {
		return false
	}
	path := c.checkpointPath(step)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	if err := tr.LoadCheckpoint(path); err != nil {
		c.log.Warn("own checkpoint unusable; loading the model from peers", "path", path, "err", err)
		return false
	}
	c.lastStep, c.checkpoint = step, step
	c.log.Info("model restored from this client's checkpoint", "step", step, "path", path)
	return true
}

// saveCheckpoint writes the model at the end of an epoch, once per step.
func (c *Client) saveCheckpoint(s *coordinator.State) {
	if c.cfg.CheckpointDir == "" || c.tr == nil || c.lastStep == 0 || c.checkpoint == c.lastStep || c.trained != nil {
		return
	}
	c.checkpoint = c.lastStep
	path := c.checkpointPath(c.lastStep)
	if err := os.MkdirAll(c.cfg.CheckpointDir, 0o755); err != nil {
		c.log.Warn("checkpoint", "err", err)
		return
	}
	if err := c.tr.SaveCheckpoint(path, map[string]string{"run_id": c.cfg.RunID, "step": strconv.Itoa(int(c.lastStep))}); err != nil {
		c.log.Warn("checkpoint", "err", err)
		return
	}
	c.cfg.Recorder.SetCheckpoint(status.Checkpoint{Step: uint64(c.lastStep), Location: path})
	c.log.Info("checkpoint written", "step", c.lastStep, "path", path)
	if c.cfg.DeleteOldSteps {
		c.deleteOldCheckpoints()
	}
}

// deleteOldCheckpoints keeps the newest KeepSteps checkpoints of this run.
func (c *Client) deleteOldCheckpoints() {
	prefix := c.cfg.RunID + "-step"
	entries, err := os.ReadDir(c.cfg.CheckpointDir)
	if err != nil {
		return
	}
	type ck struct {
		step int
		name string
	}
	var cks []ck
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".safetensors") {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ".safetensors")); err == nil {
			cks = append(cks, ck{n, name})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step > cks[j].step })
	for _, k := range cks[min(c.cfg.KeepSteps, len(cks)):] {
		_ = os.Remove(filepath.Join(c.cfg.CheckpointDir, k.name))
	}
}
