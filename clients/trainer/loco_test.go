package trainer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sort"
	"testing"
)

// SparseLoCo tests, all on tinyConfig. Chunk 12 gives chunks of 64, 8, 12
// and 96 entries, so both power-of-two and other index widths occur, and
// TopK 3 keeps the top-k on its small path (locoWide takes the sort path).

var tinyLoCo = SparseLoCo{OuterLR: 0.7, Decay: 0.95, Chunk: 12, TopK: 3, ValueBits: 2}

// locoWide: k = 80 on the 96-entry qkvw chunks (merge-sort top-k), the whole
// chunk elsewhere.
var locoWide = SparseLoCo{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 80, ValueBits: 4}

var locoInner = AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}

var locoAllBits = []int{1, 2, 4, 8, 32}

const locoSeqs = 2 // sequences per inner step

func withBits(hp SparseLoCo, vb int) SparseLoCo { hp.ValueBits = vb; return hp }

// innerSteps runs h inner steps (Step + AdamWStep) on consecutive windows
// of text from start.
func innerSteps(t testing.TB, tr *Trainer, text []byte, start, h int) {
	t.Helper()
	T := tr.Config().SeqLen
	for i := range h {
		step(t, tr, text, start+i*locoSeqs*T, locoSeqs, T)
		if err := tr.AdamWStep(locoInner); err != nil {
			t.Fatalf("inner step %d: %v", i, err)
		}
	}
}

// locoRound is one client's round: begin, h inner steps, generate.
func locoRound(t testing.TB, tr *Trainer, hp SparseLoCo, text []byte, start, h int) []byte {
	t.Helper()
	if err := tr.LoCoBegin(); err != nil {
		t.Fatalf("LoCoBegin: %v", err)
	}
	innerSteps(t, tr, text, start, h)
	p, err := tr.LoCoGenerate(hp)
	if err != nil {
		t.Fatalf("LoCoGenerate: %v", err)
	}
	return p
}

// locoState is a state blob (format v1) taken apart; absent buffers are nil.
type locoState struct {
	step, adamT         uint64
	flags               uint32
	params, m, v, delta []float32
}

func parseState(t testing.TB, blob []byte, n int) locoState {
	t.Helper()
	floats := func(off int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(blob[off+4*i:]))
		}
		return out
	}
	s := locoState{
		step:  binary.LittleEndian.Uint64(blob[32:]),
		adamT: binary.LittleEndian.Uint64(blob[40:]),
		flags: binary.LittleEndian.Uint32(blob[52:]),
	}
	want := stateHeaderLen(blob) + 4*n
	if s.flags&1 != 0 {
		want += 8 * n
	}
	if s.flags&flagDelta != 0 {
		want += 4 * n
	}
	if len(blob) != want {
		t.Fatalf("state blob of %d bytes, flags %#x: want %d", len(blob), s.flags, want)
	}
	off := stateHeaderLen(blob)
	s.params = floats(off)
	off += 4 * n
	if s.flags&1 != 0 {
		s.m, s.v = floats(off), floats(off+4*n)
		off += 8 * n
	}
	if s.flags&flagDelta != 0 {
		s.delta = floats(off)
	}
	return s
}

