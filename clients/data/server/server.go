// Package server serves a dataset directory over HTTP to data providers:
// GET and HEAD of the manifest, the shards and their chunk hash files, with
// Range requests, and nothing else.
package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/httpserve"
)

// Server is an http.Handler for one dataset.
type Server struct {
	dir   string
	m     *shard.Manifest
	etags map[string]string // served file name -> strong ETag
	log   *slog.Logger
}

// New checks the dataset in dir (manifest consistency and shard sizes; with
// verify, every byte) and returns a handler that serves it.
func New(ctx context.Context, dir string, verify bool, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d, err := shard.Open(dir, "")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if verify {
		if err := d.Verify(ctx); err != nil {
			return nil, err
		}
	}
	m := d.Manifest
	s := &Server{dir: dir, m: m, log: log, etags: map[string]string{shard.ManifestName: `"` + m.Root + `"`}}
	for _, e := range m.Shards {
		s.etags[e.Name] = `"` + e.SHA256 + `"`
		s.etags[shard.ChunksName(e.Name)] = `"` + e.ChunkRoot + `"`
	}
	return s, nil
}

// Manifest is the manifest of the dataset being served.
func (s *Server) Manifest() *shard.Manifest { return s.m }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/")
	etag, ok := s.etags[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		s.log.Error("dataset file missing", "file", name, "err", err)
		http.Error(w, "file unavailable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, "file unavailable", http.StatusInternalServerError)
		return
	}
	// The content of every name is fixed by the root, so it may be cached
	// forever; the strong ETag makes If-Range safe.
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	if name == shard.ManifestName {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	s.log.Debug("serving", "file", name, "range", r.Header.Get("Range"), "remote", r.RemoteAddr)
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// Serve serves h on ln until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	return httpserve.Serve(ctx, ln, h, "data server")
}
