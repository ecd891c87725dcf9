package schedule

import (
	"encoding/binary"
	"testing"
)

func TestSamplingAndVerifiers(t *testing.T) {
	hits := 0
	for s := range 40 {
		seed := hashv([]byte("sample"), le32(uint32(s)))
		for i := range uint16(256) {
			if Sampled(seed, i, 25) {
				hits++
			}
			if Sampled(seed, i, 0) || !Sampled(seed, i, 100) {
				t.Fatal("percent 0 must never sample and 100 always")
			}
			v, ok := Verifier(seed, i, 256)
			if !ok || v == i || v >= 256 {
				t.Fatalf("verifier of %d: %d, %v", i, v, ok)
			}
		}
	}
	if hits < 2380 || hits > 2740 {
		t.Errorf("%d of 10240 sampled at 25%%", hits)
	}
	if _, ok := Verifier(Seed{}, 0, 1); ok {
		t.Error("a round of one has no verifier")
	}
	if c := Committee(Seed{}, 0, 1, 2); len(c) != 0 {
		t.Errorf("committee of a round of two: %v", c)
	}
	if c := Committee(Seed{}, 0, 1, 9); len(c) != CommitteeSize {
		t.Errorf("committee of a round of nine: %v", c)
	}
}

func TestMustVerify(t *testing.T) {
	var seed Seed
	binary.LittleEndian.PutUint64(seed[:], 12345)
	var sampled, unsampled uint16
	for i := range uint16(64) {
		if Sampled(seed, i, 25) {
			sampled = i
		} else {
			unsampled = i
		}
	}
	cases := []struct {
		name      string
		percent   uint8
		index     uint16
		probation bool
		want      bool
	}{
		{"sampled", 25, sampled, false, true},
		{"not sampled", 25, unsampled, false, false},
		{"on probation", 25, unsampled, true, true},
		{"off", 0, sampled, true, false},
	}
	for _, c := range cases {
		if got := MustVerify(c.percent, seed, c.index, c.probation); got != c.want {
			t.Errorf("%s: MustVerify = %v", c.name, got)
		}
	}
	probation := []struct {
		finished, fault  bool
		lastFault, epoch uint32
		want             bool
	}{
		{false, false, 0, 3, true},
		{true, false, 0, 3, false},
		{true, true, 5, 5, true},
		{true, true, 4, 5, true},
		{true, true, 3, 5, false},
	}
	for _, p := range probation {
		if got := Probation(p.finished, p.fault, p.lastFault, p.epoch); got != p.want {
			t.Errorf("Probation%+v = %v", p, got)
		}
	}
	if !OnProbation(true, ^uint32(0), 7) {
		t.Error("the epoch after the last one saturates")
	}
}

// The fallback verifier walks as the committee does (so the shared
// committee vectors pin its start) and skips the unhealthy.
func TestFallbackVerifier(t *testing.T) {
	for n := uint16(3); n < 12; n++ {
		seed := Seed{byte(n), 7}
		for tr := range n {
			d, _ := Verifier(seed, tr, n)
			all, ok := FallbackVerifier(seed, tr, d, n, func(uint16) bool { return true })
			if c := Committee(seed, tr, d, n); !ok || all != c[0] {
				t.Fatalf("n=%d trainer %d: fallback %d %v, committee %v", n, tr, all, ok, c)
			}
			next, ok := FallbackVerifier(seed, tr, d, n, func(i uint16) bool { return i != all })
			if ok != (n > 3) || (ok && (next == all || next == tr || next == d)) {
				t.Fatalf("n=%d trainer %d: next fallback %d %v after %d", n, tr, next, ok, all)
			}
			if _, ok := FallbackVerifier(seed, tr, d, n, func(uint16) bool { return false }); ok {
				t.Fatal("a fallback with nobody healthy")
			}
		}
	}
}
