package rules

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/gagliardetto/solana-go"
)

// vectorsPath is written by programs/competition/interface/tests/vectors.rs.
var vectorsPath = filepath.Join("..", "..", "..", "programs", "competition", "interface", "testdata", "competition_vectors.json")

// hash32 is 32 bytes written as 64 hex digits.
type hash32 [32]byte

func (h *hash32) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != 32 {
		return fmt.Errorf("not 32 hex bytes: %q", s)
	}
	copy(h[:], raw)
	return nil
}

// f32Bits is an f32 written as its u32 bit pattern in hex, so that no JSON
// float parsing can alter it (NaN payloads, -0, subnormals included).
type f32Bits float32

func (f *f32Bits) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	u, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 8 {
		return fmt.Errorf("not an f32 bit pattern: %q", s)
	}
	*f = f32Bits(math.Float32frombits(uint32(u)))
	return nil
}

type epsJSON struct {
	StartPPM   uint32 `json:"start_ppm"`
	EndPPM     uint32 `json:"end_ppm"`
	DecaySlots uint64 `json:"decay_slots"`
}

func (e epsJSON) eps() Epsilon { return Epsilon(e) }

type vectors struct {
	Epsilon []struct {
		Start, End uint32
		DecaySlots uint64 `json:"decay_slots"`
		AgeSlots   uint64 `json:"age_slots"`
		Epsilon    uint32
	} `json:"epsilon"`
	IsWin []struct {
		LossA    f32Bits `json:"loss_a"`
		LossB    f32Bits `json:"loss_b"`
		SlotA    uint64  `json:"slot_a"`
		SlotB    uint64  `json:"slot_b"`
		OpenSlot uint64  `json:"open_slot"`
		Eps      epsJSON `json:"eps"`
		Win      bool    `json:"win"`
	} `json:"is_win"`
	Wins []struct {
		Models   int       `json:"models"`
		Pages    int       `json:"pages"`
		Losses   []f32Bits `json:"losses"`
		Slots    []uint64  `json:"slots"`
		OpenSlot uint64    `json:"open_slot"`
		Eps      epsJSON   `json:"eps"`
		Wins     []uint16  `json:"wins"`
	} `json:"wins"`
	Exp []struct {
		Z, E uint64
	} `json:"exp"`
	Weights []struct {
		Wins           []uint16 `json:"wins"`
		Valid          hash32   `json:"valid"`
		TemperaturePPM uint32   `json:"temperature_ppm"`
		Weights        []uint32 `json:"weights"`
	} `json:"weights"`
	Payouts []struct {
		Paid    uint64   `json:"paid"`
		Weights []uint32 `json:"weights"`
		Payouts []uint64 `json:"payouts"`
	} `json:"payouts"`
	VoteDigest []struct {
		Round     uint64   `json:"round"`
		Seed      hash32   `json:"seed"`
		TableHash hash32   `json:"table_hash"`
		Wins      []uint16 `json:"wins"`
		Invalid   hash32   `json:"invalid"`
		Digest    hash32   `json:"digest"`
	} `json:"vote_digest"`
	RoundSeed []struct {
		Competition hash32 `json:"competition"`
		Number      uint64 `json:"number"`
		Slot        uint64 `json:"slot"`
		SlotHash    hash32 `json:"slot_hash"`
		Seed        hash32 `json:"seed"`
	} `json:"round_seed"`
}

func loadVectors(t *testing.T) *vectors {
	t.Helper()
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("read the Rust test vectors: %v", err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("parse %s: %v", vectorsPath, err)
	}
	if len(v.Epsilon) == 0 || len(v.IsWin) == 0 || len(v.Wins) == 0 || len(v.Exp) == 0 ||
		len(v.Weights) == 0 || len(v.Payouts) == 0 || len(v.VoteDigest) == 0 || len(v.RoundSeed) == 0 {
		t.Fatalf("%s is missing sections", vectorsPath)
	}
	return &v
}

func TestVectorsEpsilon(t *testing.T) {
	for _, c := range loadVectors(t).Epsilon {
		if got := EpsilonPPM(c.Start, c.End, c.DecaySlots, c.AgeSlots); got != c.Epsilon {
			t.Errorf("EpsilonPPM(%d, %d, %d, %d) = %d, Rust %d", c.Start, c.End, c.DecaySlots, c.AgeSlots, got, c.Epsilon)
		}
	}
}

func TestVectorsIsWin(t *testing.T) {
	v := loadVectors(t)
	var wins, nans int
	for i, c := range v.IsWin {
		a, b := float32(c.LossA), float32(c.LossB)
		if got := IsWin(a, b, c.SlotA, c.SlotB, c.OpenSlot, c.Eps.eps()); got != c.Win {
			t.Errorf("row %d: IsWin(%08x, %08x, %d, %d, %d, %+v) = %v, Rust %v", i,
				math.Float32bits(a), math.Float32bits(b), c.SlotA, c.SlotB, c.OpenSlot, c.Eps, got, c.Win)
		}
		if c.Win {
			wins++
		}
		if a != a || b != b {
			nans++
		}
	}
	// The section must exercise both answers and NaN.
	if wins == 0 || wins == len(v.IsWin) || nans == 0 {
		t.Fatalf("is_win vectors: %d wins, %d NaN rows of %d", wins, nans, len(v.IsWin))
	}
}

func TestVectorsWins(t *testing.T) {
	for i, c := range loadVectors(t).Wins {
		losses := make([]float32, len(c.Losses))
		for k, l := range c.Losses {
			losses[k] = float32(l)
		}
		got, err := Wins(losses, c.Models, c.Pages, c.Slots, c.OpenSlot, c.Eps.eps())
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !slices.Equal(got, c.Wins) {
			t.Errorf("row %d (%d x %d, open %d): Wins = %v, Rust %v", i, c.Models, c.Pages, c.OpenSlot, got, c.Wins)
		}
	}
}

func TestVectorsExp(t *testing.T) {
	for _, c := range loadVectors(t).Exp {
		if got := ExpNegQ32(c.Z); got != c.E {
			t.Errorf("ExpNegQ32(%d) = %d, Rust %d", c.Z, got, c.E)
		}
	}
}

func TestVectorsWeights(t *testing.T) {
	for i, c := range loadVectors(t).Weights {
		got, err := Weights(c.Wins, c.Valid, c.TemperaturePPM)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !slices.Equal(got, c.Weights) {
			t.Errorf("row %d (%d entries, T %d ppm): Weights = %v, Rust %v", i, len(c.Wins), c.TemperaturePPM, got, c.Weights)
		}
	}
}

func TestVectorsPayouts(t *testing.T) {
	for i, c := range loadVectors(t).Payouts {
		if got := Payouts(c.Paid, c.Weights); !slices.Equal(got, c.Payouts) {
			t.Errorf("row %d: Payouts(%d, %v) = %v, Rust %v", i, c.Paid, c.Weights, got, c.Payouts)
		}
	}
}

func TestVectorsDigests(t *testing.T) {
	v := loadVectors(t)
	for i, c := range v.VoteDigest {
		if got := VoteDigest(c.Round, c.Seed, c.TableHash, c.Wins, c.Invalid); got != c.Digest {
			t.Errorf("vote digest %d: %x, Rust %x", i, got, c.Digest)
		}
	}
	for i, c := range v.RoundSeed {
		if got := RoundSeed(solana.PublicKey(c.Competition), c.Number, c.Slot, c.SlotHash); got != c.Seed {
			t.Errorf("round seed %d: %x, Rust %x", i, got, c.Seed)
		}
	}
}
