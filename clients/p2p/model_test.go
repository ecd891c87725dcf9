package p2p

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestManifestRoundTripAndValidation(t *testing.T) {
	data := randomBytes(3, 10*1000+7)
	m, err := BuildManifest(bytes.NewReader(data), int64(len(data)), 1000)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if len(m.Chunks) != 11 {
		t.Fatalf("%d chunks, want 11", len(m.Chunks))
	}
	if off, n := m.chunkRange(10); off != 10000 || n != 7 {
		t.Fatalf("last chunk at %d+%d, want 10000+7", off, n)
	}
	back, err := UnmarshalManifest(m.Marshal())
	if err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if back.Root() != m.Root() || back.TotalSize != m.TotalSize || back.ChunkSize != m.ChunkSize {
		t.Fatalf("round trip changed the manifest")
	}
	good := m.Marshal()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated header", good[:5]},
		{"missing a hash", good[:len(good)-32]},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"wrong version", append([]byte{9}, good[1:]...)},
		{"zero chunk size", append(append([]byte{1}, 0, 0, 0, 0), good[5:]...)},
		{"count disagrees with size", func() []byte {
			b := append([]byte{}, good...)
			b[8]++ // the total grows by 4 GiB while the chunk count stays
			return b
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := UnmarshalManifest(tc.data); err == nil {
				t.Error("accepted a bad manifest")
			}
		})
	}
	if _, err := BuildManifest(bytes.NewReader(data), int64(len(data)), 0); err == nil {
		t.Error("built a manifest with zero-byte chunks")
	}
	if _, err := BuildManifest(bytes.NewReader(data), int64(len(data)), MaxChunkSize+1); err == nil {
		t.Error("built a manifest with oversized chunks")
	}
}

// shareRun starts sharers that serve model and a joiner, all participants.
func shareRun(t *testing.T, runID string, sharers int, model []byte, chunk int) ([]*Node, *Node, Hash) {
	t.Helper()
	nodes := startRun(t, runID, sharers+1)
	m, err := BuildManifest(bytes.NewReader(model), int64(len(model)), chunk)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var root Hash
	for _, n := range nodes[:sharers] {
		root = n.ShareModel(m, bytes.NewReader(model))
	}
	return nodes[:sharers], nodes[sharers], root
}

func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read fetched model: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("fetched model hashes to %x, want %x", sha256.Sum256(got), sha256.Sum256(want))
	}
}

func TestJoinerFetchesModelFromThreePeersWhileOneIsKilled(t *testing.T) {
	model := randomBytes(4, 50<<20)
	sharers, joiner, root := shareRun(t, "model-run", 3, model, DefaultChunkSize)
	dst := filepath.Join(t.TempDir(), "model.bin")
	var (
		once     sync.Once
		killedAt int
	)
	victim := sharers[2]
	_, err := joiner.FetchModel(context.Background(), root, dst, FetchModelOptions{
		Progress: func(done, total int) {
			if done >= total/4 {
				once.Do(func() {
					killedAt = done
					if err := victim.Close(); err != nil {
						t.Errorf("kill sharer: %v", err)
					}
				})
			}
		},
	})
	if err != nil {
		t.Fatalf("fetch model: %v", err)
	}
	if killedAt == 0 || killedAt >= 50 {
		t.Fatalf("sharer was killed after %d of 50 chunks, not mid-transfer", killedAt)
	}
	checkFile(t, dst, model)
	if _, err := os.Stat(dst + ".part"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial file left behind: %v", err)
	}
	for _, s := range sharers[:2] {
		if s.Snapshot().ChunksServed == 0 {
			t.Errorf("sharer %s served nothing; the download was not parallel", s.ID())
		}
	}
	t.Logf("victim killed after %d chunks; survivors served %d and %d", killedAt,
		sharers[0].Snapshot().ChunksServed, sharers[1].Snapshot().ChunksServed)
}

