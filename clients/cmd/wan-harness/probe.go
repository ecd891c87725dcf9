package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync/atomic"
	"time"
)

// Measurements of a path between two namespaces, made with sockets the
// harness opens inside them (the kernel's own TCP and UDP, through the
// shaped links).

// rttResult is a UDP ping-pong series.
type rttResult struct {
	Sent, Answered   int
	Min, Median, P95 time.Duration
}

// measureRTT sends n small UDP probes from ns a to an echo socket in ns b
// (at bAddr), every interval, and times the answers.
func measureRTT(ctx context.Context, a, b, bAddr string, n int, interval time.Duration) (rttResult, error) {
	srv, err := listenPacketIn(b, "udp4", bAddr+":0")
	if err != nil {
		return rttResult{}, err
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteTo(buf[:k], from)
		}
	}()
	cli, err := listenPacketIn(a, "udp4", ":0")
	if err != nil {
		return rttResult{}, err
	}
	defer cli.Close()
	start := time.Now()
	rtts := make([]time.Duration, n)
	var answered atomic.Int64
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 2048)
		for {
			k, _, err := cli.ReadFrom(buf)
			if err != nil {
				return
			}
			if k < 16 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf)
			sent := time.Duration(binary.BigEndian.Uint64(buf[8:]))
			if seq < uint64(n) && rtts[seq] == 0 {
				rtts[seq] = time.Since(start) - sent
				answered.Add(1)
			}
		}
	}()
	dst := srv.LocalAddr()
	pkt := make([]byte, 64)
	for i := range n {
		if ctx.Err() != nil {
			return rttResult{}, ctx.Err()
		}
		binary.BigEndian.PutUint64(pkt, uint64(i))
		binary.BigEndian.PutUint64(pkt[8:], uint64(time.Since(start)))
		if _, err := cli.WriteTo(pkt, dst); err != nil {
			return rttResult{}, err
		}
		time.Sleep(interval)
	}
	time.Sleep(time.Second) // the last answers
	cli.Close()
	<-recvDone
	var got []time.Duration
	for _, r := range rtts {
		if r > 0 {
			got = append(got, r)
		}
	}
	res := rttResult{Sent: n, Answered: len(got)}
	if len(got) > 0 {
		slices.Sort(got)
		res.Min, res.Median, res.P95 = got[0], got[len(got)/2], got[len(got)*95/100]
	}
	return res, nil
}

// udpResult is a one-way UDP stream.
type udpResult struct {
	Sent, Received int
	Mbit           float64 // IP-level rate at the receiver, first to last packet
}

// Loss is the fraction of datagrams that did not arrive.
func (u udpResult) Loss() float64 {
	if u.Sent == 0 {
		return 0
	}
	return 1 - float64(u.Received)/float64(u.Sent)
}

