package schedule

import "encoding/binary"

// Verification of training (the Coordinator's commit/verify instructions and
// disputes), as programs/coordinator/logic/src/selection.rs and machine.rs
// compute it.

var (
	verifySeedDomain = []byte("psyche:verify-seed:v1")
	sampleDomain     = []byte("psyche:sample")
	verifierDomain   = []byte("psyche:verifier")
	committeeDomain  = []byte("psyche:committee")
)

// CommitteeSize is the number of members on a dispute's committee (fewer in
// rounds too small to have them).
const CommitteeSize = 3

// VerifySeed is the seed of a round's verification sampling, drawn when its
// RoundTrain phase ends, from the round seed and the newest SlotHashes entry
// at that moment (round.verify_seed on-chain; zero before).
func VerifySeed(round Seed, slot uint64, slotHash [32]byte) Seed {
	return hashv(verifySeedDomain, round[:], le64(slot), slotHash[:])
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// draw is the first 8 bytes of sha256(seed ‖ domain ‖ le16(index)) as a
// little-endian u64.
func draw(seed Seed, domain []byte, index uint16) uint64 {
	h := hashv(seed[:], domain, le16(index))
	return binary.LittleEndian.Uint64(h[:8])
}

// Sampled reports whether the commitment of round member index is sampled
// for verification at percent (0: never; 100 and above: always).
func Sampled(verifySeed Seed, index uint16, percent uint8) bool {
	switch {
	case percent == 0:
		return false
	case percent >= 100:
		return true
	}
	return draw(verifySeed, sampleDomain, index)%100 < uint64(percent)
}

// Verifier is the round member that verifies member index of a round of n:
// uniform over the other n-1 members, never index itself. ok is false below
// 2 members.
func Verifier(verifySeed Seed, index, n uint16) (verifier uint16, ok bool) {
	if n < 2 {
		return 0, false
	}
	off := draw(verifySeed, verifierDomain, index) % uint64(n-1)
	return uint16((uint64(index) + 1 + off) % uint64(n)), true
}

// FallbackVerifier is the verifier of member index's commitment once the
// drawn one (drawn) is no longer healthy: the first member other than the
// trainer and drawn for which healthy holds, walking the indices of a round
// of n from sha256(verifySeed ‖ "psyche:committee" ‖ le16(index)) mod n, as
// Committee does. The program's selection::fallback_verifier.
func FallbackVerifier(verifySeed Seed, index, drawn, n uint16, healthy func(uint16) bool) (uint16, bool) {
	if n == 0 {
		return 0, false
	}
	i := uint16(draw(verifySeed, committeeDomain, index) % uint64(n))
	for range n {
		if i != index && i != drawn && healthy(i) {
			return i, true
		}
		i = uint16((uint32(i) + 1) % uint32(n))
	}
	return 0, false
}

// Committee is a dispute's committee: up to CommitteeSize round members other
// than the trainer and the accuser, walking the indices of a round of n from
// sha256(verifySeed ‖ "psyche:committee" ‖ le16(trainer)) mod n. The program
// stores their client slots (Dispute.committee); these are round indices.
func Committee(verifySeed Seed, trainer, accuser, n uint16) []uint16 {
	if n == 0 {
		return nil
	}
	var out []uint16
	i := uint16(draw(verifySeed, committeeDomain, trainer) % uint64(n))
	for range n {
		if len(out) == CommitteeSize {
			break
		}
		if i != trainer && i != accuser {
			out = append(out, i)
		}
		i = uint16((uint32(i) + 1) % uint32(n))
	}
	return out
}

// OnProbation reports whether a client found at fault (hasFault, in
// lastFaultEpoch) is on fault probation in epoch: a fault this epoch or the
// previous one. Its every commitment is verified meanwhile.
func OnProbation(hasFault bool, lastFaultEpoch, epoch uint32) bool {
	next := lastFaultEpoch + 1
	if next < lastFaultEpoch { // saturating, as the program adds
		next = ^uint32(0)
	}
	return hasFault && next >= epoch
}

// Probation reports whether a member is on probation, as the program
// decides when the member commits (and records in the commitment's PROBATION
// flag): its first epoch in the run (its slot's has_finished is 0), or a
// fault this epoch or the previous one.
func Probation(hasFinished, hasFault bool, lastFaultEpoch, epoch uint32) bool {
	return !hasFinished || OnProbation(hasFault, lastFaultEpoch, epoch)
}

// MustVerify reports whether the commitment of round member index must be
// verified (the program's must_verify for a committed member): never while
// verification is off (percent 0); otherwise when the commitment carries the
// PROBATION flag (probation), or when the round's verify seed samples it.
func MustVerify(percent uint8, verifySeed Seed, index uint16, probation bool) bool {
	return percent > 0 && (probation || Sampled(verifySeed, index, percent))
}
