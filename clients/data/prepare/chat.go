package prepare

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/psyche-go/psyche/clients/data/chat"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

// ChatOptions say what fine-tuning data to prepare.
type ChatOptions struct {
	Input     string // JSONL of chat conversations or prompt/completion pairs (chat.ReadJSONL)
	Tokenizer string // as Options.Tokenizer; chat conversations need a tokenizer.json
	// Template is a tokenizer_config.json or a chat template file
	// (chat.LoadTemplate); "" when every example is a prompt/completion pair.
	Template   string
	SeqLen     uint32
	ChunkBytes int64 // as Options
	ShardBytes int64
	Out        string
	Log        *slog.Logger
}

// ChatResult summarizes a prepared fine-tuning dataset.
type ChatResult struct {
	Manifest  *shard.Manifest
	Examples  uint64
	Truncated uint64 // examples cut to seq_len+1 tokens
	Tokens    uint64 // the examples' tokens, before padding
	Trained   uint64 // of which the loss is computed on
}

// RunChat tokenizes fine-tuning examples into a loss-masked dataset at
// opts.Out: each example its own sequence, padded with the separator, the
// loss on its answers only (chat.Template.Segments). Problems with the
// examples or the template are *corpus.InputError.
func RunChat(ctx context.Context, opts ChatOptions) (ChatResult, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tok, err := tokenizer.Open(opts.Tokenizer)
	if err != nil {
		return ChatResult{}, &corpus.InputError{Err: fmt.Errorf("tokenizer: %w", err)}
	}
	f, err := os.Open(opts.Input)
	if err != nil {
		return ChatResult{}, &corpus.InputError{Err: err}
	}
	examples, err := chat.ReadJSONL(f, opts.Input)
	f.Close()
	if err != nil {
		return ChatResult{}, &corpus.InputError{Err: err}
	}
	enc := segmentEncoder{tok: tok}
	var tmplHash string
	if opts.Template != "" {
		t, hash, vars, err := chat.LoadTemplate(opts.Template)
		if err != nil {
			return ChatResult{}, &corpus.InputError{Err: err}
		}
		js, ok := tok.(*tokenizer.JSONBPE)
		if !ok {
			return ChatResult{}, &corpus.InputError{Err: fmt.Errorf("a chat template needs a tokenizer.json tokenizer, whose special tokens its text spells; %s has none", tok.Name())}
		}
		enc.tmpl, enc.vars, enc.special = t, vars, js
		tmplHash = hex.EncodeToString(hash[:])
	}
	if opts.SeqLen == 0 || opts.SeqLen > shard.MaxSeqLen {
		return ChatResult{}, &corpus.InputError{Err: fmt.Errorf("sequence length %d must be between 1 and %d", opts.SeqLen, shard.MaxSeqLen)}
	}
	vocab := uint32(tok.VocabSize())
	seqBytes := shard.SequenceBytes(vocab, opts.SeqLen, true)
	chunkBytes, shardBytes := cmpOr(opts.ChunkBytes, DefaultChunkBytes), cmpOr(opts.ShardBytes, DefaultShardBytes)
	seqsPerChunk := max(1, chunkBytes/seqBytes)
	w, err := shard.NewWriter(opts.Out, shard.Params{
		Tokenizer: tok.Name(), VocabSize: vocab, EOT: tok.EOT(),
		SeqLen: opts.SeqLen, SeqsPerChunk: uint32(seqsPerChunk), SeqsPerShard: uint64(max(seqsPerChunk, shardBytes/seqBytes)),
		LossMask: true, ChatTemplate: tmplHash,
	})
	if err != nil {
		return ChatResult{}, err
	}
	var res ChatResult
	for _, ex := range examples {
		if err := ctx.Err(); err != nil {
			w.Abort()
			return ChatResult{}, err
		}
		ids, train, err := enc.encode(ex)
		if err == nil {
			err = w.AddExample(ids, train)
		}
		if err != nil {
			w.Abort()
			return ChatResult{}, &corpus.InputError{Err: fmt.Errorf("%s:%d: %w", opts.Input, ex.Line, err)}
		}
		res.Tokens += uint64(len(ids))
		for _, t := range train[1:min(len(train), int(opts.SeqLen)+1)] { // token 0 is never a target
			if t {
				res.Trained++
			}
		}
	}
	m, _, err := w.Close()
	if err != nil {
		return ChatResult{}, err
	}
	res.Manifest, res.Examples, res.Truncated = m, w.Documents, w.Truncated
	log.Info("prepared fine-tuning dataset", "out", opts.Out, "tokenizer", tok.Name(), "examples", res.Examples,
		"truncated", res.Truncated, "tokens", res.Tokens, "trained", res.Trained, "root", m.Root)
	return res, nil
}

