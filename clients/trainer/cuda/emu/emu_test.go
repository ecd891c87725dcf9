package emu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// The GPU kernels of cuda/model.cu, run by the emulator, give exactly the CPU
// path's bits for a training step: the loss, every activation buffer of the
// forward pass (every layer's) and every gradient entry, for both
// architectures. The odd shapes have a padded vocabulary, rows shorter than
// the 32 reduction lanes and a head size of 8 (Llama: 3 query heads per key
// head, untied); every case spans several micro-batches, the last partial.
func TestGPUKernelsMatchCPU(t *testing.T) {
	named := func(name string) trainer.Config {
		cfg, err := trainer.ConfigByName(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MicroBatch = 2
		return cfg
	}
	odd := trainer.Config{Name: "odd", Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 40, Heads: 5, SeqLen: 24, MicroBatch: 2}
	oddLlama := trainer.Config{Name: "odd-llama", Arch: trainer.ArchLlama, Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 48,
		Heads: 6, KVHeads: 2, Hidden: 72, Untied: true, RopeTheta: 500, SeqLen: 24, MicroBatch: 2}
	// Sequences longer than two of the GEMM's 128-row tiles: causal blocks
	// skipped, and chains that start or end inside a tile.
	long := trainer.Config{Name: "long", Vocab: 61, PaddedVocab: 64, Layers: 1, Channels: 40, Heads: 5, SeqLen: 300, MicroBatch: 1}
	longLlama := oddLlama
	longLlama.Name, longLlama.Layers, longLlama.SeqLen, longLlama.MicroBatch = "long-llama", 1, 300, 1
	// 256 tokens: the attention products take the GEMM's float4 path
	// (gemm_fast: K a multiple of its k tile, aligned rows) across the
	// diagonal's tiles too.
	aligned := long
	aligned.Name = "long-aligned"
	for _, c := range []struct {
		cfg    trainer.Config
		n, seq int
	}{{named("light"), 3, 48}, {odd, 5, 19}, {named("llama-light"), 3, 48}, {oddLlama, 5, 19}, {long, 2, 291}, {longLlama, 2, 291},
		{aligned, 2, 256}} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			compareStep(t, c.cfg, c.n, c.seq)
		})
	}
}

// The same in numeric contract v3 (mx8): the GPU's quantize and int8 GEMM
// kernels (tensor-core mma, emu.h's stand-in) against the CPU's packs and
// VNNI kernels, with sequences that cut blocks (19, 291 tokens) and several
// micro-batches. The long cases cross the GEMM's 128x128 output tiles in
// both directions with partial edge tiles (291 rows by 160 or 136 columns),
// with K of 40 and 136 (2 and 5 blocks, the last one partial), 160 (5
// blocks: the last alone in its stage of 2) and, for the weight gradients,
// 291 tokens (10 blocks, the last partial).
func TestMXGPUKernelsMatchCPU(t *testing.T) {
	mx := func(cfg trainer.Config) trainer.Config {
		cfg.Arith = trainer.ArithMX8
		return cfg
	}
	light, err := trainer.ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	light.MicroBatch = 2
	llama, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	llama.MicroBatch = 2
	odd := trainer.Config{Name: "odd", Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 40, Heads: 5, SeqLen: 24, MicroBatch: 2}
	oddLlama := trainer.Config{Name: "odd-llama", Arch: trainer.ArchLlama, Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 48,
		Heads: 6, KVHeads: 2, Hidden: 72, Untied: true, RopeTheta: 500, SeqLen: 24, MicroBatch: 2}
	long := trainer.Config{Name: "long", Vocab: 61, PaddedVocab: 64, Layers: 1, Channels: 40, Heads: 5, SeqLen: 300, MicroBatch: 1}
	longLlama := oddLlama
	longLlama.Name, longLlama.Layers, longLlama.Hidden, longLlama.SeqLen, longLlama.MicroBatch = "long-llama", 1, 136, 300, 1
	for _, c := range []struct {
		cfg    trainer.Config
		n, seq int
	}{{mx(light), 3, 48}, {mx(odd), 5, 19}, {mx(llama), 3, 48}, {mx(oddLlama), 5, 19}, {mx(long), 2, 291}, {mx(longLlama), 2, 291}} {
		t.Run(c.cfg.Name, func(t *testing.T) {
			compareStep(t, c.cfg, c.n, c.seq)
		})
	}
}

