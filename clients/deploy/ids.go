package deploy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

// IDChange is one program whose id was rewritten.
type IDChange struct {
	Name     string
	Old, New solana.PublicKey
	Files    []string // relative to the repo root
}

// NewKeypair replaces a program's keypair with a fresh one (as for a devnet
// deployment under new ids); the old one stays in git history.
func (r Repo) NewKeypair(name string) (solana.PublicKey, error) {
	key := solana.NewWallet().PrivateKey
	if err := wallet.Save(r.keypairPath(name), key, true); err != nil {
		return solana.PublicKey{}, err
	}
	return key.PublicKey(), nil
}

// keypairPath is where a program's keypair is kept.
func (r Repo) keypairPath(name string) string {
	return filepath.Join(r.Root, "programs", "keys", name+"-keypair.json")
}

// SyncID makes every place that names a program's id agree with its keypair,
// like `anchor keys sync`: the IDL's address, Anchor.toml's entries for every
// cluster, and the id declared in the programs' sources (every occurrence of
// the old id under programs/, outside build output and keys). Bindings are
// generated from the IDL, so regenerate them afterwards.
func (r Repo) SyncID(name string) (*IDChange, error) {
	key, err := r.Keypair(name)
	if err != nil {
		return nil, err
	}
	idlPath := filepath.Join(r.Root, "idl", name+".json")
	raw, err := os.ReadFile(idlPath)
	if err != nil {
		return nil, fmt.Errorf("read the IDL of %s: %w", name, err)
	}
	var doc struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", idlPath, err)
	}
	old, err := solana.PublicKeyFromBase58(doc.Address)
	if err != nil {
		return nil, fmt.Errorf("%s: address %q: %w", idlPath, doc.Address, err)
	}
	ch := &IDChange{Name: name, Old: old, New: key.PublicKey()}

	// Anchor.toml: `name = "..."` in every [programs.<cluster>] table, whatever it held.
	entry := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(name) + `\s*=\s*)"[1-9A-HJ-NP-Za-km-z]{32,44}"`)
	if err := r.rewrite("Anchor.toml", ch, func(s string) string {
		return entry.ReplaceAllString(s, `${1}"`+ch.New.String()+`"`)
	}); err != nil {
		return nil, err
	}
	if old.Equals(ch.New) {
		return ch, nil
	}
	replace := func(s string) string { return strings.ReplaceAll(s, old.String(), ch.New.String()) }
	if err := r.rewrite(filepath.Join("idl", name+".json"), ch, replace); err != nil {
		return nil, err
	}
	err = filepath.WalkDir(filepath.Join(r.Root, "programs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "target" || n == "keys" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".rs", ".toml", ".md":
		default:
			return nil
		}
		rel, _ := filepath.Rel(r.Root, path)
		return r.rewrite(rel, ch, replace)
	})
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// rewrite applies edit to a file under the root and records it when it changed.
func (r Repo) rewrite(rel string, ch *IDChange, edit func(string) string) error {
	path := filepath.Join(r.Root, rel)
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sync program id: %w", err)
	}
	next := edit(string(raw))
	if next == string(raw) {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, []byte(next), st.Mode().Perm()); err != nil {
		return err
	}
	ch.Files = append(ch.Files, rel)
	return nil
}
