package trainer

import (
	"fmt"
	"math"
	"testing"
)

// TestGradShardsAreATreeOfChains checks the shard contract (layout.h)
// against its definition, built in Go from one-shard steps: with 8
// sequences of 32 tokens in 4 shards, each shard's gradients are a
// one-shard step of its 2 sequences scaled by 1/4 (that step's loss scale
// is 1/64 where the 4-shard step's is 1/256; powers of two scale every
// rounding exactly), joined as (g0 + g1) + (g2 + g3); the loss likewise.
// Both architectures, fp32 and mx8, micro-batches of 1 and 3 (3 crosses a
// shard's edge, so the step must cut it there).
func TestGradShardsAreATreeOfChains(t *testing.T) {
	const n, seqLen, shards = 8, 32, 4
	for _, base := range []Config{lightConfig(t), llamaLight(t)} {
		for _, arith := range []string{ArithFP32, ArithMX8} {
			cfg := base
			cfg.Arith = arith
			t.Run(cfg.Name+"/"+arith, func(t *testing.T) {
				text := MarkovText(5, n*seqLen+1)
				var g [shards][]float32
				var l [shards]float32
				for s := range shards {
					c := cfg
					c.MicroBatch = 2
					tr := newTrainer(t, c, 3)
					l[s] = step(t, tr, text, s*2*seqLen, 2, seqLen) * 2 * seqLen
					grads, err := tr.Grads()
					if err != nil {
						t.Fatal(err)
					}
					for i := range grads {
						grads[i] *= 0.25
					}
					g[s] = grads
				}
				want := make([]float32, len(g[0]))
				for i := range want {
					want[i] = (g[0][i] + g[1][i]) + (g[2][i] + g[3][i])
				}
				wantLoss := ((l[0] + l[1]) + (l[2] + l[3])) / (n * seqLen)
				for _, mb := range []int{1, 3} {
					c := cfg
					c.MicroBatch, c.GradShards = mb, shards
					tr := newTrainer(t, c, 3)
					loss := step(t, tr, text, 0, n, seqLen)
					got, err := tr.Grads()
					if err != nil {
						t.Fatal(err)
					}
					if math.Float32bits(loss) != math.Float32bits(wantLoss) {
						t.Errorf("micro-batch %d: loss %v, the tree of the shards' losses %v", mb, loss, wantLoss)
					}
					if d := bitDiff(got, want); d > 0 {
						t.Errorf("micro-batch %d: %d of %d gradient entries differ from the tree of the shards' chains", mb, d, len(want))
					}
				}
			})
		}
	}
}

// TestGradShardsMicroBatchDoesNotChangeBits: with 4 shards, uneven ones (6
// sequences: 1, 2, 1, 2) and empty ones (3 sequences: 0, 1, 1, 1), every
// micro-batch size gives one pass's bits; and the shards are the contract's,
// not a no-op: 4 shards give other gradient bits than 1.
func TestGradShardsMicroBatchDoesNotChangeBits(t *testing.T) {
	const seqLen = 32
	cfg := llamaLight(t)
	for _, n := range []int{6, 3} {
		t.Run(fmt.Sprintf("%d sequences", n), func(t *testing.T) {
			text := MarkovText(2, n*seqLen+1)
			var ref []float32
			var refLoss float32
			for _, mb := range []int{n, 1, 2, 4} {
				c := cfg
				c.MicroBatch, c.GradShards = mb, 4
				tr := newTrainer(t, c, 3)
				loss := step(t, tr, text, 0, n, seqLen)
				g, err := tr.Grads()
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref, refLoss = g, loss
					continue
				}
				if math.Float32bits(loss) != math.Float32bits(refLoss) {
					t.Errorf("micro-batch %d: loss %v, one pass %v", mb, loss, refLoss)
				}
				if d := bitDiff(g, ref); d > 0 {
					t.Errorf("micro-batch %d: %d of %d gradient entries differ from one pass", mb, d, len(g))
				}
			}
			one := newTrainer(t, cfg, 3)
			step(t, one, text, 0, n, seqLen)
			g, err := one.Grads()
			if err != nil {
				t.Fatal(err)
			}
			if d := bitDiff(g, ref); d == 0 {
				t.Error("4 shards gave the gradient bits of 1: the shards are not in the step")
			}
		})
	}
}

// TestGradShardsRefused: a shard count that is not a power of two up to
// MaxGradShards is refused by Validate and by New.
func TestGradShardsRefused(t *testing.T) {
	for _, s := range []int{-1, 3, 6, 128} {
		cfg := lightConfig(t)
		cfg.GradShards = s
		if err := cfg.Validate(); err == nil {
			t.Errorf("grad_shards %d: Validate accepted it", s)
		}
		if tr, err := New(cfg, 1); err == nil {
			tr.Close()
			t.Errorf("grad_shards %d: New accepted it", s)
		}
	}
}

// bitDiff counts the entries of a and b whose bits differ.
func bitDiff(a, b []float32) int {
	d := 0
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			d++
		}
	}
	return d
}
