package idl

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
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

// The Model's f32 settings, stored as their bits, are typed f32 so that
// Anchor's clients show 0.001 rather than 981668463 (in the Treasurer's IDL
// too, which carries the Model in run_update).
func TestModelFloatsAreF32(t *testing.T) {
	for _, name := range []string{"psyche_coordinator", "psyche_treasurer"} {
		raw, err := os.ReadFile(name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Types []struct {
				Name string `json:"name"`
				Type struct {
					Fields []struct {
						Name string `json:"name"`
						Type any    `json:"type"`
					} `json:"fields"`
				} `json:"type"`
			} `json:"types"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"learning_rate": true, "final_learning_rate": true, "weight_decay": true,
			"clip_grad_norm": true, "compression_decay": true, "outer_learning_rate": true}
		found := 0
		for _, ty := range d.Types {
			if ty.Name != "Model" {
				continue
			}
			for _, f := range ty.Type.Fields {
				if want[f.Name] {
					found++
					if f.Type != "f32" {
						t.Errorf("%s: Model.%s is %v, want f32", name, f.Name, f.Type)
					}
				}
			}
		}
		if found != len(want) {
			t.Errorf("%s: found %d of the Model's %d f32 fields", name, found, len(want))
		}
	}
}
