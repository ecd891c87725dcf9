package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// A file:// repo is a hub on a local or shared filesystem: a directory of
// <revision>.safetensors files, as an upload to it writes them, or a Hugging
// Face model directory whose model.safetensors has the revision as its
// SHA-256. Every client of a run must see it at the same path.

// HFWeightsFile is the weights file of a Hugging Face model directory.
const HFWeightsFile = "model.safetensors"

// localRoot is the directory of a parsed file:// repo, or "" for HTTP.
func localRoot(u *url.URL) string {
	if u.Scheme != "file" {
		return ""
	}
	return filepath.FromSlash(u.Path)
}

// fetchLocal copies revision rev from the file:// repo root into
// dir/<rev>.safetensors, verified.
func fetchLocal(root, rev, dir string, max int64) (string, error) {
	var mismatch error
	for _, name := range []string{rev + Ext, HFWeightsFile} {
		path, err := installCopy(filepath.Join(root, name), dir, rev, max)
		var ie *IntegrityError
		switch {
		case err == nil:
			return path, nil
		case errors.Is(err, fs.ErrNotExist):
		case errors.As(err, &ie):
			mismatch = err
		default:
			return "", err
		}
	}
	if mismatch != nil {
		return "", mismatch
	}
	return "", fmt.Errorf("%s holds neither %s nor %s: %w", root, rev+Ext, HFWeightsFile, ErrNotFound)
}

// installCopy copies src to dir/<rev>.safetensors through a synced temporary
// file, renamed into place only when the copy's SHA-256 is rev: on failure
// dir is left as it was.
func installCopy(src, dir, rev string, max int64) (path string, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil {
		return "", err
	} else if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", src)
	} else if st.Size() > max {
		return "", fmt.Errorf("%s is %d bytes, %w of %d bytes", src, st.Size(), ErrTooLarge, max)
	}
	tmp, err := createTemp(dir, rev)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		return "", fmt.Errorf("copying %s: %w", src, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != rev {
		return "", &IntegrityError{Source: src, Got: got, Want: rev}
	}
	dst := filepath.Join(dir, rev+Ext)
	return dst, commitTemp(tmp, dst)
}

// createTemp creates dir if needed and a temporary file in it for
// revision rev (the name hub servers and NewServer's cleanup recognise).
func createTemp(dir, rev string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+rev+".*.part")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary file in %s: %w", dir, err)
	}
	return tmp, nil
}

// commitTemp syncs and closes tmp, renames it to dst and syncs dst's
// directory, so the file is complete under its name even after a crash.
func commitTemp(tmp *os.File, dst string) error {
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syncDir(d); err != nil {
		return fmt.Errorf("syncing %s: %w", filepath.Dir(dst), err)
	}
	return nil
}

// LocalDir is the directory of a file:// repo ("" for an HTTP repo or an
// invalid one).
func LocalDir(repo string) string {
	u, err := ParseRepo(repo)
	if err != nil {
		return ""
	}
	return localRoot(u)
}
