package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// testConfig binds loopback only, with mDNS-free, public-DHT-free discovery
// through a rendezvous directory shared by the test's nodes.
func testConfig(t *testing.T, runID, rendezvous string) Config {
	t.Helper()
	cfg := Config{
		RunID:             runID,
		ListenInterface:   "127.0.0.1",
		RendezvousDir:     rendezvous,
		DiscoveryInterval: 200 * time.Millisecond,
		RequestTimeout:    10 * time.Second,
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return cfg
}

func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// startRun starts count nodes of one run that know each other only as
// participants; discovery has to connect them.
func startRun(t *testing.T, runID string, count int) []*Node {
	t.Helper()
	dir := t.TempDir()
	nodes := make([]*Node, count)
	for i := range nodes {
		nodes[i] = startNode(t, testConfig(t, runID, dir))
	}
	setParticipants(nodes, nodes)
	waitMeshed(t, nodes)
	return nodes
}

func ids(nodes []*Node) []peer.ID {
	out := make([]peer.ID, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID()
	}
	return out
}

func setParticipants(nodes, participants []*Node) {
	for _, n := range nodes {
		n.SetParticipants(ids(participants))
	}
}

// waitMeshed waits until every node is connected to every other and sees it
// subscribed to the run topic.
func waitMeshed(t *testing.T, nodes []*Node) {
	t.Helper()
	var state string
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		state = ""
		for i, a := range nodes {
			onTopic := map[peer.ID]bool{}
			for _, p := range a.TopicPeers() {
				onTopic[p] = true
			}
			state += fmt.Sprintf("\nnode %d: connected to", i)
			for j, b := range nodes {
				if a == b {
					continue
				}
				connected := a.Host().Network().Connectedness(b.ID()) == network.Connected
				if !connected || !onTopic[b.ID()] {
					ok = false
				}
				state += fmt.Sprintf(" %d (connected %v, on topic %v)", j, connected, onTopic[b.ID()])
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not all connect and join the topic:%s", state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// collect reads messages from n until want returns true for the set so far.
func collect(t *testing.T, n *Node, timeout time.Duration, done func([]Message) bool) []Message {
	t.Helper()
	var got []Message
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !done(got) {
		select {
		case m, ok := <-n.Messages():
			if !ok {
				t.Fatalf("node %s closed while collecting", n.ID())
			}
			got = append(got, m)
		case <-timer.C:
			t.Fatalf("node %s: timed out with %d messages; %+v", n.ID().ShortString(), len(got), n.Snapshot())
		}
	}
	return got
}
