//go:build cuda

package trainer

import (
	"math"
	"testing"
)

// gpuTrainer returns a trainer on the GPU, or skips when there is none.
func gpuTrainer(t *testing.T, cfg Config, seed uint64) *Trainer {
	t.Helper()
	tr := newTrainer(t, cfg, seed)
	if err := tr.SetGPU(true); err != nil {
		t.Skipf("no GPU: %v", err)
	}
	return tr
}

// GPU gradients agree with the CPU's within 1e-4 (relative L2 per tensor).
func TestGPUGradientsMatchCPU(t *testing.T) {
	for _, name := range []string{"light", "small"} {
		cfg, err := ConfigByName(name)
		if err != nil {
			t.Fatal(err)
		}
		gpu := gpuTrainer(t, cfg, 3)
		cpu := newTrainer(t, cfg, 3)
		if err := cpu.SetGPU(false); err != nil {
			t.Fatal(err)
		}
		text := MarkovText(4, 4*cfg.SeqLen+1)
		lg := step(t, gpu, text, 0, 4, cfg.SeqLen)
		lc := step(t, cpu, text, 0, 4, cfg.SeqLen)
		if d := math.Abs(float64(lg-lc)) / float64(lc); d > 1e-5 {
			t.Errorf("%s: loss GPU %v CPU %v", name, lg, lc)
		}
		gg, _ := gpu.Grads()
		gc, _ := cpu.Grads()
		tensors, _ := cpu.Tensors()
		for _, ts := range tensors {
			var num, den float64
			for i := ts.Offset; i < ts.Offset+ts.Size; i++ {
				d := float64(gg[i] - gc[i])
				num += d * d
				den += float64(gc[i]) * float64(gc[i])
			}
			rel := math.Sqrt(num / den)
			t.Logf("%s %-9s relative L2 difference %.2g", name, ts.Name, rel)
			if rel > 1e-4 {
				t.Errorf("%s %s: GPU gradient differs from CPU by %.3g (relative L2)", name, ts.Name, rel)
			}
		}
	}
}

// Two GPU runs give the same digests, step after step.
func TestGPURunsBitIdentical(t *testing.T) {
	cfg := lightConfig(t)
	text := MarkovText(5, 4*2*64+1)
	var ref [][32]byte
	for run := range 2 {
		tr := gpuTrainer(t, cfg, 11)
		ds := append(runSteps(t, tr, "demo", text, 0, 2, 2, 64), runSteps(t, tr, "adamw", text, 2, 2, 2, 64)...)
		if run == 0 {
			ref = ds
			continue
		}
		for i := range ds {
			if ds[i] != ref[i] {
				t.Fatalf("step %d: second GPU run digest %x, first %x", i, ds[i][:8], ref[i][:8])
			}
		}
	}
}