func TestModelFetchResumesAfterInterruption(t *testing.T) {
	model := randomBytes(5, 4<<20)
	_, joiner, root := shareRun(t, "resume-run", 2, model, 64<<10)
	dst := filepath.Join(t.TempDir(), "model.bin")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := joiner.FetchModel(ctx, root, dst, FetchModelOptions{
		Progress: func(done, total int) {
			if done >= total/2 {
				cancel()
			}
		},
	})
	if err == nil {
		t.Fatal("interrupted fetch reported success")
	}
	firstRun := joiner.Snapshot().ChunksFetched
	var resumedWith int
	first := true
	if _, err := joiner.FetchModel(context.Background(), root, dst, FetchModelOptions{
		Progress: func(done, total int) {
			if first {
				resumedWith, first = done, false
			}
		},
	}); err != nil {
		t.Fatalf("resumed fetch: %v", err)
	}
	checkFile(t, dst, model)
	if resumedWith < 32 {
		t.Errorf("resumed with %d of 64 chunks, want at least the 32 fetched before", resumedWith)
	}
	if total := joiner.Snapshot().ChunksFetched; total-firstRun != uint64(64-resumedWith) {
		t.Errorf("resume fetched %d chunks, want %d", total-firstRun, 64-resumedWith)
	}
}

func TestModelSharerServingBadChunksIsBanned(t *testing.T) {
	model := randomBytes(6, 2<<20)
	nodes := startRun(t, "bad-model-run", 3)
	m, err := BuildManifest(bytes.NewReader(model), int64(len(model)), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(model)
	for i := range corrupt {
		corrupt[i] ^= 0x5a
	}
	root := nodes[0].ShareModel(m, bytes.NewReader(model))
	nodes[1].ShareModel(m, bytes.NewReader(corrupt))
	joiner := nodes[2]
	dst := filepath.Join(t.TempDir(), "model.bin")
	if _, err := joiner.FetchModel(context.Background(), root, dst, FetchModelOptions{}); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	checkFile(t, dst, model)
	if _, banned := joiner.Banned(nodes[1].ID()); !banned {
		t.Error("the sharer of bad chunks was not banned")
	}
	// A root nobody shares fails cleanly.
	if _, err := joiner.FetchModel(context.Background(), HashOf([]byte("nothing")), dst+"2", FetchModelOptions{}); err == nil {
		t.Error("fetched a model nobody shares")
	}
}

// startSharing starts a sharer and a joiner, both participants, with the
// sharer's config adjusted by tune, and shares model from the sharer.
func startSharing(t *testing.T, runID string, model []byte, tune func(*Config)) (sharer, joiner *Node, root Hash) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, runID, dir)
	if tune != nil {
		tune(&cfg)
	}
	sharer = startNode(t, cfg)
	joiner = startNode(t, testConfig(t, runID, dir))
	nodes := []*Node{sharer, joiner}
	setParticipants(nodes, nodes)
	waitMeshed(t, nodes)
	m, err := BuildManifest(bytes.NewReader(model), int64(len(model)), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	return sharer, joiner, sharer.ShareModel(m, bytes.NewReader(model))
}

