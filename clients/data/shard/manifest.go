package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

const (
	// Format names the dataset format in manifests and in the root's first leaf.
	Format = "psyche-data/1"
	// ManifestName is the manifest's file name inside a dataset directory.
	ManifestName = "manifest.json"
	// ShardExt and ChunksExt end shard and chunk-hash file names.
	ShardExt  = ".tok"
	ChunksExt = ".chunks"
	// MaxSeqLen bounds seq_len so that sizes stay far from overflow.
	MaxSeqLen = 1 << 20
)

// shardNameRE keeps names usable as plain file names and URL path segments.
var shardNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.tok$`)

// Manifest describes a dataset: its tokenization and its shards in order.
// Global sequence index i lives in the shard whose range covers it, the
// shards' ranges following one another in the listed order. Every field is
// covered by Root; see ComputeRoot.
type Manifest struct {
	Format       string `json:"format"`
	Tokenizer    string `json:"tokenizer"`
	VocabSize    uint32 `json:"vocab_size"`
	EOT          uint32 `json:"eot"`
	SeqLen       uint32 `json:"seq_len"`
	SeqsPerChunk uint32 `json:"seqs_per_chunk"`
	NumSequences uint64 `json:"num_sequences"`
	// LossMask marks a fine-tuning dataset: each sequence carries a mask
	// of the targets the loss is computed on (README "Fine-tuning data").
	LossMask bool `json:"loss_mask,omitempty"`
	// ChatTemplate is the SHA-256 (hex) of the chat template that shaped a
	// masked dataset's conversations; empty when none did.
	ChatTemplate string  `json:"chat_template,omitempty"`
	Shards       []Entry `json:"shards"`
	Root         string  `json:"root"`

	starts []uint64 // global index of each shard's first sequence; set by Validate
}

// Entry describes one shard file.
type Entry struct {
	Name         string `json:"name"`
	NumSequences uint64 `json:"num_sequences"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`     // of the whole file, header included
	ChunkRoot    string `json:"chunk_root"` // Merkle root of the chunk leaf hashes
}

// ChunksName is the name of the file holding a shard's chunk leaf hashes.
func ChunksName(shardName string) string {
	return strings.TrimSuffix(shardName, ShardExt) + ChunksExt
}

// SequenceBytes is the size of one stored sequence.
func (m *Manifest) SequenceBytes() int64 { return SequenceBytes(m.VocabSize, m.SeqLen, m.LossMask) }

// SequenceWords is the length of one sequence as the providers return it.
func (m *Manifest) SequenceWords() int { return SequenceWords(m.SeqLen, m.LossMask) }

// NumChunks is the number of chunks in shard e.
func (m *Manifest) NumChunks(e Entry) int {
	spc := uint64(m.SeqsPerChunk)
	return int((e.NumSequences + spc - 1) / spc)
}

// ChunkSpan returns the byte offset and length of chunk c of shard e.
func (m *Manifest) ChunkSpan(e Entry, c int) (offset, length int64) {
	first := uint64(c) * uint64(m.SeqsPerChunk)
	n := min(uint64(m.SeqsPerChunk), e.NumSequences-first)
	return HeaderSize + int64(first)*m.SequenceBytes(), int64(n) * m.SequenceBytes()
}

// Location is where one global sequence is stored.
type Location struct {
	Shard int    // index into Manifest.Shards
	Local uint64 // sequence index within the shard
	Chunk int    // chunk within the shard
	Skip  int64  // byte offset of the sequence within its chunk
}

// Locate finds global sequence index i in a validated manifest (as
// ParseManifest and Writer.Close return).
func (m *Manifest) Locate(i uint64) (Location, error) {
	if m.starts == nil {
		return Location{}, errors.New("internal error: manifest used before Validate")
	}
	if i >= m.NumSequences {
		return Location{}, fmt.Errorf("sequence %d is out of range: the dataset has %d", i, m.NumSequences)
	}
	s := sort.Search(len(m.starts), func(k int) bool { return m.starts[k] > i }) - 1
	local := i - m.starts[s]
	spc := uint64(m.SeqsPerChunk)
	return Location{
		Shard: s,
		Local: local,
		Chunk: int(local / spc),
		Skip:  int64(local%spc) * m.SequenceBytes(),
	}, nil
}

// ParseManifest decodes and validates a manifest. If pinnedRoot is not empty
// the manifest's root must equal it; that is how a run config fixes its data.
func ParseManifest(data []byte, pinnedRoot string) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, &ManifestError{fmt.Errorf("manifest: %w", err)}
	}
	if dec.More() {
		return nil, &ManifestError{fmt.Errorf("manifest: trailing data after the JSON object")}
	}
	if err := m.Validate(); err != nil {
		return nil, &ManifestError{err}
	}
	if pinnedRoot != "" && !strings.EqualFold(pinnedRoot, m.Root) {
		return nil, &ManifestError{fmt.Errorf("manifest root %s does not match the pinned root %s: this is not the dataset the run expects", m.Root, pinnedRoot)}
	}
	return &m, nil
}

// ManifestError reports a manifest that is malformed, inconsistent, or not
// the pinned one.
type ManifestError struct{ Err error }

func (e *ManifestError) Error() string { return e.Err.Error() }
func (e *ManifestError) Unwrap() error { return e.Err }

// Marshal encodes the manifest as indented JSON.
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Validate checks the manifest's internal consistency, including that Root is
// the root of its content.
func (m *Manifest) Validate() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("manifest: format %q, this build reads %q", m.Format, Format)
	case m.Tokenizer == "" || len(m.Tokenizer) > maxTokenizerName:
		return fmt.Errorf("manifest: tokenizer name %q must have 1 to %d bytes", m.Tokenizer, maxTokenizerName)
	case m.VocabSize == 0 || m.VocabSize > MaxVocab:
		return fmt.Errorf("manifest: vocab_size %d must be between 1 and %d", m.VocabSize, MaxVocab)
	case m.EOT >= m.VocabSize:
		return fmt.Errorf("manifest: eot %d is outside the vocabulary of %d", m.EOT, m.VocabSize)
	case m.SeqLen == 0 || m.SeqLen > MaxSeqLen:
		return fmt.Errorf("manifest: seq_len %d must be between 1 and %d", m.SeqLen, MaxSeqLen)
	case m.SeqsPerChunk == 0:
		return fmt.Errorf("manifest: seqs_per_chunk must be positive")
	case m.ChatTemplate != "" && !m.LossMask:
		return fmt.Errorf("manifest: chat_template without loss_mask: only fine-tuning datasets have a template")
	case len(m.Shards) == 0:
		return fmt.Errorf("manifest: no shards")
	}
	seen := make(map[string]bool, len(m.Shards))
	starts := make([]uint64, len(m.Shards))
	var total uint64
	for k, e := range m.Shards {
		if !shardNameRE.MatchString(e.Name) {
			return fmt.Errorf("manifest: shard name %q is not a plain file name ending in %s", e.Name, ShardExt)
		}
		if seen[e.Name] {
			return fmt.Errorf("manifest: shard %s is listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.NumSequences == 0 || e.NumSequences > 1<<40 {
			return fmt.Errorf("manifest: shard %s: num_sequences %d is out of range", e.Name, e.NumSequences)
		}
		if want := HeaderSize + int64(e.NumSequences)*m.SequenceBytes(); e.Size != want {
			return fmt.Errorf("manifest: shard %s: size %d, but %d sequences take %d bytes", e.Name, e.Size, e.NumSequences, want)
		}
		if _, err := parseHash(e.SHA256); err != nil {
			return fmt.Errorf("manifest: shard %s: sha256: %w", e.Name, err)
		}
		if _, err := parseHash(e.ChunkRoot); err != nil {
			return fmt.Errorf("manifest: shard %s: chunk_root: %w", e.Name, err)
		}
		starts[k] = total
		total += e.NumSequences
	}
	if total != m.NumSequences {
		return fmt.Errorf("manifest: num_sequences %d, but the shards hold %d", m.NumSequences, total)
	}
	root, err := m.ComputeRoot()
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(root[:]); got != m.Root {
		return fmt.Errorf("manifest: root %q does not match its content (computed %s): the manifest was altered", m.Root, got)
	}
	m.starts = starts
	return nil
}

// ComputeRoot returns the dataset's Merkle root. Leaf 0 commits to the
// parameters, leaf k+1 to shard k (all integers little-endian):
//
//	params leaf data = "psyche-data/1" 0x00 | u32 len(tokenizer) | tokenizer |
//	                   u32 vocab_size | u32 eot | u32 seq_len | u32 seqs_per_chunk
//	                   [0x01 | chat template sha256 or 32 zero bytes, when loss_mask]
//	shard leaf data  = u32 len(name) | name | u64 num_sequences | u64 size |
//	                   sha256 (32 bytes) | chunk_root (32 bytes)
func (m *Manifest) ComputeRoot() (Hash, error) {
	le := binary.LittleEndian
	var p []byte
	p = append(p, Format...)
	p = append(p, 0)
	p = le.AppendUint32(p, uint32(len(m.Tokenizer)))
	p = append(p, m.Tokenizer...)
	p = le.AppendUint32(p, m.VocabSize)
	p = le.AppendUint32(p, m.EOT)
	p = le.AppendUint32(p, m.SeqLen)
	p = le.AppendUint32(p, m.SeqsPerChunk)
	if m.LossMask {
		var tmpl Hash
		if m.ChatTemplate != "" {
			var err error
			if tmpl, err = parseHash(m.ChatTemplate); err != nil {
				return Hash{}, fmt.Errorf("manifest: chat_template: %w", err)
			}
		}
		p = append(p, 1)
		p = append(p, tmpl[:]...)
	}
	leaves := []Hash{LeafHash(p)}
	for _, e := range m.Shards {
		sum, err := parseHash(e.SHA256)
		if err != nil {
			return Hash{}, fmt.Errorf("manifest: shard %s: sha256: %w", e.Name, err)
		}
		chunkRoot, err := parseHash(e.ChunkRoot)
		if err != nil {
			return Hash{}, fmt.Errorf("manifest: shard %s: chunk_root: %w", e.Name, err)
		}
		var s []byte
		s = le.AppendUint32(s, uint32(len(e.Name)))
		s = append(s, e.Name...)
		s = le.AppendUint64(s, e.NumSequences)
		s = le.AppendUint64(s, uint64(e.Size))
		s = append(s, sum[:]...)
		s = append(s, chunkRoot[:]...)
		leaves = append(leaves, LeafHash(s))
	}
	return MerkleRoot(leaves), nil
}

// HeaderFor returns the header that shard k must carry.
func (m *Manifest) HeaderFor(k int) Header {
	return Header{
		VocabSize:    m.VocabSize,
		EOT:          m.EOT,
		SeqLen:       m.SeqLen,
		SeqsPerChunk: m.SeqsPerChunk,
		NumSequences: m.Shards[k].NumSequences,
		FirstIndex:   m.starts[k],
		Tokenizer:    m.Tokenizer,
		LossMask:     m.LossMask,
	}
}

// ParseChunkHashes decodes shard e's chunk hash file and checks it against
// the shard's chunk root.
func (m *Manifest) ParseChunkHashes(e Entry, data []byte) ([]Hash, error) {
	n := m.NumChunks(e)
	if len(data) != n*len(Hash{}) {
		return nil, &IntegrityError{Shard: e.Name, Chunk: -1, Reason: fmt.Sprintf("chunk hash file is %d bytes, want %d for %d chunks", len(data), n*len(Hash{}), n)}
	}
	hashes := make([]Hash, n)
	for c := range hashes {
		copy(hashes[c][:], data[c*len(Hash{}):])
	}
	root := MerkleRoot(hashes)
	if hex.EncodeToString(root[:]) != e.ChunkRoot {
		return nil, &IntegrityError{Shard: e.Name, Chunk: -1, Reason: "chunk hash file does not match the manifest's chunk_root"}
	}
	return hashes, nil
}

// VerifyChunk checks chunk c of shard e against its leaf hash.
func VerifyChunk(e Entry, c int, want Hash, data []byte) error {
	if got := LeafHash(data); got != want {
		return &IntegrityError{Shard: e.Name, Chunk: c, Reason: "content does not match the manifest's hash"}
	}
	return nil
}

// IntegrityError reports data that does not match the manifest: such data
// must never be trained on. Chunk is -1 when the error is not about one chunk.
type IntegrityError struct {
	Shard  string
	Chunk  int
	Reason string
}

func (e *IntegrityError) Error() string {
	if e.Chunk < 0 {
		return fmt.Sprintf("shard %s: %s", e.Shard, e.Reason)
	}
	return fmt.Sprintf("shard %s chunk %d: %s", e.Shard, e.Chunk, e.Reason)
}

func parseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) || strings.ToLower(s) != s {
		return h, fmt.Errorf("%q is not %d lowercase hex digits", s, 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%q is not %d lowercase hex digits", s, 2*len(h))
	}
	return h, nil
}
