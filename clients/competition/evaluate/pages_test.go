package evaluate

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// referencePages is programs/competition/README.md's rule written as plainly as possible: the
// message assembled by appends, the modulus taken after decoding, the
// already-drawn check a linear scan.
func referencePages(seed [32]byte, numSequences uint64, spp uint32, n int) []uint64 {
	numPages := numSequences / uint64(spp)
	var out []uint64
	for j := 0; j < n; j++ {
		for attempt := uint32(0); ; attempt++ {
			msg := append([]byte{}, seed[:]...)
			msg = append(msg, 'p', 'a', 'g', 'e')
			msg = binary.LittleEndian.AppendUint32(msg, uint32(j))
			msg = binary.LittleEndian.AppendUint32(msg, attempt)
			h := sha256.Sum256(msg)
			p := binary.LittleEndian.Uint64(h[:8]) % numPages
			if !slices.Contains(out, p) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func seq32() [32]byte {
	var s [32]byte
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

// The vectors were computed independently (Python's hashlib and struct,
// the rule of programs/competition/README.md) and checked by hand against the reference above;
// the second draws every page of 12, so most of its pages took retries
// (attempts 0, 1, 2, 1, 1, 0, 11, 1, 4, 3, 6, 0).
func TestPagesVectors(t *testing.T) {
	for _, v := range []struct {
		name         string
		seed         [32]byte
		numSequences uint64
		spp          uint32
		pages        int
		want         []uint64
	}{
		{"zero seed", [32]byte{}, 1000, 10, 8, []uint64{20, 61, 59, 14, 15, 56, 85, 47}},
		{"every page of 12", seq32(), 37, 3, 12, []uint64{5, 6, 10, 11, 1, 4, 0, 3, 7, 2, 9, 8}},
		{"2^40 sequences", sha256.Sum256([]byte("psyche")), 1<<40 + 5, 7, 5,
			[]uint64{107958847835, 103300895958, 61464330192, 120344301503, 97841781964}},
	} {
		got, err := Pages(v.seed, v.numSequences, v.spp, v.pages)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if !slices.Equal(got, v.want) {
			t.Errorf("%s: Pages = %v, want %v", v.name, got, v.want)
		}
		if ref := referencePages(v.seed, v.numSequences, v.spp, v.pages); !slices.Equal(ref, v.want) {
			t.Errorf("%s: the reference draws %v, the vector says %v", v.name, ref, v.want)
		}
	}
}

// The draw is a function of the seed (and the dataset's shape) only: the
// same arguments give the same pages, other seeds others; no page repeats,
// each is a whole page of the dataset, and a round as large as the
// dataset draws every page once.
func TestPagesDependOnTheSeedOnlyAndNeverRepeat(t *testing.T) {
	const numSequences, spp, n = 100_003, 16, 257 // 6250 whole pages
	first, err := Pages(seq32(), numSequences, spp, n)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, _ := Pages(seq32(), numSequences, spp, n)
		if !slices.Equal(first, again) {
			t.Fatal("the same seed drew other pages")
		}
	}
	if prefix, _ := Pages(seq32(), numSequences, spp, 10); !slices.Equal(prefix, first[:10]) {
		t.Errorf("a round of 10 pages drew %v, not the first 10 of a round of %d (%v)", prefix, n, first[:10])
	}
	if !slices.Equal(first, referencePages(seq32(), numSequences, spp, n)) {
		t.Error("Pages differs from the reference")
	}
	for s := range 20 {
		seed := sha256.Sum256([]byte{byte(s)})
		pages, err := Pages(seed, numSequences, spp, n)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(pages, first) {
			t.Errorf("seed %x drew the pages of another seed", seed)
		}
		seen := map[uint64]bool{}
		for _, p := range pages {
			if p >= numSequences/spp {
				t.Fatalf("page %d is past the %d whole pages", p, numSequences/spp)
			}
			if seen[p] {
				t.Fatalf("seed %x drew page %d twice", seed, p)
			}
			seen[p] = true
		}
	}
	all, err := Pages(seq32(), 64*5+4, 5, 64) // 64 whole pages, the 4 spare sequences unused
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Sorted(slices.Values(all))
	for i, p := range sorted {
		if p != uint64(i) {
			t.Fatalf("a round of every page drew %v", sorted)
		}
	}
}

func TestPagesRefusesTooSmallADataset(t *testing.T) {
	_, err := Pages(seq32(), 99, 10, 10) // 9 whole pages
	if err == nil || !strings.Contains(err.Error(), "9 whole pages of 10 sequences, fewer than the 10 pages") {
		t.Errorf("9 pages for a round of 10: %v", err)
	}
	if _, err := Pages(seq32(), 100, 0, 1); err == nil || !strings.Contains(err.Error(), "sequences_per_page") {
		t.Errorf("pages of 0 sequences: %v", err)
	}
	if got, err := Pages(seq32(), 0, 1, 0); err != nil || len(got) != 0 {
		t.Errorf("no pages of an empty dataset: %v, %v", got, err)
	}
}

// programs/competition/README.md's rule: current when committed before the round opened, else
// the previous commit (a commit during the round), else not eligible.
func TestRoundModel(t *testing.T) {
	cur, prev := Submission{Slot: 50, Repo: "current"}, Submission{Slot: 20, Repo: "prev"}
	for _, v := range []struct {
		open     uint64
		cur      Submission
		prev     Submission
		want     string
		eligible bool
	}{
		{51, cur, prev, "current", true},
		{50, cur, prev, "prev", true}, // committed at the opening slot: not before it
		{30, cur, prev, "prev", true},
		{51, cur, Submission{}, "current", true},
		{50, cur, Submission{}, "", false}, // a first commit during the round
		{20, cur, prev, "", false},
	} {
		got, ok := RoundModel(v.cur, v.prev, v.open)
		if ok != v.eligible || got.Repo != v.want {
			t.Errorf("open %d, current %d, prev %d: %q %v, want %q %v", v.open, v.cur.Slot, v.prev.Slot, got.Repo, ok, v.want, v.eligible)
		}
	}
}
