package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Shape is what one access link does to the packets that cross it.
//
// Rate is enforced by the kernel (tc tbf on the egress of each end of the
// link: the client's TUN for its upload, the hub's TUN for its download).
// Delay and loss are enforced by the userspace pump between the two TUN
// devices, because this kernel has no sch_netem (and no tc classifiers or
// actions, so no ifb redirect either).
//
// The figures are defined so that two clients whose links have the same
// shape see exactly that shape between each other: a path from A to B
// crosses A's link upward and B's link downward, so each crossing adds
// RTT/4 of delay and drops a packet with probability Loss/2. Between links
// of different shapes the RTT is the mean of the two links' RTTs and the
// loss about the mean of their losses. The path to the validator and data
// server (behind an unshaped veth) sees half the link's RTT and loss.
type Shape struct {
	RateMbit float64       // 0: unlimited
	RTT      time.Duration // client-to-client round trip over two such links
	Loss     float64       // fraction, client-to-client one way (0.005 = 0.5%)
}

// Unshaped passes packets through at once.
var Unshaped = Shape{}

func (s Shape) String() string {
	if s == Unshaped {
		return "unshaped"
	}
	rate := "unlimited"
	if s.RateMbit > 0 {
		rate = strconv.FormatFloat(s.RateMbit, 'f', -1, 64) + "Mbit"
	}
	return fmt.Sprintf("%s/%s/%s%%", rate, s.RTT, strconv.FormatFloat(s.Loss*100, 'f', -1, 64))
}

// parseShape reads RATE/RTT/LOSS, e.g. "100/50ms/0.5" (Mbit/s, RTT, loss
// in percent); "unshaped" or "none" for no shaping.
func parseShape(s string) (Shape, error) {
	if s == "unshaped" || s == "none" || s == "" {
		return Unshaped, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Shape{}, fmt.Errorf("shape %q: want RATE_MBIT/RTT/LOSS_PERCENT, e.g. 100/50ms/0.5", s)
	}
	rate, err := strconv.ParseFloat(strings.TrimSuffix(strings.ToLower(parts[0]), "mbit"), 64)
	if err != nil || rate < 0 || rate > 100000 {
		return Shape{}, fmt.Errorf("shape %q: bad rate %q (Mbit/s, 0 = unlimited)", s, parts[0])
	}
	rtt, err := time.ParseDuration(parts[1])
	if err != nil || rtt < 0 || rtt > 10*time.Second {
		return Shape{}, fmt.Errorf("shape %q: bad RTT %q (e.g. 50ms)", s, parts[1])
	}
	loss, err := strconv.ParseFloat(strings.TrimSuffix(parts[2], "%"), 64)
	if err != nil || loss < 0 || loss > 100 {
		return Shape{}, fmt.Errorf("shape %q: bad loss %q (percent)", s, parts[2])
	}
	return Shape{RateMbit: rate, RTT: rtt, Loss: loss / 100}, nil
}

// DirStats counts one direction of a link.
type DirStats struct {
	Packets, Bytes atomic.Uint64 // forwarded
	InfraBytes     atomic.Uint64 // forwarded to or from the validator/data namespace
	Lost           atomic.Uint64 // dropped by the loss model
	Overflow       atomic.Uint64 // dropped because the delay line was full
	Cut            atomic.Uint64 // dropped while the link was cut
}

// Link is one access link: a TUN device in the client's namespace and one
// in the hub, joined by two pumps (up and down).
type Link struct {
	Name   string // the hub-side device name
	NS     string // the client-side namespace
	Addr   string // the client's address
	Up, Dn DirStats

	shape      atomic.Pointer[Shape]
	cut        atomic.Bool
	client     *os.File // wan0 in NS
	hub        *os.File // Name in the hub
	closeOnce  sync.Once
	wg         sync.WaitGroup
	infraMatch [3]byte // the first three octets of the infra subnet
}

// mtu is the links' MTU; tunBuf must hold one packet.
const (
	mtu    = 1500
	tunBuf = 2048
	// delayLine bounds the packets in flight in one direction of one link:
	// 1 Gbit/s for 50 ms (the one-way crossing of a 200 ms RTT link) is
	// about 4,200 full-size packets.
	delayLine = 1 << 14
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, tunBuf); return &b }}

type packet struct {
	buf *[]byte
	n   int
	due time.Time
}

// Shape returns the link's current shape.
func (l *Link) Shape() Shape { return *l.shape.Load() }

// SetCut cuts the link (every packet is dropped) or restores it.
func (l *Link) SetCut(cut bool) { l.cut.Store(cut) }