// measureUDP sends datagrams of size bytes (UDP payload) from ns a to ns b
// at pps per second for d, and counts what arrives.
func measureUDP(ctx context.Context, a, b, bAddr string, size int, pps float64, d time.Duration) (udpResult, error) {
	srv, err := listenPacketIn(b, "udp4", bAddr+":0")
	if err != nil {
		return udpResult{}, err
	}
	defer srv.Close()
	if uc, ok := srv.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(8 << 20)
	}
	var received, bytes atomic.Int64
	var first, last atomic.Int64
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 65536)
		for {
			k, _, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			received.Add(1)
			bytes.Add(int64(k + 28))
		}
	}()
	cli, err := listenPacketIn(a, "udp4", ":0")
	if err != nil {
		return udpResult{}, err
	}
	defer cli.Close()
	if uc, ok := cli.(*net.UDPConn); ok {
		_ = uc.SetWriteBuffer(8 << 20)
	}
	dst := srv.LocalAddr()
	pkt := make([]byte, size)
	start := time.Now()
	sent := 0
	for time.Since(start) < d && ctx.Err() == nil {
		// Send what is due by now, then sleep a little: pacing in 1 ms slices.
		due := int(time.Since(start).Seconds() * pps)
		for sent < due {
			binary.BigEndian.PutUint64(pkt, uint64(sent))
			if _, err := cli.WriteTo(pkt, dst); err != nil {
				// ENOBUFS and the like count as sent and lost.
				if !errors.Is(err, net.ErrClosed) {
					sent++
					continue
				}
				return udpResult{}, err
			}
			sent++
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // drain the queues and delay lines
	srv.Close()
	<-recvDone
	res := udpResult{Sent: sent, Received: int(received.Load())}
	if span := time.Duration(last.Load() - first.Load()); span > 0 {
		res.Mbit = float64(bytes.Load()) * 8 / span.Seconds() / 1e6
	}
	return res, ctx.Err()
}

// measureTCP streams from ns a to ns b for d and returns the goodput in
// Mbit/s (application bytes over the time they took to arrive).
func measureTCP(ctx context.Context, a, b, bAddr string, d time.Duration) (float64, error) {
	ln, err := listenIn(b, "tcp4", bAddr+":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	type result struct {
		n    int64
		span time.Duration
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			resc <- result{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		var n int64
		var start time.Time
		for {
			k, err := c.Read(buf)
			if k > 0 && start.IsZero() {
				start = time.Now()
			}
			n += int64(k)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				resc <- result{n: n, span: time.Since(start), err: err}
				return
			}
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := dialIn(dctx, a, "tcp4", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 64<<10)
	end := time.Now().Add(d)
	_ = c.SetWriteDeadline(end)
	for time.Now().Before(end) && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	// Let what is queued arrive (bounded), then close.
	_ = c.(*net.TCPConn).CloseWrite()
	var r result
	select {
	case r = <-resc:
	case <-time.After(30 * time.Second):
		c.Close()
		r = <-resc
	}
	c.Close()
	if r.err != nil {
		return 0, r.err
	}
	if r.span <= 0 {
		return 0, nil
	}
	return float64(r.n) * 8 / r.span.Seconds() / 1e6, nil
}

// mathisMbit is the Mathis et al. bound on one Reno-like TCP flow's
// goodput: MSS/RTT * 1.22/sqrt(p); +Inf without loss.
func mathisMbit(s Shape) float64 {
	if s.Loss <= 0 || s.RTT <= 0 {
		return math.Inf(1)
	}
	return 1448 * 8 / s.RTT.Seconds() * 1.22 / math.Sqrt(s.Loss) / 1e6
}

// selftestRow is one shape's measurements.
type selftestRow struct {
	Shape   Shape
	RTT     rttResult
	Loss    udpResult
	Rate    udpResult
	TCPMbit float64
}

// runSelftest builds a hub and two client namespaces and measures each
// shape between them.
func runSelftest(ctx context.Context, shapes []Shape, d time.Duration, w io.Writer) ([]selftestRow, error) {
	t, err := newTopo(false)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	la, err := t.AddClient("a", clientAddr(1), shapes[0])
	if err != nil {
		return nil, err
	}
	lb, err := t.AddClient("b", clientAddr(2), shapes[0])
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "selftest: namespaces %s (%s) and %s (%s) through the hub %s; %v per measurement\n",
		la.NS, la.Addr, lb.NS, lb.Addr, t.Hub, d)
	var rows []selftestRow
	for _, s := range shapes {
		for _, l := range []*Link{la, lb} {
			if err := l.SetShape(t.Hub, s); err != nil {
				return rows, err
			}
		}
		row := selftestRow{Shape: s}
		fmt.Fprintf(w, "selftest: %v: RTT...", s)
		interval := 20 * time.Millisecond
		if row.RTT, err = measureRTT(ctx, la.NS, lb.NS, lb.Addr, int(d/interval), interval); err != nil {
			return rows, err
		}
		// Loss: small datagrams at a quarter of the rate (at most 4,000/s),
		// so that the rate limit drops none of them.
		pps := 4000.0
		if s.RateMbit > 0 {
			pps = min(pps, s.RateMbit*1e6/4/(228*8))
		}
		fmt.Fprint(w, " loss...")
		if row.Loss, err = measureUDP(ctx, la.NS, lb.NS, lb.Addr, 200, pps, 2*d); err != nil {
			return rows, err
		}
		// Rate: full-size datagrams at 1.25x the rate (unshaped: as many as
		// 1 Gbit/s would be).
		rate := 1000.0
		if s.RateMbit > 0 {
			rate = s.RateMbit * 1.25
		}
		fmt.Fprint(w, " UDP rate...")
		if row.Rate, err = measureUDP(ctx, la.NS, lb.NS, lb.Addr, 1200, rate*1e6/(1228*8), d); err != nil {
			return rows, err
		}
		fmt.Fprint(w, " TCP...")
		if row.TCPMbit, err = measureTCP(ctx, la.NS, lb.NS, lb.Addr, d); err != nil {
			return rows, err
		}
		fmt.Fprintln(w, " done")
		rows = append(rows, row)
	}
	for _, l := range []*Link{la, lb} {
		fmt.Fprintf(w, "selftest: link %s: up %d pkts (%d lost, %d overflow), down %d pkts (%d lost, %d overflow)\n", l.Name,
			l.Up.Packets.Load(), l.Up.Lost.Load(), l.Up.Overflow.Load(), l.Dn.Packets.Load(), l.Dn.Lost.Load(), l.Dn.Overflow.Load())
	}
	return rows, nil
}

func printSelftest(w io.Writer, rows []selftestRow) {
	tb := newTable("shape (rate/RTT/loss)", "RTT min", "RTT median", "RTT p95", "one-way loss", "UDP rate Mbit/s", "TCP goodput Mbit/s", "Mathis bound")
	for _, r := range rows {
		want := "unlimited"
		if r.Shape.RateMbit > 0 {
			want = fmt.Sprintf("%.0f", r.Shape.RateMbit)
		}
		mathis := mathisMbit(r.Shape)
		ms := "-"
		if !math.IsInf(mathis, 1) {
			ms = fmt.Sprintf("%.1f", mathis)
		}
		tb.Row(r.Shape.String(),
			ms3(r.RTT.Min), ms3(r.RTT.Median), ms3(r.RTT.P95),
			fmt.Sprintf("%.2f%% (%d/%d)", r.Loss.Loss()*100, r.Loss.Sent-r.Loss.Received, r.Loss.Sent),
			fmt.Sprintf("%.1f (of %s)", r.Rate.Mbit, want),
			fmt.Sprintf("%.1f", r.TCPMbit), ms)
	}
	tb.Print(w)
}

func ms3(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
