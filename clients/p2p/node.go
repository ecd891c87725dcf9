// Package p2p is the peer-to-peer layer of a Psyche client, on go-libp2p: a
// gossipsub topic per run for signed announcements, a request/response
// protocol for hash-verified blobs, and chunked model sharing for joiners.
//
// It knows nothing about the chain. The caller passes the current participant
// set (peer IDs derived from the ed25519 keys registered on-chain) with
// SetParticipants; only participants are served, and gossip authored by anyone
// else is dropped and its sender scored down. A peer that serves bad data is
// banned for the lifetime of the Node, which is one run.
package p2p

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// Config configures a Node. The zero value of every optional field is a
// sensible default; RunID is required.
type Config struct {
	// RunID names the training run; it keys the gossip topic, the protocol IDs,
	// the run DHT and the rendezvous records, so runs never mix.
	RunID string
	// Identity is the ed25519 p2p key; nil means a random one.
	Identity crypto.PrivKey
	// ListenInterface is an IP address or a network interface name to bind;
	// empty binds all IPv4 interfaces.
	ListenInterface string
	// ListenPort is the TCP and UDP (QUIC) port; 0 picks free ports.
	ListenPort int
	// DisableTCP and DisableQUIC turn a transport off; at least one must stay.
	DisableTCP, DisableQUIC bool

	// BootstrapPeers are dialled at start and whenever disconnected.
	BootstrapPeers []peer.AddrInfo
	// RendezvousDir, when set, is a directory shared by clients on one machine
	// where each writes its signed peer record and reads the others'.
	RendezvousDir string
	// RemoveRendezvousDir removes RendezvousDir on close when no other
	// client's records are left in it (a default directory the client chose;
	// one the user named is left in place). The run's subdirectory goes
	// when empty either way.
	RemoveRendezvousDir bool
	// DisableRunDHT turns off the run's private Kademlia DHT, which resolves the
	// addresses of participants we are not connected to.
	DisableRunDHT bool
	// PublicDHT also joins the public libp2p (amino) DHT and advertises the run
	// there, so clients on the internet find each other with no configuration.
	PublicDHT bool
	// MDNS announces this node and finds the run's participants on the local
	// network by multicast DNS. A machine without a multicast interface just
	// logs a warning; the other mechanisms still work.
	MDNS bool
	// NATTraversal enables UPnP/NAT-PMP port mapping, AutoNAT (as a client
	// and a server), circuit relay v2 (as a client through other participants,
	// and as a relay when reachable) and hole punching.
	NATTraversal bool
	// DiscoveryInterval is how often missing participants are looked for.
	DiscoveryInterval time.Duration

	// MaxConcurrentDownloads bounds our concurrent requests to any one peer.
	MaxConcurrentDownloads int
	// MaxUploadsPerPeer bounds concurrent requests we serve to one peer; more
	// are answered "busy" so the requester tries elsewhere.
	MaxUploadsPerPeer int
	// MaxBlobSize bounds an announced or served blob.
	MaxBlobSize uint64
	// RequestTimeout bounds one blob or chunk request to one peer.
	RequestTimeout time.Duration
	// FetchRounds is how many times a blob fetch walks its providers before
	// giving up.
	FetchRounds int
	// MaxModelUploadRate caps, in bytes per second, all the model manifests
	// and chunks this node serves together, so that sharing the model with
	// joiners leaves bandwidth for training; 0 means unlimited. A response
	// that cannot be sent within RequestTimeout at this rate is abandoned,
	// and the joiner retries it, from another peer if it has one.
	MaxModelUploadRate int64

	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// Defaults for Config's zero values.
const (
	DefaultMaxConcurrentDownloads = 4
	DefaultMaxUploadsPerPeer      = 8
	DefaultMaxBlobSize            = 256 << 20
	DefaultRequestTimeout         = 60 * time.Second
	DefaultFetchRounds            = 3
	DefaultDiscoveryInterval      = 5 * time.Second
	// messageBuffer holds received gossip until the caller reads it.
	messageBuffer = 4096
)

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.RunID == "" {
		return out, errors.New("p2p config: run id is required")
	}
	if out.DisableTCP && out.DisableQUIC {
		return out, errors.New("p2p config: TCP and QUIC cannot both be disabled")
	}
	if out.ListenPort < 0 || out.ListenPort > 65535 {
		return out, fmt.Errorf("p2p config: port %d is outside 0..65535", out.ListenPort)
	}
	if out.MaxConcurrentDownloads < 0 || out.MaxUploadsPerPeer < 0 || out.FetchRounds < 0 ||
		out.RequestTimeout < 0 || out.DiscoveryInterval < 0 || out.MaxModelUploadRate < 0 {
		return out, errors.New("p2p config: limits and timeouts cannot be negative")
	}
	if out.MaxConcurrentDownloads == 0 {
		out.MaxConcurrentDownloads = DefaultMaxConcurrentDownloads
	}
	if out.MaxUploadsPerPeer == 0 {
		out.MaxUploadsPerPeer = DefaultMaxUploadsPerPeer
	}
	if out.MaxBlobSize == 0 {
		out.MaxBlobSize = DefaultMaxBlobSize
	}
	if out.RequestTimeout == 0 {
		out.RequestTimeout = DefaultRequestTimeout
	}
	if out.FetchRounds == 0 {
		out.FetchRounds = DefaultFetchRounds
	}
	if out.DiscoveryInterval == 0 {
		out.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// RunKey derives the 32-byte key that names a run on the network.
func RunKey(runID string) Hash { return sha256.Sum256([]byte("psyche/run/" + runID)) }

// Node is one client's presence in one run's p2p network.
type Node struct {
	cfg    Config
	log    *slog.Logger
	key    crypto.PrivKey
	host   host.Host
	bw     *metrics.BandwidthCounter
	runKey Hash
	tag    string // short hex of runKey for names

	topic *pubsub.Topic
	sub   *pubsub.Subscription
	msgs  chan Message

	runDHT    *dht.IpfsDHT
	publicDHT *dht.IpfsDHT
	mdns      io.Closer

	mu           sync.RWMutex
	participants map[peer.ID]struct{}
	bans         map[peer.ID]string
	blobs        map[Hash]storedBlob
	providers    map[Hash]map[peer.ID]uint64 // hash -> announcer -> step
	models       map[Hash]*sharedModel
	retired      retiredModels
	uploads      map[peer.ID]int
	downloads    map[peer.ID]chan struct{}
	lastRecord   []byte
	trigger      chan struct{}

	stats counters
	// modelPacer enforces MaxModelUploadRate; nil when unlimited.
	modelPacer *pacer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// New starts a node: it listens, joins the run's gossip topic and starts
// discovery. The participant set starts empty (only the node itself), so
// nothing is served until SetParticipants is called. The node lives until
// Close; ctx only passes its values on.
func New(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	key := cfg.Identity
	if key == nil {
		if key, _, err = crypto.GenerateEd25519Key(nil); err != nil {
			return nil, fmt.Errorf("generate p2p identity: %w", err)
		}
	}
	if key.Type() != crypto.Ed25519 {
		return nil, errors.New("p2p identity must be an ed25519 key")
	}
	listen, err := listenAddrs(cfg)
	if err != nil {
		return nil, err
	}
	runKey := RunKey(cfg.RunID)
	n := &Node{
		cfg:          cfg,
		log:          cfg.Logger,
		key:          key,
		bw:           metrics.NewBandwidthCounter(),
		runKey:       runKey,
		tag:          runTag(cfg.RunID),
		msgs:         make(chan Message, messageBuffer),
		participants: map[peer.ID]struct{}{},
		bans:         map[peer.ID]string{},
		blobs:        map[Hash]storedBlob{},
		providers:    map[Hash]map[peer.ID]uint64{},
		models:       map[Hash]*sharedModel{},
		uploads:      map[peer.ID]int{},
		downloads:    map[peer.ID]chan struct{}{},
	}
	if cfg.MaxModelUploadRate > 0 {
		n.modelPacer = newPacer(cfg.MaxModelUploadRate)
	}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))

	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrs(listen...),
		libp2p.ConnectionGater((*gater)(n)),
		libp2p.BandwidthReporter(n.bw),
		// The client exposes our Snapshot; libp2p's own Prometheus collectors
		// register globally and would collide between nodes in one process.
		libp2p.DisableMetrics(),
	}
	if !cfg.DisableTCP {
		opts = append(opts, libp2p.Transport(tcp.NewTCPTransport))
	}
	if !cfg.DisableQUIC {
		opts = append(opts, libp2p.Transport(libp2pquic.NewTransport))
	}
	if cfg.NATTraversal {
		opts = append(opts,
			libp2p.NATPortMap(),
			libp2p.EnableHolePunching(),
			libp2p.EnableRelayService(),
			// Participants answer each other's AutoNAT probes: without a
			// server in the run, a node behind NAT never learns it is
			// private, so it neither reserves a relay nor hole-punches
			// (wan-harness's nat scenario). A run has few relay candidates,
			// so one is enough to reserve a slot; libp2p's default of 4
			// made NATed peers wait 3 minutes.
			libp2p.EnableNATService(),
			libp2p.EnableAutoRelayWithPeerSource(n.relayCandidates, autorelay.WithMinCandidates(1)),
		)
	} else {
		opts = append(opts, libp2p.DisableRelay())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		n.cancel()
		return nil, fmt.Errorf("start libp2p host on %v: %w", listen, err)
	}
	n.host = h
	n.participants[h.ID()] = struct{}{}

	if err := n.startGossip(); err != nil {
		n.Close()
		return nil, err
	}
	h.SetStreamHandler(n.blobProtocol(), n.serveBlob)
	h.SetStreamHandler(n.modelProtocol(), n.serveModel)
	if err := n.startDiscovery(); err != nil {
		n.Close()
		return nil, err
	}
	n.log.Info("p2p node started", "peer", h.ID().String(), "run", cfg.RunID, "addrs", h.Addrs())
	return n, nil
}

