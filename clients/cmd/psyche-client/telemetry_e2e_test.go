//go:build unix

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/otlp/otlptest"
)

// TestTrainLogsReachEverySink runs three `psyche-client train` processes
// on localnet, one per --logs mode (json, console, and the default tui,
// which falls back to console: stdout is a file), each with
// --oltp-logs-url, --device auto and --dummy-training (a warning at start)
// (issue 40, items 1, 2 and 12):
//   - each one's logs reach the OTLP collector, "p2p node started" with
//     its peer ID and addresses as text, through "the run is finished", and
//     no export fails (multiaddrs' raw bytes once failed every batch);
//   - its /status (warnings_total, last_warning, log) and /metrics
//     (psyche_log_warnings_total) count the warning while it runs, which
//     only the TUI did;
//   - its log says "p2p node started" once, shares the model at INFO at
//     most once, and says nothing about a GPU but one INFO line.
func TestTrainLogsReachEverySink(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	builtCLI(t)
	dir := t.TempDir()
	const runID = "telemetry"
	lr := startLocalRun(ctx, t, dir, runID, func(dataURL, root string) string {
		return runConfigFrom(t, "smoke.toml", dataURL, root, map[string]string{"total_steps": "6"})
	})
	rcv := otlptest.New(t)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	var procs []*trainProc
	wallets := map[*trainProc]string{}
	for _, mode := range []struct {
		name string
		args []string
	}{{"json", []string{"--logs", "json"}}, {"console", []string{"--logs", "console"}}, {"tui", nil}} {
		wallet, key := keyFile(t, lr.v, 2*solana.LAMPORTS_PER_SOL)
		args := append([]string{"train", "--run-id", runID, "-w", wallet, "--metrics-local-port", "0",
			"--oltp-logs-url", rcv.URL, "--device", "auto", "--dummy-training",
			"--threads", "1", "--micro-batch-size", "2",
			"--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", filepath.Join(dir, "p2p")}, lr.net...)
		p := startTrain(t, "--logs "+mode.name, filepath.Join(dir, mode.name+".log"), tmp, append(args, mode.args...))
		procs = append(procs, p)
		wallets[p] = key.PublicKey().String()
	}

	// Item 2: while they run, the warning is counted in every mode.
	for _, p := range procs {
		var st statusCounters
		waitFor(t, ctx, p.name+"'s /status counting the warning", procs, func() bool {
			return p.counters(&st) && st.Warnings > 0
		})
		if st.LastWarning == nil || !strings.Contains(st.LastWarning.Message, "--dummy-training") || len(st.Log) == 0 {
			t.Errorf("%s: /status last_warning %+v, %d log lines", p.name, st.LastWarning, len(st.Log))
		}
		if n := p.metric(t, "psyche_log_warnings_total"); n < 1 {
			t.Errorf("%s: psyche_log_warnings_total %v", p.name, n)
		}
	}
	waitFinished(ctx, t, procs)

	// Item 1: every client's logs arrived, the p2p node's included.
	peerID := regexp.MustCompile(`^12D3Koo[1-9A-HJ-NP-Za-km-z]+$`)
	for _, p := range procs {
		var started, finished int
		for _, l := range rcv.Logs() {
			if l.Resource["client.pubkey"] != wallets[p] {
				continue
			}
			switch l.Body {
			case "p2p node started":
				started++
				if !peerID.MatchString(l.Attrs["peer"]) || !strings.HasPrefix(l.Attrs["addrs"], "[/ip4/127.0.0.1/") || l.Attrs["run"] != runID {
					t.Errorf("%s: exported p2p node started %v", p.name, l.Attrs)
				}
			case "the run is finished":
				finished++
			}
		}
		if started != 1 || finished != 1 {
			t.Errorf("%s: the collector got %d p2p node started and %d run finished records", p.name, started, finished)
		}

		// Item 12: what the local log says, and how often.
		data, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		var gpu []string
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "GPU") || strings.Contains(line, "CUDA") {
				gpu = append(gpu, line)
			}
		}
		if len(gpu) > 1 || len(gpu) == 1 && (!strings.Contains(gpu[0], "INFO") || strings.Contains(gpu[0], "GPU requested")) {
			t.Errorf("%s: about the GPU: %q; want at most one INFO line", p.name, gpu)
		}
		for msg, most := range map[string]int{"OpenTelemetry export failed": 0, "p2p node started": 1, "sharing the model with joiners": 1} {
			if n := strings.Count(string(data), msg); n > most || msg == "p2p node started" && n != 1 {
				t.Errorf("%s: %q logged %d times", p.name, msg, n)
			}
		}
	}
}

// statusCounters is the part of /status about the log.
type statusCounters struct {
	Warnings    uint64           `json:"warnings_total"`
	LastWarning *status.LogLine  `json:"last_warning"`
	Log         []status.LogLine `json:"log"`
}

// metricsURL is the /metrics URL the client logged, in any --logs mode.
func (p *trainProc) metricsURL() string {
	data, _ := os.ReadFile(p.log)
	return regexp.MustCompile(`http://127\.0\.0\.1:\d+/metrics`).FindString(string(data))
}

// counters reads /status into st once the client logged its endpoint.
func (p *trainProc) counters(st *statusCounters) bool {
	u := p.metricsURL()
	if u == "" {
		return false
	}
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(strings.TrimSuffix(u, "/metrics") + "/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(st) == nil
}

// metric reads one counter or gauge from the client's /metrics.
func (p *trainProc) metric(t *testing.T, name string) float64 {
	t.Helper()
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(p.metricsURL())
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: /metrics: %v", p.name, err)
	}
	f := fams[name]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("%s: /metrics has no %s", p.name, name)
	}
	m := f.GetMetric()[0]
	return m.GetCounter().GetValue() + m.GetGauge().GetValue()
}
