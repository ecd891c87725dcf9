package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

// serve starts a real metrics endpoint for rec and returns its base URL.
func serve(t *testing.T, rec *status.Recorder) string {
	t.Helper()
	srv, err := metrics.Listen("127.0.0.1:0", rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + srv.Addr().String()
}

// train advances recs through steps 1..n and then Finished; digest gives
// each client's digest per step.
func train(t *testing.T, recs []*status.Recorder, n uint64, digest func(client int, step uint64) string) {
	t.Helper()
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec.SetRunState("RoundTrain")
			if err := rec.SetParameters(100_000); err != nil {
				t.Error(err)
			}
			for s := uint64(1); s <= n; s++ {
				time.Sleep(15 * time.Millisecond)
				rec.SetProgress(0, s, s)
				if err := rec.RecordStep(status.StepStat{Step: s, Loss: status.Float(5 / float64(s)), Tokens: 256,
					Duration: 100 * time.Millisecond, BytesOut: 400, BytesIn: 800, Digest: digest(i, s)}); err != nil {
					t.Error(err)
				}
				if s%5 == 0 {
					if err := rec.RecordEval(s, 5.5/float64(s)); err != nil {
						t.Error(err)
					}
				}
			}
			rec.SetRunState("Finished")
		}()
	}
	wg.Wait()
}

func TestWatchUntilFinished(t *testing.T) {
	recs := []*status.Recorder{status.NewRecorder("demo", status.Options{}), status.NewRecorder("demo", status.Options{})}
	urls := []string{"a=" + serve(t, recs[0]), "b=" + serve(t, recs[1]) + "/"}
	plot := filepath.Join(t.TempDir(), "loss.png")
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), append([]string{"-interval", "20ms", "-timeout", "60s", "-plot", plot}, urls...), &out, &errOut)
	}()
	train(t, recs, 20, func(_ int, s uint64) string { return fmt.Sprintf("%016x", s*7) })
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
	}
	text := out.String()
	for _, name := range []string{"a", "b"} {
		for s := 1; s <= 20; s++ {
			prefix := fmt.Sprintf("[%s] step %d  loss", name, s)
			if n := strings.Count(text, prefix); n != 1 {
				t.Errorf("%q printed %d times", prefix, n)
			}
		}
		if !strings.Contains(text, "["+name+"] run demo: Finished after 20 steps") {
			t.Errorf("no summary for %s", name)
		}
	}
	for _, want := range []string{"held-out 0.2750@20", "ratio 1000.0x", "digests: 20 steps compared across clients, 0 mismatched", "loss plot: " + plot} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("plot: %v", err)
	}
}

func TestWatchReportsDigestMismatch(t *testing.T) {
	recs := []*status.Recorder{status.NewRecorder("r", status.Options{}), status.NewRecorder("r", status.Options{})}
	urls := []string{"a=" + serve(t, recs[0]), "b=" + serve(t, recs[1])}
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), append([]string{"-interval", "20ms", "-timeout", "60s"}, urls...), &out, &errOut)
	}()
	train(t, recs, 6, func(c int, s uint64) string {
		if c == 1 && s == 4 {
			return "bad0"
		}
		return fmt.Sprintf("%04x", s)
	})
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "differ between clients at 1 steps") {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "DIGEST MISMATCH at step 4") {
		t.Fatalf("mismatch not printed:\n%s", out.String())
	}
}

func TestWatchTimesOutOnUnreachableClient(t *testing.T) {
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), []string{"-interval", "20ms", "-timeout", "300ms", "http://127.0.0.1:1"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("err = %v", err)
	}
	if n := strings.Count(errOut.String(), "unreachable"); n != 1 {
		t.Fatalf("unreachable reported %d times:\n%s", n, errOut.String())
	}
	if !strings.Contains(out.String(), "never reachable") {
		t.Fatalf("summary: %s", out.String())
	}
}

func TestWatchRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "at least one client URL"},
		{[]string{"localhost:9000"}, "not an http(s) URL"},
		{[]string{"ftp://x"}, "not an http(s) URL"},
		{[]string{"a=http://x:1", "a=http://y:1"}, "given twice"},
		{[]string{"=http://x:1"}, "empty"},
		{[]string{"-interval", "0s", "http://x:1"}, "-interval must be positive"},
		{[]string{"-timeout", "-1s", "http://x:1"}, "-timeout must not be negative"},
		{[]string{"-bogus", "http://x:1"}, "flag provided but not defined"},
		{[]string{"-rpc", "http://127.0.0.1:8899", "http://x:1"}, "-rpc and -run-id go together"},
		{[]string{"-run-id", "demo", "http://x:1"}, "-rpc and -run-id go together"},
		{[]string{"-signer", "a=11111111111111111111111111111111", "a=http://x:1"}, "-signer needs -rpc"},
		{[]string{"-signer", "a=notakey", "a=http://x:1"}, "want NAME=PUBKEY"},
		{[]string{"-signer", "a", "a=http://x:1"}, "want NAME=PUBKEY"},
		{[]string{"-rpc", "http://127.0.0.1:1", "-run-id", "demo", "-signer", "b=11111111111111111111111111111111", "a=http://x:1"}, `no client is named "b"`},
	} {
		var out, errOut syncbuf.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestWatchRejectsJunkStatus(t *testing.T) {
	// A server that answers /status with something else is reported, not trusted.
	srvURL := serveJunk(t)
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), []string{"-interval", "20ms", "-timeout", "200ms", srvURL}, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "not a status snapshot") {
		t.Fatalf("err = %v, stderr %q", err, errOut.String())
	}
}

func serveJunk(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"steps": "not a list"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