func TestModelRefusalsSayWhy(t *testing.T) {
	model := randomBytes(7, 256<<10)
	sharer, joiner, root := startSharing(t, "refusal-run", model, nil)
	ctx := context.Background()
	from := FetchModelOptions{Peers: []peer.ID{sharer.ID()}}
	dir := t.TempDir()
	fetch := func(n *Node, root Hash, name string) error {
		_, err := n.FetchModel(ctx, root, filepath.Join(dir, name), from)
		return err
	}
	expect := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) || !errors.Is(err, errUnavailable) {
			t.Errorf("error %v, want %v (and errUnavailable)", err, want)
		} else {
			t.Logf("as expected: %v", err)
		}
	}

	expect(fetch(joiner, HashOf([]byte("never shared")), "unknown"), ErrUnknownRoot)

	// An outsider that believes it belongs dials the sharer and asks.
	outsider := startNode(t, testConfig(t, "refusal-run", ""))
	outsider.SetParticipants(ids([]*Node{sharer, joiner, outsider}))
	if err := outsider.Host().Connect(ctx, sharer.AddrInfo()); err != nil {
		t.Fatalf("outsider connect: %v", err)
	}
	expect(fetch(outsider, root, "outsider"), ErrNotParticipant)

	if last, shared := sharer.ModelLastServed(root); !last.IsZero() || !shared {
		t.Errorf("before any fetch: last served %v, shared %v; want zero, true", last, shared)
	}
	before := time.Now()
	if err := fetch(joiner, root, "model"); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	checkFile(t, filepath.Join(dir, "model"), model)
	last, shared := sharer.ModelLastServed(root)
	if last.Before(before) || last.After(time.Now()) || !shared {
		t.Errorf("after a fetch from %v: last served %v, shared %v", before, last, shared)
	}

	sharer.StopSharing(root)
	if l, shared := sharer.ModelLastServed(root); !l.Equal(last) || shared {
		t.Errorf("after StopSharing: last served %v, shared %v; want %v, false", l, shared, last)
	}
	expect(fetch(joiner, root, "stopped"), ErrNotShared)

	// The blob protocol names its refusal too.
	missing := HashOf([]byte("no such blob"))
	_, err := joiner.request(ctx, sharer.ID(), joiner.blobProtocol(), missing[:], 1, DefaultMaxBlobSize)
	if !errors.Is(err, errUnavailable) || !strings.Contains(err.Error(), "pruned or never published") {
		t.Errorf("blob not found: %v", err)
	}
}

func TestRetiredRootsAreBounded(t *testing.T) {
	var r retiredModels
	root := func(i int) Hash { return HashOf(binary.BigEndian.AppendUint32(nil, uint32(i))) }
	for i := range maxRetiredModels + 10 {
		r.add(root(i), int64(i))
	}
	if len(r.lastServed) != maxRetiredModels || len(r.order) != maxRetiredModels {
		t.Fatalf("remembers %d roots (%d in order), want %d", len(r.lastServed), len(r.order), maxRetiredModels)
	}
	if _, ok := r.lastServed[root(0)]; ok {
		t.Error("the oldest retired root was not forgotten")
	}
	newest := maxRetiredModels + 9
	if last, ok := r.remove(root(newest)); !ok || last != int64(newest) {
		t.Errorf("remove newest: %d, %v", last, ok)
	}
	if len(r.order) != maxRetiredModels-1 {
		t.Errorf("order keeps %d roots after a removal, want %d", len(r.order), maxRetiredModels-1)
	}
}

func TestBannedPeerIsToldWhatItCanBe(t *testing.T) {
	// The cap keeps a chunk in flight long enough to ban its requester midway.
	sharer, joiner, root := startSharing(t, "banned-run", randomBytes(8, 128<<10), func(c *Config) { c.MaxModelUploadRate = 32 << 10 })
	ctx := context.Background()
	dir := t.TempDir()
	from := FetchModelOptions{Peers: []peer.ID{sharer.ID()}}
	expectBanned := func(err error) {
		t.Helper()
		if !errors.Is(err, ErrBanned) || !errors.Is(err, errUnavailable) {
			t.Errorf("banned peer got %v, want ErrBanned", err)
		} else {
			t.Logf("as expected: %v", err)
		}
	}

	// A request that arrives between a ban and the closing of the banned
	// peer's connections is answered "banned". Recording the ban without
	// closing the connections holds that window open.
	sharer.mu.Lock()
	sharer.bans[joiner.ID()] = "test"
	sharer.mu.Unlock()
	_, err := joiner.FetchModel(ctx, root, filepath.Join(dir, "a"), from)
	expectBanned(err)
	sharer.mu.Lock()
	delete(sharer.bans, joiner.ID())
	sharer.mu.Unlock()

	// A real ban closes the connections with a code that tells the requests
	// in flight why they end.
	errc := make(chan error, 1)
	go func() {
		_, err := joiner.request(ctx, sharer.ID(), joiner.modelProtocol(), modelRequest(modelReqChunk, root, 0), 64<<10, MaxChunkSize)
		errc <- err
	}()
	waitFor(t, 5*time.Second, "the chunk request to be in flight", func() bool {
		sharer.mu.RLock()
		defer sharer.mu.RUnlock()
		return sharer.uploads[joiner.ID()] > 0
	})
	sharer.Ban(joiner.ID(), "test")
	expectBanned(<-errc)

	// From then on the sharer's gater drops every new connection at once, so
	// the joiner cannot be told; its error says what it saw.
	waitFor(t, 5*time.Second, "the ban to disconnect the joiner", func() bool {
		return joiner.Host().Network().Connectedness(sharer.ID()) != network.Connected
	})
	_, err = joiner.FetchModel(ctx, root, filepath.Join(dir, "b"), from)
	if err == nil || !strings.Contains(err.Error(), sharer.ID().String()) || !strings.Contains(err.Error(), "has it banned us?") {
		t.Errorf("after a ban, fetching from the banning peer got %v", err)
	} else {
		t.Logf("as expected: %v", err)
	}
}

