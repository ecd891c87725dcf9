package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/server"
	"github.com/psyche-go/psyche/clients/data/shard"
)

// prepared builds a dataset from the default corpus's validation split
// (0.8 MB) for one test, with small chunks and shards, so that requests span
// chunks and shards.
func prepared(t *testing.T, tok string, seqLen uint32) string {
	t.Helper()
	in, err := corpus.SOTUDir()
	if err != nil {
		t.Fatal(err)
	}
	split, _ := corpus.NewSplit("validation", corpus.DefaultLastTrainYear)
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := prepare.Run(context.Background(), prepare.Options{Input: in, Split: split, Tokenizer: tok, SeqLen: seqLen, ChunkBytes: 1024, ShardBytes: 64 << 10, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rangeLog records the Range headers a handler was asked for.
type rangeLog struct {
	mu     sync.Mutex
	ranges []string
	next   http.Handler
}

func (l *rangeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rg := r.Header.Get("Range"); rg != "" {
		l.mu.Lock()
		l.ranges = append(l.ranges, strings.TrimPrefix(r.URL.Path, "/")+" "+rg)
		l.mu.Unlock()
	}
	l.next.ServeHTTP(w, r)
}

func serve(t *testing.T, dir string, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	s, err := server.New(context.Background(), dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = s
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func fastOptions(root, cache string) HTTPOptions {
	return HTTPOptions{Root: root, CacheDir: cache, Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Client: &http.Client{Timeout: 10 * time.Second}}
}

func randomIndices(n uint64, k int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([]uint64, k)
	for i := range out {
		out[i] = r.Uint64N(n)
	}
	return out
}

// TestHTTPMatchesLocal is the end-to-end path: prepare, serve over loopback,
// fetch sequences over HTTP, and compare with local reads. It also checks
// that only the chunks holding the requested sequences cross the wire, and
// that a second client with the same cache needs no server at all.
func TestHTTPMatchesLocal(t *testing.T) {
	for _, tok := range []string{"gpt2", "byte"} {
		t.Run(tok, func(t *testing.T) {
			dir := prepared(t, tok, 64)
			local, err := OpenLocal(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			info := local.Info()
			log := &rangeLog{}
			ts := serve(t, dir, func(h http.Handler) http.Handler { log.next = h; return log })
			cache := t.TempDir()
			remote, err := OpenHTTP(context.Background(), ts.URL, fastOptions(info.Root, cache))
			if err != nil {
				t.Fatal(err)
			}
			if remote.Info() != info {
				t.Fatalf("HTTP info %+v, local %+v", remote.Info(), info)
			}
			// Random indices, a repeat, the first and the last sequence.
			indices := append(randomIndices(info.NumSequences, 40, 1), 5, 5, 0, info.NumSequences-1)
			want, err := local.Sequences(context.Background(), indices)
			if err != nil {
				t.Fatal(err)
			}
			got, err := remote.Sequences(context.Background(), indices)
			if err != nil {
				t.Fatal(err)
			}
			for i := range indices {
				if len(got[i]) != int(info.SeqLen)+1 || !slices.Equal(got[i], want[i]) {
					t.Fatalf("sequence %d differs between HTTP and local", indices[i])
				}
			}
			checkRangesCoverOnly(t, local.d.Manifest, indices, log.ranges)

			// The cache now holds everything these indices need.
			ts.Close()
			again, err := OpenHTTP(context.Background(), ts.URL, fastOptions(info.Root, cache))
			if err != nil {
				t.Fatalf("reopening from the cache: %v", err)
			}
			cached, err := again.Sequences(context.Background(), indices)
			if err != nil {
				t.Fatalf("reading from the cache with the server down: %v", err)
			}
			if !slices.EqualFunc(cached, want, slices.Equal) {
				t.Fatal("cached sequences differ from local ones")
			}
		})
	}
}

// checkRangesCoverOnly asserts every requested byte range lies inside chunks
// that hold a requested sequence.
func checkRangesCoverOnly(t *testing.T, m *shard.Manifest, indices []uint64, ranges []string) {
	t.Helper()
	needed := map[string]bool{}
	for _, idx := range indices {
		loc, _ := m.Locate(idx)
		e := m.Shards[loc.Shard]
		off, n := m.ChunkSpan(e, loc.Chunk)
		for b := off; b < off+n; b += m.SequenceBytes() {
			needed[e.Name+" "+strconv.FormatInt(b, 10)] = true
		}
	}
	if len(ranges) == 0 {
		t.Fatal("no range requests were made")
	}
	for _, r := range ranges {
		var name string
		var from, to int64
		if _, err := fmt.Sscanf(r, "%s bytes=%d-%d", &name, &from, &to); err != nil {
			t.Fatalf("unexpected range request %q", r)
		}
		for b := from; b <= to; b += m.SequenceBytes() {
			if !needed[name+" "+strconv.FormatInt(b, 10)] {
				t.Fatalf("range %q fetched bytes at %d that no requested sequence needs", r, b)
			}
		}
	}
}

func TestHTTPRejectsBadServersAndData(t *testing.T) {
	// Sequence 3 lives in shard-00000 chunk 0 (bytes from 64 on).
	tests := []struct {
		name    string
		damage  func(dir string)
		wrap    func(h http.Handler) http.Handler
		pin     string
		openErr string
		readErr string
	}{
		{name: "flipped byte", damage: func(dir string) { flipByte(t, filepath.Join(dir, "shard-00000.tok"), 64+130*3+1) },
			readErr: "shard shard-00000.tok chunk 0: content does not match the manifest's hash (gave up after 3 attempts)"},
		{name: "truncated shard", damage: func(dir string) { os.Truncate(filepath.Join(dir, "shard-00000.tok"), 64+100) },
			readErr: "shard shard-00000.tok: the server's copy is 164 bytes, the manifest says 65584 (truncated or replaced)"},
		{name: "wrong manifest", pin: strings.Repeat("ab", 32), openErr: "does not match the pinned root"},
		{name: "chunk hash file altered", damage: func(dir string) { flipByte(t, filepath.Join(dir, "shard-00000.chunks"), 5) },
			readErr: "shard shard-00000.tok: chunk hash file does not match the manifest's chunk_root"},
		{name: "short read", wrap: shortReads(-1), readErr: "shard shard-00000.tok: short read"},
		{name: "range ignored", wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { r.Header.Del("Range"); h.ServeHTTP(w, r) })
		}, readErr: "shard shard-00000.tok: the server ignored the Range request"},
		{name: "server down", wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Range") != "" {
					http.Error(w, "overloaded", http.StatusServiceUnavailable)
					return
				}
				h.ServeHTTP(w, r)
			})
		}, readErr: "HTTP 503 Service Unavailable (gave up after 3 attempts)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := prepared(t, "byte", 64)
			local, err := OpenLocal(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			root := local.Info().Root
			local.Close()
			ts := serve(t, dir, tt.wrap)
			if tt.damage != nil {
				tt.damage(dir) // after the server's own checks, as if the disk went bad
			}
			pin := root
			if tt.pin != "" {
				pin = tt.pin
			}
			cache := t.TempDir()
			p, err := OpenHTTP(context.Background(), ts.URL, fastOptions(pin, cache))
			if tt.openErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.openErr) {
					t.Fatalf("OpenHTTP error = %v, want %q", err, tt.openErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			seqs, err := p.Sequences(context.Background(), []uint64{3})
			if err == nil || !strings.Contains(err.Error(), tt.readErr) {
				t.Fatalf("Sequences = %d sequences, error %v; want %q", len(seqs), err, tt.readErr)
			}
			if strings.Contains(tt.readErr, "content does not match") {
				var ie *shard.IntegrityError
				if !errors.As(err, &ie) || ie.Shard != "shard-00000.tok" || ie.Chunk != 0 {
					t.Fatalf("error %v does not carry the shard and chunk", err)
				}
			}
			// Nothing unverified reached the cache.
			if _, err := os.Stat(filepath.Join(cache, root, "shard-00000.tok.d", "0")); err == nil {
				t.Fatal("a chunk that failed verification was cached")
			}
		})
	}
}

// shortReads returns a wrapper whose first n range answers (all if n < 0)
// promise the full length but send half and drop the connection.
func shortReads(n int) func(http.Handler) http.Handler {
	var count atomic.Int64
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Range") == "" || (n >= 0 && count.Add(1) > int64(n)) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		})
	}
}

