// Package tokenizer turns text into the token ids that training shards hold:
// a byte-level tokenizer (vocab 256) for small CPU runs, GPT-2's BPE
// (r50k_base, vocab 50257) for real ones, and BPE tokenizers (byte-level or
// SentencePiece-style) read from Hugging Face tokenizer.json files.
package tokenizer

import (
	"fmt"
	"strings"
)

// Tokenizer encodes documents into token ids and back. Values are not safe for
// concurrent use; create one per goroutine (the GPT-2 tables are shared).
type Tokenizer interface {
	// Name is the identifier that shards and manifests record ("byte",
	// "gpt2", "json:" and the start of the file's hash).
	Name() string
	// VocabSize is the number of distinct token ids; every id is below it.
	VocabSize() int
	// EOT is the id that separates documents in packed shards.
	EOT() uint32
	// Encode tokenizes one document. Text that spells a special token, such
	// as "<|endoftext|>", is encoded as ordinary text, so documents cannot
	// inject separators. It fails on text the tokenizer cannot represent
	// exactly (invalid UTF-8 for GPT-2, NUL bytes for the byte tokenizer).
	Encode(text string) ([]uint32, error)
	// Decode returns the text of ids; the EOT id decodes to its text form.
	Decode(ids []uint32) (string, error)
}

// Names lists the tokenizers New accepts.
func Names() []string { return []string{ByteName, GPT2Name} }

// New returns the tokenizer with the given name.
func New(name string) (Tokenizer, error) {
	switch name {
	case ByteName:
		return Byte{}, nil
	case GPT2Name:
		return NewGPT2(), nil
	default:
		return nil, fmt.Errorf("unknown tokenizer %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
}

// Open returns the tokenizer spec names: byte, gpt2, or the path of a
// tokenizer.json file.
func Open(spec string) (Tokenizer, error) {
	if spec == ByteName || spec == GPT2Name {
		return New(spec)
	}
	if !strings.HasSuffix(spec, ".json") {
		return nil, fmt.Errorf("unknown tokenizer %q (want one of %s, or the path of a tokenizer.json file)", spec, strings.Join(Names(), ", "))
	}
	return LoadJSON(spec)
}

// Clone is a tokenizer equal to t for another goroutine (a Tokenizer is not
// safe for concurrent use); tables are shared.
func Clone(t Tokenizer) Tokenizer {
	switch t := t.(type) {
	case *JSONBPE:
		return t.Clone()
	case *GPT2:
		return NewGPT2()
	}
	return t
}
