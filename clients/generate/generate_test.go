package generate

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

func lightTrainer(t *testing.T) *trainer.Trainer {
	t.Helper()
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	cfg.SeqLen = 24
	tr, err := trainer.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func run(t *testing.T, tr *trainer.Trainer, prompt []int32, o Options) ([]int32, error) {
	t.Helper()
	var out []int32
	err := Generate(context.Background(), tr, prompt, o, func(tok int32) error {
		out = append(out, tok)
		return nil
	})
	return out, err
}

// The same seed gives the same tokens; another seed other tokens; greedy
// decoding picks the argmax of a full forward pass at every position.
func TestGenerateIsSeededAndUsesTheModel(t *testing.T) {
	tr := lightTrainer(t)
	prompt := []int32{'T', 'h', 'e', ' '}
	o := Options{MaxTokens: 12, Temperature: 1, TopK: 40, Seed: 7}
	a, err := run(t, tr, prompt, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := run(t, tr, prompt, o)
	o.Seed = 8
	c, _ := run(t, tr, prompt, o)
	if !slices.Equal(a, b) || len(a) != 12 {
		t.Fatalf("same seed: %v and %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same %d tokens", len(a))
	}
	greedy, err := run(t, tr, prompt, Options{MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	seq := slices.Clone(prompt)
	for _, tok := range greedy {
		logits, err := tr.Logits(context.Background(), seq, len(seq))
		if err != nil {
			t.Fatal(err)
		}
		if want := Pick(logits[(len(seq)-1)*tr.Config().Vocab:], 0, 0, 0); tok != want {
			t.Fatalf("greedy token %d after %v, the forward pass's argmax is %d", tok, seq, want)
		}
		seq = append(seq, tok)
	}
	// The context ends a generation, after the tokens that fit.
	out, err := run(t, tr, prompt, Options{MaxTokens: 100, Temperature: 0.8, Seed: 1})
	if !errors.Is(err, ErrContextFull) || len(prompt)+len(out) != 24 {
		t.Errorf("past the context: %d tokens, %v", len(out), err)
	}
	for _, bad := range []Options{{MaxTokens: -1}, {TopK: -1}, {Temperature: -1}} {
		if _, err := run(t, tr, prompt, bad); !errors.Is(err, trainer.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := run(t, tr, nil, o); !errors.Is(err, trainer.ErrInvalid) {
		t.Errorf("empty prompt: %v", err)
	}
}

func TestPick(t *testing.T) {
	logits := []float32{1, 3, 3, 0}
	if got := Pick(logits, 0, 0, 0.9); got != 1 {
		t.Errorf("argmax with a tie: %d, want the lower id 1", got)
	}
	if got := Pick(logits, 1, 1, 0.99); got != 1 {
		t.Errorf("top-1: %d", got)
	}
	// Top-2 at temperature 1: ids 1 and 2 equally likely.
	if a, b := Pick(logits, 1, 2, 0.49), Pick(logits, 1, 2, 0.51); a != 1 || b != 2 {
		t.Errorf("top-2 halves: %d, %d", a, b)
	}
}
