package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/tiktoken-go/tokenizer/codec"
	"golang.org/x/text/unicode/norm"
)

type jsonGoldenFile struct {
	Texts      []string `json:"texts"`
	Tokenizers []struct {
		File      string `json:"file"`
		VocabSize int    `json:"vocab_size"`
		EOT       uint32 `json:"eot"`
		EOTText   string `json:"eot_text"`
		// Per text: Encode's ids, and EncodeSpecial's where they differ.
		IDs        [][]uint32  `json:"ids"`
		SpecialIDs []*[]uint32 `json:"special_ids"`
		// Per text: what tokenizers decodes those ids to, where not the text.
		Decoded        []*string `json:"decoded"`
		DecodedSpecial []*string `json:"decoded_special"`
		// [ids, text] pairs: random ids and what tokenizers decodes them to.
		DecodeCases [][2]json.RawMessage `json:"decode_cases"`
	} `json:"tokenizers"`
}

func loadJSONGoldens(t *testing.T) jsonGoldenFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/hfjson/goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g jsonGoldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("parsing goldens: %v", err)
	}
	if len(g.Texts) < 300 || len(g.Tokenizers) < 9 {
		t.Fatalf("only %d golden strings for %d tokenizers; regenerate with scripts/torch/tokenizer_goldens.py", len(g.Texts), len(g.Tokenizers))
	}
	return g
}

// roundTrip is what README.md says Decode(Encode(text)) gives with each test
// tokenizer, and false where it makes no promise; the goldens check the
// promises against tokenizers.
func roundTrip(file, text string) (string, bool) {
	switch file {
	case "prefix.json": // add_prefix_space: the leading space stays
		if text != "" && text[0] != ' ' {
			return " " + text, true
		}
	case "qwen2.json":
		return norm.NFC.String(text), true
	case "spm.json": // Metaspace: a leading space is lost, "▁" is a space
		return text, !strings.HasPrefix(text, " ") && !strings.Contains(text, metaspace)
	case "spm-legacy.json":
		return text, !strings.Contains(text, metaspace)
	case "spm-metaspace.json": // no byte fallback in the decoder
		return "", false
	}
	return text, true
}

