// Package bindings holds the Go code that anchor-go generates from idl/; this
// test keeps the committed code identical to a fresh generation.
package bindings

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestCommittedBindingsMatchIDL(t *testing.T) {
	fresh := t.TempDir()
	cmd := exec.Command("bash", "../../scripts/gen-bindings.sh", fresh)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-bindings: %v\n%s", err, out)
	}
	committed, _ := filepath.Glob("*/*.go")
	generated, _ := filepath.Glob(filepath.Join(fresh, "*", "*.go"))
	if len(generated) == 0 {
		t.Fatal("generation produced no files")
	}
	want := map[string]bool{}
	for _, g := range generated {
		rel, _ := filepath.Rel(fresh, g)
		want[rel] = true
		have, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s is generated but not committed; run scripts/gen-bindings.sh", rel)
			continue
		}
		gen, _ := os.ReadFile(g)
		if !bytes.Equal(have, gen) {
			t.Errorf("%s differs from a fresh generation; run scripts/gen-bindings.sh and commit", rel)
		}
	}
	for _, c := range committed {
		if !want[c] {
			t.Errorf("%s is committed but not generated from any IDL; remove it", c)
		}
	}
}
