package provider

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/data/shard"
)

// smallDataset writes a byte dataset of n sequences (seq_len 3) whose
// sequence i starts with token base+i, so a sequence names its origin.
func smallDataset(t *testing.T, n int, base uint32, seqLen uint32) *Local {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ds")
	w, err := shard.NewWriter(out, shard.Params{Tokenizer: "byte", VocabSize: 256, EOT: 0, SeqLen: seqLen, SeqsPerChunk: 2, SeqsPerShard: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// A document of seqLen tokens plus its separator fills one sequence.
		doc := make([]uint32, seqLen)
		for k := range doc {
			doc[k] = base + uint32(i)
		}
		if err := w.AddDocument(doc); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(out, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestMixInterleavesByWeight(t *testing.T) {
	a := smallDataset(t, 10, 1, 3)  // tokens 1..10
	b := smallDataset(t, 3, 100, 3) // tokens 100..102
	mix, err := NewMix([]Weighted{{a, 3}, {b, 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Period of 4 slots: a a b a. a needs ceil(10/3) = 4 periods to be read whole.
	if got := mix.Info().NumSequences; got != 16 {
		t.Fatalf("mix has %d sequences, want 16", got)
	}
	indices := make([]uint64, 16)
	for i := range indices {
		indices[i] = uint64(i)
	}
	seqs, err := mix.Sequences(context.Background(), indices)
	if err != nil {
		t.Fatal(err)
	}
	var firsts []uint32
	for _, s := range seqs {
		firsts = append(firsts, s[0])
	}
	want := []uint32{1, 2, 100, 3, 4, 5, 101, 6, 7, 8, 102, 9, 10, 1, 100, 2}
	if !slices.Equal(firsts, want) {
		t.Fatalf("mix order %v, want %v", firsts, want)
	}
	// Out-of-order and repeated requests give the same sequences.
	again, err := mix.Sequences(context.Background(), []uint64{15, 2, 2, 0})
	if err != nil || again[0][0] != 2 || again[1][0] != 100 || again[2][0] != 100 || again[3][0] != 1 {
		t.Fatalf("reordered request gave %v, %v", again, err)
	}
	if _, err := mix.Sequences(context.Background(), []uint64{16}); err == nil {
		t.Error("index past the mix accepted")
	}
	// The root commits to weights: 3:1 and 1:3 differ.
	other, _ := NewMix([]Weighted{{a, 1}, {b, 3}})
	if other.Info().Root == mix.Info().Root {
		t.Error("mixes with different weights share a root")
	}
}

func TestMixSpreadsSlotsAndKeepsProportions(t *testing.T) {
	parts := []Weighted{{smallDataset(t, 5, 1, 3), 5}, {smallDataset(t, 5, 50, 3), 3}, {smallDataset(t, 5, 100, 3), 2}}
	mix, err := NewMix(parts)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3)
	for i := range mix.Info().NumSequences { // 3 periods: ceil(5/2) for the last dataset
		d, _, err := mix.Source(i)
		if err != nil {
			t.Fatal(err)
		}
		counts[d]++
	}
	if !slices.Equal(counts, []int{15, 9, 6}) {
		t.Fatalf("over 3 periods datasets got %v slots, want 15 9 6", counts)
	}
	// Smooth round-robin: the weight-5 dataset never takes 3 slots in a row.
	if !slices.Equal(mix.slots, []int{0, 1, 2, 0, 0, 1, 0, 2, 1, 0}) {
		t.Fatalf("slot order %v", mix.slots)
	}
}

func TestMixRejectsIncompatibleDatasets(t *testing.T) {
	a := smallDataset(t, 4, 1, 3)
	tests := []struct {
		name    string
		parts   []Weighted
		wantErr string
	}{
		{"empty", nil, "at least one dataset"},
		{"zero weight", []Weighted{{a, 0}}, "weight 0"},
		{"seq len differs", []Weighted{{a, 1}, {smallDataset(t, 4, 1, 5), 1}}, "does not match dataset 0"},
		{"weights too large", []Weighted{{a, 1 << 16}, {a, 1}}, "at most"},
	}
	for _, tt := range tests {
		if _, err := NewMix(tt.parts); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
