//go:build cuda || cudaemu

package trainer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"path/filepath"
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

// The weights, gradients and optimizer state living on the GPU between
// steps change nothing a caller sees: every entry point that reads or
// changes them on the host, between AdamW steps on the device, gives what
// the CPU path gives, as do DeMo and SparseLoCo begun on one side and ended
// on the other. Under the cudaemu tag (no GPU needed) the host's stale copies hold
// NaN, so a missing download fails this too.
func TestGPUResidency(t *testing.T) {
	for _, cfg := range []Config{tinyConfig, tinyLlama, tinyQwen2} {
		t.Run(cfg.Name, func(t *testing.T) {
			gpu := gpuTrainer(t, cfg, 21)
			cpu := newTrainer(t, cfg, 21)
			if err := cpu.SetGPU(false); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			got, want := residencyScript(t, gpu, true, dir), residencyScript(t, cpu, false, dir)
			for i := range want {
				if got[i].sum != want[i].sum {
					t.Fatalf("%s after %q: GPU %x, CPU %x", cfg.Name, want[i].op, got[i].sum[:8], want[i].sum[:8])
				}
			}
			t.Logf("%s: %d results of the GPU trainer equal the CPU's", cfg.Name, len(want))
		})
	}
}

// DeMo and SparseLoCo on the device (generate and apply, with the
// momentum, error feedback and round start resident there) give the CPU's
// payload bytes and state digests, step after step: GPT-2 and Llama light,
// clipping active, one-bit and f32 DeMo values, a small k and the merge
// sort's large k, lookahead on and off, overlapped steps (the pending
// update's lookahead), rounds with and without AdamW
// moments at their start, overlapped rounds (from the own share), and
// applies of two clients' payloads. The first
// two forward/backward passes run on the device, the later ones on the CPU
// (the emulated device runs a step thread by thread), so that gradients
// cross to the device and lookahead points and weights back.
func TestGPUOptimizersMatchCPU(t *testing.T) {
	for _, name := range []string{"light", "llama-light"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ConfigByName(name)
			if err != nil {
				t.Fatal(err)
			}
			gpu := gpuTrainer(t, cfg, 31)
			cpu := newTrainer(t, cfg, 31)
			if err := cpu.SetGPU(false); err != nil {
				t.Fatal(err)
			}
			got, want := optimizerScript(t, gpu, true), optimizerScript(t, cpu, false)
			for i := range want {
				if got[i].sum != want[i].sum {
					t.Fatalf("%s after %q: GPU %x, CPU %x", name, want[i].op, got[i].sum[:8], want[i].sum[:8])
				}
			}
			t.Logf("%s: %d losses, payloads and digests of the GPU trainer equal the CPU's", name, len(want))
		})
	}
}

