package main

import (
	"os"
	"testing"
)

// docs/cli.md is the client reference the README links to; it must be what
// the binary prints, so it can never describe flags that do not exist.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want, errOut, code := runCLI(t, []string{"TMPDIR=/tmp"}, "print-all-help")
	if code != 0 {
		t.Fatalf("print-all-help: exit %d: %s", code, errOut)
	}
	have, err := os.ReadFile("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != want {
		t.Fatal("docs/cli.md is stale; regenerate it: TMPDIR=/tmp go run ./clients/cmd/psyche-client print-all-help > docs/cli.md")
	}
}
