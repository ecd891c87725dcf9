package build

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testConfig builds testdata's workspace into a temporary deploy directory,
// sharing programs/target's cargo cache (core and compiler_builtins take ~30 s
// to build once per compiler).
func testConfig(t *testing.T, pkg string) Config {
	t.Helper()
	key, err := rustcKey(context.Background(), "/usr/bin/rustc")
	if err != nil {
		t.Fatalf("Debian's rustc-web is needed (scripts/setup.sh installs it): %v", err)
	}
	out := t.TempDir()
	return Config{
		Workspace:     "testdata",
		Packages:      []string{pkg},
		TargetDir:     filepath.Join("..", "..", "target", "sbpf-"+key),
		DeployDir:     filepath.Join(out, "deploy"),
		TestDeployDir: filepath.Join(out, "test-deploy"),
		Stderr:        io.Discard,
	}
}

func TestBuildIsReproducible(t *testing.T) {
	ctx := context.Background()
	var first []byte
	for i := range 2 {
		cfg := testConfig(t, "okprog")
		progs, err := Build(ctx, cfg)
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		if len(progs) != 1 || !progs[0].Test || progs[0].Name != "okprog" {
			t.Fatalf("built %+v, want the okprog test program", progs)
		}
		want := filepath.Join(cfg.TestDeployDir, "okprog.so")
		if progs[0].Path != want {
			t.Fatalf("written to %s, want %s", progs[0].Path, want)
		}
		so, err := os.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(so, []byte("\x7fELF")) || len(progs[0].Syscalls) != 1 || progs[0].Syscalls[0] != "sol_log_" {
			t.Fatalf("unexpected output: %d bytes, syscalls %v", len(so), progs[0].Syscalls)
		}
		if i == 0 {
			first = so
		} else if !bytes.Equal(first, so) {
			t.Fatal("two builds of the same source differ")
		}
	}
}

func TestBuildRejectsOutsideSubset(t *testing.T) {
	for _, tc := range []struct {
		pkg  string
		want []string
	}{
		{"sixargs", []string{"sixargs::mix_six", "more than 5 arguments"}},
		{"floats", []string{"floats::scale_by_ratio", "floating point"}},
		{"u128mul", []string{"u128mul::wide_product", "u128"}},
		{"staticmut", []string{"staticmut::INVOCATIONS", "mutable globals"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			cfg := testConfig(t, tc.pkg)
			_, err := Build(context.Background(), cfg)
			if err == nil {
				t.Fatal("build succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(filepath.Join(cfg.TestDeployDir, tc.pkg+".so")); !os.IsNotExist(err) {
				t.Errorf("a failed build left %s.so behind", tc.pkg)
			}
		})
	}
}

func TestBuildUnknownPackage(t *testing.T) {
	cfg := testConfig(t, "nosuchprogram")
	if _, err := Build(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "nosuchprogram") {
		t.Fatalf("error = %v, want one naming nosuchprogram", err)
	}
}

func TestBitcodeMembersRejectsGarbage(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":     nil,
		"not ar":    []byte("hello"),
		"truncated": []byte("!<arch>\nlib.rmeta/      0           0     0     644     100       `\n"),
		"native":    []byte("!<arch>\nx.o/            0           0     0     644     4         `\n\x7fELF"),
	} {
		if _, err := bitcodeMembers(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOneBadProgramDoesNotBlockOthers(t *testing.T) {
	cfg := testConfig(t, "okprog")
	cfg.Packages = append(cfg.Packages, "floats")
	progs, err := Build(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "program floats") || strings.Contains(err.Error(), "program okprog") {
		t.Fatalf("error = %v, want one about floats only", err)
	}
	if len(progs) != 1 || progs[0].Name != "okprog" {
		t.Fatalf("built %+v, want okprog", progs)
	}
	if _, err := os.Stat(filepath.Join(cfg.TestDeployDir, "okprog.so")); err != nil {
		t.Fatalf("okprog.so not written: %v", err)
	}
}

func TestBuildNeedsRustSrc(t *testing.T) {
	// The rustup compiler on PATH (if any) is not the one rust-web-src matches;
	// a compiler whose sysroot lacks library sources must be refused with the fix.
	fake := filepath.Join(t.TempDir(), "rustc")
	sysroot := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = --print ]; then echo " + sysroot + "; else echo 'release: 0.0.0'; fi\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "okprog")
	cfg.Rustc = fake
	if _, err := Build(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "rust-web-src") {
		t.Fatalf("err = %v, want advice to install rust-web-src", err)
	}
}