func optimizerScript(t *testing.T, tr *Trainer, gpu bool) []residencyResult {
	cfg := tr.Config()
	text := textFor(cfg, 5, 64*16+1)
	var out []residencyResult
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	record := func(op string) { out = append(out, residencyResult{op, digest(t, tr, nil)}) }
	s := 0
	train := func() {
		t.Helper()
		onCPU := gpu && s >= 2
		if onCPU {
			must("SetGPU", tr.SetGPU(false))
		}
		loss := step(t, tr, text, s*16, 1, 16)
		if onCPU {
			must("SetGPU", tr.SetGPU(true))
		}
		s++
		out = append(out, residencyResult{"loss", sha256.Sum256(binary.LittleEndian.AppendUint32(nil, math.Float32bits(loss)))})
	}
	payload := func(op string, p []byte, err error) {
		t.Helper()
		must(op, err)
		out = append(out, residencyResult{op + " payload", sha256.Sum256(p)})
		record(op)
	}
	clipped := DeMo{LR: 1e-3, Decay: 0.999, WeightDecay: 0.1, ClipNorm: 1e-3, Chunk: 64, TopK: 8, OneBit: true, Lookahead: true}
	wide := DeMo{LR: 2e-3, Decay: 0.9, ClipNorm: 1e-3, Chunk: 16, TopK: 100}
	var prev []byte
	for i, hp := range []DeMo{clipped, clipped, wide, wide} {
		train()
		p, err := tr.DeMoGenerate(hp)
		payload("DeMoGenerate", p, err)
		ps := [][]byte{p}
		if i%2 == 1 {
			ps = append(ps, prev)
		}
		must("DeMoApply", tr.DeMoApply(hp, ps))
		record("DeMoApply")
		prev = p
	}
	// Overlapped steps: each payload applied one step late, the step in
	// between taken at the pending update's lookahead.
	late := clipped
	late.Lookahead, late.Overlap = false, true
	prev = nil
	for range 3 {
		train()
		p, err := tr.DeMoGenerate(late)
		payload("DeMoGenerate, overlap", p, err)
		if prev != nil {
			must("DeMoApply, overlap", tr.DeMoApply(late, [][]byte{prev}))
			record("DeMoApply, overlap")
		}
		prev = p
	}
	small := SparseLoCo{OuterLR: 0.7, Decay: 0.95, Chunk: 64, TopK: 8, ValueBits: 2}
	large := SparseLoCo{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 80, ValueBits: 32}
	for i, hp := range []SparseLoCo{small, small, large} {
		must("LoCoBegin", tr.LoCoBegin())
		for range 2 {
			train()
			must("AdamW", tr.AdamWStep(testAdamW))
		}
		p, err := tr.LoCoGenerate(hp)
		payload("LoCoGenerate", p, err)
		ps := [][]byte{p}
		if i == 1 {
			ps = append(ps, prev)
		}
		must("LoCoApply", tr.LoCoApply(hp, ps))
		record("LoCoApply")
		prev = p
	}
	// Overlapped rounds: each trains from the weights less the own share of
	// the step to come.
	lateLoCo := small
	lateLoCo.Overlap, lateLoCo.Members = true, 2
	prev = nil
	for range 3 {
		must("LoCoBegin, overlap", tr.LoCoBegin())
		train()
		must("AdamW", tr.AdamWStep(testAdamW))
		p, err := tr.LoCoGenerate(lateLoCo)
		payload("LoCoGenerate, overlap", p, err)
		var ps [][]byte // the previous round's, one round late
		if prev != nil {
			ps = [][]byte{prev}
		}
		must("LoCoApply, overlap", tr.LoCoApply(lateLoCo, ps))
		record("LoCoApply, overlap")
		prev = p
	}
	return out
}

type residencyResult struct {
	op  string
	sum [32]byte
}

