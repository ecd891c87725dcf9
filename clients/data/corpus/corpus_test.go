package corpus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func collect(t *testing.T, root string, split Split) ([]Document, error) {
	t.Helper()
	var docs []Document
	err := Walk(context.Background(), root, split, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

func TestDefaultCorpusSplitsByYear(t *testing.T) {
	dir, err := SOTUDir()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	bytes := map[string]int{}
	for _, name := range []string{"all", "train", "validation"} {
		split, err := NewSplit(name, DefaultLastTrainYear)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := collect(t, dir, split)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		counts[name] = len(docs)
		for _, d := range docs {
			bytes[name] += len(d.Text)
			if y := leadingYear(d.Name); name == "validation" && y <= 2000 || name == "train" && y > 2000 {
				t.Errorf("%s split holds %s", name, d.Name)
			}
		}
	}
	// The package has 233 addresses, 10.8 MB; 22 are from 2001 on.
	if counts["all"] != 233 || counts["train"]+counts["validation"] != 233 || counts["validation"] < 20 {
		t.Errorf("documents per split %v, want 233 in all, split between train and ~22 validation", counts)
	}
	if bytes["all"] < 10_000_000 {
		t.Errorf("the corpus has %d bytes, want about 10.8 MB", bytes["all"])
	}
}

func TestWalkReadsTextAndJSONLInOrder(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.txt", "second")
	write("a.jsonl", `{"text": "first"}`+"\n\n"+`{"text": "", "id": 3}`+"\n"+`{"text": "also first", "meta": {}}`+"\n")
	write("c/d.txt", "third")
	write("c/e.jsonl", `{"text": "no newline at the end"}`)
	write("empty.txt", "")
	write("notes.md", "ignored")
	all, _ := NewSplit("all", DefaultLastTrainYear)
	docs, err := collect(t, root, all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Name+"="+d.Text)
	}
	want := "a.jsonl:1=first a.jsonl:4=also first b.txt=second c/d.txt=third c/e.jsonl:1=no newline at the end"
	if strings.Join(got, " ") != want {
		t.Fatalf("documents %q, want %q", strings.Join(got, " "), want)
	}
}

func TestWalkRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, file, content, split, wantErr string
	}{
		{"bad json", "x.jsonl", "{\"text\": \"ok\"}\n{oops\n", "all", "x.jsonl:2: not a JSON object"},
		{"no text field", "x.jsonl", `{"body": "x"}`, "all", `x.jsonl:1: the object has no "text" string`},
		{"text not a string", "x.jsonl", `{"text": 5}`, "all", "x.jsonl:1: not a JSON object"},
		{"no year for a year split", "speech.txt", "x", "train", "does not start with a year"},
		{"empty split", "1999_x.txt", "x", "validation", `no .txt or .jsonl documents`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, tt.file), []byte(tt.content), 0o644)
			split, err := NewSplit(tt.split, DefaultLastTrainYear)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := collect(t, root, split); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := NewSplit("test", 2000); err == nil {
		t.Error("unknown split name accepted")
	}
	if _, err := collect(t, filepath.Join(t.TempDir(), "missing"), Split{"all", func(int) (bool, error) { return true, nil }}); err == nil {
		t.Error("missing corpus directory accepted")
	}
}

func TestLeadingYear(t *testing.T) {
	for name, want := range map[string]int{"1790_george_washington_n.txt": 1790, "2021_x.jsonl": 2021, "abc.txt": -1, "12345.txt": -1, "199.txt": -1, "+199x": -1, "2000.txt": 2000} {
		if got := leadingYear(name); got != want {
			t.Errorf("leadingYear(%q) = %d, want %d", name, got, want)
		}
	}
}
