// Package wallet reads and writes Solana keypair files in the solana-keygen
// JSON format (a JSON array of the 64 bytes: 32-byte seed, then public key).
package wallet

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// EnvVar names the environment variable that overrides the default wallet path,
// as in the seed docs' `WALLET_FILE=... just dev ...`.
const EnvVar = "WALLET_FILE"

// DefaultPath is where solana-keygen writes a new wallet: ~/.config/solana/id.json.
func DefaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate the default wallet: %w", err)
	}
	return filepath.Join(home, ".config", "solana", "id.json"), nil
}

// Resolve picks the wallet path: the flag if set, else $WALLET_FILE, else the default.
func Resolve(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if env := os.Getenv(EnvVar); env != "" {
		return env, nil
	}
	return DefaultPath()
}

// Load reads a keypair file and checks that its public half matches its seed,
// so a truncated or hand-edited file is caught here rather than as a bad signature.
func Load(path string) (solana.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, missingError{path}
		}
		return nil, fmt.Errorf("read keypair file: %w", err)
	}
	return Parse(raw, path)
}

// ErrInsecure is returned by CheckPrivate for a keypair file that group or
// others may access.
var ErrInsecure = errors.New("keypair file accessible by others")

// CheckPrivate refuses a keypair file whose mode lets group or others read,
// write or execute it, as ssh refuses such a private key.
func CheckPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return missingError{path}
		}
		return fmt.Errorf("read keypair file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; run `chmod 600 %s` (or pass --allow-insecure-keyfile)", ErrInsecure, path, perm, path)
	}
	return nil
}

// missingError names a keypair file that does not exist and says how to make
// one; errors.Is(err, os.ErrNotExist) holds for it.
type missingError struct{ path string }

func (e missingError) Error() string {
	return fmt.Sprintf("keypair file %s does not exist (create one with `psyche-client keygen -o %s`)", e.path, e.path)
}

func (missingError) Unwrap() error { return os.ErrNotExist }

// Parse decodes the contents of a keypair file; name is used in errors.
func Parse(raw []byte, name string) (solana.PrivateKey, error) {
	var ints []int
	if err := json.Unmarshal(raw, &ints); err != nil {
		return nil, fmt.Errorf("keypair file %s is not a JSON array of 64 numbers: %v", name, err)
	}
	if len(ints) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("keypair file %s holds %d bytes, want %d", name, len(ints), ed25519.PrivateKeySize)
	}
	key := make([]byte, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return nil, fmt.Errorf("keypair file %s: byte %d is %d, not in 0..255", name, i, v)
		}
		key[i] = byte(v)
	}
	derived := ed25519.NewKeyFromSeed(key[:ed25519.SeedSize])
	if string(derived[ed25519.SeedSize:]) != string(key[ed25519.SeedSize:]) {
		return nil, fmt.Errorf("keypair file %s is corrupt: its public key does not match its secret key", name)
	}
	return solana.PrivateKey(key), nil
}

// Marshal encodes a keypair the way solana-keygen does.
func Marshal(key solana.PrivateKey) []byte {
	ints := make([]int, len(key))
	for i, b := range key {
		ints[i] = int(b)
	}
	out, _ := json.Marshal(ints) // a []int always marshals
	return out
}

// Save writes key to path atomically with mode 0600, creating parent
// directories. It refuses to replace an existing file unless overwrite is set,
// since a lost wallet cannot be recovered.
func Save(path string, key solana.PrivateKey, overwrite bool) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("save keypair: key has %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if !overwrite {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s already exists; refusing to overwrite a keypair (pass --force to replace it)", path)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save keypair: %w", err)
	}
	return atomicfile.Write(path, Marshal(key), 0o600)
}
