package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

type goldenFile struct {
	Generator string   `json:"generator"`
	EOT       []uint32 `json:"eot"`
	EOTText   string   `json:"eot_text"`
	Cases     []struct {
		Text   string   `json:"text"`
		Tokens []uint32 `json:"tokens"`
	} `json:"cases"`
}

func loadGoldens(t *testing.T) goldenFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/gpt2-goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("parsing goldens: %v", err)
	}
	if len(g.Cases) < 2000 {
		t.Fatalf("only %d golden cases; regenerate with gen-goldens.mjs", len(g.Cases))
	}
	return g
}

// TestGPT2MatchesJSTiktoken compares every golden string's encoding with the
// ids js-tiktoken produced from its own copy of the gpt2 ranks.
func TestGPT2MatchesJSTiktoken(t *testing.T) {
	g := loadGoldens(t)
	tok := NewGPT2()
	if !slices.Equal(g.EOT, []uint32{tok.EOT()}) {
		t.Fatalf("EOT id %d, js-tiktoken says %v", tok.EOT(), g.EOT)
	}
	if s, err := tok.Decode([]uint32{tok.EOT()}); err != nil || s != g.EOTText {
		t.Fatalf("Decode(EOT) = %q, %v; want %q", s, err, g.EOTText)
	}
	mismatches := 0
	for _, c := range g.Cases {
		got, err := tok.Encode(c.Text)
		if err != nil {
			t.Errorf("Encode(%q): %v", c.Text, err)
			continue
		}
		if !slices.Equal(got, c.Tokens) {
			mismatches++
			if mismatches <= 20 {
				t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.Tokens)
			}
		}
		back, err := tok.Decode(got)
		if err != nil || back != c.Text {
			t.Errorf("Decode(Encode(%q)) = %q, %v", c.Text, back, err)
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d golden strings differ", mismatches, len(g.Cases))
	}
}

// TestGPT2CacheDoesNotChangeResults encodes the goldens twice in one
// tokenizer, so the second pass runs entirely from the piece cache, and
// in reverse order, so pieces first meet the cache in different contexts.
func TestGPT2CacheDoesNotChangeResults(t *testing.T) {
	g := loadGoldens(t)
	tok := NewGPT2()
	for pass := range 2 {
		for i := range g.Cases {
			c := g.Cases[len(g.Cases)-1-i]
			got, err := tok.Encode(c.Text)
			if err != nil || !slices.Equal(got, c.Tokens) {
				t.Fatalf("pass %d: Encode(%q) = %v, %v; want %v", pass, c.Text, got, err, c.Tokens)
			}
		}
	}
}

func TestEncodeRejectsUnrepresentableText(t *testing.T) {
	tests := []struct {
		tokenizer string
		text      string
		wantErr   string
	}{
		{GPT2Name, "ok \xff bad", "invalid UTF-8 at byte 3"},
		{GPT2Name, "\xe2\x82", "invalid UTF-8 at byte 0"},
		{ByteName, "a\x00b", "NUL byte at offset 1"},
	}
	for _, tt := range tests {
		tok, err := New(tt.tokenizer)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tok.Encode(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s Encode(%q) error = %v, want it to mention %q", tt.tokenizer, tt.text, err, tt.wantErr)
		}
	}
}

func TestDecodeRejectsIdsOutsideVocabulary(t *testing.T) {
	tests := []struct {
		tokenizer string
		ids       []uint32
	}{
		{ByteName, []uint32{65, 256}},
		{GPT2Name, []uint32{15496, 50257}},
		{GPT2Name, []uint32{65535}},
		{GPT2Name, []uint32{1 << 20}},
		{ByteName, []uint32{1<<16 + 65}},
	}
	for _, tt := range tests {
		tok, _ := New(tt.tokenizer)
		if s, err := tok.Decode(tt.ids); err == nil {
			t.Errorf("%s Decode(%v) = %q, want an error", tt.tokenizer, tt.ids, s)
		}
	}
}