// TestJSONBPEMatchesTokenizers compares every golden string's encoding, under
// each tokenizer.json in testdata/hfjson, with the ids Hugging Face tokenizers
// gave, by Encode and by EncodeSpecial, and the decoding of those ids. The
// second pass runs from the piece cache.
func TestJSONBPEMatchesTokenizers(t *testing.T) {
	g := loadJSONGoldens(t)
	for _, gt := range g.Tokenizers {
		t.Run(gt.File, func(t *testing.T) {
			path := filepath.Join("testdata", "hfjson", gt.File)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := LoadJSON(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if tok.Name() != "json:"+hex.EncodeToString(sum[:])[:11] || len(tok.Name()) != 16 || tok.Hash() != sum {
				t.Errorf("Name() = %q, want json: and the start of the file's SHA-256", tok.Name())
			}
			if tok.EOT() != gt.EOT || tok.VocabSize() != gt.VocabSize {
				t.Errorf("EOT %d, vocab size %d; tokenizers says %d and %d", tok.EOT(), tok.VocabSize(), gt.EOT, gt.VocabSize)
			}
			if s, err := tok.Decode([]uint32{tok.EOT()}); err != nil || s != gt.EOTText {
				t.Errorf("Decode(EOT) = %q, %v; want %q", s, err, gt.EOTText)
			}
			if id, ok := tok.SpecialID(gt.EOTText); !ok || id != gt.EOT {
				t.Errorf("SpecialID(%q) = %d, %v; want %d", gt.EOTText, id, ok, gt.EOT)
			}
			if n := len(g.Texts); len(gt.IDs) != n || len(gt.SpecialIDs) != n || len(gt.Decoded) != n || len(gt.DecodedSpecial) != n {
				t.Fatalf("%d, %d, %d and %d golden lists for %d strings", len(gt.IDs), len(gt.SpecialIDs), len(gt.Decoded), len(gt.DecodedSpecial), n)
			}
			for pass := range 2 {
				mismatches := 0
				for i, text := range g.Texts {
					special := gt.IDs[i]
					if gt.SpecialIDs[i] != nil {
						special = *gt.SpecialIDs[i]
					}
					if !checkEncoding(t, tok, tok.Encode, text, gt.IDs[i], or(gt.Decoded[i], text)) ||
						!checkEncoding(t, tok, tok.EncodeSpecial, text, special, or(gt.DecodedSpecial[i], text)) {
						if mismatches++; mismatches >= 10 {
							t.Fatalf("pass %d: too many golden strings differ", pass)
						}
						continue
					}
					if ids, _ := tok.Encode(text); slices.Contains(ids, tok.EOT()) {
						t.Errorf("Encode(%q) produced the separator id", text)
					}
					if want, ok := roundTrip(gt.File, text); ok && or(gt.Decoded[i], text) != want {
						t.Errorf("tokenizers decodes %q to %q, which README.md does not promise", text, or(gt.Decoded[i], text))
					}
				}
			}
			for _, c := range gt.DecodeCases {
				var ids []uint32
				var want string
				if json.Unmarshal(c[0], &ids) != nil || json.Unmarshal(c[1], &want) != nil {
					t.Fatalf("bad decode case %s", c)
				}
				if got, err := tok.Decode(ids); err != nil || got != want {
					t.Errorf("Decode(%v) = %q, %v; tokenizers gives %q", ids, got, err, want)
				}
			}
		})
	}
}

func or(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// checkEncoding reports whether encode(text) gives want, and decoding it
// decoded.
func checkEncoding(t *testing.T, tok *JSONBPE, encode func(string) ([]uint32, error), text string, want []uint32, decoded string) bool {
	t.Helper()
	got, err := encode(text)
	if err != nil {
		t.Errorf("encoding %q: %v", text, err)
		return false
	}
	if !slices.Equal(got, want) {
		t.Errorf("encoding %q\n got %v\nwant %v", text, got, want)
		return false
	}
	if back, err := tok.Decode(got); err != nil || back != decoded {
		t.Errorf("Decode(%v) = %q, %v; tokenizers gives %q", got, back, err, decoded)
		return false
	}
	return true
}

// gpt2JSON builds GPT-2's tokenizer.json, as the Hub has it, from the ranks in
// tiktoken-go: a token's merge is the pair of tokens that BPE restricted to
// lower ranks leaves it as.
func gpt2JSON(tb testing.TB) []byte {
	tb.Helper()
	lib := codec.NewR50kBase()
	ranks := make(map[string]int, GPT2EOT)
	tokens := make([]string, GPT2EOT)
	for id := range GPT2EOT {
		s, err := lib.Decode([]uint{uint(id)})
		if err != nil {
			tb.Fatal(err)
		}
		ranks[s], tokens[id] = id, s
	}
	spell := func(s string) string {
		var sb strings.Builder
		for i := range len(s) {
			sb.WriteRune(byteChar[s[i]])
		}
		return sb.String()
	}
	vocab := map[string]int{gpt2EOTText: GPT2EOT}
	var merges []string
	for id, s := range tokens {
		vocab[spell(s)] = id
		if len(s) == 1 {
			continue
		}
		parts := make([]string, len(s))
		for i := range len(s) {
			parts[i] = s[i : i+1]
		}
		for {
			best, bestRank := -1, id
			for i := range len(parts) - 1 {
				if r, ok := ranks[parts[i]+parts[i+1]]; ok && r < bestRank {
					best, bestRank = i, r
				}
			}
			if best < 0 {
				break
			}
			parts[best] += parts[best+1]
			parts = slices.Delete(parts, best+1, best+2)
		}
		if len(parts) != 2 {
			tb.Fatalf("token %d (%q) is not a merge of two lower-ranked tokens: %q", id, s, parts)
		}
		merges = append(merges, spell(parts[0])+" "+spell(parts[1]))
	}
	data, err := json.Marshal(map[string]any{
		"added_tokens":  []any{map[string]any{"id": GPT2EOT, "content": gpt2EOTText, "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "dropout": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "vocab": vocab, "merges": merges},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestJSONBPEMatchesGPT2 reads GPT-2's vocabulary as a tokenizer.json and
// checks it against the js-tiktoken goldens: a full-size vocabulary, and an
// implementation independent of the tokenizers goldens.
func TestJSONBPEMatchesGPT2(t *testing.T) {
	tok, err := ParseJSON(gpt2JSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if tok.EOT() != GPT2EOT || tok.VocabSize() != gpt2Vocab {
		t.Fatalf("EOT %d, vocab size %d; want GPT-2's %d and %d", tok.EOT(), tok.VocabSize(), GPT2EOT, gpt2Vocab)
	}
	for _, c := range loadGoldens(t).Cases {
		got, err := tok.Encode(c.Text)
		if err != nil || !slices.Equal(got, c.Tokens) {
			t.Fatalf("Encode(%q) = %v, %v; js-tiktoken gives %v", c.Text, got, err, c.Tokens)
		}
		if back, err := tok.Decode(got); err != nil || back != c.Text {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", c.Text, back, err)
		}
	}
}

// smallJSON is a valid tokenizer.json for tests to alter: the 256 byte
// tokens, <|endoftext|>, and merges that make "Ġt" and "Ġth".
func smallJSON() map[string]any {
	vocab := map[string]any{gpt2EOTText: 0, "Ġt": 257, "Ġth": 258}
	for b, r := range byteChar {
		vocab[string(r)] = b + 1
	}
	return map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{map[string]any{"id": 0, "content": gpt2EOTText, "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "dropout": nil, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": []any{[]any{"Ġ", "t"}, []any{"Ġt", "h"}}},
	}
}

// llamaPre is Llama 3's pre-tokenizer with another pattern or behavior.
func llamaPre(pattern, behavior string) map[string]any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": behavior, "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
}

func parseEdited(t *testing.T, edit func(doc, model map[string]any)) (*JSONBPE, error) {
	t.Helper()
	doc := smallJSON()
	edit(doc, doc["model"].(map[string]any))
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return ParseJSON(data)
}

func TestParseJSONOptions(t *testing.T) {
	// "the" is the bytes 't' 'h' 'e', whose ids are one above the byte values.
	tests := []struct {
		name string
		edit func(doc, model map[string]any)
		text string
		want []uint32
		eot  uint32
	}{
		{"pair merges", func(_, _ map[string]any) {}, " the", []uint32{258, 'e' + 1}, 0},
		{"string merges", func(_, m map[string]any) { m["merges"] = []any{"#version: 0.2", "Ġ t", "Ġt h"} }, " the", []uint32{258, 'e' + 1}, 0},
		{"merge order is rank order", func(_, m map[string]any) {
			m["vocab"].(map[string]any)["th"] = 259
			m["merges"] = []any{"t h", "Ġ t", "Ġt h"}
		}, " the", []uint32{' ' + 1, 259, 'e' + 1}, 0},
		{"a repeated merge takes its last rank", func(_, m map[string]any) {
			m["vocab"].(map[string]any)["th"] = 259
			m["merges"] = []any{"t h", "Ġ t", "Ġt h", "t h"}
		}, " the", []uint32{258, 'e' + 1}, 0},
		{"add_prefix_space", func(d, _ map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true}
		}, "the", []uint32{258, 'e' + 1}, 0},
		{"Sequence of ByteLevel, affixes empty, dropout 0", func(d, m map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{d["pre_tokenizer"]}}
			m["continuing_subword_prefix"], m["end_of_word_suffix"], m["dropout"] = "", "", 0
		}, " the", []uint32{258, 'e' + 1}, 0},
		{"ignore_merges", func(_, m map[string]any) {
			m["vocab"].(map[string]any)["Ġthe"] = 259
			m["ignore_merges"] = true
		}, " the the", []uint32{259, 259}, 0},
		{"merges without ignore_merges", func(_, m map[string]any) {
			m["vocab"].(map[string]any)["Ġthe"] = 259
		}, " the", []uint32{258, 'e' + 1}, 0},
		{"end-of-text preference", func(d, m map[string]any) {
			m["vocab"].(map[string]any)["</s>"] = 259
			d["added_tokens"] = append([]any{map[string]any{"id": 259, "content": "</s>", "special": true}}, d["added_tokens"].([]any)...)
		}, "", []uint32{}, 0},
		{"</s> as end of text", func(d, _ map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 300, "content": "</s>", "special": true}}
		}, "</s>", []uint32{'<' + 1, '/' + 1, 's' + 1, '>' + 1}, 300},
	}
	for _, tt := range tests {
		tok, err := parseEdited(t, tt.edit)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got, err := tok.Encode(tt.text); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: Encode(%q) = %v, %v; want %v", tt.name, tt.text, got, err, tt.want)
		}
		if tok.EOT() != tt.eot {
			t.Errorf("%s: EOT %d, want %d", tt.name, tok.EOT(), tt.eot)
		}
	}
}

func TestParseJSONRefusesUnsupported(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(doc, model map[string]any)
		wantErr string
	}{
		{"Metaspace", func(d, _ map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		}, `pre_tokenizer type "Metaspace" is not supported (only byte-level BPE`},
		{"two-step Sequence", func(d, _ map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Digits"}, d["pre_tokenizer"]}}
		}, `pre_tokenizer type "Sequence" is not supported`},
		{"no pre_tokenizer", func(d, _ map[string]any) { d["pre_tokenizer"] = nil }, "pre_tokenizer null is not supported"},
		{"use_regex false", func(d, _ map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "use_regex": false}
		}, "use_regex false is not supported"},
		{"normalizer", func(d, _ map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} }, `normalizer type "NFKC" is not supported`},
		{"Split pattern", func(d, _ map[string]any) { d["pre_tokenizer"] = llamaPre(`'s|'t| ?\p{L}+|\s+`, "Isolated") },
			`pre_tokenizer Split pattern "'s|'t| ?\\p{L}+|\\s+" is not supported (only Llama 3's and Qwen2's)`},
		{"Split string pattern", func(d, _ map[string]any) {
			pre := llamaPre(llama3Pattern, "Isolated")
			pre["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"String": " "}
			d["pre_tokenizer"] = pre
		}, `pre_tokenizer Split pattern " " is not supported (only Llama 3's and Qwen2's regexes)`},
		{"Split behavior", func(d, _ map[string]any) { d["pre_tokenizer"] = llamaPre(qwen2Pattern, "MergedWithPrevious") },
			`pre_tokenizer Split behavior "MergedWithPrevious" is not supported (only Isolated)`},
		{"Split invert", func(d, _ map[string]any) {
			pre := llamaPre(llama3Pattern, "Isolated")
			pre["pretokenizers"].([]any)[0].(map[string]any)["invert"] = true
			d["pre_tokenizer"] = pre
		}, "pre_tokenizer Split invert true is not supported"},
		{"ByteLevel regex after Split", func(d, _ map[string]any) {
			pre := llamaPre(llama3Pattern, "Isolated")
			delete(pre["pretokenizers"].([]any)[1].(map[string]any), "use_regex")
			d["pre_tokenizer"] = pre
		}, "pre_tokenizer ByteLevel after Split with use_regex true is not supported"},
		{"prefix space after Split", func(d, _ map[string]any) {
			pre := llamaPre(llama3Pattern, "Isolated")
			pre["pretokenizers"].([]any)[1].(map[string]any)["add_prefix_space"] = true
			d["pre_tokenizer"] = pre
		}, "pre_tokenizer ByteLevel after Split with add_prefix_space true is not supported"},
		{"Digits after Split", func(d, _ map[string]any) {
			pre := llamaPre(llama3Pattern, "Isolated")
			pre["pretokenizers"].([]any)[1] = map[string]any{"type": "Digits"}
			d["pre_tokenizer"] = pre
		}, `pre_tokenizer type "Digits" after Split is not supported (only ByteLevel)`},
		{"vocabulary over the datasets' limit", func(_, m map[string]any) {
			v := m["vocab"].(map[string]any)
			for i := len(v); i <= maxVocab; i++ {
				v[fmt.Sprint("w", i)] = i
			}
		}, "the vocabulary has 262145 tokens, added tokens included; datasets take at most 262144"},
		{"lstrip", func(d, _ map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["lstrip"] = true },
			`added token "<|endoftext|>" has lstrip true, which is not supported`},
		{"rstrip", func(d, _ map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["rstrip"] = true },
			`added token "<|endoftext|>" has rstrip true`},
		{"single_word", func(d, _ map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["single_word"] = true },
			`added token "<|endoftext|>" has single_word true`},
		{"normalized with a normalizer", func(d, _ map[string]any) {
			d["added_tokens"].([]any)[0].(map[string]any)["normalized"] = true
			d["normalizer"] = map[string]any{"type": "NFC"}
		}, `added token "<|endoftext|>" has normalized true`},
		{"mixed normalized", func(d, _ map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 300, "content": "<pad>", "special": true, "normalized": true})
		}, `added tokens "<|endoftext|>" and "<pad>" differ in normalized`},
		{"decoder", func(d, _ map[string]any) { d["decoder"] = map[string]any{"type": "Metaspace"} }, `decoder type "Metaspace" is not supported`},
		{"Unigram", func(_, m map[string]any) { m["type"] = "Unigram" }, `model type "Unigram" is not supported`},
		{"dropout", func(_, m map[string]any) { m["dropout"] = 0.1 }, "dropout 0.1 is not supported"},
		{"subword prefix", func(_, m map[string]any) { m["continuing_subword_prefix"] = "##" }, `continuing_subword_prefix "##" is not supported`},
		{"word suffix", func(_, m map[string]any) { m["end_of_word_suffix"] = "</w>" }, `end_of_word_suffix "</w>" is not supported`},
		{"byte_fallback", func(_, m map[string]any) { m["byte_fallback"] = true }, `pre_tokenizer type "ByteLevel" is not supported with byte_fallback (only Metaspace)`},
		{"id over the limit", func(_, m map[string]any) { m["vocab"].(map[string]any)["big"] = 1 << 18 }, `token "big" has id 262144`},
		{"added id over the limit", func(d, _ map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 300000, "content": "<pad>", "special": true})
		}, `token "<pad>" has id 300000`},
		{"no end-of-text token", func(d, _ map[string]any) { d["added_tokens"] = []any{} }, "the tokenizer has no end-of-text token"},
		{"end of text not special", func(d, _ map[string]any) {
			d["added_tokens"].([]any)[0].(map[string]any)["special"] = false
		}, `added token "<|endoftext|>" (id 0) is not special`},
		{"added token on another token's id", func(d, _ map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 1, "content": "<pad>", "special": true})
		}, `added token "<pad>" has id 1, which the vocab gives to "Ā"`},
		{"added token with another id in the vocab", func(d, _ map[string]any) {
			d["added_tokens"].([]any)[0].(map[string]any)["id"] = 500
		}, `added token "<|endoftext|>" has id 500 but id 0 in the vocab`},
		{"shared id", func(_, m map[string]any) { m["vocab"].(map[string]any)["Ġx"] = 257 }, `vocab tokens "Ġt" and "Ġx" share id 257`},
		{"merge of unknown token", func(_, m map[string]any) {
			m["merges"] = append(m["merges"].([]any), []any{"Ġth", "zz"})
		}, `merge 2 ("Ġth", "zz") uses a token that is not in the vocab`},
		{"merge makes unknown token", func(_, m map[string]any) {
			m["merges"] = append(m["merges"].([]any), []any{"t", "h"})
		}, `merge 2 ("t", "h") makes "th", which is not in the vocab`},
		{"string merge of three", func(_, m map[string]any) { m["merges"] = []any{"Ġ t h"} }, `merge "Ġ t h" is not two tokens`},
		{"pair merge of three", func(_, m map[string]any) { m["merges"] = []any{[]any{"Ġ", "t", "h"}} }, "merge 0 has 3 tokens"},
		{"merges not a list", func(_, m map[string]any) { m["merges"] = 5 }, "merges must be a list"},
		{"no merges", func(_, m map[string]any) { delete(m, "merges") }, "no vocab or no merges"},
	}
	for _, tt := range tests {
		_, err := parseEdited(t, tt.edit)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error = %v, want it to mention %q", tt.name, err, tt.wantErr)
		}
	}
	for _, bad := range []string{`{"model": `, `[]`, `{"model": {"type": "BPE", "vocab": {"a": 1.5}, "merges": []}}`} {
		if _, err := ParseJSON([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "tokenizer.json: ") {
			t.Errorf("ParseJSON(%s) error = %v, want a tokenizer.json error", bad, err)
		}
	}
	if _, err := LoadJSON("testdata/hfjson/missing.json"); err == nil {
		t.Errorf("LoadJSON of a missing file succeeded")
	}
}

