// Package miner trains a model alone for a competition, as SN9's miners do:
// AdamW steps over the competition's dataset, from fresh weights or from a
// submitted model, and the rule that says when a new model is worth
// submitting (its loss must beat the best by more than epsilon, or the older
// model keeps winning: clients/competition/rules).
package miner

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/psyche-go/psyche/clients/competition/rules"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Options is a training session.
type Options struct {
	// Batch is the sequences of one step.
	Batch int
	// LR is the peak learning rate, reached after Warmup steps (linear)
	// and held.
	LR     float32
	Warmup int
	// Offset shifts the miner's walk through the dataset, so that miners
	// starting from one model do not train on the same sequences.
	Offset uint64
}

// Defaults are AdamW's usual settings for small language models.
var Defaults = Options{Batch: 8, LR: 3e-3, Warmup: 10}

// AdamW is the optimizer of a step at learning rate lr.
func AdamW(lr float32) trainer.AdamW {
	return trainer.AdamW{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}
}

func (o Options) validate() error {
	switch {
	case o.Batch < 1:
		return fmt.Errorf("a step needs at least one sequence (batch %d)", o.Batch)
	case !(o.LR > 0) || math.IsInf(float64(o.LR), 0):
		return fmt.Errorf("learning rate %v must be positive and finite", o.LR)
	case o.Warmup < 0:
		return fmt.Errorf("warmup %d cannot be negative", o.Warmup)
	}
	return nil
}

// rate is the learning rate of step s (0-based).
func (o Options) rate(s int) float32 {
	if s < o.Warmup {
		return o.LR * float32(s+1) / float32(o.Warmup+1)
	}
	return o.LR
}

// Batch returns the sequence indices of step s: the dataset in order from
// Offset, wrapping around.
func (o Options) batch(s int, n uint64) []uint64 {
	idx := make([]uint64, o.Batch)
	for i := range idx {
		idx[i] = (o.Offset + uint64(s)*uint64(o.Batch) + uint64(i)) % n
	}
	return idx
}

// Train runs steps [from, from+steps) of o on tr with data, calling onStep
// after each with its training loss.
func Train(ctx context.Context, tr *trainer.Trainer, data provider.Provider, o Options, from, steps int, onStep func(step int, loss float32)) error {
	if err := o.validate(); err != nil {
		return err
	}
	info := data.Info()
	if info.NumSequences == 0 {
		return errors.New("the dataset holds no sequences")
	}
	if int(info.SeqLen) > tr.Config().SeqLen {
		return fmt.Errorf("the dataset's sequences of %d tokens are longer than the model's context of %d", info.SeqLen, tr.Config().SeqLen)
	}
	for s := from; s < from+steps; s++ {
		seqs, err := data.Sequences(ctx, o.batch(s, info.NumSequences))
		if err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		in, tg, err := provider.InputsAndTargets(info, seqs)
		if err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		loss, err := tr.Step(ctx, in, tg, int(info.SeqLen))
		if err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		if err := tr.AdamWStep(AdamW(o.rate(s))); err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		if onStep != nil {
			onStep(s, loss)
		}
	}
	return nil
}

// MeanLoss is the mean of a model's page losses (a row of the loss table),
// summed in float64 in page order.
func MeanLoss(row []float32) float32 {
	if len(row) == 0 {
		return float32(math.NaN())
	}
	var s float64
	for _, l := range row {
		s += float64(l)
	}
	return float32(s / float64(len(row)))
}

// Improved reports whether a new model of loss beats best by more than
// epsilon (parts per million): the validators' own comparison of a newer
// model with an older one (rules.IsWin). A new model that does not clear it
// loses to the older wherever it is not epsilon better, so submitting it
// would only make the miner's entry younger.
func Improved(loss, best float32, epsPPM uint32) bool {
	return rules.IsWin(loss, best, 1, 0, 1, rules.Epsilon{StartPPM: epsPPM, EndPPM: epsPPM})
}
