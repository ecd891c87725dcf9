package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func init() {
	register("nat", "scenario 4: two peers behind NAT (MASQUERADE) and two public ones exchange blobs; relay and hole punching", cmdNAT)
}

func cmdNAT(ctx context.Context, args []string) error {
	fs := newFlags("nat", "[-duration 60s] [-shape 100/50ms/0.5] [-traversal on,off]")
	d := fs.Duration("duration", 60*time.Second, "how long the peers exchange blobs")
	shape := fs.String("shape", "100/50ms/0.5", "every access link (the NAT gateways' too)")
	traversal := fs.String("traversal", "on,off", "runs with NAT traversal (relay, hole punching: the client's default off loopback) on and/or off")
	transport := fs.String("transport", "both", "quic, tcp or both")
	public := fs.String("wan-range", "10.99", "first two octets of the public side's addresses (the peers' and the gateways'): 10.99 (private, as everywhere else), or a range libp2p counts as public, e.g. 11.99; either way they exist only inside the harness's namespaces, whose hub has no route out")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := parseShape(*shape)
	if err != nil {
		return err
	}
	dir := workDir("nat")
	var failed error
	for _, tr := range strings.Split(*traversal, ",") {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := runNAT(ctx, filepath.Join(dir, "traversal-"+tr), tr == "on", s, *d, *transport, *public); err != nil {
			fmt.Fprintf(os.Stderr, "wan-harness: nat (traversal %s): %v\n", tr, err)
			failed = err
		}
	}
	return failed
}

type natPeer struct {
	name, ns, addr, seed, id string
	natted                   bool
	proc                     *Proc
	log                      string
}

func runNAT(ctx context.Context, dir string, traversal bool, s Shape, d time.Duration, transport, wan string) error {
	if parts := strings.Split(wan, "."); len(parts) != 2 {
		return fmt.Errorf("-wan-range %q: want two octets, e.g. 11.99", wan)
	}
	if _, err := lookPath("nft"); err != nil {
		if _, err := lookPath("iptables"); err != nil {
			return fmt.Errorf("NAT needs nft or iptables (apt-get install nftables): %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t, err := newTopo(false)
	if err != nil {
		return err
	}
	defer t.Close()
	var peers []*natPeer
	for i := 1; i <= 2; i++ {
		l, err := t.AddClient(fmt.Sprintf("pub%d", i), fmt.Sprintf("%s.1.%d", wan, i), s)
		if err != nil {
			return err
		}
		peers = append(peers, &natPeer{name: fmt.Sprintf("pub%d", i), ns: l.NS, addr: l.Addr})
	}
	for i := 1; i <= 2; i++ {
		pub := fmt.Sprintf("%s.9.%d", wan, i)
		host, _, err := t.AddNATed(fmt.Sprintf("nat%d", i), pub, 100+i, s)
		if err != nil {
			return err
		}
		peers = append(peers, &natPeer{name: fmt.Sprintf("nat%d", i), ns: host, addr: fmt.Sprintf("10.99.%d.2", 100+i), natted: true})
	}
	var ids []string
	for _, p := range peers {
		p.seed = newSeed()
		id, err := seedPeerID(p.seed)
		if err != nil {
			return err
		}
		p.id = id.String()
		ids = append(ids, p.id)
	}
	mode := "off"
	if traversal {
		mode = "on"
	}
	fmt.Fprintf(os.Stderr, "wan-harness: [nat traversal %s] pub1 %s, pub2 %s public; nat1 %s behind %s.9.1, nat2 %s behind %s.9.2 (MASQUERADE); %v of blobs\n",
		mode, peers[0].addr, peers[1].addr, peers[2].addr, wan, peers[3].addr, wan, d)
	for _, p := range peers {
		p.log = filepath.Join(dir, p.name+".log")
		// libp2p's own logs of the NAT machinery go to the peer's log too.
		args := []string{"env", "GOLOG_LOG_LEVEL=error,autonat=debug,autonatv2=debug,autorelay=debug,relay=debug,p2p-holepunch=debug,basichost=info",
			self, "peer", "-run", "nat", "-seed", p.seed, "-listen", p.addr, "-rendezvous", filepath.Join(dir, "p2p"),
			"-participants", strings.Join(ids, ","), "-blobs", "-transport", transport, "-v"}
		if traversal {
			args = append(args, "-nat")
		}
		if p.proc, err = t.Start(p.ns, p.name, p.log, false, args...); err != nil {
			return err
		}
	}
	started := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	for _, p := range peers {
		p.proc.Stop(5 * time.Second)
	}
	// Read what each peer saw.
	byID := map[string]*natPeer{}
	for _, p := range peers {
		byID[p.id] = p
	}
	type pairStat struct {
		ok, fail        int
		secs            []float64
		conns           map[string]bool
		everDirect      bool
		everRelayed     bool
		lastErr         string
		firstOK, lastOK time.Time
	}
	pairs := map[[2]string]*pairStat{}
	get := func(a, b string) *pairStat {
		k := [2]string{a, b}
		if pairs[k] == nil {
			pairs[k] = &pairStat{conns: map[string]bool{}}
		}
		return pairs[k]
	}
	for _, p := range peers {
		ev := followEvents(p.log, closedChan())
		for e := range ev {
			other := byID[e.Peer]
			if other == nil {
				continue
			}
			ps := get(p.name, other.name)
			for _, c := range e.Conns {
				kind, _, _ := strings.Cut(c, ":")
				ps.conns[kind] = true
				if kind == "direct" {
					ps.everDirect = true
				} else {
					ps.everRelayed = true
				}
			}
			if e.Event == "blob" {
				if e.Err == "" {
					if ps.firstOK.IsZero() {
						ps.firstOK = e.T
					}
					ps.ok++
					ps.secs = append(ps.secs, e.Seconds)
				} else {
					ps.fail++
					ps.lastErr = e.Err
				}
			}
		}
	}
	fmt.Printf("\nscenario 4: NAT, traversal %s (libp2p relay v2 + DCUtR + port mapping when on), public side %s.0.0/16, links %s, %v of 256 KiB blobs every 3 s (files: %s)\n", mode, wan, s, d, dir)
	tb := newTable("fetcher", "signer", "connections seen", "blobs fetched", "failed", "first fetched after", "median fetch", "last error")
	var names []string
	for _, p := range peers {
		names = append(names, p.name)
	}
	for _, a := range names {
		for _, b := range names {
			if a == b {
				continue
			}
			ps := get(a, b)
			var kinds []string
			for k := range ps.conns {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			conn := strings.Join(kinds, "+")
			if conn == "" {
				conn = "none"
			}
			first := "-"
			if !ps.firstOK.IsZero() {
				first = fmtSec(ps.firstOK.Sub(started).Seconds())
			}
			tb.Row(a, b, conn, ps.ok, ps.fail, first, fmtSec(median(ps.secs)), firstLine(ps.lastErr))
		}
	}
	tb.Print(os.Stdout)
	nat12 := get("nat1", "nat2")
	switch {
	case nat12.ok > 0 && nat12.everDirect:
		fmt.Println("nat1 and nat2 reached each other directly (hole punched).")
	case nat12.ok > 0:
		fmt.Println("nat1 and nat2 exchanged blobs through a relay only.")
	default:
		fmt.Println("nat1 and nat2 never reached each other (clients/cmd/wan-harness/README.md explains why).")
	}
	return nil
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