// residencyScript runs a fixed sequence of operations on tr, switching to
// the CPU and back on the way when gpu is set, and returns what each left:
// the state digest, or the hash of the floats it returned.
func residencyScript(t *testing.T, tr *Trainer, gpu bool, dir string) []residencyResult {
	cfg := tr.Config()
	text := textFor(cfg, 3, 64*2*cfg.SeqLen+1)
	var out []residencyResult
	s := 0
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	record := func(op string) { out = append(out, residencyResult{op, digest(t, tr, nil)}) }
	floats := func(op string, f []float32, err error) {
		t.Helper()
		must(op, err)
		h := sha256.New()
		for _, v := range f {
			binary.Write(h, binary.LittleEndian, math.Float32bits(v))
		}
		out = append(out, residencyResult{op, [32]byte(h.Sum(nil))})
	}
	train := func() float32 { s++; return step(t, tr, text, s*2*cfg.SeqLen, 2, cfg.SeqLen) }
	adamw := func(op string, hp AdamW) {
		t.Helper()
		loss := train()
		floats(op+" loss", []float32{loss}, nil)
		must(op, tr.AdamWStep(hp))
		record(op)
	}
	// An AdamW step that records nothing: the Digest of record downloads
	// everything, so each read below follows one of these.
	update := func() {
		t.Helper()
		train()
		must("AdamW", tr.AdamWStep(testAdamW))
	}
	setGPU := func(on bool) {
		if gpu {
			must("SetGPU", tr.SetGPU(on))
		}
	}
	noClip := testAdamW
	noClip.ClipNorm = 0
	for range 3 {
		adamw("AdamW, clipped", testAdamW)
	}
	adamw("AdamW, not clipped", noClip)
	train()
	g, err := tr.Grads()
	floats("Grads", g, err)
	must("AdamW after Grads", tr.AdamWStep(testAdamW))
	p, err := tr.Params()
	floats("Params", p, err)
	tok, tgt := Window(text, 0, 2, cfg.SeqLen)
	update()
	loss, err := tr.Eval(context.Background(), tok, tgt, cfg.SeqLen)
	floats("Eval", []float32{loss}, err)
	update()
	logits, err := tr.Logits(context.Background(), tok, cfg.SeqLen)
	floats("Logits", logits, err)
	must("DecodeReset", tr.DecodeReset())
	update()
	next, err := tr.DecodeNext(tok[0])
	floats("DecodeNext", next, err)
	update()
	state, err := tr.ExportState()
	floats("ExportState", []float32{float32(len(state))}, err)
	out = append(out, residencyResult{"ExportState blob", sha256.Sum256(state)})

	// DeMo on the device, a step at its lookahead, then AdamW on the device again.
	for range 2 {
		train()
		payload, err := tr.DeMoGenerate(testDeMo)
		must("DeMo generate", err)
		must("DeMo apply", tr.DeMoApply(testDeMo, [][]byte{payload}))
		record("DeMo")
	}
	adamw("AdamW after DeMo's lookahead", testAdamW)

	// DeMo across the switch: generated on the GPU and applied on the CPU,
	// a step at the CPU's lookahead, then the other way round.
	train()
	payload, err := tr.DeMoGenerate(testDeMo)
	must("DeMo generate", err)
	setGPU(false)
	must("DeMo apply", tr.DeMoApply(testDeMo, [][]byte{payload}))
	record("DeMo generated on the GPU, applied on the CPU")
	train()
	payload, err = tr.DeMoGenerate(testDeMo)
	must("DeMo generate", err)
	setGPU(true)
	must("DeMo apply", tr.DeMoApply(testDeMo, [][]byte{payload}))
	record("DeMo generated on the CPU, applied on the GPU")
	adamw("AdamW after the switches", testAdamW)

	// The CPU and back.
	setGPU(false)
	adamw("AdamW on the CPU", testAdamW)
	setGPU(true)
	adamw("AdamW on the GPU again", testAdamW)
	train()
	setGPU(false)
	must("CPU AdamW from GPU gradients", tr.AdamWStep(noClip))
	record("CPU AdamW from GPU gradients")
	setGPU(true)

	// State and checkpoints.
	update()
	state, err = tr.ExportState()
	must("ExportState", err)
	adamw("AdamW before import", testAdamW)
	must("ImportState", tr.ImportState(state))
	record("ImportState")
	adamw("AdamW after import", testAdamW)
	path := filepath.Join(dir, "residency.safetensors")
	update()
	must("SaveCheckpoint", tr.SaveCheckpoint(path, nil))
	adamw("AdamW after save", testAdamW)
	must("LoadCheckpoint", tr.LoadCheckpoint(path))
	record("LoadCheckpoint")
	adamw("AdamW after load", testAdamW)
	must("SetParams", tr.SetParams(p))
	record("SetParams")
	adamw("AdamW after SetParams", testAdamW)
	must("ResetOptimizer", tr.ResetOptimizer())
	adamw("AdamW after ResetOptimizer", testAdamW)
	must("ZeroStep", tr.ZeroStep())
	must("AdamW after ZeroStep", tr.AdamWStep(testAdamW))
	record("AdamW after ZeroStep")

	// SparseLoCo rounds with inner AdamW steps: one sent, one aborted.
	update()
	must("LoCoBegin", tr.LoCoBegin())
	update()
	update()
	lp, err := tr.LoCoGenerate(tinyLoCo)
	must("LoCoGenerate", err)
	record("LoCoGenerate")
	must("LoCoApply", tr.LoCoApply(tinyLoCo, [][]byte{lp}))
	record("LoCoApply")
	must("LoCoBegin", tr.LoCoBegin())
	update()
	must("LoCoAbort", tr.LoCoAbort())
	record("LoCoAbort")

	// Rounds across the switch: begun on the GPU and ended on the CPU, and
	// the other way round, with AdamW moments at their start.
	must("LoCoBegin", tr.LoCoBegin())
	update()
	setGPU(false)
	update()
	lp, err = tr.LoCoGenerate(tinyLoCo)
	must("LoCoGenerate", err)
	record("LoCoGenerate on the CPU")
	setGPU(true)
	must("LoCoApply", tr.LoCoApply(tinyLoCo, [][]byte{lp}))
	record("LoCoApply on the GPU")
	setGPU(false)
	must("LoCoBegin", tr.LoCoBegin())
	setGPU(true)
	update()
	lp, err = tr.LoCoGenerate(tinyLoCo)
	must("LoCoGenerate", err)
	record("LoCoGenerate on the GPU")
	must("LoCoBegin", tr.LoCoBegin())
	update()
	setGPU(false)
	must("LoCoAbort", tr.LoCoAbort())
	record("LoCoAbort on the CPU")
	setGPU(true)
	must("LoCoBegin", tr.LoCoBegin())
	setGPU(false)
	update()
	setGPU(true)
	must("LoCoAbort", tr.LoCoAbort())
	record("LoCoAbort on the GPU")
	adamw("AdamW after the rounds", testAdamW)
	return out
}
