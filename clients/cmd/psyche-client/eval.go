package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/trainer"
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
			&cli.IntFlag{Name: "limit", Usage: "items per task at most (0: all)"},
			&cli.IntFlag{Name: "builtin-items", Usage: "items of " + eval.Builtin, Value: eval.DefaultBuiltinItems},
			&cli.StringFlag{Name: "tokenizer", Usage: "byte, gpt2 or the path of a tokenizer.json (default: from the model's vocabulary, byte for 256 or gpt2 for 50257)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "model", "tasks"); err != nil {
				return err
			}
			if c.Int("limit") < 0 || c.Int("builtin-items") < 1 {
				return badInputf("--limit cannot be negative and --builtin-items must be positive")
			}
			var tasks []eval.Task
			for _, name := range c.StringSlice("tasks") {
				task, err := eval.Open(c.Context, name, c.Int("builtin-items"))
				if err != nil {
					return badInput(err)
				}
				tasks = append(tasks, task)
			}
			tr, tok, err := loadModel(c)
			if err != nil {
				return err
			}
			defer tr.Close()
			for _, task := range tasks {
				r, err := eval.Run(c.Context, tr, tok, task, c.Int("limit"))
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
