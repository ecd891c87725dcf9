// Command trainer-replay trains a model for a few steps on the built-in
// synthetic text and prints one digest per step. Two runs with the same flags
// on the same backend must print the same lines, whatever -threads, -isa or
// the -march the trainer was compiled for: it is how audits (and the
// cross-build test) check the numeric contract.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/psyche-go/psyche/clients/trainer"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "trainer-replay: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("trainer-replay", flag.ContinueOnError)
	config := fs.String("config", "light", "model config name")
	seed := fs.Uint64("seed", 1, "initialisation and data seed")
	steps := fs.Int("steps", 3, "optimizer steps")
	batch := fs.Int("batch", 2, "sequences per step")
	seq := fs.Int("seq", 32, "tokens per sequence")
	opt := fs.String("optimizer", "demo", "demo or adamw")
	threads := fs.Int("threads", 0, "OpenMP threads (0: all processors)")
	isa := fs.Int("isa", 0, "GEMM kernel cap: 0 auto, 1 x86-64, 2 avx2, 3 avx-vnni, 4 avx512, 5 avx512-vnni, 6 amx-int8")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *steps < 1 || *batch < 1 {
		return errors.New("-steps and -batch must be positive")
	}
	if *opt != "demo" && *opt != "adamw" {
		return fmt.Errorf("-optimizer %q: want demo or adamw", *opt)
	}
	cfg, err := trainer.ConfigByName(*config)
	if err != nil {
		return err
	}
	tr, err := trainer.New(cfg, *seed)
	if err != nil {
		return err
	}
	defer tr.Close()
	if *threads > 0 {
		if err := tr.SetThreads(*threads); err != nil {
			return err
		}
	}
	level, err := tr.SetISA(trainer.ISA(*isa))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "backend=%s isa=%s params=%d\n", tr.Backend(), level, tr.NumParams())
	text := trainer.MarkovText(*seed, *steps**batch**seq+1)
	demo := trainer.DeMo{LR: 1e-3, Decay: 0.999, WeightDecay: 0.1, Chunk: 64, TopK: 8, OneBit: true, Lookahead: true}
	adam := trainer.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}
	for s := range *steps {
		tok, tgt := trainer.Window(text, s**batch**seq, *batch, *seq)
		loss, err := tr.Step(ctx, tok, tgt, *seq)
		if err != nil {
			return err
		}
		var payload []byte
		if *opt == "demo" {
			if payload, err = tr.DeMoGenerate(demo); err != nil {
				return err
			}
			err = tr.DeMoApply(demo, [][]byte{payload})
		} else {
			err = tr.AdamWStep(adam)
		}
		if err != nil {
			return err
		}
		d, err := tr.Digest(payload)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "step=%d loss=%08x digest=%x\n", s, math.Float32bits(loss), d)
	}
	return nil
}