func TestByteRoundTrip(t *testing.T) {
	tok := Byte{}
	texts := []string{"", "Hello, world!\n", "naïve café 東京 🙂", "\xff\xfe raw bytes", "\t\r\n"}
	for _, c := range loadGoldens(t).Cases {
		if !strings.Contains(c.Text, "\x00") {
			texts = append(texts, c.Text)
		}
	}
	for _, text := range texts {
		ids, err := tok.Encode(text)
		if err != nil {
			t.Fatalf("Encode(%q): %v", text, err)
		}
		if len(ids) != len(text) {
			t.Errorf("Encode(%q) gave %d ids, want one per byte (%d)", text, len(ids), len(text))
		}
		back, err := tok.Decode(ids)
		if err != nil || back != text {
			t.Errorf("Decode(Encode(%q)) = %q, %v", text, back, err)
		}
	}
	if tok.EOT() != 0 || tok.VocabSize() != 256 {
		t.Errorf("byte tokenizer EOT %d vocab %d, want 0 and 256", tok.EOT(), tok.VocabSize())
	}
}

func TestGPT2DecodeKeepsSeparators(t *testing.T) {
	tok := NewGPT2()
	a, _ := tok.Encode("First document.")
	b, _ := tok.Encode(" Second <|endoftext|> one.")
	ids := append(append(slices.Clone(a), tok.EOT()), b...)
	got, err := tok.Decode(ids)
	want := "First document.<|endoftext|> Second <|endoftext|> one."
	if err != nil || got != want {
		t.Fatalf("Decode = %q, %v; want %q", got, err, want)
	}
	if slices.Contains(b, tok.EOT()) {
		t.Fatalf("document text %q encoded to the separator id", " Second <|endoftext|> one.")
	}
}

func TestNewRejectsUnknownNames(t *testing.T) {
	if _, err := New("sentencepiece"); err == nil || !strings.Contains(err.Error(), "byte, gpt2") {
		t.Fatalf("New(sentencepiece) error = %v, want one listing the known tokenizers", err)
	}
}

// FuzzGPT2MatchesLibrary checks the pre-tokenizer against the library's own
// regex split on arbitrary text: both must give the same ids, and decoding
// must give the text back. `go test` runs the seeds; `go test -fuzz` explores.
func FuzzGPT2MatchesLibrary(f *testing.F) {
	for _, s := range []string{"Hello  world\n\n", " 's 'S x'll", "a\u0085 b\ufeff c\u00a0 d", "1,000 \t\t2", "日本語 🙂  !!", "\r\n \r\n"} {
		f.Add(s)
	}
	tok := NewGPT2()
	lib := codec.NewR50kBase()
	f.Fuzz(func(t *testing.T, text string) {
		got, err := tok.Encode(text)
		if !utf8.ValidString(text) {
			if err == nil {
				t.Fatalf("Encode accepted invalid UTF-8 %q", text)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%q): %v", text, err)
		}
		if strings.IndexByte(text, 0x7f) >= 0 {
			return // the library drops DEL; TestDELIsOnlyInItsOwnToken covers it
		}
		want, _, err := lib.Encode(text)
		if err != nil {
			t.Fatalf("library Encode(%q): %v", text, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Encode(%q) = %v, library gives %v", text, got, want)
		}
		for i := range got {
			if uint(got[i]) != want[i] {
				t.Fatalf("Encode(%q) = %v, library gives %v", text, got, want)
			}
		}
		if back, err := tok.Decode(got); err != nil || back != text {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", text, back, err)
		}
	})
}

// TestDELIsOnlyInItsOwnToken backs encodePiece's handling of byte 0x7f: if
// any merged token contained it, encoding around it would be wrong.
func TestDELIsOnlyInItsOwnToken(t *testing.T) {
	lib := codec.NewR50kBase()
	for id := uint(0); id < GPT2EOT; id++ {
		s, err := lib.Decode([]uint{id})
		if err != nil {
			t.Fatalf("decoding token %d: %v", id, err)
		}
		if strings.IndexByte(s, 0x7f) >= 0 && (id != gpt2DEL || s != "\x7f") {
			t.Fatalf("token %d (%q) contains DEL", id, s)
		}
	}
	tok := NewGPT2()
	for _, tt := range []struct {
		text string
		want []uint32
	}{ // ids from js-tiktoken
		{"\x7f", []uint32{221}},
		{"a\x7fb", []uint32{64, 221, 65}},
		{" \x7f\x7f!", []uint32{220, 221, 221, 0}},
	} {
		if got, err := tok.Encode(tt.text); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
		}
	}
}
