package schedule

import (
	"errors"
	"testing"
)

func testSeed(i byte) Seed { return hashv([]byte("go-test-seed"), []byte{i}) }

func TestPermutationIsABijection(t *testing.T) {
	for _, n := range []uint32{1, 2, 5, 64, 255, 256, 257, 513} {
		perm := Permutation(n, testSeed(byte(n)))
		seen := make([]bool, n)
		for i, p := range perm {
			if p >= n || seen[p] {
				t.Fatalf("n=%d: index %d maps to %d twice or out of range", n, i, p)
			}
			seen[p] = true
		}
	}
}

func TestShuffledPositionRejectsOutOfRange(t *testing.T) {
	for _, c := range []struct{ index, n uint32 }{{0, 0}, {5, 5}, {100, 3}} {
		if _, err := ShuffledPosition(c.index, c.n, testSeed(1)); !errors.Is(err, ErrIndexOutOfRange) {
			t.Errorf("ShuffledPosition(%d, %d): err %v, want ErrIndexOutOfRange", c.index, c.n, err)
		}
	}
	if _, err := AssignmentFor(3, 3, 10, 1, 0, testSeed(1)); !errors.Is(err, ErrIndexOutOfRange) {
		t.Errorf("AssignmentFor out of range: %v", err)
	}
	if IsWitness(3, 3, 0, testSeed(1)) {
		t.Error("an index outside the round is not a witness")
	}
}

func TestAssignmentsCoverTheBatchOnce(t *testing.T) {
	cases := []struct {
		n, batch  uint16
		dataIndex uint64
	}{{1, 1, 0}, {3, 10, 5}, {7, 7, 1 << 33}, {256, 256, 0}, {256, 4099, 77}, {100, 1000, 9}}
	for _, c := range cases {
		all := Assignments(c.n, c.batch, 1, c.dataIndex, testSeed(byte(c.n)))
		covered := make([]int, c.batch)
		for _, a := range all {
			q := uint64(c.batch / c.n)
			if a.Len != q && a.Len != q+1 {
				t.Fatalf("n=%d batch=%d: uneven chunk %+v", c.n, c.batch, a)
			}
			for s := a.Start; s < a.Start+a.Len; s++ {
				covered[s-c.dataIndex]++
			}
		}
		for s, k := range covered {
			if k != 1 {
				t.Fatalf("n=%d batch=%d: sequence %d assigned %d times", c.n, c.batch, s, k)
			}
		}
	}
}

func TestAssignmentsWithInnerStepsCoverTheRoundOnce(t *testing.T) {
	cases := []struct {
		n, batch, h uint16
		dataIndex   uint64
	}{{1, 1, 1, 0}, {3, 10, 2, 5}, {7, 7, 10, 1 << 33}, {10, 3, 4, 0}, {256, 4099, 7, 77}, {64, 1000, 1000, 9}}
	for _, c := range cases {
		seed := testSeed(byte(c.n ^ c.h))
		all := Assignments(c.n, c.batch, c.h, c.dataIndex, seed)
		flat := Assignments(c.n, c.batch, 1, c.dataIndex, seed)
		total := uint64(c.batch) * uint64(c.h)
		covered := make([]int, total)
		for i, a := range all {
			share := flat[i]
			h := uint64(c.h)
			if a.Start != c.dataIndex+(share.Start-c.dataIndex)*h || a.Len != share.Len*h {
				t.Fatalf("n=%d batch=%d H=%d client %d: %+v is not H copies of its share %+v", c.n, c.batch, c.h, i, a, share)
			}
			next := a.Start
			for j := range c.h {
				part := a.InnerStep(j, c.h)
				if part.Start != next || part.Len != share.Len {
					t.Fatalf("n=%d batch=%d H=%d client %d inner step %d: %+v", c.n, c.batch, c.h, i, j, part)
				}
				next += part.Len
			}
			for s := a.Start; s < a.Start+a.Len; s++ {
				covered[s-c.dataIndex]++
			}
		}
		for s, k := range covered {
			if k != 1 {
				t.Fatalf("n=%d batch=%d H=%d: sequence %d assigned %d times", c.n, c.batch, c.h, s, k)
			}
		}
	}
	// 0 inner steps counts as 1.
	a0, _ := AssignmentFor(1, 3, 10, 0, 3, testSeed(1))
	a1, _ := AssignmentFor(1, 3, 10, 1, 3, testSeed(1))
	if a0 != a1 || a1.InnerStep(0, 0) != a1 {
		t.Fatalf("H=0 %+v, H=1 %+v", a0, a1)
	}
}

func TestDataIndexForStepWithInnerSteps(t *testing.T) {
	for _, h := range []uint16{0, 1, 3, 10} {
		var index uint64
		for step := uint32(1); step < 200; step++ {
			if got := DataIndexForStep(3, 11, 10240, 256, h, step); got != index {
				t.Fatalf("H=%d step %d: %d, want %d", h, step, got, index)
			}
			index += uint64(BatchSize(3, 11, 10240, TokensBefore(index, 256))) * uint64(max(h, 1))
		}
	}
}

