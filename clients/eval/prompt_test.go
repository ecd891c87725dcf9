package eval

import (
	"testing"

	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

// PromptFor is pinned (clients of a run must agree, across versions), uses
// the whole list, and changes with the seed and with the epoch.
func TestPromptFor(t *testing.T) {
	var got []int
	for epoch := range uint32(6) {
		got = append(got, PromptFor(DefaultSeed, epoch))
	}
	pinned := []int{5, 3, 2, 4, 2, 6}
	for i := range pinned {
		if got[i] != pinned[i] {
			t.Fatalf("seed %d, epochs 0..5 pick %v, want %v", DefaultSeed, got, pinned)
		}
	}
	counts := make([]int, len(Prompts))
	for epoch := range uint32(1600) {
		counts[PromptFor(DefaultSeed, epoch)]++
	}
	for i, n := range counts {
		if n < 60 || n > 140 { // 100 expected
			t.Errorf("prompt %d picked %d times in 1600 epochs: %v", i, n, counts)
		}
	}
	bySeed, byEpoch := 0, 0
	for k := range uint32(64) {
		if PromptFor(DefaultSeed, k) != PromptFor(DefaultSeed+1, k) {
			bySeed++
		}
		if PromptFor(uint64(k), 0) != PromptFor(uint64(k), 1) {
			byEpoch++
		}
	}
	if bySeed < 48 || byEpoch < 48 { // 60 of 64 expected
		t.Errorf("another seed changed %d of 64 picks, another epoch %d of 64", bySeed, byEpoch)
	}
}

// Every prompt is tokenized by the built-in tokenizers into a few tokens,
// leaving a small model's context room for the continuation.
func TestPromptsTokenize(t *testing.T) {
	for _, name := range []string{tokenizer.ByteName, tokenizer.GPT2Name} {
		tok, err := tokenizer.New(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range Prompts {
			ids, err := tok.Encode(p)
			if err != nil || len(ids) == 0 || len(ids) > 64 {
				t.Errorf("%s: prompt %d %q: %d tokens, %v", name, i, p, len(ids), err)
			}
		}
	}
}
