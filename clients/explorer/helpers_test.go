package explorer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/explorer"
	"github.com/psyche-go/psyche/clients/explorer/explorertest"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/internal/syncbuf"
	"github.com/psyche-go/psyche/localnet"
)

// One validator with the three programs serves every test of the package
// (each on runs of its own): deploying them is most of a test's time.
var shared struct {
	once sync.Once
	net  *programtest.Net
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.net != nil {
		_ = shared.net.Stop()
	}
	os.Exit(code)
}

func sharedNet(t *testing.T) *programtest.Net {
	t.Helper()
	shared.once.Do(func() {
		if shared.err = localnet.CheckInstalled(); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.net, shared.err = programtest.Launch(ctx, localnet.Options{SlotDuration: 100 * time.Millisecond}, explorertest.Programs...)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.net
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// trainingRun is a Treasurer run (1,000,000 base units) in which two
// clients trained a step per loss given, the first of them reporting a
// score of step 1.
func trainingRun(t *testing.T, n *programtest.Net, id string, losses ...float32) *explorertest.Run {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	r, err := explorertest.NewRun(ctx, n, id, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	p, err := explorertest.Config(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Configure(ctx, p, 1000); err != nil {
		t.Fatal(err)
	}
	if err := r.Join(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range losses {
		playRound(t, r, l)
	}
	if err := r.ReportEval(ctx, 1, "sotu", 0.4); err != nil {
		t.Fatal(err)
	}
	if err := r.ReportPrompt(ctx, 1, 3, []uint32{'h', 'i', '!'}); err != nil {
		t.Fatal(err)
	}
	return r
}

// faulted is one run, made once for every test that shows it: three
// clients, every contribution verified, one step in all; the step's
// dispute found member 0 at fault, and the run finished.
var faulted struct {
	once   sync.Once
	run    *explorertest.Run
	member solana.PublicKey
	err    error
}

// faultedRun is "fault-run" (see faulted) and the member found at fault.
func faultedRun(t *testing.T, n *programtest.Net) (*explorertest.Run, solana.PublicKey) {
	t.Helper()
	faulted.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		faulted.err = func() error {
			r, err := explorertest.NewRun(ctx, n, "fault-run", 0)
			if err != nil {
				return err
			}
			p, err := explorertest.Config(3)
			if err != nil {
				return err
			}
			p.Config.VerificationPercent, p.Config.RoundWitnessTime, p.Config.TotalSteps = 100, 10, 1
			if err := r.Configure(ctx, p, 1000); err != nil {
				return err
			}
			if err := r.Join(ctx, 3); err != nil {
				return err
			}
			if err := r.Start(ctx); err != nil {
				return err
			}
			member, err := r.PlayDisputedRound(ctx, 3.0)
			if err != nil {
				return err
			}
			if _, err := r.TickUntil(ctx, "Finished", func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.Finished }); err != nil {
				return err
			}
			faulted.run, faulted.member = r, member
			return nil
		}()
	})
	if faulted.err != nil {
		t.Fatal(faulted.err)
	}
	return faulted.run, faulted.member
}

// rpcSwitch is a reverse proxy to an RPC endpoint that a test can turn
// off: then it answers every request 503, as an unreachable node would
// fail, and counts them.
type rpcSwitch struct {
	URL     string
	down    atomic.Bool
	refused atomic.Int64
}

func newRPCSwitch(t *testing.T, target string) *rpcSwitch {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	sw := &rpcSwitch{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sw.down.Load() {
			sw.refused.Add(1)
			http.Error(w, "the test turned the RPC endpoint off", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	sw.URL = srv.URL
	return sw
}

// waitRefused waits until the switch refused n requests since it was
// turned off.
func (sw *rpcSwitch) waitRefused(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); sw.refused.Load() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint refused %d requests in a minute, want %d", sw.refused.Load(), n)
		}
	}
}

func playRound(t *testing.T, r *explorertest.Run, loss float32) uint32 {
	t.Helper()
	step, err := r.PlayRound(testCtx(t, time.Minute), loss)
	if err != nil {
		t.Fatal(err)
	}
	return step
}

// startExplorer indexes n's runs, through c (n.Chain when nil), and serves
// the explorer; it returns the server's URL once the first read is done.
func startExplorer(t *testing.T, n *programtest.Net, c *chain.Client, live bool) (*explorer.Indexer, string, *syncbuf.Buffer) {
	t.Helper()
	if c == nil {
		c = n.Chain
	}
	logs := &syncbuf.Buffer{}
	x := explorer.New(explorer.Options{
		Chain: c, Coordinator: coordinator.Program{ID: n.IDs[deploy.Coordinator]}, TreasurerID: n.IDs[deploy.Treasurer],
		CompetitionID: n.IDs[deploy.Competition], Live: live, PollInterval: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(logs, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(explorer.Handler(ctx, x))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	t.Cleanup(func() {
		cancel() // ends the streams, so that Close does not wait for them
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("indexer: %v", err)
		}
		if t.Failed() {
			t.Logf("explorer log:\n%s", logs)
		}
	})
	select {
	case <-x.Ready():
	case <-time.After(time.Minute):
		t.Fatalf("the indexer did not finish its first read; log:\n%s", logs)
	}
	return x, srv.URL, logs
}

// get fetches url, wants status code and decodes the JSON body into out.
func get(t *testing.T, url string, code int, out any) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != code {
		t.Fatalf("GET %s: %d %s, want %d", url, resp.StatusCode, body, code)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return string(body)
}

// sse reads a server-sent event stream.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

func openStream(t *testing.T, url string) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, 2*time.Minute), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next event's name and data (comments are skipped).
func (s *sse) next() (string, string, error) {
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && data != "":
			return name, data, nil
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

// until reads "update" events into out until cond holds, within d.
func (s *sse) until(t *testing.T, d time.Duration, out any, cond func() bool) {
	t.Helper()
	timer := time.AfterFunc(d, func() { s.resp.Body.Close() })
	defer timer.Stop()
	for {
		name, data, err := s.next()
		if err != nil {
			t.Fatalf("the stream ended before the update came (%v)", err)
		}
		if name != "update" {
			t.Fatalf("event %q: %s", name, data)
		}
		// Each update is whole: no field of the last one (left out when
		// empty) may stay.
		reflect.ValueOf(out).Elem().SetZero()
		if err := json.Unmarshal([]byte(data), out); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return
		}
	}
}

func lossValues(d *explorer.RunDetail) string {
	var out []string
	for _, p := range d.Loss {
		out = append(out, fmt.Sprintf("%d:%.2f", p.Step, float64(p.Loss)))
	}
	return strings.Join(out, " ")
}
