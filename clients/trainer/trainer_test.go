package trainer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestConfigByName(t *testing.T) {
	for _, name := range ConfigNames() {
		cfg, err := ConfigByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ConfigByName("huge"); err == nil {
		t.Error("unknown config accepted")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"heads do not divide channels", func(c *Config) { c.Heads = 3 }},
		{"padded vocab below vocab", func(c *Config) { c.PaddedVocab = 100 }},
		{"no layers", func(c *Config) { c.Layers = 0 }},
		{"no micro-batch", func(c *Config) { c.MicroBatch = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := lightConfig(t)
			tc.mod(&cfg)
			if tr, err := New(cfg, 1); err == nil {
				tr.Close()
				t.Fatal("accepted")
			}
		})
	}
}

// The analytic gradient of every tensor, along sign(g) restricted to that
// tensor, must match a central finite difference of the loss: GPT-2, and
// Llama with grouped-query attention, tied and untied, and tied with q/k/v
// biases (Qwen2's).
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	untied := llamaLight(t)
	untied.Name, untied.Untied = "llama-light-untied", true
	biased := llamaLight(t)
	biased.Name, biased.QKVBias = "llama-light-qkv-bias", true
	for _, cfg := range []Config{lightConfig(t), llamaLight(t), untied, biased} {
		t.Run(cfg.Name, func(t *testing.T) { checkGradients(t, cfg, nil) })
	}
}

// checkGradients compares each tensor's gradient with finite differences of
// the mean loss over the targets train keeps (nil: all).
func checkGradients(t *testing.T, cfg Config, train func(i int) bool) {
	tr := newTrainer(t, cfg, 7)
	const n, seqLen = 2, 16
	text := MarkovText(3, n*seqLen+1)
	tok, tgt := maskedWindow(text, 0, n, seqLen, train)
	ctx := context.Background()
	if _, err := tr.Step(ctx, tok, tgt, seqLen); err != nil {
		t.Fatal(err)
	}
	g, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	x0, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	tensors, err := tr.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	lossAt := func(x []float32) float64 {
		if err := tr.SetParams(x); err != nil {
			t.Fatal(err)
		}
		l, err := tr.Eval(ctx, tok, tgt, seqLen)
		if err != nil {
			t.Fatal(err)
		}
		return float64(l)
	}
	for _, ts := range tensors {
		var l1 float64
		for _, v := range g[ts.Offset : ts.Offset+ts.Size] {
			l1 += math.Abs(float64(v))
		}
		if l1 == 0 {
			t.Errorf("%s: zero gradient", ts.Name)
			continue
		}
		// Step size giving a loss change of ~2e-3, far above float32 rounding of the loss.
		eps := float32(2e-3 / l1)
		xp, xm := append([]float32(nil), x0...), append([]float32(nil), x0...)
		for i := ts.Offset; i < ts.Offset+ts.Size; i++ {
			s := float32(0)
			if g[i] > 0 {
				s = 1
			} else if g[i] < 0 {
				s = -1
			}
			xp[i] += eps * s
			xm[i] -= eps * s
		}
		fd := (lossAt(xp) - lossAt(xm)) / (2 * float64(eps))
		rel := math.Abs(fd-l1) / l1
		t.Logf("%-9s |g|_1=%.4g finite difference=%.4g rel err=%.2g", ts.Name, l1, fd, rel)
		if rel > 2e-3 {
			t.Errorf("%s: analytic %.5g vs finite difference %.5g (rel err %.3g)", ts.Name, l1, fd, rel)
		}
	}
}

// Results may not depend on the thread count or the GEMM kernel's ISA.
func TestDigestIndependentOfThreadsAndISA(t *testing.T) {
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		t.Run(cfg.Name, func(t *testing.T) { checkThreadsAndISA(t, cfg) })
	}
}