func cmpOr(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// segmentEncoder turns an example into tokens and their loss mask.
type segmentEncoder struct {
	tok     tokenizer.Tokenizer
	tmpl    *chat.Template // nil: prompt/completion pairs only
	vars    chat.Vars
	special *tokenizer.JSONBPE // tok, when a template's text spells special tokens
}

// encode tokenizes ex's segments one by one, so that a mask boundary is
// always a token boundary. A template's text is encoded with its special
// tokens; the messages themselves may not spell one (a message that could
// would forge turns). A prompt/completion pair is plain text, and its
// completion ends with the separator, trained, so that the model learns
// to stop.
func (e segmentEncoder) encode(ex chat.Example) (ids []uint32, train []bool, err error) {
	for k, m := range ex.Messages {
		if e.special == nil {
			break
		}
		if sp := e.special.SpecialIn(m.Content); sp != "" {
			return nil, nil, fmt.Errorf("message %d (%s) spells the special token %q; messages are plain text", k, m.Role, sp)
		}
	}
	segs, err := e.tmpl.Segments(ex, e.vars)
	if err != nil {
		return nil, nil, err
	}
	if e.special != nil && len(ex.Messages) > 0 {
		return e.encodeWhole(segs)
	}
	for _, s := range segs {
		part, err := e.tok.Encode(s.Text)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, part...)
		for range part {
			train = append(train, s.Train)
		}
	}
	return append(ids, e.tok.EOT()), append(train, true), nil
}

// encodeWhole tokenizes a rendered conversation whole, as inference
// tokenizes it: encoding its segments apart can differ where they meet (a
// legacy SentencePiece normalizer prepends ▁ to every text it is given).
// When it does, a token is trained when its text ends inside a trained
// segment; where the segments meet is found by decoding prefixes of the
// tokens (a binary search per boundary) and comparing with the decoded
// whole, which may only add spaces to the text (as that normalizer does
// after each special token).
func (e segmentEncoder) encodeWhole(segs []chat.Segment) (ids []uint32, train []bool, err error) {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	full := b.String()
	if ids, err = e.special.EncodeSpecial(full); err != nil {
		return nil, nil, err
	}
	// Where encoding the segments apart gives the same tokens (byte-level
	// BPE at a template's boundaries, as a rule), their boundaries are exact.
	var parts []uint32
	for _, s := range segs {
		p, err := e.special.EncodeSpecial(s.Text)
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, p...)
		for range p {
			train = append(train, s.Train)
		}
	}
	if slices.Equal(parts, ids) {
		return ids, train, nil
	}
	decoded, err := e.special.Decode(ids)
	if err != nil {
		return nil, nil, err
	}
	at, ok := spacesAdded(full, decoded)
	if !ok {
		return nil, nil, fmt.Errorf("the tokenizer decodes the rendered conversation to other text, so its answers cannot be located among the tokens")
	}
	decodedLen := func(n int) int {
		text, err := e.special.Decode(ids[:n])
		if err != nil {
			return len(decoded) + 1 // a prefix that ends inside a character: past any boundary
		}
		return len(text)
	}
	train = make([]bool, len(ids))
	first, end := 0, 0
	for _, s := range segs {
		end += len(s.Text)
		// The tokens whose text ends at or before the segment's end.
		n := first + sort.Search(len(ids)-first, func(k int) bool { return decodedLen(first+k+1) > at[end] })
		for i := first; i < n; i++ {
			train[i] = s.Train
		}
		first = n
	}
	return ids, train, nil
}

// spacesAdded maps each position of text (and its end) to its position in
// decoded, which must be text with spaces added; ok is false otherwise.
func spacesAdded(text, decoded string) (at []int, ok bool) {
	at = make([]int, len(text)+1)
	j := 0
	for i := 0; i < len(text); i++ {
		for j < len(decoded) && decoded[j] != text[i] && decoded[j] == ' ' {
			j++
		}
		if j == len(decoded) || decoded[j] != text[i] {
			return nil, false
		}
		at[i] = j
		j++
	}
	for k := j; k < len(decoded); k++ {
		if decoded[k] != ' ' {
			return nil, false
		}
	}
	at[len(text)] = len(decoded)
	return at, true
}