// start runs the two pumps.
func (l *Link) start(seed uint64) {
	l.wg.Add(2)
	go l.pump(l.client, l.hub, &l.Up, true, seed*2+1)
	go l.pump(l.hub, l.client, &l.Dn, false, seed*2+2)
}

// pump moves packets from src to dst: each is dropped with probability
// Loss/2, the others are delivered RTT/4 after they were read, in order.
func (l *Link) pump(src, dst *os.File, st *DirStats, up bool, seed uint64) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	q := make(chan packet, delayLine)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// over is a running mean of how late a sleep wakes up (the runtime's
		// timers are about a millisecond coarse under load): sleeps are
		// shortened by it, so packets leave on time on average instead of
		// about a millisecond late at each of the four crossings of a path.
		var over time.Duration
		for p := range q {
			if d := time.Until(p.due); d > over {
				t0 := time.Now()
				time.Sleep(d - over)
				late := time.Since(t0) - (d - over)
				over += (late - over) / 8
			}
			b := (*p.buf)[:p.n]
			if _, err := dst.Write(b); err != nil && errors.Is(err, os.ErrClosed) {
				bufPool.Put(p.buf)
				for p := range q {
					bufPool.Put(p.buf)
				}
				return
			}
			st.Packets.Add(1)
			st.Bytes.Add(uint64(p.n))
			if l.isInfra(b, up) {
				st.InfraBytes.Add(uint64(p.n))
			}
			bufPool.Put(p.buf)
		}
	}()
	for {
		buf := bufPool.Get().(*[]byte)
		n, err := src.Read(*buf)
		if err != nil {
			bufPool.Put(buf)
			if errors.Is(err, os.ErrClosed) || n == 0 {
				break
			}
			continue
		}
		sh := l.shape.Load()
		switch {
		case l.cut.Load():
			st.Cut.Add(1)
			bufPool.Put(buf)
			continue
		case sh.Loss > 0 && rng.Float64() < sh.Loss/2:
			st.Lost.Add(1)
			bufPool.Put(buf)
			continue
		}
		p := packet{buf: buf, n: n}
		if sh.RTT > 0 {
			p.due = time.Now().Add(sh.RTT / 4)
		}
		select {
		case q <- p:
		default:
			st.Overflow.Add(1)
			bufPool.Put(buf)
		}
	}
	close(q)
	<-done
}

// isInfra reports whether an IPv4 packet goes to (up) or comes from (down)
// the infra subnet.
func (l *Link) isInfra(b []byte, up bool) bool {
	if len(b) < 20 || b[0]>>4 != 4 {
		return false
	}
	off := 12 // source
	if up {
		off = 16 // destination
	}
	return b[off] == l.infraMatch[0] && b[off+1] == l.infraMatch[1] && b[off+2] == l.infraMatch[2]
}

// close stops the pumps and removes both TUN devices.
func (l *Link) close() {
	l.closeOnce.Do(func() {
		l.client.Close()
		l.hub.Close()
		l.wg.Wait()
	})
}

// tbfArgs is the tc tbf for a rate: a burst of 4 ms at the rate (at least
// 10 full packets) and a queue of one bandwidth-delay product at the link's
// RTT (at least 50 ms and 64 KiB), so that a full buffer adds at most about
// an RTT of queueing, as on a sensibly buffered access link.
func tbfArgs(s Shape) []string {
	bps := s.RateMbit * 1e6 / 8
	burst := max(int(bps*0.004), 10*mtu)
	limit := max(int(bps*max(s.RTT, 50*time.Millisecond).Seconds()), 64<<10, 2*burst)
	return []string{"tbf", "rate", fmt.Sprintf("%dkbit", int(s.RateMbit*1000)), "burst", strconv.Itoa(burst), "limit", strconv.Itoa(limit)}
}

// setRate installs (or removes) the tbf of a shape on a device.
func setRate(ns, dev string, s Shape) error {
	if s.RateMbit <= 0 {
		// Back to the default qdisc; "no such qdisc" when there was none.
		_ = sh("tc", "-n", ns, "qdisc", "del", "dev", dev, "root")
		return nil
	}
	return sh("tc", append([]string{"-n", ns, "qdisc", "replace", "dev", dev, "root"}, tbfArgs(s)...)...)
}

// SetShape changes the link's shape now: the rate on both TUN devices, the
// delay and loss in the pumps.
func (l *Link) SetShape(hubNS string, s Shape) error {
	if err := setRate(l.NS, "wan0", s); err != nil {
		return err
	}
	if err := setRate(hubNS, l.Name, s); err != nil {
		return err
	}
	l.shape.Store(&s)
	return nil
}
