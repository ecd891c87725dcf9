// Package prepare tokenizes a corpus into a dataset directory of shards.
package prepare

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

const (
	// DefaultChunkBytes is the target size of a hashed chunk: small enough
	// that fetching one sequence costs little extra, large enough that the
	// chunk hash files stay tiny (32 bytes per chunk).
	DefaultChunkBytes = 64 << 10
	// DefaultShardBytes is the target size of a shard file.
	DefaultShardBytes = 64 << 20
	// batchDocs is how many documents are tokenized in parallel at a time.
	batchDocs = 64
)

// Options say what to prepare.
type Options struct {
	Input      string // corpus directory
	Split      corpus.Split
	Tokenizer  string // tokenizer.ByteName, tokenizer.GPT2Name or a tokenizer.json path (tokenizer.Open)
	SeqLen     uint32
	ChunkBytes int64 // target chunk size; 0 means DefaultChunkBytes
	ShardBytes int64 // target shard size; 0 means DefaultShardBytes
	Out        string
	Workers    int // tokenizing goroutines; 0 means GOMAXPROCS
	Log        *slog.Logger
}

// Result summarizes a prepared dataset.
type Result struct {
	Manifest      *shard.Manifest
	Documents     uint64
	InputBytes    int64
	Tokens        uint64 // including one separator per document
	DroppedTokens int    // the stream's tail that filled no whole sequence
}

// Run tokenizes every document of the split and writes the dataset to
// opts.Out, which appears only if everything succeeded. Problems with the
// documents themselves are *corpus.InputError.
func Run(ctx context.Context, opts Options) (Result, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	base, err := tokenizer.Open(opts.Tokenizer)
	if err != nil {
		return Result{}, err
	}
	toks := make([]tokenizer.Tokenizer, workers)
	for i := range toks {
		toks[i] = tokenizer.Clone(base)
	}
	if opts.SeqLen == 0 || opts.SeqLen > shard.MaxSeqLen {
		return Result{}, fmt.Errorf("sequence length %d must be between 1 and %d", opts.SeqLen, shard.MaxSeqLen)
	}
	chunkBytes, shardBytes := opts.ChunkBytes, opts.ShardBytes
	if chunkBytes <= 0 {
		chunkBytes = DefaultChunkBytes
	}
	if shardBytes <= 0 {
		shardBytes = DefaultShardBytes
	}
	vocab := uint32(base.VocabSize())
	seqBytes := shard.SequenceBytes(vocab, opts.SeqLen, false)
	seqsPerChunk := max(1, chunkBytes/seqBytes)
	if seqsPerChunk > 1<<20 {
		return Result{}, fmt.Errorf("chunks of %d bytes hold too many sequences", chunkBytes)
	}
	w, err := shard.NewWriter(opts.Out, shard.Params{
		Tokenizer:    base.Name(),
		VocabSize:    vocab,
		EOT:          base.EOT(),
		SeqLen:       opts.SeqLen,
		SeqsPerChunk: uint32(seqsPerChunk),
		SeqsPerShard: uint64(max(seqsPerChunk, shardBytes/seqBytes)),
	})
	if err != nil {
		return Result{}, err
	}
	var res Result
	var batch []corpus.Document
	flush := func() error {
		encoded, err := encodeAll(toks, batch)
		if err != nil {
			return err
		}
		for i, ids := range encoded {
			if err := w.AddDocument(ids); err != nil {
				return &corpus.InputError{Err: fmt.Errorf("%s: %w", batch[i].Name, err)}
			}
		}
		batch = batch[:0]
		return nil
	}
	err = corpus.Walk(ctx, opts.Input, opts.Split, func(d corpus.Document) error {
		res.InputBytes += int64(len(d.Text))
		batch = append(batch, d)
		if len(batch) == batchDocs {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		w.Abort()
		return Result{}, err
	}
	m, dropped, err := w.Close()
	if err != nil {
		return Result{}, err
	}
	res.Manifest, res.Documents, res.Tokens, res.DroppedTokens = m, w.Documents, w.Tokens, dropped
	log.Info("prepared dataset", "out", opts.Out, "tokenizer", base.Name(), "documents", res.Documents,
		"tokens", res.Tokens, "sequences", m.NumSequences, "shards", len(m.Shards), "root", m.Root)
	return res, nil
}

// encodeAll tokenizes docs in parallel, one tokenizer per goroutine.
func encodeAll(toks []tokenizer.Tokenizer, docs []corpus.Document) ([][]uint32, error) {
	out := make([][]uint32, len(docs))
	errs := make([]error, len(docs))
	var wg sync.WaitGroup
	for w, tok := range toks {
		wg.Go(func() {
			for i := w; i < len(docs); i += len(toks) {
				out[i], errs[i] = tok.Encode(docs[i].Text)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, &corpus.InputError{Err: fmt.Errorf("%s: %w", docs[i].Name, err)}
		}
	}
	return out, nil
}