// listenAddrs turns the bind options into multiaddrs for each transport.
func listenAddrs(cfg Config) ([]ma.Multiaddr, error) {
	ips, err := bindIPs(cfg.ListenInterface)
	if err != nil {
		return nil, err
	}
	var out []ma.Multiaddr
	for _, ip := range ips {
		family := "ip4"
		if ip.To4() == nil {
			family = "ip6"
		}
		var specs []string
		if !cfg.DisableTCP {
			specs = append(specs, fmt.Sprintf("/%s/%s/tcp/%d", family, ip, cfg.ListenPort))
		}
		if !cfg.DisableQUIC {
			specs = append(specs, fmt.Sprintf("/%s/%s/udp/%d/quic-v1", family, ip, cfg.ListenPort))
		}
		for _, s := range specs {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return nil, fmt.Errorf("listen address %s: %w", s, err)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// bindIPs resolves --bind-p2p-interface: an IP, an interface name, or empty.
func bindIPs(iface string) ([]net.IP, error) {
	if iface == "" {
		return []net.IP{net.IPv4zero}, nil
	}
	if ip := net.ParseIP(iface); ip != nil {
		return []net.IP{ip}, nil
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("bind interface %q is neither an IP address nor a network interface: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of interface %s: %w", iface, err)
	}
	var ips []net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
			ips = append(ips, ipn.IP)
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("interface %s has no usable IP address", iface)
	}
	return ips, nil
}

// ID is this node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Sign signs data with the node's p2p key (an ed25519 signature): the proof
// a join_run carries that its signer holds this identity.
func (n *Node) Sign(data []byte) ([]byte, error) { return n.key.Sign(data) }

// Addrs are the addresses this node listens on, with its peer ID appended.
func (n *Node) Addrs() []ma.Multiaddr {
	info := peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()}
	addrs, _ := peer.AddrInfoToP2pAddrs(&info)
	return addrs
}

// AddrInfo is this node's peer ID and listen addresses, for bootstrap lists.
func (n *Node) AddrInfo() peer.AddrInfo {
	return peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()}
}

