package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

const (
	// GPT2Name names GPT-2's byte-pair encoding (tiktoken's r50k_base).
	GPT2Name = "gpt2"
	// GPT2EOT is GPT-2's <|endoftext|> token, used as the document separator.
	GPT2EOT     = 50256
	gpt2EOTText = "<|endoftext|>"
	gpt2Vocab   = 50257
	// maxCachedPieces bounds the piece cache; natural text has far fewer
	// distinct pieces, so the cache is simply dropped when it fills.
	maxCachedPieces = 1 << 18
)

// GPT2 is GPT-2's BPE. The merges come from github.com/tiktoken-go/tokenizer;
// this type adds the pre-tokenizer (the split of text into pieces that BPE
// encodes one at a time) and a cache of encoded pieces. The library's own
// split runs a backtracking regex that manages about 4 MB/s; the scanner in
// splitPiece implements the same pattern directly and, with the cache, makes
// encoding several times faster. Golden tests against js-tiktoken pin the
// equivalence.
type GPT2 struct {
	codec *codec.Codec
	cache map[string][]uint32
}

// NewGPT2 returns a GPT-2 tokenizer. The vocabulary is embedded in the
// binary; nothing is downloaded.
func NewGPT2() *GPT2 {
	return &GPT2{codec: codec.NewR50kBase(), cache: make(map[string][]uint32)}
}

func (*GPT2) Name() string   { return GPT2Name }
func (*GPT2) VocabSize() int { return gpt2Vocab }
func (*GPT2) EOT() uint32    { return GPT2EOT }

func (g *GPT2) Encode(text string) ([]uint32, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("gpt2 tokenizer: invalid UTF-8 at byte %d", invalidUTF8Offset(text))
	}
	// About one token per four bytes of English prose.
	ids := make([]uint32, 0, len(text)/4+1)
	for rest := text; rest != ""; {
		n := splitPiece(rest)
		piece := rest[:n]
		rest = rest[n:]
		if cached, ok := g.cache[piece]; ok {
			ids = append(ids, cached...)
			continue
		}
		enc, err := g.encodePiece(piece)
		if err != nil {
			return nil, err
		}
		if len(g.cache) >= maxCachedPieces {
			clear(g.cache)
		}
		// Clone the key so the cache does not pin the whole document.
		g.cache[strings.Clone(piece)] = enc
		ids = append(ids, enc...)
	}
	return ids, nil
}

// gpt2DEL is the id of the byte 0x7f (DEL). The library's generated regex
// leaves DEL out of [^\s\p{L}\p{N}] and so drops it from its output; no other
// token contains that byte, so BPE never merges across it and encoding the
// text on either side separately gives GPT-2's result.
const gpt2DEL = 221

// encodePiece runs the library's BPE on one piece and checks that the tokens
// spell the piece exactly, so no library quirk can silently lose text.
func (g *GPT2) encodePiece(piece string) ([]uint32, error) {
	if i := strings.IndexByte(piece, 0x7f); i >= 0 {
		before, err := g.encodePiece(piece[:i])
		if err != nil {
			return nil, err
		}
		after, err := g.encodePiece(piece[i+1:])
		if err != nil {
			return nil, err
		}
		return append(append(before, gpt2DEL), after...), nil
	}
	if piece == "" {
		return nil, nil
	}
	raw, tokens, err := g.codec.Encode(piece)
	if err != nil {
		return nil, fmt.Errorf("gpt2 tokenizer: encoding %q: %w", piece, err)
	}
	if joined := strings.Join(tokens, ""); joined != piece {
		return nil, fmt.Errorf("gpt2 tokenizer: BPE of %q gave tokens spelling %q", piece, joined)
	}
	enc := make([]uint32, len(raw))
	for i, id := range raw {
		if id >= gpt2Vocab {
			return nil, fmt.Errorf("gpt2 tokenizer: piece %q encoded to token %d outside the vocabulary", piece, id)
		}
		enc[i] = uint32(id)
	}
	return enc, nil
}

func (g *GPT2) Decode(ids []uint32) (string, error) {
	var sb strings.Builder
	run := make([]uint, 0, len(ids))
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		s, err := g.codec.Decode(run)
		if err != nil {
			return fmt.Errorf("gpt2 tokenizer: %w", err)
		}
		sb.WriteString(s)
		run = run[:0]
		return nil
	}
	for i, id := range ids {
		switch {
		case id == GPT2EOT:
			if err := flush(); err != nil {
				return "", err
			}
			sb.WriteString(gpt2EOTText)
		case id >= gpt2Vocab:
			return "", fmt.Errorf("gpt2 tokenizer: token %d at position %d is outside the vocabulary of %d", id, i, gpt2Vocab)
		default:
			run = append(run, uint(id))
		}
	}
	if err := flush(); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// charClass is what the GPT-2 split pattern distinguishes about a character.
type charClass uint8

const (
	classOther charClass = iota // [^\s\p{L}\p{N}]
	classLetter
	classNumber
	classSpace
)

// asciiClass caches classify for ASCII, where almost all text lives.
var asciiClass = func() (t [utf8.RuneSelf]charClass) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classifySlow(r)
	}
	return t
}()

func classify(r rune) charClass {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classifySlow(r)
}

// classifySlow reads \s as Unicode White_Space (unicode.IsSpace), as OpenAI's
// tiktoken and GPT-2's original encoder do, and as the library's regex does,
// so the library splits none of our pieces further. JavaScript's \s differs
// on U+0085 and U+FEFF; see testdata/gen-goldens.mjs.
func classifySlow(r rune) charClass {
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	default:
		return classOther
	}
}

// splitPiece returns the byte length of the first piece of s (non-empty), as
// GPT-2's pattern finds it:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitPiece(s string) int {
	r0, n0 := utf8.DecodeRuneInString(s)
	if r0 == '\'' {
		// The contractions are the pattern's first alternatives, tried in order.
		for _, c := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if strings.HasPrefix(s[1:], c) {
				return 1 + len(c)
			}
		}
	}
	start, class := 0, classify(r0)
	if r0 == ' ' && len(s) > 1 {
		// " ?X+": a single space joins the run of letters, digits or
		// other symbols that follows it.
		r1, _ := utf8.DecodeRuneInString(s[1:])
		if c := classify(r1); c != classSpace {
			start, class = 1, c
		}
	}
	if class != classSpace {
		end := start
		for end < len(s) {
			r, n := utf8.DecodeRuneInString(s[end:])
			if classify(r) != class {
				break
			}
			end += n
		}
		return end
	}
	// A whitespace run. "\s+(?!\S)" leaves the run's last character to the
	// text that follows it, unless the run is that one character ("\s+").
	end, last := n0, n0
	for end < len(s) {
		r, n := utf8.DecodeRuneInString(s[end:])
		if classify(r) != classSpace {
			if end > last {
				return end - last
			}
			return end
		}
		end, last = end+n, n
	}
	return end
}

func invalidUTF8Offset(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