// spmJSON is a valid SentencePiece-style tokenizer.json for tests to alter:
// <unk> <s> </s>, the 256 byte tokens (ids 3 to 258), and merges that make
// "▁t" (261) and "▁th" (262) from "▁" (259), "t" (260) and "h" (263).
func spmJSON() map[string]any {
	vocab := map[string]any{"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 259, "t": 260, "▁t": 261, "▁th": 262, "h": 263}
	for b := range 256 {
		vocab[fmt.Sprintf("<0x%02X>", b)] = b + 3
	}
	added := []any{}
	for i, s := range []string{"<unk>", "<s>", "</s>"} {
		added = append(added, map[string]any{"id": i, "content": s, "special": true, "normalized": false})
	}
	return map[string]any{
		"added_tokens":  added,
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}},
		"model": map[string]any{"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
			"vocab": vocab, "merges": []any{[]any{"▁", "t"}, []any{"▁t", "h"}}},
	}
}

func parseSPMEdited(t *testing.T, edit func(doc, model map[string]any)) (*JSONBPE, error) {
	t.Helper()
	doc := spmJSON()
	edit(doc, doc["model"].(map[string]any))
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return ParseJSON(data)
}

// legacySPM is the older conversion: the word marks come from normalizers.
func legacySPM(d, _ map[string]any) {
	d["pre_tokenizer"] = nil
	d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "Prepend", "prepend": "▁"},
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}}
}

