package p2p

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Manifest describes a model (parameters or a checkpoint) as fixed-size
// chunks with their hashes. Its Root is what the run agrees on (on-chain or
// by witnesses); every chunk a joiner downloads is checked against it.
type Manifest struct {
	ChunkSize uint32
	TotalSize uint64
	Chunks    []Hash
}

// Manifest bounds: 16 MiB chunks and 2^18 of them cover 4 TiB, while a
// manifest stays under 9 MB.
const (
	MaxChunkSize      = 16 << 20
	MaxManifestChunks = 1 << 18
	// DefaultChunkSize balances parallelism against per-request overhead.
	DefaultChunkSize = 1 << 20
	manifestVersion  = 1
	manifestHeader   = 1 + 4 + 8 + 4
	maxManifestBytes = manifestHeader + MaxManifestChunks*len(Hash{})
	modelRequestSize = 1 + len(Hash{}) + 4
	// peerFailureLimit is how many failed chunk requests in a row make a joiner
	// stop asking a peer during one fetch.
	peerFailureLimit = 3
)

const (
	modelReqManifest = 1
	modelReqChunk    = 2
)

// BuildManifest hashes size bytes of r in chunks of chunkSize.
func BuildManifest(r io.ReaderAt, size int64, chunkSize int) (*Manifest, error) {
	if chunkSize <= 0 || chunkSize > MaxChunkSize {
		return nil, fmt.Errorf("build manifest: chunk size %d is outside 1..%d", chunkSize, MaxChunkSize)
	}
	if size < 0 {
		return nil, fmt.Errorf("build manifest: negative size %d", size)
	}
	count := (size + int64(chunkSize) - 1) / int64(chunkSize)
	if count > MaxManifestChunks {
		return nil, fmt.Errorf("build manifest: %d bytes need %d chunks of %d, more than %d; use larger chunks", size, count, chunkSize, MaxManifestChunks)
	}
	m := &Manifest{ChunkSize: uint32(chunkSize), TotalSize: uint64(size), Chunks: make([]Hash, count)}
	buf := make([]byte, chunkSize)
	for i := range m.Chunks {
		off, n := m.chunkRange(i)
		if _, err := r.ReadAt(buf[:n], off); err != nil && !(errors.Is(err, io.EOF) && n > 0) {
			return nil, fmt.Errorf("build manifest: read chunk %d: %w", i, err)
		}
		m.Chunks[i] = HashOf(buf[:n])
	}
	return m, nil
}

// chunkRange is the byte offset and length of chunk i.
func (m *Manifest) chunkRange(i int) (int64, int) {
	off := int64(i) * int64(m.ChunkSize)
	n := int64(m.ChunkSize)
	if rest := int64(m.TotalSize) - off; rest < n {
		n = rest
	}
	return off, int(n)
}

// Marshal encodes the manifest; its sha256 is the root hash.
func (m *Manifest) Marshal() []byte {
	b := make([]byte, 0, manifestHeader+len(m.Chunks)*len(Hash{}))
	b = append(b, manifestVersion)
	b = binary.BigEndian.AppendUint32(b, m.ChunkSize)
	b = binary.BigEndian.AppendUint64(b, m.TotalSize)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Chunks)))
	for _, h := range m.Chunks {
		b = append(b, h[:]...)
	}
	return b
}

// Root is the hash that names the manifest.
func (m *Manifest) Root() Hash { return HashOf(m.Marshal()) }

// UnmarshalManifest decodes and checks a manifest: the chunk count must be
// exactly what the total and chunk sizes imply.
func UnmarshalManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("manifest of %d bytes exceeds %d", len(data), maxManifestBytes)
	}
	r := reader{buf: data}
	version := r.byte()
	m := &Manifest{ChunkSize: r.u32(), TotalSize: r.u64()}
	count := r.u32()
	if r.err != nil {
		return nil, fmt.Errorf("decode manifest: %w", r.err)
	}
	if version != manifestVersion {
		return nil, fmt.Errorf("unknown manifest version %d", version)
	}
	if m.ChunkSize == 0 || m.ChunkSize > MaxChunkSize {
		return nil, fmt.Errorf("manifest chunk size %d is outside 1..%d", m.ChunkSize, MaxChunkSize)
	}
	want := (m.TotalSize + uint64(m.ChunkSize) - 1) / uint64(m.ChunkSize)
	if uint64(count) != want || count > MaxManifestChunks {
		return nil, fmt.Errorf("manifest lists %d chunks, but %d bytes in chunks of %d need %d", count, m.TotalSize, m.ChunkSize, want)
	}
	m.Chunks = make([]Hash, count)
	for i := range m.Chunks {
		copy(m.Chunks[i][:], r.bytes(len(Hash{})))
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	return m, nil
}

