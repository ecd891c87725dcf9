// Package rules is the Competition program's arithmetic for validators and
// tools: the epsilon decay, the win function, the wins of a loss table, the
// Q32 exponential, the softmax weights, the payouts, a vote's digest and a
// round's seed (programs/competition/README.md, "Arithmetic").
//
// It mirrors the Rust crate psyche-competition-interface
// (programs/competition/interface/src/rules.rs) bit for bit: a validator's
// vote must equal the digest every other validator computes, and the
// weights and payouts must be those the program computes on-chain. The
// shared vectors, written by programs/competition/interface/tests/vectors.rs,
// are programs/competition/interface/testdata/competition_vectors.json;
// vectors_test.go checks every row.
package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/gagliardetto/solana-go"
)

const (
	// WeightOne is 1.0 in the Q24 fixed point of Weights.
	WeightOne uint32 = 1 << 24
	// Ln2Q32 is floor(ln 2 · 2^32).
	Ln2Q32 uint64 = 2977044471
	// PPM is one million: epsilon and temperature are in parts per million.
	PPM uint32 = 1_000_000
	// MaxEntries is the most entries a round can have (a 256-bit bitmap).
	MaxEntries = 256
	// RoundSeedDomain prefixes RoundSeed's hash.
	RoundSeedDomain = "psyche-competition-round"
)

// Epsilon is the older model's advantage, decaying linearly with its age
// (the competition's epsilon_start_ppm, epsilon_end_ppm,
// epsilon_decay_slots).
type Epsilon struct {
	StartPPM   uint32
	EndPPM     uint32
	DecaySlots uint64
}

// Bit reports bit i of a 256-bit bitmap (byte i/8, least significant bit
// first); false for i outside 0..255.
func Bit(bitmap [32]byte, i int) bool {
	if i < 0 || i >= MaxEntries {
		return false
	}
	return bitmap[i/8]>>(i%8)&1 == 1
}

// SetBit sets bit i of a 256-bit bitmap; it panics for i outside 0..255.
func SetBit(bitmap *[32]byte, i int) {
	if i < 0 || i >= MaxEntries {
		panic(fmt.Sprintf("rules.SetBit: bit %d outside the 256-bit bitmap", i))
	}
	bitmap[i/8] |= 1 << (i % 8)
}

// EpsilonPPM is ε in ppm after ageSlots of the older model's age: end when
// decaySlots == 0 or ageSlots >= decaySlots, else
// start − floor((start − end)·age / decaySlots) in exact integers (with
// end > start, which competition_create refuses: start + ceil((end −
// start)·age / decaySlots)).
func EpsilonPPM(start, end uint32, decaySlots, ageSlots uint64) uint32 {
	if decaySlots == 0 || ageSlots >= decaySlots {
		return end
	}
	if start >= end {
		hi, lo := bits.Mul64(uint64(start-end), ageSlots)
		q, _ := bits.Div64(hi, lo, decaySlots) // hi < decaySlots: age < decay
		return start - uint32(q)
	}
	hi, lo := bits.Mul64(uint64(end-start), ageSlots)
	q, r := bits.Div64(hi, lo, decaySlots)
	if r != 0 {
		q++
	}
	return start + uint32(q)
}

// at is ε for a model committed at slot, in a round opened at openSlot
// (its age saturates at 0).
func (e Epsilon) at(slot, openSlot uint64) uint32 {
	var age uint64
	if openSlot > slot {
		age = openSlot - slot
	}
	return EpsilonPPM(e.StartPPM, e.EndPPM, e.DecaySlots, age)
}

// multiplier is 1e6 − ε as a float64, ε above 1e6 counting as 1e6.
func multiplier(eps uint32) float64 {
	if eps >= PPM {
		return 0
	}
	return float64(PPM - eps)
}

// IsWin reports whether model a beats model b on one page: the older model
// (strictly smaller slot) has its loss multiplied by (1 − ε) at its age,
// compared in float64 as lossA·(1e6 − ε_a) < lossB·1e6 (or the other way
// round; equal slots: both times 1e6). Both products are exact, so no
// rounding can differ between implementations; NaN never wins nor loses,
// +Inf (an invalid model) never wins.
func IsWin(lossA, lossB float32, slotA, slotB, openSlot uint64, eps Epsilon) bool {
	ma, mb := float64(PPM), float64(PPM)
	switch {
	case slotA < slotB:
		ma = multiplier(eps.at(slotA, openSlot))
	case slotB < slotA:
		mb = multiplier(eps.at(slotB, openSlot))
	}
	// The explicit conversions forbid a fused multiply-add (Go spec); the
	// products are exact anyway.
	la := float64(float64(lossA) * ma)
	lb := float64(float64(lossB) * mb)
	return la < lb
}