func TestHTTPRetriesTransientFailures(t *testing.T) {
	dir := prepared(t, "byte", 64)
	local, _ := OpenLocal(dir, "")
	defer local.Close()
	ts := serve(t, dir, shortReads(2))
	p, err := OpenHTTP(context.Background(), ts.URL, fastOptions(local.Info().Root, ""))
	if err != nil {
		t.Fatal(err)
	}
	indices := []uint64{3, 700}
	got, err := p.Sequences(context.Background(), indices)
	if err != nil {
		t.Fatalf("two short reads then good answers: %v", err)
	}
	want, _ := local.Sequences(context.Background(), indices)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatal("sequences after retries differ from local ones")
	}
}

func TestHTTPReplacesCorruptCacheEntries(t *testing.T) {
	dir := prepared(t, "gpt2", 64)
	local, _ := OpenLocal(dir, "")
	defer local.Close()
	root := local.Info().Root
	ts := serve(t, dir, nil)
	cache := t.TempDir()
	p, err := OpenHTTP(context.Background(), ts.URL, fastOptions(root, cache))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sequences(context.Background(), []uint64{3}); err != nil {
		t.Fatal(err)
	}
	cached := filepath.Join(cache, root, "shard-00000.tok.d", "0")
	flipByte(t, cached, 10)
	p2, err := OpenHTTP(context.Background(), ts.URL, fastOptions(root, cache))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p2.Sequences(context.Background(), []uint64{3})
	want, _ := local.Sequences(context.Background(), []uint64{3})
	if err != nil || !slices.Equal(got[0], want[0]) {
		t.Fatalf("after cache corruption: %v", err)
	}
}