func checkThreadsAndISA(t *testing.T, cfg Config) {
	text := MarkovText(5, 4*2*32+1)
	type run struct {
		threads int
		isa     ISA
	}
	for _, opt := range []string{"demo", "adamw"} {
		var ref [][32]byte
		var refRun run
		for _, r := range []run{{2, ISAAuto}, {1, ISAAuto}, {1, ISABase}, {2, ISABase}, {2, ISAAVX2}} {
			tr := newTrainer(t, cfg, 11)
			if err := tr.SetThreads(r.threads); err != nil {
				t.Fatal(err)
			}
			got, err := tr.SetISA(r.isa)
			if err != nil {
				t.Fatal(err)
			}
			if r.isa != ISAAuto && got != r.isa {
				continue // this CPU lacks the level
			}
			ds := runSteps(t, tr, opt, text, 0, 2, 2, 32)
			if ref == nil {
				ref, refRun = ds, r
				continue
			}
			for i := range ds {
				if ds[i] != ref[i] {
					t.Errorf("%s step %d: threads=%d isa=%s digest %x, threads=%d isa=%s digest %x",
						opt, i, r.threads, got, ds[i][:8], refRun.threads, refRun.isa, ref[i][:8])
				}
			}
		}
	}
}

// Export, continue, then import into a fresh trainer and replay: same digests.
func TestRestoreThenReplay(t *testing.T) {
	cfg := lightConfig(t)
	text := MarkovText(9, 6*2*32+1)
	for _, opt := range []string{"demo", "adamw"} {
		t.Run(opt, func(t *testing.T) {
			a := newTrainer(t, cfg, 1)
			runSteps(t, a, opt, text, 0, 2, 2, 32)
			state, err := a.ExportState()
			if err != nil {
				t.Fatal(err)
			}
			want := runSteps(t, a, opt, text, 2, 3, 2, 32)
			b := newTrainer(t, cfg, 99) // different init: everything must come from the state
			if err := b.ImportState(state); err != nil {
				t.Fatal(err)
			}
			got := runSteps(t, b, opt, text, 2, 3, 2, 32)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("replayed step %d: digest %x, original %x", i, got[i][:8], want[i][:8])
				}
			}
		})
	}
}

func TestImportStateRejectsBadBlobs(t *testing.T) {
	cfg := lightConfig(t)
	tr := newTrainer(t, cfg, 1)
	text := MarkovText(1, 2*32+1)
	runSteps(t, tr, "demo", text, 0, 1, 2, 32)
	good, err := tr.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	before := digest(t, tr, nil)
	nan := math.Float32bits(float32(math.NaN()))
	for _, tc := range []struct {
		name string
		mod  func([]byte) []byte
	}{
		{"empty", func(b []byte) []byte { return nil }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"bad version", func(b []byte) []byte { b[4] = 2; return b }},
		{"other model", func(b []byte) []byte { b[16]++; return b }},
		{"unknown flag", func(b []byte) []byte { b[52] |= 8; return b }},
		{"NaN parameter", func(b []byte) []byte {
			b[56], b[57], b[58], b[59] = byte(nan), byte(nan>>8), byte(nan>>16), byte(nan>>24)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tr.ImportState(tc.mod(append([]byte(nil), good...)))
			if !errors.Is(err, ErrState) {
				t.Fatalf("got %v, want ErrState", err)
			}
			if d := digest(t, tr, nil); d != before {
				t.Fatal("rejected state changed the trainer")
			}
		})
	}
}

// A Llama state (version 2, the Llama fields in its header; version 3 with
// its knobs too; version 4 with q/k/v biases) goes only into a model of the
// same shape: not into a GPT-2 model, nor one with another rope_theta,
// kv_heads, tied-ness, RMSNorm epsilon, rotary scaling or q/k/v biases. An
// epsilon of 1e-5 written out is the default.
func TestImportStateChecksTheArchitecture(t *testing.T) {
	llama3 := Knobs{RMSNormEps: 1e-6, RopeScaling: RopeLlama3, RopeFactor: 8, RopeLowFreq: 1, RopeHighFreq: 4, RopeOrigCtx: 64}
	qwen2 := Knobs{RMSNormEps: 1e-6, QKVBias: true}
	for _, c := range []struct {
		knobs   Knobs
		version uint32
	}{{Knobs{}, 2}, {llama3, 3}, {qwen2, 4}} {
		knobs := c.knobs
		cfg := llamaLight(t)
		cfg.Knobs = knobs
		src := newTrainer(t, cfg, 1)
		blob, err := src.ExportState()
		if err != nil {
			t.Fatal(err)
		}
		if v, want := binary.LittleEndian.Uint32(blob[4:]), c.version; v != want {
			t.Errorf("knobs %+v: state version %d, want %d", knobs, v, want)
		}
		checkStateArchitecture(t, cfg, src, blob)
	}
	// The default epsilon written out is the same model, and the same state.
	cfg := llamaLight(t)
	explicit := cfg
	explicit.RMSNormEps = DefaultRMSNormEps
	a, b := newTrainer(t, cfg, 1), newTrainer(t, explicit, 1)
	if digest(t, a, nil) != digest(t, b, nil) {
		t.Error("rms_norm_eps 1e-5 written out gives another digest than the default")
	}
}