type sharedModel struct {
	manifest []byte
	m        *Manifest
	src      io.ReaderAt
	// lastServed is when a manifest or chunk of it was last served, in Unix
	// nanoseconds; 0 means never.
	lastServed atomic.Int64
}

// maxRetiredModels bounds how many stopped roots a node remembers, so that it
// can answer "no longer shared" rather than "unknown" for them.
const maxRetiredModels = 256

// retiredModels holds the roots most recently passed to StopSharing, with
// when each was last served. Node.mu guards it; a root is never both shared
// and retired.
type retiredModels struct {
	lastServed map[Hash]int64
	order      []Hash // oldest first
}

func (r *retiredModels) add(root Hash, lastServed int64) {
	if r.lastServed == nil {
		r.lastServed = map[Hash]int64{}
	}
	r.lastServed[root] = lastServed
	r.order = append(r.order, root)
	if len(r.order) > maxRetiredModels {
		delete(r.lastServed, r.order[0])
		r.order = r.order[1:]
	}
}

func (r *retiredModels) remove(root Hash) (lastServed int64, ok bool) {
	if lastServed, ok = r.lastServed[root]; ok {
		delete(r.lastServed, root)
		r.order = slices.DeleteFunc(r.order, func(h Hash) bool { return h == root })
	}
	return lastServed, ok
}

// ShareModel serves a model, described by m and read from src, to joiners;
// it returns the manifest's root hash. src must stay readable until
// StopSharing.
func (n *Node) ShareModel(m *Manifest, src io.ReaderAt) Hash {
	enc := m.Marshal()
	root := HashOf(enc)
	model := &sharedModel{manifest: enc, m: m, src: src}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.models[root]; ok {
		model.lastServed.Store(old.lastServed.Load())
	} else if last, ok := n.retired.remove(root); ok {
		model.lastServed.Store(last)
	}
	n.models[root] = model
	return root
}

// StopSharing stops serving the model named by root. Peers that ask for it
// afterwards are told it is no longer shared, unlike a root never shared.
func (n *Node) StopSharing(root Hash) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if model, ok := n.models[root]; ok {
		delete(n.models, root)
		n.retired.add(root, model.lastServed.Load())
	}
}

// ModelLastServed reports whether this node shares root now, and when it last
// served a manifest or chunk of it to anyone (the zero time if never, or if
// root was stopped so long ago that it is forgotten). A caller can use it to
// keep sharing an old model until joiners stop fetching it.
func (n *Node) ModelLastServed(root Hash) (last time.Time, shared bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var ns int64
	if model, ok := n.models[root]; ok {
		ns, shared = model.lastServed.Load(), true
	} else {
		ns = n.retired.lastServed[root]
	}
	if ns == 0 {
		return time.Time{}, shared
	}
	return time.Unix(0, ns), shared
}

func modelRequest(kind byte, root Hash, index uint32) []byte {
	b := append([]byte{kind}, root[:]...)
	return binary.BigEndian.AppendUint32(b, index)
}

