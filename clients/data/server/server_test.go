package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/data/shard"
)

func testDataset(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ds")
	w, err := shard.NewWriter(out, shard.Params{Tokenizer: "byte", VocabSize: 256, EOT: 0, SeqLen: 7, SeqsPerChunk: 2, SeqsPerShard: 4})
	if err != nil {
		t.Fatal(err)
	}
	doc := make([]uint32, 100)
	for i := range doc {
		doc[i] = uint32(i%250 + 1)
	}
	if err := w.AddDocument(doc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServesOnlyDatasetFilesWithRanges(t *testing.T) {
	dir := testDataset(t)
	s, err := New(context.Background(), dir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("not for clients"), 0o644)
	ts := httptest.NewServer(s)
	defer ts.Close()
	shardBytes, _ := os.ReadFile(filepath.Join(dir, "shard-00000.tok"))
	tests := []struct {
		method, path, rangeHdr string
		wantStatus             int
		wantBody               string
	}{
		{"GET", "/manifest.json", "", 200, ""},
		{"GET", "/shard-00000.tok", "bytes=64-79", 206, string(shardBytes[64:80])},
		{"HEAD", "/shard-00000.tok", "", 200, ""},
		{"GET", "/shard-00000.chunks", "", 200, ""},
		{"GET", "/shard-00000.tok", "bytes=100000-", 416, ""},
		{"GET", "/secret.txt", "", 404, ""},
		{"GET", "/../manifest.json", "", 404, ""},
		{"GET", "/", "", 404, ""},
		{"POST", "/manifest.json", "", 405, ""},
		{"DELETE", "/shard-00000.tok", "", 405, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
		if tt.rangeHdr != "" {
			req.Header.Set("Range", tt.rangeHdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("%s %s (%s): status %d, want %d", tt.method, tt.path, tt.rangeHdr, resp.StatusCode, tt.wantStatus)
		}
		if tt.wantBody != "" && string(body) != tt.wantBody {
			t.Errorf("%s %s (%s): wrong body", tt.method, tt.path, tt.rangeHdr)
		}
		if tt.wantStatus < 300 && !strings.HasPrefix(resp.Header.Get("ETag"), `"`) {
			t.Errorf("%s %s: no strong ETag", tt.method, tt.path)
		}
	}
}

func TestNewRejectsDamagedDatasets(t *testing.T) {
	dir := testDataset(t)
	path := filepath.Join(dir, "shard-00001.tok")
	raw, _ := os.ReadFile(path)
	raw[70] ^= 0xff
	os.WriteFile(path, raw, 0o644)
	if _, err := New(context.Background(), dir, false, nil); err != nil {
		t.Fatalf("without verify, only sizes are checked: %v", err)
	}
	if _, err := New(context.Background(), dir, true, nil); err == nil || !strings.Contains(err.Error(), "shard-00001.tok") {
		t.Fatalf("New with verify on a flipped byte: %v", err)
	}
	os.Truncate(path, 10)
	if _, err := New(context.Background(), dir, false, nil); err == nil || !strings.Contains(err.Error(), "shard-00001.tok") {
		t.Fatalf("New on a truncated shard: %v", err)
	}
}

func TestServeShutsDownWithContext(t *testing.T) {
	s, err := New(context.Background(), testDataset(t), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/manifest.json")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET manifest: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
