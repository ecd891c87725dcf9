// Package schedule computes a training round's roles from on-chain round state,
// exactly as the Coordinator program does (programs/coordinator/logic/src/selection.rs):
// round seeds, the swap-or-not shuffle, witness election, quorum, the batch-size
// ramp and each client's batch assignment. Shared JSON test vectors written by
// the Rust crate keep the two implementations identical.
package schedule

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Seed is a 32-byte round seed.
type Seed [32]byte

const (
	// ShuffleRounds is the number of swap-or-not rounds.
	ShuffleRounds = 90
	// MaxWitnesses is the number of witnesses elected when witness_nodes is 0.
	MaxWitnesses = 32
	// MaxWarmupTokens bounds global_batch_size_warmup_tokens (see BatchSize).
	MaxWarmupTokens = 1 << 47
)

var (
	roundSeedDomain = []byte("psyche:round-seed:v1")
	witnessDomain   = []byte("psyche:witness")
	dataDomain      = []byte("psyche:data")
)

// ErrIndexOutOfRange means a client index is not below the round's client count.
var ErrIndexOutOfRange = errors.New("client index out of range")

func hashv(parts ...[]byte) Seed {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	var out Seed
	h.Sum(out[:0])
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// RoundSeed is the seed of the round that trains step, from the previous round's
// seed and the latest SlotHashes entry at the tick that started the round.
func RoundSeed(prev Seed, slot uint64, slotHash [32]byte, step uint32) Seed {
	return hashv(roundSeedDomain, prev[:], le64(slot), slotHash[:], le32(step))
}

// GenesisSeed is the seed a run's seed chain starts from.
func GenesisSeed(runID []byte) Seed {
	return hashv(roundSeedDomain, []byte("genesis"), runID)
}

// WitnessSeed keys the witness election of a round.
func WitnessSeed(round Seed) Seed { return hashv(round[:], witnessDomain) }

// DataSeed keys the data-order shuffle of a round.
func DataSeed(round Seed) Seed { return hashv(round[:], dataDomain) }

// ShuffledPosition is the position of index in the swap-or-not permutation of
// 0..n keyed by seed.
func ShuffledPosition(index, n uint32, seed Seed) (uint32, error) {
	if index >= n {
		return 0, fmt.Errorf("%w: index %d, %d clients", ErrIndexOutOfRange, index, n)
	}
	s := newShuffler(n, seed)
	return s.position(index), nil
}

// Permutation returns the shuffled position of every index 0..n-1, computing
// each round's hashes once (90 * (1 + ceil(n/256)) hashes instead of 180 per index).
func Permutation(n uint32, seed Seed) []uint32 {
	s := newShuffler(n, seed)
	for r := range s.pivots {
		for b := range s.sources[r] {
			s.source(r, uint32(b))
		}
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = s.position(uint32(i))
	}
	return out
}

// shuffler caches the per-round pivots and source blocks of one permutation.
type shuffler struct {
	n       uint64
	seed    Seed
	pivots  [ShuffleRounds]uint64
	sources [ShuffleRounds][]*Seed
}

func newShuffler(n uint32, seed Seed) *shuffler {
	s := &shuffler{n: uint64(n), seed: seed}
	blocks := (n + 255) / 256
	for r := range s.pivots {
		h := hashv(seed[:], []byte{byte(r)})
		s.pivots[r] = binary.LittleEndian.Uint64(h[:8]) % s.n
		s.sources[r] = make([]*Seed, blocks)
	}
	return s
}

func (s *shuffler) source(round int, block uint32) *Seed {
	if s.sources[round][block] == nil {
		h := hashv(s.seed[:], []byte{byte(round)}, le32(block))
		s.sources[round][block] = &h
	}
	return s.sources[round][block]
}

func (s *shuffler) position(index uint32) uint32 {
	idx := uint64(index)
	for r := range s.pivots {
		flip := (s.pivots[r] + s.n - idx) % s.n
		pos := max(idx, flip)
		src := s.source(r, uint32(pos/256))
		if (src[(pos%256)/8]>>(pos%8))&1 == 1 {
			idx = flip
		}
	}
	return uint32(idx)
}

// WitnessCount is the number of witnesses elected in a round of n clients.
func WitnessCount(witnessNodes, n uint16) uint16 {
	wanted := witnessNodes
	if wanted == 0 {
		wanted = MaxWitnesses
	}
	return min(wanted, n)
}

// IsWitness reports whether client index of a round of n clients is a witness.
func IsWitness(index, n, witnessNodes uint16, round Seed) bool {
	p, err := ShuffledPosition(uint32(index), uint32(n), WitnessSeed(round))
	return err == nil && p < uint32(WitnessCount(witnessNodes, n))
}

// Witnesses lists the elected witnesses of a round, by client index, ascending.
func Witnesses(n, witnessNodes uint16, round Seed) []uint16 {
	count := uint32(WitnessCount(witnessNodes, n))
	var out []uint16
	for i, p := range Permutation(uint32(n), WitnessSeed(round)) {
		if p < count {
			out = append(out, uint16(i))
		}
	}
	return out
}

// Quorum is the number of witness reports a round with elected witnesses needs:
// ceil(2/3 of elected); 1 (unreachable) when nobody is elected.
func Quorum(elected uint16) uint16 {
	if elected == 0 {
		return 1
	}
	return uint16((2*uint32(elected) + 2) / 3)
}

// BatchSize is the global batch size (sequences) once tokens tokens have been
// trained: a linear ramp from start to end over warmupTokens, then end.
func BatchSize(start, end uint16, warmupTokens, tokens uint64) uint16 {
	if end <= start || tokens >= warmupTokens || warmupTokens > MaxWarmupTokens {
		return end
	}
	return start + uint16(uint64(end-start)*tokens/warmupTokens)
}

// TokensBefore is the number of tokens trained before sequence dataIndex with
// sequences of seqLen tokens (seqLen clamped to 2^16, saturating past 2^47
// sequences, where every batch ramp is over), as the program computes it.
func TokensBefore(dataIndex uint64, seqLen uint32) uint64 {
	if dataIndex > MaxWarmupTokens {
		return ^uint64(0)
	}
	return dataIndex * uint64(min(seqLen, 1<<16))
}

// DataIndexForStep is the data cursor at the start of step for a run that began
// at step 1 with cursor 0 and kept this batch schedule: each step is one round
// and moves the cursor by its batch size times innerSteps (the model's inner
// steps per round; 0 counts as 1), the batch size following the ramp at the
// tokens before the round's cursor. Used to restart a run from a step.
// Saturates at the largest uint64, as the program's data_index_for_step does.
func DataIndexForStep(start, end uint16, warmupTokens uint64, seqLen uint32, innerSteps uint16, step uint32) uint64 {
	h := uint64(max(innerSteps, 1))
	var index uint64
	for s := uint32(1); s < step; s++ {
		tokens := TokensBefore(index, seqLen)
		if tokens >= warmupTokens {
			return satAdd(index, satMul(satMul(uint64(step-s), uint64(end)), h))
		}
		index = satAdd(index, satMul(uint64(BatchSize(start, end, warmupTokens, tokens)), h))
	}
	return index
}

func satAdd(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

func satMul(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}

// Assignment is the half-open range of global sequence indices [Start, Start+Len)
// that one client trains in a round: with H inner steps, H equal contiguous
// parts, one per inner step (see InnerStep).
type Assignment struct {
	Start uint64
	Len   uint64
}

// InnerStep is the part of a round's assignment trained in inner step j
// (0-based) of innerSteps (0 counts as 1): [Start + j*Len/H, Start + (j+1)*Len/H).
func (a Assignment) InnerStep(j, innerSteps uint16) Assignment {
	h := uint64(max(innerSteps, 1))
	per := a.Len / h
	return Assignment{Start: a.Start + uint64(j)*per, Len: per}
}

// chunk is the assignment of the client at shuffled position p of n: its share
// (offset, len) of one inner step's batch, taken innerSteps times in a row.
func chunk(p, n, batchSize, innerSteps uint64, dataIndex uint64) Assignment {
	q, r := batchSize/n, batchSize%n
	offset, length := p*q+min(p, r), q
	if p < r {
		length++
	}
	h := max(innerSteps, 1)
	return Assignment{Start: dataIndex + offset*h, Len: length * h}
}

// AssignmentFor is the batch client index trains in a round of n clients
// whose inner steps each train a global batch of batchSize sequences, starting
// at dataIndex: the client's share of each of the innerSteps inner steps (0
// counts as 1), contiguous.
func AssignmentFor(index, n, batchSize, innerSteps uint16, dataIndex uint64, round Seed) (Assignment, error) {
	p, err := ShuffledPosition(uint32(index), uint32(n), DataSeed(round))
	if err != nil {
		return Assignment{}, err
	}
	return chunk(uint64(p), uint64(n), uint64(batchSize), uint64(innerSteps), dataIndex), nil
}

// Assignments lists every client's batch in a round, by client index.
func Assignments(n, batchSize, innerSteps uint16, dataIndex uint64, round Seed) []Assignment {
	out := make([]Assignment, n)
	for i, p := range Permutation(uint32(n), DataSeed(round)) {
		out[i] = chunk(uint64(p), uint64(n), uint64(batchSize), uint64(innerSteps), dataIndex)
	}
	return out
}

// Round is what a client reads from the Coordinator account to find its role:
// the current round's fields and the run's witness_nodes.
type Round struct {
	Seed      Seed
	DataIndex uint64
	// BatchSize is the global batch of one inner step, in sequences.
	BatchSize uint16
	// InnerSteps is the round's inner steps (the Round's inner_steps: 1 for
	// DisTrO, the model's inner_steps for SparseLoCo; 0 counts as 1).
	InnerSteps   uint16
	Clients      uint16
	WitnessNodes uint16
}

// Role is one client's part in a round.
type Role struct {
	// Witness is true when the client must report Bloom filters for the round.
	Witness bool
	// Batch is the range of sequences the client trains (all inner steps;
	// Batch.InnerStep splits it).
	Batch Assignment
}

// Role computes the role of the client at index in the round's client list.
func (r Round) Role(index uint16) (Role, error) {
	batch, err := AssignmentFor(index, r.Clients, r.BatchSize, r.InnerSteps, r.DataIndex, r.Seed)
	if err != nil {
		return Role{}, err
	}
	return Role{Witness: IsWitness(index, r.Clients, r.WitnessNodes, r.Seed), Batch: batch}, nil
}

// Healthy applies the program's health rule to one client of a finished round:
// it is healthy when at least a quorum of the round's elected witnesses put its
// signer in their participant filter. Witnesses use it to decide whom to accuse;
// an accusation of a healthy client is rejected on-chain.
func Healthy(participantBlooms []*Bloom, elected uint16, signer [32]byte) bool {
	seen := 0
	for _, b := range participantBlooms {
		if b != nil && b.Contains(signer) {
			seen++
		}
	}
	return seen >= int(Quorum(elected))
}