func (n *Node) serveModel(s network.Stream) {
	defer s.Close()
	deadline := time.Now().Add(n.cfg.RequestTimeout)
	_ = s.SetDeadline(deadline)
	release, ok := n.admit(s)
	if !ok {
		return
	}
	defer release()
	req := make([]byte, modelRequestSize)
	if _, err := io.ReadFull(s, req); err != nil {
		_ = writeResponse(s, statusBadReq, nil)
		return
	}
	var root Hash
	copy(root[:], req[1:])
	index := binary.BigEndian.Uint32(req[1+len(root):])
	n.mu.RLock()
	model, ok := n.models[root]
	_, retired := n.retired.lastServed[root]
	n.mu.RUnlock()
	if !ok {
		status := byte(statusUnknownRoot)
		if retired {
			status = statusNotShared
		}
		_ = writeResponse(s, status, nil)
		return
	}
	var payload []byte
	switch req[0] {
	case modelReqManifest:
		payload = model.manifest
	case modelReqChunk:
		if int(index) >= len(model.m.Chunks) {
			_ = writeResponse(s, statusBadReq, nil)
			return
		}
		off, size := model.m.chunkRange(int(index))
		payload = make([]byte, size)
		if _, err := model.src.ReadAt(payload, off); err != nil && !(errors.Is(err, io.EOF) && size > 0) {
			n.log.Error("read shared model chunk", "chunk", index, "err", err)
			_ = writeResponse(s, statusReadFailed, nil)
			return
		}
	default:
		_ = writeResponse(s, statusBadReq, nil)
		return
	}
	// Marked when the response starts and when it ends, so a model being
	// downloaded slowly never looks idle to its sharer.
	model.lastServed.Store(time.Now().UnixNano())
	w := io.Writer(s)
	if n.modelPacer != nil {
		ctx, cancel := context.WithDeadline(n.ctx, deadline)
		defer cancel()
		w = pacedWriter{ctx: ctx, w: s, p: n.modelPacer}
	}
	if err := writeResponse(w, statusOK, payload); err != nil {
		n.log.Debug("serve model", "peer", s.Conn().RemotePeer(), "err", err)
		return
	}
	model.lastServed.Store(time.Now().UnixNano())
	if req[0] == modelReqChunk {
		n.stats.chunksServed.Add(1)
		n.stats.chunkBytesServed.Add(uint64(len(payload)))
	}
}

// FetchModelOptions tunes FetchModel.
type FetchModelOptions struct {
	// Peers to download from; nil means every connected participant.
	Peers []peer.ID
	// Progress, if set, is called after each verified chunk and once at the
	// start with the chunks already present from an earlier attempt.
	Progress func(done, total int)
}

// FetchModel downloads the model whose manifest hashes to root into dst,
// asking several peers in parallel (MaxConcurrentDownloads requests each).
// Every chunk is verified against the manifest before it is written; a peer
// serving a bad manifest or chunk is banned and its chunks go to others. The
// download is written to dst+".part" and renamed into place when complete,
// so calling FetchModel again after a failure resumes it: chunks already
// present and correct are kept.
func (n *Node) FetchModel(ctx context.Context, root Hash, dst string, opts FetchModelOptions) (*Manifest, error) {
	peers := opts.Peers
	if peers == nil {
		peers = n.ConnectedParticipants()
	}
	m, err := n.fetchManifest(ctx, root, peers)
	if err != nil {
		return nil, err
	}
	part := dst + ".part"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fetch model: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(m.TotalSize)); err != nil {
		return nil, fmt.Errorf("fetch model: size %s: %w", part, err)
	}
	missing, err := missingChunks(f, m)
	if err != nil {
		return nil, err
	}
	total := len(m.Chunks)
	var (
		progressMu sync.Mutex
		done       = total - len(missing)
	)
	report := func(delta int) {
		progressMu.Lock()
		defer progressMu.Unlock()
		done += delta
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}
	report(0)
	if len(missing) > 0 {
		if err := n.fetchChunks(ctx, root, m, f, missing, peers, func() { report(1) }); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fetch model: sync %s: %w", part, err)
	}
	if err := os.Rename(part, dst); err != nil {
		return nil, fmt.Errorf("fetch model: %w", err)
	}
	if dir, err := os.Open(filepath.Dir(dst)); err == nil {
		_ = dir.Sync()
		_ = dir.Close()
	}
	return m, nil
}

// ConnectedParticipants lists the participants (not banned) we are connected to.
func (n *Node) ConnectedParticipants() []peer.ID {
	var out []peer.ID
	for _, p := range n.host.Network().Peers() {
		if n.allowed(p) {
			out = append(out, p)
		}
	}
	return out
}

