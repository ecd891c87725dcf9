package trainer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestDCTRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, s := range [][3]int{{64, 64, 64}, {192, 128, 64}, {1, 128, 64}, {7, 13, 64}, {96, 40, 16}, {12, 10, 6}} {
		rows, cols, chunk := s[0], s[1], s[2]
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = r.Float32()*2 - 1
		}
		y, err := ChunkedDCT(rows, cols, chunk, x)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ChunkedIDCT(rows, cols, chunk, y)
		if err != nil {
			t.Fatal(err)
		}
		var ex, ey float64
		for i := range x {
			if d := math.Abs(float64(back[i] - x[i])); d > 2e-6 {
				t.Fatalf("%dx%d chunk %d: round trip error %.3g at %d", rows, cols, chunk, d, i)
			}
			ex += float64(x[i]) * float64(x[i])
			ey += float64(y[i]) * float64(y[i])
		}
		if math.Abs(ex-ey) > 1e-5*ex {
			t.Errorf("%dx%d chunk %d: energy %.6g before, %.6g after: not orthonormal", rows, cols, chunk, ex, ey)
		}
		// The first chunk against the textbook definition, in float64.
		cr, cc := largestDivisor(rows, chunk), largestDivisor(cols, chunk)
		basis := func(n, i, j int) float64 {
			s := math.Sqrt(2 / float64(n))
			if i == 0 {
				s = math.Sqrt(1 / float64(n))
			}
			return s * math.Cos(math.Pi*float64(2*j+1)*float64(i)/float64(2*n))
		}
		for p := range cr {
			for q := range cc {
				var want float64
				for i := range cr {
					for j := range cc {
						want += basis(cr, p, i) * float64(x[i*cols+j]) * basis(cc, q, j)
					}
				}
				if d := math.Abs(float64(y[p*cols+q]) - want); d > 1e-5 {
					t.Fatalf("%dx%d chunk %d: coefficient (%d,%d) = %v, want %v", rows, cols, chunk, p, q, y[p*cols+q], want)
				}
			}
		}
	}
	if _, err := ChunkedDCT(2, 2, 0, make([]float32, 4)); !errors.Is(err, ErrInvalid) {
		t.Errorf("chunk 0: got %v", err)
	}
}

