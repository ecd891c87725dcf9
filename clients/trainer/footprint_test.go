package trainer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// footprintCase is a way of training that the footprint tests run for
// real: an optimizer with its settings, as FootprintOptions says it.
type footprintCase struct {
	name string
	opt  FootprintOptions
	demo DeMo
	loco SparseLoCo
}

// footprintCases cover every optimizer buffer: AdamW's moments; DeMo's
// momentum with the lookahead point, and with overlap's pending update,
// at a small k and at one past TRK_TOPK_SMALL (the GPU's merge sort
// indices); SparseLoCo's error feedback and round start, with and without
// overlap. Applies take two payloads, so that decoded entries scale.
func footprintCases() []footprintCase {
	demoOverlap := DeMo{LR: 1e-3, Decay: 0.9, Chunk: 64, TopK: 100, Overlap: true}
	locoOverlap := withBits(tinyLoCo, 8)
	locoOverlap.Overlap, locoOverlap.Members = true, 2
	return []footprintCase{
		{name: "adamw", opt: FootprintOptions{Optimizer: "adamw"}},
		{name: "demo", opt: FootprintOptions{Optimizer: "demo", Lookahead: true, Chunk: testDeMo.Chunk, TopK: testDeMo.TopK, Payloads: 2}, demo: testDeMo},
		{name: "demo-overlap", opt: FootprintOptions{Optimizer: "demo", Overlap: true, Chunk: 64, TopK: 100, Payloads: 2}, demo: demoOverlap},
		{name: "sparseloco", opt: FootprintOptions{Optimizer: "sparseloco", Chunk: tinyLoCo.Chunk, TopK: tinyLoCo.TopK, Payloads: 2}, loco: tinyLoCo},
		{name: "sparseloco-overlap", opt: FootprintOptions{Optimizer: "sparseloco", Overlap: true, Chunk: tinyLoCo.Chunk, TopK: tinyLoCo.TopK, Payloads: 2},
			loco: locoOverlap},
	}
}

