package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

// HTTPOptions configure an HTTP provider. Root is required; the rest have
// defaults.
type HTTPOptions struct {
	// Root is the dataset root the run pins; the server's manifest must match.
	Root string
	// CacheDir keeps verified chunks between runs ("" keeps nothing). Cached
	// data is verified again whenever it is read.
	CacheDir string
	// Client makes the requests; the default times out after a minute.
	Client *http.Client
	// Attempts is how often a request is tried before giving up (default 5).
	Attempts int
	// Backoff is the wait before the first retry; it doubles, with jitter,
	// up to MaxBackoff (defaults 200ms and 5s).
	Backoff, MaxBackoff time.Duration
	// MaxRangeBytes caps one range request; adjacent chunks are fetched
	// together up to this size (default 4 MiB).
	MaxRangeBytes int64
	// Concurrency is the number of requests in flight (default 4).
	Concurrency int
	Log         *slog.Logger
}

// HTTP fetches the byte ranges of the chunks that hold the requested
// sequences from a data server (see package server), verifies each chunk
// against the manifest's chunk hashes, and caches it.
type HTTP struct {
	base  *url.URL
	opts  HTTPOptions
	m     *shard.Manifest
	cache string // per-root cache directory, or ""

	mu     sync.Mutex
	hashes map[int][]shard.Hash // verified chunk leaf hashes per shard
}