func TestWitnessesCountAndQuorum(t *testing.T) {
	cases := []struct{ n, nodes, want uint16 }{{1, 0, 1}, {10, 0, 10}, {40, 0, 32}, {10, 3, 3}, {2, 3, 2}}
	for _, c := range cases {
		if got := len(Witnesses(c.n, c.nodes, testSeed(byte(c.n)))); got != int(c.want) {
			t.Errorf("Witnesses(n=%d, nodes=%d): %d, want %d", c.n, c.nodes, got, c.want)
		}
	}
	for e := uint16(1); e < 300; e++ {
		q := uint32(Quorum(e))
		if 3*q < 2*uint32(e) || 3*(q-1) >= 2*uint32(e) {
			t.Fatalf("Quorum(%d) = %d is not ceil(2e/3)", e, q)
		}
	}
	if Quorum(0) != 1 {
		t.Error("Quorum(0) must be unreachable (1)")
	}
}

func TestBloomParamsStayWithinLimits(t *testing.T) {
	cases := []struct {
		items  int
		bits   uint16
		hashes uint8
	}{{0, 64, 16}, {1, 64, 16}, {10, 128, 9}, {100, 960, 7}, {256, 1024, 3}, {10000, 1024, 1}}
	for _, c := range cases {
		bits, hashes := BloomParams(c.items)
		if bits != c.bits || hashes != c.hashes {
			t.Errorf("BloomParams(%d) = %d bits %d hashes, want %d, %d", c.items, bits, hashes, c.bits, c.hashes)
		}
		if _, err := NewBloom(bits, hashes, [8]byte{}); err != nil {
			t.Errorf("BloomParams(%d) gives an invalid shape: %v", c.items, err)
		}
	}
}

func TestBloomValidate(t *testing.T) {
	cases := []struct {
		name string
		b    Bloom
		ok   bool
	}{
		{"valid", Bloom{NumBits: 1024, NumHashes: 8}, true},
		{"zero bits", Bloom{NumBits: 0, NumHashes: 8}, false},
		{"not a multiple of 64", Bloom{NumBits: 100, NumHashes: 8}, false},
		{"too big", Bloom{NumBits: 2048, NumHashes: 8}, false},
		{"no hashes", Bloom{NumBits: 64, NumHashes: 0}, false},
		{"too many hashes", Bloom{NumBits: 64, NumHashes: 17}, false},
		{"bits past size", Bloom{NumBits: 64, NumHashes: 1, Words: [BloomWords]uint64{0, 1}}, false},
	}
	for _, c := range cases {
		err := c.b.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadBloom)) {
			t.Errorf("%s: Validate() = %v", c.name, err)
		}
	}
	empty := Bloom{}
	if empty.Contains(testSeed(1)) {
		t.Error("a zero filter contains nothing")
	}
}

func TestRoleMatchesTheParts(t *testing.T) {
	r := Round{Seed: testSeed(9), DataIndex: 1000, BatchSize: 40, InnerSteps: 1, Clients: 10, WitnessNodes: 3}
	witnesses, total := 0, uint64(0)
	for i := range r.Clients {
		role, err := r.Role(i)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := AssignmentFor(i, r.Clients, r.BatchSize, r.InnerSteps, r.DataIndex, r.Seed)
		if role.Batch != want || role.Witness != IsWitness(i, r.Clients, r.WitnessNodes, r.Seed) {
			t.Fatalf("client %d: role %+v disagrees with AssignmentFor/IsWitness", i, role)
		}
		if role.Witness {
			witnesses++
		}
		total += role.Batch.Len
	}
	if witnesses != 3 || total != 40 {
		t.Fatalf("%d witnesses, %d sequences; want 3 and 40", witnesses, total)
	}
	if _, err := r.Role(10); !errors.Is(err, ErrIndexOutOfRange) {
		t.Fatalf("Role(10) of 10 clients: %v", err)
	}
}

func TestHealthyNeedsAQuorumOfElectedWitnesses(t *testing.T) {
	signer := testSeed(1)
	bloomWith := func(add bool) *Bloom {
		b, err := NewBloom(256, 4, [8]byte{byte(len(signer))})
		if err != nil {
			t.Fatal(err)
		}
		if add {
			b.Add(signer)
		}
		return b
	}
	cases := []struct {
		name    string
		reports []bool
		elected uint16
		want    bool
	}{
		{"all saw it", []bool{true, true, true}, 3, true},
		{"two of three", []bool{true, true, false}, 3, true},
		{"one of three", []bool{true, false, false}, 3, false},
		{"one report of three elected", []bool{true}, 3, false},
		{"nobody elected", nil, 0, false},
		{"three of six", []bool{true, true, true}, 6, false},
		{"four of six", []bool{true, true, true, true}, 6, true},
	}
	for _, c := range cases {
		var blooms []*Bloom
		for _, saw := range c.reports {
			blooms = append(blooms, bloomWith(saw))
		}
		if got := Healthy(blooms, c.elected, signer); got != c.want {
			t.Errorf("%s: Healthy = %v, want %v", c.name, got, c.want)
		}
	}
}
