package trainer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Payload format v1 constants (README.md, "DeMo payload format").
const (
	PayloadMagic   = "PDMO"
	PayloadVersion = 1
	payloadHeader  = 12
	tensorHeader   = 16
	flagOneBit     = 1
)

// Payload is a decoded DeMo payload: per parameter tensor, the top-k
// chunked-DCT coefficients of one client's momentum.
type Payload struct {
	OneBit  bool
	Tensors []PayloadTensor
}

// PayloadTensor is one tensor's sparse coefficients.
type PayloadTensor struct {
	Rows, Cols           int
	ChunkRows, ChunkCols int
	K                    int       // entries per chunk
	IndexBytes           int       // 1, 2 or 4
	Scale                float32   // one-bit only: magnitude of every value
	Indices              []uint32  // chunk-major, k per chunk, index inside the chunk (row-major)
	Signs                []bool    // one-bit only: true = negative
	Values               []float32 // dense values when not one-bit
}

// Chunks returns the number of chunks of the tensor.
func (t *PayloadTensor) Chunks() int { return (t.Rows / t.ChunkRows) * (t.Cols / t.ChunkCols) }

var errPayloadFormat = errors.New("malformed DeMo payload")

// DecodePayload parses p structurally: lengths, bounds, distinct indices per
// chunk, finite values, zero padding. It does not know the model, so the
// trainer's ValidatePayload still checks shapes against it.
func DecodePayload(p []byte) (*Payload, error) {
	fail := func(format string, args ...any) (*Payload, error) {
		return nil, fmt.Errorf("%w: %s", errPayloadFormat, fmt.Sprintf(format, args...))
	}
	if len(p) < payloadHeader || string(p[:4]) != PayloadMagic {
		return fail("missing %q header", PayloadMagic)
	}
	if v := binary.LittleEndian.Uint16(p[4:]); v != PayloadVersion {
		return fail("version %d, want %d", v, PayloadVersion)
	}
	flags := binary.LittleEndian.Uint16(p[6:])
	if flags&^flagOneBit != 0 {
		return fail("unknown flags %#x", flags)
	}
	n := binary.LittleEndian.Uint32(p[8:])
	if n > 1024 {
		return fail("%d tensors", n)
	}
	out := &Payload{OneBit: flags&flagOneBit != 0, Tensors: make([]PayloadTensor, n)}
	off := payloadHeader
	for ti := range out.Tensors {
		if len(p)-off < tensorHeader {
			return fail("tensor %d: header truncated", ti)
		}
		h := p[off:]
		t := PayloadTensor{
			Rows: int(binary.LittleEndian.Uint32(h)), Cols: int(binary.LittleEndian.Uint32(h[4:])),
			ChunkRows: int(binary.LittleEndian.Uint16(h[8:])), ChunkCols: int(binary.LittleEndian.Uint16(h[10:])),
			K: int(binary.LittleEndian.Uint16(h[12:])), IndexBytes: int(h[14]),
		}
		if h[15] != 0 {
			return fail("tensor %d: reserved byte %d", ti, h[15])
		}
		if t.ChunkRows < 1 || t.ChunkCols < 1 || t.Rows < 1 || t.Cols < 1 || t.Rows%t.ChunkRows != 0 || t.Cols%t.ChunkCols != 0 {
			return fail("tensor %d: shape %dx%d does not split into %dx%d chunks", ti, t.Rows, t.Cols, t.ChunkRows, t.ChunkCols)
		}
		chunk := t.ChunkRows * t.ChunkCols
		if t.K < 1 || t.K > chunk {
			return fail("tensor %d: k=%d outside [1, %d]", ti, t.K, chunk)
		}
		if want := indexBytes(chunk); t.IndexBytes != want {
			return fail("tensor %d: %d-byte indices for %d-entry chunks, want %d", ti, t.IndexBytes, chunk, want)
		}
		off += tensorHeader
		hi1, chunks := bits.Mul64(uint64(t.Rows/t.ChunkRows), uint64(t.Cols/t.ChunkCols))
		hi2, entries := bits.Mul64(chunks, uint64(t.K))
		if hi1 != 0 || hi2 != 0 || entries > uint64(len(p)) {
			return fail("tensor %d: %dx%d chunks of k=%d cannot fit in %d bytes", ti, t.Rows/t.ChunkRows, t.Cols/t.ChunkCols, t.K, len(p))
		}
		body := entries * uint64(t.IndexBytes)
		if out.OneBit {
			body += 4 + (entries+7)/8
		} else {
			body += 4 * entries
		}
		if body > uint64(len(p)-off) {
			return fail("tensor %d: %d body bytes, %d left", ti, body, len(p)-off)
		}
		q := p[off : off+int(body)]
		if out.OneBit {
			t.Scale = math.Float32frombits(binary.LittleEndian.Uint32(q))
			if !(t.Scale >= 0 && t.Scale < 3e38) {
				return fail("tensor %d: scale %v", ti, t.Scale)
			}
			q = q[4:]
		}
		t.Indices = make([]uint32, entries)
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
			if ix >= uint32(chunk) || seen[ix] {
				return fail("tensor %d: entry %d: index %d out of range or repeated", ti, i, ix)
			}
			seen[ix] = true
			t.Indices[i] = ix
		}
		q = q[int(entries)*t.IndexBytes:]
		if out.OneBit {
			t.Signs = make([]bool, entries)
			for i := range t.Signs {
				t.Signs[i] = q[i/8]>>(i%8)&1 == 1
			}
			if r := entries % 8; r != 0 && q[len(q)-1]>>r != 0 {
				return fail("tensor %d: nonzero padding bits", ti)
			}
		} else {
			t.Values = make([]float32, entries)
			for i := range t.Values {
				v := math.Float32frombits(binary.LittleEndian.Uint32(q[4*i:]))
				if math.IsNaN(float64(v)) || v > 1e30 || v < -1e30 {
					return fail("tensor %d: entry %d: value %v", ti, i, v)
				}
				t.Values[i] = v
			}
		}
		out.Tensors[ti] = t
		off += int(body)
	}
	if off != len(p) {
		return fail("%d trailing bytes", len(p)-off)
	}
	return out, nil
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

// Encode serialises the payload in format v1.
func (p *Payload) Encode() []byte {
	var flags uint16
	if p.OneBit {
		flags = flagOneBit
	}
	out := binary.LittleEndian.AppendUint16([]byte(PayloadMagic), PayloadVersion)
	out = binary.LittleEndian.AppendUint16(out, flags)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(p.Tensors)))
	for _, t := range p.Tensors {
		out = binary.LittleEndian.AppendUint32(out, uint32(t.Rows))
		out = binary.LittleEndian.AppendUint32(out, uint32(t.Cols))
		out = binary.LittleEndian.AppendUint16(out, uint16(t.ChunkRows))
		out = binary.LittleEndian.AppendUint16(out, uint16(t.ChunkCols))
		out = binary.LittleEndian.AppendUint16(out, uint16(t.K))
		out = append(out, byte(t.IndexBytes), 0)
		if p.OneBit {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(t.Scale))
		}
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
