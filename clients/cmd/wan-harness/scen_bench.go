package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

func init() {
	register("bench", "every scenario with its defaults, one after another (about 35 minutes on 2 cores)", cmdBench)
}

// benchOrder is the full benchmark.
var benchOrder = []string{"selftest", "rounds", "latejoin", "churn", "nat", "modes", "scale"}

func cmdBench(ctx context.Context, args []string) error {
	fs := newFlags("bench", "[-only selftest,rounds,...]")
	only := fs.String("only", "", "run only these scenarios (comma-separated)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, s := range splitComma(*only) {
		if _, ok := commands[s]; !ok {
			return fmt.Errorf("-only: no scenario %q", s)
		}
		want[s] = true
	}
	var errs []error
	start := time.Now()
	for _, name := range benchOrder {
		if len(want) > 0 && !want[name] {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Printf("\n## %s\n", name)
		t0 := time.Now()
		if err := commands[name].run(ctx, nil); err != nil {
			fmt.Fprintf(os.Stderr, "wan-harness: bench: %s: %v\n", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		fmt.Printf("(%s: %.0f s)\n", name, time.Since(t0).Seconds())
	}
	fmt.Printf("\nbench: %.0f min\n", time.Since(start).Minutes())
	return errors.Join(errs...)
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
