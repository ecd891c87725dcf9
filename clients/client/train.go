package client

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/trainer"
)

// train runs this client's share of a round: fetch the assigned sequences
// (global index modulo the dataset size), Step, DeMoGenerate at the round's
// learning rate, and Publish the payload (blob + signed announcement).
func (c *Client) train(ctx context.Context, a trainAction) error {
	rec, batch := a.rec, a.batch
	start := time.Now()
	if c.cheating(CheatOtherData) {
		batch = otherSequences(batch)
	}
	in, tg, seqLen, err := c.sequences(ctx, batch)
	if err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	var before []byte
	if a.commit {
		if before, err = c.replayStateBefore(a.linked); err != nil {
			return fmt.Errorf("step %d: %w", rec.step, err)
		}
	} else if c.cfg.GradientsDir != "" {
		if before, err = c.tr.ReplayState(); err != nil {
			return fmt.Errorf("step %d: %w", rec.step, err)
		}
	}
	if c.cfg.GradientsDir != "" {
		// The weights the step starts from, for psyche-client verify.
		path := filepath.Join(c.cfg.GradientsDir, trainer.ReplayModelName(c.cfg.RunID, rec.step))
		if err := c.tr.SaveModel(path, map[string]string{"run_id": c.cfg.RunID, "step": fmt.Sprint(rec.step - 1)}); err != nil {
			c.log.Warn("writing the model the step starts from failed", "err", err)
		}
	}
	loss, err := c.tr.Step(ctx, in, tg, seqLen)
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
	if payload, err = c.cheatPayload(ctx, rec.step, payload); err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	trainTime := time.Since(start)
	if c.cfg.GradientsDir != "" {
		if err := trainer.WriteReplayFiles(c.cfg.GradientsDir, c.cfg.RunID, rec.step, payload, before); err != nil {
			c.log.Warn("writing the replay files failed", "err", err)
		}
	}
	if a.commit {
		after, err := c.afterState(rec.lr)
		if err != nil {
			return fmt.Errorf("step %d: %w", rec.step, err)
		}
		if c.cheating(CheatWrongReplayData) {
			before = trainer.FreshCopy(before) // a momentum it did not train from
		}
		// The state before is served for replays first, then committed.
		if !c.cheating(CheatWithholdReplayData) {
			if _, err := c.node.Serve(uint64(rec.step), before); err != nil {
				return fmt.Errorf("step %d: serve the replay state: %w", rec.step, err)
			}
		}
		c.commit(ctx, rec.step, a.index, payload, before, after)
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

// replayStateBefore is the replay state a step starts from. Its history
// must continue the state this client committed last (linked, from the
// chain); when it does not (a restart from an older checkpoint, a commit
// that failed) the optimizer starts over from a fresh state, which any
// step may.
func (c *Client) replayStateBefore(linked [32]byte) ([]byte, error) {
	rs, err := c.tr.ReplayState()
	if err != nil {
		return nil, err
	}
	if stateHash(rs) == linked || trainer.FreshReplayState(rs) || c.cheating(CheatWrongReplayData) {
		return rs, nil // (that cheat keeps its momentum, and claims a fresh state)
	}
	c.log.Info("the optimizer state is not the one committed last: starting it over")
	if err := c.tr.ResetOptimizer(); err != nil {
		return nil, err
	}
	return c.tr.ReplayState()
}

// afterState is the replay state the next step starts from once this
// round is applied at lr: what a trainer commits as its state after.
func (c *Client) afterState(lr float32) ([]byte, error) {
	rs, err := c.tr.ReplayState()
	if err != nil {
		return nil, err
	}
	return trainer.AfterApply(rs, DeMo(&c.model, lr))
}
