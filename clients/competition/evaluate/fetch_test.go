package evaluate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/hub"
)

// wantInvalid fails unless err is an *Invalid with reason.
func wantInvalid(t *testing.T, what string, err error, reason string) {
	t.Helper()
	inv, ok := AsInvalid(err)
	switch {
	case !ok:
		t.Errorf("%s: got %v, want an invalid model (%s)", what, err, reason)
	case inv.Reason != reason:
		t.Errorf("%s: invalid because %q (%v), want %q", what, inv.Reason, inv, reason)
	}
}

// wantOrdinary fails unless err is an error that is not an *Invalid.
func wantOrdinary(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
	} else if inv, ok := AsInvalid(err); ok {
		t.Errorf("%s: the model was marked invalid (%v); this failure is the validator's", what, inv)
	}
}

func TestFetchVerifiesTheCommitmentAndCaches(t *testing.T) {
	h := startHub(t)
	path := modelFile(t, newModel(t, tinyGPT2, 1, 0), "a")
	h.upload(t, path)
	raw, _ := os.ReadFile(path)
	c := constraintsFor(tinyGPT2)
	sub := submit(t, 0, path, h.Repo, minerKey(0))

	dir := t.TempDir()
	got, n, err := Fetch(context.Background(), sub, dir, c, quickFetch)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(raw)) {
		t.Errorf("downloaded %d bytes, the file has %d", n, len(raw))
	}
	if fetched, _ := os.ReadFile(got); !bytes.Equal(fetched, raw) {
		t.Error("the fetched file differs from the uploaded one")
	}
	if err := Check(got, sub, c); err != nil {
		t.Fatalf("Check: %v", err)
	}
	h.Close() // a cached copy needs no hub
	if again, n, err := Fetch(context.Background(), sub, dir, c, quickFetch); err != nil || n != 0 || again != got {
		t.Errorf("second fetch: %s, %d bytes, %v; want %s from the cache, 0 bytes", again, n, err, got)
	}

	// A file:// repo, as runs name a shared directory.
	local := t.TempDir()
	rev := hex.EncodeToString(sub.Revision[:])
	if err := os.WriteFile(filepath.Join(local, rev+hub.Ext), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	sub.Repo = "file://" + local
	if _, n, err := Fetch(context.Background(), sub, t.TempDir(), c, quickFetch); err != nil || n != int64(len(raw)) {
		t.Errorf("file:// repo: %d bytes, %v", n, err)
	}
}

// A miner who copies another's file and commits it under its own key
// passes (the copy is the later commit, which epsilon handicaps); one who
// commits the original's commitment under its own key fails, fetched or
// cached.
func TestCopyUnderAnotherKeyFailsOnlyWithTheOriginalCommitment(t *testing.T) {
	h := startHub(t)
	path := modelFile(t, newModel(t, tinyGPT2, 1, 0), "a")
	h.upload(t, path)
	raw, _ := os.ReadFile(path)
	c := constraintsFor(tinyGPT2)
	orig := submit(t, 0, path, h.Repo, minerKey(0))

	stolen := orig
	stolen.Index, stolen.Miner = 1, minerKey(1) // the original's commitment, another key
	_, n, err := Fetch(context.Background(), stolen, t.TempDir(), c, quickFetch)
	wantInvalid(t, "a copy with the original's commitment", err, ReasonCommitmentMismatch)
	if n != int64(len(raw)) {
		t.Errorf("the refused copy downloaded %d bytes, the file has %d", n, len(raw))
	}

	recommitted := stolen
	recommitted.Commitment = Commitment(raw, minerKey(1))
	if recommitted.Commitment == orig.Commitment {
		t.Fatal("two keys, one commitment")
	}
	dir := t.TempDir()
	if _, _, err := Fetch(context.Background(), recommitted, dir, c, quickFetch); err != nil {
		t.Errorf("a copy committed under the copier's key: %v", err)
	}
	// Now cached: the same verdicts without the network.
	if _, n, err := Fetch(context.Background(), orig, dir, c, quickFetch); err != nil || n != 0 {
		t.Errorf("the original, cached: %d bytes, %v", n, err)
	}
	_, _, err = Fetch(context.Background(), stolen, dir, c, quickFetch)
	wantInvalid(t, "a cached copy with the original's commitment", err, ReasonCommitmentMismatch)
}

