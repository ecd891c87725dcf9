package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// Params fixes how a dataset is tokenized and packed.
type Params struct {
	Tokenizer    string
	VocabSize    uint32
	EOT          uint32
	SeqLen       uint32
	SeqsPerChunk uint32
	// SeqsPerShard caps a shard's size; it is rounded down to whole chunks.
	SeqsPerShard uint64
	// LossMask writes a fine-tuning dataset (AddExample), ChatTemplate the
	// hex SHA-256 of the template that shaped it, if any.
	LossMask     bool
	ChatTemplate string
}

// Writer packs documents into a new dataset directory. Documents are joined
// into one token stream, each followed by the EOT token, and the stream is cut
// into consecutive, non-overlapping sequences of seq_len+1 tokens (inputs are
// tokens 0..seq_len-1, targets 1..seq_len). Sequences may span documents; the
// stream's tail that fills no whole sequence is dropped. The directory appears
// only when Close succeeds: everything is written to a temporary sibling
// directory that is renamed into place at the end.
type Writer struct {
	out, tmp   string
	p          Params
	seqBytes   int64
	tokenBytes int

	stream  []uint32 // tokens not yet in a sequence (fewer than seq_len+1)
	record  []byte   // one encoded sequence
	chunk   []byte   // sequences of the current chunk
	inChunk uint32

	file    *os.File // current shard, nil between shards
	leaves  []Hash   // chunk leaf hashes of the current shard
	inShard uint64
	entries []Entry

	Documents, Tokens uint64 // counted as documents are added
	// Truncated counts examples cut to seq_len+1 tokens (AddExample).
	Truncated uint64
}

