package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// eval prints acc and acc_norm per task; unusable tasks, models and flags
// exit 2 with one line.
func TestEval(t *testing.T) {
	dir := t.TempDir()
	model := llamaModelFile(t)
	task := filepath.Join(dir, "t.jsonl")
	items := `{"context":"The President","choices":[" said"," xqz"],"gold":0}` + "\n" +
		`{"context":"One, two,","choices":[" three"," seven"," blue"],"gold":0}` + "\n"
	if err := os.WriteFile(task, []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, nil, "eval", "--model", model, "--tasks", task)
	if code != 0 || !strings.Contains(out, "acc ") || !strings.Contains(out, "over 2 items (chance 0.4167)") {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"eval", "--model", model},
		{"eval", "--tasks", task},
		{"eval", "--model", model, "--tasks", bad},
		{"eval", "--model", model, "--tasks", "builtin:nope"},
		{"eval", "--model", model, "--tasks", task, "--limit", "-1"},
		{"eval", "--model", filepath.Join(dir, "missing"), "--tasks", task},
	} {
		_, stderr, code := runCLI(t, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line", args, code, stderr)
		}
	}
}
