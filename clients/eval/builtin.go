package eval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/psyche-go/psyche/clients/data/corpus"
)

// The built-in task's passage and choice lengths (bytes).
const (
	BuiltinContextBytes = 96
	BuiltinChoiceBytes  = 8
)

// BuiltinSOTU is the built-in task: n passages of the held-out State of the
// Union addresses (after corpus.DefaultLastTrainYear, never trained on);
// each item gives contextBytes of a passage and asks which of 4
// continuations of choiceBytes is the true one, the others taken from
// elsewhere in the held-out text. Chance is 25%. The same n gives the same
// items (a fixed seed).
func BuiltinSOTU(ctx context.Context, n, contextBytes, choiceBytes int) (Task, error) {
	dir, err := corpus.SOTUDir()
	if err != nil {
		return Task{}, fmt.Errorf("%w: the built-in task reads the corpus scripts/setup.sh installs: %v", ErrTask, err)
	}
	split, err := corpus.NewSplit("validation", corpus.DefaultLastTrainYear)
	if err != nil {
		return Task{}, err
	}
	var b strings.Builder
	if err := corpus.Walk(ctx, dir, split, func(d corpus.Document) error {
		b.WriteString(d.Text)
		b.WriteString("\n\n")
		return nil
	}); err != nil {
		return Task{}, err
	}
	text := b.String()
	span := contextBytes + choiceBytes
	if n < 1 || contextBytes < 1 || choiceBytes < 1 || len(text) < 4*span {
		return Task{}, fmt.Errorf("%w: %d items of %d+%d bytes from %d bytes of text", ErrTask, n, contextBytes, choiceBytes, len(text))
	}
	rng := rand.New(rand.NewPCG(2000, uint64(n)))
	// Byte offsets that start a word, so contexts and choices read naturally.
	at := func() int {
		for {
			p := rng.IntN(len(text) - span)
			if p == 0 || text[p-1] == ' ' {
				return p
			}
		}
	}
	t := Task{Name: fmt.Sprintf("%s (%d held-out passages, %d+%d bytes, 4 choices)", Builtin, n, contextBytes, choiceBytes), Key: Builtin}
	for range n {
		p := at()
		it := Item{Context: text[p : p+contextBytes], Gold: rng.IntN(4)}
		for c := range 4 {
			q := p + contextBytes
			if c != it.Gold {
				q = at() + contextBytes
			}
			it.Choices = append(it.Choices, text[q:q+choiceBytes])
		}
		t.Items = append(t.Items, it)
	}
	return t, nil
}
