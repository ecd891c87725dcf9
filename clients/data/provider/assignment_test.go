package provider

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/psyche-go/psyche/clients/schedule"
)

// TestAssignedSequencesOverHTTP joins the two halves of a round's data path:
// the Coordinator's assignment (computed with clients/schedule, identical to
// the program by the shared vectors) and the HTTP provider. Over several
// rounds, each client fetches only its assigned sequences over loopback; the
// clients together read every sequence of the global batch exactly once, the
// same bytes as a local read, and the cursor advances by the batch size.
func TestAssignedSequencesOverHTTP(t *testing.T) {
	dir := prepared(t, "byte", 64)
	local, err := OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	info := local.Info()
	ts := serve(t, dir, nil)
	const clients, batch, rounds = 5, 23, 4
	remotes := make([]*HTTP, clients)
	for i := range remotes {
		remotes[i], err = OpenHTTP(context.Background(), ts.URL, fastOptions(info.Root, t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer remotes[i].Close()
	}
	if info.NumSequences < batch*rounds {
		t.Fatalf("dataset has %d sequences; the test needs %d", info.NumSequences, batch*rounds)
	}

	dataIndex := uint64(0)
	for round := 0; round < rounds; round++ {
		seed := schedule.Seed(sha256.Sum256(binary.LittleEndian.AppendUint32(nil, uint32(round))))
		global := make([]uint64, batch)
		for i := range global {
			global[i] = dataIndex + uint64(i)
		}
		want, err := local.Sequences(context.Background(), global)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, batch)
		for c := uint16(0); c < clients; c++ {
			a, err := schedule.AssignmentFor(c, clients, batch, 1, dataIndex, seed)
			if err != nil {
				t.Fatal(err)
			}
			var mine []uint64
			for i := a.Start; i < a.Start+a.Len; i++ {
				mine = append(mine, i)
			}
			got, err := remotes[c].Sequences(context.Background(), mine)
			if err != nil {
				t.Fatalf("round %d client %d: %v", round, c, err)
			}
			for k, idx := range mine {
				off := idx - dataIndex
				if off >= batch {
					t.Fatalf("round %d client %d got index %d outside the batch at %d", round, c, idx, dataIndex)
				}
				seen[off]++
				if !slices.Equal(got[k], want[off]) {
					t.Fatalf("round %d client %d: sequence %d differs from the local read", round, c, idx)
				}
			}
		}
		for off, n := range seen {
			if n != 1 {
				t.Fatalf("round %d: sequence %d assigned %d times", round, dataIndex+uint64(off), n)
			}
		}
		dataIndex += batch
	}
	// A client that resumes at a later step computes the same cursor.
	if got := schedule.DataIndexForStep(batch, batch, 0, 64, 1, rounds+1); got != dataIndex {
		t.Fatalf("cursor for step %d = %d, want %d", rounds+1, got, dataIndex)
	}
}
