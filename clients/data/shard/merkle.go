package shard

import "crypto/sha256"

// Hash is a SHA-256 digest.
type Hash [sha256.Size]byte

// Merkle trees here follow RFC 6962 (Certificate Transparency) with SHA-256:
// a leaf over data d hashes 0x00||d, an inner node over children l and r
// hashes 0x01||l||r, and a tree of n > 1 leaves splits after the largest power
// of two below n. The prefixes keep leaves and nodes from being confused, and
// the split leaves no odd node to duplicate, so two different leaf lists never
// share a root.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// LeafHash is the Merkle leaf hash of data.
func LeafHash(data []byte) Hash {
	h := sha256.New()
	h.Write([]byte{leafPrefix})
	h.Write(data)
	return Hash(h.Sum(nil))
}

func nodeHash(left, right Hash) Hash {
	var buf [1 + 2*sha256.Size]byte
	buf[0] = nodePrefix
	copy(buf[1:], left[:])
	copy(buf[1+sha256.Size:], right[:])
	return sha256.Sum256(buf[:])
}

// MerkleRoot is the root of the tree whose leaves have the given leaf hashes.
// The root of no leaves is SHA-256 of the empty string, as in RFC 6962.
func MerkleRoot(leaves []Hash) Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return nodeHash(MerkleRoot(leaves[:k]), MerkleRoot(leaves[k:]))
}
