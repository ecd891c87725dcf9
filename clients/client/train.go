package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Update is how a member's contribution to a round is computed, by the
// member and by anyone who replays it (verifiers, psyche-client verify).
// DeMo: one Step on the whole batch, then DeMoGenerate at the round's rate. SparseLoCo: LoCoBegin, then per
// inner step j a Step on the j-th of len(lrs) equal contiguous parts of the
// batch and an AdamW step at lrs[j], then LoCoGenerate.
type Update struct {
	model coordinator.Model
	lrs   []float32 // the rate of each inner step (one for DeMo)
	// overlap: the round is applied one round late (config overlap), so
	// the member's next step starts from its own pending update (DeMo's
	// lookahead, SparseLoCo's own share, whose rate follows the round's
	// member count, members).
	overlap bool
	members int
}

// NewUpdate is the update of the round of members members that trains
// step with h inner steps (the round's; DeMo has one) in an epoch that
// began at epochStartStep, in a run of total steps; overlap: the run
// overlaps rounds.
func NewUpdate(m *coordinator.Model, total, step uint32, h, members int, epochStartStep uint32, coldStart, overlap bool) Update {
	if !SparseLoCo(m) {
		h = 1
	}
	u := Update{model: *m, lrs: make([]float32, max(h, 1)), overlap: overlap, members: members}
	for j := range u.lrs {
		u.lrs[j] = InnerLearningRate(m, total, step, j, epochStartStep, coldStart)
	}
	return u
}

// LR is the round's rate: DeMo's, or the first inner step's.
func (u *Update) LR() float32 { return u.lrs[0] }

// DeMo is the round's DeMo hyperparameters; false in the multi-step mode.
func (u *Update) DeMo() (trainer.DeMo, bool) { return u.demo(), !SparseLoCo(&u.model) }

// demo is the round's DeMo hyperparameters, with Overlap when it
// overlaps.
func (u *Update) demo() trainer.DeMo {
	hp := DeMo(&u.model, u.LR())
	hp.Overlap = u.overlap
	return hp
}

// loco is the round's multi-step hyperparameters, with Overlap when it
// overlaps.
func (u *Update) loco() trainer.SparseLoCo {
	hp := LoCo(&u.model)
	if u.overlap {
		hp.Overlap, hp.Members = true, u.members
	}
	return hp
}

// LoCo is the round's multi-step hyperparameters; false with DeMo.
func (u *Update) LoCo() (trainer.SparseLoCo, bool) { return u.loco(), SparseLoCo(&u.model) }

// dummyTrainer is --dummy-training: a step fetches its batch but computes
// nothing (zero gradients; the loss is reported as 0, as by a witness that
// did not train), so a member sends a payload of the real size, and every
// replica applies it like any other, without the model's forward and
// backward passes. Such a member does not train: a verifier that replays
// its contribution with the real model disputes it.
type dummyTrainer struct{ replica }

func (d dummyTrainer) Step(ctx context.Context, _, _ []int32, _ int) (float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return 0, d.ZeroStep()
}

// FetchFunc reads the n sequences from global index start as inputs and
// targets.
type FetchFunc func(ctx context.Context, start, n uint64) (in, tg []int32, seqLen int, err error)

// Trainer is what computing a contribution needs of a trainer
// (clients/trainer.Trainer).
type Trainer interface {
	Step(ctx context.Context, tokens, targets []int32, seqLen int) (float32, error)
	DeMoGenerate(hp trainer.DeMo) ([]byte, error)
	AdamWStep(hp trainer.AdamW) error
	LoCoBegin() error
	LoCoAbort() error
	LoCoGenerate(hp trainer.SparseLoCo) ([]byte, error)
}

