package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func init() {
	register("rounds", "scenario 1: round time, overhead against loopback, bytes and digests of N shaped clients", cmdRounds)
}

func cmdRounds(ctx context.Context, args []string) error {
	fs := newFlags("rounds", "[-clients 8] [-configs tiny,small] [-shape 100/50ms/0.5] [-steps 20]")
	n := fs.Int("clients", 8, "training clients (at most the configs' global batch size, 8)")
	configs := fs.String("configs", "tiny,small", "run configs: names in config/ or small (the trainer's 10.8 M-parameter model)")
	shape := fs.String("shape", "100/50ms/0.5", "every client's link: RATE_MBIT/RTT/LOSS_PERCENT")
	nets := fs.String("nets", "loopback,shaped", "networks to compare: loopback (one namespace, 127.0.0.1) and/or shaped")
	steps := fs.Int("steps", 20, "total_steps of each run")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up on a run after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := parseShape(*shape)
	if err != nil {
		return err
	}
	dir := workDir("rounds")
	results := runMatrix(ctx, "r", dir, *configs, *nets, s, *n, *timeout, func(string) map[string]string {
		return map[string]string{"config.total_steps": strconv.Itoa(*steps), "config.init_min_clients": strconv.Itoa(*n)}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("\nscenario 1: %d clients, %d steps, link %s (files: %s)\n", *n, *steps, s, dir)
	printTraining(os.Stdout, results)
	return firstErr(results)
}

// runMatrix trains every config on every network ("loopback" runs
// unshaped, any other on the shape), one run after another, with the config
// overrides over gives each; failures are logged and kept in the results.
func runMatrix(ctx context.Context, prefix, dir, configs, nets string, shape Shape, n int, timeout time.Duration,
	over func(cfg string) map[string]string) []trainingResult {
	var results []trainingResult
	for _, cfg := range strings.Split(configs, ",") {
		for _, nw := range strings.Split(nets, ",") {
			if ctx.Err() != nil {
				return results
			}
			sh := shape
			if nw == netLoopback {
				sh = Unshaped
			}
			name := fmt.Sprintf("%s-%s-%s", prefix, cfg, nw)
			opt := clusterOptions{Net: nw, Config: cfg, Name: name, Dir: filepath.Join(dir, name), Linger: 20, Overrides: over(cfg)}
			r := runTraining(ctx, opt, n, sh, timeout, os.Stderr)
			if r.Err != nil {
				fmt.Fprintf(os.Stderr, "wan-harness: %s: %v\n", name, r.Err)
			}
			results = append(results, r)
		}
	}
	return results
}

func firstErr(rs []trainingResult) error {
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", r.Label, r.Err)
		}
		if r.Mismatched > 0 {
			return fmt.Errorf("%s: state digests differ between clients at %d steps", r.Label, r.Mismatched)
		}
	}
	return nil
}

// printTraining prints the table of training runs; overheads are against
// the loopback run of the same config, when there is one.
func printTraining(w io.Writer, rs []trainingResult) {
	base := map[string]float64{}
	for _, r := range rs {
		if r.Net == netLoopback && r.Err == nil {
			base[r.Config] = r.RoundMedian
		}
	}
	tb := newTable("config", "network", "clients", "steps", "round median", "round p95", "compute/step",
		"round vs loopback", "update sent/client/step", "wire up/client/step", "wire down/client/step", "chain+data/client/step",
		"wall", "digests equal", "finished", "drops", "result")
	for _, r := range rs {
		nw := r.Net
		if r.Net == netShaped {
			nw = r.Shape.String()
		}
		over := "-"
		if b, ok := base[r.Config]; ok && r.Net != netLoopback && b > 0 {
			over = fmt.Sprintf("%+.0f%%", (r.RoundMedian/b-1)*100)
		}
		wire := func(v float64) string {
			if r.Net == netLoopback {
				return "-"
			}
			return fmtBytes(v)
		}
		res := "ok"
		if r.Err != nil {
			res = "FAILED: " + firstLine(r.Err.Error())
		}
		tb.Row(r.Config, nw, r.Clients, r.Steps, fmtSec(r.RoundMedian), fmtSec(r.RoundP95), fmtSec(r.TrainMean), over,
			fmtBytes(r.PayloadOut), wire(r.WireUp), wire(r.WireDn), wire(r.ChainUp), fmtSec(r.Wall),
			fmt.Sprintf("%d/%d", r.Compared-r.Mismatched, r.Compared), fmt.Sprintf("%d/%d", r.Finished, r.Clients), r.Drops, res)
	}
	tb.Print(w)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}