func TestProvidersRejectBadRequests(t *testing.T) {
	dir := prepared(t, "byte", 64)
	local, _ := OpenLocal(dir, "")
	defer local.Close()
	n := local.Info().NumSequences
	if _, err := local.Sequences(context.Background(), []uint64{0, n}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("index %d of %d: %v", n, n, err)
	}
	if _, err := OpenLocal(dir, strings.Repeat("0", 64)); err == nil {
		t.Error("OpenLocal accepted a dataset with another root than the pinned one")
	}
	for _, u := range []string{"ftp://x/", "not a url", "http://"} {
		if _, err := OpenHTTP(context.Background(), u, HTTPOptions{Root: local.Info().Root}); err == nil {
			t.Errorf("OpenHTTP(%q) succeeded", u)
		}
	}
	for _, root := range []string{"", "../../etc", strings.Repeat("g", 64)} {
		if _, err := OpenHTTP(context.Background(), "http://127.0.0.1:1/", HTTPOptions{Root: root, CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("OpenHTTP with pinned root %q: %v", root, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close() // accepts nothing: a request would hang without the context
	if _, err := OpenHTTP(ctx, "http://"+ln.Addr().String(), fastOptions(local.Info().Root, "")); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenHTTP with a cancelled context: %v", err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[at] ^= 0x01
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInputsAndTargets(t *testing.T) {
	plain := Info{SeqLen: 2}
	in, tg, err := InputsAndTargets(plain, [][]uint32{{1, 2, 3}, {7, 151645, 200000}})
	if err != nil || !slices.Equal(in, []int32{1, 2, 7, 151645}) || !slices.Equal(tg, []int32{2, 3, 151645, 200000}) {
		t.Fatalf("InputsAndTargets = %v %v %v", in, tg, err)
	}
	for _, bad := range [][][]uint32{nil, {{1}}, {{1, 2, 3}, {1, 2}}, {{1, 2, 3, 0}}} {
		if _, _, err := InputsAndTargets(plain, bad); err == nil {
			t.Errorf("InputsAndTargets(%v) succeeded", bad)
		}
	}
	// Masked: 18 targets, two mask words; targets 0, 2 and 17 are trained.
	masked := Info{SeqLen: 18, LossMask: true}
	seq := make([]uint32, 19+2)
	for i := range 19 {
		seq[i] = uint32(10 + i)
	}
	seq[19], seq[20] = 1<<0|1<<2, 1<<1
	in, tg, err = InputsAndTargets(masked, [][]uint32{seq})
	if err != nil || len(in) != 18 || in[17] != 27 {
		t.Fatalf("masked InputsAndTargets = %v %v %v", in, tg, err)
	}
	want := slices.Repeat([]int32{Ignored}, 18)
	want[0], want[2], want[17] = 11, 13, 28
	if !slices.Equal(tg, want) {
		t.Fatalf("masked targets = %v, want %v", tg, want)
	}
	if _, _, err := InputsAndTargets(masked, [][]uint32{seq[:19]}); err == nil {
		t.Error("a masked batch without its mask words succeeded")
	}
}
