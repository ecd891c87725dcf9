//go:build cuda || cudaemu

package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestGPUParallelMatchesCPU: a trainer whose steps are spread over groups
// of devices, data x tensor parallelism 1x1, 2x1, 1x2, 2x2, 4x1 and 1x4
// (4 gradient shards; emulated devices under cudaemu, logical devices on
// GPU 0 on a real GPU), gives the CPU's losses, gradients and states at
// every step of AdamW and of DeMo with its lookahead (so the peers get the
// new weights, and the lookahead point, after each optimizer step), over 6
// sequences (shards of 1, 2, 1, 2) and 3 (one shard empty); both
// architectures, the Llama also with Qwen2's q/k/v biases (whose slices
// follow the GEMMs' split columns), fp32 and mx8 (whose operands are
// quantized per row, so a GEMM split along N quantizes the same blocks).
func TestGPUParallelMatchesCPU(t *testing.T) {
	useDevices(t, 4)
	for _, base := range []Config{tinyConfig, tinyLlama, tinyQwen2} {
		for _, arith := range []string{ArithFP32, ArithMX8} {
			cfg := base
			cfg.GradShards, cfg.MicroBatch, cfg.Arith = 4, 2, arith
			want := dataParallelScript(t, newTrainer(t, cfg, 41))
			for _, c := range []struct {
				ids    []int
				tensor int
			}{{[]int{0}, 1}, {[]int{0, 1}, 1}, {[]int{0, 1}, 2}, {[]int{0, 1, 2, 3}, 2}, {[]int{0, 1, 2, 3}, 1}, {[]int{3, 2, 1, 0}, 4}, {[]int{2, 3}, 1}} {
				if arith == ArithMX8 && len(c.ids) == 4 && c.tensor != 2 {
					continue // 2x2 covers mx8's groups and joins; the emulation is slow
				}
				if base.QKVBias && c.tensor == 1 && len(c.ids) > 1 {
					continue // data parallelism joins the biases as any tensor: tinyLlama covers it
				}
				t.Run(fmt.Sprintf("%s/%s/devices%v/tensor%d", cfg.Name, arith, c.ids, c.tensor), func(t *testing.T) {
					tr := newTrainer(t, cfg, 41)
					if err := tr.SetDevices(logical(c.ids), c.tensor); err != nil {
						t.Fatal(err)
					}
					got := dataParallelScript(t, tr)
					for i := range want {
						if got[i].sum != want[i].sum {
							t.Fatalf("after %q: devices %v tensor %d %x, CPU %x", want[i].op, c.ids, c.tensor, got[i].sum[:8], want[i].sum[:8])
						}
					}
				})
			}
		}
	}
}

// TestGPURecomputeMatchesCPU: with activation recompute (Config.Recompute:
// the GPU keeps each layer's input and runs the layer's forward again in
// backward) a 3-layer model of either architecture, fp32 and mx8, gives the
// CPU's bits, on one device and on a 2 x 2 split. One Llama has Llama 3.1's
// knobs (RMSNorm epsilon 1e-6, scaled rotary frequencies): the GPU's
// RMSNorm takes the config's epsilon; the other Qwen2's q/k/v biases.
func TestGPURecomputeMatchesCPU(t *testing.T) {
	useDevices(t, 4)
	llama3 := tinyLlama
	llama3.Knobs = Knobs{RMSNormEps: 1e-6, RopeScaling: RopeLlama3, RopeFactor: 8, RopeLowFreq: 1, RopeHighFreq: 4, RopeOrigCtx: 32}
	for _, base := range []Config{tinyConfig, llama3, tinyQwen2} {
		for _, arith := range []string{ArithFP32, ArithMX8} {
			cfg := base
			cfg.Layers, cfg.GradShards, cfg.MicroBatch, cfg.Arith = 3, 4, 2, arith
			want := dataParallelScript(t, newTrainer(t, cfg, 43))
			cfg.Recompute = true
			for _, split := range [][2]int{{1, 1}, {2, 2}} {
				t.Run(fmt.Sprintf("%s/%s/%dx%d", cfg.Name, arith, split[0], split[1]), func(t *testing.T) {
					tr := newTrainer(t, cfg, 43)
					if err := tr.SetDevices(logical([]int{0, 1, 2, 3}[:split[0]*split[1]]), split[1]); err != nil {
						t.Fatal(err)
					}
					got := dataParallelScript(t, tr)
					for i := range want {
						if got[i].sum != want[i].sum {
							t.Fatalf("after %q: recompute %x, CPU without %x", want[i].op, got[i].sum[:8], want[i].sum[:8])
						}
					}
				})
			}
		}
	}
}

