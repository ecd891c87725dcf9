package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/httpserve"
)

// DefaultMaxSize is the largest upload a Server accepts when
// ServerOptions.MaxSize is 0.
const DefaultMaxSize = 4 << 30

// uploadStallTimeout drops an upload whose body has sent nothing for this
// long, so a stalled client cannot hold a connection and a temporary file.
const uploadStallTimeout = time.Minute

// ServerOptions configure a Server.
type ServerOptions struct {
	MaxSize int64        // largest file accepted; 0: DefaultMaxSize
	Token   string       // bearer token required for PUT; "": uploads are open
	Log     *slog.Logger // nil: no logs
}

// Server is an http.Handler over a directory of checkpoints. URL paths have
// the form [<prefix>/...]<revision>.safetensors, the prefix segments mapping
// to subdirectories (so one server can hold many runs' repos). GET and HEAD
// serve files to anyone; PUT stores one after checking that the body's
// SHA-256 is the revision in its name.
type Server struct {
	root    *os.Root
	maxSize int64
	token   []byte
	log     *slog.Logger
}

// NewServer serves dir, which must exist. It removes temporary files that
// interrupted uploads left behind, so one directory must have one server.
func NewServer(dir string, opts ServerOptions) (*Server, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("hub directory: %w", err)
	}
	s := &Server{root: root, maxSize: orDefault(opts.MaxSize, DefaultMaxSize), log: opts.Log}
	if opts.Token != "" {
		s.token = []byte(opts.Token)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	err = fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && isTempName(e.Name()) {
			s.log.Info("removing an interrupted upload", "file", p)
			return root.Remove(p)
		}
		return nil
	})
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("hub directory %s: %w", dir, err)
	}
	return s, nil
}

// Close releases the directory.
func (s *Server) Close() error { return s.root.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, r)
	case http.MethodPut:
		s.put(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	name, rev, ok := resolve(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := s.root.Open(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot open a checkpoint", "file", name, "err", err)
		}
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	// A name is its content's hash, so it may be cached forever and the
	// strong ETag makes resumed (Range + If-Range) downloads safe.
	w.Header().Set("ETag", `"`+rev+`"`)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

func (s *Server) put(w http.ResponseWriter, r *http.Request) {
	if s.token != nil {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), s.token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="psyche hub"`)
			http.Error(w, "uploads need this hub's bearer token", http.StatusUnauthorized)
			return
		}
	}
	name, rev, ok := resolve(r.URL.Path)
	if !ok {
		http.Error(w, "a hub stores files named [<prefix>/]<64 lowercase hex digits of their sha256>.safetensors", http.StatusBadRequest)
		return
	}
	if r.ContentLength > s.maxSize {
		http.Error(w, fmt.Sprintf("the file is %d bytes; this hub takes at most %d", r.ContentLength, s.maxSize), http.StatusRequestEntityTooLarge)
		return
	}
	if st, err := s.root.Stat(name); err == nil && st.Mode().IsRegular() {
		// Stored files were verified on the way in: same name, same bytes.
		w.WriteHeader(http.StatusOK)
		return
	}
	status, err := s.store(w, r, name, rev)
	if err != nil {
		s.log.Warn("upload refused", "file", name, "remote", r.RemoteAddr, "status", status, "err", err)
		http.Error(w, err.Error(), status)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// store streams the body to a temporary file beside name and renames it into
// place once its hash is rev; on failure nothing is left and the status says
// why.
func (s *Server) store(w http.ResponseWriter, r *http.Request, name, rev string) (status int, err error) {
	dir := path.Dir(name)
	if err := s.root.MkdirAll(dir, 0o755); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("creating the repo directory: %w", err)
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	tmpName := path.Join(dir, "."+rev+"."+hex.EncodeToString(suffix[:])+".part")
	f, err := s.root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return http.StatusInternalServerError, fmt.Errorf("creating a temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			s.root.Remove(tmpName)
		}
	}()
	body := http.MaxBytesReader(w, r.Body, s.maxSize)
	rc := http.NewResponseController(w)
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		// A per-read deadline: a large upload may take long, a silent one may not.
		rc.SetReadDeadline(time.Now().Add(uploadStallTimeout))
		k, rerr := body.Read(buf)
		if k > 0 {
			if _, err := f.Write(buf[:k]); err != nil {
				return http.StatusInsufficientStorage, fmt.Errorf("writing: %w", err)
			}
			h.Write(buf[:k])
			n += int64(k)
		}
		if rerr == io.EOF {
			break
		}
		if mb := (*http.MaxBytesError)(nil); errors.As(rerr, &mb) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("the file is larger than the %d bytes this hub takes", s.maxSize)
		}
		if rerr != nil {
			return http.StatusBadRequest, fmt.Errorf("reading the body after %d bytes: %w", n, rerr)
		}
	}
	rc.SetReadDeadline(time.Time{})
	if got := hex.EncodeToString(h.Sum(nil)); got != rev {
		return http.StatusBadRequest, fmt.Errorf("the body's sha256 is %s, but its name says %s; nothing stored", got, rev)
	}
	if err := f.Sync(); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("syncing: %w", err)
	}
	if err := f.Close(); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("closing: %w", err)
	}
	if err := s.root.Rename(tmpName, name); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("storing: %w", err)
	}
	if d, err := s.root.Open(dir); err == nil {
		err = syncDir(d)
		d.Close()
		if err != nil {
			return http.StatusInternalServerError, fmt.Errorf("syncing the directory: %w", err)
		}
	}
	s.log.Info("checkpoint stored", "file", name, "bytes", n, "remote", r.RemoteAddr)
	return http.StatusCreated, nil
}

// resolve maps a URL path to a file name under the root and its revision.
// Only [<segment>/...]<revision>.safetensors resolves, where a segment is
// letters, digits, '.', '_' or '-' and does not start with '.': that rules
// out "..", hidden and temporary files, and absolute or empty components.
func resolve(urlPath string) (name, rev string, ok bool) {
	segs := strings.Split(strings.TrimPrefix(urlPath, "/"), "/")
	rev, ok = strings.CutSuffix(segs[len(segs)-1], Ext)
	if !ok || !isRevision(rev) {
		return "", "", false
	}
	for _, seg := range segs[:len(segs)-1] {
		if !validSegment(seg) {
			return "", "", false
		}
	}
	return path.Join(segs...), rev, true
}

func validSegment(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// isTempName recognizes the temporary files of store: .<revision>.<hex>.part.
func isTempName(name string) bool {
	return len(name) > RevisionLen+2 && name[0] == '.' && isRevision(name[1:1+RevisionLen]) &&
		name[1+RevisionLen] == '.' && strings.HasSuffix(name, ".part")
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (uploads
// still running after a few seconds are cut; their clients retry, and the
// store removes their temporary files).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	return httpserve.Serve(ctx, ln, h, "hub server")
}