func compareStep(t *testing.T, cfg trainer.Config, n, seq int) {
	cpu, err := trainer.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	w, err := cpu.Params()
	if err != nil {
		t.Fatal(err)
	}
	text := trainer.MarkovText(3, n*seq+1)
	tok, tgt := make([]int32, n*seq), make([]int32, n*seq)
	for i := range tok {
		tok[i], tgt[i] = int32(text[i])%int32(cfg.Vocab), int32(text[i+1])%int32(cfg.Vocab)
	}
	lossCPU, err := cpu.Step(context.Background(), tok, tgt, seq)
	if err != nil {
		t.Fatal(err)
	}
	gradCPU, err := cpu.Grads()
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := New(cfg, len(w))
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	gradGPU, lossGPU, err := gpu.Step(w, tok, tgt, n, seq)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float32bits(lossCPU) != math.Float32bits(lossGPU) {
		t.Errorf("loss: CPU %v, GPU %v", lossCPU, lossGPU)
	}

	last := n - (n-1)/cfg.MicroBatch*cfg.MicroBatch
	bufs := ActivationBuffers(cfg, last, seq)
	end := bufs[len(bufs)-1].Offset + bufs[len(bufs)-1].Size
	actCPU, err := cpu.Activations(end)
	if err != nil {
		t.Fatal(err)
	}
	actGPU, err := gpu.Activations(end)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, b := range bufs {
		if b.Name == "att" { // the GPU keeps one layer's; after backward, layer 0's, recomputed
			b.Size /= cfg.Layers
		}
		compared += b.Size
		if d := differing(actCPU[b.Offset:b.Offset+b.Size], actGPU[b.Offset:b.Offset+b.Size]); d > 0 {
			t.Errorf("activation %s: %d of %d floats differ between CPU and GPU", b.Name, d, b.Size)
		}
	}
	t.Logf("forward: %d activation floats in %d buffers compared", compared, len(bufs))

	tensors, err := cpu.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tensors {
		if d := differing(gradCPU[ts.Offset:ts.Offset+ts.Size], gradGPU[ts.Offset:ts.Offset+ts.Size]); d > 0 {
			t.Errorf("gradient %s: %d of %d entries differ between CPU and GPU", ts.Name, d, ts.Size)
		}
	}
	t.Logf("backward: %d gradient entries in %d tensors compared; loss %v", len(gradCPU), len(tensors), lossCPU)
}

// differing counts the entries whose bits differ.
func differing(a, b []float32) int {
	n := 0
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			n++
		}
	}
	return n
}

// AdamW on the emulated device, its weights, gradients and moments staying
// there across steps, gives the CPU's weights and moments bit for bit (and
// the CPU's loss at every step, so the forward pass reads the updated
// weights): GPT-2 and Llama, weight decay on, clipping active (the tiny
// clip norm), inactive (0, and a norm never reached).
func TestGPUAdamWMatchesCPU(t *testing.T) {
	odd := trainer.Config{Name: "odd", Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 40, Heads: 5, SeqLen: 24, MicroBatch: 2}
	oddLlama := trainer.Config{Name: "odd-llama", Arch: trainer.ArchLlama, Vocab: 61, PaddedVocab: 64, Layers: 2, Channels: 48,
		Heads: 6, KVHeads: 2, Hidden: 72, Untied: true, RopeTheta: 500, SeqLen: 24, MicroBatch: 2}
	hp := trainer.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	for _, cfg := range []trainer.Config{odd, oddLlama} {
		var final [][]float32
		for _, clip := range []float32{1e-3, 0, 1e6} {
			hp.ClipNorm = clip
			t.Run(fmt.Sprintf("%s/clip=%g", cfg.Name, clip), func(t *testing.T) {
				final = append(final, compareAdamW(t, cfg, hp, 4, 3, 19))
			})
		}
		// The clipped run must differ from the others, or clipping was not active.
		if len(final) == 3 && (differing(final[0], final[1]) == 0 || differing(final[1], final[2]) != 0) {
			t.Errorf("%s: clipping active in the wrong runs (%d, %d entries differ)", cfg.Name,
				differing(final[0], final[1]), differing(final[1], final[2]))
		}
	}
}

// compareAdamW trains steps steps of n sequences of seq on the CPU and on
// the emulated device and compares loss, weights and moments; it returns
// the CPU's final weights.
func compareAdamW(t *testing.T, cfg trainer.Config, hp trainer.AdamW, steps, n, seq int) []float32 {
	cpu, err := trainer.New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	w, err := cpu.Params()
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := New(cfg, len(w))
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	zero := make([]float32, len(w))
	for _, up := range []struct {
		buf  int
		data []float32
	}{{Params, w}, {AdamM, zero}, {AdamV, zero}} {
		if err := gpu.Upload(up.buf, up.data); err != nil {
			t.Fatal(err)
		}
	}
	text := trainer.MarkovText(9, steps*n*seq+1)
	for s := range steps {
		tok, tgt := make([]int32, n*seq), make([]int32, n*seq)
		for i := range tok {
			j := s*n*seq + i
			tok[i], tgt[i] = int32(text[j])%int32(cfg.Vocab), int32(text[j+1])%int32(cfg.Vocab)
		}
		lc, err := cpu.Step(context.Background(), tok, tgt, seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := cpu.AdamWStep(hp); err != nil {
			t.Fatal(err)
		}
		lg, err := gpu.Train(tok, tgt, n, seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := gpu.AdamW(hp, uint64(s+1)); err != nil {
			t.Fatal(err)
		}
		if math.Float32bits(lc) != math.Float32bits(lg) {
			t.Errorf("step %d: loss CPU %v, GPU %v", s, lc, lg)
		}
	}
	state, err := cpu.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	N := len(w)
	floats := state[len(state)-3*4*N:] // params, m, v
	var final []float32
	for i, buf := range []int{Params, AdamM, AdamV} {
		got, err := gpu.Download(buf)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, N)
		for k := range want {
			want[k] = math.Float32frombits(binary.LittleEndian.Uint32(floats[4*(i*N+k):]))
		}
		if d := differing(want, got); d > 0 {
			t.Errorf("%s after %d AdamW steps: %d of %d entries differ between CPU and GPU", []string{"weights", "m", "v"}[i], steps, d, N)
		}
		if i == 0 {
			final = want
		}
	}
	t.Logf("%d AdamW steps: %d weights and both moments compared", steps, N)
	return final
}