func TestModelUploadRateCap(t *testing.T) {
	if _, err := (&Config{RunID: "r", MaxModelUploadRate: -1}).withDefaults(); err == nil {
		t.Error("accepted a negative upload rate")
	}
	model := randomBytes(9, 384<<10)
	const rate = 128 << 10
	capped, joiner, root := startSharing(t, "capped-run", model, func(c *Config) { c.MaxModelUploadRate = rate })
	dir := t.TempDir()
	start := time.Now()
	if _, err := joiner.FetchModel(context.Background(), root, filepath.Join(dir, "capped"), FetchModelOptions{}); err != nil {
		t.Fatalf("capped fetch: %v", err)
	}
	took := time.Since(start)
	checkFile(t, filepath.Join(dir, "capped"), model)
	// At 128 KiB/s the last 32 KiB piece cannot start before 2.75 s.
	if took < 2500*time.Millisecond {
		t.Errorf("fetched %d bytes capped at %d B/s in %v", len(model), rate, took)
	}
	t.Logf("capped fetch took %v", took)

	// The joiner, uncapped, serves the same model at full speed.
	m, err := BuildManifest(bytes.NewReader(model), int64(len(model)), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	joiner.ShareModel(m, bytes.NewReader(model))
	capped.StopSharing(root)
	if _, err := capped.FetchModel(context.Background(), root, filepath.Join(dir, "uncapped"), FetchModelOptions{}); err != nil {
		t.Fatalf("uncapped fetch: %v", err)
	}
	checkFile(t, filepath.Join(dir, "uncapped"), model)
}

func TestPacerSpacesPieces(t *testing.T) {
	const rate = 1 << 20
	p := newPacer(rate)
	var (
		times []time.Time
		sizes []int
	)
	w := pacedWriter{ctx: context.Background(), p: p, w: writerFunc(func(b []byte) (int, error) {
		times, sizes = append(times, time.Now()), append(sizes, len(b))
		return len(b), nil
	})}
	start := time.Now()
	if _, err := w.Write(make([]byte, 8*pacePiece)); err != nil {
		t.Fatal(err)
	}
	for i, at := range times {
		if sizes[i] > pacePiece {
			t.Errorf("piece %d is %d bytes, more than %d", i, sizes[i], pacePiece)
		}
		// Lower bounds only: piece i may not start before i pieces' time.
		if due := start.Add(time.Duration(i) * pacePiece * time.Second / rate); at.Before(due) {
			t.Errorf("piece %d written at %v, before its slot at %v", i, at.Sub(start), due.Sub(start))
		}
	}
	// A piece whose slot is past the deadline is refused at once, unbooked.
	p.next = time.Now().Add(time.Hour)
	booked := p.next
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.wait(ctx, pacePiece); !errors.Is(err, errPaceDeadline) || !p.next.Equal(booked) {
		t.Errorf("wait past the deadline: %v, schedule moved by %v", err, p.next.Sub(booked))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
