package identity

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id")
	created, err := Create(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != SeedSize || info.Mode().Perm() != 0o600 {
		t.Errorf("identity file is %d bytes, mode %v; want %d bytes, 0600", info.Size(), info.Mode().Perm(), SeedSize)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !created.Equals(loaded) {
		t.Fatal("loaded key differs from the created one")
	}
	// Never overwrite: the registered identity would be lost.
	before, _ := os.ReadFile(path)
	if _, err := Create(path); !errors.Is(err, ErrBadIdentity) {
		t.Fatalf("second create: %v, want ErrBadIdentity", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("second create changed the file")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("create left %d files behind, want 1", len(entries))
	}
}

func TestSeedDeterminesPeerID(t *testing.T) {
	// RFC 8032 test vector 1: this seed has this public key.
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	wantPub, _ := hex.DecodeString("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
	key, err := FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKey(key)
	if err != nil || !bytes.Equal(pub, wantPub) {
		t.Fatalf("public key %x, %v; want %x", pub, err, wantPub)
	}
	id, err := PeerIDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if !id.MatchesPrivateKey(key) {
		t.Fatal("peer id from the public key does not match the private key")
	}
	back, err := PublicKeyFromPeerID(id)
	if err != nil || !bytes.Equal(back, pub) {
		t.Fatalf("public key from peer id: %x, %v", back, err)
	}
}

func TestBadIdentityInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
	}{
		{"missing", filepath.Join(dir, "nope")},
		{"directory", dir},
		{"short", write("short", make([]byte, 31))},
		{"long", write("long", make([]byte, 33))},
		{"hex text", write("hex", []byte("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load(tc.path); !errors.Is(err, ErrBadIdentity) {
				t.Errorf("load: %v, want ErrBadIdentity", err)
			}
		})
	}
	if _, err := PeerIDFromPublicKey(make([]byte, 31)); !errors.Is(err, ErrBadIdentity) {
		t.Errorf("short public key: %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvSecretKey, "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60\n")
	key, ok, err := FromEnv()
	if err != nil || !ok || key == nil {
		t.Fatalf("from env: %v, %v", ok, err)
	}
	t.Setenv(EnvSecretKey, "zz")
	if _, ok, err := FromEnv(); !ok || !errors.Is(err, ErrBadIdentity) {
		t.Fatalf("bad env: %v, %v", ok, err)
	}
}
