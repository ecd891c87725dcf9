// Package generate samples text from a trainer's model: the prompt goes
// through the key/value cache once, then each new token costs one decode
// step (not a forward pass over the whole sequence). Sampling is seeded, so
// the same model, prompt and options give the same tokens.
package generate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/psyche-go/psyche/clients/trainer"
)

// Options of a generation.
type Options struct {
	MaxTokens   int     // tokens to sample at most (the model's context may end it first)
	Temperature float64 // 0: always the most likely token (ties: the lower id)
	TopK        int     // sample among the K most likely tokens; 0: all of them
	Seed        uint64  // the sampler's random stream
}

// ErrContextFull ends a generation that reached the model's context length.
var ErrContextFull = errors.New("the model's context is full")

// Generate feeds prompt (at least one token) through the cache and samples
// up to o.MaxTokens tokens, passing each to emit as soon as it is drawn. It
// returns ErrContextFull, after emitting what fit, when prompt plus the
// tokens reach the model's context length.
func Generate(ctx context.Context, tr *trainer.Trainer, prompt []int32, o Options, emit func(int32) error) error {
	cfg := tr.Config()
	switch {
	case len(prompt) == 0:
		return fmt.Errorf("empty prompt: %w", trainer.ErrInvalid)
	case len(prompt) > cfg.SeqLen:
		return fmt.Errorf("prompt of %d tokens is longer than the model's context of %d: %w", len(prompt), cfg.SeqLen, trainer.ErrInvalid)
	case o.MaxTokens < 0 || o.TopK < 0 || !(o.Temperature >= 0) || math.IsInf(o.Temperature, 1):
		return fmt.Errorf("max tokens %d, top-k %d, temperature %v: want non-negative and finite: %w", o.MaxTokens, o.TopK, o.Temperature, trainer.ErrInvalid)
	}
	if err := tr.DecodeReset(); err != nil {
		return err
	}
	var logits []float32
	var err error
	for _, tok := range prompt {
		if logits, err = tr.DecodeNext(tok); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x70737963686521)) // "psyche!"
	for n := 0; n < o.MaxTokens; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		tok := Pick(logits, o.Temperature, o.TopK, rng.Float64())
		if err := emit(tok); err != nil {
			return err
		}
		if len(prompt)+n+1 >= cfg.SeqLen {
			if n+1 < o.MaxTokens {
				return ErrContextFull
			}
			return nil
		}
		if logits, err = tr.DecodeNext(tok); err != nil {
			return err
		}
	}
	return nil
}

// Pick draws a token from logits: the argmax at temperature 0, else from
// softmax(logits / temperature) restricted to the topK largest (0: all),
// inverting the cumulative distribution at u in [0, 1). Ties order by id.
func Pick(logits []float32, temperature float64, topK int, u float64) int32 {
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	if temperature == 0 {
		return int32(ids[0])
	}
	if topK > 0 && topK < len(ids) {
		ids = ids[:topK]
	}
	top := float64(logits[ids[0]])
	weights := make([]float64, len(ids))
	var sum float64
	for i, id := range ids {
		weights[i] = math.Exp((float64(logits[id]) - top) / temperature)
		sum += weights[i]
	}
	target := u * sum
	for i, w := range weights {
		if target < w {
			return int32(ids[i])
		}
		target -= w
	}
	return int32(ids[len(ids)-1])
}
