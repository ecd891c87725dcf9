package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
)

// `wan-harness peer` is a real libp2p node of clients/p2p (the same
// p2p.Node the training client runs) inside a namespace, for the scenarios
// that exercise the p2p layer without training: sharing and fetching a
// model (the joiner's FetchModel call is the one clients/client makes), and
// exchanging blobs through NATs. It prints one JSON object per line.

func init() {
	register("peer", "", cmdPeer)
}

// peerEvent is one line of a peer's output.
type peerEvent struct {
	Event   string    `json:"event"`
	T       time.Time `json:"t"`
	ID      string    `json:"id,omitempty"`
	Addrs   []string  `json:"addrs,omitempty"`
	Done    int       `json:"done,omitempty"`
	Total   int       `json:"total,omitempty"`
	Seconds float64   `json:"seconds,omitempty"`
	Err     string    `json:"err,omitempty"`
	Peer    string    `json:"peer,omitempty"`
	Conns   []string  `json:"conns,omitempty"`
	Step    uint64    `json:"step,omitempty"`
	Bytes   uint64    `json:"bytes,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
}

var emitMu sync.Mutex

func emit(e peerEvent) {
	e.T = time.Now()
	b, _ := json.Marshal(e)
	emitMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	emitMu.Unlock()
}

// seedPeerID is the peer id of a hex seed.
func seedPeerID(seedHex string) (peer.ID, error) {
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		return "", err
	}
	key, err := identity.FromSeed(seed)
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(key)
}

func newSeed() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func cmdPeer(ctx context.Context, args []string) error {
	fs := newFlags("peer", "(internal) -run ID -seed HEX -listen IP -participants ID,... [-share FILE -manifest FILE | -fetch ROOT -dst FILE | -blobs]")
	runID := fs.String("run", "wan", "run id (keys the protocols and the rendezvous records)")
	seedHex := fs.String("seed", "", "32-byte identity seed, hex")
	listen := fs.String("listen", "", "IP to bind")
	rendezvous := fs.String("rendezvous", "", "rendezvous directory")
	parts := fs.String("participants", "", "peer ids of the participants, comma-separated")
	transport := fs.String("transport", "both", "quic, tcp or both")
	nat := fs.Bool("nat", false, "NAT traversal: relays through participants, hole punching")
	bootstrap := fs.String("bootstrap", "", "multiaddrs with /p2p/ of peers to dial at start, comma-separated")
	share := fs.String("share", "", "model file to share")
	manifest := fs.String("manifest", "", "its manifest (p2p.Manifest.Marshal), built once by the harness")
	fetch := fs.String("fetch", "", "model root to fetch (hex)")
	dst := fs.String("dst", "", "where the fetched model goes")
	blobs := fs.Bool("blobs", false, "publish a blob every -interval and fetch every blob the others announce")
	blobKiB := fs.Int("blob-kib", 256, "size of each published blob")
	interval := fs.Duration("interval", 3*time.Second, "blob interval")
	verbose := fs.Bool("v", false, "p2p logs on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	seed, err := hex.DecodeString(*seedHex)
	if err != nil {
		return fmt.Errorf("-seed: %w", err)
	}
	key, err := identity.FromSeed(seed)
	if err != nil {
		return err
	}
	var ids []peer.ID
	for _, s := range strings.Split(*parts, ",") {
		if s == "" {
			continue
		}
		id, err := peer.Decode(s)
		if err != nil {
			return fmt.Errorf("-participants %q: %w", s, err)
		}
		ids = append(ids, id)
	}
	var boot []peer.AddrInfo
	for _, s := range strings.Split(*bootstrap, ",") {
		if s == "" {
			continue
		}
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			return fmt.Errorf("-bootstrap %q: %w", s, err)
		}
		boot = append(boot, *ai)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := p2p.Config{
		RunID: *runID, Identity: key, ListenInterface: *listen, RendezvousDir: *rendezvous,
		BootstrapPeers: boot, NATTraversal: *nat, DisableTCP: *transport == "quic", DisableQUIC: *transport == "tcp",
		DiscoveryInterval: time.Second, Logger: logger,
	}
	n, err := p2p.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	n.SetParticipants(ids)
	var addrs []string
	for _, a := range n.Addrs() {
		addrs = append(addrs, a.String())
	}
	emit(peerEvent{Event: "started", ID: n.ID().String(), Addrs: addrs})
	go reportConns(ctx, n, ids)

	switch {
	case *share != "":
		return sharePeer(ctx, n, *share, *manifest)
	case *fetch != "":
		return fetchPeer(ctx, n, *fetch, *dst, ids)
	case *blobs:
		return blobPeer(ctx, n, *blobKiB<<10, *interval)
	}
	<-ctx.Done()
	return nil
}

// reportConns prints, whenever it changes, how this node is connected to
// each participant: direct addresses, or relayed (/p2p-circuit).
func reportConns(ctx context.Context, n *p2p.Node, ids []peer.ID) {
	last := map[peer.ID]string{}
	for {
		for _, id := range ids {
			if id == n.ID() {
				continue
			}
			var conns []string
			for _, c := range n.Host().Network().ConnsToPeer(id) {
				conns = append(conns, connString(c))
			}
			s := strings.Join(conns, " ")
			if s != last[id] {
				last[id] = s
				emit(peerEvent{Event: "conns", Peer: id.String(), Conns: conns})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func connString(c network.Conn) string {
	dir := "out"
	if c.Stat().Direction == network.DirInbound {
		dir = "in"
	}
	kind := "direct"
	if _, err := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT); err == nil {
		kind = "relayed"
	}
	return kind + ":" + dir + ":" + c.RemoteMultiaddr().String()
}

func sharePeer(ctx context.Context, n *p2p.Node, path, manifestPath string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	m, err := p2p.UnmarshalManifest(data)
	if err != nil {
		return err
	}
	root := n.ShareModel(m, f)
	emit(peerEvent{Event: "sharing", ID: root.String()})
	<-ctx.Done()
	s := n.Snapshot()
	emit(peerEvent{Event: "served", Bytes: s.ChunkBytesServed})
	return nil
}

// fetchPeer fetches the model as clients/client does (FetchModel from every
// connected participant), calling FetchModel again after a failure: that
// resumes from dst.part. It waits first until it is connected to every
// other participant, so that the timing is the download's.
func fetchPeer(ctx context.Context, n *p2p.Node, rootHex, dst string, ids []peer.ID) error {
	raw, err := hex.DecodeString(rootHex)
	if err != nil || len(raw) != len(p2p.Hash{}) {
		return fmt.Errorf("-fetch: want a %d-byte hex root", len(p2p.Hash{}))
	}
	var root p2p.Hash
	copy(root[:], raw)
	want := len(ids) - 1
	for len(n.ConnectedParticipants()) < want {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	emit(peerEvent{Event: "connected", Done: len(n.ConnectedParticipants())})
	start := time.Now()
	var lastEmit time.Time
	for attempt := 1; ; attempt++ {
		emit(peerEvent{Event: "attempt", Attempt: attempt})
		_, err := n.FetchModel(ctx, root, dst, p2p.FetchModelOptions{Progress: func(done, total int) {
			if time.Since(lastEmit) >= 200*time.Millisecond || done == total {
				lastEmit = time.Now()
				emit(peerEvent{Event: "progress", Done: done, Total: total})
			}
		}})
		if err == nil {
			s := n.Snapshot()
			emit(peerEvent{Event: "fetched", Seconds: time.Since(start).Seconds(), Attempt: attempt, Bytes: s.ChunkBytesFetched})
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		emit(peerEvent{Event: "fetch-failed", Err: err.Error(), Attempt: attempt})
		// As the client does after a failed download: wait, then again.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// blobPeer publishes a blob every interval (as a trainer publishes its
// payload each round) and fetches every blob the others announce, from its
// signer.
func blobPeer(ctx context.Context, n *p2p.Node, size int, interval time.Duration) error {
	go func() {
		for m := range n.Messages() {
			if m.Announcement == nil {
				continue
			}
			a := *m.Announcement
			go func() {
				t0 := time.Now()
				fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, err := n.FetchBlob(fctx, a)
				e := peerEvent{Event: "blob", Peer: a.Signer.String(), Step: a.Step, Seconds: time.Since(t0).Seconds(), Bytes: a.Size}
				if err != nil {
					e.Err = err.Error()
				}
				var conns []string
				for _, c := range n.Host().Network().ConnsToPeer(a.Signer) {
					conns = append(conns, connString(c))
				}
				e.Conns = conns
				emit(e)
			}()
		}
	}()
	buf := make([]byte, size)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for step := uint64(1); ; step++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		_, _ = rand.Read(buf[:64])
		if _, err := n.Publish(ctx, step, p2p.BatchID{}, append([]byte(nil), buf...)); err != nil && !errors.Is(err, context.Canceled) {
			emit(peerEvent{Event: "publish-failed", Step: step, Err: err.Error()})
		}
	}
}