// q/k/v biases (Knobs.QKVBias) append bq (L, C), bk and bv (L, KVD) to a
// Llama's tensors, tied or untied, and leave the rest as they were: the same
// names, shapes, offsets and initial values (the biases start at zero), so
// the same loss. Nonzero biases change the loss.
func TestQKVBiasLayout(t *testing.T) {
	for _, untied := range []bool{false, true} {
		plain := llamaLight(t)
		plain.Untied = untied
		biased := plain
		biased.QKVBias = true
		a, b := newTrainer(t, plain, 5), newTrainer(t, biased, 5)
		ta, _ := a.Tensors()
		tb, _ := b.Tensors()
		L, C, KVD := plain.Layers, plain.Channels, plain.KVHeads*(plain.Channels/plain.Heads)
		want := append(slices.Clone(ta), Tensor{"bq", []int{L, C}, a.NumParams(), L * C},
			Tensor{"bk", []int{L, KVD}, a.NumParams() + L*C, L * KVD}, Tensor{"bv", []int{L, KVD}, a.NumParams() + L*C + L*KVD, L * KVD})
		if !reflect.DeepEqual(tb, want) {
			t.Fatalf("untied %v: tensors %v, want %v", untied, tb, want)
		}
		pa, _ := a.Params()
		pb, _ := b.Params()
		if !slices.Equal(pb[:len(pa)], pa) || slices.ContainsFunc(pb[len(pa):], func(v float32) bool { return v != 0 }) {
			t.Fatalf("untied %v: the biased model's initial weights are not the plain one's and zero biases", untied)
		}
		tok, tgt := Window(MarkovText(2, 2*16+1), 0, 2, 16)
		ctx := context.Background()
		la, _ := a.Eval(ctx, tok, tgt, 16)
		lb, _ := b.Eval(ctx, tok, tgt, 16)
		if la != lb {
			t.Errorf("untied %v: zero biases give loss %v, the plain model %v", untied, lb, la)
		}
		for i := len(pa); i < len(pb); i++ {
			pb[i] = 0.05 * float32(i%7-3)
		}
		if err := b.SetParams(pb); err != nil {
			t.Fatal(err)
		}
		if lc, _ := b.Eval(ctx, tok, tgt, 16); lc == la {
			t.Errorf("untied %v: nonzero biases leave the loss at %v", untied, lc)
		}
	}
}

func checkStateArchitecture(t *testing.T, cfg Config, src *Trainer, blob []byte) {
	t.Helper()
	other := func(f func(*Config)) Config {
		c := cfg
		f(&c)
		return c
	}
	for _, c := range []Config{
		other(func(c *Config) { c.Arch, c.KVHeads, c.Hidden, c.RopeTheta, c.Knobs = "", 0, 0, 0, Knobs{} }),
		other(func(c *Config) { c.RopeTheta = 20000 }),
		other(func(c *Config) { c.KVHeads = 1 }),
		other(func(c *Config) { c.Untied = true }),
		other(func(c *Config) { c.RMSNormEps = 3e-6 }),
		other(func(c *Config) {
			c.RopeScaling, c.RopeFactor, c.RopeLowFreq, c.RopeHighFreq, c.RopeOrigCtx = RopeLlama3, 4, 1, 4, 64
		}),
		other(func(c *Config) { c.QKVBias = !c.QKVBias }),
	} {
		dst := newTrainer(t, c, 2)
		before := digest(t, dst, nil)
		if err := dst.ImportState(blob); !errors.Is(err, ErrState) {
			t.Errorf("%+v: imported a llama-light state: %v", c, err)
		}
		if digest(t, dst, nil) != before {
			t.Errorf("%+v: the rejected state changed the trainer", c)
		}
	}
	same := newTrainer(t, cfg, 2)
	if err := same.ImportState(blob); err != nil {
		t.Fatal(err)
	}
	if digest(t, same, nil) != digest(t, src, nil) {
		t.Error("imported state gives another digest")
	}
}

