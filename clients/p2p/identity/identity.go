// Package identity loads, creates and describes a client's p2p identity: an
// ed25519 key whose 32-byte seed is stored raw in a file (like `openssl rand 32`).
// The public half is what a client registers on-chain when it joins a run, so
// every other client can derive its libp2p peer ID from the participant list.
package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// SeedSize is the size of an identity file: a raw ed25519 seed.
const SeedSize = ed25519.SeedSize

// EnvSecretKey names the environment variable that may carry the seed as hex
// instead of a file, for containers that receive secrets through the environment.
const EnvSecretKey = "RAW_IDENTITY_SECRET_KEY"

// ErrBadIdentity marks identity input (file or environment) that is malformed.
var ErrBadIdentity = errors.New("bad p2p identity")

// FromSeed derives the libp2p private key for a 32-byte ed25519 seed.
func FromSeed(seed []byte) (crypto.PrivKey, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("%w: seed is %d bytes, want exactly %d", ErrBadIdentity, len(seed), SeedSize)
	}
	// libp2p's ed25519 private key encoding is the 64-byte seed||public form.
	key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, fmt.Errorf("derive ed25519 key: %w", err)
	}
	return key, nil
}

// Generate returns a fresh random identity, for clients that do not need a
// stable peer ID across restarts.
func Generate() (crypto.PrivKey, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return key, nil
}

// Load reads a 32-byte seed file.
func Load(path string) (crypto.PrivKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadIdentity, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrBadIdentity, path)
	}
	if info.Size() != SeedSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, want exactly %d raw bytes (create one with create-static-p2p-identity)", ErrBadIdentity, path, info.Size(), SeedSize)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadIdentity, err)
	}
	key, err := FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// FromEnv reads a hex seed from EnvSecretKey; ok is false when it is unset
// or empty.
func FromEnv() (key crypto.PrivKey, ok bool, err error) {
	raw := os.Getenv(EnvSecretKey)
	if strings.TrimSpace(raw) == "" {
		return nil, false, nil
	}
	seed, err := hex.DecodeString(strings.TrimSpace(raw))
	if err != nil {
		return nil, true, fmt.Errorf("%w: %s is not hex: %w", ErrBadIdentity, EnvSecretKey, err)
	}
	key, err = FromSeed(seed)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", EnvSecretKey, err)
	}
	return key, true, nil
}

// Create writes a new random seed to path and returns its key. It never
// overwrites an existing file: losing an identity loses the on-chain registration.
func Create(path string) (crypto.PrivKey, error) {
	seed := make([]byte, SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("read random seed: %w", err)
	}
	key, err := FromSeed(seed)
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, seed); err != nil {
		return nil, err
	}
	return key, nil
}

// writeNew creates path holding the whole seed, and never replaces a file
// that is already there.
func writeNew(path string, data []byte) error {
	if err := atomicfile.WriteNew(path, data, 0o600); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s already exists; refusing to overwrite an identity", ErrBadIdentity, path)
		}
		return fmt.Errorf("%w: %w", ErrBadIdentity, err)
	}
	return nil
}

// PublicKey returns the raw 32-byte ed25519 public key of an identity: the
// value registered on-chain.
func PublicKey(key crypto.PrivKey) ([]byte, error) {
	raw, err := key.GetPublic().Raw()
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return raw, nil
}

// PeerIDFromPublicKey derives the libp2p peer ID of a raw ed25519 public key,
// as read from a participant entry on-chain.
func PeerIDFromPublicKey(pub []byte) (peer.ID, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: public key is %d bytes, want %d", ErrBadIdentity, len(pub), ed25519.PublicKeySize)
	}
	pk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadIdentity, err)
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return "", fmt.Errorf("derive peer id: %w", err)
	}
	return id, nil
}

// PublicKeyFromPeerID is the inverse of PeerIDFromPublicKey, for peer IDs
// that embed an ed25519 key (all Psyche clients' IDs do).
func PublicKeyFromPeerID(id peer.ID) ([]byte, error) {
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: peer id %s carries no public key: %w", ErrBadIdentity, id, err)
	}
	if pk.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%w: peer id %s is not an ed25519 key", ErrBadIdentity, id)
	}
	return pk.Raw()
}
