package trainer

import (
	"encoding/binary"
	"fmt"
	"math"
)

// SparseLoCo payload format v1 constants (README.md, "SparseLoCo payload format").
const (
	LoCoPayloadMagic   = "PL"
	LoCoPayloadVersion = 1
)

// ValidValueBits says whether b is a SparseLoCo value width.
func ValidValueBits(b int) bool { return b == 1 || b == 2 || b == 4 || b == 8 || b == 32 }

func indexBits(chunk int) int {
	b := 0
	for 1<<b < chunk {
		b++
	}
	return b
}

func (t *PayloadTensor) locoBytes(vb int) int {
	n := (t.entries()*(t.IndexBits+vb) + 7) / 8
	if vb < 32 {
		n += 4 * t.Chunks()
	}
	return n
}

// LoCoValue decodes a code of vb bits at a chunk's scale s, as the trainer
// does: s * (2q - L) / L with L = 2^vb - 1; with 32 bits, q is the f32.
func LoCoValue(q uint32, s float32, vb int) float32 {
	if vb == 32 {
		return math.Float32frombits(q)
	}
	l := float32(uint32(1)<<vb - 1)
	return s * ((float32(2*q) - l) / l)
}

// DecodeLoCoPayload parses p as a SparseLoCo payload for a model of shape cfg
// and the settings hp: exact length, header, finite non-negative scales,
// indices in range and distinct within each chunk, finite values, zero
// padding bits. It accepts exactly what the trainer's LoCoValidate accepts;
// errors wrap ErrPayload (or ErrInvalid for a bad cfg or hp).
func DecodeLoCoPayload(cfg Config, hp SparseLoCo, p []byte) (*Payload, error) {
	if !ValidValueBits(hp.ValueBits) {
		return nil, fmt.Errorf("SparseLoCo value bits %d (want 1, 2, 4, 8 or 32): %w", hp.ValueBits, ErrInvalid)
	}
	// As tr_loco_check, which LoCoValidate applies first; negated for NaN.
	if !(hp.OuterLR >= 0 && hp.OuterLR < 1e6) || !(hp.Decay >= 0 && hp.Decay <= 1) {
		return nil, fmt.Errorf("SparseLoCo outer lr %v (want 0 <= lr < 1e6) or decay %v (want 0..1): %w", hp.OuterLR, hp.Decay, ErrInvalid)
	}
	if hp.Members < 0 || hp.Members > maxLoCoMembers || hp.Overlap && hp.Members < 1 {
		return nil, fmt.Errorf("SparseLoCo members %d (want 0..%d, at least 1 with overlap): %w", hp.Members, maxLoCoMembers, ErrInvalid)
	}
	tensors, err := payloadLayout(cfg, DeMo{Chunk: hp.Chunk, TopK: hp.TopK})
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*Payload, error) {
		return nil, fmt.Errorf("%w: %s", ErrPayload, fmt.Sprintf(format, args...))
	}
	vb := hp.ValueBits
	if len(p) < payloadHeader || string(p[:2]) != LoCoPayloadMagic {
		return fail("missing %q header", LoCoPayloadMagic)
	}
	if p[2] != LoCoPayloadVersion {
		return fail("version %d, want %d", p[2], LoCoPayloadVersion)
	}
	if int(p[3]) != vb {
		return fail("%d-bit values, this run uses %d", p[3], vb)
	}
	want := payloadHeader
	for i := range tensors {
		tensors[i].IndexBits = indexBits(tensors[i].ChunkRows * tensors[i].ChunkCols)
		want += tensors[i].locoBytes(vb)
	}
	if len(p) != want {
		return fail("%d bytes, want %d for this model and SparseLoCo settings", len(p), want)
	}
	out := &Payload{ValueBits: vb, Tensors: tensors}
	off := payloadHeader
	for ti := range out.Tensors {
		t := &out.Tensors[ti]
		q := p[off : off+t.locoBytes(vb)]
		if vb < 32 {
			t.Scales = make([]float32, t.Chunks())
			for b := range t.Scales {
				s := math.Float32frombits(binary.LittleEndian.Uint32(q[4*b:]))
				if !(s >= 0 && s <= 1e30) {
					return fail("tensor %d: chunk %d: scale %v", ti, b, s)
				}
				t.Scales[b] = s
			}
			q = q[4*t.Chunks():]
		}
		r := bitReader{p: q}
		e, chunk := t.entries(), uint32(t.ChunkRows*t.ChunkCols)
		t.Indices, t.Codes, t.Values = make([]uint32, e), make([]uint32, e), make([]float32, e)
		seen := make(map[uint32]bool, t.K)
		for i := range e {
			if i%t.K == 0 {
				clear(seen)
			}
			ix, c := r.read(t.IndexBits), r.read(vb)
			if ix >= chunk || seen[ix] {
				return fail("tensor %d: entry %d: index %d out of range or repeated", ti, i, ix)
			}
			seen[ix] = true
			var s float32
			if vb < 32 {
				s = t.Scales[i/t.K]
			}
			v := LoCoValue(c, s, vb)
			if math.IsNaN(float64(v)) || v > 1e30 || v < -1e30 {
				return fail("tensor %d: entry %d: value %v", ti, i, v)
			}
			t.Indices[i], t.Codes[i], t.Values[i] = ix, c, v
		}
		if r.pos%8 != 0 && q[len(q)-1]>>(r.pos%8) != 0 {
			return fail("tensor %d: nonzero padding bits", ti)
		}
		off += t.locoBytes(vb)
	}
	return out, nil
}

// encodeLoCo serialises in SparseLoCo format v1: the header, then per
// tensor its scales and the bit stream of (index, code) entries.
func (p *Payload) encodeLoCo() []byte {
	out := append([]byte(LoCoPayloadMagic), LoCoPayloadVersion, byte(p.ValueBits))
	for _, t := range p.Tensors {
		for _, s := range t.Scales {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(s))
		}
		var w bitWriter
		for i, ix := range t.Indices {
			w.write(ix, t.IndexBits)
			w.write(t.Codes[i], p.ValueBits)
		}
		out = append(out, w.p...)
	}
	return out
}

// Bit streams are least significant bit first.
type bitReader struct {
	p   []byte
	pos int
}

func (r *bitReader) read(n int) uint32 {
	var v uint32
	for i := range n {
		v |= uint32(r.p[r.pos/8]>>(r.pos%8)&1) << i
		r.pos++
	}
	return v
}

type bitWriter struct {
	p   []byte
	pos int
}

func (w *bitWriter) write(v uint32, n int) {
	for i := range n {
		if w.pos%8 == 0 {
			w.p = append(w.p, 0)
		}
		w.p[w.pos/8] |= byte(v>>i&1) << (w.pos % 8)
		w.pos++
	}
}
