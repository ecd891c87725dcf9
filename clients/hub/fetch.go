package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxFetchSize bounds a download when FetchOptions.MaxSize is 0:
// room for a model of several billion parameters, while a hostile hub still
// cannot fill the disk.
const DefaultMaxFetchSize = 64 << 30

// defaultStallTimeout aborts (and retries) a transfer that has received
// nothing for this long; a whole-request timeout would kill large downloads.
const defaultStallTimeout = time.Minute

// FetchOptions tune Fetch; the zero value is ready to use.
type FetchOptions struct {
	Client       *http.Client  // nil: a client with connect and response-header timeouts
	MaxSize      int64         // largest file accepted; 0: DefaultMaxFetchSize
	Attempts     int           // tries on transient errors; 0: 5
	Backoff      time.Duration // first wait between tries, doubled each time; 0: 1 s
	StallTimeout time.Duration // abort a transfer idle this long; 0: 1 min
	Log          *slog.Logger  // nil: no logs
}

// Fetch makes dir/<rev>.safetensors hold revision rev of repo and returns its
// path. A file already there whose SHA-256 is rev is used without touching
// the network. Otherwise the file is downloaded (or, from a file:// repo,
// copied) to a temporary file in dir, hashed as it streams (an interrupted
// transfer resumes with a Range request), synced, and renamed into place
// only when its hash is rev: on any failure dir is left as it was.
func Fetch(ctx context.Context, repo, rev, dir string, opts FetchOptions) (path string, err error) {
	src, err := FileURL(repo, rev)
	if err != nil {
		return "", err
	}
	u, _ := ParseRepo(repo) // FileURL checked it
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dst := filepath.Join(dir, rev+Ext)
	switch got, err := HashFile(dst); {
	case err == nil && got == rev:
		log.Debug("checkpoint already fetched", "path", dst)
		return dst, nil
	case err == nil:
		log.Warn("cached checkpoint does not match its name; fetching it again", "path", dst, "sha256", got)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("checking %s: %w", dst, err)
	}
	if root := localRoot(u); root != "" {
		path, err := fetchLocal(root, rev, dir, orDefault(opts.MaxSize, DefaultMaxFetchSize))
		if err == nil {
			log.Info("checkpoint copied", "repo", repo, "path", path)
		}
		return path, err
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
	d := &download{
		url: src, f: tmp, h: sha256.New(),
		max:   orDefault(opts.MaxSize, DefaultMaxFetchSize),
		stall: orDefault(opts.StallTimeout, defaultStallTimeout),
	}
	client := opts.Client
	if client == nil {
		client = defaultClient()
	}
	what := "fetching " + src
	if err := retry(ctx, opts.Attempts, opts.Backoff, log, what, func() error { return d.attempt(ctx, client) }); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(d.h.Sum(nil)); got != rev {
		return "", &IntegrityError{Source: src, Got: got, Want: rev}
	}
	if err := commitTemp(tmp, dst); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	log.Info("checkpoint fetched", "url", src, "path", dst, "bytes", d.n)
	return dst, nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// defaultClient bounds connecting and waiting for headers, but not the body:
// a large checkpoint may take long, and the stall timer guards the body.
func defaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}

// download is one file's transfer across attempts: f and h always hold the
// same n bytes, so a retry can ask for the rest.
type download struct {
	url   string
	f     *os.File
	h     hash.Hash
	n     int64
	max   int64
	stall time.Duration
}

var errStalled = errors.New("the transfer stalled")

func (d *download) attempt(ctx context.Context, client *http.Client) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return err
	}
	if d.n > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(d.n, 10)+"-")
	}
	resp, err := client.Do(req)
	if err != nil {
		return transient(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		if d.n > 0 { // the server ignored the Range: start over
			if err := d.reset(); err != nil {
				return err
			}
		}
	case resp.StatusCode == http.StatusPartialContent && d.n > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes "+strconv.FormatInt(d.n, 10)+"-") {
			if err := d.reset(); err != nil {
				return err
			}
			return transient(fmt.Errorf("the hub resumed at the wrong offset (%q)", resp.Header.Get("Content-Range")))
		}
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return ErrNotFound
	case transientStatus(resp.StatusCode):
		return transient(statusError(resp))
	default:
		return statusError(resp)
	}
	if resp.ContentLength > d.max-d.n {
		return fmt.Errorf("the file is %d bytes, %w of %d bytes", d.n+resp.ContentLength, ErrTooLarge, d.max)
	}
	timer := time.AfterFunc(d.stall, func() { cancel(errStalled) })
	defer timer.Stop()
	buf := make([]byte, 1<<20)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			timer.Reset(d.stall)
			if int64(k) > d.max-d.n {
				return fmt.Errorf("the file is %w of %d bytes", ErrTooLarge, d.max)
			}
			if _, err := d.f.Write(buf[:k]); err != nil {
				return fmt.Errorf("writing %s: %w", d.f.Name(), err)
			}
			d.h.Write(buf[:k])
			d.n += int64(k)
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil && errors.Is(context.Cause(ctx), errStalled):
			return transient(fmt.Errorf("%w: nothing received for %v", errStalled, d.stall))
		case rerr != nil:
			return transient(rerr)
		}
	}
}

// reset empties the file and the hash, for a transfer that must start over.
func (d *download) reset() error {
	if err := d.f.Truncate(0); err != nil {
		return err
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	d.h.Reset()
	d.n = 0
	return nil
}