func exportState(t testing.TB, tr *Trainer) []byte {
	t.Helper()
	s, err := tr.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func params(t testing.TB, tr *Trainer) []float32 {
	t.Helper()
	p, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sameBits reports the first index where a and b differ bitwise, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// chunkPos is trk_chunk_pos: the offset, inside the tensor, of in-chunk
// index ix of chunk b (chunks row-major over the 2-D view).
func chunkPos(pt *PayloadTensor, b int, ix uint32) int {
	bcols := pt.Cols / pt.ChunkCols
	r := (b/bcols)*pt.ChunkRows + int(ix)/pt.ChunkCols
	c := (b%bcols)*pt.ChunkCols + int(ix)%pt.ChunkCols
	return r*pt.Cols + c
}

// refCode is trk_loco_code in float32, one rounding per operation.
func refCode(v, s float32, vb int) uint32 {
	if vb == 32 {
		return math.Float32bits(v)
	}
	l := float32(uint32(1)<<vb - 1)
	if !(s > 0) {
		return 0
	}
	a := float32(v / s)
	a = float32(a + 1)
	a = float32(a * 0.5)
	a = float32(a * l)
	a = float32(a + 0.5)
	if a >= l {
		return uint32(l)
	}
	return uint32(a)
}

func decodeLoCo(t testing.TB, hp SparseLoCo, p []byte) *Payload {
	t.Helper()
	d, err := DecodeLoCoPayload(tinyConfig, hp, p)
	if err != nil {
		t.Fatalf("DecodeLoCoPayload: %v", err)
	}
	return d
}

// checkErrorFeedback checks one generate bit for bit against a float32
// reference: e_pre = decay*e_old + (x0 - x) elementwise; per chunk the
// payload holds the top-k of |e_pre| (descending, ties to the lower index)
// with scale max|selected| and codes as trk_loco_code; e_new is e_pre minus
// the decoded value at the selected positions and e_pre elsewhere.
func checkErrorFeedback(t *testing.T, tr *Trainer, hp SparseLoCo, eOld, x0, x, eNew []float32, payload []byte) {
	t.Helper()
	n := len(x0)
	if eOld == nil {
		eOld = make([]float32, n)
	}
	ePre := make([]float32, n)
	for i := range ePre {
		ePre[i] = float32(hp.Decay*eOld[i]) + float32(x0[i]-x[i])
	}
	d := decodeLoCo(t, hp, payload)
	tensors, err := tr.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ePre)
	selected := make([]bool, n)
	for ti := range d.Tensors {
		pt := &d.Tensors[ti]
		off := tensors[ti].Offset
		if pt.Rows*pt.Cols != tensors[ti].Size {
			t.Fatalf("tensor %d: %dx%d view of %d parameters", ti, pt.Rows, pt.Cols, tensors[ti].Size)
		}
		size := pt.ChunkRows * pt.ChunkCols
		vals := make([]float32, size)
		order := make([]uint32, size)
		for b := range pt.Chunks() {
			for ix := range size {
				vals[ix] = ePre[off+chunkPos(pt, b, uint32(ix))]
				order[ix] = uint32(ix)
			}
			abs := func(v float32) float32 { return float32(math.Abs(float64(v))) }
			sort.SliceStable(order, func(i, j int) bool { return abs(vals[order[i]]) > abs(vals[order[j]]) })
			got := pt.Indices[b*pt.K : (b+1)*pt.K]
			if !slices.Equal(got, order[:pt.K]) {
				t.Fatalf("tensor %d (%s) chunk %d: selected %v, want the top-%d %v", ti, tensors[ti].Name, b, got, pt.K, order[:pt.K])
			}
			var s float32
			for _, ix := range got {
				s = max(s, abs(vals[ix]))
			}
			if hp.ValueBits < 32 && math.Float32bits(pt.Scales[b]) != math.Float32bits(s) {
				t.Fatalf("tensor %d chunk %d: scale %v, want %v", ti, b, pt.Scales[b], s)
			}
			for j, ix := range got {
				e := b*pt.K + j
				if q := refCode(vals[ix], s, hp.ValueBits); pt.Codes[e] != q {
					t.Fatalf("tensor %d chunk %d entry %d: code %d for %v at scale %v, want %d", ti, b, j, pt.Codes[e], vals[ix], s, q)
				}
				v := LoCoValue(pt.Codes[e], s, hp.ValueBits)
				if math.Float32bits(v) != math.Float32bits(pt.Values[e]) {
					t.Fatalf("tensor %d entry %d: decoded %v, want %v", ti, e, pt.Values[e], v)
				}
				pos := off + chunkPos(pt, b, ix)
				want[pos] = ePre[pos] - v
				selected[pos] = true
			}
		}
	}
	for i := range want {
		if math.Float32bits(eNew[i]) != math.Float32bits(want[i]) {
			t.Fatalf("error feedback [%d] (selected %v): %v, want %v (e_old %v, x0 %v, x %v)", i, selected[i], eNew[i], want[i], eOld[i], x0[i], x[i])
		}
	}
}

// A real round's payload has the announced size and survives
// decode + encode unchanged, for every value width.
func TestLoCoPayloadRoundTrip(t *testing.T) {
	text := textFor(tinyConfig, 11, 4096)
	for _, vb := range locoAllBits {
		hp := withBits(tinyLoCo, vb)
		tr := newTrainer(t, tinyConfig, 3)
		p := locoRound(t, tr, hp, text, 0, 2)
		size, err := tr.LoCoPayloadSize(hp)
		if err != nil || size != len(p) {
			t.Fatalf("%d bits: LoCoPayloadSize = %d, %v; payload has %d bytes", vb, size, err, len(p))
		}
		d := decodeLoCo(t, hp, p)
		if d.ValueBits != vb || len(d.Tensors) != 16 {
			t.Fatalf("%d bits: decoded %d bits, %d tensors", vb, d.ValueBits, len(d.Tensors))
		}
		if !bytes.Equal(d.Encode(), p) {
			t.Fatalf("%d bits: decode+encode changed the payload", vb)
		}
		if err := tr.LoCoValidate(hp, p); err != nil {
			t.Fatalf("%d bits: %v", vb, err)
		}
		if vb == 32 {
			if d.Tensors[0].Scales != nil {
				t.Error("32-bit payload decoded with scales")
			}
		} else {
			nonzero := 0
			for _, pt := range d.Tensors {
				for _, s := range pt.Scales {
					if s > 0 {
						nonzero++
					}
				}
			}
			if nonzero == 0 {
				t.Errorf("%d bits: every scale is 0", vb)
			}
		}
		if err := tr.LoCoApply(hp, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
}

// Generate puts the round-start weights and step counter back,
// keeps the advanced AdamW moments and t, and leaves exactly the error
// feedback the reference computes (over two rounds, so e_old is nonzero
// the second time; both top-k paths).
func TestLoCoGenerateRestoresAndFeedsBack(t *testing.T) {
	text := textFor(tinyConfig, 12, 4096)
	for _, hp := range []SparseLoCo{tinyLoCo, locoWide, withBits(tinyLoCo, 32), withBits(tinyLoCo, 1)} {
		tr := newTrainer(t, tinyConfig, 4)
		const H = 3
		for round := range 2 {
			before := parseState(t, exportState(t, tr), tr.NumParams())
			if round == 0 && (before.delta != nil || before.m != nil) {
				t.Fatal("a new trainer has optimizer buffers")
			}
			if err := tr.LoCoBegin(); err != nil {
				t.Fatal(err)
			}
			innerSteps(t, tr, text, 100*round, H)
			mid := parseState(t, exportState(t, tr), tr.NumParams())
			moved := 0
			for i := range mid.params {
				if mid.params[i] != before.params[i] {
					moved++
				}
			}
			if moved < len(mid.params)/2 {
				t.Fatalf("inner steps moved only %d of %d weights", moved, len(mid.params))
			}
			p, err := tr.LoCoGenerate(hp)
			if err != nil {
				t.Fatal(err)
			}
			after := parseState(t, exportState(t, tr), tr.NumParams())
			if i := sameBits(after.params, before.params); i >= 0 {
				t.Fatalf("%+v round %d: weight %d is %v after generate, %v at begin", hp, round, i, after.params[i], before.params[i])
			}
			if after.step != before.step {
				t.Errorf("step %d after generate, %d at begin", after.step, before.step)
			}
			if after.adamT != before.adamT+H {
				t.Errorf("adam t %d after generate, want %d + %d", after.adamT, before.adamT, H)
			}
			if after.flags != flagDelta|1 {
				t.Errorf("flags %#x after generate, want moments and delta", after.flags)
			}
			if sameBits(after.m, mid.m) >= 0 || sameBits(after.v, mid.v) >= 0 {
				t.Error("generate changed the AdamW moments")
			}
			checkErrorFeedback(t, tr, hp, before.delta, before.params, mid.params, after.delta, p)
			if err := tr.LoCoApply(hp, [][]byte{p}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Ties: error feedback imported with few distinct magnitudes (and no
// inner steps, so e_pre = decay*e_old) makes most of each chunk tie.
func TestLoCoSelectionTies(t *testing.T) {
	tr := newTrainer(t, tinyConfig, 5)
	n := tr.NumParams()
	blob := exportState(t, tr)
	binary.LittleEndian.PutUint32(blob[stateFlagsOff:], flagDelta)
	eOld := make([]float32, n)
	for i := range eOld {
		eOld[i] = float32((i*7)%5-2) * 0.25 // -0.5, -0.25, 0, 0.25, 0.5
		blob = binary.LittleEndian.AppendUint32(blob, math.Float32bits(eOld[i]))
	}
	if err := tr.ImportState(blob); err != nil {
		t.Fatal(err)
	}
	x0 := params(t, tr)
	for _, hp := range []SparseLoCo{tinyLoCo, locoWide, withBits(locoWide, 32), {Decay: 1, Chunk: 5, TopK: 7, ValueBits: 8}} {
		if err := tr.ImportState(blob); err != nil {
			t.Fatal(err)
		}
		if err := tr.LoCoBegin(); err != nil {
			t.Fatal(err)
		}
		p, err := tr.LoCoGenerate(hp)
		if err != nil {
			t.Fatal(err)
		}
		after := parseState(t, exportState(t, tr), n)
		checkErrorFeedback(t, tr, hp, eOld, x0, x0, after.delta, p)
	}
}

// Apply of n payloads is x - min(1, OuterLR/n)*u, u the scatter-mean: at
// each position the sum over the payloads that hold it (in the given order,
// in float32) divided by their count; no payloads: the weights stay and the
// step advances.
func TestLoCoApplyMatchesReference(t *testing.T) {
	text := textFor(tinyConfig, 13, 8192)
	tensors, err := newTrainer(t, tinyConfig, 1).Tensors()
	if err != nil {
		t.Fatal(err)
	}
	capped := tinyLoCo
	capped.OuterLR = 8 // rate 1 up to 8 payloads
	for _, hp := range []SparseLoCo{tinyLoCo, withBits(locoWide, 32), withBits(tinyLoCo, 8), capped} {
		var payloads [][]byte
		for c := range 3 {
			tr := newTrainer(t, tinyConfig, 7)
			payloads = append(payloads, locoRound(t, tr, hp, text, 1000*c, 2))
		}
		rep := newTrainer(t, tinyConfig, 7)
		state := exportState(t, rep)
		x := params(t, rep)
		for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1}} {
			var ps [][]byte
			acc, cnt := make([]float32, len(x)), make([]int, len(x))
			for _, c := range order {
				ps = append(ps, payloads[c])
				d := decodeLoCo(t, hp, payloads[c])
				for ti := range d.Tensors {
					pt := &d.Tensors[ti]
					for e, ix := range pt.Indices {
						pos := tensors[ti].Offset + chunkPos(pt, e/pt.K, ix)
						acc[pos] = acc[pos] + pt.Values[e]
						cnt[pos]++
					}
				}
			}
			rate := float32(1)
			if n := float32(len(order)); hp.OuterLR < n {
				rate = hp.OuterLR / n
			}
			want := make([]float32, len(x))
			changed, shared := 0, 0
			for i := range want {
				u := acc[i]
				if cnt[i] > 1 {
					u /= float32(cnt[i])
					shared++
				}
				want[i] = x[i] - rate*u
				if want[i] != x[i] {
					changed++
				}
			}
			if changed == 0 || (len(order) > 1 && shared == 0) {
				t.Fatalf("the reference apply changes %d weights, %d held by several payloads: it shows nothing", changed, shared)
			}
			if err := rep.ImportState(state); err != nil {
				t.Fatal(err)
			}
			if err := rep.LoCoApply(hp, ps); err != nil {
				t.Fatal(err)
			}
			if i := sameBits(params(t, rep), want); i >= 0 {
				t.Fatalf("%+v order %v: parameter %d is %v, reference %v", hp, order, i, params(t, rep)[i], want[i])
			}
			if s := parseState(t, exportState(t, rep), len(x)); s.step != 1 || s.flags != 0 {
				t.Errorf("after apply: step %d flags %#x, want 1 and 0", s.step, s.flags)
			}
		}
	}
	// No payloads: only the step counter moves.
	tr := newTrainer(t, tinyConfig, 8)
	locoRound(t, tr, tinyLoCo, text, 0, 2)
	before := exportState(t, tr)
	if err := tr.LoCoApply(tinyLoCo, nil); err != nil {
		t.Fatal(err)
	}
	after := exportState(t, tr)
	if binary.LittleEndian.Uint64(after[32:]) != binary.LittleEndian.Uint64(before[32:])+1 {
		t.Error("apply without payloads did not advance the step")
	}
	binary.LittleEndian.PutUint64(after[32:], binary.LittleEndian.Uint64(before[32:]))
	if !bytes.Equal(after, before) {
		t.Error("apply without payloads changed more than the step counter")
	}
}

// Abort restores the state blob exactly: a new trainer (no moments, no
// error feedback) and one with both from an applied round.
func TestLoCoAbortRestoresState(t *testing.T) {
	text := textFor(tinyConfig, 14, 4096)
	tr := newTrainer(t, tinyConfig, 9)
	if err := tr.LoCoAbort(); !errors.Is(err, ErrInvalid) {
		t.Errorf("abort without a round: %v", err)
	}
	for round := range 2 {
		before := exportState(t, tr)
		if err := tr.LoCoBegin(); err != nil {
			t.Fatal(err)
		}
		innerSteps(t, tr, text, 50, 3)
		if bytes.Equal(exportState(t, tr), before) {
			t.Fatal("inner steps changed nothing")
		}
		if err := tr.LoCoAbort(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(exportState(t, tr), before) {
			t.Fatalf("round %d: abort did not restore the state", round)
		}
		if err := tr.LoCoAbort(); !errors.Is(err, ErrInvalid) {
			t.Errorf("a second abort: %v", err)
		}
		// Nothing else survives the aborted round: the next round gives
		// what a trainer loaded with the same state gives.
		other := newTrainer(t, tinyConfig, 99)
		if err := other.ImportState(before); err != nil {
			t.Fatal(err)
		}
		p := locoRound(t, tr, tinyLoCo, text, 0, 2)
		if q := locoRound(t, other, tinyLoCo, text, 0, 2); !bytes.Equal(p, q) {
			t.Fatal("a round after an abort differs from the same round on a fresh copy")
		}
		if err := tr.LoCoApply(tinyLoCo, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if s := parseState(t, exportState(t, tr), tr.NumParams()); s.m == nil || s.delta == nil {
				t.Fatal("no moments or error feedback after a round")
			}
		}
	}
}

// Malformed payloads are rejected by the trainer and the Go decoder
// alike, and an apply that includes one changes nothing.
func TestLoCoMalformedPayloadRejected(t *testing.T) {
	text := textFor(tinyConfig, 15, 4096)
	tr := newTrainer(t, tinyConfig, 10)
	hp := tinyLoCo
	good := locoRound(t, tr, hp, text, 0, 2)
	hp32 := withBits(hp, 32)
	tr32 := newTrainer(t, tinyConfig, 10)
	good32 := locoRound(t, tr32, hp32, text, 0, 2)
	d := decodeLoCo(t, hp, good)
	// A tensor whose chunk size is not a power of two (an index can be out
	// of range), and one whose bit stream leaves padding in its last byte.
	odd, padAt, off := -1, -1, payloadHeader
	for ti := range d.Tensors {
		pt := &d.Tensors[ti]
		if n := pt.ChunkRows * pt.ChunkCols; n&(n-1) != 0 && odd < 0 {
			odd = ti
		}
		off += pt.locoBytes(hp.ValueBits)
		if pt.entries()*(pt.IndexBits+hp.ValueBits)%8 != 0 && padAt < 0 {
			padAt = off - 1
		}
	}
	if odd < 0 || padAt < 0 || d.Tensors[0].K < 2 {
		t.Fatalf("test layout: odd-sized tensor %d, padding byte %d, k %d", odd, padAt, d.Tensors[0].K)
	}
	edit := func(hp SparseLoCo, p []byte, f func(*Payload)) func() []byte {
		return func() []byte {
			d := decodeLoCo(t, hp, p)
			f(d)
			return d.Encode()
		}
	}
	clone := func(f func([]byte) []byte) func() []byte {
		return func() []byte { return f(bytes.Clone(good)) }
	}
	scale := func(s float32) func() []byte {
		return edit(hp, good, func(d *Payload) { d.Tensors[3].Scales[1] = s })
	}
	hugeScale := func(d *Payload) {
		pt := &d.Tensors[3]
		pt.Scales[1] = 2e30
		for j := range pt.K {
			pt.Codes[pt.K+j] = 1
		}
	}
	value32 := func(v float32) func() []byte {
		return edit(hp32, good32, func(d *Payload) { d.Tensors[2].Codes[0] = math.Float32bits(v) })
	}
	for _, tc := range []struct {
		name string
		is32 bool
		bad  func() []byte
	}{
		{"empty", false, func() []byte { return nil }},
		{"header only", false, clone(func(b []byte) []byte { return b[:4] })},
		{"wrong magic", false, clone(func(b []byte) []byte { b[0] = 'Q'; return b })},
		{"DeMo magic", false, clone(func(b []byte) []byte { b[1] = 'D'; return b })},
		{"version 0", false, clone(func(b []byte) []byte { b[2] = 0; return b })},
		{"version 2", false, clone(func(b []byte) []byte { b[2] = 2; return b })},
		{"value bits 4 (other run)", false, clone(func(b []byte) []byte { b[3] = 4; return b })},
		{"value bits 3", false, clone(func(b []byte) []byte { b[3] = 3; return b })},
		{"value bits 32", false, clone(func(b []byte) []byte { b[3] = 32; return b })},
		{"one byte short", false, clone(func(b []byte) []byte { return b[:len(b)-1] })},
		{"one byte long", false, clone(func(b []byte) []byte { return append(b, 0) })},
		{"index out of range", false, edit(hp, good, func(d *Payload) {
			pt := &d.Tensors[odd]
			pt.Indices[0] = uint32(pt.ChunkRows * pt.ChunkCols)
		})},
		{"largest index out of range", false, edit(hp, good, func(d *Payload) {
			pt := &d.Tensors[odd]
			pt.Indices[len(pt.Indices)-1] = 1<<pt.IndexBits - 1
		})},
		{"repeated index", false, edit(hp, good, func(d *Payload) { d.Tensors[0].Indices[1] = d.Tensors[0].Indices[0] })},
		{"repeated index, last chunk", false, edit(hp, good, func(d *Payload) {
			ix := d.Tensors[15].Indices
			ix[len(ix)-1] = ix[len(ix)-2]
		})},
		{"NaN scale", false, scale(float32(math.NaN()))},
		{"negative scale", false, scale(-1)},
		{"tiny negative scale", false, scale(-math.SmallestNonzeroFloat32)},
		{"+Inf scale", false, scale(float32(math.Inf(1)))},
		{"scale 2e30", false, scale(2e30)},
		// Middle codes keep every value of the chunk within 1e30 (2e30/3):
		// only the scale's own bound rejects it.
		{"scale 2e30, middle codes", false, edit(hp, good, hugeScale)},
		{"padding bits", false, clone(func(b []byte) []byte { b[padAt] |= 0x80; return b })},
		{"32-bit NaN value", true, value32(float32(math.NaN()))},
		{"32-bit -Inf value", true, value32(float32(math.Inf(-1)))},
		{"32-bit 2e30 value", true, value32(2e30)},
		{"32-bit payload, 2-bit header", true, func() []byte { b := bytes.Clone(good32); b[3] = 2; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, x, g := hp, tr, good
			if tc.is32 {
				h, x, g = hp32, tr32, good32
			}
			bad := tc.bad()
			if bytes.Equal(bad, g) {
				t.Fatal("the edit changed nothing")
			}
			before := exportState(t, x)
			if err := x.LoCoValidate(h, bad); !errors.Is(err, ErrPayload) {
				t.Errorf("LoCoValidate: got %v, want ErrPayload", err)
			}
			if _, err := DecodeLoCoPayload(tinyConfig, h, bad); !errors.Is(err, ErrPayload) {
				t.Errorf("DecodeLoCoPayload: got %v, want ErrPayload", err)
			}
			if err := x.LoCoApply(h, [][]byte{g, bad}); !errors.Is(err, ErrPayload) {
				t.Errorf("LoCoApply: got %v, want ErrPayload", err)
			}
			if !bytes.Equal(exportState(t, x), before) {
				t.Fatal("a rejected apply changed the trainer")
			}
		})
	}
	// The edits above that keep a value legal are accepted: a zero scale,
	// the largest in-range index, a 32-bit value of 1e30.
	for _, ok := range [][]byte{scale(0)(), value32(1e30)()} {
		h := hp
		if len(ok) == len(good32) && ok[3] == 32 {
			h = hp32
		}
		if err := tr.LoCoValidate(h, ok); err != nil {
			t.Errorf("a legal edit: %v", err)
		}
		if _, err := DecodeLoCoPayload(tinyConfig, h, ok); err != nil {
			t.Errorf("a legal edit: %v", err)
		}
	}
	if err := tr.LoCoApply(hp, [][]byte{good, good}); err != nil {
		t.Fatal(err)
	}
}

// Thread count changes no bit: same payload and same state after the
// apply. Replicas that apply the same payloads end identical, whichever
// client they are and whether they trained at all.
func TestLoCoThreadsAndReplicas(t *testing.T) {
	for _, cfg := range []Config{tinyConfig, tinyLlama} {
		t.Run(cfg.Name, func(t *testing.T) { checkLoCoThreadsAndReplicas(t, cfg) })
	}
}

func checkLoCoThreadsAndReplicas(t *testing.T, cfg Config) {
	text := textFor(cfg, 16, 8192)
	var payload []byte
	var state []byte
	for _, threads := range []int{1, 2, 3} {
		tr := newTrainer(t, cfg, 11)
		if err := tr.SetThreads(threads); err != nil {
			t.Fatal(err)
		}
		p := locoRound(t, tr, locoWide, text, 0, 3)
		if err := tr.LoCoApply(locoWide, [][]byte{p, p}); err != nil {
			t.Fatal(err)
		}
		s := exportState(t, tr)
		if payload == nil {
			payload, state = p, s
			continue
		}
		if !bytes.Equal(p, payload) || !bytes.Equal(s, state) {
			t.Fatalf("%d threads: payload equal %v, state equal %v", threads, bytes.Equal(p, payload), bytes.Equal(s, state))
		}
	}
	clients := []*Trainer{newTrainer(t, cfg, 12), newTrainer(t, cfg, 12), newTrainer(t, cfg, 12)}
	watcher := newTrainer(t, cfg, 12) // applies, never trains
	for i, c := range append(clients, watcher) {
		if err := c.SetThreads(1 + i%2); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		var ps [][]byte
		for i, c := range clients {
			ps = append(ps, locoRound(t, c, tinyLoCo, text, 500*i+100*round, 2))
		}
		if bytes.Equal(ps[0], ps[1]) {
			t.Fatal("clients on different data sent the same payload")
		}
		for _, c := range append(clients, watcher) {
			if err := c.LoCoApply(tinyLoCo, ps); err != nil {
				t.Fatal(err)
			}
		}
		want := params(t, watcher)
		for i, c := range clients {
			if j := sameBits(params(t, c), want); j >= 0 {
				t.Fatalf("round %d: client %d differs from the watcher at parameter %d", round, i, j)
			}
		}
	}
}

// Bad settings and calls out of order are errors that change nothing.
func TestLoCoInvalidUse(t *testing.T) {
	text := textFor(tinyConfig, 17, 4096)
	tr := newTrainer(t, tinyConfig, 13)
	good := locoRound(t, tr, tinyLoCo, text, 0, 2)
	if err := tr.LoCoApply(tinyLoCo, [][]byte{good}); err != nil {
		t.Fatal(err)
	}
	bad := []SparseLoCo{
		withBits(tinyLoCo, 3), withBits(tinyLoCo, 0), withBits(tinyLoCo, 16), withBits(tinyLoCo, 64),
		{OuterLR: 1, Decay: 0.9, Chunk: 8, TopK: 0, ValueBits: 2},
		{OuterLR: 1, Decay: 0.9, Chunk: 8, TopK: 65536, ValueBits: 2},
		{OuterLR: 1, Decay: 0.9, Chunk: 300, TopK: 3, ValueBits: 2},
		{OuterLR: 1, Decay: 0.9, Chunk: 0, TopK: 3, ValueBits: 2},
		{OuterLR: float32(math.NaN()), Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: -1, Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: float32(math.Inf(1)), Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: 1, Decay: 1.5, Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: 1, Decay: -0.1, Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: 1, Decay: float32(math.NaN()), Chunk: 12, TopK: 3, ValueBits: 2},
		{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2, Members: -1},
		{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2, Members: 65536},
		{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2, Overlap: true},
	}
	// Settings that would wrap to valid ones in a 32-bit C int.
	if wrap := math.MaxInt32; wrap+wrap+2 > math.MaxInt32 {
		wrap += wrap + 2 // 2^32
		bad = append(bad, withBits(tinyLoCo, wrap+2),
			SparseLoCo{OuterLR: 1, Decay: 0.9, Chunk: wrap + 12, TopK: 3, ValueBits: 2},
			SparseLoCo{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: wrap + 3, ValueBits: 2},
			SparseLoCo{OuterLR: 1, Decay: 0.9, Chunk: 12, TopK: 3, ValueBits: 2, Members: wrap + 3})
	}
	before := exportState(t, tr)
	for _, hp := range bad {
		if _, err := tr.LoCoPayloadSize(hp); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: LoCoPayloadSize: %v", hp, err)
		}
		if err := tr.LoCoValidate(hp, good); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: LoCoValidate: %v", hp, err)
		}
		if _, err := DecodeLoCoPayload(tinyConfig, hp, good); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: DecodeLoCoPayload: %v", hp, err)
		}
		for _, ps := range [][][]byte{nil, {good}} {
			if err := tr.LoCoApply(hp, ps); !errors.Is(err, ErrInvalid) {
				t.Errorf("%+v: LoCoApply of %d payloads: %v", hp, len(ps), err)
			}
		}
	}
	if _, err := tr.LoCoGenerate(tinyLoCo); !errors.Is(err, ErrInvalid) {
		t.Errorf("generate without a round: %v", err)
	}
	if !bytes.Equal(exportState(t, tr), before) {
		t.Fatal("rejected calls changed the trainer")
	}
	// Inside a round: a second begin, an apply and a generate with bad
	// settings fail and leave the round going.
	if err := tr.LoCoBegin(); err != nil {
		t.Fatal(err)
	}
	innerSteps(t, tr, text, 64, 2)
	mid := exportState(t, tr)
	if err := tr.LoCoBegin(); !errors.Is(err, ErrInvalid) {
		t.Errorf("begin twice: %v", err)
	}
	if err := tr.LoCoApply(tinyLoCo, [][]byte{good}); !errors.Is(err, ErrInvalid) {
		t.Errorf("apply inside a round: %v", err)
	}
	if err := tr.LoCoApply(tinyLoCo, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("apply of no payloads inside a round: %v", err)
	}
	for _, hp := range bad {
		if _, err := tr.LoCoGenerate(hp); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: LoCoGenerate: %v", hp, err)
		}
	}
	if !bytes.Equal(exportState(t, tr), mid) {
		t.Fatal("rejected calls inside a round changed the trainer")
	}
	p, err := tr.LoCoGenerate(tinyLoCo)
	if err != nil {
		t.Fatalf("generate after the rejected calls: %v", err)
	}
	if err := tr.LoCoValidate(tinyLoCo, p); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.LoCoGenerate(tinyLoCo); !errors.Is(err, ErrInvalid) {
		t.Errorf("a second generate: %v", err)
	}
}

// A round replays bit for bit from the replay state before it, and the
// replay state after LoCoApply is AfterLoCoApply of the one after generate.
func TestLoCoReplayState(t *testing.T) {
	text := textFor(tinyConfig, 18, 8192)
	a, b := newTrainer(t, tinyConfig, 14), newTrainer(t, tinyConfig, 15)
	for round := range 3 {
		x0 := params(t, a)
		before, err := a.ReplayState()
		if err != nil {
			t.Fatal(err)
		}
		if FreshReplayState(before) != (round == 0) {
			t.Fatalf("round %d: fresh replay state %v", round, FreshReplayState(before))
		}
		payload := locoRound(t, a, tinyLoCo, text, 200*round, 3)
		after, err := a.ReplayState()
		if err != nil {
			t.Fatal(err)
		}
		replay := func(start int) ([]byte, []byte) {
			t.Helper()
			if err := b.LoadReplayState(before, x0); err != nil {
				t.Fatal(err)
			}
			p := locoRound(t, b, tinyLoCo, text, start, 3)
			rs, err := b.ReplayState()
			if err != nil {
				t.Fatal(err)
			}
			return p, rs
		}
		if p, rs := replay(200 * round); !bytes.Equal(p, payload) || !bytes.Equal(rs, after) {
			t.Fatalf("round %d: replay differs: payload equal %v, state after equal %v", round, bytes.Equal(p, payload), bytes.Equal(rs, after))
		}
		if p, _ := replay(200*round + 3000); bytes.Equal(p, payload) {
			t.Errorf("round %d: a replay on other data gave the same payload", round)
		}
		want, err := AfterLoCoApply(after)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.LoCoApply(tinyLoCo, [][]byte{payload, payload}); err != nil {
			t.Fatal(err)
		}
		if got, err := a.ReplayState(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: the replay state after LoCoApply is not AfterLoCoApply's (err %v)", round, err)
		}
	}
	if _, err := AfterLoCoApply(make([]byte, 10)); !errors.Is(err, ErrState) {
		t.Errorf("AfterLoCoApply of a short state: %v", err)
	}
}

// Two clients learning a repeating sequence with SparseLoCo rounds
// (H = 4) bring the loss well down.
func TestLoCoConverges(t *testing.T) {
	for _, cfg := range []Config{tinyConfig, tinyLlama} {
		t.Run(cfg.Name, func(t *testing.T) { checkLoCoConverges(t, cfg) })
	}
}

func checkLoCoConverges(t *testing.T, cfg Config) {
	text := make([]byte, 4096)
	pattern := []byte{3, 17, 5, 29, 11, 2, 23, 7, 19, 13, 31}
	for i := range text {
		text[i] = pattern[i%len(pattern)]
	}
	T := cfg.SeqLen
	evalTok, evalTgt := Window(text, 1, 8, T)
	eval := func(tr *Trainer) float32 {
		l, err := tr.Eval(context.Background(), evalTok, evalTgt, T)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	hp := SparseLoCo{OuterLR: 1, Decay: 0.95, Chunk: 8, TopK: 16, ValueBits: 4}
	clients := []*Trainer{newTrainer(t, cfg, 21), newTrainer(t, cfg, 21)}
	start := eval(clients[0])
	const rounds, H = 6, 4
	for r := range rounds {
		var ps [][]byte
		for i, c := range clients {
			if err := c.LoCoBegin(); err != nil {
				t.Fatal(err)
			}
			for h := range H {
				// Each client its own fixed batch of 2 sequences.
				tok, tgt := Window(text, 5*i+h%2, locoSeqs, T)
				if _, err := c.Step(context.Background(), tok, tgt, T); err != nil {
					t.Fatal(err)
				}
				if err := c.AdamWStep(locoInner); err != nil {
					t.Fatal(err)
				}
			}
			p, err := c.LoCoGenerate(hp)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		for _, c := range clients {
			if err := c.LoCoApply(hp, ps); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("round %d: loss %.4f", r, eval(clients[0]))
	}
	end := eval(clients[0])
	if sameBits(params(t, clients[0]), params(t, clients[1])) >= 0 {
		t.Fatal("the clients' replicas differ")
	}
	if !(end < 0.6*start) {
		t.Fatalf("loss %.4f after %d rounds, %.4f at the start: want below 60%%", end, rounds, start)
	}
}

// FuzzLoCoPayload: the Go decoder accepts exactly what the trainer
// accepts, re-encodes what it accepts unchanged, and an accepted payload
// applies. The second argument picks the value width (1, 2, 4, 8, 32).
// Seeds: a real payload of each width, edits of them, short inputs.
func FuzzLoCoPayload(f *testing.F) {
	text := textFor(tinyConfig, 19, 4096)
	gen := newTrainer(f, tinyConfig, 16)
	for i, vb := range locoAllBits {
		hp := withBits(tinyLoCo, vb)
		p := locoRound(f, gen, hp, text, 64*i, 1)
		if err := gen.LoCoApply(hp, [][]byte{p}); err != nil {
			f.Fatal(err)
		}
		sel := uint8(i)
		f.Add(p, sel)
		f.Add(p, sel+1) // another width's header: rejected
		f.Add(p[:len(p)-1], sel)
		f.Add(append(bytes.Clone(p), 0), sel)
		mid := bytes.Clone(p)
		mid[len(mid)/2] ^= 0x5a
		f.Add(mid, sel)
		last := bytes.Clone(p)
		last[len(last)-1] = 0xff
		f.Add(last, sel)
		scale := bytes.Clone(p)
		scale[payloadHeader+3] = 0x7f // tensor 0's first scale (or 32-bit entry) made huge
		f.Add(scale, sel)
	}
	// A 2-bit payload whose chunk has scale 2e30 and only middle codes.
	hp := withBits(tinyLoCo, 2)
	p := locoRound(f, gen, hp, text, 0, 1)
	d, err := DecodeLoCoPayload(tinyConfig, hp, p)
	if err != nil {
		f.Fatal(err)
	}
	for j := range d.Tensors[0].K {
		d.Tensors[0].Codes[j] = 1 + uint32(j%2)
	}
	d.Tensors[0].Scales[0] = 1e30
	f.Add(d.Encode(), uint8(1))
	d.Tensors[0].Scales[0] = 2e30
	f.Add(d.Encode(), uint8(1))
	f.Add([]byte("PL\x01\x02"), uint8(1))
	f.Add([]byte(nil), uint8(0))
	tr := newTrainer(f, tinyConfig, 3)
	f.Fuzz(func(t *testing.T, p []byte, sel uint8) {
		hp := withBits(tinyLoCo, locoAllBits[int(sel)%len(locoAllBits)])
		d, goErr := DecodeLoCoPayload(tinyConfig, hp, p)
		if !decodersAgree(t, tr.LoCoValidate(hp, p), goErr, d, p) {
			return
		}
		hp.OuterLR = 0 // keep the fuzzing trainer's weights finite
		if err := tr.LoCoApply(hp, [][]byte{p}); err != nil {
			t.Fatalf("apply of a valid payload: %v", err)
		}
	})
}

// A trainer whose DeMo lookahead is on (a DeMo state) trains a round's
// inner steps at its weights, not at the lookahead, and an aborted round
// leaves the lookahead as it was.
func TestLoCoAbortKeepsTheLookahead(t *testing.T) {
	text := textFor(tinyConfig, 16, 4096)
	tr := newTrainer(t, tinyConfig, 11)
	step(t, tr, text, 0, locoSeqs, tinyConfig.SeqLen)
	p, err := tr.DeMoGenerate(testDeMo)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.DeMoApply(testDeMo, [][]byte{p}); err != nil {
		t.Fatal(err)
	}
	before := exportState(t, tr)
	if binary.LittleEndian.Uint32(before[stateFlagsOff:])&flagLookahead == 0 {
		t.Fatal("the DeMo step left the lookahead off")
	}
	// The inner steps' gradients are those of the weights: a copy without
	// the lookahead (same parameters) computes the same loss.
	plain := newTrainer(t, tinyConfig, 12)
	params, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.SetParams(params); err != nil {
		t.Fatal(err)
	}
	if err := tr.LoCoBegin(); err != nil {
		t.Fatal(err)
	}
	in, tg := Window(text, 64, locoSeqs, tinyConfig.SeqLen)
	la, err := tr.Step(context.Background(), in, tg, tinyConfig.SeqLen)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := plain.Step(context.Background(), in, tg, tinyConfig.SeqLen)
	if err != nil {
		t.Fatal(err)
	}
	if la != lb {
		t.Errorf("inner step loss %v, at the weights %v: the round trained at the lookahead", la, lb)
	}
	if err := tr.LoCoAbort(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(exportState(t, tr), before) {
		t.Error("abort did not restore the state with its lookahead")
	}
}

// Overlapped rounds: after a generate with Overlap, the next round trains
// from the replica's weights less this client's own share of the outer
// step still to come (its payload's values at the rate of a round of all
// Members: min(1, OuterLR/Members)), and its
// pseudo-gradient is measured from there; the weights go back to the
// replica's at generate and abort. The share travels in the state, so a
// restored trainer replays the round bit for bit; a generate without
// Overlap drops it.
func TestLoCoOverlapTrainsFromOwnShare(t *testing.T) {
	text := textFor(tinyConfig, 17, 8192)
	tensors, err := newTrainer(t, tinyConfig, 1).Tensors()
	if err != nil {
		t.Fatal(err)
	}
	hp := tinyLoCo
	hp.Overlap, hp.Members = true, 3
	a, other := newTrainer(t, tinyConfig, 7), newTrainer(t, tinyConfig, 7)
	p1 := locoRound(t, a, hp, text, 0, 2)
	q1 := locoRound(t, other, hp, text, 500, 2)
	if err := a.LoCoApply(hp, [][]byte{p1, q1}); err != nil {
		t.Fatal(err)
	}
	x := params(t, a)
	want := slices.Clone(x)
	d := decodeLoCo(t, hp, p1)
	for ti := range d.Tensors {
		pt := &d.Tensors[ti]
		for e, ix := range pt.Indices {
			pos := tensors[ti].Offset + chunkPos(pt, e/pt.K, ix)
			want[pos] = x[pos] - hp.OuterLR/3*pt.Values[e]
		}
	}
	saved := exportState(t, a)
	if err := a.LoCoBegin(); err != nil {
		t.Fatal(err)
	}
	if i := sameBits(params(t, a), want); i >= 0 || sameBits(want, x) < 0 {
		t.Fatalf("an overlapped round does not start at the weights less the own share (first difference at %d)", i)
	}
	if err := a.LoCoAbort(); err != nil {
		t.Fatal(err)
	}
	if i := sameBits(params(t, a), x); i >= 0 {
		t.Fatalf("abort did not restore the replica's weights (parameter %d)", i)
	}
	p2 := locoRound(t, a, hp, text, 1000, 2)
	if i := sameBits(params(t, a), x); i >= 0 {
		t.Fatalf("generate did not restore the replica's weights (parameter %d)", i)
	}
	restored := newTrainer(t, tinyConfig, 3)
	if err := restored.ImportState(saved); err != nil {
		t.Fatal(err)
	}
	if r := locoRound(t, restored, hp, text, 1000, 2); !bytes.Equal(r, p2) {
		t.Fatal("a trainer restored from the state before the round does not replay its payload")
	}
	plain := hp
	plain.Overlap = false
	locoRound(t, a, plain, text, 2000, 2)
	if n := len(exportState(t, a)); n != len(saved)-4*a.NumParams() {
		t.Fatalf("a generate without Overlap left a %d-byte state, want %d", n, len(saved)-4*a.NumParams())
	}
}