// Host exposes the libp2p host, e.g. to add protocols of the caller's own.
func (n *Node) Host() host.Host { return n.host }

// RunKey is the key naming this node's run on the network.
func (n *Node) RunKey() Hash { return n.runKey }

// Close leaves the network. It is safe to call more than once.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.cancel()
	var errs []error
	if n.sub != nil {
		n.sub.Cancel()
	}
	if n.topic != nil {
		// Close fails while a subscription is still being torn down; the host
		// closing below ends everything anyway.
		_ = n.topic.Close()
	}
	if n.mdns != nil {
		errs = append(errs, n.mdns.Close())
	}
	for _, d := range []*dht.IpfsDHT{n.runDHT, n.publicDHT} {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	n.wg.Wait()
	close(n.msgs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close p2p node: %w", err)
	}
	return nil
}

// SetParticipants replaces the run's participant set, as read from the chain.
// This node always counts itself. Peers that left are no longer served.
func (n *Node) SetParticipants(ids []peer.ID) {
	set := make(map[peer.ID]struct{}, len(ids)+1)
	for _, id := range ids {
		set[id] = struct{}{}
	}
	set[n.host.ID()] = struct{}{}
	n.mu.Lock()
	n.participants = set
	n.mu.Unlock()
	n.triggerDiscovery()
}

