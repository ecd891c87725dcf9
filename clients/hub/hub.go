// Package hub is a self-hostable, content-addressed checkpoint store over
// HTTP: the place a run with checkpoint kind "hub" publishes its model.
//
// A run's on-chain model names a repo and a revision. Here the repo is a base
// URL (http:// or https://, or file:// for a directory on a local or shared
// filesystem) and the revision is the lowercase hex SHA-256 of the checkpoint
// file, which lives at <repo>/<revision>.safetensors. Because
// the name is the hash, a file can be checked by anyone who reads the chain,
// cached forever, and uploaded twice without harm.
package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
)

// Ext is the extension of every checkpoint file in a hub.
const Ext = ".safetensors"

// RevisionLen is the length of a revision: a SHA-256 digest in hex. It is
// exactly the Coordinator's REVISION_LEN.
const RevisionLen = 2 * sha256.Size

// ErrNotFound reports a revision the hub does not hold.
var ErrNotFound = errors.New("not found on the hub")

// ErrTooLarge reports a file over the size limit.
var ErrTooLarge = errors.New("larger than the size limit")

// ErrNotCheckpoint reports a file to upload that is not a safetensors file.
var ErrNotCheckpoint = errors.New("not a safetensors checkpoint")

// IntegrityError reports content whose SHA-256 is not the revision it was
// fetched or stored as.
type IntegrityError struct {
	Source    string // URL or file
	Got, Want string // hex digests
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("%s has sha256 %s, but its revision is %s", e.Source, e.Got, e.Want)
}

// ValidateRevision checks that rev is 64 lowercase hex digits.
func ValidateRevision(rev string) error {
	if !isRevision(rev) {
		return fmt.Errorf("revision %q is not a hub revision: it must be the 64 lowercase hex digits of the file's SHA-256", rev)
	}
	return nil
}

func isRevision(s string) bool {
	if len(s) != RevisionLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseRepo checks a repo URL: http or https with a host, or file with an
// absolute path, and no query, fragment or credentials (the repo is
// published on chain).
func ParseRepo(repo string) (*url.URL, error) {
	u, err := url.Parse(repo)
	if err != nil {
		return nil, fmt.Errorf("repo %q is not a URL: %w", repo, err)
	}
	switch {
	case u.Scheme == "file" && (u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/")):
		return nil, fmt.Errorf("repo %q must name an absolute path, as file:///srv/models/run", repo)
	case u.Scheme == "file" && path.Clean(u.Path) != strings.TrimSuffix(u.Path, "/") && u.Path != "/":
		return nil, fmt.Errorf("repo %q has . or .. or repeated slashes in its path", repo)
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file":
		return nil, fmt.Errorf("repo %q must be an http://, https:// or file:// URL", repo)
	case u.Host == "" && u.Scheme != "file":
		return nil, fmt.Errorf("repo %q has no host", repo)
	case u.User != nil:
		return nil, fmt.Errorf("repo %q carries credentials; the repo is public on chain, so pass a token separately", repo)
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("repo %q has a query; a repo is a plain base URL", repo)
	case u.Fragment != "" || strings.Contains(repo, "#"):
		return nil, fmt.Errorf("repo %q has a fragment; a repo is a plain base URL", repo)
	}
	return u, nil
}

// FileURL is the address of revision rev in repo.
func FileURL(repo, rev string) (string, error) {
	u, err := ParseRepo(repo)
	if err != nil {
		return "", err
	}
	if err := ValidateRevision(rev); err != nil {
		return "", err
	}
	return u.JoinPath(rev + Ext).String(), nil
}

// HashFile returns the revision of the file at path.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseSize reads a byte count such as 4GiB, 512MiB, 10MB or 1048576.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q must be a positive whole number of bytes, optionally with a unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	return n * mult, nil
}

// syncDir makes a rename in dir durable.
func syncDir(d *os.File) error {
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
