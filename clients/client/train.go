package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

// train runs this client's share of a round: fetch the assigned sequences
// (global index modulo the dataset size), Step, DeMoGenerate at the round's
// learning rate, and Publish the payload (blob + signed announcement).
func (c *Client) train(ctx context.Context, a trainAction) error {
	rec, batch := a.rec, a.batch
	start := time.Now()
	n := c.data.Info().NumSequences
	idx := make([]uint64, batch.len)
	for i := range idx {
		idx[i] = (batch.start + uint64(i)) % n // the cursor wraps around the dataset
	}
	seqs, err := c.data.Sequences(ctx, idx)
	if err != nil {
		return fmt.Errorf("step %d: fetch the assigned sequences: %w", rec.step, err)
	}
	in, tg, err := provider.InputsAndTargets(seqs)
	if err != nil {
		return err
	}
	loss, err := c.tr.Step(ctx, in, tg, len(seqs[0])-1)
	if err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	if c.cfg.TrainingDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.TrainingDelay):
		}
	}
	payload, err := c.tr.DeMoGenerate(DeMo(&c.model, rec.lr))
	if err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	trainTime := time.Since(start)
	if c.cfg.GradientsDir != "" {
		path := filepath.Join(c.cfg.GradientsDir, fmt.Sprintf("%s-step%d.demo", c.cfg.RunID, rec.step))
		if err := writeGradients(path, payload); err != nil {
			c.log.Warn("writing the payload failed", "err", err)
		}
	}
	ann, err := c.node.Publish(ctx, uint64(rec.step), p2p.BatchID{Start: batch.start, End: batch.start + batch.len - 1}, payload)
	if err != nil {
		return fmt.Errorf("step %d: publish the payload: %w", rec.step, err)
	}
	c.inbox.store(ann, payload)
	rec.trained = &trainStats{loss: loss, tokens: uint64(len(in)), trainTime: trainTime, sent: uint64(len(payload))}
	c.log.Debug("trained", "step", rec.step, "loss", loss, "sequences", batch.len, "payload_bytes", len(payload), "took", trainTime)
	return nil
}

// writeGradients keeps a payload in --write-gradients-dir, made if missing.
func writeGradients(path string, payload []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, payload, 0o644)
}
