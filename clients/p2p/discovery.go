package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// Discovery timing and bounds.
const (
	dialTimeout = 10 * time.Second
	// recordTTL is how long addresses learned from a signed record are kept.
	recordTTL = 10 * time.Minute
	// maxRecordSize bounds a rendezvous file; a record with a dozen addresses
	// is well under 1 KiB.
	maxRecordSize    = 16 << 10
	recordSuffix     = ".rec"
	publicAdvertise  = 10 * time.Minute
	publicFindPeriod = time.Minute
	// offTopicGrace is the least time a connected participant may stay off
	// the run topic before we reconnect to it.
	offTopicGrace = 3 * time.Second
)

func (n *Node) startDiscovery() error {
	if !n.cfg.DisableRunDHT {
		// A Kademlia DHT private to the run: its protocol prefix keeps it apart
		// from the public DHT and from other runs, and every participant is a
		// server, so any one known participant is enough to find the rest.
		d, err := dht.New(n.host,
			dht.Mode(dht.ModeServer),
			dht.ProtocolPrefix(protocol.ID("/psyche/"+n.tag)),
			dht.BootstrapPeersFunc(n.bootstrapCandidates),
		)
		if err != nil {
			return fmt.Errorf("start run DHT: %w", err)
		}
		n.runDHT = d
	}
	if n.cfg.PublicDHT {
		d, err := dht.New(n.host,
			dht.Mode(dht.ModeAuto),
			dht.BootstrapPeers(dht.GetDefaultBootstrapPeerAddrInfos()...),
		)
		if err != nil {
			return fmt.Errorf("start public DHT: %w", err)
		}
		n.publicDHT = d
		n.wg.Add(1)
		go n.publicRendezvous()
	}
	if n.cfg.RendezvousDir != "" {
		if err := os.MkdirAll(n.rendezvousDir(), 0o755); err != nil {
			return fmt.Errorf("create rendezvous directory: %w", err)
		}
	}
	n.trigger = make(chan struct{}, 1)
	if n.cfg.MDNS {
		svc := mdns.NewMdnsService(n.host, mdnsServiceName(n.tag), mdnsNotifee{n})
		if err := svc.Start(); err != nil {
			n.log.Warn("mDNS discovery unavailable", "err", err)
		} else {
			n.mdns = svc
		}
	}
	n.wg.Add(1)
	go n.discoverLoop()
	return nil
}

// mdnsServiceName keys the mDNS service by run, so runs on one LAN never mix.
func mdnsServiceName(tag string) string { return "_psyche-" + tag + "._udp" }

// mdnsNotifee learns addresses from mDNS answers. They are unsigned, but a
// connection authenticates the peer ID, so a lying answer costs one failed
// dial; only participants are dialled.
type mdnsNotifee struct{ n *Node }

func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	n := m.n
	if ai.ID == n.host.ID() || len(ai.Addrs) == 0 {
		return
	}
	n.mu.RLock()
	_, participant := n.participants[ai.ID]
	_, banned := n.bans[ai.ID]
	n.mu.RUnlock()
	if !participant || banned {
		return
	}
	n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, recordTTL)
	n.triggerDiscovery()
}

// triggerDiscovery asks the discovery loop to run now, e.g. after the
// participant set changed.
func (n *Node) triggerDiscovery() {
	select {
	case n.trigger <- struct{}{}:
	default:
	}
}

func (n *Node) discoverLoop() {
	defer n.wg.Done()
	if n.cfg.RendezvousDir != "" {
		defer n.removeRendezvous()
	}
	ticker := time.NewTicker(n.cfg.DiscoveryInterval)
	defer ticker.Stop()
	st := &discoveryState{missing: map[peer.ID]int{}, offTopic: map[peer.ID]time.Time{}}
	for {
		n.discoverOnce(st)
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
		case <-n.trigger:
		}
	}
}

// discoveryState is the dial loop's memory between rounds.
type discoveryState struct {
	dialing  sync.Map
	missing  map[peer.ID]int       // rounds a participant has been unconnected
	offTopic map[peer.ID]time.Time // since when a connected participant is off the topic
}

