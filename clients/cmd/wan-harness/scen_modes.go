package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func init() {
	register("modes", "scenario 5: DeMo (tiny) and SparseLoCo (sparseloco) at 10 Mbit/s: the bandwidth each needs", cmdModes)
}

func cmdModes(ctx context.Context, args []string) error {
	fs := newFlags("modes", "[-clients 4] [-shape 10/50ms/0.5] [-configs tiny,sparseloco]")
	n := fs.Int("clients", 4, "training clients")
	shape := fs.String("shape", "10/50ms/0.5", "every client's link")
	configs := fs.String("configs", "tiny,sparseloco", "run configs to compare")
	nets := fs.String("nets", "loopback,shaped", "networks")
	steps := fs.String("steps", "tiny=20,sparseloco=8", "total_steps per config (rounds)")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up on a run after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := parseShape(*shape)
	if err != nil {
		return err
	}
	stepsOf := map[string]string{}
	for _, kv := range strings.Split(*steps, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-steps %q: want config=steps,...", *steps)
		}
		stepsOf[k] = v
	}
	dir := workDir("modes")
	results := runMatrix(ctx, "m", dir, *configs, *nets, s, *n, *timeout, func(cfg string) map[string]string {
		over := map[string]string{"config.init_min_clients": strconv.Itoa(*n)}
		if v := stepsOf[cfg]; v != "" {
			over["config.total_steps"] = v
		}
		return over
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("\nscenario 5: DeMo vs SparseLoCo, %d clients, link %s (files: %s)\n", *n, s, dir)
	printTraining(os.Stdout, results)
	base := map[string]float64{}
	for _, r := range results {
		if r.Net == netLoopback && r.Err == nil {
			base[r.Config] = r.RoundMedian
		}
	}
	fmt.Println("\nbandwidth per client and round (a round is one optimizer step with DeMo, 10 inner steps with SparseLoCo):")
	tb := newTable("mode", "network", "update sent", "update received", "wire up (p2p)", "wire down (p2p)", "dense fp32 per round", "dense/sent",
		"compute per round", "round", "round vs loopback", "download rate to hide it in compute")
	for _, r := range results {
		nw := r.Net
		if r.Net == netShaped {
			nw = r.Shape.String()
		}
		over := "-"
		if b, ok := base[r.Config]; ok && r.Net != netLoopback && b > 0 {
			over = fmt.Sprintf("%+.0f%%", (r.RoundMedian/b-1)*100)
		}
		ratio := "-"
		if r.PayloadOut > 0 && r.DenseBytes > 0 {
			ratio = fmt.Sprintf("%.0fx", float64(r.DenseBytes)/r.PayloadOut)
		}
		need := "-"
		if r.TrainMean > 0 && r.PayloadIn > 0 {
			need = fmt.Sprintf("%.2f Mbit/s", r.PayloadIn*8/r.TrainMean/1e6)
		}
		wire := func(v float64) string {
			if r.Net == netLoopback {
				return "-"
			}
			return fmtBytes(v)
		}
		mode := r.Config
		if mode == "tiny" {
			mode = "DeMo (tiny)"
		} else if mode == "sparseloco" {
			mode = "SparseLoCo (sparseloco)"
		}
		tb.Row(mode, nw, fmtBytes(r.PayloadOut), fmtBytes(r.PayloadIn), wire(r.WireUp), wire(r.WireDn), fmtBytes(float64(r.DenseBytes)), ratio,
			fmtSec(r.TrainMean), fmtSec(r.RoundMedian), over, need)
	}
	tb.Print(os.Stdout)
	return firstErr(results)
}
