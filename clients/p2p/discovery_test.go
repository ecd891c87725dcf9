package p2p

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
)

func TestParticipantsFindEachOtherThroughTheRunDHT(t *testing.T) {
	// No shared rendezvous directory: each node knows only the first one.
	first := startNode(t, testConfig(t, "dht-run", ""))
	nodes := []*Node{first}
	for range 4 {
		cfg := testConfig(t, "dht-run", "")
		cfg.BootstrapPeers = []peer.AddrInfo{first.AddrInfo()}
		nodes = append(nodes, startNode(t, cfg))
	}
	setParticipants(nodes, nodes)
	waitMeshed(t, nodes)
}

func TestPeerRecordsAreVerified(t *testing.T) {
	dir := t.TempDir()
	a := startNode(t, testConfig(t, "record-run", dir))
	b := startNode(t, testConfig(t, "record-run", ""))
	c := startNode(t, testConfig(t, "record-run", ""))

	rec, err := b.SignedPeerRecord()
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.AddPeerRecord(rec)
	if err != nil || got != b.ID() {
		t.Fatalf("valid record: got %s, %v", got, err)
	}
	if addrs := a.Host().Peerstore().Addrs(b.ID()); len(addrs) == 0 {
		t.Fatal("valid record left no addresses")
	}

	// c's addresses in a record signed by b's key claiming to be c's.
	forged := peer.PeerRecordFromAddrInfo(peer.AddrInfo{ID: c.ID(), Addrs: b.Host().Addrs()})
	env, err := record.Seal(forged, b.key)
	if err != nil {
		t.Fatal(err)
	}
	forgedBytes, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"signed by another peer", forgedBytes},
		{"empty", nil},
		{"garbage", []byte("not a record")},
		{"truncated", rec[:len(rec)/2]},
		{"flipped byte", func() []byte { r := append([]byte{}, rec...); r[len(r)-3] ^= 1; return r }()},
		{"oversized", make([]byte, maxRecordSize+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.AddPeerRecord(tc.data); err == nil {
				t.Error("accepted a bad record")
			}
		})
	}

	// Junk in the rendezvous directory, under a participant's name, is
	// ignored and never crashes the discovery loop.
	a.SetParticipants([]peer.ID{c.ID()})
	junk := filepath.Join(a.rendezvousDir(), c.ID().String()+recordSuffix)
	if err := os.WriteFile(junk, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * testConfig(t, "", "").DiscoveryInterval)
	if len(a.Host().Peerstore().Addrs(c.ID())) != 0 {
		t.Error("junk record produced addresses")
	}
	// The node's own record is there and valid.
	own, err := os.ReadFile(filepath.Join(a.rendezvousDir(), a.ID().String()+recordSuffix))
	if err != nil {
		t.Fatalf("own record: %v", err)
	}
	if got, err := c.AddPeerRecord(own); err != nil || got != a.ID() {
		t.Fatalf("own record: got %s, %v", got, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.rendezvousDir(), a.ID().String()+recordSuffix)); !os.IsNotExist(err) {
		t.Errorf("record not removed on close: %v", err)
	}
}

// The rendezvous directory a client chose for itself (RemoveRendezvousDir)
// goes when its last node leaves it; the run's subdirectory goes when empty
// in any case; a directory the user named stays.
func TestRendezvousDirRemovedByLastNode(t *testing.T) {
	for _, own := range []bool{true, false} {
		base := filepath.Join(t.TempDir(), "rendezvous")
		nodes := make([]*Node, 2)
		for i := range nodes {
			cfg := testConfig(t, "cleanup", base)
			cfg.RemoveRendezvousDir = own
			nodes[i] = startNode(t, cfg)
		}
		setParticipants(nodes, nodes)
		waitMeshed(t, nodes)
		tagDir := nodes[0].rendezvousDir()
		if err := nodes[0].Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(tagDir, nodes[1].ID().String()+recordSuffix)); err != nil {
			t.Fatalf("own %v: the first node to leave removed the other's record: %v", own, err)
		}
		if err := nodes[1].Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tagDir); !os.IsNotExist(err) {
			t.Errorf("own %v: the run's rendezvous directory is left behind (%v)", own, err)
		}
		if _, err := os.Stat(base); os.IsNotExist(err) == !own {
			t.Errorf("own %v: the rendezvous directory exists: %v", own, err == nil)
		}
	}
}
