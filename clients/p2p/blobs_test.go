package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1})
	out := make([]byte, n)
	_, _ = r.Read(out)
	return out
}

func TestBlobAnnouncedByOneIsFetchedByAll(t *testing.T) {
	nodes := startRun(t, "blob-run", 5)
	ctx := context.Background()
	payload := randomBytes(1, 3<<20)
	ann, err := nodes[0].Publish(ctx, 3, BatchID{0, 15}, payload)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	var wg sync.WaitGroup
	for _, n := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Fetch from the announcement as gossiped, not the local copy.
			got := collect(t, n, 20*time.Second, func(ms []Message) bool {
				return len(ms) > 0 && ms[len(ms)-1].Announcement != nil && ms[len(ms)-1].From == nodes[0].ID()
			})
			data, err := n.FetchBlob(ctx, *got[len(got)-1].Announcement)
			if err != nil {
				t.Errorf("node %s fetch: %v", n.ID(), err)
				return
			}
			if !bytes.Equal(data, payload) {
				t.Errorf("node %s fetched different bytes", n.ID())
			}
		}()
	}
	wg.Wait()
	snap := nodes[0].Snapshot()
	if snap.BlobsServed != 4 || snap.BlobBytesServed != 4*uint64(len(payload)) {
		t.Errorf("publisher served %d blobs, %d bytes; want 4, %d", snap.BlobsServed, snap.BlobBytesServed, 4*len(payload))
	}
	// Bandwidth meters are swept once a second, so they catch up shortly.
	waitFor(t, 5*time.Second, "bandwidth metrics to count the transfers", func() bool {
		snap := nodes[0].Snapshot()
		if snap.TotalOut < 4*uint64(len(payload)) || snap.ProtocolOut[nodes[0].blobProtocol()] < 4*uint64(len(payload)) {
			return false
		}
		for _, n := range nodes[1:] {
			if ps := peerSnapshot(nodes[0], n.ID()); ps.BytesOut < uint64(len(payload)) || !ps.Participant || !ps.Connected {
				return false
			}
		}
		return true
	})
	for _, n := range nodes[1:] {
		if got := n.Snapshot().BlobBytesFetched; got != uint64(len(payload)) {
			t.Errorf("node %s counted %d fetched bytes, want %d", n.ID(), got, len(payload))
		}
	}

	// An announcement altered after signing is refused before any download.
	forged := ann
	forged.Size++
	if _, err := nodes[1].FetchBlob(ctx, forged); err == nil {
		t.Error("fetched a blob for an announcement with a broken signature")
	}
	// So is one for a payload beyond the size limit, even if properly signed.
	big := Announcement{Step: 3, Hash: HashOf([]byte("x")), Size: DefaultMaxBlobSize + 1, Signer: nodes[2].ID()}
	if _, err := nodes[2].Announce(ctx, big); err == nil {
		t.Error("announced a blob beyond the size limit")
	}
	if big.Signature, err = sign(nodes[2].key, nodes[2].runKey, big.body()); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].FetchBlob(ctx, big); err == nil {
		t.Error("fetched a blob announced beyond the size limit")
	}
}

// serveCorrupted makes n answer blob requests with the requested size of
// bytes that do not match the hash, as a faulty or malicious peer would.
func serveCorrupted(n *Node, size int) {
	n.Host().SetStreamHandler(n.blobProtocol(), func(s network.Stream) {
		defer s.Close()
		var h Hash
		if _, err := io.ReadFull(s, h[:]); err != nil {
			return
		}
		bad := randomBytes(99, size)
		hdr := binary.BigEndian.AppendUint64([]byte{statusOK}, uint64(size))
		_, _ = s.Write(append(hdr, bad...))
	})
}

