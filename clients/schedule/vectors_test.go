package schedule

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// vectorsPath is written by programs/coordinator/logic/tests/vectors.rs.
var vectorsPath = filepath.Join("..", "..", "programs", "coordinator", "logic", "testdata", "selection_vectors.json")

type hexSeed Seed

func (h *hexSeed) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != 32 {
		return &json.UnmarshalTypeError{Value: s, Type: nil}
	}
	copy(h[:], raw)
	return nil
}

type vectors struct {
	RoundSeeds []struct {
		Prev        hexSeed `json:"prev"`
		Slot        uint64  `json:"slot"`
		SlotHash    hexSeed `json:"slot_hash"`
		Step        uint32  `json:"step"`
		Seed        hexSeed `json:"seed"`
		WitnessSeed hexSeed `json:"witness_seed"`
		DataSeed    hexSeed `json:"data_seed"`
	} `json:"round_seeds"`
	GenesisSeeds []struct {
		RunID string  `json:"run_id"`
		Seed  hexSeed `json:"seed"`
	} `json:"genesis_seeds"`
	Shuffles []struct {
		Seed      hexSeed  `json:"seed"`
		N         uint32   `json:"n"`
		Positions []uint32 `json:"positions"`
	} `json:"shuffles"`
	Witnesses []struct {
		RoundSeed    hexSeed  `json:"round_seed"`
		N            uint16   `json:"n"`
		WitnessNodes uint16   `json:"witness_nodes"`
		Witnesses    []uint16 `json:"witnesses"`
	} `json:"witnesses"`
	Assignments []struct {
		RoundSeed   hexSeed     `json:"round_seed"`
		N           uint16      `json:"n"`
		BatchSize   uint16      `json:"batch_size"`
		InnerSteps  uint16      `json:"inner_steps"`
		DataIndex   uint64      `json:"data_index"`
		Assignments [][2]uint64 `json:"assignments"`
	} `json:"assignments"`
	BatchSizes []struct {
		Start, End   uint16
		WarmupTokens uint64 `json:"warmup_tokens"`
		Tokens       uint64
		Size         uint16
	} `json:"batch_sizes"`
	DataIndexForStep []struct {
		Start, End   uint16
		WarmupTokens uint64 `json:"warmup_tokens"`
		SeqLen       uint32 `json:"seq_len"`
		InnerSteps   uint16 `json:"inner_steps"`
		Step         uint32
		DataIndex    uint64 `json:"data_index"`
	} `json:"data_index_for_step"`
	Quorums []struct {
		Elected, Quorum uint16
	} `json:"quorums"`
	Blooms []struct {
		NumBits       uint16    `json:"num_bits"`
		NumHashes     uint8     `json:"num_hashes"`
		Salt          string    `json:"salt"`
		Items         []hexSeed `json:"items"`
		Words         []string  `json:"words"`
		Probes        []hexSeed `json:"probes"`
		ProbeContains []bool    `json:"probe_contains"`
	} `json:"blooms"`
	VerifySeeds []struct {
		RoundSeed  hexSeed `json:"round_seed"`
		Slot       uint64  `json:"slot"`
		SlotHash   hexSeed `json:"slot_hash"`
		VerifySeed hexSeed `json:"verify_seed"`
	} `json:"verify_seeds"`
	Verification []struct {
		VerifySeed hexSeed           `json:"verify_seed"`
		N          uint16            `json:"n"`
		Percent    uint8             `json:"percent"`
		Sampled    []bool            `json:"sampled"`
		Verifiers  []*uint16         `json:"verifiers"`
		Committees []json.RawMessage `json:"committees"`
	} `json:"verification"`
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
	if len(v.RoundSeeds) == 0 || len(v.Shuffles) == 0 || len(v.Assignments) == 0 || len(v.Blooms) == 0 {
		t.Fatalf("%s is missing sections", vectorsPath)
	}
	return &v
}

