package hub

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// UploadOptions tune Upload; the zero value is ready to use.
type UploadOptions struct {
	Client   *http.Client  // nil: a client with connect and response-header timeouts
	Token    string        // bearer token the hub wants for uploads ("" for none)
	Attempts int           // tries on transient errors; 0: 5
	Backoff  time.Duration // first wait between tries, doubled each time; 0: 1 s
	Log      *slog.Logger  // nil: no logs
}

// Upload stores the safetensors file at path in repo and returns its
// revision. It is idempotent: a hub that already holds the revision (seen
// with HEAD, or said by the PUT's status) is success, and nothing is sent
// twice.
func Upload(ctx context.Context, repo, path string, opts UploadOptions) (rev string, err error) {
	u, err := ParseRepo(repo)
	if err != nil {
		return "", err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if err := checkSafetensors(f, st.Size()); err != nil {
		return "", fmt.Errorf("%s is %w: %w", path, ErrNotCheckpoint, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size())); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	rev = hex.EncodeToString(h.Sum(nil))
	dst, err := FileURL(repo, rev)
	if err != nil {
		return "", err
	}
	if root := localRoot(u); root != "" {
		if err := uploadLocal(root, path, rev, log); err != nil {
			return "", err
		}
		return rev, nil
	}
	client := opts.Client
	if client == nil {
		client = defaultClient()
	}
	if held(ctx, client, dst) {
		log.Info("the hub already holds this checkpoint", "url", dst)
		return rev, nil
	}
	err = retry(ctx, opts.Attempts, opts.Backoff, log, "uploading to "+dst, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, dst, io.NewSectionReader(f, 0, st.Size()))
		if err != nil {
			return err
		}
		req.ContentLength = st.Size()
		req.Header.Set("Content-Type", "application/octet-stream")
		if opts.Token != "" {
			req.Header.Set("Authorization", "Bearer "+opts.Token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return transient(err)
		}
		defer resp.Body.Close()
		switch code := resp.StatusCode; {
		case code == http.StatusOK || code == http.StatusCreated || code == http.StatusNoContent:
			return nil
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return fmt.Errorf("the hub refused the upload (%s); give the token it was started with", resp.Status)
		case code == http.StatusRequestEntityTooLarge:
			return fmt.Errorf("the hub refused the %d-byte file: %w", st.Size(), ErrTooLarge)
		case transientStatus(code):
			return transient(statusError(resp))
		default:
			return statusError(resp)
		}
	})
	if err != nil {
		return "", err
	}
	log.Info("checkpoint uploaded", "url", dst, "bytes", st.Size())
	return rev, nil
}

// held reports whether the hub answers HEAD for dst with 200. Any other
// outcome (including errors) means "upload it": the PUT then tells.
func held(ctx context.Context, client *http.Client, dst string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, dst, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// checkSafetensors checks the frame of a safetensors file: a little-endian
// u64 header length, then a JSON object header that fits in the file. It
// catches uploading the wrong file before anything is published.
func checkSafetensors(r io.ReaderAt, size int64) error {
	var head [9]byte
	if size < int64(len(head)) {
		return fmt.Errorf("only %d bytes", size)
	}
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint64(head[:8])
	if n < 2 || n > uint64(size-8) {
		return fmt.Errorf("its header length %d does not fit its %d bytes", n, size)
	}
	if head[8] != '{' {
		return fmt.Errorf("its header is not a JSON object")
	}
	return nil
}

// uploadLocal stores the file at path in the file:// repo root, unless a
// file of that revision is there already.
func uploadLocal(root, path, rev string, log *slog.Logger) error {
	dst := filepath.Join(root, rev+Ext)
	if got, err := HashFile(dst); err == nil && got == rev {
		log.Info("the hub already holds this checkpoint", "path", dst)
		return nil
	}
	if _, err := installCopy(path, root, rev, math.MaxInt64); err != nil {
		return err
	}
	log.Info("checkpoint stored", "path", dst)
	return nil
}