func TestSentencePieceBPE(t *testing.T) {
	e := uint32('e' + 3) // "e" is not in the vocab: byte fallback
	tests := []struct {
		name          string
		edit          func(doc, model map[string]any)
		text          string
		encode, encSp []uint32
		decoded       string
	}{
		{"Metaspace", func(_, _ map[string]any) {}, "the th", []uint32{262, e, 262}, nil, "the th"},
		{"Metaspace, leading space", func(_, _ map[string]any) {}, " the", []uint32{262, e}, nil, "the"},
		{"Metaspace, special first", func(_, _ map[string]any) {}, "<s>th </s>t", []uint32{259, '<' + 3, 's' + 3, '>' + 3, 260, 263, 259, '<' + 3, '/' + 3, 's' + 3, '>' + 3, 260},
			[]uint32{1, 260, 263, 259, 2, 260}, "<s>th </s>t"},
		{"legacy", legacySPM, " the", []uint32{259, 262, e}, nil, " the"},
		{"legacy, special first", legacySPM, "<s>th", nil, []uint32{1, 262}, "<s> th"},
		{"Metaspace decoder", func(d, _ map[string]any) {
			d["decoder"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
		}, "the", []uint32{262, e}, nil, "th<0x65>"},
		{"character outside the vocab", func(_, _ map[string]any) {}, "é", []uint32{259, 0xC3 + 3, 0xA9 + 3}, nil, "é"},
	}
	for _, tt := range tests {
		tok, err := parseSPMEdited(t, tt.edit)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		want, encode := tt.encode, tok.Encode
		if want == nil {
			want, encode = tt.encSp, tok.EncodeSpecial
		}
		got, err := encode(tt.text)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: encoding %q = %v, %v; want %v", tt.name, tt.text, got, err, want)
		}
		if tt.encode != nil && tt.encSp != nil {
			if got, err := tok.EncodeSpecial(tt.text); err != nil || !slices.Equal(got, tt.encSp) {
				t.Errorf("%s: EncodeSpecial(%q) = %v, %v; want %v", tt.name, tt.text, got, err, tt.encSp)
			}
			got = tt.encSp
		}
		if back, err := tok.Decode(got); err != nil || back != tt.decoded {
			t.Errorf("%s: Decode(%v) = %q, %v; want %q", tt.name, got, back, err, tt.decoded)
		}
	}
	// A cut character decodes to one U+FFFD per byte, as in tokenizers.
	tok, _ := parseSPMEdited(t, func(_, _ map[string]any) {})
	if s, err := tok.Decode([]uint32{0xC3 + 3, 260}); err != nil || s != "\ufffdt" {
		t.Errorf("Decode of a cut character = %q, %v", s, err)
	}
}

