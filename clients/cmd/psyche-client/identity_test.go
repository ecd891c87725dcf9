package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStaticP2PIdentityCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p2p.key")
	out, stderr, code := runCLI(t, nil, "create-static-p2p-identity", path)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "peer id:        12D3KooW") {
		t.Fatalf("create printed no ed25519 peer id:\n%s", out)
	}
	shown, stderr, code := runCLI(t, nil, "show-static-p2p-identity", path)
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, strings.TrimSpace(shown)) {
		t.Fatalf("show printed\n%s\nbut create printed\n%s", shown, out)
	}

	// RFC 8032 test vector 1, through the environment.
	seedHex := "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	shown, stderr, code = runCLI(t, []string{"RAW_IDENTITY_SECRET_KEY=" + seedHex}, "show-static-p2p-identity")
	if code != 0 || !strings.Contains(shown, "public key hex: d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a") {
		t.Fatalf("show from env: exit %d\n%s%s", code, shown, stderr)
	}

	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, make([]byte, 16), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		env  []string
		args []string
	}{
		{"create over an existing identity", nil, []string{"create-static-p2p-identity", path}},
		{"create without a path", nil, []string{"create-static-p2p-identity"}},
		{"show a missing file", nil, []string{"show-static-p2p-identity", filepath.Join(dir, "missing")}},
		{"show a short file", nil, []string{"show-static-p2p-identity", short}},
		{"show with nothing", []string{"RAW_IDENTITY_SECRET_KEY="}, []string{"show-static-p2p-identity"}},
		{"show bad env", []string{"RAW_IDENTITY_SECRET_KEY=xyz"}, []string{"show-static-p2p-identity"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.env, tc.args...)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
			}
		})
	}
}
