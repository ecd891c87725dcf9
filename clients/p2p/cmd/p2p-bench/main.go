// Command p2p-bench measures the p2p layer on loopback: blob fetch throughput,
// model-sharing throughput from several peers, and gossip latency.
//
//	go run ./clients/p2p/cmd/p2p-bench -peers 5 -blob-mib 16 -messages 500
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/p2p"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "p2p-bench: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	peers     int
	blobMiB   int
	blobs     int
	modelMiB  int
	messages  int
	interval  time.Duration
	transport string
}

func run() error {
	var o options
	flag.IntVar(&o.peers, "peers", 5, "number of nodes (at least 4)")
	flag.IntVar(&o.blobMiB, "blob-mib", 16, "size of each blob in MiB")
	flag.IntVar(&o.blobs, "blobs", 4, "blobs fetched one after another for the sequential figure")
	flag.IntVar(&o.modelMiB, "model-mib", 256, "model size in MiB for the model-sharing figure (0 skips it)")
	flag.IntVar(&o.messages, "messages", 500, "gossip messages for the latency figure")
	flag.DurationVar(&o.interval, "interval", 5*time.Millisecond, "pause between gossip messages")
	flag.StringVar(&o.transport, "transport", "quic", "quic, tcp or both")
	flag.Parse()
	if o.peers < 4 || o.blobMiB <= 0 || o.blobs <= 0 || o.messages <= 0 || o.modelMiB < 0 {
		return errors.New("need -peers >= 4 and positive -blob-mib, -blobs, -messages")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "p2p-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nodes, err := startNodes(ctx, o, dir)
	for _, n := range nodes {
		defer n.Close()
	}
	if err != nil {
		return err
	}
	fmt.Printf("p2p-bench: %d nodes on 127.0.0.1 over %s\n", o.peers, o.transport)
	if err := benchBlobs(ctx, o, nodes); err != nil {
		return err
	}
	if o.modelMiB > 0 {
		if err := benchModel(ctx, o, nodes, dir); err != nil {
			return err
		}
	}
	return benchGossip(ctx, o, nodes)
}

func startNodes(ctx context.Context, o options, dir string) ([]*p2p.Node, error) {
	cfg := p2p.Config{
		RunID:             "p2p-bench",
		ListenInterface:   "127.0.0.1",
		RendezvousDir:     filepath.Join(dir, "rendezvous"),
		DiscoveryInterval: 200 * time.Millisecond,
		DisableTCP:        o.transport == "quic",
		DisableQUIC:       o.transport == "tcp",
		MaxBlobSize:       uint64(o.blobMiB) << 20,
	}
	var nodes []*p2p.Node
	for range o.peers {
		n, err := p2p.New(ctx, cfg)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, n)
	}
	ids := make([]peer.ID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID()
	}
	for _, n := range nodes {
		n.SetParticipants(ids)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !meshed(nodes) {
		if time.Now().After(deadline) {
			return nodes, errors.New("nodes did not connect within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nodes, nil
}

func meshed(nodes []*p2p.Node) bool {
	for _, a := range nodes {
		onTopic := map[peer.ID]bool{}
		for _, p := range a.TopicPeers() {
			onTopic[p] = true
		}
		for _, b := range nodes {
			if a != b && (!onTopic[b.ID()] || a.Host().Network().Connectedness(b.ID()) != network.Connected) {
				return false
			}
		}
	}
	return true
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	out := make([]byte, n)
	_, _ = r.Read(out)
	return out
}

func mibps(bytes int, d time.Duration) float64 { return float64(bytes) / (1 << 20) / d.Seconds() }

// benchBlobs times one peer fetching blobs one after another, then every
// other peer fetching one blob at once from the publisher.
func benchBlobs(ctx context.Context, o options, nodes []*p2p.Node) error {
	size := o.blobMiB << 20
	var anns []p2p.Announcement
	for i := range o.blobs + 1 {
		a, err := nodes[0].Publish(ctx, uint64(i), p2p.BatchID{}, randomBytes(uint64(i), size))
		if err != nil {
			return err
		}
		anns = append(anns, a)
	}
	start := time.Now()
	for _, a := range anns[:o.blobs] {
		if _, err := nodes[1].FetchBlob(ctx, a); err != nil {
			return err
		}
	}
	seq := time.Since(start)
	fmt.Printf("blob fetch, 1 peer, %d x %d MiB in sequence: %.0f MiB/s (%.1f ms per blob)\n",
		o.blobs, o.blobMiB, mibps(o.blobs*size, seq), float64(seq.Milliseconds())/float64(o.blobs))

	last := anns[o.blobs]
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.FetchBlob(ctx, last); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fan := time.Since(start)
	fmt.Printf("blob fetch, %d peers at once from 1 publisher, %d MiB each: %.0f MiB/s aggregate (%.0f ms)\n",
		len(nodes)-1, o.blobMiB, mibps((len(nodes)-1)*size, fan), float64(fan.Milliseconds()))
	return nil
}

// benchModel times a joiner fetching a model from three sharers.
func benchModel(ctx context.Context, o options, nodes []*p2p.Node, dir string) error {
	model := randomBytes(77, o.modelMiB<<20)
	m, err := p2p.BuildManifest(bytes.NewReader(model), int64(len(model)), p2p.DefaultChunkSize)
	if err != nil {
		return err
	}
	var root p2p.Hash
	sharers := nodes[:3]
	for _, n := range sharers {
		root = n.ShareModel(m, bytes.NewReader(model))
	}
	joiner := nodes[3]
	ids := make([]peer.ID, len(sharers))
	for i, n := range sharers {
		ids[i] = n.ID()
	}
	start := time.Now()
	dst := filepath.Join(dir, "model.bin")
	if _, err := joiner.FetchModel(ctx, root, dst, p2p.FetchModelOptions{Peers: ids}); err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("model fetch, %d MiB in %d chunks from 3 peers to disk: %.0f MiB/s (%.2f s)\n",
		o.modelMiB, len(m.Chunks), mibps(len(model), d), d.Seconds())
	return os.Remove(dst)
}

// benchGossip publishes Finished messages carrying their send time from
// rotating publishers and measures when every other node receives them.
func benchGossip(ctx context.Context, o options, nodes []*p2p.Node) error {
	// Drain what earlier benchmarks left in the queues.
	for _, n := range nodes {
		for len(n.Messages()) > 0 {
			<-n.Messages()
		}
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	want := o.messages
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 0
			timeout := time.After(time.Duration(o.messages)*o.interval + 30*time.Second)
			for got < want {
				select {
				case m := <-n.Messages():
					if m.Finished == nil || m.Finished.Step < 1<<32 {
						continue
					}
					got++
					if m.From == n.ID() {
						continue
					}
					sent := time.Unix(0, int64(binary.BigEndian.Uint64(m.Finished.Digest[:8])))
					mu.Lock()
					latencies = append(latencies, m.Received.Sub(sent))
					mu.Unlock()
				case <-timeout:
					return
				}
			}
		}()
	}
	for i := range o.messages {
		var digest p2p.Hash
		binary.BigEndian.PutUint64(digest[:8], uint64(time.Now().UnixNano()))
		if _, err := nodes[i%len(nodes)].Finish(ctx, p2p.Finished{Step: 1<<32 + uint64(i), Digest: digest}); err != nil {
			return err
		}
		time.Sleep(o.interval)
	}
	wg.Wait()
	expected := o.messages * (len(nodes) - 1)
	if len(latencies) == 0 {
		return errors.New("no gossip message arrived")
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("gossip latency, %d messages x %d receivers (%d delivered): p50 %v, p99 %v, max %v\n",
		o.messages, len(nodes)-1, len(latencies), pct(0.50).Round(time.Microsecond),
		pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	if len(latencies) != expected {
		return fmt.Errorf("only %d of %d gossip deliveries arrived", len(latencies), expected)
	}
	return nil
}
