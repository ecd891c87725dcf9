package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

// jsonTokenizer is a small byte-level BPE tokenizer.json of the tokenizer
// package's goldens.
var jsonTokenizer = filepath.Join("..", "tokenizer", "testdata", "hfjson", "legacy.json")

func writeCorpus(t *testing.T, docs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range docs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readAll decodes every sequence of a dataset, in order, back into text.
func readAll(t *testing.T, dir string, tok tokenizer.Tokenizer) string {
	t.Helper()
	d, err := shard.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var sb strings.Builder
	seq := make([]uint32, d.Manifest.SeqLen+1)
	for i := range d.Manifest.NumSequences {
		loc, _ := d.Manifest.Locate(i)
		chunk, err := d.ReadChunk(loc.Shard, loc.Chunk, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := shard.DecodeSequence(seq, chunk[loc.Skip:loc.Skip+d.Manifest.SequenceBytes()], d.Manifest.VocabSize, d.Manifest.SeqLen); err != nil {
			t.Fatal(err)
		}
		s, err := tok.Decode(seq)
		if err != nil {
			t.Fatal(err)
		}
		sb.WriteString(s)
	}
	return sb.String()
}

func TestRunPacksTheCorpusLosslessly(t *testing.T) {
	docs := map[string]string{
		"1999_a.txt":   strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40),
		"2000_b.jsonl": `{"text": "Line one of the second file."}` + "\n" + `{"text": "naïve café 東京 🙂 — <|endoftext|> stays text."}` + "\n",
		"2001_c.txt":   strings.Repeat("Held out for validation. ", 30),
	}
	in := writeCorpus(t, docs)
	for _, tc := range []struct {
		tokenizer string
		eot       string
	}{{tokenizer.ByteName, "\x00"}, {tokenizer.GPT2Name, "<|endoftext|>"}, {jsonTokenizer, "<|endoftext|>"}} {
		t.Run(filepath.Base(tc.tokenizer), func(t *testing.T) {
			train, _ := corpus.NewSplit("train", 2000)
			out := filepath.Join(t.TempDir(), "train")
			res, err := Run(context.Background(), Options{Input: in, Split: train, Tokenizer: tc.tokenizer, SeqLen: 16, ChunkBytes: 100, ShardBytes: 400, Out: out})
			if err != nil {
				t.Fatal(err)
			}
			if res.Documents != 3 || len(res.Manifest.Shards) < 2 || res.Manifest.SeqsPerChunk != 2 {
				t.Fatalf("%d documents, %d shards, %d sequences per chunk; want 3, several, 2", res.Documents, len(res.Manifest.Shards), res.Manifest.SeqsPerChunk)
			}
			stream := docs["1999_a.txt"] + tc.eot + "Line one of the second file." + tc.eot + "naïve café 東京 🙂 — <|endoftext|> stays text." + tc.eot
			tok, err := tokenizer.Open(tc.tokenizer)
			if err != nil || res.Manifest.Tokenizer != tok.Name() {
				t.Fatalf("manifest tokenizer %q, want %q (%v)", res.Manifest.Tokenizer, tok.Name(), err)
			}
			got := readAll(t, out, tok)
			// The dropped tail is the only difference, and it is shorter than a sequence.
			if !strings.HasPrefix(stream, got) || res.DroppedTokens > 16 || uint64(res.DroppedTokens)+res.Manifest.NumSequences*17 != res.Tokens {
				t.Fatalf("decoded dataset is not the corpus stream minus a short tail:\n got %q\nwant %q (dropped %d)", got, stream, res.DroppedTokens)
			}
		})
	}
}

// TestRunWritesWideTokens prepares a corpus with a tokenizer.json whose ids
// all lie above 65535 (jsonTokenizer's, moved up by 100000): its dataset
// stores 4-byte tokens and decodes back to the corpus.
func TestRunWritesWideTokens(t *testing.T) {
	raw, err := os.ReadFile(jsonTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	vocab := doc["model"].(map[string]any)["vocab"].(map[string]any)
	for tok, id := range vocab {
		vocab[tok] = id.(float64) + 100000
	}
	for _, a := range doc["added_tokens"].([]any) {
		a.(map[string]any)["id"] = a.(map[string]any)["id"].(float64) + 100000
	}
	wide, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "wide.json")
	if err := os.WriteFile(path, wide, 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	all, _ := corpus.NewSplit("all", 2000)
	out := filepath.Join(t.TempDir(), "wide")
	res, err := Run(context.Background(), Options{Input: writeCorpus(t, map[string]string{"a.txt": text}), Split: all, Tokenizer: path, SeqLen: 16, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.VocabSize <= 1<<16 || m.EOT < 100000 || m.Shards[0].Size != shard.HeaderSize+int64(m.Shards[0].NumSequences)*17*4 {
		t.Fatalf("manifest %+v: want a vocabulary past 65536 and 4-byte tokens", m)
	}
	tok, err := tokenizer.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, out, tok); !strings.HasPrefix(text+"<|endoftext|>", got) || len(got) < len(text)/2 {
		t.Fatalf("decoded dataset %q is not the corpus", got)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	dir, err := corpus.SOTUDir()
	if err != nil {
		t.Fatal(err)
	}
	validation, _ := corpus.NewSplit("validation", corpus.DefaultLastTrainYear)
	var roots []string
	for _, workers := range []int{1, 3} {
		res, err := Run(context.Background(), Options{Input: dir, Split: validation, Tokenizer: tokenizer.GPT2Name, SeqLen: 256, Out: filepath.Join(t.TempDir(), "v"), Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, res.Manifest.Root)
	}
	if roots[0] != roots[1] {
		t.Fatalf("roots differ between runs: %v", roots)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	all, _ := corpus.NewSplit("all", 2000)
	good := writeCorpus(t, map[string]string{"a.txt": strings.Repeat("text ", 100)})
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"unknown tokenizer", Options{Input: good, Split: all, Tokenizer: "bpe", SeqLen: 8}, "unknown tokenizer"},
		{"zero seq len", Options{Input: good, Split: all, Tokenizer: "byte"}, "sequence length 0"},
		{"invalid utf-8", Options{Input: writeCorpus(t, map[string]string{"a.txt": "ok", "b.txt": "bad \xff"}), Split: all, Tokenizer: "gpt2", SeqLen: 1}, "b.txt: gpt2 tokenizer: invalid UTF-8"},
		{"NUL for byte", Options{Input: writeCorpus(t, map[string]string{"a.txt": "x\x00y"}), Split: all, Tokenizer: "byte", SeqLen: 1}, "a.txt: byte tokenizer: NUL byte"},
		{"too small", Options{Input: good, Split: all, Tokenizer: "byte", SeqLen: 4096}, "too few for one sequence"},
		{"bad jsonl", Options{Input: writeCorpus(t, map[string]string{"a.jsonl": "{"}), Split: all, Tokenizer: "byte", SeqLen: 1}, "a.jsonl:1: not a JSON object"},
		{"missing input", Options{Input: filepath.Join(good, "nope"), Split: all, Tokenizer: "byte", SeqLen: 8}, "reading corpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Out = filepath.Join(t.TempDir(), "out")
			_, err := Run(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			var inErr *corpus.InputError
			if isDocumentProblem := strings.Contains(tt.wantErr, ".txt:") || strings.Contains(tt.wantErr, "jsonl:") || strings.Contains(tt.name, "utf-8"); isDocumentProblem != errors.As(err, &inErr) {
				t.Errorf("error %v: InputError %v, want %v", err, !isDocumentProblem, isDocumentProblem)
			}
			if _, err := os.Stat(tt.opts.Out); !os.IsNotExist(err) {
				t.Fatalf("failed run left %s behind", tt.opts.Out)
			}
			if entries, _ := os.ReadDir(filepath.Dir(tt.opts.Out)); len(entries) != 0 {
				t.Fatalf("failed run left %d temporary entries", len(entries))
			}
		})
	}
}
