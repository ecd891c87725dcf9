// Command trainer-bench prints the native trainer's throughput figures:
// GEMM GFLOP/s per numeric contract (arith=fp32 or mx8), kernel ISA level
// and thread count, training tokens/s for the light and small configs
// (AdamW and DeMo steps) per contract, the AdamW steps' model FLOP
// utilisation (MFU, against -peak-tflops) and memory (trainer.Footprint,
// and on a GPU what nvidia-smi says is used), and DeMo payload bytes per
// step with the ratio to dense fp32 gradients. -fit-gib picks the largest
// micro-batch whose footprint fits a memory; -steps 0 prints the memory
// lines without training.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
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
	steps := fs.Int("steps", 5, "timed training steps per config (0: print the memory lines (and -fit-gib's) only, train nothing)")
	batch := fs.Int("batch", 8, "sequences per step")
	threads := fs.Int("threads", 0, "threads for the training runs (0: all processors)")
	gemm := fs.Bool("gemm", true, "run the GEMM benchmark")
	gemmThreads := fs.String("gemm-threads", "1,2", "comma-separated thread counts for the GEMM benchmark")
	topk := fs.Int("topk", 8, "DeMo top-k per chunk for the payload figures")
	microBatch := fs.Int("microbatch", 0, "sequences per forward/backward pass (0: the config's)")
	ariths := fs.String("arith", "fp32,mx8", "comma-separated numeric contracts to measure: fp32 (v2), mx8 (v3)")
	peak := fs.Float64("peak-tflops", 0, "the compute path's peak TFLOP/s for the MFU figure, e.g. a GPU's dense bf16 tensor rate (H100 SXM and H200: 989); 0: unknown, MFU printed as -")
	demo := fs.Bool("demo", true, "also time DeMo steps and print the payload line")
	mask := fs.Bool("mask", false, "also time fine-tuning steps (a loss mask training the second half of each sequence) against pretraining steps of the same shape, interleaved, and print their ratio")
	fitGiB := fs.Float64("fit-gib", 0, "micro-batch: the largest divisor of -batch whose trainer.Footprint (AdamW; the GPU's figure when a GPU is found, else the host's) is at most this many GiB (0: -microbatch)")
	fitHostGiB := fs.Float64("fit-host-gib", 0, "with -fit-gib on a GPU: also keep the host's peak, New's (the CPU path's footprint: New makes those buffers before the GPU attaches), within this many GiB (0: unchecked)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var arith []string
	for _, a := range strings.Split(*ariths, ",") {
		a = strings.TrimSpace(a)
		if a != trainer.ArithFP32 && a != trainer.ArithMX8 {
			return fmt.Errorf("-arith %q: want fp32, mx8 or both, separated by commas", *ariths)
		}
		arith = append(arith, a)
	}
	if *steps < 0 || *batch < 1 {
		return fmt.Errorf("-steps must be 0 or more and -batch positive")
	}
	if *fitGiB < 0 || *fitHostGiB < 0 || *peak < 0 || *microBatch < 0 {
		return fmt.Errorf("-fit-gib, -fit-host-gib, -peak-tflops and -microbatch must not be negative")
	}
	if *fitGiB > 0 && *microBatch > 0 {
		return fmt.Errorf("-fit-gib picks the micro-batch: give it or -microbatch, not both")
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
			o := trainOpts{name: strings.TrimSpace(name), arith: a, steps: *steps, batch: *batch, threads: *threads, topk: *topk,
				microBatch: *microBatch, fitGiB: *fitGiB, fitHostGiB: *fitHostGiB, peakTFLOPs: *peak, demo: *demo, mask: *mask}
			if err := benchTrain(ctx, w, o); err != nil {
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

// trainOpts is what one config's training figures take (run's flags).
type trainOpts struct {
	name, arith                 string
	steps, batch, threads, topk int
	microBatch                  int     // 0: the config's
	fitGiB                      float64 // > 0: the largest micro-batch that fits, instead of microBatch
	fitHostGiB                  float64 // > 0, with fitGiB on a GPU: New's host peak must fit too
	peakTFLOPs                  float64 // 0: unknown
	mask                        bool    // time masked against plain steps
	demo                        bool
}

// FLOPsPerToken is the model FLOPs of training one token of cfg on
// sequences of seqLen, the standard accounting (Kaplan et al. 2020, PaLM's
// appendix B, nanoGPT's estimate_mfu):
//
//	6N + 12 L C T
//
// with N the parameters that multiply activations (all of them but GPT-2's
// position table, T x C, and an untied model's input embedding, Vp x C,
// which are looked up; a tied embedding counts once, as the lm-head),
// 6 = 2 forward + 4 backward FLOPs per such parameter and token, and
// 12 L C T attention's q.k and a.v products (2 products x 2 FLOPs a
// multiply-add x 3 for forward and backward, per key position, channel and
// layer; C = query heads x head size, so grouped-query attention costs the
// same; the causal mask's halving is not taken off). Norms, softmax, rotary and the optimizer are not counted.
// scripts/torch/gpt.py's flops_per_token is the same formula.
func FLOPsPerToken(cfg trainer.Config, seqLen int) (flops float64, matmulParams int64) {
	n := cfg.Params()
	if !cfg.IsLlama() {
		n -= int64(cfg.SeqLen) * int64(cfg.Channels) // wpe
	} else if cfg.Untied {
		n -= int64(cfg.PaddedVocab) * int64(cfg.Channels) // wte, the lm-head being separate
	}
	return 6*float64(n) + 12*float64(cfg.Layers)*float64(cfg.Channels)*float64(seqLen), n
}

const gib = 1 << 30

// fitMicroBatch is the largest divisor of batch whose footprint (AdamW; on
// the GPU when gpu, else the host) is at most limit bytes and, on the GPU
// with hostLimit > 0, whose host peak at New (the CPU path's footprint:
// New makes its buffers before the GPU attaches and frees them) is at most
// hostLimit, with its footprint and why the next larger divisor does not
// fit, for the fit line.
func fitMicroBatch(cfg trainer.Config, batch, threads int, gpu bool, limit, hostLimit float64) (mb int, need int64, why string, err error) {
	for d := batch; d >= 1; d-- {
		if batch%d != 0 {
			continue
		}
		c := cfg
		c.MicroBatch = d
		f, err := trainer.Footprint(c, trainer.FootprintOptions{Optimizer: "adamw", GPU: gpu, Threads: threads})
		if err != nil {
			return 0, 0, "", err
		}
		b := f.Host()
		if gpu {
			b = f.Device()
		}
		if float64(b) > limit {
			why = fmt.Sprintf("micro-batch %d needs %.2f GiB", d, float64(b)/gib)
			continue
		}
		if gpu && hostLimit > 0 {
			h, err := trainer.Footprint(c, trainer.FootprintOptions{Optimizer: "adamw", Threads: threads})
			if err != nil {
				return 0, 0, "", err
			}
			if float64(h.Host()) > hostLimit {
				why = fmt.Sprintf("micro-batch %d needs %.2f GiB of the host's %.2f at New", d, float64(h.Host())/gib, hostLimit/gib)
				continue
			}
		}
		return d, b, why, nil
	}
	return 0, 0, "", fmt.Errorf("%s arith=%s: not even micro-batch 1 fits: %s", cfg.Name, cfg.Arith, why)
}

// memoryLine describes f (the footprint of a run) for the memory line.
func memoryLine(f trainer.MemoryFootprint, gpu bool) string {
	g := func(b int64) string { return fmt.Sprintf("%.2f", float64(b)/gib) }
	parts := func(m trainer.MemoryBytes) string {
		return fmt.Sprintf("weights %s, gradients %s, optimizer %s, activations %s, mx8 %s, scratch %s, transient %s",
			g(m.Weights), g(m.Gradients), g(m.Optimizer), g(m.Activations), g(m.MX8), g(m.Scratch), g(m.Transient))
	}
	if !gpu {
		return fmt.Sprintf("host %s GiB (%s)", g(f.Host()), parts(f.OnHost))
	}
	return fmt.Sprintf("gpu %s GiB (%s), host %s GiB", g(f.Device()), parts(f.OnDevice), g(f.Host()))
}

// gpuUsed is what nvidia-smi says this process holds on the GPU, or when
// it does not list the process (another PID namespace) the memory used on
// the trainer's GPU by every process, with where the figure comes from;
// "" without nvidia-smi.
func gpuUsed() string {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err == nil {
		pid := strconv.Itoa(os.Getpid())
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Split(line, ",")
			if len(f) == 2 && strings.TrimSpace(f[0]) == pid {
				if mib, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64); err == nil {
					return fmt.Sprintf("%.2f GiB (nvidia-smi, this process)", mib/1024)
				}
			}
		}
	}
	// The trainer takes CUDA device 0: the first of CUDA_VISIBLE_DEVICES
	// when that names an index (nvidia-smi ignores the variable).
	dev := "0"
	if v := strings.Split(os.Getenv("CUDA_VISIBLE_DEVICES"), ",")[0]; v != "" {
		if _, err := strconv.Atoi(v); err == nil {
			dev = v
		}
	}
	out, err = exec.Command("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", dev).Output()
	if err != nil {
		return ""
	}
	mib, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%.2f GiB (nvidia-smi, GPU %s, all processes)", mib/1024, dev)
}

func benchTrain(ctx context.Context, w io.Writer, o trainOpts) error {
	name, arith, steps, batch, threads, topk := o.name, o.arith, o.steps, o.batch, o.threads, o.topk
	cfg, err := trainer.ConfigByName(name)
	if err != nil {
		return err
	}
	cfg.Arith = arith
	if o.microBatch > 0 {
		cfg.MicroBatch = o.microBatch
	}
	fpThreads := max(threads, 0) // Footprint's 0: the processors here, as New
	if o.fitGiB > 0 {
		gpu := trainer.GPUAvailable() == nil
		mb, need, why, err := fitMicroBatch(cfg, batch, fpThreads, gpu, o.fitGiB*gib, o.fitHostGiB*gib)
		if err != nil {
			return err
		}
		where := "host"
		if gpu {
			where = "gpu"
		}
		more := "it is the batch"
		if mb < batch {
			more = why
		}
		fmt.Fprintf(w, "fit    %-6s arith=%-4s B=%d T=%d limit %.2f GiB on the %s: microbatch=%d (%.2f GiB; %s)\n",
			name, arith, batch, cfg.SeqLen, o.fitGiB, where, mb, float64(need)/gib, more)
		cfg.MicroBatch = mb
	}
	if steps == 0 {
		gpu := trainer.GPUAvailable() == nil
		f, err := trainer.Footprint(cfg, trainer.FootprintOptions{Optimizer: "adamw", GPU: gpu, Threads: fpThreads})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "memory %-6s arith=%-4s microbatch=%d footprint (AdamW): %s\n", name, arith, cfg.MicroBatch, memoryLine(f, gpu))
		return nil
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
	backend := tr.Backend()
	onGPU := strings.HasPrefix(backend, "cuda")
	used := ""
	if onGPU {
		used = gpuUsed() // after the AdamW steps, before DeMo grows the device scratch
	}
	tokPerSec := tokens / (fwdbwd + opt).Seconds()
	fmt.Fprintf(w, "train %-6s arith=%-4s on %s\n", name, arith, backend)
	fmt.Fprintf(w, "train %-6s arith=%-4s params=%d B=%d T=%d adamw: %7.0f tok/s (fwd+bwd %.0f ms/step, adamw %.1f ms/step, loss %.3f)\n",
		name, arith, tr.NumParams(), batch, T, tokPerSec,
		float64(fwdbwd.Milliseconds())/float64(steps), float64(opt.Microseconds())/1e3/float64(steps), loss)
	flops, n := FLOPsPerToken(cfg, T)
	achieved := tokPerSec * flops / 1e12
	mfu := "MFU - (no -peak-tflops)"
	if o.peakTFLOPs > 0 {
		mfu = fmt.Sprintf("MFU %.3g%% of %g TFLOP/s", 100*achieved/o.peakTFLOPs, o.peakTFLOPs)
	}
	fmt.Fprintf(w, "mfu    %-6s arith=%-4s B=%d microbatch=%d T=%d AdamW steps: %.0f tok/s x %.4g GFLOP/token = %.2f TFLOP/s, %s (FLOP/token = 6N + 12*L*C*T, N=%d matmul parameters, L=%d C=%d T=%d)\n",
		name, arith, batch, cfg.MicroBatch, T, tokPerSec, flops/1e9, achieved, mfu, n, cfg.Layers, cfg.Channels, T)
	f, err := trainer.Footprint(cfg, trainer.FootprintOptions{Optimizer: "adamw", GPU: onGPU, Threads: fpThreads})
	if err != nil {
		return err
	}
	line := fmt.Sprintf("memory %-6s arith=%-4s microbatch=%d footprint (AdamW): %s", name, arith, cfg.MicroBatch, memoryLine(f, onGPU))
	if used != "" {
		line += "; gpu used " + used
	}
	fmt.Fprintln(w, line)
	if o.mask {
		if err := benchMask(ctx, w, tr, o, text); err != nil {
			return err
		}
	}
	if !o.demo {
		return nil
	}
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

// benchMask times forward+backward on fine-tuning batches (each sequence's
// first half Ignore, as a prompt the loss skips) and on pretraining batches
// of the same tokens, alternating, so that drift hits both alike, and prints
// the ratio: masking should cost nothing.
func benchMask(ctx context.Context, w io.Writer, tr *trainer.Trainer, o trainOpts, text []byte) error {
	T := tr.Config().SeqLen
	var plain, masked time.Duration
	for i := range 2 * o.steps {
		tok, tgt := trainer.Window(text, (i/2)*o.batch*T, o.batch, T)
		if i%2 == 1 {
			for j := range tgt {
				if j%T < T/2 {
					tgt[j] = trainer.Ignore
				}
			}
		}
		t0 := time.Now()
		if _, err := tr.Step(ctx, tok, tgt, T); err != nil {
			return err
		}
		if i%2 == 1 {
			masked += time.Since(t0)
		} else {
			plain += time.Since(t0)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(o.steps) }
	fmt.Fprintf(w, "mask   %-6s arith=%-4s B=%d T=%d fwd+bwd: pretraining %.1f ms/step, fine-tuning (half the targets trained) %.1f ms/step: %.3fx (%d of each, interleaved)\n",
		o.name, o.arith, o.batch, T, per(plain), per(masked), masked.Seconds()/plain.Seconds(), o.steps)
	return nil
}
