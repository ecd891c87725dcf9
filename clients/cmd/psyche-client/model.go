package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/trainer"
)

func modelCommands() []*cli.Command {
	return []*cli.Command{{
		Name:        "model",
		Usage:       "convert model files to and from Hugging Face's format",
		Subcommands: []*cli.Command{modelExportCommand(), modelImportCommand()},
	}}
}

func modelExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a checkpoint or model file as a Hugging Face model directory (config.json, model.safetensors in fp32)",
		ArgsUsage: "CHECKPOINT DIR",
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return badInputf("model export takes CHECKPOINT DIR (a checkpoint or model file, and the directory to write), got %q", c.Args().Slice())
			}
			src, dir := c.Args().Get(0), c.Args().Get(1)
			tr, err := trainer.LoadCheckpoint(src)
			if err != nil {
				return asBadModel(err)
			}
			defer tr.Close()
			if err := tr.ExportHF(dir); err != nil {
				return err
			}
			cfg := tr.Config()
			fmt.Fprintf(c.App.Writer, "exported %s (%s, %d parameters) to %s: %s and %s, for transformers' %s\n", src, arch(cfg),
				tr.NumParams(), dir, trainer.HFConfigFile, trainer.HFWeightsFile, hfClass(cfg))
			return nil
		},
	}
}

func modelImportCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "read a Hugging Face model directory (GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM; fp32, fp16 or bf16) into a model file",
		ArgsUsage: "DIR OUT",
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return badInputf("model import takes DIR OUT (a Hugging Face model directory, and the model file to write), got %q", c.Args().Slice())
			}
			dir, out := c.Args().Get(0), c.Args().Get(1)
			tr, err := trainer.ImportHF(dir, 1)
			if err != nil {
				return asBadModel(err)
			}
			defer tr.Close()
			if err := tr.SaveModel(out, map[string]string{"source": "hf:" + filepath.Base(filepath.Clean(dir))}); err != nil {
				return err
			}
			cfg := tr.Config()
			fmt.Fprintf(c.App.Writer, "imported %s (%s, %d layers, width %d, vocabulary %d, %d parameters) to %s\n", dir, arch(cfg),
				cfg.Layers, cfg.Channels, cfg.Vocab, tr.NumParams(), out)
			return nil
		},
	}
}

// asBadModel marks unusable or missing model files as bad input.
func asBadModel(err error) error {
	if errors.Is(err, trainer.ErrHF) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, trainer.ErrInvalid) ||
		errors.Is(err, trainer.ErrState) || errors.Is(err, trainer.ErrCheckpoint) {
		return badInput(err)
	}
	return err
}

// loadModel opens the model or checkpoint file, or Hugging Face model
// directory, of --model with the tokenizer of --tokenizer (or the one its
// vocabulary implies); the caller closes it.
func loadModel(c *cli.Context) (*trainer.Trainer, tokenizer.Tokenizer, error) {
	open := trainer.LoadCheckpoint
	if st, err := os.Stat(c.String("model")); err == nil && st.IsDir() {
		open = func(dir string) (*trainer.Trainer, error) { return trainer.ImportHF(dir, 1) }
	}
	tr, err := open(c.String("model"))
	if err != nil {
		return nil, nil, asBadModel(err)
	}
	tok, err := modelTokenizer(tr.Config(), c.String("tokenizer"))
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	return tr, tok, nil
}

// modelTokenizer is the tokenizer named (byte, gpt2 or a tokenizer.json
// path), or when name is empty the one the model's vocabulary implies (256
// or 50257).
func modelTokenizer(cfg trainer.Config, name string) (tokenizer.Tokenizer, error) {
	if name == "" {
		switch cfg.Vocab {
		case 256:
			name = tokenizer.ByteName
		case 50257:
			name = tokenizer.GPT2Name
		default:
			return nil, badInputf("the model's vocabulary of %d fits neither tokenizer: name one with --tokenizer", cfg.Vocab)
		}
	}
	tok, err := tokenizer.Open(name)
	if err != nil {
		return nil, badInput(err)
	}
	if tok.VocabSize() > cfg.Vocab {
		return nil, badInputf("tokenizer %s has %d tokens, more than the model's %d", name, tok.VocabSize(), cfg.Vocab)
	}
	return tok, nil
}

func arch(cfg trainer.Config) string {
	if cfg.IsLlama() {
		return "llama"
	}
	return "gpt2"
}

func hfClass(cfg trainer.Config) string {
	if cfg.IsLlama() {
		return "LlamaForCausalLM"
	}
	return "GPT2LMHeadModel"
}