// discoverOnce publishes our own record and dials every bootstrap peer and
// participant we are not connected to, resolving addresses from rendezvous
// records and the run DHT.
func (n *Node) discoverOnce(st *discoveryState) {
	if n.cfg.RendezvousDir != "" {
		if err := n.writeOwnRecord(); err != nil {
			n.log.Warn("publish rendezvous record", "err", err)
		}
		n.readRecords()
	}
	for _, ai := range n.cfg.BootstrapPeers {
		n.dial(&st.dialing, ai.ID, ai)
	}
	onTopic := map[peer.ID]bool{}
	for _, p := range n.TopicPeers() {
		onTopic[p] = true
	}
	now := time.Now()
	for _, p := range n.Participants() {
		if p == n.host.ID() || !n.allowed(p) {
			continue
		}
		if n.host.Network().Connectedness(p) == network.Connected {
			delete(st.missing, p)
			n.checkOnTopic(st, p, onTopic[p], now)
			continue
		}
		delete(st.offTopic, p)
		// When two peers dial each other at once, gossipsub can lose one side's
		// subscription between the duplicate streams; so the peer with the
		// larger ID waits a round for the other's dial before dialling itself.
		st.missing[p]++
		if n.host.ID() < p || st.missing[p] > 1 {
			n.dial(&st.dialing, p, peer.AddrInfo{ID: p})
		}
	}
	for p := range st.missing {
		if !n.IsParticipant(p) {
			delete(st.missing, p)
		}
	}
	if n.runDHT != nil && len(n.runDHT.RoutingTable().ListPeers()) == 0 && len(n.host.Network().Peers()) > 0 {
		// Connections made before the DHT saw them do not fill its table;
		// Bootstrap only schedules a refresh, so it does not block the loop.
		_ = n.runDHT.Bootstrap(n.ctx)
	}
}

// checkOnTopic reconnects a participant that stays connected but absent from
// the gossip topic: its subscription was lost, and a fresh connection brings
// fresh pubsub streams.
func (n *Node) checkOnTopic(st *discoveryState, p peer.ID, on bool, now time.Time) {
	if on {
		delete(st.offTopic, p)
		return
	}
	since, seen := st.offTopic[p]
	if !seen {
		st.offTopic[p] = now
		return
	}
	if now.Sub(since) >= max(3*n.cfg.DiscoveryInterval, offTopicGrace) {
		n.log.Info("participant connected but not on the run topic; reconnecting", "peer", p)
		delete(st.offTopic, p)
		_ = n.host.Network().ClosePeer(p)
	}
}

// dial connects to p in the background unless connected or already dialling.
func (n *Node) dial(dialing *sync.Map, p peer.ID, ai peer.AddrInfo) {
	if p == n.host.ID() || n.host.Network().Connectedness(p) == network.Connected {
		return
	}
	if _, busy := dialing.LoadOrStore(p, struct{}{}); busy {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer dialing.Delete(p)
		ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
		defer cancel()
		if len(ai.Addrs) == 0 && len(n.host.Peerstore().Addrs(p)) == 0 {
			if n.runDHT == nil {
				return
			}
			found, err := n.runDHT.FindPeer(ctx, p)
			if err != nil {
				n.log.Debug("run DHT lookup", "peer", p, "err", err)
				return
			}
			ai = found
		}
		if err := n.host.Connect(ctx, ai); err != nil {
			n.log.Debug("dial peer", "peer", p, "err", err)
		}
	}()
}

// bootstrapCandidates are the peers the run DHT bootstraps from: the
// configured bootstrap peers and every participant we are connected to.
func (n *Node) bootstrapCandidates() []peer.AddrInfo {
	out := append([]peer.AddrInfo(nil), n.cfg.BootstrapPeers...)
	for _, p := range n.ConnectedParticipants() {
		out = append(out, n.host.Peerstore().PeerInfo(p))
	}
	return out
}

// relayCandidates feeds AutoRelay with connected participants: any publicly
// reachable one runs a relay service for the others in the run.
func (n *Node) relayCandidates(ctx context.Context, num int) <-chan peer.AddrInfo {
	out := make(chan peer.AddrInfo, num)
	defer close(out)
	for _, p := range n.ConnectedParticipants() {
		if len(out) == num || ctx.Err() != nil {
			break
		}
		out <- n.host.Peerstore().PeerInfo(p)
	}
	return out
}

