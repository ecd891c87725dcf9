package p2p

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Hash is the sha256 of a payload (a blob, a model chunk or a manifest).
type Hash [32]byte

// HashOf returns the sha256 of data.
func HashOf(data []byte) Hash { return sha256.Sum256(data) }

func (h Hash) String() string { return fmt.Sprintf("%x", h[:]) }

// BatchID names the closed range of data samples a result was trained on.
type BatchID struct{ Start, End uint64 }

// Announcement says that Signer produced a payload for a batch at a step and
// serves it by hash. The signature binds every field to the run, so an
// announcement cannot be replayed into another run or altered by a forwarder.
type Announcement struct {
	Step      uint64
	Batch     BatchID
	Hash      Hash
	Size      uint64
	Signer    peer.ID
	Signature []byte
}

// Finished says that Signer has applied (or, in warmup, loaded) everything for
// a step. Digest is the caller's summary of what it saw (e.g. a merkle root of
// the announcements it counted), so witnesses can compare views.
type Finished struct {
	Step      uint64
	Warmup    bool
	Digest    Hash
	Signer    peer.ID
	Signature []byte
}

// Message kinds on the wire.
const (
	wireVersion      = 1
	kindAnnouncement = 1
	kindFinished     = 2
)

// Bounds on variable-length fields so that a hostile message cannot make us
// allocate: a peer ID of an inlined ed25519 key is 38 bytes, its signature 64.
const (
	maxPeerIDLen    = 64
	maxSignatureLen = 128
	// MaxGossipMessageSize bounds any gossip message; ours are under 200 bytes.
	MaxGossipMessageSize = 1024
)

var (
	errTruncated = errors.New("message truncated")
	errTrailing  = errors.New("trailing bytes after message")
)

// signedBytes is what the signer signs: a domain tag, the run key, and the
// message encoded without its signature.
func signedBytes(runKey Hash, body []byte) []byte {
	out := make([]byte, 0, len("psyche/p2p/v1/")+len(runKey)+len(body))
	out = append(out, "psyche/p2p/v1/"...)
	out = append(out, runKey[:]...)
	return append(out, body...)
}

func (a *Announcement) body() []byte {
	b := []byte{wireVersion, kindAnnouncement}
	b = binary.BigEndian.AppendUint64(b, a.Step)
	b = binary.BigEndian.AppendUint64(b, a.Batch.Start)
	b = binary.BigEndian.AppendUint64(b, a.Batch.End)
	b = append(b, a.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, a.Size)
	return appendBytes(b, []byte(a.Signer))
}

func (f *Finished) body() []byte {
	b := []byte{wireVersion, kindFinished}
	b = binary.BigEndian.AppendUint64(b, f.Step)
	warm := byte(0)
	if f.Warmup {
		warm = 1
	}
	b = append(b, warm)
	b = append(b, f.Digest[:]...)
	return appendBytes(b, []byte(f.Signer))
}

func appendBytes(b, v []byte) []byte {
	b = append(b, byte(len(v)))
	return append(b, v...)
}

// sign signs a message body for the run named by runKey.
func sign(key crypto.PrivKey, runKey Hash, body []byte) ([]byte, error) {
	sig, err := key.Sign(signedBytes(runKey, body))
	if err != nil {
		return nil, fmt.Errorf("sign message: %w", err)
	}
	return sig, nil
}

// verify checks sig over body against the key embedded in signer.
func verify(runKey Hash, signer peer.ID, body, sig []byte) error {
	pub, err := signer.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("signer %s carries no public key: %w", signer, err)
	}
	ok, err := pub.Verify(signedBytes(runKey, body), sig)
	if err != nil {
		return fmt.Errorf("verify signature of %s: %w", signer, err)
	}
	if !ok {
		return fmt.Errorf("bad signature from %s", signer)
	}
	return nil
}

// Verify checks that the announcement was signed by its Signer for this run.
func (a *Announcement) Verify(runKey Hash) error {
	return verify(runKey, a.Signer, a.body(), a.Signature)
}

// Verify checks that the Finished message was signed by its Signer for this run.
func (f *Finished) Verify(runKey Hash) error { return verify(runKey, f.Signer, f.body(), f.Signature) }

// encodeAnnouncement and encodeFinished serialise a message with its signature.
func encodeAnnouncement(a *Announcement) []byte { return appendBytes(a.body(), a.Signature) }
func encodeFinished(f *Finished) []byte         { return appendBytes(f.body(), f.Signature) }

// decodeMessage parses a gossip message; it never panics on malformed input.
// It checks structure only; the caller verifies the signature.
func decodeMessage(data []byte) (*Announcement, *Finished, error) {
	if len(data) > MaxGossipMessageSize {
		return nil, nil, fmt.Errorf("message of %d bytes exceeds %d", len(data), MaxGossipMessageSize)
	}
	r := reader{buf: data}
	version, kind := r.byte(), r.byte()
	if r.err == nil && version != wireVersion {
		return nil, nil, fmt.Errorf("unknown message version %d", version)
	}
	switch kind {
	case kindAnnouncement:
		a := &Announcement{Step: r.u64()}
		a.Batch.Start, a.Batch.End = r.u64(), r.u64()
		copy(a.Hash[:], r.bytes(len(a.Hash)))
		a.Size = r.u64()
		a.Signer = peer.ID(r.varBytes(maxPeerIDLen))
		a.Signature = r.varBytes(maxSignatureLen)
		if err := r.done(); err != nil {
			return nil, nil, fmt.Errorf("decode announcement: %w", err)
		}
		if a.Batch.End < a.Batch.Start {
			return nil, nil, fmt.Errorf("announcement batch %d..%d is inverted", a.Batch.Start, a.Batch.End)
		}
		return a, nil, nil
	case kindFinished:
		f := &Finished{Step: r.u64()}
		switch r.byte() {
		case 0:
		case 1:
			f.Warmup = true
		default:
			return nil, nil, errors.New("decode finished: warmup flag is not 0 or 1")
		}
		copy(f.Digest[:], r.bytes(len(f.Digest)))
		f.Signer = peer.ID(r.varBytes(maxPeerIDLen))
		f.Signature = r.varBytes(maxSignatureLen)
		if err := r.done(); err != nil {
			return nil, nil, fmt.Errorf("decode finished: %w", err)
		}
		return nil, f, nil
	default:
		if r.err != nil {
			return nil, nil, fmt.Errorf("decode message: %w", r.err)
		}
		return nil, nil, fmt.Errorf("unknown message kind %d", kind)
	}
}

// reader consumes a byte slice, remembering the first error so that decoders
// read straight through and check once.
type reader struct {
	buf []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.buf) {
		r.err = errTruncated
		return nil
	}
	v := r.buf[:n:n]
	r.buf = r.buf[n:]
	return v
}

func (r *reader) byte() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) varBytes(max int) []byte {
	n := int(r.byte())
	if r.err == nil && n > max {
		r.err = fmt.Errorf("field of %d bytes exceeds %d", n, max)
		return nil
	}
	return r.bytes(n)
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.buf) != 0 {
		return errTrailing
	}
	return nil
}
