// Package comptest holds what the competition packages' tests share: a real
// byte-level dataset of Markov text and a real checkpoint hub.
package comptest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Dataset prepares (clients/data/prepare, byte tokenizer) docs documents of
// 4 KiB of Markov text into sequences of seqLen tokens and opens it. It
// returns the provider and the dataset's directory.
func Dataset(t testing.TB, docs, seqLen int) (provider.Provider, string) {
	t.Helper()
	in := t.TempDir()
	for i := range docs {
		text := trainer.MarkovText(uint64(1000+i), 4096)
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("doc%02d.txt", i)), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	split, err := corpus.NewSplit("all", corpus.DefaultLastTrainYear)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "data")
	if _, err := prepare.Run(context.Background(), prepare.Options{Input: in, Split: split, Tokenizer: tokenizer.ByteName, SeqLen: uint32(seqLen), Out: out}); err != nil {
		t.Fatal(err)
	}
	p, err := provider.OpenLocal(out, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, out
}

// Hub is a real hub server (hub.Server over httptest) with repo Repo.
type Hub struct {
	*httptest.Server
	Dir  string
	Repo string
}

// StartHub starts a hub whose repo is "<url>/comp".
func StartHub(t testing.TB) *Hub {
	t.Helper()
	dir := t.TempDir()
	s, err := hub.NewServer(dir, hub.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return &Hub{Server: srv, Dir: dir, Repo: srv.URL + "/comp"}
}

// Upload puts the file at path on the hub, as a miner does, and returns its revision.
func (h *Hub) Upload(t testing.TB, path string) string {
	t.Helper()
	rev, err := hub.Upload(context.Background(), h.Repo, path, hub.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