func TestStepRejectsBadBatches(t *testing.T) {
	cfg := lightConfig(t)
	tr := newTrainer(t, cfg, 1)
	before := digest(t, tr, nil)
	ctx := context.Background()
	ok := make([]int32, 64)
	for _, tc := range []struct {
		name            string
		tokens, targets []int32
		seqLen          int
	}{
		{"token outside vocabulary", append([]int32{256}, ok[1:]...), ok, 32},
		{"target below Ignore", ok, append([]int32{Ignore - 1}, ok[1:]...), 32},
		{"target outside vocabulary", ok, append([]int32{256}, ok[1:]...), 32},
		{"ragged batch", ok[:63], ok[:63], 32},
		{"targets shorter", ok, ok[:32], 32},
		{"sequence too long", ok, ok, 129},
		{"empty", nil, nil, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tr.Step(ctx, tc.tokens, tc.targets, tc.seqLen); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Step: got %v, want ErrInvalid", err)
			}
			if _, err := tr.Eval(ctx, tc.tokens, tc.targets, tc.seqLen); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Eval: got %v, want ErrInvalid", err)
			}
		})
	}
	if err := tr.AdamWStep(testAdamW); !errors.Is(err, ErrNoGrad) {
		t.Errorf("AdamW without gradients: got %v, want ErrNoGrad", err)
	}
	if _, err := tr.DeMoGenerate(testDeMo); !errors.Is(err, ErrNoGrad) {
		t.Errorf("DeMo generate without gradients: got %v, want ErrNoGrad", err)
	}
	if err := tr.SetThreads(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetThreads(0): got %v", err)
	}
	if d := digest(t, tr, nil); d != before {
		t.Error("rejected input changed the trainer")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tr.Step(cancelled, ok, ok, 32); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Step: got %v", err)
	}
	tr.Close()
	if _, err := tr.Step(ctx, ok, ok, 32); !errors.Is(err, ErrClosed) {
		t.Errorf("Step after Close: got %v", err)
	}
}

// Micro-batching changes memory use, never results: every gradient and the
// loss chain over the tokens in order across micro-batches (contract v2), so
// any MicroBatch gives the bits of one pass over the whole batch.
func TestMicroBatchDoesNotChangeBits(t *testing.T) {
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		t.Run(cfg.Name, func(t *testing.T) { checkMicroBatches(t, cfg) })
	}
}

func checkMicroBatches(t *testing.T, cfg Config) {
	const n = 6
	text := MarkovText(2, n*32+1)
	var refLoss float32
	var ref []float32
	for _, mb := range []int{n, 1, 2, 4, 5} {
		c := cfg
		c.MicroBatch = mb
		tr := newTrainer(t, c, 3)
		loss := step(t, tr, text, 0, n, 32)
		g, err := tr.Grads()
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			refLoss, ref = loss, g
			continue
		}
		if math.Float32bits(loss) != math.Float32bits(refLoss) {
			t.Errorf("micro-batch %d: loss %v, one pass %v", mb, loss, refLoss)
		}
		diff := 0
		for i := range g {
			if math.Float32bits(g[i]) != math.Float32bits(ref[i]) {
				diff++
			}
		}
		if diff > 0 {
			t.Errorf("micro-batch %d: %d of %d gradient entries differ from one pass", mb, diff, len(g))
		}
	}
}

// fma32 is IEEE single-precision fused multiply-add, computed independently
// of the C code: a*b is exact in float64, the sum is rounded to odd in
// float64 (TwoSum gives its error), and rounding that to float32 is then
// the one correct rounding of a*b+c.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	s := p + float64(c)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s) // an infinite or NaN input: nothing to correct
	}
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			s = math.Float64frombits(bits + 1)
		} else {
			s = math.Float64frombits(bits - 1)
		}
	}
	return float32(s)
}

