package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchRuns runs the program on a small scale: every figure is printed.
func TestBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs benchmarks")
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-steps", "1000", "-requests", "5", "-time", "20ms"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RecordStep ", "RecordStep, reader snapshotting", "Snapshot (full histories", "TUI frame 80x24", "GET /metrics", "GET /status", "Recorder memory"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q figure:\n%s", want, out.String())
		}
	}
	if err := run(context.Background(), []string{"-steps", "0"}, &out); err == nil {
		t.Error("accepted -steps 0")
	}
}