func TestSentencePieceRefusesUnsupported(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(doc, model map[string]any)
		wantErr string
	}{
		{"prepend_scheme always", func(d, _ map[string]any) { d["pre_tokenizer"].(map[string]any)["prepend_scheme"] = "always" },
			`pre_tokenizer Metaspace prepend_scheme "always" is not supported (only "first")`},
		{"Metaspace split", func(d, _ map[string]any) { d["pre_tokenizer"].(map[string]any)["split"] = true },
			"pre_tokenizer Metaspace with split true is not supported"},
		{"replacement", func(d, _ map[string]any) { d["pre_tokenizer"].(map[string]any)["replacement"] = "_" },
			`pre_tokenizer Metaspace replacement "_" is not supported`},
		{"ByteLevel with byte_fallback", func(d, _ map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "ByteLevel"} },
			`pre_tokenizer type "ByteLevel" is not supported with byte_fallback (only Metaspace)`},
		{"Metaspace without byte_fallback", func(_, m map[string]any) { m["byte_fallback"] = false },
			`pre_tokenizer type "Metaspace" is not supported (only byte-level BPE`},
		{"normalizer and pre_tokenizer", func(d, _ map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} },
			`normalizer type "NFKC" is not supported with a pre_tokenizer in SentencePiece-style BPE (only null)`},
		{"Replace alone", func(d, m map[string]any) {
			legacySPM(d, m)
			n := d["normalizer"].(map[string]any)
			n["normalizers"] = n["normalizers"].([]any)[1:]
		}, `normalizer type "Sequence" is not supported with byte_fallback`},
		{"neither", func(d, _ map[string]any) { d["pre_tokenizer"] = nil }, "pre_tokenizer and normalizer null are not supported with byte_fallback"},
		{"no decoder", func(d, _ map[string]any) { d["decoder"] = nil }, "decoder null is not supported with byte_fallback"},
		{"ByteLevel decoder", func(d, _ map[string]any) { d["decoder"] = map[string]any{"type": "ByteLevel"} },
			`decoder type "ByteLevel" is not supported with byte_fallback`},
		{"Replace regex decoder", func(d, _ map[string]any) {
			d["decoder"].(map[string]any)["decoders"].([]any)[0] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "▁+"}, "content": " "}
		}, "decoder Replace with a regex pattern is not supported"},
		{"Strip of two characters", func(d, _ map[string]any) {
			d["decoder"].(map[string]any)["decoders"].([]any)[3].(map[string]any)["content"] = "  "
		}, `decoder Strip content "  " start 1 stop 0 is not supported`},
		{"ignore_merges", func(_, m map[string]any) { m["ignore_merges"] = true }, "model ignore_merges true is not supported with byte_fallback"},
		{"merge into a word", func(_, m map[string]any) {
			m["vocab"].(map[string]any)["t▁"] = 300
			m["merges"] = append(m["merges"].([]any), []any{"t", "▁"})
		}, `merge 2 ("t", "▁") makes "t▁", with "▁" after other characters, which is not supported`},
	}
	for _, tt := range tests {
		_, err := parseSPMEdited(t, tt.edit)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error = %v, want it to mention %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestEncodeSpecialLongestFirst checks that overlapping special spellings
// match leftmost-longest, as tokenizers matches added tokens.
func TestEncodeSpecialLongestFirst(t *testing.T) {
	tok, err := parseEdited(t, func(d, _ map[string]any) {
		d["added_tokens"] = append(d["added_tokens"].([]any),
			map[string]any{"id": 300, "content": "<a>", "special": true}, map[string]any{"id": 301, "content": "<a><b>", "special": true})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tok.EncodeSpecial("x<a><b><a>t<|endoftext|>")
	if want := []uint32{'x' + 1, 301, 300, 't' + 1, 0}; err != nil || !slices.Equal(got, want) {
		t.Errorf("EncodeSpecial = %v, %v; want %v", got, err, want)
	}
	if got, err := tok.Encode("<a>"); err != nil || slices.Contains(got, 300) {
		t.Errorf("Encode(\"<a>\") = %v, %v; want it as text", got, err)
	}
	if id, ok := tok.SpecialID("<a><b>"); !ok || id != 301 {
		t.Errorf("SpecialID(<a><b>) = %d, %v", id, ok)
	}
	if _, ok := tok.SpecialID("<b>"); ok {
		t.Errorf("SpecialID(<b>) found a token")
	}
	if _, err := tok.EncodeSpecial("<a>\xff"); err == nil {
		t.Errorf("EncodeSpecial accepted invalid UTF-8")
	}
	for text, want := range map[string]string{"plain <b> text": "", "x<a><b>y": "<a><b>", "tail <|endoftext|>": "<|endoftext|>", "": ""} {
		if got := tok.SpecialIn(text); got != want {
			t.Errorf("SpecialIn(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestJSONBPERejectsUnrepresentable(t *testing.T) {
	tok, err := parseEdited(t, func(_, m map[string]any) { delete(m["vocab"].(map[string]any), "x") })
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ text, wantErr string }{
		{"ok \xff bad", "invalid UTF-8 at byte 3"},
		{"\xe2\x82", "invalid UTF-8 at byte 0"},
		{" box", `byte 0x78 in " box" has no token`},
	} {
		if _, err := tok.Encode(tt.text); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Encode(%q) error = %v, want it to mention %q", tt.text, err, tt.wantErr)
		}
	}
	// Id 'x'+1 is unassigned now, and 259 is past the end of the vocabulary.
	for _, ids := range [][]uint32{{'a' + 1, 'x' + 1}, {259}, {65535}, {1 << 20}} {
		if s, err := tok.Decode(ids); err == nil {
			t.Errorf("Decode(%v) = %q, want an error", ids, s)
		}
	}
}

// TestJSONBPEWideVocabulary reads a tokenizer.json of more than 65536
// tokens, whose merges, special token and decoding use ids above 65535 (one
// merge joins two of them), as Llama 3's and Qwen2's do.
func TestJSONBPEWideVocabulary(t *testing.T) {
	// The low 16 bits of "Ġthe"'s id are those of "r" ('r'+1), so merge
	// tables that kept 16 bits of an id would take ("Ġthe", "e") for ("r", "e").
	const the, re, thee, there, imStart = 1<<16 + 'r' + 1, 70000, 150000, 200000, 200001
	tok, err := parseEdited(t, func(d, m map[string]any) {
		v := m["vocab"].(map[string]any)
		for id := 300; id < 70100; id++ {
			if id != the && id != re {
				v[fmt.Sprint("w", id)] = id
			}
		}
		v["Ġthe"], v["re"], v["Ġthee"], v["Ġthere"] = the, re, thee, there
		m["merges"] = append(m["merges"].([]any), []any{"Ġth", "e"}, []any{"r", "e"}, []any{"Ġthe", "e"}, []any{"Ġthe", "re"})
		d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": imStart, "content": "<|im_start|>", "special": true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != imStart+1 {
		t.Fatalf("VocabSize = %d, want %d", tok.VocabSize(), imStart+1)
	}
	got, err := tok.Encode(" there the re thee")
	if want := []uint32{there, the, ' ' + 1, re, thee}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Encode = %v, %v; want %v", got, err, want)
	}
	got, err = tok.EncodeSpecial("<|im_start|> there")
	if want := []uint32{imStart, there}; err != nil || !slices.Equal(got, want) {
		t.Errorf("EncodeSpecial = %v, %v; want %v", got, err, want)
	}
	if id, ok := tok.SpecialID("<|im_start|>"); !ok || id != imStart {
		t.Errorf("SpecialID = %d, %v; want %d", id, ok, imStart)
	}
	text, err := tok.Decode([]uint32{there, the, imStart, 70099, re})
	if want := " there the<|im_start|>w70099re"; err != nil || text != want {
		t.Errorf("Decode = %q, %v; want %q", text, err, want)
	}
	for _, ids := range [][]uint32{{imStart + 1}, {70100}} {
		if s, err := tok.Decode(ids); err == nil {
			t.Errorf("Decode(%v) = %q, want an error", ids, s)
		}
	}
}

func TestJSONBPECloneSharesTables(t *testing.T) {
	tok, err := LoadJSON("testdata/hfjson/legacy.json")
	if err != nil {
		t.Fatal(err)
	}
	text := "Clones encode like the original, from their own cache."
	want, _ := tok.Encode(text)
	c := tok.Clone()
	if got, err := c.Encode(text); err != nil || !slices.Equal(got, want) || c.Name() != tok.Name() {
		t.Fatalf("clone: Encode = %v, %v, name %s; want %v, %s", got, err, c.Name(), want, tok.Name())
	}
	if len(c.cache) == 0 || len(c.cache) != len(tok.cache) {
		t.Fatalf("clone's cache has %d pieces, the original's %d; want separate caches of the same pieces", len(c.cache), len(tok.cache))
	}
}

// FuzzJSONBPERoundTrip checks that decoding gives back any valid UTF-8 text
// (with GPT-2's and Llama 3's splits),
// that invalid UTF-8 is refused, and that text never yields the separator;
// and, with GPT-2's vocabulary, that JSONBPE encodes exactly as GPT2 does.
func FuzzJSONBPERoundTrip(f *testing.F) {
	for _, s := range []string{"Hello  world\n\n", " 's 'S x'll", "a\u0085 b\ufeff c\u00a0 d", "1,000 \t\t2", "日本語 🙂  !!", "\r\n \r\n", "<|endoftext|>", "\x00\x7f"} {
		f.Add(s)
	}
	small, err := LoadJSON("testdata/hfjson/legacy.json")
	if err != nil {
		f.Fatal(err)
	}
	llama, err := LoadJSON("testdata/hfjson/llama3.json")
	if err != nil {
		f.Fatal(err)
	}
	big, err := ParseJSON(gpt2JSON(f))
	if err != nil {
		f.Fatal(err)
	}
	gpt2 := NewGPT2()
	f.Fuzz(func(t *testing.T, text string) {
		want, wantErr := gpt2.Encode(text)
		for _, tok := range []*JSONBPE{small, llama, big} {
			ids, err := tok.Encode(text)
			if !utf8.ValidString(text) {
				if err == nil {
					t.Fatalf("Encode accepted invalid UTF-8 %q", text)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Encode(%q): %v", text, err)
			}
			if slices.Contains(ids, tok.EOT()) {
				t.Fatalf("Encode(%q) = %v contains the separator", text, ids)
			}
			if back, err := tok.Decode(ids); err != nil || back != text {
				t.Fatalf("Decode(Encode(%q)) = %q, %v", text, back, err)
			}
			if tok == big && (wantErr != nil || !slices.Equal(ids, want)) {
				t.Fatalf("Encode(%q) = %v with GPT-2's vocabulary; GPT2 gives %v, %v", text, ids, want, wantErr)
			}
		}
	})
}

// BenchmarkJSONBPEEncode encodes about 1 MB of the default corpus with GPT-2's
// vocabulary read as a tokenizer.json: "cold" with an empty piece cache each
// time, as for a corpus's first documents, "warm" with a full one.
func BenchmarkJSONBPEEncode(b *testing.B) {
	dir, err := corpus.SOTUDir()
	if err != nil {
		b.Skip(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for _, f := range files {
		if sb.Len() >= 1<<20 {
			break
		}
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	text := sb.String()
	tok, err := ParseJSON(gpt2JSON(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				t := tok
				if mode == "cold" {
					t = tok.Clone()
				}
				if _, err := t.Encode(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSplitLlama checks cuts that BPE with the test vocabularies cannot show,
// as tokenizers' pre_tokenize_str gives them for Llama 3's pattern.
func TestSplitLlama(t *testing.T) {
	for text, want := range map[string][]string{
		"'ſup 'Sup":    {"'ſ", "up", " '", "Sup"},
		"x'LL'd":       {"x", "'LL", "'d"},
		"\n\t hello":   {"\n", "\t", " hello"},
		"a  \n  b":     {"a", "  \n", " ", " b"},
		"12345 !!\n\n": {"123", "45", " !!\n\n"},
		"\u00a0x  ":    {"\u00a0x", "  "},
	} {
		var got []string
		for rest := text; rest != ""; {
			n := splitLlama(rest, 3)
			got, rest = append(got, rest[:n]), rest[n:]
		}
		if !slices.Equal(got, want) {
			t.Errorf("split %q = %q, want %q", text, got, want)
		}
	}
}

// Long pieces merge by heap (mergeLong) and short ones by scan (mergeScan):
// both give the same tokens on every tokenizer, for long pieces of text
// without spaces in each of the goldens' scripts.
func TestMergeLongMatchesScan(t *testing.T) {
	files, err := filepath.Glob("testdata/hfjson/*.json")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"internationalization", "ababababab", "aaaaaaa", "-------", "=====", "0000000", "eeee", "llll", "ssss", "0123456789", "Привет", "日本語のテキスト", "🙂🙃", "x\u00e9\u0301"}
	for _, f := range files {
		if filepath.Base(f) == "goldens.json" {
			continue
		}
		tok, err := LoadJSON(f)
		if err != nil {
			continue // the refused layouts' fixtures
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(f))))
		for range 40 {
			var b strings.Builder
			for b.Len() < 300 {
				b.WriteString(texts[rng.IntN(len(texts))])
			}
			ids, err := tok.symbols(b.String())
			if err != nil {
				continue
			}
			scan := tok.mergeScan(slices.Clone(ids))
			if long := tok.mergeLong(slices.Clone(ids)); !slices.Equal(long, scan) {
				t.Fatalf("%s: %q: heap %v, scan %v", f, b.String(), long, scan)
			}
		}
	}
}
