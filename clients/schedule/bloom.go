package schedule

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

const (
	// BloomWords is the filter storage in 64-bit words (1024 bits).
	BloomWords = 16
	// MaxBloomBits is the largest filter size.
	MaxBloomBits = BloomWords * 64
	// MaxBloomHashes is the most hash functions a filter may use.
	MaxBloomHashes = 16
	// bloomFalsePositiveRate is what BloomParams sizes filters for.
	bloomFalsePositiveRate = 0.01
)

// ErrBadBloom means a filter's shape is not one the Coordinator accepts.
var ErrBadBloom = errors.New("invalid bloom filter")

// Bloom is the filter witnesses report, with the Coordinator's hashing:
// d = sha256(salt || item), h1 = LE u64 d[0:8], h2 = LE u64 d[8:16] | 1,
// bit_i = (h1 + i*h2) mod NumBits.
type Bloom struct {
	Words     [BloomWords]uint64
	Salt      [8]byte
	NumBits   uint16
	NumHashes uint8
}

// NewBloom returns an empty filter after checking its shape.
func NewBloom(numBits uint16, numHashes uint8, salt [8]byte) (*Bloom, error) {
	b := &Bloom{Salt: salt, NumBits: numBits, NumHashes: numHashes}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// BloomParams sizes a filter for items entries at a 1% false-positive rate,
// within the Coordinator's limits (64..1024 bits in steps of 64, 1..16 hashes).
func BloomParams(items int) (numBits uint16, numHashes uint8) {
	n := float64(max(items, 1))
	bits := math.Ceil(-n * math.Log(bloomFalsePositiveRate) / (math.Ln2 * math.Ln2))
	bits = math.Ceil(bits/64) * 64
	bits = min(max(bits, 64), MaxBloomBits)
	k := math.Round(bits / n * math.Ln2)
	k = min(max(k, 1), MaxBloomHashes)
	return uint16(bits), uint8(k)
}

// Validate checks the shape the Coordinator requires, including that no bit past
// NumBits is set.
func (b *Bloom) Validate() error {
	if b.NumBits == 0 || b.NumBits > MaxBloomBits || b.NumBits%64 != 0 {
		return fmt.Errorf("%w: %d bits (want a multiple of 64 up to %d)", ErrBadBloom, b.NumBits, MaxBloomBits)
	}
	if b.NumHashes == 0 || b.NumHashes > MaxBloomHashes {
		return fmt.Errorf("%w: %d hashes (want 1 to %d)", ErrBadBloom, b.NumHashes, MaxBloomHashes)
	}
	for _, w := range b.Words[b.NumBits/64:] {
		if w != 0 {
			return fmt.Errorf("%w: bits set past bit %d", ErrBadBloom, b.NumBits)
		}
	}
	return nil
}

func (b *Bloom) bits(item [32]byte, visit func(word int, mask uint64) bool) bool {
	if b.NumBits == 0 {
		return false
	}
	h := sha256.New()
	h.Write(b.Salt[:])
	h.Write(item[:])
	d := h.Sum(nil)
	h1 := binary.LittleEndian.Uint64(d[0:8])
	h2 := binary.LittleEndian.Uint64(d[8:16]) | 1
	m := uint64(b.NumBits)
	for i := range uint64(b.NumHashes) {
		bit := (h1 + i*h2) % m
		if !visit(int(bit/64)%BloomWords, 1<<(bit%64)) {
			return false
		}
	}
	return true
}

// Add inserts item. The filter must be valid.
func (b *Bloom) Add(item [32]byte) {
	b.bits(item, func(w int, mask uint64) bool {
		b.Words[w] |= mask
		return true
	})
}

// Contains reports whether item may have been added (no false negatives).
func (b *Bloom) Contains(item [32]byte) bool {
	if b.NumHashes == 0 {
		return false
	}
	return b.bits(item, func(w int, mask uint64) bool { return b.Words[w]&mask != 0 })
}
