package trainer

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Payload format v2 constants (README.md, "DeMo payload format").
const (
	PayloadMagic   = "PD"
	PayloadVersion = 2
	payloadHeader  = 4
	flagOneBit     = 1
	maxChunk       = 256
	maxTopK        = 65535
)

// Payload is a decoded payload: per parameter tensor, DeMo's top-k
// chunked-DCT coefficients of one client's momentum, or SparseLoCo's top-k
// entries of its pseudo-gradient with error feedback (ValueBits set).
type Payload struct {
	OneBit    bool // DeMo
	ValueBits int  // SparseLoCo: 1, 2, 4, 8 or 32; 0 for DeMo
	Tensors   []PayloadTensor
}

// PayloadTensor is one tensor's sparse coefficients. The layout fields
// (shape, chunk, k, index width) follow from the model config and the DeMo
// hyperparameters; only the entries travel on the wire.
type PayloadTensor struct {
	Rows, Cols           int // 2-D view of the parameter tensor
	ChunkRows, ChunkCols int
	K                    int       // entries per chunk
	IndexBytes           int       // DeMo: 1, 2 or 4
	IndexBits            int       // SparseLoCo: enough for the chunk size - 1
	Indices              []uint32  // chunk-major, k per chunk, index inside the chunk (row-major)
	Signs                []bool    // DeMo one-bit only: true = -1, false = +1
	Values               []float32 // DeMo values when not one-bit; SparseLoCo's decoded values
	Scales               []float32 // SparseLoCo below 32 bits: one per chunk
	Codes                []uint32  // SparseLoCo: the value's bits (a code, or the f32 with 32 bits)
}

// Chunks returns the number of chunks of the tensor.
func (t *PayloadTensor) Chunks() int { return (t.Rows / t.ChunkRows) * (t.Cols / t.ChunkCols) }

func (t *PayloadTensor) entries() int { return t.Chunks() * t.K }

func (t *PayloadTensor) bytes(oneBit bool) int {
	e := t.entries()
	if oneBit {
		return e*t.IndexBytes + (e+7)/8
	}
	return e * (t.IndexBytes + 4)
}

// payloadLayout returns the tensors of a payload for cfg and hp with their
// layout fields set, in parameter order, as the native trainer lays them out:
// stacked per-layer matrices (L, OC, IC) are viewed as (L*OC, IC) with row
// chunks dividing OC, stacked vectors (L, n) as (L, n), vectors (C) as (1, C).
func payloadLayout(cfg Config, hp DeMo) ([]PayloadTensor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if hp.Chunk < 1 || hp.Chunk > maxChunk || hp.TopK < 1 || hp.TopK > maxTopK {
		return nil, fmt.Errorf("DeMo chunk %d (want 1..%d) or top-k %d (want 1..%d): %w", hp.Chunk, maxChunk, hp.TopK, maxTopK, ErrInvalid)
	}
	var dims [][3]int // rows, cols, rows per layer
	for _, s := range cfg.shapes() {
		switch len(s) {
		case 3:
			dims = append(dims, [3]int{s[0] * s[1], s[2], s[1]})
		case 2:
			dims = append(dims, [3]int{s[0], s[1], s[0]})
		default:
			dims = append(dims, [3]int{1, s[0], 1})
		}
	}
	out := make([]PayloadTensor, len(dims))
	for i, d := range dims {
		t := PayloadTensor{Rows: d[0], Cols: d[1], ChunkRows: largestDivisor(d[2], hp.Chunk), ChunkCols: largestDivisor(d[1], hp.Chunk)}
		n := t.ChunkRows * t.ChunkCols
		t.K = min(hp.TopK, n)
		t.IndexBytes = indexBytes(n)
		out[i] = t
	}
	return out, nil
}

func largestDivisor(n, limit int) int {
	for d := min(n, limit); d > 1; d-- {
		if n%d == 0 {
			return d
		}
	}
	return 1
}

func indexBytes(chunk int) int {
	switch {
	case chunk <= 256:
		return 1
	case chunk <= 65536:
		return 2
	}
	return 4
}

