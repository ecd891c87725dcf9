package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids as tokenizers' decode(ids,
// skip_special_tokens=False) does. Byte-level tokens decode to their bytes
// exactly, even where ids cut a character (tokenizers writes U+FFFD there);
// SentencePiece-style tokens go through the tokenizer.json's decoder.
func (t *JSONBPE) Decode(ids []uint32) (string, error) {
	toks := make([]string, len(ids))
	for i, id := range ids {
		if int(id) >= len(t.spell) || !t.known[id] {
			return "", fmt.Errorf("json tokenizer: token %d at position %d is not in the vocabulary", id, i)
		}
		toks[i] = t.spell[id]
	}
	for _, step := range t.decoder {
		toks = step(toks)
	}
	return strings.Join(toks, ""), nil
}

// decodeStep is one decoder of a tokenizers decoder chain: it turns the
// tokens' strings into new ones.
type decodeStep func(toks []string) []string

// readDecoder reads the decoder of SentencePiece-style BPE: a Sequence of
// Replace, ByteFallback, Fuse and Strip (as transformers' LlamaConverter
// writes it), or Metaspace.
func readDecoder(d *hfDecoder) ([]decodeStep, error) {
	if d == nil {
		return nil, fmt.Errorf("tokenizer.json: decoder null is not supported with byte_fallback (tokenizers would join tokens with spaces)")
	}
	if d.Type != "Sequence" {
		step, err := readDecodeStep(d)
		return []decodeStep{step}, err
	}
	steps := make([]decodeStep, len(d.Steps))
	for i := range d.Steps {
		var err error
		if steps[i], err = readDecodeStep(&d.Steps[i]); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

func readDecodeStep(d *hfDecoder) (decodeStep, error) {
	switch d.Type {
	case "Replace":
		if d.Pattern.String == nil {
			return nil, fmt.Errorf("tokenizer.json: decoder Replace with a regex pattern is not supported (only a string)")
		}
		return replaceDecoder(*d.Pattern.String, d.Content), nil
	case "ByteFallback":
		return byteFallbackDecoder, nil
	case "Fuse":
		return fuseDecoder, nil
	case "Strip":
		c, n := utf8.DecodeRuneInString(d.Content)
		if n == 0 || n != len(d.Content) || d.Start < 0 || d.Stop < 0 {
			return nil, fmt.Errorf("tokenizer.json: decoder Strip content %q start %d stop %d is not supported (only one character, counts >= 0)", d.Content, d.Start, d.Stop)
		}
		return stripDecoder(c, d.Start, d.Stop), nil
	case "Metaspace":
		if err := checkMetaspace("decoder", d.Type, d.Replacement, d.PrependScheme); err != nil {
			return nil, err
		}
		return metaspaceDecoder, nil
	}
	return nil, fmt.Errorf("tokenizer.json: decoder type %q is not supported with byte_fallback (only Metaspace, or a Sequence of Replace, ByteFallback, Fuse and Strip)", d.Type)
}

func replaceDecoder(old, new string) decodeStep {
	return func(toks []string) []string {
		for i := range toks {
			toks[i] = strings.ReplaceAll(toks[i], old, new)
		}
		return toks
	}
}

// byteFallbackDecoder turns each run of <0xXX> tokens into the text its
// bytes spell; a run that is not valid UTF-8 becomes one U+FFFD per byte.
func byteFallbackDecoder(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			out = append(out, strings.Repeat(string(utf8.RuneError), len(run)))
		}
		run = run[:0]
	}
	for _, tok := range toks {
		if b, ok := fallbackByte(tok); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// fallbackByte reads a byte-fallback token, <0xXX>.
func fallbackByte(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	b, err := strconv.ParseUint(tok[3:5], 16, 8)
	return byte(b), err == nil
}

func fuseDecoder(toks []string) []string { return []string{strings.Join(toks, "")} }

// stripDecoder removes up to start leading and stop trailing c from each token.
func stripDecoder(c rune, start, stop int) decodeStep {
	return func(toks []string) []string {
		for i, tok := range toks {
			for n := 0; n < start && strings.HasPrefix(tok, string(c)); n++ {
				tok = tok[utf8.RuneLen(c):]
			}
			for n := 0; n < stop && strings.HasSuffix(tok, string(c)); n++ {
				tok = tok[:len(tok)-utf8.RuneLen(c)]
			}
			toks[i] = tok
		}
		return toks
	}
}

// metaspaceDecoder spells "▁" as a space, except in the first token, where
// prepend_scheme "first" drops every "▁" (not only the one it prepended).
func metaspaceDecoder(toks []string) []string {
	for i := range toks {
		space := " "
		if i == 0 {
			space = ""
		}
		toks[i] = strings.ReplaceAll(toks[i], metaspace, space)
	}
	return toks
}
