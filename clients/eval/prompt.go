package eval

import (
	"context"
	"errors"
	"fmt"

	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/generate"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Prompts are the openings a prompt task (train --prompt-task) continues,
// so that a run's watchers can read the model's text improve. Short, so
// that they fit the smallest model's context with room for the tokens.
var Prompts = [...]string{
	"The old lighthouse keeper climbed the stairs and",
	"Once upon a time, in a village at the edge of the forest,",
	"The best way to learn a new language is",
	"When the train finally stopped, the passengers",
	"My grandmother always said that bread",
	"The committee met on Tuesday to discuss",
	"In the spring the river rises, and the farmers",
	"She opened the letter and read the first line:",
	"The recipe calls for two cups of flour,",
	"Scientists have long wondered why the moon",
	"After the storm, the streets of the city were",
	"The most important thing about a good bridge is",
	"He had never seen so many books in one room.",
	"Every morning the baker wakes before dawn to",
	"The children ran down to the beach and",
	"The report concluded that the new road would",
}

// PromptFor is the index in Prompts that the model of epoch continues
// under seed (train --eval-seed): a SplitMix64 of both, as Task.Sample
// draws, so every client with the same seed picks the same prompt.
func PromptFor(seed uint64, epoch uint32) int {
	return int(splitMix64(seed+uint64(epoch)*0x9e3779b97f4a7c15) % uint64(len(Prompts)))
}

// Continue generates up to maxTokens tokens after text greedily
// (temperature 0: the same model gives the same tokens on any machine, so
// anyone can check them). A model whose context fills first gives fewer.
func Continue(ctx context.Context, tr *trainer.Trainer, tok tokenizer.Tokenizer, text string, maxTokens int) ([]int32, error) {
	ids, err := tok.Encode(text)
	if err != nil {
		return nil, fmt.Errorf("prompt %q: %w", text, err)
	}
	prompt := make([]int32, len(ids))
	for i, id := range ids {
		prompt[i] = int32(id)
	}
	var out []int32
	err = generate.Generate(ctx, tr, prompt, generate.Options{MaxTokens: maxTokens}, func(t int32) error {
		out = append(out, t)
		return nil
	})
	if errors.Is(err, generate.ErrContextFull) {
		err = nil
	}
	return out, err
}
