package trainer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The numeric contract holds across compiler targets: cmd/trainer-replay
// built for x86-64 (SSE2) and for x86-64-v3 (AVX2, FMA available to the
// compiler) prints the same digests, also with a different thread count
// and kernel ISA.
func TestDigestsAcrossBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the replay program twice")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	probe := newTrainer(t, tinyConfig, 1)
	if level, _ := probe.SetISA(ISAAVX2); level < ISAAVX2 {
		t.Skip("CPU cannot run x86-64-v3 code")
	}
	dir := t.TempDir()
	run := func(march string, args ...string) string {
		bin := filepath.Join(dir, "replay-"+march)
		if _, err := os.Stat(bin); err != nil {
			cmd := exec.Command(gobin, "build", "-o", bin, "./cmd/trainer-replay")
			cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -march="+march)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build for %s: %v\n%s", march, err, out)
			}
		}
		var out bytes.Buffer
		cmd := exec.Command(bin, append([]string{"-steps", "2", "-batch", "2", "-seq", "32"}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("replay (%s %v): %v\n%s", march, args, err, out.String())
		}
		// Drop the first line (it names the kernel level in use).
		_, steps, _ := strings.Cut(out.String(), "\n")
		return steps
	}
	for _, opt := range []string{"demo", "adamw"} {
		base := run("x86-64", "-optimizer", opt)
		if strings.Count(base, "digest=") != 2 {
			t.Fatalf("unexpected replay output:\n%s", base)
		}
		for _, v := range []struct {
			march string
			args  []string
		}{
			{"x86-64-v3", nil},
			{"x86-64-v3", []string{"-threads", "1", "-isa", "1"}},
			{"x86-64", []string{"-threads", "2", "-isa", "2"}},
		} {
			if got := run(v.march, append([]string{"-optimizer", opt}, v.args...)...); got != base {
				t.Errorf("%s %v: digests differ from the x86-64 build:\n%s\nvs\n%s", v.march, v.args, got, base)
			}
		}
	}
}