// Participants returns the current participant set, this node included.
func (n *Node) Participants() []peer.ID {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]peer.ID, 0, len(n.participants))
	for id := range n.participants {
		out = append(out, id)
	}
	return out
}

// IsParticipant reports whether id is in the current participant set.
func (n *Node) IsParticipant(id peer.ID) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	_, ok := n.participants[id]
	return ok
}

// allowed reports whether id may be served and heard: a participant not banned.
func (n *Node) allowed(id peer.ID) bool { return n.refusal(id) == statusOK }

// Ban excludes a peer for the rest of the run: its connections are closed, it
// is neither dialled nor accepted, and its gossip is rejected.
func (n *Node) Ban(id peer.ID, reason string) {
	if id == n.host.ID() {
		return
	}
	n.mu.Lock()
	_, already := n.bans[id]
	if !already {
		n.bans[id] = reason
		for h, provs := range n.providers {
			delete(provs, id)
			if len(provs) == 0 {
				delete(n.providers, h)
			}
		}
	}
	n.mu.Unlock()
	if already {
		return
	}
	n.stats.bans.Add(1)
	n.log.Warn("banned peer for this run", "peer", id, "reason", reason)
	// The code tells the peer why its requests in flight end.
	for _, c := range n.host.Network().ConnsToPeer(id) {
		_ = c.CloseWithError(network.ConnGated)
	}
}

// Banned reports whether id is banned, and why.
func (n *Node) Banned(id peer.ID) (reason string, banned bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	reason, banned = n.bans[id]
	return reason, banned
}

// BlobProtocol and ModelProtocol name the request/response protocols of a
// run; the run tag in them means one host can never confuse runs.
func BlobProtocol(runID string) protocol.ID {
	return protocol.ID("/psyche/" + runTag(runID) + "/blob/1")
}
func ModelProtocol(runID string) protocol.ID {
	return protocol.ID("/psyche/" + runTag(runID) + "/model/1")
}

func (n *Node) blobProtocol() protocol.ID  { return BlobProtocol(n.cfg.RunID) }
func (n *Node) modelProtocol() protocol.ID { return ModelProtocol(n.cfg.RunID) }

func runTag(runID string) string {
	k := RunKey(runID)
	return hex.EncodeToString(k[:8])
}

// gater refuses banned peers at every stage of a connection.
type gater Node

func (g *gater) banned(id peer.ID) bool {
	_, b := (*Node)(g).Banned(id)
	return b
}

func (g *gater) InterceptPeerDial(p peer.ID) bool                 { return !g.banned(p) }
func (g *gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return !g.banned(p) }
func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g *gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.banned(p)
}
func (g *gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