func TestVectorsRoundSeeds(t *testing.T) {
	v := loadVectors(t)
	for i, c := range v.RoundSeeds {
		got := RoundSeed(Seed(c.Prev), c.Slot, c.SlotHash, c.Step)
		if got != Seed(c.Seed) {
			t.Errorf("round seed %d: got %x want %x", i, got, c.Seed)
		}
		if WitnessSeed(got) != Seed(c.WitnessSeed) || DataSeed(got) != Seed(c.DataSeed) {
			t.Errorf("round seed %d: derived seeds differ", i)
		}
	}
	for _, c := range v.GenesisSeeds {
		if got := GenesisSeed([]byte(c.RunID)); got != Seed(c.Seed) {
			t.Errorf("genesis seed of %q: got %x want %x", c.RunID, got, c.Seed)
		}
	}
}

func TestVectorsShuffles(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Shuffles {
		perm := Permutation(c.N, Seed(c.Seed))
		for i, want := range c.Positions {
			if perm[i] != want {
				t.Fatalf("n=%d index %d: Permutation gives %d, Rust %d", c.N, i, perm[i], want)
			}
			got, err := ShuffledPosition(uint32(i), c.N, Seed(c.Seed))
			if err != nil || got != want {
				t.Fatalf("n=%d index %d: ShuffledPosition gives %d (%v), Rust %d", c.N, i, got, err, want)
			}
		}
	}
}

func TestVectorsWitnesses(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Witnesses {
		got := Witnesses(c.N, c.WitnessNodes, Seed(c.RoundSeed))
		if len(got) != len(c.Witnesses) {
			t.Fatalf("n=%d nodes=%d: %v, Rust %v", c.N, c.WitnessNodes, got, c.Witnesses)
		}
		for i := range got {
			if got[i] != c.Witnesses[i] || !IsWitness(got[i], c.N, c.WitnessNodes, Seed(c.RoundSeed)) {
				t.Fatalf("n=%d nodes=%d: %v, Rust %v", c.N, c.WitnessNodes, got, c.Witnesses)
			}
		}
	}
}

func TestVectorsAssignments(t *testing.T) {
	v := loadVectors(t)
	withH := 0
	for _, c := range v.Assignments {
		if c.InnerSteps == 0 {
			t.Fatalf("n=%d batch=%d: no inner_steps in the vector", c.N, c.BatchSize)
		}
		if c.InnerSteps > 1 {
			withH++
		}
		all := Assignments(c.N, c.BatchSize, c.InnerSteps, c.DataIndex, Seed(c.RoundSeed))
		round := Round{Seed: Seed(c.RoundSeed), DataIndex: c.DataIndex, BatchSize: c.BatchSize, InnerSteps: c.InnerSteps, Clients: c.N}
		for i, want := range c.Assignments {
			w := Assignment{Start: want[0], Len: want[1]}
			one, err := AssignmentFor(uint16(i), c.N, c.BatchSize, c.InnerSteps, c.DataIndex, Seed(c.RoundSeed))
			role, rerr := round.Role(uint16(i))
			if err != nil || rerr != nil || one != w || all[i] != w || role.Batch != w {
				t.Fatalf("n=%d batch=%d H=%d client %d: got %+v / %+v / %+v (%v, %v), Rust %+v", c.N, c.BatchSize, c.InnerSteps, i, one, all[i], role.Batch, err, rerr, w)
			}
		}
	}
	if withH == 0 {
		t.Fatal("no assignment vectors with inner steps")
	}
}