// publicRendezvous advertises the run on the public DHT and looks there for
// participants; found addresses go into the peerstore for the dial loop.
func (n *Node) publicRendezvous() {
	defer n.wg.Done()
	disc := drouting.NewRoutingDiscovery(n.publicDHT)
	ns := "psyche/run/" + n.tag
	var nextAdvertise time.Time
	ticker := time.NewTicker(publicFindPeriod)
	defer ticker.Stop()
	for {
		if time.Now().After(nextAdvertise) {
			ttl, err := disc.Advertise(n.ctx, ns)
			if err != nil {
				n.log.Debug("advertise run on public DHT", "err", err)
				ttl = publicFindPeriod
			}
			nextAdvertise = time.Now().Add(min(ttl, publicAdvertise))
		}
		if found, err := disc.FindPeers(n.ctx, ns); err == nil {
			for ai := range found {
				if ai.ID != n.host.ID() && n.IsParticipant(ai.ID) {
					n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, recordTTL)
				}
			}
			n.triggerDiscovery()
		}
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// SignedPeerRecord returns this node's addresses as a libp2p signed peer
// record, to be carried wherever participants can read it (a rendezvous
// directory, a join transaction, a web rendezvous).
func (n *Node) SignedPeerRecord() ([]byte, error) {
	rec := peer.PeerRecordFromAddrInfo(n.AddrInfo())
	env, err := record.Seal(rec, n.key)
	if err != nil {
		return nil, fmt.Errorf("seal peer record: %w", err)
	}
	data, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode peer record: %w", err)
	}
	return data, nil
}

// AddPeerRecord verifies a signed peer record and remembers its addresses;
// a record that is malformed, badly signed or older than one already seen
// changes nothing. It returns the peer the record describes.
func (n *Node) AddPeerRecord(data []byte) (peer.ID, error) {
	if len(data) > maxRecordSize {
		return "", fmt.Errorf("peer record of %d bytes exceeds %d", len(data), maxRecordSize)
	}
	env, rec, err := record.ConsumeEnvelope(data, peer.PeerRecordEnvelopeDomain)
	if err != nil {
		return "", fmt.Errorf("peer record: %w", err)
	}
	pr, ok := rec.(*peer.PeerRecord)
	if !ok {
		return "", errors.New("peer record: envelope holds another record type")
	}
	if !pr.PeerID.MatchesPublicKey(env.PublicKey) {
		return "", fmt.Errorf("peer record for %s is signed by another key", pr.PeerID)
	}
	cab, ok := peerstore.GetCertifiedAddrBook(n.host.Peerstore())
	if !ok {
		return "", errors.New("peer record: the peerstore cannot hold signed records")
	}
	if _, err := cab.ConsumePeerRecord(env, recordTTL); err != nil {
		return "", fmt.Errorf("peer record of %s: %w", pr.PeerID, err)
	}
	return pr.PeerID, nil
}

func (n *Node) rendezvousDir() string { return filepath.Join(n.cfg.RendezvousDir, n.tag) }

// writeOwnRecord publishes our signed record when our addresses change,
// atomically so that readers never see half a record.
func (n *Node) writeOwnRecord() error {
	addrs := fmt.Sprint(n.host.Addrs())
	n.mu.RLock()
	same := string(n.lastRecord) == addrs
	n.mu.RUnlock()
	if same {
		return nil
	}
	data, err := n.SignedPeerRecord()
	if err != nil {
		return err
	}
	// Again here: a client that left may have removed the directories while
	// they were empty.
	if err := os.MkdirAll(n.rendezvousDir(), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(n.rendezvousDir(), n.host.ID().String()+recordSuffix), data, 0o644); err != nil {
		return err
	}
	n.mu.Lock()
	n.lastRecord = []byte(addrs)
	n.mu.Unlock()
	return nil
}

// removeRendezvous removes our record, then the run's directory and (with
// RemoveRendezvousDir) the rendezvous directory if nothing else is left in
// them: os.Remove refuses a directory that is not empty.
func (n *Node) removeRendezvous() {
	_ = os.Remove(filepath.Join(n.rendezvousDir(), n.host.ID().String()+recordSuffix))
	_ = os.Remove(n.rendezvousDir())
	if n.cfg.RemoveRendezvousDir {
		_ = os.Remove(n.cfg.RendezvousDir)
	}
}

// readRecords loads the records of participants we are not connected to.
// Files are untrusted: each must parse, be signed by the key of the peer it
// names, and name the peer its file name says.
func (n *Node) readRecords() {
	entries, err := os.ReadDir(n.rendezvousDir())
	if err != nil {
		n.log.Warn("read rendezvous directory", "err", err)
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), recordSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, err := peer.Decode(name)
		if err != nil || id == n.host.ID() || !n.allowed(id) ||
			n.host.Network().Connectedness(id) == network.Connected {
			continue
		}
		data, err := readLimited(filepath.Join(n.rendezvousDir(), e.Name()), maxRecordSize)
		if err != nil {
			continue
		}
		got, err := n.AddPeerRecord(data)
		if err != nil {
			n.log.Debug("ignored rendezvous record", "file", e.Name(), "err", err)
			continue
		}
		if got != id {
			n.log.Debug("ignored rendezvous record naming another peer", "file", e.Name(), "peer", got)
		}
	}
}

func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s exceeds %d bytes", path, max)
	}
	return data, nil
}
