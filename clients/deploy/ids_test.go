package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/wallet"
)

// fakeRepo lays out the files that name a program id, as in this repo.
func fakeRepo(t *testing.T, name string, id solana.PublicKey) Repo {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                      "module x\n",
		"programs/Cargo.toml":         "[workspace]\n",
		"Anchor.toml":                 "[programs.localnet]\n" + name + ` = "` + id.String() + "\"\nother = \"" + id.String() + "\"\n\n[programs.devnet]\n" + name + ` = "11111111111111111111111111111111"` + "\n",
		"idl/" + name + ".json":       `{"address": "` + id.String() + `", "metadata": {"name": "` + name + `"}}`,
		"programs/p/src/lib.rs":       `pub const ID: Address = base58::address("` + id.String() + `");` + "\n",
		"programs/p/README.md":        "deployed at " + id.String() + "\n",
		"programs/target/deploy/x.rs": id.String(),
		"programs/p/testdata/v.json":  id.String(),
	}
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Repo{Root: root}
}

func TestSyncIDRewritesEveryDeclaration(t *testing.T) {
	old := solana.NewWallet().PublicKey()
	r := fakeRepo(t, "psyche_x", old)
	if err := wallet.Save(r.keypairPath("psyche_x"), solana.NewWallet().PrivateKey, false); err != nil {
		t.Fatal(err)
	}
	fresh, err := r.NewKeypair("psyche_x")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := r.SyncID("psyche_x")
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Old.Equals(old) || !ch.New.Equals(fresh) {
		t.Fatalf("change %+v", ch)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(r.Root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, rel := range []string{"idl/psyche_x.json", "programs/p/src/lib.rs", "programs/p/README.md"} {
		if s := read(rel); !strings.Contains(s, fresh.String()) || strings.Contains(s, old.String()) {
			t.Errorf("%s not rewritten: %s", rel, s)
		}
	}
	toml := read("Anchor.toml")
	if strings.Count(toml, `psyche_x = "`+fresh.String()+`"`) != 2 {
		t.Errorf("Anchor.toml entries not both rewritten:\n%s", toml)
	}
	if !strings.Contains(toml, `other = "`+old.String()+`"`) {
		t.Errorf("Anchor.toml entry of another program changed:\n%s", toml)
	}
	for _, rel := range []string{"programs/target/deploy/x.rs", "programs/p/testdata/v.json"} {
		if read(rel) != old.String() {
			t.Errorf("%s (build output / test data) was rewritten", rel)
		}
	}
	// Idempotent: a second sync changes nothing.
	ch, err = r.SyncID("psyche_x")
	if err != nil || len(ch.Files) != 0 {
		t.Fatalf("second sync: %+v, %v", ch, err)
	}
}

func TestSyncIDNeedsKeypairAndIDL(t *testing.T) {
	r := fakeRepo(t, "psyche_x", solana.NewWallet().PublicKey())
	if _, err := r.SyncID("psyche_x"); err == nil {
		t.Fatal("sync without a keypair succeeded")
	}
	if _, err := r.NewKeypair("psyche_y"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SyncID("psyche_y"); err == nil || !strings.Contains(err.Error(), "IDL") {
		t.Fatalf("sync without an IDL: %v", err)
	}
}
