// Command status-bench measures the observability layer's costs on the
// client's hot path and per scrape: recording a step (alone and while
// readers take snapshots), taking a snapshot with full histories, a
// /metrics and /status request over loopback, a TUI frame, and the
// Recorder's memory after a long run. It prints one figure per line.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/tui"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "status-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status-bench", flag.ContinueOnError)
	longRun := fs.Int("steps", 1_000_000, "steps recorded for the memory figure")
	requests := fs.Int("requests", 200, "HTTP requests per endpoint")
	minTime := fs.Duration("time", time.Second, "minimum time per in-process figure")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *longRun < 1 || *requests < 1 || *minTime <= 0 {
		return fmt.Errorf("-steps, -requests and -time must be positive")
	}

	bench := func(name string, f func(n int)) {
		r := measure(*minTime, f)
		fmt.Fprintf(out, "%-44s %12.0f ns/op %8d B/op %6d allocs/op\n", name, r.nsPerOp, r.bytesPerOp, r.allocsPerOp)
	}

	var next uint64 = 1
	rec := status.NewRecorder("bench", status.Options{})
	bench("RecordStep", func(n int) {
		for range n {
			_ = rec.RecordStep(stepStat(next))
			next++
		}
	})
	// The reader stands for a TUI or scrape taking snapshots non-stop, the
	// worst contention the training loop can meet.
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		for !stop.Load() {
			_ = rec.Snapshot()
		}
		close(done)
	}()
	bench("RecordStep, reader snapshotting (its allocs)", func(n int) {
		for range n {
			_ = rec.RecordStep(stepStat(next))
			next++
		}
	})
	stop.Store(true)
	<-done
	fullRec := full()
	bench("Snapshot (full histories, 256 peers)", func(n int) {
		for range n {
			_ = fullRec.Snapshot()
		}
	})
	snap := fullRec.Snapshot()
	bench("TUI frame 80x24", func(n int) {
		for range n {
			_ = tui.Render(snap, 80, 24)
		}
	})
	bench("TUI frame 240x70", func(n int) {
		for range n {
			_ = tui.Render(snap, 240, 70)
		}
	})

	srv, err := metrics.Listen("127.0.0.1:0", full(), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	base := "http://" + srv.Addr().String()
	for _, path := range []string{"/metrics", "/status"} {
		lat, size, err := scrape(base+path, *requests)
		if err != nil {
			cancel()
			return err
		}
		fmt.Fprintf(out, "%-44s p50 %8.0f µs  p99 %8.0f µs  %8d bytes\n", "GET "+path+" (full recorder, loopback)", lat[len(lat)/2], lat[len(lat)*99/100], size)
	}
	cancel()
	if err := <-served; err != nil {
		return err
	}

	rec, fullRec, snap = nil, nil, status.Snapshot{}
	base0 := heap()
	rec = status.NewRecorder("bench", status.Options{})
	for i := 1; i <= *longRun; i++ {
		_ = rec.RecordStep(stepStat(uint64(i)))
		if i%10 == 0 {
			_ = rec.RecordEval(uint64(i), 1)
		}
		if i%100 == 0 {
			rec.Warn("a warning line of typical length about a peer that delivered nothing")
		}
	}
	fmt.Fprintf(out, "%-44s %12.0f KiB live heap after %d steps\n", "Recorder memory (default options)", (float64(heap())-float64(base0))/1024, *longRun)
	runtime.KeepAlive(rec)
	return nil
}

type result struct {
	nsPerOp                 float64
	bytesPerOp, allocsPerOp uint64
}

// measure runs f with growing n until one run lasts minTime.
func measure(minTime time.Duration, f func(n int)) result {
	for n := 1; ; n *= 2 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		f(n)
		el := time.Since(t0)
		runtime.ReadMemStats(&after)
		if el >= minTime || n >= 1<<30 {
			return result{
				nsPerOp:     float64(el.Nanoseconds()) / float64(n),
				bytesPerOp:  (after.TotalAlloc - before.TotalAlloc) / uint64(n),
				allocsPerOp: (after.Mallocs - before.Mallocs) / uint64(n),
			}
		}
	}
}

func stepStat(step uint64) status.StepStat {
	return status.StepStat{Step: step, Loss: 2.5, Tokens: 8192, Duration: time.Second, BytesOut: 40_000, BytesIn: 120_000,
		Digest: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
}

// full returns a Recorder whose every history is at capacity, with 256 peers.
func full() *status.Recorder {
	rec := status.NewRecorder("bench", status.Options{})
	rec.SetRunState("RoundTrain")
	_ = rec.SetParameters(124_000_000)
	peers := make([]status.Peer, 256)
	for i := range peers {
		peers[i] = status.Peer{ID: fmt.Sprintf("12D3KooWPeer%040d", i), Address: "/ip4/10.0.0.1/udp/4001/quic-v1", BytesIn: uint64(i) << 20, Latency: time.Millisecond}
	}
	_ = rec.SetPeers(peers)
	for i := uint64(1); i <= 10_000; i++ {
		_ = rec.RecordStep(stepStat(i))
		_ = rec.RecordEval(i, 2.6)
	}
	for range 200 {
		rec.Warn("a warning line of typical length about a peer that delivered nothing")
	}
	return rec
}

// scrape returns sorted request latencies in µs and the response size.
func scrape(url string, n int) ([]float64, int, error) {
	hc := &http.Client{}
	lat := make([]float64, 0, n)
	size := 0
	for range n {
		t0 := time.Now()
		resp, err := hc.Get(url)
		if err != nil {
			return nil, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("GET %s: %s %v", url, resp.Status, err)
		}
		lat = append(lat, float64(time.Since(t0).Microseconds()))
		size = len(b)
	}
	slices.Sort(lat)
	return lat, size, nil
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
