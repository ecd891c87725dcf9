//go:build cuda

package trainer

import (
	"math"
	"os"
	"strings"
	"testing"
)

// The GPU computes the CPU's bits (numeric contracts v2 and v3): the loss
// and every gradient entry of a step over several micro-batches, the last
// partial. PSYCHE_GPU_TEST_CONFIGS (comma-separated; NAME:mx8 for contract
// v3) replaces the configs compared; scripts/gpu-check.sh adds gpt2-124m.
func TestGPUGradientsMatchCPU(t *testing.T) {
	names := []string{"light", "small", "light:mx8"}
	if s := os.Getenv("PSYCHE_GPU_TEST_CONFIGS"); s != "" {
		names = strings.Split(s, ",")
	}
	for _, name := range names {
		base, arith, _ := strings.Cut(name, ":")
		cfg, err := ConfigByName(base)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MicroBatch, cfg.Arith = 2, arith
		gpu := gpuTrainer(t, cfg, 3)
		cpu := newTrainer(t, cfg, 3)
		if err := cpu.SetGPU(false); err != nil {
			t.Fatal(err)
		}
		text := MarkovText(4, 5*cfg.SeqLen+1)
		lg := step(t, gpu, text, 0, 5, cfg.SeqLen)
		lc := step(t, cpu, text, 0, 5, cfg.SeqLen)
		if math.Float32bits(lg) != math.Float32bits(lc) {
			t.Errorf("%s: loss GPU %v CPU %v", name, lg, lc)
		}
		gg, _ := gpu.Grads()
		gc, _ := cpu.Grads()
		tensors, _ := cpu.Tensors()
		for _, ts := range tensors {
			diff := 0
			for i := ts.Offset; i < ts.Offset+ts.Size; i++ {
				if math.Float32bits(gg[i]) != math.Float32bits(gc[i]) {
					diff++
				}
			}
			if diff > 0 {
				t.Errorf("%s %s: %d of %d gradient entries differ between GPU and CPU", name, ts.Name, diff, ts.Size)
			}
		}
		t.Logf("%s: %d gradient entries compared, loss %v", name, len(gc), lc)
	}
}

// Training on the GPU and on the CPU gives the same state digests, step
// after step, with DeMo and with AdamW (both on the device, the weights and
// optimizer state staying there between steps), in fp32 and in mx8.
func TestGPUDigestsMatchCPU(t *testing.T) {
	for _, arith := range []string{ArithFP32, ArithMX8} {
		cfg := lightConfig(t)
		cfg.Arith = arith
		text := MarkovText(5, 6*2*64+1)
		gpu := gpuTrainer(t, cfg, 11)
		cpu := newTrainer(t, cfg, 11)
		if err := cpu.SetGPU(false); err != nil {
			t.Fatal(err)
		}
		dg := append(runSteps(t, gpu, "demo", text, 0, 2, 2, 64), runSteps(t, gpu, "adamw", text, 2, 4, 2, 64)...)
		dc := append(runSteps(t, cpu, "demo", text, 0, 2, 2, 64), runSteps(t, cpu, "adamw", text, 2, 4, 2, 64)...)
		for i := range dg {
			if dg[i] != dc[i] {
				t.Fatalf("%s step %d: GPU digest %x, CPU digest %x", arith, i, dg[i][:8], dc[i][:8])
			}
		}
		t.Logf("%s, %d steps: GPU digests equal CPU digests", arith, len(dg))
	}
}
