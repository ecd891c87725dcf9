package wallet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	key := solana.NewWallet().PrivateKey
	path := filepath.Join(t.TempDir(), "sub", "id.json")
	if err := Save(path, key, false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.PublicKey().Equals(key.PublicKey()) || string(got) != string(key) {
		t.Fatal("loaded key differs from saved key")
	}
	// solana-go's own reader agrees on the format.
	theirs, err := solana.PrivateKeyFromSolanaKeygenFile(path)
	if err != nil || string(theirs) != string(key) {
		t.Fatalf("solana-go reads %v, %v", theirs, err)
	}
}

func TestSaveRefusesOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id.json")
	first := solana.NewWallet().PrivateKey
	if err := Save(path, first, false); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, solana.NewWallet().PrivateKey, false); err == nil {
		t.Fatal("second Save without overwrite succeeded")
	}
	got, err := Load(path)
	if err != nil || string(got) != string(first) {
		t.Fatal("refused overwrite changed the file")
	}
	if err := Save(path, solana.NewWallet().PrivateKey, true); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	good := solana.NewWallet().PrivateKey
	tampered := append(solana.PrivateKey(nil), good...)
	tampered[40] ^= 1
	cases := []struct {
		name, body, want string
	}{
		{"not json", "hello", "not a JSON array"},
		{"object", `{"a":1}`, "not a JSON array"},
		{"short", "[1,2,3]", "holds 3 bytes"},
		{"out of range", "[" + strings.Repeat("1,", 63) + "256]", "not in 0..255"},
		{"mismatched public key", string(Marshal(tampered)), "does not match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.body), "k.json")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestLoadMissingFileSaysHowToCreate(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if err == nil || !strings.Contains(err.Error(), "keygen") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func TestResolveOrder(t *testing.T) {
	t.Setenv(EnvVar, "/from/env.json")
	if p, _ := Resolve("/from/flag.json"); p != "/from/flag.json" {
		t.Errorf("flag not preferred: %s", p)
	}
	if p, _ := Resolve(""); p != "/from/env.json" {
		t.Errorf("env not used: %s", p)
	}
	t.Setenv(EnvVar, "")
	t.Setenv("HOME", "/home/x")
	if p, _ := Resolve(""); p != "/home/x/.config/solana/id.json" {
		t.Errorf("default = %s", p)
	}
}

func TestCheckPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id.json")
	if err := Save(path, solana.NewWallet().PrivateKey, false); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(path); err != nil {
		t.Fatalf("0600: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o660, 0o604, 0o601, 0o700 | 0o010} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivate(path); !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want ErrInsecure saying chmod 600", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(path); err != nil {
		t.Errorf("0400: %v", err)
	}
	if err := CheckPrivate(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
