package trainer

import (
	"context"
	"math"
	"testing"
)

// A fine-tuning batch's loss mask: the trainer's loss is the mean over the
// targets that are not Ignore, and its gradients are that mean's.

// promptThenAnswer trains the second half of each 16-token sequence and a
// few scattered targets, as a chat example trains only its answers.
func promptThenAnswer(i int) bool { return i%16 >= 9 || i%7 == 3 }

func TestMaskedGradientMatchesFiniteDifferences(t *testing.T) {
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		t.Run(cfg.Name, func(t *testing.T) { checkGradients(t, cfg, promptThenAnswer) })
	}
}

// The masked loss is the mean of the trained targets' cross-entropies, as
// computed here in float64 from the model's logits.
func TestMaskedLossIsTheMeanOverTrainedTargets(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		tr := newTrainer(t, cfg, 5)
		const n, seqLen = 3, 32
		text := MarkovText(6, n*seqLen+1)
		tok, tgt := maskedWindow(text, 0, n, seqLen, promptThenAnswer)
		loss, err := tr.Eval(ctx, tok, tgt, seqLen)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := tr.Logits(ctx, tok, seqLen)
		if err != nil {
			t.Fatal(err)
		}
		V := cfg.Vocab
		var sum float64
		var count int
		for r, y := range tgt {
			if y == Ignore {
				continue
			}
			row := logits[r*V : (r+1)*V]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var z float64
			for _, v := range row {
				z += math.Exp(float64(v) - mx)
			}
			sum += math.Log(z) - (float64(row[y]) - mx)
			count++
		}
		want := sum / float64(count)
		if rel := math.Abs(float64(loss)-want) / want; rel > 1e-5 {
			t.Errorf("%s: masked loss %v, float64 mean over %d trained targets %v (rel %.2g)", cfg.Name, loss, count, want, rel)
		}
		step, err := tr.Step(ctx, tok, tgt, seqLen)
		if err != nil || math.Float32bits(step) != math.Float32bits(loss) {
			t.Errorf("%s: Step's loss %v (%v), Eval's %v", cfg.Name, step, err, loss)
		}
	}
}

// Masking changes no bit of micro-batching's independence, and a batch that
// trains nothing has loss 0 and zero gradients.
func TestMaskedStepsAreMicroBatchIndependent(t *testing.T) {
	const n = 5
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		text := MarkovText(8, n*32+1)
		var ref []float32
		var refLoss float32
		for _, mb := range []int{n, 1, 2} {
			c := cfg
			c.MicroBatch = mb
			tr := newTrainer(t, c, 3)
			loss := maskedStep(t, tr, text, 0, n, 32, func(i int) bool { return i >= 40 && i%32 > 20 })
			g, err := tr.Grads()
			if err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref, refLoss = g, loss
				continue
			}
			if math.Float32bits(loss) != math.Float32bits(refLoss) {
				t.Errorf("%s micro-batch %d: loss %v, one pass %v", cfg.Name, mb, loss, refLoss)
			}
			for i := range g {
				if math.Float32bits(g[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%s micro-batch %d: gradient %d is %v, one pass %v", cfg.Name, mb, i, g[i], ref[i])
				}
			}
		}
		tr := newTrainer(t, cfg, 3)
		if loss := maskedStep(t, tr, text, 0, n, 32, func(int) bool { return false }); loss != 0 {
			t.Errorf("%s: a batch that trains nothing has loss %v", cfg.Name, loss)
		}
		g, _ := tr.Grads()
		for i, v := range g {
			if v != 0 {
				t.Fatalf("%s: a batch that trains nothing has gradient %d = %v", cfg.Name, i, v)
			}
		}
	}
}