// DecodePayload parses p as a payload for a model of shape cfg trained with
// the DeMo hyperparameters hp: exact length, header, indices in range and
// distinct within each chunk, finite values, zero padding bits. It accepts
// exactly what the trainer's ValidatePayload accepts; errors wrap ErrPayload
// (or ErrInvalid for a bad cfg or hp).
func DecodePayload(cfg Config, hp DeMo, p []byte) (*Payload, error) {
	tensors, err := payloadLayout(cfg, hp)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*Payload, error) {
		return nil, fmt.Errorf("%w: %s", ErrPayload, fmt.Sprintf(format, args...))
	}
	if len(p) < payloadHeader || string(p[:2]) != PayloadMagic {
		return fail("missing %q header", PayloadMagic)
	}
	if p[2] != PayloadVersion {
		return fail("version %d, want %d", p[2], PayloadVersion)
	}
	if p[3]&^flagOneBit != 0 {
		return fail("unknown flags %#x", p[3])
	}
	out := &Payload{OneBit: p[3]&flagOneBit != 0, Tensors: tensors}
	if out.OneBit != hp.OneBit {
		return fail("one-bit values %v, this run uses %v", out.OneBit, hp.OneBit)
	}
	want := payloadHeader
	for i := range tensors {
		want += tensors[i].bytes(out.OneBit)
	}
	if len(p) != want {
		return fail("%d bytes, want %d for this model and DeMo settings", len(p), want)
	}
	off := payloadHeader
	for ti := range out.Tensors {
		t := &out.Tensors[ti]
		e, chunk := t.entries(), uint32(t.ChunkRows*t.ChunkCols)
		q := p[off : off+t.bytes(out.OneBit)]
		t.Indices = make([]uint32, e)
		seen := make(map[uint32]bool, t.K)
		for i := range t.Indices {
			if i%t.K == 0 {
				clear(seen)
			}
			var ix uint32
			switch t.IndexBytes {
			case 1:
				ix = uint32(q[i])
			case 2:
				ix = uint32(binary.LittleEndian.Uint16(q[2*i:]))
			default:
				ix = binary.LittleEndian.Uint32(q[4*i:])
			}
			if ix >= chunk || seen[ix] {
				return fail("tensor %d: entry %d: index %d out of range or repeated", ti, i, ix)
			}
			seen[ix] = true
			t.Indices[i] = ix
		}
		q = q[e*t.IndexBytes:]
		if out.OneBit {
			t.Signs = make([]bool, e)
			for i := range t.Signs {
				t.Signs[i] = q[i/8]>>(i%8)&1 == 1
			}
			if r := e % 8; r != 0 && q[len(q)-1]>>r != 0 {
				return fail("tensor %d: nonzero padding bits", ti)
			}
		} else {
			t.Values = make([]float32, e)
			for i := range t.Values {
				v := math.Float32frombits(binary.LittleEndian.Uint32(q[4*i:]))
				if math.IsNaN(float64(v)) || v > 1e30 || v < -1e30 {
					return fail("tensor %d: entry %d: value %v", ti, i, v)
				}
				t.Values[i] = v
			}
		}
		off += t.bytes(out.OneBit)
	}
	return out, nil
}

// Encode serialises the payload: DeMo format v2 (the header, then each
// tensor's indices, IndexBytes wide, and its sign bits or values) or
// SparseLoCo format v1 (encodeLoCo). It does not check the entries;
// DecodePayload and DecodeLoCoPayload do.
func (p *Payload) Encode() []byte {
	if p.ValueBits != 0 {
		return p.encodeLoCo()
	}
	var flags byte
	if p.OneBit {
		flags = flagOneBit
	}
	out := append([]byte(PayloadMagic), PayloadVersion, flags)
	for _, t := range p.Tensors {
		for _, ix := range t.Indices {
			switch t.IndexBytes {
			case 1:
				out = append(out, byte(ix))
			case 2:
				out = binary.LittleEndian.AppendUint16(out, uint16(ix))
			default:
				out = binary.LittleEndian.AppendUint32(out, ix)
			}
		}
		if p.OneBit {
			bits := make([]byte, (len(t.Signs)+7)/8)
			for i, neg := range t.Signs {
				if neg {
					bits[i/8] |= 1 << (i % 8)
				}
			}
			out = append(out, bits...)
		} else {
			for _, v := range t.Values {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		}
	}
	return out
}
