// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a torn write, even across a crash: the
// data goes to a temporary file in the same directory, is synced, takes the
// final name in one step, and the directory is synced so the name survives
// a crash too. It is the one implementation of this for the whole module.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data (mode perm).
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Rename)
}

// WriteNew creates path with data (mode perm) and fails, wrapping
// os.ErrExist, if path exists: nothing already there is ever replaced.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Link)
}

func write(path string, data []byte, perm os.FileMode, install func(tmp, path string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Removed in every case: after a rename it is gone already, after a
	// link it is the second name of the file.
	defer os.Remove(f.Name())
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = install(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync its directory: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync its directory: %w", path, err)
	}
	return nil
}
