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
	// One item, the one --eval-seed 42 picks (the second), under both names
	// of the flag.
	for _, flag := range []string{"--eval-task-max-docs", "--limit"} {
		out, stderr, code := runCLI(t, nil, "eval", "--model", model, "--tasks", task, flag, "1", "--eval-seed", "42")
		if code != 0 || !strings.Contains(out, "over 1 items (chance 0.3333)") {
			t.Errorf("%s 1: exit %d: %s%s", flag, code, out, stderr)
		}
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
		{"eval", "--model", model, "--tasks", task, "--eval-task-max-docs", "-1"},
		{"eval", "--model", filepath.Join(dir, "missing"), "--tasks", task},
	} {
		_, stderr, code := runCLI(t, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line", args, code, stderr)
		}
	}
}

// eval-convert writes a set's rows as a task file that eval reads; a bad
// row, format or file exits 2 with one line naming it, and writes nothing.
func TestEvalConvert(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "piqa.jsonl"), filepath.Join(dir, "task.jsonl")
	rows := `{"goal": "Open a jar.", "sol1": "Twist the lid.", "sol2": "Paint the lid.", "label": 0}` + "\n" +
		`{"goal": "Dry a towel.", "sol1": "Hang it up.", "sol2": "Bury it.", "label": 0}` + "\n"
	if err := os.WriteFile(in, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, nil, "eval-convert", "--format", "piqa", "--in", in, "--out", out)
	if code != 0 || !strings.Contains(stdout, "2 piqa items") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, nil, "eval", "--model", llamaModelFile(t), "--tasks", out)
	if code != 0 || !strings.Contains(stdout, "over 2 items (chance 0.5000)") {
		t.Fatalf("eval of the converted file: exit %d: %s%s", code, stdout, stderr)
	}
	badRows := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(badRows, []byte(rows+`{"goal": "g", "sol1": "a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval-convert", "--format", "piqa", "--in", badRows, "--out", fresh}, `bad.jsonl:3: piqa: no "sol2"`},
		{[]string{"eval-convert", "--format", "squad", "--in", in, "--out", fresh}, `unknown format "squad"`},
		{[]string{"eval-convert", "--format", "piqa", "--in", filepath.Join(dir, "missing.jsonl"), "--out", fresh}, "missing.jsonl"},
		{[]string{"eval-convert", "--format", "piqa", "--in", in}, "--out"},
	} {
		_, stderr, code := runCLI(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(fresh); err == nil {
			t.Fatalf("%v wrote %s", tc.args, fresh)
		}
	}
}
