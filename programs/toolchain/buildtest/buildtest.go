// Package buildtest builds programs of the repository's programs/ workspace
// from Go tests, so a test deploys exactly the code in the tree.
package buildtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/psyche-go/psyche/programs/toolchain/build"
)

// Workspace is the programs/ directory of this checkout.
func Workspace() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Program builds the program crate pkg (e.g. "psyche-conformance") and returns
// its .so. The cargo cache in programs/target is shared with
// scripts/build-programs.sh, so this is quick after a full build.
func Program(t testing.TB, pkg string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := t.TempDir()
	progs, err := build.Build(ctx, build.Config{
		Workspace:     Workspace(),
		Packages:      []string{pkg},
		DeployDir:     out,
		TestDeployDir: out,
	})
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	if len(progs) != 1 {
		t.Fatalf("build %s produced %d programs", pkg, len(progs))
	}
	so, err := os.ReadFile(progs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	return so
}