// TestGPUParallelBadDevices: devices that do not exist, a group count that
// is not a power of two or does not divide the shards, and a tensor
// parallelism that does not divide the devices or is out of range are
// refused, and the trainer goes on where it was, with the same bits.
func TestGPUParallelBadDevices(t *testing.T) {
	useDevices(t, 4)
	cfg := tinyLlama
	cfg.GradShards = 2
	tr := newTrainer(t, cfg, 41)
	if err := tr.SetDevices(logical([]int{1}), 1); err != nil {
		t.Fatal(err)
	}
	backend := tr.Backend()
	for _, c := range []struct {
		ids    []int
		tensor int
	}{{nil, 1}, {make([]int, 65), 1}, {[]int{GPUCount()}, 1}, {[]int{-1}, 1}, {[]int{0, 0, 0}, 1}, {[]int{0, 0, 0, 0}, 1}, {[]int{0, 0, 0}, 2},
		{[]int{0, 0, 0, 0, 0, 0}, 2}, {[]int{0}, 0}, {[]int{0, 0, 0, 0, 0, 0, 0, 0, 0}, 9}, {[]int{0, 0, 0, 0, 0, 0, 0, 0}, 2}} {
		if err := tr.SetDevices(c.ids, c.tensor); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetDevices(%v, %d): %v, want ErrInvalid", c.ids, c.tensor, err)
		} else {
			t.Logf("SetDevices(%v, %d): %v", c.ids, c.tensor, err)
		}
	}
	if got := tr.Backend(); got != backend {
		t.Errorf("after the refusals the backend is %q, was %q", got, backend)
	}
	cpu := newTrainer(t, cfg, 41)
	if err := cpu.SetGPU(false); err != nil {
		t.Fatal(err)
	}
	got, want := dataParallelScript(t, tr), dataParallelScript(t, cpu)
	for i := range want {
		if got[i].sum != want[i].sum {
			t.Fatalf("after %q: %x, CPU %x", want[i].op, got[i].sum[:8], want[i].sum[:8])
		}
	}
}

// useDevices gives the emulation n devices for the test; on a real GPU the
// test names device 0 several times (logical devices), so it needs none.
func useDevices(t *testing.T, n int) {
	if !emulatedGPU {
		if err := GPUAvailable(); err != nil {
			t.Skip(err)
		}
		return
	}
	setEmulatedDevices(n)
	t.Cleanup(func() { setEmulatedDevices(1) })
}

// logical is ids on the emulation, and as many logical devices on GPU 0 on
// a real GPU.
func logical(ids []int) []int {
	if emulatedGPU {
		return ids
	}
	return make([]int, len(ids))
}

func dataParallelScript(t *testing.T, tr *Trainer) []residencyResult {
	t.Helper()
	cfg := tr.Config()
	text := textFor(cfg, 7, 8*64+1)
	var out []residencyResult
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	pos := 0
	train := func(n int) {
		t.Helper()
		var mask func(int) bool
		if n == 3 { // a fine-tuning batch: targets its loss mask leaves out are Ignore
			mask = func(i int) bool { return i%8 >= 3 && i != 13 }
		}
		loss := maskedStep(t, tr, text, pos, n, 8, mask)
		pos += n * 8
		g, err := tr.Grads()
		must("Grads", err)
		h := sha256.New()
		binary.Write(h, binary.LittleEndian, math.Float32bits(loss))
		binary.Write(h, binary.LittleEndian, g)
		out = append(out, residencyResult{fmt.Sprintf("step of %d", n), [32]byte(h.Sum(nil))})
	}
	for _, n := range []int{6, 3} {
		train(n)
		must("AdamW", tr.AdamWStep(AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}))
		out = append(out, residencyResult{"AdamW", digest(t, tr, nil)})
	}
	hp := DeMo{LR: 1e-3, Decay: 0.999, Chunk: 16, TopK: 8, OneBit: true, Lookahead: true}
	for range 2 {
		train(6)
		p, err := tr.DeMoGenerate(hp)
		must("DeMoGenerate", err)
		must("DeMoApply", tr.DeMoApply(hp, [][]byte{p}))
		out = append(out, residencyResult{"DeMo", digest(t, tr, p)})
	}
	return out
}