func TestFMA32(t *testing.T) {
	// 1 + 2^-24 is a tie in float32; the fused product below breaks it
	// upward only because nothing is rounded before the sum.
	a := float32(1 + 1.0/(1<<12))
	if got, want := fma32(a, a, -1), float32(2.0/(1<<12)+1.0/(1<<24)); got != want {
		t.Errorf("fma32(a, a, -1) = %v, want %v", got, want)
	}
	if got := fma32(1+1.0/(1<<23), 1.0/(1<<24), 1); got != 1+1.0/(1<<23) {
		t.Errorf("tie above half not rounded up: %v", got)
	}
	if got := fma32(1, 1.0/(1<<24), 1); got != 1 {
		t.Errorf("exact tie not rounded to even: %v", got)
	}
}

// Every GEMM output is one fma chain over k from 0 (contract v2): each
// kernel level and thread count gives exactly the bits of that chain.
// Shapes cover edge tiles, several k blocks and several tasks.
func TestGEMMMatchesReference(t *testing.T) {
	tr := newTrainer(t, tinyConfig, 1)
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][3]int{{1, 1, 1}, {7, 5, 13}, {12, 8, 64}, {37, 29, 130}, {200, 70, 600}, {13, 1601, 9}} {
		m, n, k := s[0], s[1], s[2]
		a, b, out := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
		for i := range a {
			a[i] = r.Float32()*2 - 1
		}
		for i := range b {
			b[i] = r.Float32()*2 - 1
		}
		want := make([]float32, m*n)
		for i := range m {
			for j := range n {
				var acc float32
				for q := range k {
					acc = fma32(a[i*k+q], b[j*k+q], acc)
				}
				want[i*n+j] = acc
			}
		}
		for _, level := range ISALevels {
			if got, _ := tr.SetISA(level); got != level {
				t.Logf("%v: not on this CPU", level)
				continue
			}
			for _, threads := range []int{1, 2, 3} {
				if err := tr.SetThreads(threads); err != nil {
					t.Fatal(err)
				}
				clear(out)
				if err := tr.GEMM(ArithFP32, 0, m, n, k, a, b, out); err != nil {
					t.Fatal(err)
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v threads=%d (%d,%d,%d) out[%d][%d] = %v, the fma chain gives %v",
							level, threads, m, n, k, i/n, i%n, out[i], want[i])
					}
				}
			}
		}
	}
}

// Digest hashes the state in pieces; it must equal sha256 of the exported blob.
func TestDigestMatchesExportedState(t *testing.T) {
	tr := newTrainer(t, lightConfig(t), 1)
	text := MarkovText(1, 2*32+1)
	runSteps(t, tr, "adamw", text, 0, 1, 2, 32)
	runSteps(t, tr, "demo", text, 0, 1, 2, 32) // now params, m, v and delta
	state, err := tr.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("payload")
	h := sha256.New()
	h.Write(state)
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(payload))))
	h.Write(payload)
	if got := digest(t, tr, payload); !bytes.Equal(got[:], h.Sum(nil)) {
		t.Fatalf("Digest %x, sha256 of the exported state %x", got[:8], h.Sum(nil)[:8])
	}
}

// ZeroStep replaces the last step's gradients with zeros, and a DeMo
// payload generated from them (from a fresh momentum, without 1-bit
// quantization, which sends a zero as +1) moves no weight.
func TestZeroStep(t *testing.T) {
	cfg := lightConfig(t)
	tr := newTrainer(t, cfg, 5)
	step(t, tr, textFor(cfg, 5, 4*64+1), 0, 4, 64)
	if err := tr.ZeroStep(); err != nil {
		t.Fatal(err)
	}
	g, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range g {
		if v != 0 {
			t.Fatalf("gradient %d is %g after ZeroStep", i, v)
		}
	}

	fresh := newTrainer(t, cfg, 5)
	before, _ := fresh.Params()
	if _, err := fresh.DeMoGenerate(testDeMo); err == nil {
		t.Fatal("DeMoGenerate before any step succeeded")
	}
	if err := fresh.ZeroStep(); err != nil {
		t.Fatal(err)
	}
	hp := testDeMo
	hp.WeightDecay, hp.OneBit = 0, false
	p, err := fresh.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.DeMoApply(hp, [][]byte{p, p}); err != nil {
		t.Fatal(err)
	}
	after, _ := fresh.Params()
	for i := range before {
		if math.Float32bits(before[i]) != math.Float32bits(after[i]) {
			t.Fatalf("parameter %d moved from %g to %g under zero payloads", i, before[i], after[i])
		}
	}
}
