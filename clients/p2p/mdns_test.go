package p2p

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// mDNS answers come from the LAN and are unsigned: a participant's is used to
// connect, a stranger's is ignored. Multicast itself is the library's; here
// the handler gets answers directly: loopback carries no multicast, and tests
// must not multicast on the machine's real interfaces.
func TestMDNSAnswersConnectOnlyParticipants(t *testing.T) {
	cfg := func() Config {
		c := testConfig(t, "mdns-run", "") // no rendezvous: mDNS is the only source
		c.DisableRunDHT = true
		return c
	}
	a, b, stranger := startNode(t, cfg()), startNode(t, cfg()), startNode(t, cfg())
	a.SetParticipants([]peer.ID{a.ID(), b.ID()})
	b.SetParticipants([]peer.ID{a.ID(), b.ID()})

	found := mdnsNotifee{a}
	found.HandlePeerFound(peer.AddrInfo{ID: stranger.ID(), Addrs: stranger.host.Addrs()})
	found.HandlePeerFound(peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()})

	deadline := time.Now().Add(20 * time.Second)
	for a.host.Network().Connectedness(b.ID()) != network.Connected {
		if time.Now().After(deadline) {
			t.Fatal("a did not connect to the participant it found by mDNS")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.host.Network().Connectedness(stranger.ID()) == network.Connected {
		t.Fatal("a connected to a non-participant found by mDNS")
	}
	if len(a.host.Peerstore().Addrs(stranger.ID())) != 0 {
		t.Fatal("a kept the addresses of a non-participant")
	}
}
