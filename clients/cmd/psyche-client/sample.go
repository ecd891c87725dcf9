package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/chat"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/generate"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

func sampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "sample",
		Usage: "generate text from a model file or a run's announced checkpoint, streamed as it is sampled (the same seed gives the same text)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "a model or checkpoint file, or a Hugging Face model directory"},
			&cli.StringFlag{Name: runIDFlag.Name, Usage: "instead of --model: the run whose announced hub checkpoint to fetch (see --rpc)"},
			&cli.StringFlag{Name: "prompt", Usage: "text to continue", Value: "The "},
			&cli.IntFlag{Name: "max-tokens", Usage: "tokens to generate at most (the model's context may end it first)", Value: 200},
			&cli.Float64Flag{Name: "temperature", Usage: "0 picks the most likely token every time; higher is more random", Value: 0.8},
			&cli.IntFlag{Name: "top-k", Usage: "sample among the k most likely tokens (0: all)", Value: 40},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the sampler"},
			&cli.StringFlag{Name: "tokenizer", Usage: "byte, gpt2 or the path of a tokenizer.json (default: from the model's vocabulary, byte for 256 or gpt2 for 50257)"},
			&cli.BoolFlag{Name: "chat", Usage: "send --prompt as a user's message through the chat template, and stop at the end of the reply"},
			chatTemplateFlag,
		}, coordinatorReadFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return badInputf("sample takes no arguments, got %q", c.Args().Slice())
			}
			if c.IsSet("model") == c.IsSet(runIDFlag.Name) {
				return badInputf("name the model with exactly one of --model FILE and --%s ID", runIDFlag.Name)
			}
			if c.IsSet(runIDFlag.Name) {
				path, done, err := fetchRunModel(c)
				if err != nil {
					return err
				}
				defer done()
				if err := c.Set("model", path); err != nil {
					return err
				}
			}
			tr, tok, err := loadModel(c)
			if err != nil {
				return err
			}
			defer tr.Close()
			cfg := tr.Config()
			ids, stop, err := samplePrompt(c, tok)
			if err != nil {
				return err
			}
			prompt := make([]int32, len(ids))
			for i, id := range ids {
				prompt[i] = int32(id)
			}
			w := c.App.Writer
			fmt.Fprint(w, c.String("prompt"))
			if c.Bool("chat") {
				fmt.Fprintln(w) // the reply on a line of its own
			}
			// Tokens can end inside a UTF-8 character: print only whole text.
			var pending []uint32
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
				if stop[uint32(t)] {
					return errEndOfTurn
				}
				pending = append(pending, uint32(t))
				return flush(false)
			})
			if errors.Is(err, errEndOfTurn) {
				err = nil
			}
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

// errEndOfTurn stops a --chat reply at its end-of-turn token.
var errEndOfTurn = errors.New("end of turn")

// samplePrompt is --prompt's tokens, and the tokens that end the reply:
// none for plain text; with --chat, the prompt as a user's message through
// the chat template with the assistant's turn opened, and the tokenizer's
// end-of-text and the template's eos_token as the reply's ends.
func samplePrompt(c *cli.Context, tok tokenizer.Tokenizer) (ids []uint32, stop map[uint32]bool, err error) {
	text := c.String("prompt")
	if !c.Bool("chat") {
		if c.IsSet(chatTemplateFlag.Name) {
			return nil, nil, badInputf("--%s needs --chat", chatTemplateFlag.Name)
		}
		ids, err = tok.Encode(text)
		if err != nil || len(ids) == 0 {
			return nil, nil, badInputf("--prompt %q: %v (it needs at least one token)", text, err)
		}
		return ids, nil, nil
	}
	js, ok := tok.(*tokenizer.JSONBPE)
	if !ok {
		return nil, nil, badInputf("--chat needs a tokenizer.json tokenizer (--tokenizer PATH), whose special tokens the chat template spells")
	}
	path := chatTemplatePath(c)
	if path == "" {
		return nil, nil, badInputf("--chat needs the chat template: give --%s (a tokenizer_config.json or a template file), or a --tokenizer tokenizer.json with a tokenizer_config.json beside it", chatTemplateFlag.Name)
	}
	tmpl, _, vars, err := chat.LoadTemplate(path)
	if err != nil {
		return nil, nil, badInput(err)
	}
	if sp := js.SpecialIn(text); sp != "" {
		return nil, nil, badInputf("--prompt spells the special token %q; a message is plain text", sp)
	}
	rendered, err := tmpl.Render([]chat.Message{{Role: "user", Content: text}}, true, vars)
	if err == nil {
		ids, err = js.EncodeSpecial(rendered)
	}
	if err != nil {
		return nil, nil, badInputf("--chat: %w", err)
	}
	stop = map[uint32]bool{js.EOT(): true}
	if id, ok := js.SpecialID(vars.EOS); ok {
		stop[id] = true
	}
	return ids, stop, nil
}

// fetchRunModel fetches the run's announced hub checkpoint into a temporary
// directory; done removes it.
func fetchRunModel(c *cli.Context) (path string, done func(), err error) {
	_, _, s, err := readRun(c)
	if err != nil {
		return "", nil, err
	}
	kind := s.Model.CheckpointKind
	repo, rev := coordinator.FixedString(s.Model.CheckpointRepo[:]), coordinator.FixedString(s.Model.CheckpointRevision[:])
	if (kind != coordinator.CheckpointHub && kind != coordinator.CheckpointP2P) || repo == "" || rev == "" {
		return "", nil, badInputf("run %s has announced no hub checkpoint (its clients upload one with train --hub-upload); sample from a checkpoint file with --model",
			c.String(runIDFlag.Name))
	}
	dir, err := os.MkdirTemp("", "psyche-sample-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(dir) }
	path, err = hub.Fetch(c.Context, repo, rev, dir, hub.FetchOptions{})
	if err != nil {
		done()
		return "", nil, fmt.Errorf("run %s: fetch checkpoint %s of %s: %w", c.String(runIDFlag.Name), rev, repo, err)
	}
	if trainer.IsHFWeights(path) { // the Hugging Face model the run starts from: the run's config reads it
		cfg, err := client.TrainerConfig(&s.Model, 1)
		if err == nil {
			path, err = hfModelFile(cfg, path)
		}
		if err != nil {
			done()
			return "", nil, fmt.Errorf("run %s: the Hugging Face model %s of %s: %w", c.String(runIDFlag.Name), rev, repo, err)
		}
	}
	fmt.Fprintf(c.App.ErrWriter, "sample: run %s, checkpoint %s of %s, step %d of the run\n", c.String(runIDFlag.Name), rev, repo, s.Progress.Step-1)
	return path, done, nil
}

// hfModelFile writes a Hugging Face weights file read with cfg as a model
// file beside it, and returns its path.
func hfModelFile(cfg trainer.Config, weights string) (string, error) {
	tr, err := trainer.New(cfg, 0)
	if err != nil {
		return "", err
	}
	defer tr.Close()
	if err := tr.LoadHF(weights); err != nil {
		return "", err
	}
	out := strings.TrimSuffix(weights, hub.Ext) + "-model" + hub.Ext
	return out, tr.SaveModel(out, map[string]string{"source": "hf"})
}