// NewWriter prepares to write a dataset to out, which must not exist or be empty.
func NewWriter(out string, p Params) (*Writer, error) {
	if err := checkParams(p); err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("output directory %s is not empty", out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	p.SeqsPerShard -= p.SeqsPerShard % uint64(p.SeqsPerChunk)
	seqBytes := SequenceBytes(p.VocabSize, p.SeqLen, p.LossMask)
	return &Writer{
		out: out, tmp: tmp, p: p, seqBytes: seqBytes, tokenBytes: TokenBytes(p.VocabSize),
		record: make([]byte, seqBytes),
		chunk:  make([]byte, 0, int64(p.SeqsPerChunk)*seqBytes),
	}, nil
}

func checkParams(p Params) error {
	switch {
	case p.Tokenizer == "" || len(p.Tokenizer) > maxTokenizerName:
		return fmt.Errorf("tokenizer name %q must have 1 to %d bytes", p.Tokenizer, maxTokenizerName)
	case p.VocabSize == 0 || p.VocabSize > MaxVocab:
		return fmt.Errorf("vocabulary of %d tokens: datasets take 1 to %d", p.VocabSize, MaxVocab)
	case p.EOT >= p.VocabSize:
		return fmt.Errorf("EOT %d is outside the vocabulary of %d", p.EOT, p.VocabSize)
	case p.SeqLen == 0 || p.SeqLen > MaxSeqLen:
		return fmt.Errorf("sequence length %d must be between 1 and %d", p.SeqLen, MaxSeqLen)
	case p.SeqsPerChunk == 0:
		return fmt.Errorf("sequences per chunk must be positive")
	case p.ChatTemplate != "" && !p.LossMask:
		return fmt.Errorf("a chat template needs a fine-tuning dataset (loss mask)")
	case p.SeqsPerShard < uint64(p.SeqsPerChunk):
		return fmt.Errorf("sequences per shard (%d) must be at least one chunk (%d)", p.SeqsPerShard, p.SeqsPerChunk)
	}
	return nil
}

// AddDocument appends one document's tokens, followed by the separator.
func (w *Writer) AddDocument(tokens []uint32) error {
	if w.p.LossMask {
		return errors.New("internal error: AddDocument on a fine-tuning dataset (AddExample)")
	}
	if err := w.checkTokens(tokens); err != nil {
		return err
	}
	w.Documents++
	w.Tokens += uint64(len(tokens)) + 1
	w.stream = append(w.stream, tokens...)
	w.stream = append(w.stream, w.p.EOT)
	n := int(w.p.SeqLen) + 1
	consumed := 0
	for ; len(w.stream)-consumed >= n; consumed += n {
		if err := w.addSequence(w.stream[consumed:consumed+n], nil); err != nil {
			return err
		}
	}
	w.stream = append(w.stream[:0], w.stream[consumed:]...)
	return nil
}

// AddExample writes one fine-tuning example as a sequence of its own: its
// tokens, cut to seq_len+1 or padded with the separator, and a loss mask that
// trains target j (the token at j+1) when train[j+1]. Padding is never
// trained, so examples neither attend to each other nor pay for each other.
// An example whose trained tokens all fall past the cut is an error: the
// caller chooses a longer seq_len or drops it.
func (w *Writer) AddExample(tokens []uint32, train []bool) error {
	switch {
	case !w.p.LossMask:
		return errors.New("internal error: AddExample on a pretraining dataset (AddDocument)")
	case len(tokens) != len(train):
		return fmt.Errorf("internal error: %d tokens and %d mask entries", len(tokens), len(train))
	case len(tokens) < 2:
		return fmt.Errorf("the example has %d tokens, too few to train on", len(tokens))
	}
	if err := w.checkTokens(tokens); err != nil {
		return err
	}
	n := int(w.p.SeqLen) + 1
	cut := len(tokens) > n
	if cut {
		tokens, train = tokens[:n], train[:n]
	}
	seq := make([]uint32, n)
	for i := range seq {
		seq[i] = w.p.EOT
	}
	copy(seq, tokens)
	mask := make([]uint16, MaskWords(w.p.SeqLen))
	trained := false
	for j := 1; j < len(tokens); j++ {
		if train[j] {
			mask[(j-1)/16] |= 1 << ((j - 1) % 16)
			trained = true
		}
	}
	if !trained {
		return fmt.Errorf("no trained token within the first %d tokens (seq_len %d): nothing to learn from", n, w.p.SeqLen)
	}
	if cut {
		w.Truncated++
	}
	w.Documents++
	w.Tokens += uint64(len(tokens))
	return w.addSequence(seq, mask)
}

// checkTokens refuses ids outside the vocabulary; in pretraining data, also
// the separator, which only AddDocument may place.
func (w *Writer) checkTokens(tokens []uint32) error {
	for i, t := range tokens {
		if t >= w.p.VocabSize {
			return fmt.Errorf("token %d at position %d is outside the vocabulary of %d", t, i, w.p.VocabSize)
		}
		if t == w.p.EOT && !w.p.LossMask {
			return fmt.Errorf("document contains the separator token %d at position %d", t, i)
		}
	}
	return nil
}

// addSequence stores seq_len+1 tokens and, in a fine-tuning dataset, the
// mask words that follow them on disk.
func (w *Writer) addSequence(seq []uint32, mask []uint16) error {
	if w.file == nil {
		name := fmt.Sprintf("shard-%05d%s", len(w.entries), ShardExt)
		f, err := os.Create(filepath.Join(w.tmp, name))
		if err != nil {
			return fmt.Errorf("creating shard: %w", err)
		}
		// The header is rewritten with the final count when the shard closes.
		if _, err := f.Write(make([]byte, HeaderSize)); err != nil {
			f.Close()
			return fmt.Errorf("writing shard %s: %w", name, err)
		}
		w.file = f
		w.entries = append(w.entries, Entry{Name: name})
	}
	for i, t := range seq {
		putToken(w.record[i*w.tokenBytes:], w.tokenBytes, t)
	}
	masks := w.record[len(seq)*w.tokenBytes:]
	for i, m := range mask {
		binary.LittleEndian.PutUint16(masks[i*maskWordBytes:], m)
	}
	w.chunk = append(w.chunk, w.record...)
	w.inChunk++
	w.inShard++
	if w.inChunk == w.p.SeqsPerChunk {
		if err := w.flushChunk(); err != nil {
			return err
		}
	}
	if w.inShard == w.p.SeqsPerShard {
		return w.closeShard()
	}
	return nil
}

func (w *Writer) flushChunk() error {
	if w.inChunk == 0 {
		return nil
	}
	if _, err := w.file.Write(w.chunk); err != nil {
		return fmt.Errorf("writing shard %s: %w", w.entries[len(w.entries)-1].Name, err)
	}
	w.leaves = append(w.leaves, LeafHash(w.chunk))
	w.chunk = w.chunk[:0]
	w.inChunk = 0
	return nil
}

// closeShard finishes the current shard: final header, whole-file hash, and
// the chunk hash file.
func (w *Writer) closeShard() error {
	if err := w.flushChunk(); err != nil {
		return err
	}
	e := &w.entries[len(w.entries)-1]
	var first uint64
	for _, prev := range w.entries[:len(w.entries)-1] {
		first += prev.NumSequences
	}
	header, err := Header{
		VocabSize: w.p.VocabSize, EOT: w.p.EOT, SeqLen: w.p.SeqLen, SeqsPerChunk: w.p.SeqsPerChunk,
		NumSequences: w.inShard, FirstIndex: first, Tokenizer: w.p.Tokenizer, LossMask: w.p.LossMask,
	}.MarshalBinary()
	if err != nil {
		return err
	}
	f := w.file
	w.file = nil
	defer f.Close()
	if _, err := f.WriteAt(header, 0); err != nil {
		return fmt.Errorf("writing shard %s: %w", e.Name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hashing shard %s: %w", e.Name, err)
	}
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("hashing shard %s: %w", e.Name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing shard %s: %w", e.Name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing shard %s: %w", e.Name, err)
	}
	chunkRoot := MerkleRoot(w.leaves)
	hashes := make([]byte, 0, len(w.leaves)*len(Hash{}))
	for _, l := range w.leaves {
		hashes = append(hashes, l[:]...)
	}
	if err := atomicfile.Write(filepath.Join(w.tmp, ChunksName(e.Name)), hashes, 0o644); err != nil {
		return fmt.Errorf("writing chunk hashes of %s: %w", e.Name, err)
	}
	e.NumSequences = w.inShard
	e.Size = size
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	e.ChunkRoot = hex.EncodeToString(chunkRoot[:])
	w.leaves = w.leaves[:0]
	w.inShard = 0
	return nil
}

// Close finishes the dataset and moves it into place. It returns the
// manifest and the number of tail tokens dropped.
func (w *Writer) Close() (*Manifest, int, error) {
	if w.file != nil {
		if err := w.closeShard(); err != nil {
			w.Abort()
			return nil, 0, err
		}
	}
	if len(w.entries) == 0 && w.p.LossMask {
		w.Abort()
		return nil, 0, errors.New("the input holds no examples")
	}
	if len(w.entries) == 0 {
		w.Abort()
		return nil, 0, fmt.Errorf("the input holds %d tokens, too few for one sequence of %d", len(w.stream), w.p.SeqLen+1)
	}
	m := &Manifest{
		Format: Format, Tokenizer: w.p.Tokenizer, VocabSize: w.p.VocabSize, EOT: w.p.EOT,
		SeqLen: w.p.SeqLen, SeqsPerChunk: w.p.SeqsPerChunk, Shards: w.entries,
		LossMask: w.p.LossMask, ChatTemplate: w.p.ChatTemplate,
	}
	for _, e := range w.entries {
		m.NumSequences += e.NumSequences
	}
	root, err := m.ComputeRoot()
	if err != nil {
		w.Abort()
		return nil, 0, err
	}
	m.Root = hex.EncodeToString(root[:])
	if err := m.Validate(); err != nil {
		w.Abort()
		return nil, 0, fmt.Errorf("internal error: the written manifest is invalid: %w", err)
	}
	data, err := m.Marshal()
	if err != nil {
		w.Abort()
		return nil, 0, err
	}
	if err := atomicfile.Write(filepath.Join(w.tmp, ManifestName), data, 0o644); err != nil {
		w.Abort()
		return nil, 0, fmt.Errorf("writing manifest: %w", err)
	}
	// Renaming onto an empty directory replaces it; a non-empty one fails.
	if err := os.Rename(w.tmp, w.out); err != nil {
		w.Abort()
		return nil, 0, fmt.Errorf("moving the dataset into %s: %w", w.out, err)
	}
	return m, len(w.stream), nil
}

// Abort discards everything written so far.
func (w *Writer) Abort() {
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	os.RemoveAll(w.tmp)
}
