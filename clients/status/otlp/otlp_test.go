package otlp_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/otlp"
	"github.com/psyche-go/psyche/clients/status/otlp/otlptest"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

var testResource = otlp.Resource{RunID: "run-otlp", Wallet: "Wa11etPubkey111", Version: "v1"}

func checkResource(t *testing.T, what string, res map[string]string) {
	t.Helper()
	for k, want := range map[string]string{"service.name": "psyche-client", "run.id": "run-otlp", "client.pubkey": "Wa11etPubkey111",
		"service.instance.id": "Wa11etPubkey111", "service.version": "v1", "client.version": "v1"} {
		if res[k] != want {
			t.Errorf("%s: resource %s = %q, want %q (%v)", what, k, res[k], want, res)
		}
	}
}

func filledRecorder(t *testing.T) *status.Recorder {
	t.Helper()
	rec := status.NewRecorder("run-otlp", status.Options{})
	rec.SetRunState("RoundTrain")
	rec.SetProgress(1, 2, 3)
	must(t, rec.SetRole(status.RoleTrainer))
	must(t, rec.SetClients(3, 3))
	must(t, rec.SetParameters(1000))
	must(t, rec.SetPeers([]status.Peer{{ID: "12D3KooWA", BytesIn: 10, BytesOut: 20, Latency: time.Millisecond}}))
	for i := uint64(1); i <= 3; i++ {
		must(t, rec.RecordStep(status.StepStat{Step: i, Loss: 3, Tokens: 100, Duration: time.Second, BytesOut: 10, BytesIn: 20, Digest: "ab"}))
	}
	must(t, rec.RecordEval(3, 2.5))
	rec.SetCheckpoint(status.Checkpoint{Step: 3, Location: "/tmp/x"})
	must(t, rec.SetVerification(status.Verification{Commitments: status.VerifiedCommitments{Committed: 3, Match: 2, Unjudged: 1}}))
	return rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Metrics, round spans with their children and logs reach a real OTLP/HTTP
// receiver with the right names, parents, resource and auth header; the
// metrics are exactly those /metrics serves.
func TestOTLPExportsAllSignals(t *testing.T) {
	r := otlptest.New(t)
	rec := filledRecorder(t)
	name, value, err := otlp.ParseAuthHeader("Authorization: Bearer s3cret")
	must(t, err)
	exp, err := otlp.New(otlp.Config{MetricsURL: r.URL + "/v1/metrics", TracesURL: r.URL + "/v1/traces", LogsURL: r.URL + "/v1/logs",
		Headers: map[string]string{name: value}, Interval: 200 * time.Millisecond, Resource: testResource}, metrics.Registry(rec))
	must(t, err)

	rounds := exp.Rounds()
	kinds := []string{"train", "publish", "fetch", "witness", "tick", "verify", "apply"}
	for step := uint32(1); step <= 3; step++ {
		for _, k := range kinds {
			var err error
			if step == 2 && k == "fetch" {
				err = errors.New("peer gone")
			}
			rounds.Span(step, k)(err)
		}
		rounds.RoundDone(step)
	}
	rounds.Span(1, "fetch")(nil) // late: still a child of round 1

	log := slog.New(exp.LogHandler(slog.LevelInfo)).With("client", "c1")
	log.Info("trained step", "step", 3, "loss", 2.5)
	log.Debug("not exported at info")
	log.Warn("slow peer", "peer", "x")

	if !r.Wait(10*time.Second, func() bool { return hasPoint(r.Points(), "psyche_steps_total") }) {
		t.Fatal("no metrics arrived")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp.Shutdown(ctx)

	// Metrics: every family /metrics serves, and the right values.
	fams, err := metrics.Registry(rec).Gather()
	must(t, err)
	got := map[string]bool{}
	for _, p := range r.Points() {
		got[p.Name] = true
		checkResource(t, "metric "+p.Name, p.Resource)
	}
	for _, f := range fams {
		if !got[f.GetName()] {
			t.Errorf("metric %s served on /metrics but not exported", f.GetName())
		}
	}
	for _, want := range []struct {
		name  string
		sum   bool
		value float64
		attr  [2]string
	}{
		{"psyche_steps_total", true, 3, [2]string{}},
		{"psyche_train_loss", false, 3, [2]string{}},
		{"psyche_step", false, 3, [2]string{}},
		{"psyche_held_out_loss", false, 2.5, [2]string{}},
		{"psyche_run_info", false, 1, [2]string{"run_id", "run-otlp"}},
		{"psyche_p2p_peer_sent_bytes_total", true, 20, [2]string{"peer", "12D3KooWA"}},
		{"psyche_verification_commitment_verdicts_total", true, 2, [2]string{"verdict", "match"}},
	} {
		found := false
		for _, p := range r.Points() {
			if p.Name == want.name && (want.attr[0] == "" || p.Attrs[want.attr[0]] == want.attr[1]) {
				found = true
				if p.Value != want.value || p.Sum != want.sum || (p.Sum && !p.Monotonic) {
					t.Errorf("%s%v = %+v, want value %v sum %v", want.name, want.attr, p, want.value, want.sum)
				}
			}
		}
		if !found {
			t.Errorf("%s%v not exported", want.name, want.attr)
		}
	}

	// Traces: one root span per round, every kind a child of it.
	spans := r.Spans()
	roundOf := map[string]otlptest.Span{}
	for _, s := range spans {
		checkResource(t, "span "+s.Name, s.Resource)
		if s.Name == otlp.RoundSpan {
			if s.ParentID != "" {
				t.Errorf("round span with a parent: %+v", s)
			}
			if _, dup := roundOf[s.Attrs["psyche.step"]]; dup {
				t.Errorf("two round spans for step %s", s.Attrs["psyche.step"])
			}
			roundOf[s.Attrs["psyche.step"]] = s
		}
	}
	if len(roundOf) != 3 {
		t.Fatalf("round spans for steps %v, want 1..3 (%d spans)", keys(roundOf), len(spans))
	}
	children := map[string]int{}
	for _, s := range spans {
		if s.Name == otlp.RoundSpan {
			continue
		}
		step := s.Attrs["psyche.step"]
		parent, ok := roundOf[step]
		if !ok || s.ParentID != parent.SpanID || s.TraceID != parent.TraceID {
			t.Errorf("span %s of step %s is not a child of its round: %+v", s.Name, step, s)
		}
		if s.Error != (step == "2" && s.Name == "fetch") {
			t.Errorf("span %s of step %s: error status %v", s.Name, step, s.Error)
		}
		children[step+"/"+s.Name]++
	}
	for step := 1; step <= 3; step++ {
		for _, k := range kinds {
			want := 1
			if step == 1 && k == "fetch" {
				want = 2
			}
			if n := children[fmt.Sprintf("%d/%s", step, k)]; n != want {
				t.Errorf("step %d: %d %s spans, want %d", step, n, k, want)
			}
		}
	}

	// Logs: the records at or above the level, with their attributes.
	logs := r.Logs()
	if len(logs) != 2 {
		t.Fatalf("logs %+v, want 2 records", logs)
	}
	for _, l := range logs {
		checkResource(t, "log", l.Resource)
	}
	if l := logs[0]; l.Body != "trained step" || l.Severity != "INFO" || l.Attrs["client"] != "c1" || l.Attrs["step"] != "3" || l.Attrs["loss"] != "2.5" {
		t.Errorf("log %+v", l)
	}
	if l := logs[1]; l.Body != "slow peer" || l.Severity != "WARN" || l.Attrs["peer"] != "x" {
		t.Errorf("log %+v", l)
	}

	// The auth header went with every export.
	hs := r.Headers()
	if len(hs) < 3 {
		t.Fatalf("%d requests", len(hs))
	}
	for _, h := range hs {
		if h.Get("Authorization") != "Bearer s3cret" {
			t.Errorf("Authorization %q", h.Get("Authorization"))
		}
	}
}

func hasPoint(ps []otlptest.Point, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// A collector that never answers, or a port nobody listens on, costs the
// caller nothing: spans, logs and metric reads return at once, shutdown
// keeps to its deadline, and failures are warned about once per signal.
func TestOTLPUnreachableCollectorNeverBlocks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct{ name, base string }{{"blackhole", otlptest.Blackhole(t)}, {"refused", closed}} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings syncbuf.Buffer
			rec := filledRecorder(t)
			exp, err := otlp.New(otlp.Config{MetricsURL: tc.base + "/v1/metrics", TracesURL: tc.base + "/v1/traces", LogsURL: tc.base + "/v1/logs",
				Interval: 100 * time.Millisecond, Resource: testResource, Warn: slog.New(slog.NewTextHandler(&warnings, nil))}, metrics.Registry(rec))
			must(t, err)
			log := slog.New(exp.LogHandler(nil))
			rounds := exp.Rounds()
			const n = 20000 // well past the queues' bound
			start := time.Now()
			for i := range n {
				step := uint32(i/10 + 1)
				rounds.Span(step, "train")(nil)
				log.Info("step", "step", step)
				must(t, rec.RecordStep(status.StepStat{Step: uint64(i + 4), Loss: 1, Tokens: 1, Duration: time.Millisecond}))
				if i%10 == 9 {
					rounds.RoundDone(step)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%d steps with spans and logs took %v against a dead collector", n, d)
			} else {
				t.Logf("%d steps with spans and logs: %v (%v a step)", n, d, d/n)
			}
			time.Sleep(700 * time.Millisecond) // several metric pushes
			start = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			exp.Shutdown(ctx)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("shutdown took %v with a 1 s deadline", d)
			}
			if tc.name == "refused" {
				out := warnings.String()
				for _, sig := range []string{"metrics", "traces", "logs"} {
					if c := strings.Count(out, "signal="+sig+" "); c != 1 {
						t.Errorf("%d warnings for %s, want 1 (rate-limited):\n%s", c, sig, out)
					}
				}
			}
		})
	}
}

