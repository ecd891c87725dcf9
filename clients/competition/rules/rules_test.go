package rules

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBitAndSetBit(t *testing.T) {
	var b [32]byte
	for _, i := range []int{0, 2, 9, 254, 255} {
		SetBit(&b, i)
	}
	if b[0] != 0b101 || b[1] != 0b10 || b[31] != 0xc0 {
		t.Fatalf("SetBit: %x", b)
	}
	for i := range MaxEntries {
		want := i == 0 || i == 2 || i == 9 || i == 254 || i == 255
		if Bit(b, i) != want {
			t.Errorf("Bit(%d) = %v", i, !want)
		}
	}
	all := [32]byte{}
	for i := range all {
		all[i] = 0xff
	}
	if Bit(all, -1) || Bit(all, 256) {
		t.Error("Bit outside the bitmap is set")
	}
	for _, i := range []int{-1, 256} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetBit(%d) did not panic", i)
				}
			}()
			SetBit(&b, i)
		}()
	}
}

func TestWinsRefusesBadShapes(t *testing.T) {
	eps := Epsilon{}
	cases := []struct {
		losses        []float32
		models, pages int
		slots         []uint64
		want          string
	}{
		{make([]float32, 3), 2, 2, []uint64{0, 0}, "losses"},
		{make([]float32, 4), 2, 2, []uint64{0}, "slots"},
		{make([]float32, 2*65536), 2, 65536, []uint64{0, 0}, "exceed 65535"},
		{nil, -1, 0, nil, "models"},
	}
	for _, c := range cases {
		if _, err := Wins(c.losses, c.models, c.pages, c.slots, 0, eps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Wins(%d losses, %d, %d, %d slots): %v, want %q", len(c.losses), c.models, c.pages, len(c.slots), err, c.want)
		}
	}
	// The bound itself: 256 models x 257 pages, 65535 wins for the best.
	losses := make([]float32, 256*257)
	for i := range losses {
		losses[i] = float32(i / 257)
	}
	got, err := Wins(losses, 256, 257, make([]uint64, 256), 0, eps)
	if err != nil || got[0] != math.MaxUint16 || got[255] != 0 {
		t.Fatalf("Wins at the bound: %v, %v", got[:2], err)
	}
	// One model: nothing to beat.
	if got, err := Wins([]float32{1, 2}, 1, 2, []uint64{5}, 9, eps); err != nil || len(got) != 1 || got[0] != 0 {
		t.Fatalf("one model: %v, %v", got, err)
	}
}

func TestWeightsRefusesMoreThan256(t *testing.T) {
	if _, err := Weights(make([]uint16, MaxEntries+1), [32]byte{}, 1000); err == nil {
		t.Fatal("257 entries accepted")
	}
}

// EpsilonPPM and Payouts use math/bits where Rust splits the products by
// hand: both against big integers over random inputs.
func TestEpsilonAndPayoutsAgainstBigInts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 100_000 {
		start, end := r.Uint32(), r.Uint32()
		if n%2 == 0 {
			start = r.Uint32N(PPM + 1)
			end = r.Uint32N(start + 1)
		}
		decay := r.Uint64() >> r.UintN(64)
		age := r.Uint64() >> r.UintN(64)
		if n%3 == 0 && decay > 0 {
			age = r.Uint64N(decay)
		}
		want := end
		if decay != 0 && age < decay {
			// start − floor((start − end)·age / decay), floor towards −∞.
			num := new(big.Int).Mul(big.NewInt(int64(start)-int64(end)), new(big.Int).SetUint64(age))
			q := new(big.Int)
			m := new(big.Int)
			q.DivMod(num, new(big.Int).SetUint64(decay), m) // Euclidean: floor for a positive divisor
			want = uint32(new(big.Int).Sub(big.NewInt(int64(start)), q).Uint64())
		}
		if got := EpsilonPPM(start, end, decay, age); got != want {
			t.Fatalf("EpsilonPPM(%d, %d, %d, %d) = %d, want %d", start, end, decay, age, got, want)
		}

		paid, w := r.Uint64()>>r.UintN(64), r.Uint32()
		p := new(big.Int).Mul(new(big.Int).SetUint64(paid), big.NewInt(int64(w)))
		p.Rsh(p, 24)
		wantPay := uint64(math.MaxUint64)
		if p.IsUint64() {
			wantPay = p.Uint64()
		}
		if got := Payouts(paid, []uint32{w})[0]; got != wantPay {
			t.Fatalf("Payouts(%d, %d) = %d, want %d", paid, w, got, wantPay)
		}
	}
}

func TestWeightsSumAndPayoutsSum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		n := 1 + r.IntN(MaxEntries)
		wins := make([]uint16, n)
		var valid [32]byte
		count := 0
		for i := range wins {
			wins[i] = uint16(r.UintN(65536))
			if r.IntN(4) != 0 {
				SetBit(&valid, i)
				count++
			}
		}
		w, err := Weights(wins, valid, 1000+r.Uint32N(100_000_000-1000+1))
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, x := range w {
			sum += uint64(x)
		}
		if count > 0 && (sum > uint64(WeightOne) || sum < uint64(WeightOne)-uint64(count)) {
			t.Fatalf("%d valid: weights sum to %d", count, sum)
		}
		paid := r.Uint64()
		var paidSum big.Int
		for _, p := range Payouts(paid, w) {
			paidSum.Add(&paidSum, new(big.Int).SetUint64(p))
		}
		if paidSum.Cmp(new(big.Int).SetUint64(paid)) > 0 {
			t.Fatalf("payouts %s exceed %d", paidSum.String(), paid)
		}
	}
}
