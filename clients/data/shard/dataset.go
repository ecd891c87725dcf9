package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Dataset is a dataset directory opened for reading. Every chunk it returns
// has been checked against the manifest. It is safe for concurrent use.
type Dataset struct {
	Dir      string
	Manifest *Manifest
	files    []*os.File

	mu     sync.Mutex
	hashes [][]Hash // chunk leaf hashes per shard, loaded on first use
}

// Open opens the dataset in dir. With a non-empty pinnedRoot the manifest must
// have that root. Open checks that every shard is present with the size the
// manifest gives, so a truncated shard is reported at once, by name.
func Open(dir, pinnedRoot string) (*Dataset, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("reading dataset manifest: %w", err)
	}
	m, err := ParseManifest(raw, pinnedRoot)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	d := &Dataset{Dir: dir, Manifest: m, hashes: make([][]Hash, len(m.Shards))}
	for _, e := range m.Shards {
		f, err := os.Open(filepath.Join(dir, e.Name))
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("shard %s: %w", e.Name, err)
		}
		d.files = append(d.files, f)
		st, err := f.Stat()
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("shard %s: %w", e.Name, err)
		}
		if st.Size() != e.Size {
			d.Close()
			return nil, &IntegrityError{Shard: e.Name, Chunk: -1, Reason: fmt.Sprintf("file is %d bytes, the manifest says %d (truncated or replaced)", st.Size(), e.Size)}
		}
	}
	return d, nil
}

// Close releases the shard files.
func (d *Dataset) Close() error {
	var errs []error
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	d.files = nil
	return errors.Join(errs...)
}

// ChunkHashes returns shard k's verified chunk leaf hashes.
func (d *Dataset) ChunkHashes(k int) ([]Hash, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hashes[k] != nil {
		return d.hashes[k], nil
	}
	e := d.Manifest.Shards[k]
	raw, err := os.ReadFile(filepath.Join(d.Dir, ChunksName(e.Name)))
	if err != nil {
		return nil, fmt.Errorf("shard %s: reading chunk hashes: %w", e.Name, err)
	}
	h, err := d.Manifest.ParseChunkHashes(e, raw)
	if err != nil {
		return nil, err
	}
	d.hashes[k] = h
	return h, nil
}

// ReadChunk reads chunk c of shard k into buf (grown as needed) and verifies it.
func (d *Dataset) ReadChunk(k, c int, buf []byte) ([]byte, error) {
	hashes, err := d.ChunkHashes(k)
	if err != nil {
		return nil, err
	}
	e := d.Manifest.Shards[k]
	off, n := d.Manifest.ChunkSpan(e, c)
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := d.files[k].ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &IntegrityError{Shard: e.Name, Chunk: c, Reason: "file ends early (truncated)"}
		}
		return nil, fmt.Errorf("shard %s: %w", e.Name, err)
	}
	if err := VerifyChunk(e, c, hashes[c], buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Verify checks every shard in full: whole-file SHA-256, header, and chunk
// hashes. It returns the first problem found.
func (d *Dataset) Verify(ctx context.Context) error {
	for k, e := range d.Manifest.Shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(d.files[k], 0, e.Size+1)); err != nil {
			return fmt.Errorf("shard %s: %w", e.Name, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
			return &IntegrityError{Shard: e.Name, Chunk: -1, Reason: "file SHA-256 does not match the manifest"}
		}
		raw := make([]byte, HeaderSize)
		if _, err := d.files[k].ReadAt(raw, 0); err != nil {
			return fmt.Errorf("shard %s: %w", e.Name, err)
		}
		var hdr Header
		if err := hdr.UnmarshalBinary(raw); err != nil {
			return &IntegrityError{Shard: e.Name, Chunk: -1, Reason: err.Error()}
		}
		if want := d.Manifest.HeaderFor(k); hdr != want {
			return &IntegrityError{Shard: e.Name, Chunk: -1, Reason: fmt.Sprintf("header %+v disagrees with the manifest (%+v)", hdr, want)}
		}
		var buf []byte
		for c := range d.Manifest.NumChunks(e) {
			var err error
			if buf, err = d.ReadChunk(k, c, buf); err != nil {
				return err
			}
		}
	}
	return nil
}
