// Package shard defines the on-disk training data format: shards of packed
// token sequences, per-chunk hash files, and the manifest whose Merkle root a
// run config pins. README.md in clients/data documents every byte.
package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

const (
	// Magic opens every shard file.
	Magic = "PSYSHARD"
	// Version is the shard format version of plain (pretraining) shards.
	Version = 1
	// VersionMasked marks a shard whose sequences carry a loss mask.
	VersionMasked = 2
	// HeaderSize is the size of the shard header; sequences follow it.
	HeaderSize = 64
	// MaxVocab is the largest vocabulary a dataset may have: room for
	// Gemma's 256,000 tokens. Tokenizers above it are refused as well.
	MaxVocab = 1 << 18
	// maskWordBytes is the size of a loss mask word, a little-endian uint16
	// whatever the token width.
	maskWordBytes = 2
	// maxTokenizerName is the width of the header's tokenizer field.
	maxTokenizerName = 16
)

// Header is the fixed 64-byte little-endian header of a shard file:
//
//	offset size field
//	     0    8 magic "PSYSHARD"
//	     8    4 version (1; 2 when sequences carry a loss mask)
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
	LossMask     bool // version 2
}

// TokenBytes is the size of one stored token: a little-endian uint16 for a
// vocabulary of at most 65536 ids, so that such datasets keep their bytes and
// roots, and a little-endian uint32 above. vocab_size is in the header and
// the root, so the width needs no field of its own.
func TokenBytes(vocab uint32) int {
	if vocab <= 1<<16 {
		return 2
	}
	return 4
}

// MaskWords is the size of a sequence's loss mask in 16-bit words: one bit
// per target, bit j%16 of word j/16 set when target j is trained.
func MaskWords(seqLen uint32) int { return int(seqLen+15) / 16 }

// Trained says whether the mask words of a sequence (as providers return
// them, after its seq_len+1 tokens) train target j.
func Trained(mask []uint32, j int) bool { return mask[j/16]&(1<<(j%16)) != 0 }

// SequenceWords is the length of one sequence in memory: seq_len+1 tokens,
// then the loss mask's words when the dataset has one.
func SequenceWords(seqLen uint32, lossMask bool) int {
	if lossMask {
		return int(seqLen) + 1 + MaskWords(seqLen)
	}
	return int(seqLen) + 1
}

// SequenceBytes is the size of one stored sequence.
func SequenceBytes(vocab, seqLen uint32, lossMask bool) int64 {
	n := int64(seqLen+1) * int64(TokenBytes(vocab))
	if lossMask {
		n += int64(MaskWords(seqLen)) * maskWordBytes
	}
	return n
}

// putToken and getToken store one token in width bytes (TokenBytes).
func putToken(b []byte, width int, t uint32) {
	if width == 2 {
		binary.LittleEndian.PutUint16(b, uint16(t))
		return
	}
	binary.LittleEndian.PutUint32(b, t)
}

func getToken(b []byte, width int) uint32 {
	if width == 2 {
		return uint32(binary.LittleEndian.Uint16(b))
	}
	return binary.LittleEndian.Uint32(b)
}

// MarshalBinary encodes the header into its 64 bytes.
func (h Header) MarshalBinary() ([]byte, error) {
	if len(h.Tokenizer) == 0 || len(h.Tokenizer) > maxTokenizerName {
		return nil, fmt.Errorf("tokenizer name %q must have 1 to %d bytes", h.Tokenizer, maxTokenizerName)
	}
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], h.version())
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

func (h Header) version() uint32 {
	if h.LossMask {
		return VersionMasked
	}
	return Version
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
	v := le.Uint32(b[8:])
	if v != Version && v != VersionMasked {
		return fmt.Errorf("shard format version %d, this build reads %d and %d", v, Version, VersionMasked)
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
		LossMask:     v == VersionMasked,
	}
	return nil
}

// DecodeSequence converts one stored sequence to its tokens and, when dst
// has room past the seq_len+1 tokens, its mask words (SequenceWords words in
// all). It checks each token against the vocabulary so that no id can index
// past an embedding table, and that the mask has no bits beyond its seq_len
// targets (one spelling for each mask).
func DecodeSequence(dst []uint32, b []byte, vocabSize, seqLen uint32) error {
	n := int(seqLen) + 1
	masked := len(dst) > n
	if len(dst) != SequenceWords(seqLen, masked) || int64(len(b)) != SequenceBytes(vocabSize, seqLen, masked) {
		return fmt.Errorf("%d bytes for %d words", len(b), len(dst))
	}
	width := TokenBytes(vocabSize)
	for i := range n {
		id := getToken(b[i*width:], width)
		if id >= vocabSize {
			return fmt.Errorf("token %d at position %d is outside the vocabulary of %d", id, i, vocabSize)
		}
		dst[i] = id
	}
	mask := b[n*width:]
	for i := range dst[n:] {
		dst[n+i] = uint32(binary.LittleEndian.Uint16(mask[i*maskWordBytes:]))
	}
	return checkMask(dst[n:], seqLen)
}

// checkMask refuses mask words with bits past target seq_len-1.
func checkMask(mask []uint32, seqLen uint32) error {
	if len(mask) == 0 || seqLen%16 == 0 {
		return nil
	}
	if extra := mask[len(mask)-1] >> (seqLen % 16); extra != 0 {
		return fmt.Errorf("loss mask has bits set past its %d targets", seqLen)
	}
	return nil
}
