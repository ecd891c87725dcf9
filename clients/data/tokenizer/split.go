package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The split patterns of Llama 3 and Qwen2, exactly as transformers writes
// them into a tokenizer.json's Split pre-tokenizer. They differ only in how
// many digits a piece may hold.
const (
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitPatterns are the Split patterns that JSONBPE scans, with their scanners.
var splitPatterns = map[string]func(string) int{
	llama3Pattern: func(s string) int { return splitLlama(s, 3) },
	qwen2Pattern:  func(s string) int { return splitLlama(s, 1) },
}

// splitLlama returns the byte length of the first piece of s (non-empty) as
// Llama 3's pattern finds it, with runs of at most maxDigits digits (3 for
// Llama 3, 1 for Qwen2). The pattern matches at every position, so the
// pieces of Split's Isolated behavior are its consecutive matches. Classes
// are splitPiece's: \s is Unicode White_Space, as in Oniguruma.
func splitLlama(s string, maxDigits int) int {
	r0, n0 := utf8.DecodeRuneInString(s)
	if r0 == '\'' {
		if n := contraction(s[n0:]); n > 0 {
			return n0 + n
		}
	}
	c0 := classify(r0)
	// [^\r\n\p{L}\p{N}]?\p{L}+: one character of any other kind, even
	// whitespace, joins the letters that follow it.
	if c0 == classLetter {
		return n0 + classRun(s[n0:], classLetter, -1)
	}
	if c0 != classNumber && r0 != '\r' && r0 != '\n' {
		if n := classRun(s[n0:], classLetter, -1); n > 0 {
			return n0 + n
		}
	}
	if c0 == classNumber {
		return n0 + classRun(s[n0:], classNumber, maxDigits-1)
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*"
	start := 0
	if r0 == ' ' && classRun(s[1:], classOther, 1) > 0 {
		start = 1
	}
	if n := classRun(s[start:], classOther, -1); n > 0 {
		end := start + n
		return end + len(s[end:]) - len(strings.TrimLeft(s[end:], "\r\n"))
	}
	// A whitespace run. "\s*[\r\n]+" takes it up to its last line break.
	end, last, lastBreak := 0, 0, 0
	for end < len(s) {
		r, n := utf8.DecodeRuneInString(s[end:])
		if classify(r) != classSpace {
			break
		}
		end, last = end+n, n
		if r == '\r' || r == '\n' {
			lastBreak = end
		}
	}
	switch {
	case lastBreak > 0:
		return lastBreak
	case end < len(s) && end > last:
		// "\s+(?!\S)" leaves the run's last character to the text that
		// follows, unless the run is that one character ("\s+").
		return end - last
	default:
		return end
	}
}

// classRun is the byte length of the run of class c that starts s, of at most
// max characters (no limit if max < 0).
func classRun(s string, c charClass, max int) int {
	end := 0
	for count := 0; end < len(s) && count != max; count++ {
		r, n := utf8.DecodeRuneInString(s[end:])
		if classify(r) != c {
			break
		}
		end += n
	}
	return end
}

// contractions are the endings of "(?i:'s|'t|'re|'ve|'m|'ll|'d)", in order.
var contractions = [...]string{"s", "t", "re", "ve", "m", "ll", "d"}

// contraction is the byte length of the contraction ending that starts s
// (after the apostrophe), or 0. Case folds as Oniguruma's (?i) does: 'ſ (long
// s) counts as 's.
func contraction(s string) int {
	for _, c := range contractions {
		end := 0
		for _, want := range c {
			r, n := utf8.DecodeRuneInString(s[end:])
			if n == 0 || !foldEqual(r, want) {
				end = -1
				break
			}
			end += n
		}
		if end > 0 {
			return end
		}
	}
	return 0
}

// foldEqual says whether r is want under simple case folding.
func foldEqual(r, want rune) bool {
	for f := unicode.SimpleFold(want); f != want; f = unicode.SimpleFold(f) {
		if r == f {
			return true
		}
	}
	return r == want
}

// metaspace is the word marker of SentencePiece-style tokenizers: it stands
// for a space.
const metaspace = "▁"

// splitMetaspace returns the byte length of the first piece of s, a
// SentencePiece-style text with spaces spelled as "▁": the text up to the
// next "▁" that follows another character. tokenizers runs BPE on the whole
// text at once (Metaspace with split false); ParseJSON checks that no merge
// makes a token with "▁" after another character, so no token spans these
// cuts and BPE on each piece gives the same tokens, at a cost linear in the
// text's length and with the piece cache.
func splitMetaspace(s string) int {
	start := len(s) - len(strings.TrimLeft(s, metaspace))
	if i := strings.Index(s[start:], metaspace); i >= 0 {
		return start + i
	}
	return len(s)
}