// trainFootprint runs c's optimizer until every buffer it keeps exists: a
// step and an optimizer step (AdamW), two (DeMo: generate and apply), and
// for SparseLoCo two rounds, the second beginning with AdamW moments to
// save. Each call goes through call (nil: called as it is).
func trainFootprint(t *testing.T, tr *Trainer, c footprintCase, call func(what string, f func() error)) {
	t.Helper()
	if call == nil {
		call = func(_ string, f func() error) {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	text := textFor(tr.Config(), 3, 256)
	stepAt := func(s int) func() error {
		return func() error {
			tok, tgt := Window(text, 16*s, 2, 8)
			_, err := tr.Step(context.Background(), tok, tgt, 8)
			return err
		}
	}
	var p []byte
	generate := func(gen func() ([]byte, error)) func() error {
		return func() (err error) {
			p, err = gen()
			return err
		}
	}
	switch c.opt.Optimizer {
	case "adamw":
		call("step", stepAt(0))
		call("AdamW", func() error { return tr.AdamWStep(testAdamW) })
	case "demo":
		for s := range 2 {
			call("step", stepAt(s))
			call("DeMo generate", generate(func() ([]byte, error) { return tr.DeMoGenerate(c.demo) }))
			call("DeMo apply", func() error { return tr.DeMoApply(c.demo, [][]byte{p, p}) })
		}
	case "sparseloco":
		for r := range 2 {
			call("LoCo begin", tr.LoCoBegin)
			call("step", stepAt(r))
			call("inner AdamW", func() error { return tr.AdamWStep(testAdamW) })
			call("LoCo generate", generate(func() ([]byte, error) { return tr.LoCoGenerate(c.loco) }))
			call("LoCo apply", func() error { return tr.LoCoApply(c.loco, [][]byte{p, p}) })
		}
	}
}

// footprintThreads is the thread count the footprint tests set: above
// the processors of a 2-core machine, so the per-thread scratch grows
// past what New gave it.
const footprintThreads = 3

// footprintConfigs are the tiny models of both architectures in both
// numeric contracts.
func footprintConfigs() []Config {
	var out []Config
	for _, cfg := range []Config{tinyConfig, tinyLlama} {
		for _, arith := range []string{ArithFP32, ArithMX8} {
			c := cfg
			c.Arith, c.Name = arith, cfg.Name+"-"+arith
			out = append(out, c)
		}
	}
	// The shard tree's buffers (layout.h), and activation recompute (one
	// layer's and the residual stream on the GPU; the CPU's are unchanged).
	c := tinyLlama
	c.GradShards, c.Name = 4, tinyLlama.Name+"-shards4"
	r := tinyConfig
	r.Layers, r.Recompute, r.Name = 3, true, tinyConfig.Name+"-recompute3"
	return append(out, c, r)
}

// measureHost runs New and c's training and returns the host bytes malloc
// then holds for the trainer, with the trainer (closed by the caller). The
// same run goes first once, untimed, so that what OpenMP, glibc and cgo
// set up once per thread (thread pools and their teams, arenas, caches) is
// there before the count starts. The caller locks its OS thread: OpenMP
// keeps a pool per thread that starts parallel regions.
func measureHost(t *testing.T, cfg Config, c footprintCase, gpu bool) (int64, *Trainer) {
	t.Helper()
	run := func() *Trainer {
		tr := footprintTrainer(t, cfg, gpu)
		trainFootprint(t, tr, c, nil)
		return tr
	}
	warm := run()
	if err := warm.Close(); err != nil {
		t.Fatal(err)
	}
	before := heapBytes()
	if before < 0 {
		t.Fatal("no mallinfo2: the footprint tests need glibc 2.33 or later")
	}
	tr := run()
	return heapBytes() - before, tr
}

// footprintTrainer is a trainer of cfg on footprintThreads threads, on the
// emulated GPU when gpu is set, else on the CPU path with no device in any
// build.
func footprintTrainer(t *testing.T, cfg Config, gpu bool) *Trainer {
	t.Helper()
	tr, err := create(cfg, 7, gpu)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetThreads(footprintThreads); err != nil {
		t.Fatal(err)
	}
	if gpu {
		if err := tr.SetGPU(true); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// Host slack allowed above the footprint: malloc's own overhead, and the
// model struct. glibc rounds a chunk up to 16 bytes with an 8-byte header
// (at most 24 bytes more than asked), and maps the buffers above its mmap
// threshold (128 KiB at first; here the GEMM pack buffers) in whole pages
// with a 16-byte header (at most 4111 more); the model struct is 3.2 KiB,
// and about 40 buffers are live. So 8 KiB: half the smallest
// parameter-sized buffer of the tiny models (4 KiB parameters, 16 KiB a
// buffer), so that a parameter-sized buffer missing or counted twice
// fails, as does any activation buffer set or the mx8 scratch.
const footprintHostSlack = 8 << 10

// What a trainer holds in host memory after training (creation, a step
// and its optimizer's calls) is what Footprint says, to the allocator's
// overhead: both architectures, fp32 and mx8, every optimizer buffer, and
// per-thread scratch grown past the processors' count.
func TestFootprintMatchesHostAllocations(t *testing.T) {
	for _, cfg := range footprintConfigs() {
		for _, c := range footprintCases() {
			t.Run(cfg.Name+"/"+c.name, func(t *testing.T) {
				runtime.LockOSThread() // one OpenMP pool (measureHost)
				defer runtime.UnlockOSThread()
				got, tr := measureHost(t, cfg, c, false)
				opt := c.opt
				opt.Threads = max(defaultThreads(), footprintThreads)
				fp, err := Footprint(cfg, opt)
				if err != nil {
					t.Fatal(err)
				}
				want := fp.OnHost.Steady()
				if got < want || got > want+footprintHostSlack || fp.Device() != 0 {
					t.Errorf("host: malloc holds %d bytes, Footprint says %d (%+d; slack %d); device %d\n%+v",
						got, want, got-want, footprintHostSlack, fp.Device(), fp.OnHost)
				}
				t.Logf("malloc holds %d bytes, Footprint %d (%+d)", got, want, got-want)
				before := heapBytes() - got
				if err := tr.Close(); err != nil {
					t.Fatal(err)
				}
				// Close gives it all back, so nothing above leaks across cases.
				if left := heapBytes() - before; left < -footprintHostSlack || left > footprintHostSlack {
					t.Errorf("%d bytes still held after Close", left)
				}
			})
		}
	}
}

// Footprint on the named configs: the parameter counts the README gives,
// and totals that follow from the options (each optimizer adds its
// parameter-sized buffers, the GPU path adds device memory and keeps the
// host's), and an error naming the field for each bad option.
func TestFootprintNamedConfigs(t *testing.T) {
	params := map[string]int64{"light": 842496, "gpt2-124m": 124475904}
	for _, name := range ConfigNames() {
		cfg, err := ConfigByName(name)
		if err != nil {
			t.Fatal(err)
		}
		n := cfg.Params()
		if want, ok := params[name]; ok && n != want {
			t.Errorf("%s: Params %d, want %d", name, n, want)
		}
		base := map[bool]MemoryFootprint{}
		for _, gpu := range []bool{false, true} {
			for _, c := range []struct {
				opt   FootprintOptions
				state int64 // optimizer buffers of N floats
			}{
				{FootprintOptions{Optimizer: "adamw"}, 2},
				{FootprintOptions{Optimizer: "demo"}, 1},
				{FootprintOptions{Optimizer: "demo", Lookahead: true}, 2},
				{FootprintOptions{Optimizer: "demo", Overlap: true, Payloads: 8}, 3},
				{FootprintOptions{Optimizer: "sparseloco"}, 6},
				{FootprintOptions{Optimizer: "sparseloco", Overlap: true, TopK: 6}, 7},
			} {
				c.opt.GPU, c.opt.Threads = gpu, 4
				fp, err := Footprint(cfg, c.opt)
				if err != nil {
					t.Fatalf("%s %+v: %v", name, c.opt, err)
				}
				h, d := fp.OnHost, fp.OnDevice
				where := fmt.Sprintf("%s %+v", name, c.opt)
				switch {
				case h.Weights != 4*n || h.Optimizer != c.state*4*n || h.Gradients < 4*n || (h.Activations <= 0) != gpu || h.Scratch <= 0:
					t.Errorf("%s: host %+v", where, h)
				case (h.MX8 != 0) != (cfg.IsMX8() && !gpu):
					t.Errorf("%s: host mx8 %d", where, h.MX8)
				case !gpu && fp.Device() != 0:
					t.Errorf("%s: device %d on the CPU path", where, fp.Device())
				case gpu && (d.Weights != h.Weights || d.Gradients != h.Gradients || d.Optimizer != h.Optimizer ||
					d.Activations <= 0 || d.Transient != 0):
					t.Errorf("%s: device %+v against host %+v", where, d, h)
				case fp.Host() != h.Steady()+h.Transient || fp.Device() != d.Steady():
					t.Errorf("%s: totals %d and %d", where, fp.Host(), fp.Device())
				}
				if c.opt.Optimizer == "adamw" {
					base[gpu] = fp
				}
			}
		}
		// The GPU path drops the CPU path's activations from the host.
		if cpu, gpu := base[false].OnHost, base[true].OnHost; gpu.Steady() >= cpu.Steady() || gpu.Activations != 0 || cpu.Activations <= 0 {
			t.Errorf("%s: host %+v on the GPU path, %+v on the CPU's", name, gpu, cpu)
		}
	}
	for _, c := range []struct {
		opt  FootprintOptions
		cfg  Config
		want string
	}{
		{FootprintOptions{Optimizer: "sgd"}, tinyConfig, "Optimizer"},
		{FootprintOptions{}, tinyConfig, "Optimizer"},
		{FootprintOptions{Optimizer: "adamw", Threads: -1}, tinyConfig, "Threads"},
		{FootprintOptions{Optimizer: "adamw", Threads: 257}, tinyConfig, "Threads"},
		{FootprintOptions{Optimizer: "adamw", Overlap: true}, tinyConfig, "Overlap"},
		{FootprintOptions{Optimizer: "adamw", TopK: 8}, tinyConfig, "TopK"},
		{FootprintOptions{Optimizer: "demo", Chunk: 257}, tinyConfig, "Chunk"},
		{FootprintOptions{Optimizer: "demo", Chunk: -1}, tinyConfig, "Chunk"},
		{FootprintOptions{Optimizer: "demo", TopK: 65536}, tinyConfig, "TopK"},
		{FootprintOptions{Optimizer: "sparseloco", Payloads: -2}, tinyConfig, "Payloads"},
		{FootprintOptions{Optimizer: "demo", Lookahead: true, Overlap: true}, tinyConfig, "Lookahead"},
		{FootprintOptions{Optimizer: "sparseloco", Lookahead: true}, tinyConfig, "Lookahead"},
		{FootprintOptions{Optimizer: "adamw"}, Config{Vocab: 1}, "vocab"},
		{FootprintOptions{Optimizer: "adamw"}, Config{Vocab: 1 << 24, PaddedVocab: 1 << 24, Layers: 1024, Channels: 65536, Heads: 1,
			SeqLen: 65536, MicroBatch: 65536}, "64 bits"},
	} {
		_, err := Footprint(c.cfg, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Footprint(%+v): %v, want an error naming %s", c.opt, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Footprint(%+v): %v is not ErrInvalid", c.opt, err)
		}
	}
	if (Config{}).Params() != 0 {
		t.Error("Params of an invalid config is not 0")
	}
}

// The figures README.md ("Memory") gives: DeMo at the run configs' chunk
// and top-k, 8 payloads an apply, 16 threads; host and device peaks.
func TestFootprintREADMEFigures(t *testing.T) {
	for _, c := range []struct {
		name                        string
		cpuHost, gpuHost, gpuDevice int64
	}{
		{"light", 96584840, 37775160, 64904376},
		{"small", 656003368, 164002144, 578817920},
		{"gpt2-124m", 4237839496, 1742127832, 3707989336},
	} {
		cfg, err := ConfigByName(c.name)
		if err != nil {
			t.Fatal(err)
		}
		opt := FootprintOptions{Optimizer: "demo", Threads: 16, Payloads: 8}
		cpu, err := Footprint(cfg, opt)
		if err != nil {
			t.Fatal(err)
		}
		opt.GPU = true
		gpu, err := Footprint(cfg, opt)
		if err != nil {
			t.Fatal(err)
		}
		if cpu.Host() != c.cpuHost || gpu.Host() != c.gpuHost || gpu.Device() != c.gpuDevice {
			t.Errorf("%s: CPU host %d, GPU host %d and device %d; README.md says %d, %d and %d",
				c.name, cpu.Host(), gpu.Host(), gpu.Device(), c.cpuHost, c.gpuHost, c.gpuDevice)
		}
		t.Logf("%s: CPU host %.1f MiB %+v; GPU host %.1f MiB, device %.1f MiB %+v", c.name, mib(cpu.Host()), cpu.OnHost,
			mib(gpu.Host()), mib(gpu.Device()), gpu.OnDevice)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// A config that passes Validate but sizes its buffers beyond 64 bits is
// refused by New before anything is allocated (tr_create's sizes would wrap).
func TestNewRefusesSizesBeyond64Bits(t *testing.T) {
	huge := Config{Name: "huge", Vocab: 256, PaddedVocab: 256, Layers: 1024, Channels: 65536, Heads: 1, SeqLen: 65536, MicroBatch: 65536}
	if err := huge.Validate(); err != nil {
		t.Fatalf("the config must pass Validate for this test: %v", err)
	}
	if tr, err := New(huge, 1); err == nil || !errors.Is(err, ErrInvalid) {
		if tr != nil {
			tr.Close()
		}
		t.Fatalf("New: %v, want ErrInvalid", err)
	}
}
