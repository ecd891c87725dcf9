// Command trainer-bench prints the native trainer's throughput figures:
// GEMM GFLOP/s per numeric contract (arith=fp32 or mx8), kernel ISA level
// and thread count, training tokens/s for the light and small configs
// (AdamW and DeMo steps) per contract, and DeMo payload bytes per step with
// the ratio to dense fp32 gradients.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/trainer"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "trainer-bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("trainer-bench", flag.ContinueOnError)
	configs := fs.String("configs", "light,small", "comma-separated model configs to train (empty: none)")
	steps := fs.Int("steps", 5, "timed training steps per config")
	batch := fs.Int("batch", 8, "sequences per step")
	threads := fs.Int("threads", 0, "threads for the training runs (0: all processors)")
	gemm := fs.Bool("gemm", true, "run the GEMM benchmark")
	gemmThreads := fs.String("gemm-threads", "1,2", "comma-separated thread counts for the GEMM benchmark")
	topk := fs.Int("topk", 8, "DeMo top-k per chunk for the payload figures")
	microBatch := fs.Int("microbatch", 0, "sequences per forward/backward pass (0: the config's)")
	ariths := fs.String("arith", "fp32,mx8", "comma-separated numeric contracts to measure: fp32 (v2), mx8 (v3)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var arith []string
	for _, a := range strings.Split(*ariths, ",") {
		a = strings.TrimSpace(a)
		if a != trainer.ArithFP32 && a != trainer.ArithMX8 {
			return fmt.Errorf("-arith %q: want fp32, mx8 or both, separated by commas", *ariths)
		}
		arith = append(arith, a)
	}
	if *steps < 1 || *batch < 1 {
		return fmt.Errorf("-steps and -batch must be positive")
	}
	if *gemm {
		var ths []int
		for _, f := range strings.Split(*gemmThreads, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("-gemm-threads %q: want positive integers separated by commas", *gemmThreads)
			}
			ths = append(ths, n)
		}
		for _, a := range arith {
			if err := benchGEMM(w, a, ths); err != nil {
				return err
			}
		}
	}
	for _, name := range strings.Split(*configs, ",") {
		if strings.TrimSpace(name) == "" {
			continue
		}
		for _, a := range arith {
			if err := benchTrain(ctx, w, strings.TrimSpace(name), a, *steps, *batch, *threads, *topk, *microBatch); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchGEMM times out(M,N) = A(M,K) B(N,K)^T in contract arith at the
// shapes of the small config's MLP (B*T=2048 rows) for every kernel level
// the CPU has (amx-int8 where it has AMX and Linux grants it) and the given
// thread counts, checking each level's bits against the first's; mx8 also
// with the input gradients' slices (trainer.MXInputGradSlices), its
// GFLOP/s counting 2MNK as the others do.
func benchGEMM(w io.Writer, arith string, threads []int) error {
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		return err
	}
	cfg.MicroBatch = 1
	tr, err := trainer.New(cfg, 1)
	if err != nil {
		return err
	}
	defer tr.Close()
	shapes := [][3]int{{2048, 1536, 384}, {2048, 384, 1536}, {1024, 1024, 1024}}
	r := rand.New(rand.NewPCG(1, 2))
	variants := []trainer.MXSlices{0}
	if arith == trainer.ArithMX8 {
		variants = append(variants, trainer.MXInputGradSlices)
	}
	for _, s := range shapes {
		for _, slices := range variants {
			if err := benchGEMMShape(w, tr, arith, slices, s, r, threads); err != nil {
				return err
			}
		}
	}
	return nil
}

func benchGEMMShape(w io.Writer, tr *trainer.Trainer, arith string, slices trainer.MXSlices, s [3]int, r *rand.Rand, threads []int) error {
	m, n, k := s[0], s[1], s[2]
	a, b, out := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range a {
		a[i] = r.Float32() - 0.5
	}
	for i := range b {
		b[i] = r.Float32() - 0.5
	}
	var ref []float32
	for _, level := range trainer.ISALevels {
		got, err := tr.SetISA(level)
		if err != nil {
			return err
		}
		if got != level {
			continue // CPU lacks this level
		}
		for _, th := range threads {
			if err := tr.SetThreads(th); err != nil {
				return err
			}
			if err := tr.GEMM(arith, slices, m, n, k, a, b, out); err != nil { // warm-up
				return err
			}
			reps := 0
			start := time.Now()
			for time.Since(start) < 700*time.Millisecond {
				if err := tr.GEMM(arith, slices, m, n, k, a, b, out); err != nil {
					return err
				}
				reps++
			}
			sec := time.Since(start).Seconds()
			same := "ref"
			if ref == nil {
				ref = append([]float32(nil), out...)
			} else {
				same = "identical"
				for i := range out {
					if out[i] != ref[i] {
						same = "DIFFERENT"
						break
					}
				}
			}
			label := arith
			if slices != 0 {
				label += "/" + slices.String()
			}
			fmt.Fprintf(w, "gemm arith=%-6s M=%d N=%d K=%d isa=%-11s threads=%d  %6.1f GFLOP/s  bits=%s\n",
				label, m, n, k, level, th, 2*float64(m)*float64(n)*float64(k)*float64(reps)/sec/1e9, same)
		}
	}
	return nil
}

func benchTrain(ctx context.Context, w io.Writer, name, arith string, steps, batch, threads, topk, microBatch int) error {
	cfg, err := trainer.ConfigByName(name)
	if err != nil {
		return err
	}
	cfg.Arith = arith
	if microBatch > 0 {
		cfg.MicroBatch = microBatch
	}
	tr, err := trainer.New(cfg, 1)
	if err != nil {
		return err
	}
	defer tr.Close()
	if threads > 0 {
		if err := tr.SetThreads(threads); err != nil {
			return err
		}
	}
	T := cfg.SeqLen
	text := trainer.MarkovText(1, (2*steps+2)*batch*T+1)
	adam := trainer.AdamW{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	demo := trainer.DeMo{LR: 1e-3, Decay: 0.999, WeightDecay: 0.1, Chunk: 64, TopK: topk, OneBit: true, Lookahead: true}
	window := 0
	step := func() (float32, error) {
		tok, tgt := trainer.Window(text, window*batch*T, batch, T)
		window++
		return tr.Step(ctx, tok, tgt, T)
	}
	if _, err := step(); err != nil { // warm-up
		return err
	}
	if err := tr.AdamWStep(adam); err != nil {
		return err
	}
	var fwdbwd, opt time.Duration
	var loss float32
	for range steps {
		t0 := time.Now()
		if loss, err = step(); err != nil {
			return err
		}
		t1 := time.Now()
		if err := tr.AdamWStep(adam); err != nil {
			return err
		}
		fwdbwd += t1.Sub(t0)
		opt += time.Since(t1)
	}
	tokens := float64(steps * batch * T)
	fmt.Fprintf(w, "train %-6s arith=%-4s on %s\n", name, arith, tr.Backend())
	fmt.Fprintf(w, "train %-6s arith=%-4s params=%d B=%d T=%d adamw: %7.0f tok/s (fwd+bwd %.0f ms/step, adamw %.1f ms/step, loss %.3f)\n",
		name, arith, tr.NumParams(), batch, T, tokens/(fwdbwd+opt).Seconds(),
		float64(fwdbwd.Milliseconds())/float64(steps), float64(opt.Microseconds())/1e3/float64(steps), loss)
	var gen, apply time.Duration
	var size int
	fwdbwd = 0
	for range steps {
		t0 := time.Now()
		if loss, err = step(); err != nil {
			return err
		}
		t1 := time.Now()
		p, err := tr.DeMoGenerate(demo)
		if err != nil {
			return err
		}
		t2 := time.Now()
		if err := tr.DeMoApply(demo, [][]byte{p}); err != nil {
			return err
		}
		fwdbwd += t1.Sub(t0)
		gen += t2.Sub(t1)
		apply += time.Since(t2)
		size = len(p)
	}
	fmt.Fprintf(w, "train %-6s arith=%-4s params=%d B=%d T=%d demo:  %7.0f tok/s (generate %.1f ms/step, apply %.1f ms/step, loss %.3f)\n",
		name, arith, tr.NumParams(), batch, T, tokens/(fwdbwd+gen+apply).Seconds(),
		float64(gen.Microseconds())/1e3/float64(steps), float64(apply.Microseconds())/1e3/float64(steps), loss)
	dense := 4 * tr.NumParams()
	fmt.Fprintf(w, "payload %-6s top-k=%d one-bit: %d bytes/step, dense fp32 gradients %d bytes: %.1fx smaller\n",
		name, topk, size, dense, float64(dense)/float64(size))
	return nil
}
