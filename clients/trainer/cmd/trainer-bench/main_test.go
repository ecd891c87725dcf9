package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

func TestFLOPsPerToken(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"gpt2-124m", 124475904 - 1024*768}, // less wpe
		{"llama-1.1b", 1071998976},          // tied: wte counts once, as the lm-head
	} {
		cfg, err := trainer.ConfigByName(c.name)
		if err != nil {
			t.Fatal(err)
		}
		f, n := FLOPsPerToken(cfg, cfg.SeqLen)
		want := 6*float64(c.n) + 12*float64(cfg.Layers)*float64(cfg.Channels)*float64(cfg.SeqLen)
		if n != c.n || f != want {
			t.Errorf("%s: FLOPsPerToken = %g, N %d; want %g, N %d", c.name, f, n, want, c.n)
		}
	}
	cfg, _ := trainer.ConfigByName("llama-light")
	cfg.Untied = true
	if _, n := FLOPsPerToken(cfg, 64); n != cfg.Params()-int64(cfg.PaddedVocab*cfg.Channels) {
		t.Errorf("untied llama-light: N %d, want the parameters less the input embedding", n)
	}
}

func TestFitAndMemoryLines(t *testing.T) {
	var out bytes.Buffer
	// llama-1.1b in mx8, 4 sequences: micro-batch 2 takes about 52 GiB
	// (GPU or host), 4 about 88.
	args := []string{"-gemm=false", "-configs", "llama-1.1b", "-arith", "mx8", "-batch", "4", "-steps", "0", "-fit-gib", "77.6"}
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "fit    llama-1.1b arith=mx8  B=4 T=2048 limit 77.60 GiB") || !strings.Contains(s, " microbatch=2 (") ||
		!strings.Contains(s, "memory llama-1.1b arith=mx8  microbatch=2 footprint (AdamW): ") {
		t.Errorf("output:\n%s", s)
	}
	if err := run(context.Background(), []string{"-gemm=false", "-configs", "llama-1.1b", "-steps", "0", "-fit-gib", "1"}, &out); err == nil {
		t.Error("-fit-gib 1 for llama-1.1b: no error")
	}
	for _, bad := range [][]string{{"-fit-gib", "10", "-microbatch", "2"}, {"-steps", "-1"}, {"-peak-tflops", "-1"}, {"extra"}} {
		if err := run(context.Background(), append([]string{"-gemm=false", "-configs", ""}, bad...), &out); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestTrainLines(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-gemm=false", "-configs", "light", "-arith", "fp32", "-steps", "1", "-batch", "2", "-threads", "1", "-demo=false", "-peak-tflops", "1"}
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"train light  arith=fp32 params=842496 B=2 T=128 adamw: ",
		"mfu    light  arith=fp32 B=2 microbatch=8 T=128 AdamW steps: ",
		"% of 1 TFLOP/s (FLOP/token = 6N + 12*L*C*T, N=826112 matmul parameters, L=4 C=128 T=128)",
		"memory light  arith=fp32 microbatch=8 footprint (AdamW): ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in the output:\n%s", want, s)
		}
	}
	if strings.Contains(s, "demo:") || strings.Contains(s, "payload") {
		t.Errorf("-demo=false printed DeMo lines:\n%s", s)
	}
}

func TestFitMicroBatchGPU(t *testing.T) {
	cfg, _ := trainer.ConfigByName("llama-1.1b")
	cfg.Arith = trainer.ArithMX8
	fp := func(mb int, gpu bool) float64 {
		c := cfg
		c.MicroBatch = mb
		f, err := trainer.Footprint(c, trainer.FootprintOptions{Optimizer: "adamw", GPU: gpu, Threads: 16})
		if err != nil {
			t.Fatal(err)
		}
		if gpu {
			return float64(f.Device())
		}
		return float64(f.Host())
	}
	for _, c := range []struct {
		limit, hostLimit float64
		want             int
	}{
		{fp(8, true), 0, 8},
		{fp(8, true) - 1, 0, 4},
		{fp(4, true), 0, 4},
		{fp(8, true), fp(8, false), 8},
		{fp(8, true), fp(8, false) - 1, 4}, // New's host peak
		{fp(8, true), fp(2, false), 2},
	} {
		mb, need, _, err := fitMicroBatch(cfg, 8, 16, true, c.limit, c.hostLimit)
		if err != nil || mb != c.want || float64(need) != fp(c.want, true) {
			t.Errorf("limit %.0f, host %.0f: micro-batch %d (%d bytes, %v), want %d", c.limit, c.hostLimit, mb, need, err, c.want)
		}
	}
	if _, _, why, err := fitMicroBatch(cfg, 8, 16, true, fp(1, true)-1, 0); err == nil || why != "" {
		t.Errorf("nothing fits: err %v", err)
	}
}