func TestOTLPParseFlags(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://collector:4318/v1/metrics", "http://collector:4318/v1/metrics"},
		{"https://otel.example/custom", "https://otel.example/custom"},
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"},
		{"http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"},
	} {
		if got, err := otlp.ParseURL(tc.in, "metrics"); err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "collector:4318", "ftp://x/v1/metrics", "http://", "http://:4318/v1/metrics", "http://x:99999/", "http://x:0/", "://x"} {
		if got, err := otlp.ParseURL(bad, "metrics"); err == nil {
			t.Errorf("ParseURL(%q) = %q, want an error", bad, got)
		}
	}
	for _, tc := range []struct{ in, name, value string }{
		{"Authorization: Bearer x", "Authorization", "Bearer x"},
		{"Bearer x", "Authorization", "Bearer x"}, // the reference's form: the whole value
		{"x-api-key:abc", "x-api-key", "abc"},
		{"Basic dXNlcjpwYXNz", "Authorization", "Basic dXNlcjpwYXNz"},
		{"Bearer a:b", "Authorization", "Bearer a:b"},
	} {
		n, v, err := otlp.ParseAuthHeader(tc.in)
		if err != nil || n != tc.name || v != tc.value {
			t.Errorf("ParseAuthHeader(%q) = %q, %q, %v", tc.in, n, v, err)
		}
	}
	for _, bad := range []string{"", "  ", "Authorization:", "Authorization: a\r\nX: y", "a\x01b"} {
		if n, v, err := otlp.ParseAuthHeader(bad); err == nil {
			t.Errorf("ParseAuthHeader(%q) = %q, %q, want an error", bad, n, v)
		}
	}
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{{"60", time.Minute}, {"2.5", 2500 * time.Millisecond}, {"30s", 30 * time.Second}, {"500ms", 500 * time.Millisecond}, {" 1m ", time.Minute}} {
		if got, err := otlp.ParseInterval(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseInterval(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "0.01", "NaN", "1e300", "soon", "10ms", "-5s"} {
		if got, err := otlp.ParseInterval(bad); err == nil {
			t.Errorf("ParseInterval(%q) = %v, want an error", bad, got)
		}
	}
}

// A nil *Rounds (traces off) does nothing.
func TestOTLPNilRounds(t *testing.T) {
	var r *otlp.Rounds
	r.Span(1, "train")(errors.New("x"))
	r.RoundDone(1)
	r.Close()
	exp, err := otlp.New(otlp.Config{}, nil)
	must(t, err)
	if exp.Rounds() != nil || exp.LogHandler(nil) != nil {
		t.Error("signals on without URLs")
	}
	exp.Shutdown(context.Background())
}

// Log records reach the collector whatever their values hold. A libp2p
// peer ID and multiaddrs are raw bytes underneath: they are exported as
// the text the local logs show, and any string left that is not valid
// UTF-8 (a message, a key, a value, nested in a group) has its invalid
// bytes escaped as \xNN, since one such string made the whole batch fail
// to encode ("string field contains invalid UTF-8") and nothing was sent.
func TestOTLPLogsAreValidUTF8(t *testing.T) {
	r := otlptest.New(t)
	var warnings syncbuf.Buffer
	exp, err := otlp.New(otlp.Config{LogsURL: r.URL + "/v1/logs", Resource: testResource, Warn: slog.New(slog.NewTextHandler(&warnings, nil))}, nil)
	must(t, err)
	key, _, err := crypto.GenerateEd25519Key(crand.Reader)
	must(t, err)
	id, err := peer.IDFromPrivateKey(key)
	must(t, err)
	addrs := []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001"), ma.StringCast("/ip4/127.0.0.1/udp/4001/quic-v1")}

	log := slog.New(exp.LogHandler(nil))
	log.Info("before")
	log.With("node", id).WithGroup("p2p").Info("p2p node started", "peer", id, "addrs", addrs, slog.Group("raw", "blob", "\xffab\xfe"))
	log.Warn("bad \xc3 message", "k\xff", "v", "err", errors.New("read \xff"))
	log.Info("after")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp.Shutdown(ctx)

	if warnings.String() != "" {
		t.Errorf("export failed: %s", warnings.String())
	}
	got := map[string]otlptest.Log{}
	for _, l := range r.Logs() {
		got[l.Body] = l
	}
	if len(got) != 4 {
		t.Fatalf("received %d records: %+v", len(got), r.Logs())
	}
	want := "{addrs=[/ip4/127.0.0.1/tcp/4001 /ip4/127.0.0.1/udp/4001/quic-v1] peer=" + id.String() + " raw={blob=\\xffab\\xfe}}"
	if l := got["p2p node started"]; l.Attrs["node"] != id.String() || l.Attrs["p2p"] != want {
		t.Errorf("p2p node started: %v\nwant node=%s p2p=%s", l.Attrs, id, want)
	}
	if l, ok := got[`bad \xc3 message`]; !ok || l.Attrs[`k\xff`] != "v" || l.Attrs["exception.message"] != `read \xff` {
		t.Errorf("escaped record: %+v (%v)", l, keys(got))
	}
}
