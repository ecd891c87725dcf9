package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name: "eval",
		Usage: "score a model file on multiple-choice tasks as lm-evaluation-harness does (acc, acc_norm); " +
			"tasks are JSONL files of {\"context\", \"choices\", \"gold\"} or " + eval.Builtin,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "a model or checkpoint file, or a Hugging Face model directory"},
			&cli.StringSliceFlag{Name: "tasks", Usage: "task files (JSONL, one item per line) and/or " + eval.Builtin +
				" (the true 8-byte continuation of held-out State of the Union passages among 4)"},
			&cli.IntFlag{Name: "eval-task-max-docs", Aliases: []string{"limit"}, Usage: "items per task at most, a sample that --eval-seed picks (0: all)"},
			&cli.Uint64Flag{Name: "eval-seed", Usage: "seed of the items --eval-task-max-docs samples (train's default too: the same items as a run's clients score)", Value: eval.DefaultSeed},
			&cli.IntFlag{Name: "builtin-items", Usage: "items of " + eval.Builtin, Value: eval.DefaultBuiltinItems},
			&cli.StringFlag{Name: "tokenizer", Usage: "byte, gpt2 or the path of a tokenizer.json (default: from the model's vocabulary, byte for 256 or gpt2 for 50257)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "model", "tasks"); err != nil {
				return err
			}
			if c.Int("eval-task-max-docs") < 0 || c.Int("builtin-items") < 1 {
				return badInputf("--eval-task-max-docs cannot be negative and --builtin-items must be positive")
			}
			var tasks []eval.Task
			for _, name := range c.StringSlice("tasks") {
				task, err := eval.Open(c.Context, name, c.Int("builtin-items"))
				if err != nil {
					return badInput(err)
				}
				tasks = append(tasks, task.Sample(c.Int("eval-task-max-docs"), c.Uint64("eval-seed")))
			}
			tr, tok, err := loadModel(c)
			if err != nil {
				return err
			}
			defer tr.Close()
			for _, task := range tasks {
				r, err := eval.Run(c.Context, tr, tok, task)
				if errors.Is(err, eval.ErrTask) || errors.Is(err, trainer.ErrInvalid) {
					return badInput(err)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s: acc %.4f, acc_norm %.4f over %d items (chance %.4f)\n", r.Task, r.Acc, r.AccNorm, r.N, r.Chance)
			}
			return nil
		},
	}
}

func evalConvertCommand() *cli.Command {
	return &cli.Command{
		Name: "eval-convert",
		Usage: "write a public multiple-choice set (" + strings.Join(eval.Formats, ", ") + ", the JSONL their Hugging Face exports hold) " +
			"as an eval task file, prompted as lm-evaluation-harness prompts it",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Usage: strings.Join(eval.Formats, ", ")},
			&cli.StringFlag{Name: "in", Usage: "the set's JSONL file"},
			&cli.StringFlag{Name: "out", Usage: "the task file to write (JSONL; written whole, or not at all)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "format", "in", "out"); err != nil {
				return err
			}
			in, err := os.Open(c.String("in"))
			if err != nil {
				return badInput(err)
			}
			defer in.Close()
			var out bytes.Buffer
			n, err := eval.Convert(c.String("format"), c.String("in"), in, &out)
			if err != nil {
				return badInput(err)
			}
			if err := atomicfile.Write(c.String("out"), out.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s: %d %s items\n", c.String("out"), n, c.String("format"))
			return nil
		},
	}
}
