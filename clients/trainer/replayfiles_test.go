package trainer

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// WriteReplayFiles keeps a step's payload and replay state under the names
// psyche-client verify documents, making the directory; without a state it
// writes the payload only.
func TestWriteReplayFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	payload, state := []byte("PD\x02\x01payload"), []byte("state before")
	if err := WriteReplayFiles(dir, "run-1", 7, payload, state); err != nil {
		t.Fatal(err)
	}
	p, s := ReplayFileNames("run-1", 7)
	if p != "run-1-step7.demo" || s != "run-1-step7.state" {
		t.Fatalf("names %q %q", p, s)
	}
	for name, want := range map[string][]byte{p: payload, s: state} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if err := WriteReplayFiles(dir, "run-1", 8, payload, nil); err != nil {
		t.Fatal(err)
	}
	p, s = ReplayFileNames("run-1", 8)
	if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, s)); !os.IsNotExist(err) {
		t.Errorf("a state file written without a state: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want 3 (no temporary files left)", len(entries))
	}
	// A directory that cannot be made is an error.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteReplayFiles(filepath.Join(file, "sub"), "r", 1, payload, state); err == nil {
		t.Error("no error for a directory under a file")
	}
}

// PruneReplayFiles keeps the files of a run's newest steps, all three kinds,
// and removes its older steps' files; other runs' files and other files stay.
func TestPruneReplayFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []uint32{1, 2, 3, 5, 9, 10} {
		if err := WriteReplayFiles(dir, "run", step, []byte("payload"), []byte("state")); err != nil {
			t.Fatal(err)
		}
		write(ReplayModelName("run", step))
	}
	write(ReplayModelName("run-2", 1)) // another run, whose id extends this one's
	write("run-step01.demo")           // not a name WriteReplayFiles gives
	write("notes.txt")
	if err := PruneReplayFiles(dir, "run", 3); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"notes.txt", "run-2-step1.model.safetensors",
		"run-step01.demo",
		"run-step10.demo", "run-step10.model.safetensors", "run-step10.state",
		"run-step5.demo", "run-step5.model.safetensors", "run-step5.state",
		"run-step9.demo", "run-step9.model.safetensors", "run-step9.state"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %q\nwant %q", left, want)
	}
	// Fewer steps than kept: nothing goes.
	if err := PruneReplayFiles(dir, "run", 8); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(want) {
		t.Errorf("%d files after keeping 8 of 3 steps, want %d", len(entries), len(want))
	}
	if err := PruneReplayFiles(dir, "run", 0); err == nil {
		t.Error("keeping 0 steps is not an error")
	}
	if err := PruneReplayFiles(filepath.Join(dir, "missing"), "run", 1); err == nil {
		t.Error("no error for a missing directory")
	}
}
