// Package shard defines the on-disk training data format: shards of packed
// uint16 token sequences, per-chunk hash files, and the manifest whose Merkle
// root a run config pins. README.md in clients/data documents every byte.
package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

const (
	// Magic opens every shard file.
	Magic = "PSYSHARD"
	// Version is the shard and manifest format version this package writes.
	Version = 1
	// HeaderSize is the size of the shard header; sequences follow it.
	HeaderSize = 64
	// TokenBytes is the size of one token: little-endian uint16.
	TokenBytes = 2
	// maxTokenizerName is the width of the header's tokenizer field.
	maxTokenizerName = 16
)

// Header is the fixed 64-byte little-endian header of a shard file:
//
//	offset size field
//	     0    8 magic "PSYSHARD"
//	     8    4 version (1)
//	    12    4 header size (64)
//	    16    4 vocabulary size
//	    20    4 end-of-text (document separator) token id
//	    24    4 seq_len: each sequence holds seq_len+1 tokens
//	    28    4 sequences per chunk (the unit of hashing)
//	    32    8 number of sequences in this shard
//	    40    8 global index of the shard's first sequence
//	    48   16 tokenizer name, ASCII, zero-padded
type Header struct {
	VocabSize    uint32
	EOT          uint32
	SeqLen       uint32
	SeqsPerChunk uint32
	NumSequences uint64
	FirstIndex   uint64
	Tokenizer    string
}

// SequenceBytes is the size of one stored sequence (seq_len+1 tokens).
func SequenceBytes(seqLen uint32) int64 { return (int64(seqLen) + 1) * TokenBytes }

// MarshalBinary encodes the header into its 64 bytes.
func (h Header) MarshalBinary() ([]byte, error) {
	if len(h.Tokenizer) == 0 || len(h.Tokenizer) > maxTokenizerName {
		return nil, fmt.Errorf("tokenizer name %q must have 1 to %d bytes", h.Tokenizer, maxTokenizerName)
	}
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], Version)
	le.PutUint32(b[12:], HeaderSize)
	le.PutUint32(b[16:], h.VocabSize)
	le.PutUint32(b[20:], h.EOT)
	le.PutUint32(b[24:], h.SeqLen)
	le.PutUint32(b[28:], h.SeqsPerChunk)
	le.PutUint64(b[32:], h.NumSequences)
	le.PutUint64(b[40:], h.FirstIndex)
	copy(b[48:], h.Tokenizer)
	return b, nil
}

// UnmarshalBinary decodes and checks a 64-byte header.
func (h *Header) UnmarshalBinary(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[:8]) != Magic {
		return fmt.Errorf("not a shard: magic %q, want %q", b[:8], Magic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != Version {
		return fmt.Errorf("shard format version %d, this build reads %d", v, Version)
	}
	if s := le.Uint32(b[12:]); s != HeaderSize {
		return fmt.Errorf("header size field %d, want %d", s, HeaderSize)
	}
	name := b[48:HeaderSize]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		if bytes.IndexFunc(name[i:], func(r rune) bool { return r != 0 }) >= 0 {
			return fmt.Errorf("tokenizer field has bytes after its terminating zero")
		}
		name = name[:i]
	}
	*h = Header{
		VocabSize:    le.Uint32(b[16:]),
		EOT:          le.Uint32(b[20:]),
		SeqLen:       le.Uint32(b[24:]),
		SeqsPerChunk: le.Uint32(b[28:]),
		NumSequences: le.Uint64(b[32:]),
		FirstIndex:   le.Uint64(b[40:]),
		Tokenizer:    string(name),
	}
	return nil
}

// DecodeTokens converts stored little-endian tokens to ids, checking each
// against the vocabulary so that no id can index past an embedding table.
func DecodeTokens(dst []uint16, b []byte, vocabSize uint32) error {
	if len(b) != len(dst)*TokenBytes {
		return fmt.Errorf("%d bytes for %d tokens", len(b), len(dst))
	}
	for i := range dst {
		id := binary.LittleEndian.Uint16(b[i*TokenBytes:])
		if uint32(id) >= vocabSize {
			return fmt.Errorf("token %d at position %d is outside the vocabulary of %d", id, i, vocabSize)
		}
		dst[i] = id
	}
	return nil
}