// OpenHTTP connects to the data server at baseURL and loads its manifest.
func OpenHTTP(ctx context.Context, baseURL string, opts HTTPOptions) (*HTTP, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("data server URL %q is not an http(s) URL", baseURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	if opts.Root == "" {
		return nil, errors.New("the dataset root to pin is required for an HTTP data source")
	}
	if root, err := hex.DecodeString(opts.Root); err != nil || len(root) != sha256.Size {
		return nil, fmt.Errorf("dataset root %q is not a SHA-256 hex digest", opts.Root)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: time.Minute}
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.MaxRangeBytes <= 0 {
		opts.MaxRangeBytes = 4 << 20
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	h := &HTTP{base: base, opts: opts, hashes: make(map[int][]shard.Hash)}
	if opts.CacheDir != "" {
		h.cache = filepath.Join(opts.CacheDir, strings.ToLower(opts.Root))
		if err := os.MkdirAll(h.cache, 0o755); err != nil {
			return nil, fmt.Errorf("data cache: %w", err)
		}
	}
	// The manifest is checked against the pinned root, so a cached copy is
	// as good as a fresh one.
	var raw []byte
	if h.cache != "" {
		raw, _ = os.ReadFile(filepath.Join(h.cache, shard.ManifestName))
	}
	if raw != nil {
		h.m, err = shard.ParseManifest(raw, opts.Root)
		if err != nil {
			opts.Log.Warn("ignoring invalid cached manifest", "err", err)
		}
	}
	if h.m == nil {
		err = h.retry(ctx, shard.ManifestName, func() error {
			raw, err = h.get(ctx, shard.ManifestName)
			if err != nil {
				return err
			}
			h.m, err = shard.ParseManifest(raw, opts.Root)
			return permanent(err) // a wrong manifest will not get right by asking again
		})
		if err != nil {
			return nil, fmt.Errorf("data server %s: %w", baseURL, err)
		}
		h.storeCache(shard.ManifestName, raw)
	}
	return h, nil
}

func (h *HTTP) Info() Info { return infoOf(h.m) }

// Close releases idle connections to the server.
func (h *HTTP) Close() error {
	h.opts.Client.CloseIdleConnections()
	return nil
}

func (h *HTTP) Sequences(ctx context.Context, indices []uint64) ([][]uint32, error) {
	return gather(ctx, h.m, indices, h.fetchChunks)
}

// span is a run of adjacent chunks of one shard fetched with one request.
type span struct{ shard, first, count int }

func (h *HTTP) fetchChunks(ctx context.Context, keys []chunkKey) (map[chunkKey][]byte, error) {
	chunks := make(map[chunkKey][]byte, len(keys))
	var spans []span
	for _, k := range keys {
		hashes, err := h.chunkHashes(ctx, k.shard)
		if err != nil {
			return nil, err
		}
		if data, ok := h.cachedChunk(k, hashes[k.chunk]); ok {
			chunks[k] = data
			continue
		}
		if n := len(spans); n > 0 {
			last := &spans[n-1]
			if last.shard == k.shard && last.first+last.count == k.chunk {
				e := h.m.Shards[k.shard]
				spanOff, _ := h.m.ChunkSpan(e, last.first)
				off, size := h.m.ChunkSpan(e, k.chunk)
				if off+size-spanOff <= h.opts.MaxRangeBytes {
					last.count++
					continue
				}
			}
		}
		spans = append(spans, span{k.shard, k.chunk, 1})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, h.opts.Concurrency)
	)
	for _, sp := range spans {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			got, err := h.fetchSpan(ctx, sp)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			for k, data := range got {
				chunks[k] = data
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return chunks, nil
}

// fetchSpan fetches and verifies a run of chunks, retrying transport
// failures, short reads and corrupt data.
func (h *HTTP) fetchSpan(ctx context.Context, sp span) (map[chunkKey][]byte, error) {
	e := h.m.Shards[sp.shard]
	hashes, err := h.chunkHashes(ctx, sp.shard)
	if err != nil {
		return nil, err
	}
	start, _ := h.m.ChunkSpan(e, sp.first)
	lastOff, lastLen := h.m.ChunkSpan(e, sp.first+sp.count-1)
	var out map[chunkKey][]byte
	what := fmt.Sprintf("%s chunks %d-%d", e.Name, sp.first, sp.first+sp.count-1)
	err = h.retry(ctx, what, func() error {
		body, err := h.getRange(ctx, e, start, lastOff+lastLen-start)
		if err != nil {
			return err
		}
		out = make(map[chunkKey][]byte, sp.count)
		for c := sp.first; c < sp.first+sp.count; c++ {
			off, n := h.m.ChunkSpan(e, c)
			data := body[off-start : off-start+n : off-start+n]
			if err := shard.VerifyChunk(e, c, hashes[c], data); err != nil {
				return err
			}
			out[chunkKey{sp.shard, c}] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for k, data := range out {
		h.storeCache(chunkCacheName(e.Name, k.chunk), data)
	}
	return out, nil
}

// chunkHashes returns shard k's chunk leaf hashes, verified against the
// manifest, from memory, the cache or the server.
func (h *HTTP) chunkHashes(ctx context.Context, k int) ([]shard.Hash, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hs, ok := h.hashes[k]; ok {
		return hs, nil
	}
	e := h.m.Shards[k]
	name := shard.ChunksName(e.Name)
	if raw, ok := h.readCache(name); ok {
		if hs, err := h.m.ParseChunkHashes(e, raw); err == nil {
			h.hashes[k] = hs
			return hs, nil
		}
	}
	var hs []shard.Hash
	err := h.retry(ctx, name, func() error {
		raw, err := h.get(ctx, name)
		if err != nil {
			return err
		}
		hs, err = h.m.ParseChunkHashes(e, raw)
		if err == nil {
			h.storeCache(name, raw)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	h.hashes[k] = hs
	return hs, nil
}

func chunkCacheName(shardName string, c int) string {
	return filepath.Join(shardName+".d", strconv.Itoa(c))
}

func (h *HTTP) cachedChunk(k chunkKey, want shard.Hash) ([]byte, bool) {
	e := h.m.Shards[k.shard]
	data, ok := h.readCache(chunkCacheName(e.Name, k.chunk))
	if !ok {
		return nil, false
	}
	if err := shard.VerifyChunk(e, k.chunk, want, data); err != nil {
		h.opts.Log.Warn("discarding corrupt cached chunk", "err", err)
		return nil, false
	}
	return data, true
}

func (h *HTTP) readCache(name string) ([]byte, bool) {
	if h.cache == "" {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(h.cache, name))
	return data, err == nil
}

// storeCache writes a verified file into the cache. Failing to cache costs
// only a later download, so errors are logged, not returned.
func (h *HTTP) storeCache(name string, data []byte) {
	if h.cache == "" {
		return
	}
	path := filepath.Join(h.cache, name)
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = atomicfile.Write(path, data, 0o644)
	}
	if err != nil {
		h.opts.Log.Warn("could not cache data", "file", name, "err", err)
	}
}

// get fetches a whole (small) file.
func (h *HTTP) get(ctx context.Context, name string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base.ResolveReference(&url.URL{Path: name}).String(), nil)
	if err != nil {
		return nil, permanent(err)
	}
	resp, err := h.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := statusError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	// Manifests and chunk hash files are small; the bound stops a
	// misbehaving server from exhausting memory.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return nil, fmt.Errorf("reading %s: got %d of %d bytes", name, len(body), resp.ContentLength)
	}
	return body, nil
}

// getRange fetches bytes [off, off+n) of shard e with a single-range request.
func (h *HTTP) getRange(ctx context.Context, e shard.Entry, off, n int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base.ResolveReference(&url.URL{Path: e.Name}).String(), nil)
	if err != nil {
		return nil, permanent(err)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := h.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil, permanent(fmt.Errorf("shard %s: the server ignored the Range request (HTTP 200)", e.Name))
	}
	if err := statusError(resp, http.StatusPartialContent); err != nil {
		return nil, fmt.Errorf("shard %s: %w", e.Name, err)
	}
	want := fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, e.Size)
	if got := resp.Header.Get("Content-Range"); got != want {
		reason := fmt.Sprintf("server answered range %q, asked for %q", got, want)
		if _, total, ok := strings.Cut(got, "/"); ok && total != strconv.FormatInt(e.Size, 10) {
			reason = fmt.Sprintf("the server's copy is %s bytes, the manifest says %d (truncated or replaced)", total, e.Size)
		}
		return nil, &shard.IntegrityError{Shard: e.Name, Chunk: -1, Reason: reason}
	}
	body := make([]byte, n)
	if got, err := io.ReadFull(resp.Body, body); err != nil {
		return nil, fmt.Errorf("shard %s: short read: got %d of %d bytes at offset %d: %w", e.Name, got, n, off, err)
	}
	return body, nil
}

func statusError(resp *http.Response, want int) error {
	if resp.StatusCode == want {
		return nil
	}
	err := fmt.Errorf("%s: HTTP %s", resp.Request.URL.Path, resp.Status)
	// Server errors and throttling may pass; other answers will not change.
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return err
	}
	return permanent(err)
}

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// retry runs fn until it succeeds, fails permanently, the context ends, or
// the attempts run out, waiting with exponential backoff and jitter between
// attempts so that many clients do not retry in lockstep.
func (h *HTTP) retry(ctx context.Context, what string, fn func() error) error {
	wait := h.opts.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil {
			return nil
		}
		if errors.As(err, new(permanentError)) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= h.opts.Attempts {
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		h.opts.Log.Warn("data fetch failed, retrying", "what", what, "attempt", attempt, "err", err)
		jittered := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(jittered):
		}
		wait = min(2*wait, h.opts.MaxBackoff)
	}
}
