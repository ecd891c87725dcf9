package trainer

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// tinyConfig is small enough for fuzzing and exhaustive checks.
var tinyConfig = Config{Name: "tiny", Vocab: 32, PaddedVocab: 32, Layers: 1, Channels: 16, Heads: 2, SeqLen: 8, MicroBatch: 2}

var tinyLlama = Config{Name: "tiny-llama", Arch: ArchLlama, Vocab: 32, PaddedVocab: 32, Layers: 1, Channels: 16, Heads: 2,
	KVHeads: 1, Hidden: 40, RopeTheta: 10000, SeqLen: 8, MicroBatch: 2}

// tinyQwen2 is tinyLlama with Qwen2's q/k/v biases and RMSNorm epsilon.
var tinyQwen2 = func() Config {
	c := tinyLlama
	c.Name, c.QKVBias, c.RMSNormEps = "tiny-qwen2", true, 1e-6
	return c
}()

var testDeMo = DeMo{LR: 1e-3, Decay: 0.999, WeightDecay: 0.1, Chunk: 64, TopK: 8, OneBit: true, Lookahead: true}

var testAdamW = AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}

func newTrainer(t testing.TB, cfg Config, seed uint64) *Trainer {
	t.Helper()
	tr, err := New(cfg, seed)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func llamaLight(t testing.TB) Config {
	t.Helper()
	cfg, err := ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func lightConfig(t testing.TB) Config {
	t.Helper()
	cfg, err := ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// textFor returns synthetic text reduced modulo the vocabulary.
func textFor(cfg Config, seed uint64, n int) []byte {
	text := MarkovText(seed, n)
	for i := range text {
		text[i] = byte(int(text[i]) % cfg.Vocab)
	}
	return text
}

func step(t testing.TB, tr *Trainer, text []byte, start, n, seqLen int) float32 {
	t.Helper()
	return maskedStep(t, tr, text, start, n, seqLen, nil)
}

// maskedStep is step with the targets that train(i) refuses Ignored, as a
// fine-tuning batch's loss mask leaves them out (train nil: all trained).
func maskedStep(t testing.TB, tr *Trainer, text []byte, start, n, seqLen int, train func(i int) bool) float32 {
	t.Helper()
	tok, tgt := maskedWindow(text, start, n, seqLen, train)
	loss, err := tr.Step(context.Background(), tok, tgt, seqLen)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	return loss
}

func maskedWindow(text []byte, start, n, seqLen int, train func(i int) bool) (tokens, targets []int32) {
	tokens, targets = Window(text, start, n, seqLen)
	for i := range targets {
		if train != nil && !train(i) {
			targets[i] = Ignore
		}
	}
	return tokens, targets
}

func digest(t testing.TB, tr *Trainer, payload []byte) [32]byte {
	t.Helper()
	d, err := tr.Digest(payload)
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	return d
}

// runSteps trains for steps steps of n sequences of seqLen tokens, single
// client, and returns the digest after every optimizer step.
func runSteps(t testing.TB, tr *Trainer, opt string, text []byte, first, steps, n, seqLen int) [][32]byte {
	t.Helper()
	var out [][32]byte
	for s := first; s < first+steps; s++ {
		step(t, tr, text, s*n*seqLen, n, seqLen)
		var payload []byte
		var err error
		switch opt {
		case "demo":
			if payload, err = tr.DeMoGenerate(testDeMo); err == nil {
				err = tr.DeMoApply(testDeMo, [][]byte{payload})
			}
		case "adamw":
			err = tr.AdamWStep(testAdamW)
		default:
			t.Fatalf("unknown optimizer %q", opt)
		}
		if err != nil {
			t.Fatalf("%s step %d: %v", opt, s, err)
		}
		out = append(out, digest(t, tr, payload))
	}
	return out
}

// decodersAgree checks that the trainer (cErr) and the Go decoder (goErr,
// d) accept or reject p alike, rejections as ErrPayload, and that an
// accepted p re-encodes to itself; it says whether p was accepted.
func decodersAgree(t *testing.T, cErr, goErr error, d *Payload, p []byte) bool {
	t.Helper()
	if (cErr == nil) != (goErr == nil) {
		t.Fatalf("trainer says %v, the Go decoder says %v", cErr, goErr)
	}
	if cErr != nil {
		if !errors.Is(cErr, ErrPayload) || !errors.Is(goErr, ErrPayload) {
			t.Fatalf("errors %v and %v, want ErrPayload", cErr, goErr)
		}
		return false
	}
	if !bytes.Equal(d.Encode(), p) {
		t.Fatal("re-encoding an accepted payload changed it")
	}
	return true
}
