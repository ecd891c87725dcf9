package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/psyche-go/psyche/clients/status"
)

// startServer serves rec on a loopback port and stops it when the test ends.
func startServer(t *testing.T, rec *status.Recorder) string {
	t.Helper()
	addr, err := LocalAddr(0)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(addr, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return "http://" + srv.Addr().String()
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func filledRecorder(t *testing.T) *status.Recorder {
	t.Helper()
	rec := status.NewRecorder("run-x", status.Options{})
	rec.SetRunState("RoundWitness")
	rec.SetProgress(1, 4, 9)
	must(t, rec.SetRole(status.RoleWitness))
	must(t, rec.SetClients(3, 3))
	must(t, rec.SetParameters(250_000)) // 1 MB dense
	must(t, rec.SetPeers([]status.Peer{
		{ID: "12D3KooWA", Address: "/ip4/127.0.0.1/udp/4001/quic-v1", BytesIn: 100, BytesOut: 200, Latency: 2 * time.Millisecond},
		{ID: "12D3KooWB", BytesIn: 7},
	}))
	for i := uint64(1); i <= 9; i++ {
		must(t, rec.RecordStep(status.StepStat{Step: i, Loss: status.Float(5 - 0.25*float64(i)), Tokens: 4096,
			Duration: 2 * time.Second, BytesOut: 1000, BytesIn: 2000, Digest: fmt.Sprintf("%02x", i)}))
	}
	must(t, rec.RecordEval(8, 3.1))
	rec.SetCheckpoint(status.Checkpoint{Step: 8, Location: "/tmp/ck"})
	must(t, rec.SetVerification(status.Verification{
		Commitments: status.VerifiedCommitments{Committed: 9, Match: 5, Mismatch: 1, NoData: 1, Unjudged: 2},
		Replays:     status.Replays{Run: 3, Match: 2, Mismatch: 1, Posted: 3},
		Disputes:    status.Disputes{Open: 1, Transient: 1, TrainerFault: 2, AccuserFault: 3, Unresolved: 4},
		Burned:      70, Unvested: []uint64{10, 20, 30, 40}, HasFault: true,
	}))
	rec.Warn("slow peer")
	return rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMetricsScrape(t *testing.T) {
	base := startServer(t, filledRecorder(t))
	resp, body := get(t, base+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("%s%v missing", name, labels)
		return 0
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"psyche_run_info", []string{"run_id", "run-x", "run_state", "RoundWitness", "role", "witness"}, 1},
		{"psyche_epoch", nil, 1},
		{"psyche_round", nil, 4},
		{"psyche_step", nil, 9},
		{"psyche_clients_in_epoch", nil, 3},
		{"psyche_clients_healthy", nil, 3},
		{"psyche_p2p_peers", nil, 2},
		{"psyche_p2p_peer_received_bytes_total", []string{"peer", "12D3KooWA"}, 100},
		{"psyche_p2p_peer_sent_bytes_total", []string{"peer", "12D3KooWA"}, 200},
		{"psyche_p2p_peer_latency_seconds", []string{"peer", "12D3KooWA"}, 0.002},
		{"psyche_train_loss", nil, 2.75},
		{"psyche_trained_step", nil, 9},
		{"psyche_held_out_loss", nil, 3.1},
		{"psyche_held_out_loss_step", nil, 8},
		{"psyche_tokens_per_second", nil, 2048},
		{"psyche_step_duration_seconds", nil, 2},
		{"psyche_step_sent_bytes", nil, 1000},
		{"psyche_step_received_bytes", nil, 2000},
		{"psyche_step_dense_fp32_bytes", nil, 1_000_000},
		{"psyche_compression_ratio", nil, 1000},
		{"psyche_steps_total", nil, 9},
		{"psyche_tokens_total", nil, 9 * 4096},
		{"psyche_sent_bytes_total", nil, 9000},
		{"psyche_received_bytes_total", nil, 18000},
		{"psyche_log_warnings_total", nil, 1},
		{"psyche_log_errors_total", nil, 0},
		{"psyche_checkpoint_step", nil, 8},
		{"psyche_verification_commitments_total", nil, 9},
		{"psyche_verification_commitment_verdicts_total", []string{"verdict", "match"}, 5},
		{"psyche_verification_commitment_verdicts_total", []string{"verdict", "mismatch"}, 1},
		{"psyche_verification_commitment_verdicts_total", []string{"verdict", "no_data"}, 1},
		{"psyche_verification_commitments_unjudged", nil, 2},
		{"psyche_verification_replays_total", nil, 3},
		{"psyche_verification_replay_verdicts_total", []string{"verdict", "match"}, 2},
		{"psyche_verification_replay_verdicts_total", []string{"verdict", "mismatch"}, 1},
		{"psyche_verification_replay_verdicts_total", []string{"verdict", "no_data"}, 0},
		{"psyche_verification_verdicts_posted_total", nil, 3},
		{"psyche_verification_disputes_open", nil, 1},
		{"psyche_verification_disputes_settled_total", []string{"outcome", "transient"}, 1},
		{"psyche_verification_disputes_settled_total", []string{"outcome", "trainer_fault"}, 2},
		{"psyche_verification_disputes_settled_total", []string{"outcome", "accuser_fault"}, 3},
		{"psyche_verification_disputes_settled_total", []string{"outcome", "unresolved"}, 4},
		{"psyche_verification_burned_points", nil, 70},
		{"psyche_verification_unvested_points", nil, 100},
		{"psyche_verification_has_fault", nil, 1},
	} {
		if got := value(tc.name, tc.labels...); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// The unknown latency of peer B is left out, not reported as 0.
	for _, m := range fams["psyche_p2p_peer_latency_seconds"].GetMetric() {
		if labelValue(m, "peer") == "12D3KooWB" {
			t.Error("latency reported for a peer whose latency is unknown")
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("Go runtime metrics missing")
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestMetricsBeforeAnyStep(t *testing.T) {
	rec := status.NewRecorder("fresh", status.Options{})
	rec.SetRunState("\xff bad utf8") // must not break the scrape
	base := startServer(t, rec)
	resp, body := get(t, base+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"psyche_train_loss", "psyche_tokens_per_second", "psyche_held_out_loss", "psyche_compression_ratio", "psyche_checkpoint_step",
		"psyche_verification_commitments_total", "psyche_verification_disputes_open", "psyche_verification_has_fault"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s reported before it is known", name)
		}
	}
	if fams["psyche_steps_total"].GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Error("steps_total not 0")
	}
}

func TestStatusAndHealthz(t *testing.T) {
	rec := filledRecorder(t)
	base := startServer(t, rec)
	resp, body := get(t, base+"/status")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("decoding /status: %v", err)
	}
	if s.RunID != "run-x" || s.Step != 9 || len(s.Steps) != 9 || s.Steps[8].Digest != "09" || s.Peers[0].Latency != 2*time.Millisecond {
		t.Fatalf("snapshot over HTTP: %+v", s)
	}
	if h, ok := s.LastHeldOut(); !ok || h.Loss != 3.1 {
		t.Fatalf("held-out %+v", h)
	}
	if v := s.Verification; v == nil || v.Commitments.Committed != 9 || v.Disputes.Unresolved != 4 || len(v.Unvested) != 4 || !v.HasFault {
		t.Fatalf("verification over HTTP: %+v", v)
	}

	resp, body = get(t, base+"/healthz")
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("healthz %d %q", resp.StatusCode, body)
	}
}

func TestBadRequests(t *testing.T) {
	base := startServer(t, status.NewRecorder("r", status.Options{}))
	resp, _ := get(t, base+"/nope")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	for _, path := range []string{"/metrics", "/status", "/healthz"} {
		r, err := http.Post(base+path, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d, want 405", path, r.StatusCode)
		}
	}
}

func TestLocalAddr(t *testing.T) {
	for _, tc := range []struct {
		port    int
		want    string
		wantErr bool
	}{{9090, "127.0.0.1:9090", false}, {0, "127.0.0.1:0", false}, {-1, "", true}, {65536, "", true}} {
		got, err := LocalAddr(tc.port)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("LocalAddr(%d) = %q, %v", tc.port, got, err)
		}
	}
}

func TestListenOnBusyPortFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String(), status.NewRecorder("r", status.Options{}), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "metrics endpoint") {
		t.Fatalf("err = %v", err)
	}
}
