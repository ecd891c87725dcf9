package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/wallet"
)

// TestKeysSync runs `keys sync --new` in a scratch checkout: fresh ids land in
// the IDL, Anchor.toml and the program sources, and the bindings script runs.
func TestKeysSync(t *testing.T) {
	root := t.TempDir()
	old := solana.NewWallet().PrivateKey
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := old.PublicKey().String()
	write("go.mod", "module x\n")
	write("programs/Cargo.toml", "[workspace]\n")
	write("Anchor.toml", "[programs.localnet]\npsyche_authorizer = \""+id+"\"\n[programs.devnet]\npsyche_authorizer = \""+id+"\"\n")
	write("idl/psyche_authorizer.json", `{"address": "`+id+`"}`)
	write("programs/authorizer/interface/src/lib.rs", `pub const ID: Address = base58::address("`+id+`");`)
	write("scripts/gen-bindings.sh", "touch bindings-regenerated\n")
	if err := wallet.Save(filepath.Join(root, "programs/keys/psyche_authorizer-keypair.json"), old, false); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLIIn(t, root, nil, "keys", "sync")
	if code != 0 || strings.Contains(out, "rewrote") {
		t.Fatalf("sync with matching ids: exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "bindings-regenerated")); err == nil {
		t.Fatal("bindings regenerated although nothing changed")
	}

	out, errOut, code = runCLIIn(t, root, nil, "keys", "sync", "--new")
	if code != 0 {
		t.Fatalf("sync --new: exit %d: %s", code, errOut)
	}
	key, err := wallet.Load(filepath.Join(root, "programs/keys/psyche_authorizer-keypair.json"))
	if err != nil || key.PublicKey().Equals(old.PublicKey()) {
		t.Fatalf("keypair not replaced: %v", err)
	}
	fresh := key.PublicKey().String()
	for _, rel := range []string{"Anchor.toml", "idl/psyche_authorizer.json", "programs/authorizer/interface/src/lib.rs"} {
		b, _ := os.ReadFile(filepath.Join(root, rel))
		if strings.Contains(string(b), id) || !strings.Contains(string(b), fresh) {
			t.Errorf("%s still names the old id:\n%s", rel, b)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bindings-regenerated")); err != nil {
		t.Errorf("bindings script not run; output %q", out)
	}
	out, _, code = runCLIIn(t, root, nil, "keys", "list")
	if code != 0 || !strings.Contains(out, "psyche_authorizer: "+fresh) || !strings.Contains(out, "psyche_treasurer: no keypair") ||
		!strings.Contains(out, "psyche_competition: no keypair") {
		t.Errorf("keys list: %q", out)
	}
	if _, errOut, code := runCLIIn(t, root, nil, "keys", "sync", "psyche_nothing"); code != exitBadInput {
		t.Errorf("unknown program: exit %d, %q", code, errOut)
	}
}
