// Command explorer-bench measures the run explorer on a fresh local
// validator: 10 runs of 2 clients that trained a few steps, then one run of
// 256 clients. For each it prints the latency of the JSON API, of a
// browser's first full render of the runs list and of a run's page
// (headless chromium, skipped when none is installed), and of an update: a
// transaction sent until its event reaches a stream (server-sent events)
// and until the open page has re-rendered, with the indexer following a
// websocket and, with a second indexer, polling.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gagliardetto/solana-go"
	"golang.org/x/sync/errgroup"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/explorer"
	"github.com/psyche-go/psyche/clients/explorer/explorertest"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/localnet"
)

// samples is how many times each latency is measured.
const samples = 15

func main() {
	flag.Parse() // no flags: -h prints the usage line instead of running
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "explorer-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n, err := programtest.Launch(ctx, localnet.Options{SlotDuration: 100 * time.Millisecond}, explorertest.Programs...)
	if err != nil {
		return err
	}
	defer n.Stop()

	fmt.Fprintln(os.Stderr, "setting up 10 runs of 2 clients, 3 steps each")
	runs := make([]*explorertest.Run, 10)
	g, gctx := errgroup.WithContext(ctx)
	for i := range runs {
		g.Go(func() error {
			var err error
			runs[i], err = trainedRun(gctx, n, fmt.Sprintf("bench-%02d", i), 2, 3)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b := &bench{ctx: ctx, n: n}
	start := time.Now()
	if b.live, err = startExplorer(ctx, n, true); err != nil {
		return err
	}
	b.row("10 runs", "indexer: first read (runs, states, history)", []time.Duration{time.Since(start)}, "")
	if b.polled, err = startExplorer(ctx, n, false); err != nil {
		return err
	}
	if path, err := explorertest.Chromium(); err == nil {
		if b.browser, err = explorertest.NewBrowser(ctx, path); err != nil {
			return err
		}
		defer b.browser.Close()
	} else {
		fmt.Fprintln(os.Stderr, "no browser, so no page figures:", err)
	}
	if err := b.scenario("10 runs", runs[0]); err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "setting up a run of 256 clients")
	big, err := trainedRun(ctx, n, "bench-256", 256, 1)
	if err != nil {
		return err
	}
	if err := b.scenario("1 run of 256 clients (+10)", big); err != nil {
		return err
	}
	fmt.Printf("%-28s %-58s %11s %11s  %s\n", "scenario", "what", "p50", "p90", "size")
	for _, r := range b.rows {
		fmt.Println(r)
	}
	return nil
}

// trainedRun is a plain run of members clients that played rounds steps.
func trainedRun(ctx context.Context, n *programtest.Net, id string, members, rounds int) (*explorertest.Run, error) {
	r, err := explorertest.NewRun(ctx, n, id, 0)
	if err != nil {
		return nil, err
	}
	p, err := explorertest.Config(members)
	if err != nil {
		return nil, err
	}
	if err := r.Configure(ctx, p, 1000); err != nil {
		return nil, err
	}
	if err := r.Join(ctx, members); err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	for k := range rounds {
		if _, err := r.PlayRound(ctx, 4-float32(k)/4); err != nil {
			return nil, err
		}
	}
	return r, r.ReportEval(ctx, 1, "sotu", 0.3)
}

// server is one explorer serving on loopback.
type server struct {
	url string
	x   *explorer.Indexer
}

func startExplorer(ctx context.Context, n *programtest.Net, live bool) (*server, error) {
	x := explorer.New(explorer.Options{Chain: n.Chain, Coordinator: coordinator.Program{ID: n.IDs[deploy.Coordinator]},
		TreasurerID: n.IDs[deploy.Treasurer], Live: live, Log: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = explorer.Serve(ctx, ln, x) }()
	select {
	case <-x.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &server{url: "http://" + ln.Addr().String(), x: x}, nil
}

type bench struct {
	ctx          context.Context
	n            *programtest.Net
	live, polled *server
	browser      *explorertest.Browser
	rows         []string
	rate         uint64
}

func (b *bench) row(scenario, what string, d []time.Duration, size string) {
	slices.Sort(d)
	q := func(p float64) string {
		return fmt.Sprintf("%.2f ms", float64(d[int(p*float64(len(d)-1))].Microseconds())/1000)
	}
	b.rows = append(b.rows, fmt.Sprintf("%-28s %-58s %11s %11s  %s", scenario, what, q(0.5), q(0.9), size))
}

// scenario measures the API, the pages and updates, on r's page.
func (b *bench) scenario(name string, r *explorertest.Run) error {
	runPath := "/runs/" + r.ID
	for _, path := range []string{"/api/runs", "/api/runs/" + r.ID} {
		var d []time.Duration
		size := 0
		for range samples {
			t0 := time.Now()
			n, err := fetch(b.live.url + path)
			if err != nil {
				return err
			}
			d, size = append(d, time.Since(t0)), n
		}
		b.row(name, "GET "+strings.Replace(path, r.ID, "ID", 1), d, fmt.Sprintf("%.1f KiB", float64(size)/1024))
	}
	if b.browser != nil {
		for _, path := range []string{"/", runPath} {
			var d []time.Duration
			for range samples {
				t, err := b.browser.Load(b.live.url+path, time.Minute)
				if err != nil {
					return err
				}
				d = append(d, t)
			}
			b.row(name, "page "+strings.Replace(path, r.ID, "ID", 1)+": navigation to first full render", d, "")
		}
	}
	for _, s := range []struct {
		label string
		srv   *server
		every time.Duration // between polls
	}{{"websocket", b.live, 0}, {"polling every 2 s", b.polled, 2 * time.Second}} {
		toStream, toPage, err := b.updates(r, s.srv, s.every)
		if err != nil {
			return err
		}
		b.row(name, "update ("+s.label+"): tx sent -> stream event", toStream, "")
		if toPage != nil {
			b.row(name, "update ("+s.label+"): tx sent -> page re-rendered", toPage, "")
		}
	}
	return nil
}

func fetch(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return len(body), err
}

// updates sends state changes to r (set_future_epoch_rates: the run's
// last activity changes) and times their arrival on the run's stream and,
// with a browser, on its open page. Each is sent at a random moment of
// the indexer's poll period, so that polling is timed fairly.
func (b *bench) updates(r *explorertest.Run, s *server, poll time.Duration) (toStream, toPage []time.Duration, err error) {
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	if b.browser != nil {
		if _, err := b.browser.Load(s.url+"/runs/"+r.ID, time.Minute); err != nil {
			return nil, nil, err
		}
	}
	events, err := stream(ctx, s.url+"/api/runs/"+r.ID+"/stream")
	if err != nil {
		return nil, nil, err
	}
	<-events // the current view
	for range samples {
		renders := 0.0
		if b.browser != nil {
			if renders, err = explorertest.Eval[float64](b.browser, "window.explorer.renders"); err != nil {
				return nil, nil, err
			}
		}
		if poll > 0 {
			time.Sleep(rand.N(poll))
		}
		b.rate++
		ix, err := r.Coord.SetFutureEpochRates(r.Authority.PublicKey(), &b.rate, nil)
		if err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		sent := make(chan error, 1)
		go func() {
			_, err := b.n.Chain.Send(ctx, r.Authority, []solana.Instruction{ix})
			sent <- err
		}()
		var seen time.Time
		select {
		case seen = <-events:
		case <-time.After(30 * time.Second):
			return nil, nil, errors.New("no stream event within 30 s of a transaction")
		}
		if err := <-sent; err != nil {
			return nil, nil, err
		}
		toStream = append(toStream, seen.Sub(t0))
		if b.browser != nil {
			if err := b.browser.WaitFor(fmt.Sprintf("window.explorer.renders > %v", renders), 30*time.Second); err != nil {
				return nil, nil, err
			}
			ms, err := explorertest.Eval[float64](b.browser, fmt.Sprintf("window.explorer.times[%v %% 100]", renders))
			if err != nil {
				return nil, nil, err
			}
			toPage = append(toPage, time.UnixMilli(int64(ms)).Sub(t0))
		}
		// A transaction makes more than one update (its record, then the
		// run's re-read): let them all land before the next one.
		time.Sleep(300 * time.Millisecond)
		for len(events) > 0 {
			<-events
		}
	}
	return toStream, toPage, nil
}

// stream sends the arrival time of every "update" event of an SSE stream.
func stream(ctx context.Context, url string) (<-chan time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := make(chan time.Time, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if sc.Text() == "event: update" {
				out <- time.Now()
			}
		}
	}()
	return out, nil
}
