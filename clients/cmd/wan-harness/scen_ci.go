package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func init() {
	register("ci", "a short check for CI: the shaper's figures, then 4 shaped clients over 2 epochs (about 2 minutes)", cmdCI)
}

// cmdCI checks that the shaper delivers its shape, and that a short run
// over shaped links reaches Finished across two epochs with every digest
// equal, every payload applied and nobody dropped.
func cmdCI(ctx context.Context, args []string) error {
	fs := newFlags("ci", "[-clients 4] [-shape 100/50ms/0.5]")
	n := fs.Int("clients", 4, "training clients")
	shape := fs.String("shape", "100/50ms/0.5", "every client's link")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := parseShape(*shape)
	if err != nil {
		return err
	}
	start := time.Now()
	var fails []error
	check := func(ok bool, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if ok {
			fmt.Println("ok  ", msg)
		} else {
			fmt.Println("FAIL", msg)
			fails = append(fails, errors.New(msg))
		}
	}

	rows, err := runSelftest(ctx, []Shape{s}, 2*time.Second, os.Stderr)
	if err != nil {
		return err
	}
	printSelftest(os.Stdout, rows)
	r := rows[0]
	rtt := r.RTT.Median.Seconds()
	check(math.Abs(rtt-s.RTT.Seconds()) <= 0.15*s.RTT.Seconds()+0.002, "selftest: median RTT %.1f ms within 15%% of %v", rtt*1000, s.RTT)
	loss := r.Loss.Loss()
	check(loss >= s.Loss*0.4 && loss <= s.Loss*2.5+0.001, "selftest: one-way loss %.2f%% near %.2f%%", loss*100, s.Loss*100)
	if s.RateMbit > 0 && s.RateMbit <= 200 {
		check(math.Abs(r.Rate.Mbit-s.RateMbit*(1-s.Loss)) <= 0.1*s.RateMbit, "selftest: UDP rate %.1f Mbit/s within 10%% of %.0f", r.Rate.Mbit, s.RateMbit)
	}

	dir := workDir("ci")
	opt := clusterOptions{Net: netShaped, Config: "tiny", Name: "ci", Dir: filepath.Join(dir, "ci"), Linger: 15,
		Overrides: map[string]string{
			"config.total_steps":            "14",
			"config.epoch_time":             "20",
			"config.warmup_time":            "8",
			"config.cooldown_time":          "3",
			"config.max_round_train_time":   "10",
			"config.init_min_clients":       strconv.Itoa(*n),
			"model.cold_start_warmup_steps": "1",
		}}
	var epochs float64
	res := runTrainingWith(ctx, opt, *n, s, 6*time.Minute, os.Stderr, func(c *Cluster, _ []*Client) func() {
		return func() {
			if st, err := c.RunState(context.WithoutCancel(ctx)); err == nil {
				if p, ok := st["progress"].(map[string]any); ok {
					epochs = num(p, "epoch")
				}
			}
		}
	})
	printTraining(os.Stdout, []trainingResult{res})
	check(res.Err == nil, "run: %d clients on %v reached Finished (%v)", *n, s, res.Err)
	check(res.Finished == *n, "run: %d/%d clients logged Finished", res.Finished, *n)
	check(res.Steps >= 14, "run: %d steps trained", res.Steps)
	check(epochs >= 1, "run: the run went through %.0f epoch boundaries (want at least 1: two epochs)", epochs)
	check(res.Compared >= 14 && res.Mismatched == 0, "run: digests equal at %d/%d steps", res.Compared-res.Mismatched, res.Compared)
	check(res.Incomplete == 0, "run: every payload applied by every client (%d short)", res.Incomplete)
	check(res.Drops == 0, "run: no member dropped (%d)", res.Drops)
	check(res.WireUp > 0 && res.Lost > 0, "run: traffic crossed the shaped links (%s up per client and step, %d packets lost)", fmtBytes(res.WireUp), res.Lost)
	fmt.Printf("ci: %.0f s\n", time.Since(start).Seconds())
	return errors.Join(fails...)
}