// Run computes the contribution of a member's assigned sequences on tr, from
// its current weights and optimizer state: the payload, the mean loss and
// the tokens trained. A SparseLoCo round that fails midway leaves the
// weights as they were.
func (u *Update) Run(ctx context.Context, tr Trainer, fetch FetchFunc, batch schedule.Assignment) (payload []byte, loss float32, tokens uint64, err error) {
	if !SparseLoCo(&u.model) {
		in, tg, seqLen, err := fetch(ctx, batch.Start, batch.Len)
		if err != nil {
			return nil, 0, 0, err
		}
		if loss, err = tr.Step(ctx, in, tg, seqLen); err != nil {
			return nil, 0, 0, err
		}
		payload, err = tr.DeMoGenerate(u.demo())
		return payload, loss, uint64(len(in)), err
	}
	h := uint16(len(u.lrs))
	if batch.Len%uint64(h) != 0 || batch.Len == 0 {
		return nil, 0, 0, fmt.Errorf("a batch of %d sequences does not split into %d inner steps", batch.Len, h)
	}
	if err := tr.LoCoBegin(); err != nil {
		return nil, 0, 0, err
	}
	var sum float64
	for j, lr := range u.lrs {
		part := batch.InnerStep(uint16(j), h)
		in, tg, seqLen, err := fetch(ctx, part.Start, part.Len)
		if err == nil {
			loss, err = tr.Step(ctx, in, tg, seqLen)
		}
		if err == nil {
			err = tr.AdamWStep(InnerAdamW(&u.model, lr))
		}
		if err != nil {
			if aerr := tr.LoCoAbort(); aerr != nil {
				return nil, 0, 0, errors.Join(err, aerr)
			}
			return nil, 0, 0, err
		}
		sum += float64(loss)
		tokens += uint64(len(in))
	}
	payload, err = tr.LoCoGenerate(u.loco())
	if err != nil {
		if aerr := tr.LoCoAbort(); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return nil, 0, 0, err
	}
	return payload, float32(sum / float64(len(u.lrs))), tokens, nil
}

// After is the replay state the next round starts from once this round is
// applied, from the replay state right after the contribution was computed.
func (u *Update) After(rs []byte) ([]byte, error) {
	if SparseLoCo(&u.model) {
		return trainer.AfterLoCoApply(rs)
	}
	return trainer.AfterApply(rs, u.demo())
}

// validatePayload checks a payload's format against the run's model.
func validatePayload(tr replica, m *coordinator.Model, p []byte) error {
	if SparseLoCo(m) {
		return tr.LoCoValidate(LoCo(m), p)
	}
	return tr.ValidatePayload(DeMo(m, 0), p)
}

// applyPayloads applies a round's accepted payloads, in member order.
func applyPayloads(tr replica, u *Update, list [][]byte) error {
	if SparseLoCo(&u.model) {
		return tr.LoCoApply(u.loco(), list)
	}
	return tr.DeMoApply(u.demo(), list)
}

// train runs this client's share of a round: fetch the assigned sequences
// (global index modulo the dataset size), compute the update, and Publish
// the payload (blob + signed announcement).
func (c *Client) train(ctx context.Context, a trainAction) error {
	rec, batch := a.rec, a.batch
	start := time.Now()
	if c.cheating(CheatOtherData) || c.cheating(CheatCopyAnswer) {
		batch = otherSequences(batch)
	}
	var before []byte
	var err error
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
		if err := c.tr.SaveModel(path, map[string]string{"run_id": c.cfg.RunID, "step": fmt.Sprint(c.e.lastStep)}); err != nil {
			c.log.Warn("writing the model the step starts from failed", "err", err)
		}
	}
	var tr Trainer = c.tr
	if c.cfg.DummyTraining {
		tr = dummyTrainer{c.tr}
	}
	payload, loss, tokens, err := rec.update.Run(ctx, tr, c.fetch, schedule.Assignment{Start: batch.start, Len: batch.len})
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
	if payload, err = c.cheatPayload(ctx, rec.step, payload); err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	trainTime := time.Since(start)
	if c.cfg.GradientsDir != "" {
		if err := trainer.WriteReplayFiles(c.cfg.GradientsDir, c.cfg.RunID, rec.step, payload, before); err != nil {
			c.log.Warn("writing the replay files failed", "err", err)
		}
		if err := trainer.PruneReplayFiles(c.cfg.GradientsDir, c.cfg.RunID, c.cfg.GradientsKeep); err != nil {
			c.log.Warn("removing old replay files failed", "err", err)
		}
	}
	if a.commit {
		after, err := c.afterState(&rec.update)
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
	rec.trained = &trainStats{loss: loss, tokens: tokens, trainTime: trainTime, sent: uint64(len(payload))}
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
// round is applied: what a trainer commits as its state after.
func (c *Client) afterState(u *Update) ([]byte, error) {
	rs, err := c.tr.ReplayState()
	if err != nil {
		return nil, err
	}
	return u.After(rs)
}