func (n *Node) fetchManifest(ctx context.Context, root Hash, peers []peer.ID) (*Manifest, error) {
	lastErr := errors.New("no participant to ask")
	for _, p := range peers {
		if p == n.host.ID() || !n.allowed(p) {
			continue
		}
		data, err := n.request(ctx, p, n.modelProtocol(), modelRequest(modelReqManifest, root, 0), 0, uint64(maxManifestBytes))
		if err == nil && HashOf(data) != root {
			err = fmt.Errorf("%w: %s sent a manifest that does not hash to %s", errBadData, p, root)
		}
		if err != nil {
			if errors.Is(err, errBadData) {
				n.Ban(p, err.Error())
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("fetch model manifest: %w", ctx.Err())
			}
			lastErr = err
			continue
		}
		m, err := UnmarshalManifest(data)
		if err != nil {
			// It hashes to the agreed root, so the root itself names garbage.
			return nil, fmt.Errorf("the agreed model root %s names an invalid manifest: %w", root, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("fetch model manifest %s: %w", root, lastErr)
}

// missingChunks hashes what an earlier attempt left in f and lists the chunks
// that still need downloading.
func missingChunks(f *os.File, m *Manifest) ([]int, error) {
	var missing []int
	buf := make([]byte, m.ChunkSize)
	for i := range m.Chunks {
		off, size := m.chunkRange(i)
		if _, err := f.ReadAt(buf[:size], off); err != nil {
			return nil, fmt.Errorf("fetch model: check existing chunk %d: %w", i, err)
		}
		if HashOf(buf[:size]) != m.Chunks[i] {
			missing = append(missing, i)
		}
	}
	return missing, nil
}

// fetchChunks downloads the missing chunks with MaxConcurrentDownloads
// workers per peer sharing one queue. A failed chunk goes back on the queue
// for any worker; a peer that fails peerFailureLimit times in a row, or has
// no copy, drops out.
func (n *Node) fetchChunks(ctx context.Context, root Hash, m *Manifest, f *os.File, missing []int, peers []peer.ID, chunkDone func()) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan int, len(missing))
	for _, i := range missing {
		queue <- i
	}
	var (
		remaining = atomic.Int64{}
		wg        sync.WaitGroup
		errMu     sync.Mutex
		lastErr   = errors.New("no participant to download from")
	)
	remaining.Store(int64(len(missing)))
	fail := func(err error) {
		errMu.Lock()
		lastErr = err
		errMu.Unlock()
	}
	var sources []peer.ID
	failed := map[peer.ID]*atomic.Int32{}
	for _, p := range peers {
		if p != n.host.ID() && n.allowed(p) && failed[p] == nil {
			sources = append(sources, p)
			failed[p] = new(atomic.Int32)
		}
	}
	// Workers start round-robin over the peers, so a model of few chunks is
	// spread over all of them rather than taken by the first peer's workers.
	for range n.cfg.MaxConcurrentDownloads {
		for _, p := range sources {
			failures := failed[p]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var i int
					select {
					case <-ctx.Done():
						return
					case i = <-queue:
					}
					if failures.Load() >= peerFailureLimit || !n.allowed(p) {
						queue <- i
						return
					}
					err := n.fetchChunk(ctx, p, root, m, f, i)
					if err == nil {
						failures.Store(0)
						chunkDone()
						if remaining.Add(-1) == 0 {
							cancel(nil)
						}
						continue
					}
					queue <- i
					if ctx.Err() != nil {
						return
					}
					fail(err)
					var werr *writeError
					switch {
					case errors.As(err, &werr):
						cancel(err)
						return
					case errors.Is(err, errBadData):
						n.Ban(p, err.Error())
						return
					case errors.Is(err, errUnavailable):
						failures.Add(1)
						_ = sleep(ctx, 100*time.Millisecond)
					default:
						failures.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	if left := remaining.Load(); left > 0 {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("fetch model %s: %w", root, cause)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("fetch model %s: %d of %d chunks missing: %w", root, left, len(m.Chunks), err)
		}
		errMu.Lock()
		defer errMu.Unlock()
		return fmt.Errorf("fetch model %s: %d of %d chunks missing, no peer left to ask (call again to resume): %w", root, left, len(m.Chunks), lastErr)
	}
	return nil
}

// writeError marks a local disk failure, which ends the fetch at once.
type writeError struct{ err error }

func (e *writeError) Error() string { return "write model chunk: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (n *Node) fetchChunk(ctx context.Context, p peer.ID, root Hash, m *Manifest, f *os.File, i int) error {
	off, size := m.chunkRange(i)
	data, err := n.request(ctx, p, n.modelProtocol(), modelRequest(modelReqChunk, root, uint32(i)), uint64(size), MaxChunkSize)
	if err != nil {
		return err
	}
	if got := HashOf(data); got != m.Chunks[i] {
		return fmt.Errorf("%w: %s sent chunk %d hashing to %s, manifest says %s", errBadData, p, i, got, m.Chunks[i])
	}
	if _, err := f.WriteAt(data, off); err != nil {
		return &writeError{err}
	}
	n.stats.chunksFetched.Add(1)
	n.stats.chunkBytesFetched.Add(uint64(size))
	return nil
}
