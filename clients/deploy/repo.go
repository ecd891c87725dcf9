package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/wallet"
)

// The programs, by the names of their .so files, IDLs and keypairs.
const (
	Authorizer  = "psyche_authorizer"
	Coordinator = "psyche_coordinator"
	Treasurer   = "psyche_treasurer"
	Competition = "psyche_competition"
)

// Repo is a checkout of this repository: its built programs
// (programs/target/deploy/<name>.so) and their keypairs
// (programs/keys/<name>-keypair.json), whose public keys are the programs'
// ids. The dev recipes, psyche-client, the benchmarks and the tests all
// deploy from it.
type Repo struct{ Root string }

// FindRepo walks up from dir to the directory holding go.mod and programs/.
func FindRepo(dir string) (Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Repo{}, err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) && fileExists(filepath.Join(d, "programs", "Cargo.toml")) {
			return Repo{Root: d}, nil
		}
		if filepath.Dir(d) == d {
			return Repo{}, fmt.Errorf("%s is not inside a psyche checkout (no go.mod with programs/ above it)", abs)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ELF reads a built program.
func (r Repo) ELF(name string) ([]byte, error) {
	path := filepath.Join(r.Root, "programs", "target", "deploy", name+".so")
	elf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is not built (run scripts/build-programs.sh): %w", path, os.ErrNotExist)
	}
	return elf, err
}

// Keypair reads a program's keypair, whose public key is its id.
func (r Repo) Keypair(name string) (solana.PrivateKey, error) {
	return wallet.Load(r.keypairPath(name))
}