// stateDelta extracts the DeMo momentum from a state blob (format v1).
func stateDelta(t *testing.T, state []byte, n int) []float32 {
	t.Helper()
	flags := binary.LittleEndian.Uint32(state[52:])
	if flags&flagDelta == 0 {
		t.Fatal("state has no DeMo delta")
	}
	raw := state[len(state)-4*n:]
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// With top-k = whole chunk and full-precision values, one client's apply
// step is exactly -lr*sign(gradient), and error feedback leaves ~0 behind.
func TestTopKAllReconstructsSigns(t *testing.T) {
	cfg := lightConfig(t)
	tr := newTrainer(t, cfg, 5)
	hp := DeMo{LR: 1e-3, Decay: 0.9, Chunk: 64, TopK: 64 * 64}
	text := MarkovText(6, 2*32+1)
	step(t, tr, text, 0, 2, 32)
	g, _ := tr.Grads()
	x0, _ := tr.Params()
	p, err := tr.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.DeMoApply(hp, [][]byte{p}); err != nil {
		t.Fatal(err)
	}
	x1, _ := tr.Params()
	tensors, _ := tr.Tensors()
	for _, ts := range tensors {
		var gmax float64
		for _, v := range g[ts.Offset : ts.Offset+ts.Size] {
			gmax = math.Max(gmax, math.Abs(float64(v)))
		}
		checked := 0
		for i := ts.Offset; i < ts.Offset+ts.Size; i++ {
			if math.Abs(float64(g[i])) <= 1e-3*gmax {
				continue // sign of a near-zero coefficient is rounding noise
			}
			want := x0[i] - hp.LR*float32(math.Copysign(1, float64(g[i])))
			if x1[i] != want {
				t.Fatalf("%s[%d]: gradient %v moved %v -> %v, want %v", ts.Name, i-ts.Offset, g[i], x0[i], x1[i], want)
			}
			checked++
		}
		if checked == 0 {
			t.Errorf("%s: nothing checked", ts.Name)
		}
	}
	state, _ := tr.ExportState()
	var dmax, gmax float64
	for i, d := range stateDelta(t, state, tr.NumParams()) {
		dmax = math.Max(dmax, math.Abs(float64(d)))
		gmax = math.Max(gmax, math.Abs(float64(hp.LR*g[i])))
	}
	if dmax > 1e-5*gmax {
		t.Errorf("error feedback left |delta| up to %.3g (largest lr*g %.3g)", dmax, gmax)
	}
}

func tinyPayload(t testing.TB, hp DeMo) (*Trainer, []byte) {
	tr := newTrainer(t, tinyConfig, 3)
	text := textFor(tinyConfig, 3, 2*8+1)
	step(t, tr, text, 0, 2, 8)
	p, err := tr.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	return tr, p
}

var tinyDeMo = DeMo{LR: 1e-3, Decay: 0.99, Chunk: 8, TopK: 3, OneBit: true}

func TestPayloadRoundTrip(t *testing.T) {
	for _, oneBit := range []bool{true, false} {
		hp := tinyDeMo
		hp.OneBit = oneBit
		tr, p := tinyPayload(t, hp)
		size, err := tr.PayloadSize(hp)
		if err != nil || size != len(p) {
			t.Fatalf("PayloadSize = %d, %v; payload has %d bytes", size, err, len(p))
		}
		d, err := DecodePayload(tinyConfig, hp, p)
		if err != nil {
			t.Fatalf("one-bit=%v: %v", oneBit, err)
		}
		if d.OneBit != oneBit || len(d.Tensors) != 16 {
			t.Fatalf("decoded one-bit=%v with %d tensors", d.OneBit, len(d.Tensors))
		}
		tensors, _ := tr.Tensors()
		for i, pt := range d.Tensors {
			if pt.Rows*pt.Cols != tensors[i].Size {
				t.Errorf("tensor %d (%s): %dx%d in payload, %d parameters", i, tensors[i].Name, pt.Rows, pt.Cols, tensors[i].Size)
			}
			if pt.K != min(hp.TopK, pt.ChunkRows*pt.ChunkCols) {
				t.Errorf("tensor %d: k=%d", i, pt.K)
			}
		}
		if again := d.Encode(); !bytes.Equal(again, p) {
			t.Fatalf("one-bit=%v: decode+encode changed the payload", oneBit)
		}
		if err := tr.ValidatePayload(hp, p); err != nil {
			t.Fatal(err)
		}
	}
}

// The Go layout matches the native one on every named config and a range of
// DeMo settings (the payload sizes agree exactly).
func TestPayloadLayoutMatchesTrainer(t *testing.T) {
	for _, name := range []string{"light", "small", "gpt2-bpe-small"} {
		cfg, err := ConfigByName(name)
		if err != nil {
			t.Fatal(err)
		}
		tr := newTrainer(t, cfg, 1)
		for _, hp := range []DeMo{
			{Chunk: 64, TopK: 8, OneBit: true}, {Chunk: 64, TopK: 32, OneBit: true}, {Chunk: 64, TopK: 8},
			{Chunk: 256, TopK: 300, OneBit: true}, {Chunk: 7, TopK: 65535}, {Chunk: 1, TopK: 1, OneBit: true},
		} {
			native, err := tr.PayloadSize(hp)
			if err != nil {
				t.Fatal(err)
			}
			layout, err := payloadLayout(cfg, hp)
			if err != nil {
				t.Fatal(err)
			}
			size := payloadHeader
			for i := range layout {
				size += layout[i].bytes(hp.OneBit)
			}
			if size != native {
				t.Errorf("%s %+v: Go layout gives %d bytes, trainer %d", name, hp, size, native)
			}
		}
	}
	if _, err := DecodePayload(tinyConfig, DeMo{Chunk: 0, TopK: 8}, []byte("PD\x02\x00")); !errors.Is(err, ErrInvalid) {
		t.Errorf("chunk 0: got %v, want ErrInvalid", err)
	}
}

func TestMalformedPayloadRejected(t *testing.T) {
	tr, good := tinyPayload(t, tinyDeMo)
	d, err := DecodePayload(tinyConfig, tinyDeMo, good)
	if err != nil {
		t.Fatal(err)
	}
	// Tensor 0's indices start at byte 4 (k per chunk); find a tensor whose
	// sign bits do not fill their last byte, for the padding check.
	padAt, off := -1, payloadHeader
	for _, pt := range d.Tensors {
		e := pt.Chunks() * pt.K
		off += e*pt.IndexBytes + (e+7)/8
		if e%8 != 0 && padAt < 0 {
			padAt = off - 1
		}
	}
	if padAt < 0 {
		t.Fatal("no tensor with partial sign byte in the test payload")
	}
	if d.Tensors[0].IndexBytes != 1 || d.Tensors[0].K < 2 {
		t.Fatalf("test assumes 1-byte indices and k >= 2 in tensor 0, got %+v", d.Tensors[0])
	}
	before := digest(t, tr, nil)
	for _, tc := range []struct {
		name string
		mod  func([]byte) []byte
	}{
		{"empty", func(b []byte) []byte { return nil }},
		{"header only", func(b []byte) []byte { return b[:4] }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
		{"bad magic", func(b []byte) []byte { b[0] = 'Q'; return b }},
		{"version 1", func(b []byte) []byte { b[2] = 1; return b }},
		{"version 3", func(b []byte) []byte { b[2] = 3; return b }},
		{"unknown flag", func(b []byte) []byte { b[3] |= 2; return b }},
		{"float values announced", func(b []byte) []byte { b[3] = 0; return b }},
		{"index out of range", func(b []byte) []byte { b[4] = 200; return b }},
		{"repeated index", func(b []byte) []byte { b[5] = b[4]; return b }},
		{"padding bits", func(b []byte) []byte { b[padAt] |= 0x80; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.mod(append([]byte(nil), good...))
			if err := tr.ValidatePayload(tinyDeMo, bad); !errors.Is(err, ErrPayload) {
				t.Fatalf("ValidatePayload: got %v, want ErrPayload", err)
			}
			if err := tr.DeMoApply(tinyDeMo, [][]byte{good, bad}); !errors.Is(err, ErrPayload) {
				t.Fatalf("DeMoApply: got %v, want ErrPayload", err)
			}
			if _, err := DecodePayload(tinyConfig, tinyDeMo, bad); !errors.Is(err, ErrPayload) {
				t.Fatalf("DecodePayload: got %v, want ErrPayload", err)
			}
			if got := digest(t, tr, nil); got != before {
				t.Fatal("a rejected payload changed the trainer")
			}
		})
	}
	// A float payload: non-finite and out-of-range values are rejected.
	hpFloat := tinyDeMo
	hpFloat.OneBit = false
	trF, dense := tinyPayload(t, hpFloat)
	e0 := d.Tensors[0].Chunks() * d.Tensors[0].K
	at := payloadHeader + e0 // tensor 0's first value
	beforeF := digest(t, trF, nil)
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 2e30, -2e30} {
		bad := append([]byte(nil), dense...)
		binary.LittleEndian.PutUint32(bad[at:], math.Float32bits(v))
		if err := trF.DeMoApply(hpFloat, [][]byte{bad}); !errors.Is(err, ErrPayload) {
			t.Errorf("value %v: DeMoApply got %v, want ErrPayload", v, err)
		}
		if _, err := DecodePayload(tinyConfig, hpFloat, bad); !errors.Is(err, ErrPayload) {
			t.Errorf("value %v: DecodePayload got %v, want ErrPayload", v, err)
		}
	}
	if digest(t, trF, nil) != beforeF {
		t.Fatal("a rejected float payload changed the trainer")
	}
}

// FuzzPayload feeds arbitrary bytes to both decoders: no crash, the Go
// decoder accepts exactly what the trainer accepts and re-encodes it
// exactly, and an accepted payload applies cleanly. Seeds: valid payloads
// (one-bit and float), their prefixes, and the corpus in
// testdata/fuzz/FuzzPayload.
func FuzzPayload(f *testing.F) {
	_, one := tinyPayload(f, tinyDeMo)
	hpFloat := tinyDeMo
	hpFloat.OneBit = false
	_, dense := tinyPayload(f, hpFloat)
	for _, p := range [][]byte{one, dense, one[:40], dense[:len(dense)/2], nil} {
		f.Add(p, p == nil || len(p) == len(one))
	}
	tr := newTrainer(f, tinyConfig, 3)
	f.Fuzz(func(t *testing.T, p []byte, oneBit bool) {
		hp := tinyDeMo
		hp.OneBit = oneBit
		d, goErr := DecodePayload(tinyConfig, hp, p)
		if !decodersAgree(t, tr.ValidatePayload(hp, p), goErr, d, p) {
			return
		}
		if err := tr.DeMoApply(hp, [][]byte{p}); err != nil {
			t.Fatalf("apply of a valid payload: %v", err)
		}
	})
}

// Replicas that apply the same payloads in the same order stay bit-identical,
// whether they trained on the same data or on different shards.
func TestDeMoReplicasStayIdentical(t *testing.T) {
	cfg := lightConfig(t)
	text := MarkovText(8, 3*2*2*32+1)
	for _, sameData := range []bool{true, false} {
		a, b := newTrainer(t, cfg, 21), newTrainer(t, cfg, 21)
		if err := b.SetThreads(1); err != nil { // replicas on different machines differ in cores
			t.Fatal(err)
		}
		for s := range 3 {
			startB := s * 2 * 2 * 32
			if !sameData {
				startB += 2 * 32
			}
			step(t, a, text, s*2*2*32, 2, 32)
			step(t, b, text, startB, 2, 32)
			pa, err := a.DeMoGenerate(testDeMo)
			if err != nil {
				t.Fatal(err)
			}
			pb, err := b.DeMoGenerate(testDeMo)
			if err != nil {
				t.Fatal(err)
			}
			if sameData != bytes.Equal(pa, pb) {
				t.Fatalf("same data=%v but payloads equal=%v", sameData, bytes.Equal(pa, pb))
			}
			for _, tr := range []*Trainer{a, b} {
				if err := tr.DeMoApply(testDeMo, [][]byte{pa, pb}); err != nil {
					t.Fatal(err)
				}
			}
			pa0, _ := a.Params()
			pb0, _ := b.Params()
			for i := range pa0 {
				if math.Float32bits(pa0[i]) != math.Float32bits(pb0[i]) {
					t.Fatalf("same data=%v step %d: replicas differ at parameter %d", sameData, s, i)
				}
			}
		}
	}
}

// A setting beyond C's int does not wrap to a valid one (2^32 + 8 to 8).
func TestDeMoSettingsDoNotWrap(t *testing.T) {
	tr := newTrainer(t, tinyConfig, 1)
	for _, hp := range []DeMo{{Chunk: 1<<32 + 8, TopK: 4}, {Chunk: 8, TopK: 1<<32 + 4}} {
		if _, err := tr.PayloadSize(hp); !errors.Is(err, ErrInvalid) {
			t.Errorf("chunk %d top-k %d: %v, want ErrInvalid", hp.Chunk, hp.TopK, err)
		}
	}
}

// Overlapped steps: after a generate with Overlap, the trainer's next
// gradients are those at x - lr*sign(U), U the update its own payload asks
// for and x its weights once the previous step's payloads are applied: what
// another trainer computes by applying that payload alone (no weight decay)
// and stepping there. The pending update travels in the state (a restore
// replays the step bit for bit) and a generate without Overlap drops it.
func TestDeMoOverlapStepsAtPendingUpdate(t *testing.T) {
	cfg := tinyConfig
	text := textFor(cfg, 9, 4096)
	hp := testDeMo
	hp.Lookahead, hp.Overlap, hp.WeightDecay = false, true, 0
	grads := func(tr *Trainer) []float32 {
		t.Helper()
		g, err := tr.Grads()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, other := newTrainer(t, cfg, 3), newTrainer(t, cfg, 3)
	// Step 1, applied late: a's payload and another client's.
	step(t, a, text, 0, 4, cfg.SeqLen)
	step(t, other, text, 64, 4, cfg.SeqLen)
	p1, err := a.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	q1, err := other.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeMoApply(hp, nil); err != nil { // step 0's (none): sets lr for the lookahead
		t.Fatal(err)
	}
	// Step 2 at the lookahead; then its payload, then step 1's apply.
	step(t, a, text, 128, 4, cfg.SeqLen)
	p2, err := a.DeMoGenerate(hp)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeMoApply(hp, [][]byte{p1, q1}); err != nil {
		t.Fatal(err)
	}
	x, err := a.Params()
	if err != nil {
		t.Fatal(err)
	}
	saved := mustState(t, a)
	step(t, a, text, 192, 4, cfg.SeqLen)
	got := grads(a)

	ref := newTrainer(t, cfg, 3)
	if err := ref.SetParams(x); err != nil {
		t.Fatal(err)
	}
	if err := ref.DeMoApply(hp, [][]byte{p2}); err != nil {
		t.Fatal(err)
	}
	step(t, ref, text, 192, 4, cfg.SeqLen)
	want := grads(ref)
	at := newTrainer(t, cfg, 3) // the same step at x itself
	if err := at.SetParams(x); err != nil {
		t.Fatal(err)
	}
	step(t, at, text, 192, 4, cfg.SeqLen)
	if sameBits(grads(at), want) < 0 {
		t.Fatal("the gradients at x equal those at the pending update's lookahead: the test shows nothing")
	}
	if sameBits(got, want) >= 0 {
		t.Fatal("the step after an overlapped generate is not taken at x - lr*sign(U(own payload))")
	}

	// The state carries the pending update: a restored trainer takes the
	// same step.
	restored := newTrainer(t, cfg, 8)
	if err := restored.ImportState(saved); err != nil {
		t.Fatal(err)
	}
	step(t, restored, text, 192, 4, cfg.SeqLen)
	if sameBits(grads(restored), got) >= 0 {
		t.Fatal("a trainer restored from the state does not step at the pending update's lookahead")
	}
	plain := testDeMo
	plain.Lookahead = false
	if _, err := a.DeMoGenerate(plain); err != nil {
		t.Fatal(err)
	}
	if n := len(mustState(t, a)); n != len(saved)-4*a.NumParams() {
		t.Fatalf("a generate without Overlap left a %d-byte state, want %d (no pending update)", n, len(saved)-4*a.NumParams())
	}
	both := hp
	both.Lookahead = true
	step(t, a, text, 0, 4, cfg.SeqLen)
	if _, err := a.DeMoGenerate(both); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Overlap with Lookahead: %v, want ErrInvalid", err)
	}
}
