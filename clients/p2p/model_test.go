package p2p

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
