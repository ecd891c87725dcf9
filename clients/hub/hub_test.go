package hub

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkpoint writes a small safetensors-framed file of about size bytes and
// returns its path, content and revision.
func checkpoint(t *testing.T, size int) (string, []byte, string) {
	t.Helper()
	header := []byte(`{"__metadata__":{"step":"1"}}`)
	data := make([]byte, 8, 8+len(header)+size)
	binary.LittleEndian.PutUint64(data, uint64(len(header)))
	data = append(data, header...)
	r := rand.New(rand.NewPCG(uint64(size), 1))
	for range size {
		data = append(data, byte(r.Uint32()))
	}
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return p, data, hex.EncodeToString(sum[:])
}

// hub is a real HTTP server over a Server, counting requests per method.
type testHub struct {
	*httptest.Server
	dir   string
	mu    sync.Mutex
	calls map[string]int
}

func startHub(t *testing.T, opts ServerOptions) *testHub {
	t.Helper()
	h := &testHub{dir: t.TempDir(), calls: map[string]int{}}
	s, err := NewServer(h.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls[r.Method]++
		h.mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *testHub) count(method string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[method]
}

// files lists every file under dir, relative, temporary ones included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var fast = FetchOptions{Attempts: 3, Backoff: 10 * time.Millisecond}

func TestUploadFetchRoundTrip(t *testing.T) {
	h := startHub(t, ServerOptions{})
	src, data, want := checkpoint(t, 3<<20)
	repo := h.URL + "/runs/demo"
	ctx := context.Background()

	rev, err := Upload(ctx, repo, src, UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rev != want {
		t.Fatalf("revision %s, want the file's sha256 %s", rev, want)
	}
	if got := files(t, h.dir); len(got) != 1 || got[0] != filepath.Join("runs", "demo", rev+Ext) {
		t.Fatalf("hub holds %v", got)
	}
	// Uploading again is success and sends nothing: HEAD finds it.
	if rev2, err := Upload(ctx, repo, src, UploadOptions{}); err != nil || rev2 != rev || h.count(http.MethodPut) != 1 {
		t.Fatalf("second upload: %s %v, %d PUTs", rev2, err, h.count(http.MethodPut))
	}
	// A PUT of a file the hub holds is 200 without a second copy.
	req, _ := http.NewRequest(http.MethodPut, repo+"/"+rev+Ext, bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("repeated PUT: %v %v", resp, err)
	}
	resp.Body.Close()

	dir := filepath.Join(t.TempDir(), "ckpt")
	path, err := Fetch(ctx, repo, rev, dir, fast)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) || path != filepath.Join(dir, rev+Ext) {
		t.Fatalf("fetched %s: %d bytes, %v", path, len(got), err)
	}
	gets := h.count(http.MethodGet)

	// A verified file in dir is used without the network, even with the hub gone.
	h.Close()
	if again, err := Fetch(ctx, repo, rev, dir, fast); err != nil || again != path {
		t.Fatalf("cached fetch: %s %v", again, err)
	}
	if h.count(http.MethodGet) != gets {
		t.Fatal("a cached fetch went to the hub")
	}
	// A cached file that lost its integrity is not trusted: it is fetched again (and here fails).
	if err := os.WriteFile(path, []byte("rot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, repo, rev, dir, FetchOptions{Attempts: 1}); err == nil {
		t.Fatal("a corrupt cached file was accepted")
	}
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("a failed fetch left %v", got)
	}
}

func TestFetchRejectsTamperedFile(t *testing.T) {
	h := startHub(t, ServerOptions{})
	src, _, _ := checkpoint(t, 4096)
	rev, err := Upload(context.Background(), h.URL, src, UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := filepath.Join(h.dir, rev+Ext)
	b, _ := os.ReadFile(stored)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(stored, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = Fetch(context.Background(), h.URL, rev, dir, fast)
	var ie *IntegrityError
	if !errors.As(err, &ie) || ie.Want != rev || ie.Got == rev || !strings.Contains(err.Error(), ie.Got) || !strings.Contains(err.Error(), rev) {
		t.Fatalf("fetching a tampered file: %v", err)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("a failed fetch left %v", got)
	}
}

func TestServerRefusesBadUploads(t *testing.T) {
	_, data, rev := checkpoint(t, 1000)
	other := strings.Repeat("ab", 32)
	cases := []struct {
		name    string
		opts    ServerOptions
		path    string
		body    io.Reader
		length  int64 // -1: chunked
		token   string
		status  int
		message string
	}{
		{"wrong hash", ServerOptions{}, "/r/" + other + Ext, bytes.NewReader(data), int64(len(data)), "", 400, "sha256 is " + rev},
		{"too large, declared", ServerOptions{MaxSize: 500}, "/" + rev + Ext, bytes.NewReader(data), int64(len(data)), "", 413, "at most 500"},
		{"too large, chunked", ServerOptions{MaxSize: 500}, "/" + rev + Ext, io.MultiReader(bytes.NewReader(data)), -1, "", 413, "larger than the 500 bytes"},
		{"no token", ServerOptions{Token: "s3cret"}, "/" + rev + Ext, bytes.NewReader(data), int64(len(data)), "", 401, "token"},
		{"wrong token", ServerOptions{Token: "s3cret"}, "/" + rev + Ext, bytes.NewReader(data), int64(len(data)), "s3cre", 401, "token"},
		{"uppercase revision", ServerOptions{}, "/" + strings.ToUpper(rev) + Ext, bytes.NewReader(data), int64(len(data)), "", 400, "64 lowercase hex"},
		{"other extension", ServerOptions{}, "/" + rev + ".bin", bytes.NewReader(data), int64(len(data)), "", 400, "64 lowercase hex"},
		{"hidden prefix", ServerOptions{}, "/.runs/" + rev + Ext, bytes.NewReader(data), int64(len(data)), "", 400, "64 lowercase hex"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := startHub(t, c.opts)
			req, _ := http.NewRequest(http.MethodPut, h.URL+c.path, c.body)
			req.ContentLength = c.length
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(msg), c.message) {
				t.Fatalf("status %d %q; want %d with %q", resp.StatusCode, msg, c.status, c.message)
			}
			if got := files(t, h.dir); len(got) != 0 {
				t.Fatalf("a refused upload left %v", got)
			}
		})
	}
}

func TestUploadNeedsToken(t *testing.T) {
	h := startHub(t, ServerOptions{Token: "s3cret"})
	src, _, _ := checkpoint(t, 100)
	ctx := context.Background()
	if _, err := Upload(ctx, h.URL, src, UploadOptions{Token: "nope"}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("upload with a wrong token: %v", err)
	}
	if h.count(http.MethodPut) != 1 {
		t.Fatalf("a refused upload was retried: %d PUTs", h.count(http.MethodPut))
	}
	rev, err := Upload(ctx, h.URL, src, UploadOptions{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	// Reading needs no token.
	if _, err := Fetch(ctx, h.URL, rev, t.TempDir(), fast); err != nil {
		t.Fatal(err)
	}
}

func TestSizeLimits(t *testing.T) {
	h := startHub(t, ServerOptions{MaxSize: 1000})
	big, _, _ := checkpoint(t, 2000)
	ctx := context.Background()
	if _, err := Upload(ctx, h.URL, big, UploadOptions{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("uploading over the hub's limit: %v", err)
	}
	small, _, rev := checkpoint(t, 900)
	if _, err := Upload(ctx, h.URL, small, UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Fetch(ctx, h.URL, rev, dir, FetchOptions{MaxSize: 500}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("fetching over the limit: %v", err)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("a refused fetch left %v", got)
	}
}

// Paths that could reach outside the hub's directory, or files that are not
// checkpoints, are refused; a symlink out of the directory does not serve.
func TestServerPaths(t *testing.T) {
	h := startHub(t, ServerOptions{})
	_, data, rev := checkpoint(t, 100)
	name := rev + Ext
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/../" + name, "/a/../../" + name, "/..%2f" + name, "/%2e%2e/" + name, "/a//" + name,
		"/" + name + "/", "/" + rev, "/", "/.." + Ext, `/a\b/` + name,
	} {
		for _, method := range []string{http.MethodGet, http.MethodPut} {
			// Raw HTTP: a Go client would clean the path before sending it.
			status := rawRequest(t, h.Listener.Addr().String(), method, p, data)
			if status != http.StatusNotFound && status != http.StatusBadRequest {
				t.Errorf("%s %s: status %d", method, p, status)
			}
		}
	}
	// The symlink resolves, but not to a place inside the hub's directory.
	addr := h.Listener.Addr().String()
	if get, put := rawRequest(t, addr, http.MethodGet, "/escape/"+name, nil), rawRequest(t, addr, http.MethodPut, "/escape/x/"+name, data); get != http.StatusNotFound || put < 400 {
		t.Errorf("through a symlink out of the directory: GET %d, PUT %d", get, put)
	}
	if err := os.Remove(filepath.Join(h.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if got := files(t, h.dir); len(got) != 0 {
		t.Fatalf("refused requests left %v", got)
	}
	if got := files(t, outside); len(got) != 1 {
		t.Fatalf("refused requests wrote outside the hub: %v", got)
	}
	resp, err := http.Get(h.URL + "/" + name)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a missing checkpoint: %v %v", resp, err)
	}
	resp.Body.Close()
	if resp, err := http.Post(h.URL+"/"+name, "application/octet-stream", bytes.NewReader(data)); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", resp, err)
	}
}

func rawRequest(t *testing.T, addr, method, target string, body []byte) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: hub\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", method, target, len(body))
	if method == http.MethodPut {
		conn.Write(body)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A transfer that stalls half way is retried and resumes where it stopped;
// a transient status is retried; a missing file is not.
func TestFetchRetries(t *testing.T) {
	src, data, rev := checkpoint(t, 64<<10)
	h := startHub(t, ServerOptions{})
	if _, err := Upload(context.Background(), h.URL, src, UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ranges []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		n := len(ranges)
		mu.Unlock()
		switch n {
		case 1: // half the file, then silence
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case 2:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			proxy(t, w, r, h.URL)
		}
	}))
	defer front.Close()
	dir := t.TempDir()
	// A stall timeout long enough that a loaded machine does not trip it
	// spuriously, and attempts to spare.
	opts := FetchOptions{Attempts: 5, Backoff: 10 * time.Millisecond, StallTimeout: time.Second}
	path, err := Fetch(context.Background(), front.URL, rev, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("the resumed file differs")
	}
	want := fmt.Sprintf("bytes=%d-", len(data)/2)
	if len(ranges) < 3 || ranges[0] != "" || ranges[1] != want || ranges[2] != want {
		t.Fatalf("requests' ranges %q; want none, then %q at least twice", ranges, want)
	}

	missing := strings.Repeat("0", 64)
	gets := h.count(http.MethodGet)
	if _, err := Fetch(context.Background(), h.URL, missing, dir, fast); !errors.Is(err, ErrNotFound) || h.count(http.MethodGet) != gets+1 {
		t.Fatalf("missing revision: %v after %d requests", err, h.count(http.MethodGet)-gets)
	}
}

// proxy forwards r to base, Range included.
func proxy(t *testing.T, w http.ResponseWriter, r *http.Request, base string) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, nil)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func TestFetchStopsOnCancel(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer hang.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	if _, err := Fetch(ctx, hang.URL, strings.Repeat("1", 64), dir, fast); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch after cancel: %v", err)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("a cancelled fetch left %v", got)
	}
}

func TestUploadRefusesNonCheckpoints(t *testing.T) {
	h := startHub(t, ServerOptions{})
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"empty":       nil,
		"text":        []byte("hello, this is not a model at all"),
		"long header": binary.LittleEndian.AppendUint64(nil, 1<<40),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, content, 0o644)
		if _, err := Upload(context.Background(), h.URL, p, UploadOptions{}); err == nil || !strings.Contains(err.Error(), "not a safetensors") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Upload(context.Background(), h.URL, dir, UploadOptions{}); err == nil {
		t.Error("a directory was uploaded")
	}
	if h.count(http.MethodPut)+h.count(http.MethodHead) != 0 {
		t.Fatal("a refused file reached the hub")
	}
}

