package p2p

import (
	"slices"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// counters are the node's running totals; scores is guarded by Node.mu.
type counters struct {
	gossipIn, gossipRejected, gossipDelivered, gossipPublished       atomic.Uint64
	blobsFetched, blobBytesFetched, blobsServed, blobBytesServed     atomic.Uint64
	chunksFetched, chunkBytesFetched, chunksServed, chunkBytesServed atomic.Uint64
	fetchFailures, refused, busy, bans                               atomic.Uint64

	scores map[peer.ID]float64
	fails  map[peer.ID]uint64
}

// Snapshot is a point-in-time view of the node's traffic and peers, for the
// client's metrics endpoint.
type Snapshot struct {
	// Bytes and rates (bytes per second) over all connections.
	TotalIn, TotalOut uint64
	RateIn, RateOut   float64
	// Per-protocol byte totals, keyed by protocol ID.
	ProtocolIn, ProtocolOut map[protocol.ID]uint64

	GossipReceived, GossipRejected, GossipDelivered, GossipPublished uint64
	BlobsFetched, BlobBytesFetched, BlobsServed, BlobBytesServed     uint64
	ChunksFetched, ChunkBytesFetched, ChunksServed, ChunkBytesServed uint64
	// FetchFailures counts failed blob requests; Refused and Busy count
	// requests we declined to serve.
	FetchFailures, Refused, Busy, Bans uint64

	Peers []PeerSnapshot
}

// PeerSnapshot describes one known peer.
type PeerSnapshot struct {
	ID                 peer.ID
	Connected          bool
	Participant        bool
	Banned             bool
	BanReason          string
	BytesIn, BytesOut  uint64
	RateIn, RateOut    float64
	GossipScore        float64
	FailedRequests     uint64
	ConnectedAddresses []string
}

// Snapshot gathers the node's metrics.
func (n *Node) Snapshot() Snapshot {
	tot := n.bw.GetBandwidthTotals()
	s := Snapshot{
		TotalIn: uint64(tot.TotalIn), TotalOut: uint64(tot.TotalOut),
		RateIn: tot.RateIn, RateOut: tot.RateOut,
		ProtocolIn: map[protocol.ID]uint64{}, ProtocolOut: map[protocol.ID]uint64{},
		GossipReceived:    n.stats.gossipIn.Load(),
		GossipRejected:    n.stats.gossipRejected.Load(),
		GossipDelivered:   n.stats.gossipDelivered.Load(),
		GossipPublished:   n.stats.gossipPublished.Load(),
		BlobsFetched:      n.stats.blobsFetched.Load(),
		BlobBytesFetched:  n.stats.blobBytesFetched.Load(),
		BlobsServed:       n.stats.blobsServed.Load(),
		BlobBytesServed:   n.stats.blobBytesServed.Load(),
		ChunksFetched:     n.stats.chunksFetched.Load(),
		ChunkBytesFetched: n.stats.chunkBytesFetched.Load(),
		ChunksServed:      n.stats.chunksServed.Load(),
		ChunkBytesServed:  n.stats.chunkBytesServed.Load(),
		FetchFailures:     n.stats.fetchFailures.Load(),
		Refused:           n.stats.refused.Load(),
		Busy:              n.stats.busy.Load(),
		Bans:              n.stats.bans.Load(),
	}
	for p, st := range n.bw.GetBandwidthByProtocol() {
		s.ProtocolIn[p] = uint64(st.TotalIn)
		s.ProtocolOut[p] = uint64(st.TotalOut)
	}
	known := map[peer.ID]struct{}{}
	for _, p := range n.host.Network().Peers() {
		known[p] = struct{}{}
	}
	n.mu.RLock()
	for p := range n.participants {
		known[p] = struct{}{}
	}
	for p := range n.bans {
		known[p] = struct{}{}
	}
	n.mu.RUnlock()
	delete(known, n.host.ID())
	for p := range known {
		st := n.bw.GetBandwidthForPeer(p)
		ps := PeerSnapshot{
			ID:        p,
			Connected: n.host.Network().Connectedness(p) == network.Connected,
			BytesIn:   uint64(st.TotalIn), BytesOut: uint64(st.TotalOut),
			RateIn: st.RateIn, RateOut: st.RateOut,
		}
		for _, c := range n.host.Network().ConnsToPeer(p) {
			ps.ConnectedAddresses = append(ps.ConnectedAddresses, c.RemoteMultiaddr().String())
		}
		n.mu.RLock()
		_, ps.Participant = n.participants[p]
		ps.BanReason, ps.Banned = n.bans[p]
		ps.GossipScore = n.stats.scores[p]
		ps.FailedRequests = n.stats.fails[p]
		n.mu.RUnlock()
		s.Peers = append(s.Peers, ps)
	}
	slices.SortFunc(s.Peers, func(a, b PeerSnapshot) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return s
}

// countFailure records a failed request to p for its peer metrics.
func (n *Node) countFailure(p peer.ID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stats.fails == nil {
		n.stats.fails = map[peer.ID]uint64{}
	}
	n.stats.fails[p]++
}