func TestVectorsBatchSizesAndQuorums(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.BatchSizes {
		if got := BatchSize(c.Start, c.End, c.WarmupTokens, c.Tokens); got != c.Size {
			t.Errorf("BatchSize(%d, %d, %d, %d) = %d, Rust %d", c.Start, c.End, c.WarmupTokens, c.Tokens, got, c.Size)
		}
	}
	if len(v.DataIndexForStep) == 0 {
		t.Fatal("no data_index_for_step vectors")
	}
	for _, c := range v.DataIndexForStep {
		if got := DataIndexForStep(c.Start, c.End, c.WarmupTokens, c.SeqLen, c.InnerSteps, c.Step); got != c.DataIndex {
			t.Errorf("DataIndexForStep(%d, %d, %d, %d, %d, %d) = %d, Rust %d", c.Start, c.End, c.WarmupTokens, c.SeqLen, c.InnerSteps, c.Step, got, c.DataIndex)
		}
	}
	for _, c := range v.Quorums {
		if got := Quorum(c.Elected); got != c.Quorum {
			t.Errorf("Quorum(%d) = %d, Rust %d", c.Elected, got, c.Quorum)
		}
	}
}

func TestVectorsBlooms(t *testing.T) {
	v := loadVectors(t)
	for i, c := range v.Blooms {
		var salt [8]byte
		raw, err := hex.DecodeString(c.Salt)
		if err != nil || len(raw) != 8 {
			t.Fatalf("bloom %d: bad salt %q", i, c.Salt)
		}
		copy(salt[:], raw)
		b, err := NewBloom(c.NumBits, c.NumHashes, salt)
		if err != nil {
			t.Fatalf("bloom %d: %v", i, err)
		}
		for _, it := range c.Items {
			b.Add(it)
		}
		for w, s := range c.Words {
			want, err := strconv.ParseUint(s, 16, 64)
			if err != nil || b.Words[w] != want {
				t.Fatalf("bloom %d word %d: got %016x, Rust %s", i, w, b.Words[w], s)
			}
		}
		for p, probe := range c.Probes {
			if got := b.Contains(probe); got != c.ProbeContains[p] {
				t.Errorf("bloom %d probe %d: Contains = %v, Rust %v", i, p, got, c.ProbeContains[p])
			}
		}
		for _, it := range c.Items {
			if !b.Contains(it) {
				t.Fatalf("bloom %d: false negative", i)
			}
		}
	}
}

func TestVectorsVerification(t *testing.T) {
	v := loadVectors(t)
	if len(v.VerifySeeds) == 0 || len(v.Verification) == 0 {
		t.Fatal("no verification vectors")
	}
	for i, c := range v.VerifySeeds {
		if got := VerifySeed(Seed(c.RoundSeed), c.Slot, c.SlotHash); got != Seed(c.VerifySeed) {
			t.Errorf("verify seed %d: got %x, Rust %x", i, got, c.VerifySeed)
		}
	}
	for _, c := range v.Verification {
		seed := Seed(c.VerifySeed)
		for i := range c.N {
			if got := Sampled(seed, i, c.Percent); got != c.Sampled[i] {
				t.Errorf("n=%d percent=%d index %d: Sampled = %v, Rust %v", c.N, c.Percent, i, got, c.Sampled[i])
			}
			got, ok := Verifier(seed, i, c.N)
			want := c.Verifiers[i]
			if ok != (want != nil) || (ok && got != *want) {
				t.Errorf("n=%d index %d: Verifier = %d, %v; Rust %v", c.N, i, got, ok, want)
			}
			var pair [2]json.RawMessage
			var accuser uint16
			var committee []uint16
			if err := json.Unmarshal(c.Committees[i], &pair); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(pair[0], &accuser); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(pair[1], &committee); err != nil {
				t.Fatal(err)
			}
			gotC := Committee(seed, i, accuser, c.N)
			if len(gotC) != len(committee) {
				t.Fatalf("n=%d trainer %d accuser %d: Committee = %v, Rust %v", c.N, i, accuser, gotC, committee)
			}
			for k := range gotC {
				if gotC[k] != committee[k] {
					t.Fatalf("n=%d trainer %d accuser %d: Committee = %v, Rust %v", c.N, i, accuser, gotC, committee)
				}
			}
		}
	}
}