func TestNewServerRemovesInterruptedUploads(t *testing.T) {
	dir := t.TempDir()
	rev := strings.Repeat("c", 64)
	keep := []string{filepath.Join("r", rev+Ext), filepath.Join("r", "notes.part")}
	for _, p := range append([]string{filepath.Join("r", "."+rev+".0123.part")}, keep...) {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644)
	}
	s, err := NewServer(dir, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := files(t, dir); strings.Join(got, ",") != strings.Join(keep, ",") {
		t.Fatalf("after start the directory holds %v; want %v", got, keep)
	}
	if _, err := NewServer(filepath.Join(dir, "missing"), ServerOptions{}); err == nil {
		t.Fatal("a missing directory was served")
	}
}

func TestValidation(t *testing.T) {
	rev := strings.Repeat("a", 64)
	for _, c := range []struct {
		repo, rev, want string
	}{
		{"http://h:1/runs/x", rev, ""},
		{"https://h/", rev, ""},
		{"file:///srv/models/run", rev, ""},
		{"file://localhost/srv", rev, ""},
		{"ftp://h/x", rev, "http://, https:// or file://"},
		{"h/x", rev, "http://, https:// or file://"},
		{"file://h/srv", rev, "absolute path"},
		{"file:srv", rev, "absolute path"},
		{"file:///srv/../etc", rev, ".."},
		{"file:///srv//x", rev, "repeated slashes"},
		{"file:///srv?a=1", rev, "query"},
		{"http:///x", rev, "no host"},
		{"http://h/x?a=1", rev, "query"},
		{"http://h/x?", rev, "query"},
		{"http://h/x#f", rev, "fragment"},
		{"http://u:p@h/x", rev, "credentials"},
		{"http://h/x", rev[:63], "64 lowercase hex"},
		{"http://h/x", strings.ToUpper(rev), "64 lowercase hex"},
		{"http://h/x", rev[:63] + "g", "64 lowercase hex"},
		{"http://h/x", "", "64 lowercase hex"},
	} {
		u, err := FileURL(c.repo, c.rev)
		if c.want == "" {
			if err != nil || !strings.HasSuffix(u, "/"+rev+Ext) || strings.Contains(u[len("file:///"):], "//") {
				t.Errorf("%s %s: %s %v", c.repo, c.rev, u, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v; want an error with %q", c.repo, c.rev, err, c.want)
		}
		if _, ferr := Fetch(context.Background(), c.repo, c.rev, t.TempDir(), fast); ferr == nil {
			t.Errorf("%s %q: fetch accepted it", c.repo, c.rev)
		}
	}
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512 MiB": 512 << 20, "10MB": 10e6, "123": 123, "7B": 7} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "1.5GiB", "GiB", "4 gib", "99999999999TiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}

// A file:// repo: uploads land as <rev>.safetensors, fetches copy them (or a
// Hugging Face directory's model.safetensors) verified, and a file whose
// hash is not the revision is refused with the directory left as it was.
func TestLocalRepo(t *testing.T) {
	ctx := context.Background()
	src, data, rev := checkpoint(t, 3000)
	root := filepath.Join(t.TempDir(), "repo")
	repo := "file://" + root
	got, err := Upload(ctx, repo, src, UploadOptions{})
	if err != nil || got != rev {
		t.Fatalf("upload: %s %v", got, err)
	}
	if fs := files(t, root); len(fs) != 1 || fs[0] != rev+Ext {
		t.Fatalf("repo holds %v", fs)
	}
	if again, err := Upload(ctx, repo, src, UploadOptions{}); err != nil || again != rev {
		t.Fatalf("second upload: %s %v", again, err)
	}
	dir := t.TempDir()
	p, err := Fetch(ctx, repo, rev, dir, fast)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, data) {
		t.Fatal("fetched bytes differ")
	}

	// A Hugging Face directory: model.safetensors is found by its hash.
	hf := t.TempDir()
	if err := os.WriteFile(filepath.Join(hf, HFWeightsFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Fetch(ctx, "file://"+hf, rev, t.TempDir(), fast); err != nil || filepath.Base(p) != rev+Ext {
		t.Fatalf("fetch from an HF directory: %s %v", p, err)
	}
	other := strings.Repeat("0", 64)
	dir = t.TempDir()
	var ie *IntegrityError
	if _, err := Fetch(ctx, "file://"+hf, other, dir, fast); !errors.As(err, &ie) || ie.Want != other || ie.Got != rev {
		t.Fatalf("fetch of another revision: %v", err)
	}
	if _, err := Fetch(ctx, "file://"+t.TempDir(), rev, dir, fast); !errors.Is(err, ErrNotFound) {
		t.Fatalf("fetch from an empty directory: %v", err)
	}
	if fs := files(t, dir); len(fs) != 0 {
		t.Fatalf("failed fetches left %v", fs)
	}
	if _, err := Fetch(ctx, "file://"+hf, rev, dir, FetchOptions{MaxSize: 100}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("size limit: %v", err)
	}
}
