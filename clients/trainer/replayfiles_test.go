package trainer

import (
	"bytes"
	"os"
	"path/filepath"
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