// Every reason Fetch gives, each from a real hub's behaviour.
func TestFetchInvalidReasons(t *testing.T) {
	h := startHub(t)
	path := modelFile(t, newModel(t, tinyGPT2, 1, 0), "a")
	c := constraintsFor(tinyGPT2)
	sub := submit(t, 0, path, h.Repo, minerKey(0)) // not uploaded yet
	fetch := func(s Submission) error {
		_, _, err := Fetch(context.Background(), s, t.TempDir(), c, quickFetch)
		return err
	}

	wantInvalid(t, "a revision the hub lacks", fetch(sub), ReasonNotFound)
	empty := sub
	empty.Repo = "file://" + t.TempDir()
	wantInvalid(t, "a file:// repo without the file", fetch(empty), ReasonNotFound)

	for _, repo := range []string{"ftp://host/comp", "http://user:pw@host/comp", "http://host/comp?x=1", "not a url", "file://relative/dir"} {
		s := sub
		s.Repo = repo
		wantInvalid(t, "repo "+repo, fetch(s), ReasonBadRepo)
	}

	zero := sub
	zero.Params = 0
	wantInvalid(t, "0 parameters declared", fetch(zero), ReasonParams)
	over := sub
	over.Params = c.MaxParams + 1
	wantInvalid(t, "more parameters declared than max_params", fetch(over), ReasonTooLarge)

	// The hub serves other bytes under the revision's name.
	rev := hex.EncodeToString(sub.Revision[:])
	served := filepath.Join(h.Dir, "comp", rev+hub.Ext)
	if err := os.MkdirAll(filepath.Dir(served), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	tampered := bytes.Clone(raw)
	tampered[len(tampered)-1] ^= 1
	if err := os.WriteFile(served, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, "tampered content", fetch(sub), ReasonRevisionMismatch)
	os.Remove(served)

	// A file over MaxFileSize of its declared parameters: a model of 16
	// parameters may have 16 MiB of header and 64 bytes of data.
	big := make([]byte, MaxFileSize(16)+1)
	copy(big, raw)
	bigSum := sha256.Sum256(big)
	if err := os.WriteFile(filepath.Join(h.Dir, "comp", hex.EncodeToString(bigSum[:])+hub.Ext), big, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := sub
	huge.Revision, huge.Params = bigSum, 16
	wantInvalid(t, "a file over the size bound", fetch(huge), ReasonTooLarge)

	h.upload(t, path)
	if err := fetch(sub); err != nil {
		t.Fatalf("the uploaded model: %v", err)
	}

	// Hubs that stay down or refuse, through the hub's retries.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/comp"
	ln.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) }))
	defer refusing.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	for what, repo := range map[string]string{"a closed port": closed, "a hub answering 403": refusing.URL, "a hub answering 503": failing.URL} {
		s := sub
		s.Repo = repo
		wantInvalid(t, what, fetch(s), ReasonUnavailable)
	}

	// Hubs too slow for the validator's own timeouts (not its context's):
	// one that never answers, under an http.Client.Timeout (an error that
	// reads as context.DeadlineExceeded), and one that stalls mid-file.
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer silent.Close()
	stalling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer stalling.Close()
	for what, o := range map[string]struct {
		repo string
		opts hub.FetchOptions
	}{
		"a hub past the client's timeout": {silent.URL, hub.FetchOptions{Attempts: 2, Backoff: time.Millisecond, Client: &http.Client{Timeout: 100 * time.Millisecond}}},
		"a transfer that stalls":          {stalling.URL, hub.FetchOptions{Attempts: 2, Backoff: time.Millisecond, StallTimeout: 100 * time.Millisecond}},
	} {
		s := sub
		s.Repo = o.repo
		_, _, err := Fetch(context.Background(), s, t.TempDir(), c, o.opts)
		wantInvalid(t, what, err, ReasonUnavailable)
	}
}

// Cancellation, and the validator's own filesystem, never make a model
// invalid.
func TestFetchFailuresOfTheValidatorAreNotInvalid(t *testing.T) {
	h := startHub(t)
	path := modelFile(t, newModel(t, tinyGPT2, 1, 0), "a")
	h.upload(t, path)
	c := constraintsFor(tinyGPT2)
	sub := submit(t, 0, path, h.Repo, minerKey(0))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := Fetch(ctx, sub, t.TempDir(), c, quickFetch)
	wantOrdinary(t, "a cancelled context", err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}

	// A hub that stalls until the round's deadline passes.
	stalling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stalling.Close()
	s := sub
	s.Repo = stalling.URL
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err = Fetch(ctx, s, t.TempDir(), c, quickFetch)
	wantOrdinary(t, "a deadline during the transfer", err)

	// Cancelled while waiting to retry a failing hub.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	s.Repo = failing.URL
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = Fetch(ctx, s, t.TempDir(), c, hub.FetchOptions{Attempts: 5, Backoff: time.Second})
	wantOrdinary(t, "a deadline between retries", err)

	// The download directory cannot exist (its parent is a file).
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, _, err = Fetch(context.Background(), sub, filepath.Join(file, "models"), c, quickFetch)
	wantOrdinary(t, "an unusable download directory", err)

	// A cached copy that cannot be read.
	dir := t.TempDir()
	rev := hex.EncodeToString(sub.Revision[:])
	if err := os.Mkdir(filepath.Join(dir, rev+hub.Ext), 0o755); err != nil { // a directory where the file goes
		t.Fatal(err)
	}
	_, _, err = Fetch(context.Background(), sub, dir, c, quickFetch)
	wantOrdinary(t, "an unreadable cache entry", err)
}