func TestPeerServingCorruptedBytesIsBannedWhileOthersComplete(t *testing.T) {
	nodes := startRun(t, "corrupt-run", 5)
	ctx := context.Background()
	honest, evil := nodes[0], nodes[1]
	payload := randomBytes(2, 1<<20)
	if _, err := honest.Publish(ctx, 5, BatchID{1, 1}, payload); err != nil {
		t.Fatalf("publish: %v", err)
	}
	// The evil peer announces the same hash (so it is a provider) but serves junk.
	evilAnn, err := evil.Publish(ctx, 5, BatchID{1, 1}, payload)
	if err != nil {
		t.Fatalf("evil publish: %v", err)
	}
	serveCorrupted(evil, len(payload))

	fetchers := nodes[2:]
	for _, n := range fetchers {
		waitFor(t, 10*time.Second, "both announcements to arrive", func() bool {
			return len(n.providersFor(&evilAnn)) == 2
		})
	}
	var wg sync.WaitGroup
	for _, n := range fetchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The evil peer signed this announcement, so it is asked first.
			data, err := n.FetchBlob(ctx, evilAnn)
			if err != nil {
				t.Errorf("node %s fetch: %v", n.ID(), err)
				return
			}
			if !bytes.Equal(data, payload) {
				t.Errorf("node %s returned unverified bytes", n.ID())
			}
		}()
	}
	wg.Wait()
	for _, n := range fetchers {
		if reason, banned := n.Banned(evil.ID()); !banned {
			t.Errorf("node %s did not ban the corrupting peer", n.ID())
		} else {
			t.Logf("ban reason: %s", reason)
		}
		if _, banned := n.Banned(honest.ID()); banned {
			t.Errorf("node %s banned the honest peer", n.ID())
		}
	}
	// Banned for the run: no reconnection, and its gossip is no longer heard
	// even when forwarded by peers that still accept it.
	marker := []byte("after the ban")
	if _, err := evil.Finish(ctx, Finished{Step: 6}); err != nil {
		t.Fatalf("evil finish: %v", err)
	}
	if _, err := honest.Publish(ctx, 6, BatchID{}, marker); err != nil {
		t.Fatalf("publish marker: %v", err)
	}
	for _, n := range fetchers {
		got := collect(t, n, 10*time.Second, func(ms []Message) bool {
			return len(ms) > 0 && ms[len(ms)-1].Announcement != nil && ms[len(ms)-1].Announcement.Step == 6
		})
		time.Sleep(100 * time.Millisecond)
		for _, m := range got {
			if m.From == evil.ID() && m.Finished != nil && m.Finished.Step == 6 {
				t.Errorf("node %s heard the banned peer after the ban", n.ID())
			}
		}
		if err := n.Host().Connect(ctx, evil.AddrInfo()); err == nil {
			t.Errorf("node %s reconnected to a banned peer", n.ID())
		}
	}
}

// A blob served without an announcement is fetched by its hash from the one
// peer that holds it; a hash it never stored is refused, and a peer that
// serves other bytes for a hash, or more than the caller allows, is banned.
func TestServedBlobIsFetchedByHash(t *testing.T) {
	nodes := startRun(t, "served-run", 3)
	ctx := context.Background()
	data := randomBytes(3, 300<<10)
	hash, err := nodes[0].Serve(4, data)
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	got, err := nodes[1].FetchFrom(ctx, nodes[0].ID(), hash, 1<<20)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch: %v (equal: %v)", err, bytes.Equal(got, data))
	}
	if _, err := nodes[1].FetchFrom(ctx, nodes[0].ID(), HashOf([]byte("never served")), 1<<20); !errors.Is(err, errUnavailable) {
		t.Errorf("a hash never served: %v, want errUnavailable", err)
	}
	if _, banned := nodes[1].Banned(nodes[0].ID()); banned {
		t.Error("an honest peer was banned")
	}
	serveCorrupted(nodes[2], len(data))
	if _, err := nodes[1].FetchFrom(ctx, nodes[2].ID(), hash, 1<<20); !errors.Is(err, errBadData) {
		t.Errorf("corrupted bytes: %v, want errBadData", err)
	}
	if _, banned := nodes[1].Banned(nodes[2].ID()); !banned {
		t.Error("the peer that served other bytes was not banned")
	}
	// More bytes than the caller allows is bad data too.
	if _, err := nodes[2].FetchFrom(ctx, nodes[0].ID(), hash, 1000); !errors.Is(err, errBadData) {
		t.Errorf("a blob over the caller's limit: %v, want errBadData", err)
	}
	nodes[0].PruneBefore(5)
	if _, err := nodes[1].FetchFrom(ctx, nodes[0].ID(), hash, 1<<20); !errors.Is(err, errUnavailable) {
		t.Errorf("after pruning: %v, want errUnavailable", err)
	}
}
