// Command verify-bench prints what verification (issue 16) costs a run, per
// model config: the time of a DeMo training step, what committing adds to
// it (two replay-state exports and three hashes), the time of a replay (the
// verifier rebuilds the trainer's state from its own weights, trains the
// step and generates the payload), and the bytes a replay fetches (the
// trainer's replay state) next to the payload every member fetches. The
// extra compute of a run at verification_percent p is about p times the
// replay time, spread over the members, plus the commit overhead for each.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/trainer"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "verify-bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("verify-bench", flag.ContinueOnError)
	configs := fs.String("configs", "light,small", "comma-separated model configs")
	steps := fs.Int("steps", 5, "timed steps per config")
	batch := fs.Int("batch", 2, "sequences one member trains per step")
	threads := fs.Int("threads", 1, "trainer threads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *steps < 1 || *batch < 1 {
		return fmt.Errorf("-steps and -batch must be positive")
	}
	fmt.Fprintf(w, "%-6s %9s %5s %10s %10s %10s %8s %12s %10s\n", "config", "params", "batch", "train ms", "commit ms", "replay ms", "replay %", "state bytes", "payload")
	for _, name := range strings.Split(*configs, ",") {
		if err := bench(ctx, w, strings.TrimSpace(name), *steps, *batch, *threads); err != nil {
			return err
		}
	}
	return nil
}

func bench(ctx context.Context, w io.Writer, name string, steps, batch, threads int) error {
	cfg, err := trainer.ConfigByName(name)
	if err != nil {
		return err
	}
	trainerA, err := trainer.New(cfg, 1)
	if err != nil {
		return err
	}
	defer trainerA.Close()
	verifier, err := trainer.New(cfg, 1)
	if err != nil {
		return err
	}
	defer verifier.Close()
	for _, tr := range []*trainer.Trainer{trainerA, verifier} {
		if err := tr.SetThreads(threads); err != nil {
			return err
		}
	}
	hp := trainer.DeMo{LR: 1e-3, Decay: 0.999, Chunk: 64, TopK: 32, OneBit: true, Lookahead: true}
	T := cfg.SeqLen
	text := trainer.MarkovText(1, (steps+2)*batch*T+1)
	var train, commit, replay time.Duration
	var stateBytes, payloadBytes int
	for i := range steps + 1 {
		tok, tgt := trainer.Window(text, i*batch*T, batch, T)
		params, err := trainerA.Params()
		if err != nil {
			return err
		}
		// The trainer: commit overhead around an ordinary step.
		t0 := time.Now()
		before, err := trainerA.ReplayState()
		if err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := trainerA.Step(ctx, tok, tgt, T); err != nil {
			return err
		}
		payload, err := trainerA.DeMoGenerate(hp)
		if err != nil {
			return err
		}
		t2 := time.Now()
		rs, err := trainerA.ReplayState()
		if err != nil {
			return err
		}
		after, err := trainer.AfterApply(rs, hp)
		if err != nil {
			return err
		}
		_, _, _ = sha256.Sum256(payload), sha256.Sum256(before), sha256.Sum256(after)
		t3 := time.Now()
		// The verifier: rebuild, replay, compare.
		if err := verifier.LoadReplayState(before, params); err != nil {
			return err
		}
		if _, err := verifier.Step(ctx, tok, tgt, T); err != nil {
			return err
		}
		p2, err := verifier.DeMoGenerate(hp)
		if err != nil {
			return err
		}
		rs2, err := verifier.ReplayState()
		if err != nil {
			return err
		}
		after2, err := trainer.AfterApply(rs2, hp)
		if err != nil {
			return err
		}
		t4 := time.Now()
		if sha256.Sum256(p2) != sha256.Sum256(payload) || sha256.Sum256(after2) != sha256.Sum256(after) {
			return fmt.Errorf("%s step %d: the replay differs", name, i)
		}
		if err := trainerA.DeMoApply(hp, [][]byte{payload}); err != nil {
			return err
		}
		if i == 0 {
			continue // warm-up
		}
		train += t2.Sub(t1)
		commit += t1.Sub(t0) + t3.Sub(t2)
		replay += t4.Sub(t3)
		stateBytes, payloadBytes = len(before), len(payload)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(steps) }
	fmt.Fprintf(w, "%-6s %9d %5d %10.1f %10.1f %10.1f %7.0f%% %12d %10d\n", name, trainerA.NumParams(), batch,
		ms(train), ms(commit), ms(replay), 100*replay.Seconds()/train.Seconds(), stateBytes, payloadBytes)
	return nil
}
