package trainer

import (
	"context"
	"errors"
	"math"
	"testing"
)

// Decoding with the key/value cache gives, at every position, exactly the
// logits of a full forward pass over the prefix (the last row of Logits), for
// both architectures, and refuses to run past the context or without a reset.
func TestDecodeMatchesForward(t *testing.T) {
	untied := llamaLight(t)
	untied.Untied = true
	biased := llamaLight(t)
	biased.Name, biased.QKVBias = "llama-light-qkv-bias", true
	for _, cfg := range []Config{lightConfig(t), llamaLight(t), untied, biased} {
		t.Run(cfg.Name, func(t *testing.T) {
			tr := newTrainer(t, cfg, 4)
			runSteps(t, tr, "adamw", MarkovText(3, 4*2*32+1), 0, 2, 2, 32) // weights away from their init
			if _, err := tr.DecodeNext(1); !errors.Is(err, ErrInvalid) {
				t.Errorf("decode before a reset: %v", err)
			}
			text := MarkovText(8, 40)
			if err := tr.DecodeReset(); err != nil {
				t.Fatal(err)
			}
			for p := range 20 {
				got, err := tr.DecodeNext(int32(text[p]))
				if err != nil {
					t.Fatal(err)
				}
				tok := make([]int32, p+1)
				for i := range tok {
					tok[i] = int32(text[i])
				}
				all, err := tr.Logits(context.Background(), tok, p+1)
				if err != nil {
					t.Fatal(err)
				}
				want := all[p*cfg.Vocab:]
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("position %d: logit %d is %v decoding, %v in the forward pass", p, i, got[i], want[i])
					}
				}
			}
			if _, err := tr.DecodeNext(int32(cfg.Vocab)); !errors.Is(err, ErrInvalid) {
				t.Errorf("token outside the vocabulary: %v", err)
			}
			if err := tr.DecodeReset(); err != nil {
				t.Fatal(err)
			}
			for p := range cfg.SeqLen {
				if _, err := tr.DecodeNext(int32(p % cfg.Vocab)); err != nil {
					t.Fatalf("position %d: %v", p, err)
				}
			}
			if _, err := tr.DecodeNext(0); !errors.Is(err, ErrInvalid) {
				t.Errorf("decoding past the context of %d: %v", cfg.SeqLen, err)
			}
		})
	}
}
