package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// sample streams text after the prompt; the same seed gives the same text,
// and bad flags exit 2 with one line.
func TestSample(t *testing.T) {
	model := llamaModelFile(t)
	args := []string{"sample", "--model", model, "--prompt", "Hello", "--max-tokens", "20", "--seed", "9"}
	a, stderr, code := runCLI(t, nil, args...)
	if code != 0 || !strings.HasPrefix(a, "Hello") || len(a) < len("Hello")+5 {
		t.Fatalf("exit %d: %q %s", code, a, stderr)
	}
	b, _, _ := runCLI(t, nil, args...)
	c, _, _ := runCLI(t, nil, append(slices.Clone(args[:len(args)-1]), "10")...)
	if a != b {
		t.Errorf("the same seed gave %q and %q", a, b)
	}
	if a == c {
		t.Errorf("seeds 9 and 10 gave the same text %q", a)
	}
	// The same model as a Hugging Face directory samples the same text.
	hf := filepath.Join(t.TempDir(), "hf")
	if _, stderr, code := runCLI(t, nil, "model", "export", model, hf); code != 0 {
		t.Fatalf("model export: exit %d: %s", code, stderr)
	}
	if d, stderr, code := runCLI(t, nil, append([]string{"sample", "--model", hf}, args[3:]...)...); code != 0 || d != a {
		t.Errorf("from the Hugging Face directory: exit %d, %q (%s); want %q", code, d, stderr, a)
	}
	for _, bad := range [][]string{
		{"sample"},
		{"sample", "--model", model, "--run-id", "r"},
		{"sample", "--model", model, "extra"},
		{"sample", "--model", model, "--prompt", ""},
		{"sample", "--model", model, "--tokenizer", "gpt2"},
		{"sample", "--model", model, "--temperature", "-1"},
		{"sample", "--model", filepath.Join(t.TempDir(), "missing")},
	} {
		_, stderr, code := runCLI(t, nil, bad...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line", bad, code, stderr)
		}
	}
}

// llamaModelFile writes a freshly initialised llama-light model file.
func llamaModelFile(t *testing.T) string {
	t.Helper()
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	model := filepath.Join(t.TempDir(), "m.safetensors")
	if err := tr.SaveModel(model, nil); err != nil {
		t.Fatal(err)
	}
	return model
}