// Wins counts each model's wins over a loss table: out[a] = Σ_{b≠a} Σ_p
// IsWin(losses[a][p], losses[b][p]). losses is row-major [model][page] and
// slots[m] the slot of model m's commit. It refuses tables of another shape
// and those where pages·(models − 1) exceeds 65535 (a count would not fit
// its uint16).
func Wins(losses []float32, models, pages int, slots []uint64, openSlot uint64, eps Epsilon) ([]uint16, error) {
	if models < 0 || pages < 0 || len(slots) != models {
		return nil, fmt.Errorf("rules.Wins: %d models, %d pages, %d slots", models, pages, len(slots))
	}
	if hi, n := bits.Mul64(uint64(models), uint64(pages)); hi != 0 || n != uint64(len(losses)) {
		return nil, fmt.Errorf("rules.Wins: %d losses for %d models x %d pages", len(losses), models, pages)
	}
	if models > 1 {
		if hi, n := bits.Mul64(uint64(pages), uint64(models-1)); hi != 0 || n > 65535 {
			return nil, fmt.Errorf("rules.Wins: %d pages x %d other models exceed 65535 wins", pages, models-1)
		}
	}
	out := make([]uint16, models)
	for a := range models {
		rowA := losses[a*pages : (a+1)*pages]
		var n uint16
		for b := range models {
			if a == b {
				continue
			}
			rowB := losses[b*pages : (b+1)*pages]
			for p := range pages {
				if IsWin(rowA[p], rowB[p], slots[a], slots[b], openSlot, eps) {
					n++
				}
			}
		}
		out[a] = n
	}
	return out, nil
}

// ExpNegQ32 is floor(2^32 · e^(−z/2^32)), approximately, by exactly the
// Rust recipe: k = z / Ln2Q32 (0 when k >= 64), r = z − k·Ln2Q32, the
// Taylor series of e^(−r) to the 13th term in Q32 (t = (t·r >> 32) / i,
// alternating signs), shifted right by k.
func ExpNegQ32(z uint64) uint64 {
	k := z / Ln2Q32
	if k >= 64 {
		return 0
	}
	r := z - k*Ln2Q32
	sum, t := uint64(1)<<32, uint64(1)<<32
	for i := uint64(1); i <= 13; i++ {
		t = (t * r >> 32) / i
		if i&1 == 1 {
			sum -= t
		} else {
			sum += t
		}
	}
	return sum >> k
}

// Weights are the softmax weights (Q24, summing to at most WeightOne) of a
// final round's wins: entry i counts when Bit(valid, i), the rest get 0.
// W = Σ valid wins; s_i = W == 0 ? 0 : floor(wins_i·2^32 / W); x_i =
// floor(s_i·1e6 / temperaturePPM); e_i = ExpNegQ32(x_max − x_i); w_i =
// floor(e_i·2^24 / Σ e). No valid entry: all 0. A temperature of 0 (refused
// by competition_create) counts as 1. It refuses more than MaxEntries wins.
func Weights(wins []uint16, valid [32]byte, temperaturePPM uint32) ([]uint32, error) {
	if len(wins) > MaxEntries {
		return nil, fmt.Errorf("rules.Weights: %d entries, at most %d", len(wins), MaxEntries)
	}
	out := make([]uint32, len(wins))
	var total uint64
	for i, w := range wins {
		if Bit(valid, i) {
			total += uint64(w)
		}
	}
	temperature := uint64(max(temperaturePPM, 1))
	x := make([]uint64, len(wins))
	var xMax uint64
	found := false
	for i, w := range wins {
		if !Bit(valid, i) {
			continue
		}
		if total != 0 {
			x[i] = (uint64(w) << 32) / total * uint64(PPM) / temperature
		}
		xMax = max(xMax, x[i])
		found = true
	}
	if !found {
		return out, nil
	}
	e := make([]uint64, len(wins))
	var sum uint64
	for i := range wins {
		if Bit(valid, i) {
			e[i] = ExpNegQ32(xMax - x[i])
			sum += e[i]
		}
	}
	for i := range wins {
		if Bit(valid, i) {
			out[i] = uint32((e[i] << 24) / sum)
		}
	}
	return out, nil
}

// share is floor(paid·w / 2^24), saturating at the largest uint64 (only
// reachable with a weight above WeightOne).
func share(paid uint64, w uint32) uint64 {
	hi, lo := bits.Mul64(paid, uint64(w))
	if hi>>24 != 0 {
		return ^uint64(0)
	}
	return hi<<40 | lo>>24
}

// Payouts are each entry's share of paid: floor(paid·weights[i] / 2^24),
// exact (saturating for a weight above WeightOne). Weights summing to at
// most WeightOne pay out at most paid.
func Payouts(paid uint64, weights []uint32) []uint64 {
	out := make([]uint64, len(weights))
	for i, w := range weights {
		out[i] = share(paid, w)
	}
	return out
}

// VoteDigest is a validator's vote: sha256(round u64 LE ‖ seed ‖ tableHash ‖
// each win u16 LE ‖ invalid).
func VoteDigest(round uint64, seed, tableHash [32]byte, wins []uint16, invalid [32]byte) [32]byte {
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, round))
	h.Write(seed[:])
	h.Write(tableHash[:])
	buf := make([]byte, 0, 2*len(wins))
	for _, w := range wins {
		buf = binary.LittleEndian.AppendUint16(buf, w)
	}
	h.Write(buf)
	h.Write(invalid[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// RoundSeed is a round's seed (round_tick): sha256("psyche-competition-round"
// ‖ competition ‖ number u64 LE ‖ slot u64 LE ‖ slotHash), slot and slotHash
// from the SlotHashes entry.
func RoundSeed(competition solana.PublicKey, number, slot uint64, slotHash [32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(RoundSeedDomain))
	h.Write(competition[:])
	h.Write(binary.LittleEndian.AppendUint64(nil, number))
	h.Write(binary.LittleEndian.AppendUint64(nil, slot))
	h.Write(slotHash[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}
