package main

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/generate"
	"github.com/psyche-go/psyche/clients/trainer"
)

func sampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "sample",
		Usage: "generate text from a model file, streamed as it is sampled (the same seed gives the same text)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "a model or checkpoint file (psyche-client model import makes one from a Hugging Face directory)"},
			&cli.StringFlag{Name: "prompt", Usage: "text to continue", Value: "The "},
			&cli.IntFlag{Name: "max-tokens", Usage: "tokens to generate at most (the model's context may end it first)", Value: 200},
			&cli.Float64Flag{Name: "temperature", Usage: "0 picks the most likely token every time; higher is more random", Value: 0.8},
			&cli.IntFlag{Name: "top-k", Usage: "sample among the k most likely tokens (0: all)", Value: 40},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the sampler"},
			&cli.StringFlag{Name: "tokenizer", Usage: "byte or gpt2 (default: from the model's vocabulary, 256 or 50257)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "model"); err != nil {
				return err
			}
			tr, tok, err := loadModel(c)
			if err != nil {
				return err
			}
			defer tr.Close()
			cfg := tr.Config()
			ids, err := tok.Encode(c.String("prompt"))
			if err != nil || len(ids) == 0 {
				return badInputf("--prompt %q: %v (it needs at least one token)", c.String("prompt"), err)
			}
			prompt := make([]int32, len(ids))
			for i, id := range ids {
				prompt[i] = int32(id)
			}
			w := c.App.Writer
			fmt.Fprint(w, c.String("prompt"))
			// Tokens can end inside a UTF-8 character: print only whole text.
			var pending []uint16
			flush := func(final bool) error {
				s, err := tok.Decode(pending)
				if err != nil {
					return err
				}
				if utf8.ValidString(s) || final || len(pending) >= 4 {
					fmt.Fprint(w, s)
					pending = pending[:0]
				}
				return nil
			}
			o := generate.Options{MaxTokens: c.Int("max-tokens"), Temperature: c.Float64("temperature"), TopK: c.Int("top-k"), Seed: c.Uint64("seed")}
			err = generate.Generate(c.Context, tr, prompt, o, func(t int32) error {
				pending = append(pending, uint16(t))
				return flush(false)
			})
			if ferr := flush(true); ferr != nil && err == nil {
				err = ferr
			}
			fmt.Fprintln(w)
			switch {
			case errors.Is(err, generate.ErrContextFull):
				fmt.Fprintf(c.App.ErrWriter, "sample: stopped at the model's context of %d tokens\n", cfg.SeqLen)
				return nil
			case errors.Is(err, trainer.ErrInvalid):
				return badInput(err)
			}
			return err
		},
	}
}
