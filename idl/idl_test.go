package idl

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/wallet"
)

func disc(prefix, name string) []byte {
	h := sha256.Sum256([]byte(prefix + ":" + name))
	return h[:8]
}

// Anchor derives every discriminator from a name; a hand edit that breaks
// that would make Anchor's clients and ours disagree with the program.
func TestDiscriminatorsFollowAnchorRules(t *testing.T) {
	for _, name := range Names() {
		d, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Metadata.Name != name {
			t.Errorf("%s: metadata.name = %q", name, d.Metadata.Name)
		}
		check := func(kind, prefix string, items []Item) {
			seen := map[string]bool{}
			for _, it := range items {
				if want := disc(prefix, it.Name); !bytes.Equal(it.Discriminator, want) {
					t.Errorf("%s %s %s: discriminator %v, want %v", name, kind, it.Name, it.Discriminator, want)
				}
				if seen[string(it.Discriminator)] {
					t.Errorf("%s: duplicate %s discriminator for %s", name, kind, it.Name)
				}
				seen[string(it.Discriminator)] = true
			}
		}
		check("instruction", "global", d.Instructions)
		check("account", "account", d.Accounts)
		check("event", "event", d.Events)
		codes := map[uint32]bool{}
		for _, e := range d.Errors {
			if e.Code < 6000 || codes[e.Code] || e.Name == "" || e.Msg == "" {
				t.Errorf("%s: error %+v must have a unique code >= 6000, a name and a message", name, e)
			}
			codes[e.Code] = true
		}
	}
}

// The program ids in Anchor.toml, the IDLs and the committed program keypairs agree.
func TestProgramIDsAgree(t *testing.T) {
	toml, err := os.ReadFile("../Anchor.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		d, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		id, err := d.ProgramID()
		if err != nil {
			t.Fatal(err)
		}
		for _, cluster := range []string{"localnet"} {
			re := regexp.MustCompile(`(?ms)^\[programs\.` + cluster + `\]\n(.*?)(^\[|\z)`)
			m := re.FindSubmatch(toml)
			if m == nil || !strings.Contains(string(m[1]), name+` = "`+id.String()+`"`) {
				t.Errorf("Anchor.toml [programs.%s] lacks %s = %q", cluster, name, id)
			}
		}
		key, err := wallet.Load(filepath.Join("..", "programs", "keys", name+"-keypair.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !key.PublicKey().Equals(id) {
			t.Errorf("%s: keypair pubkey %s != IDL address %s", name, key.PublicKey(), id)
		}
	}
}

func TestErrorTablesNameCodes(t *testing.T) {
	tables, err := ErrorTables()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Load("psyche_authorizer")
	id, _ := d.ProgramID()
	e, ok := tables.Lookup(id, 6001)
	if !ok || e.Name != "TooManyDelegates" {
		t.Errorf("authorizer 6001 = %+v, %v", e, ok)
	}
	if e, ok := tables.Lookup(id, 2006); !ok || e.Name != "ConstraintSeeds" {
		t.Errorf("framework 2006 = %+v, %v", e, ok)
	}
}
