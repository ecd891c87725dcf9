package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// model import reads transformers' files into a model file, model export
// writes it back, and both give the same logits as the original; bad
// arguments and unusable directories exit 2 with one line.
func TestModelImportExport(t *testing.T) {
	src := filepath.Join("..", "..", "trainer", "testdata", "hf", "llama")
	dir := t.TempDir()
	file, out := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "hf")
	stdout, stderr, code := runCLI(t, nil, "model", "import", src, file)
	if code != 0 || !strings.Contains(stdout, "llama, 2 layers") {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, stderr, code = runCLI(t, nil, "model", "export", file, out); code != 0 || !strings.Contains(stdout, "LlamaForCausalLM") {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	tok := []int32{1, 5, 9, 33, 2, 95}
	logits := func(tr *trainer.Trainer) []float32 {
		t.Helper()
		defer tr.Close()
		l, err := tr.Logits(context.Background(), tok, len(tok))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, err := trainer.ImportHF(src, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := trainer.ImportHF(out, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logits(a), logits(b)) {
		t.Error("import then export changed the model's logits")
	}
	for _, args := range [][]string{
		{"model", "import", src},
		{"model", "export", file},
		{"model", "import", dir, filepath.Join(dir, "x.safetensors")}, // no config.json
		{"model", "export", filepath.Join(dir, "missing.safetensors"), out},
	} {
		_, stderr, code := runCLI(t, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line", args, code, stderr)
		}
	}
}
