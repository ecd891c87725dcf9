package statusflags

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/logging"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

// start runs Start inside a real cli app with args, then f while it runs,
// then ends the context and waits.
func start(t *testing.T, args []string, f func(s *Started, rec *status.Recorder)) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	rec := status.NewRecorder("run", status.Options{})
	app := &cli.App{
		Name:  "client",
		Flags: Flags(),
		Action: func(c *cli.Context) error {
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			s, err := Start(ctx, c, rec, cancel, Terminal{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
			if err != nil {
				return err
			}
			f(s, rec)
			cancel()
			return s.Wait()
		},
	}
	err = app.RunContext(context.Background(), append([]string{"client"}, args...))
	return out.String(), errOut.String(), err
}

func recordSteps(t *testing.T, rec *status.Recorder, n uint64) {
	t.Helper()
	for i := uint64(1); i <= n; i++ {
		if err := rec.RecordStep(status.StepStat{Step: i, Loss: 2, Tokens: 100, Duration: time.Second, BytesOut: 10, Digest: "ab"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaultsOffATerminalFallBackToConsole(t *testing.T) {
	stdout, stderr, err := start(t, nil, func(s *Started, rec *status.Recorder) {
		if s.Mode != logging.Console || s.MetricsAddr != "" {
			t.Errorf("mode %q, metrics %q", s.Mode, s.MetricsAddr)
		}
		recordSteps(t, rec, 3)
		s.Log.Warn("careful", "peer", "x")
		s.Log.Debug("hidden")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "falls back to console") || !strings.Contains(stderr, "msg=careful peer=x") || strings.Contains(stderr, "hidden") {
		t.Errorf("stderr %q", stderr)
	}
	if !strings.Contains(stdout, "step 3  loss 2.0000") {
		t.Errorf("no progress lines on stdout: %q", stdout)
	}
}

func TestModesAndMetrics(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, stdout, stderr string)
	}{
		{[]string{"--logs", "json", "--log-level", "debug"}, func(t *testing.T, stdout, stderr string) {
			var m map[string]any
			for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("not JSON: %q", l)
				}
			}
			if !strings.Contains(stderr, `"msg":"hidden"`) {
				t.Errorf("debug level ignored: %q", stderr)
			}
			if stdout != "" {
				t.Errorf("json mode printed progress: %q", stdout)
			}
		}},
		{[]string{"--logs", "none"}, func(t *testing.T, stdout, stderr string) {
			if stdout != "" || stderr != "" {
				t.Errorf("none wrote %q / %q", stdout, stderr)
			}
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, err := start(t, tc.args, func(s *Started, rec *status.Recorder) {
				recordSteps(t, rec, 2)
				s.Log.Debug("hidden")
			})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, stdout, stderr)
		})
	}

	_, _, err := start(t, []string{"--logs", "none", "--metrics-local-port", "0"}, func(s *Started, rec *status.Recorder) {
		if s.MetricsAddr == "" || !strings.HasPrefix(s.MetricsAddr, "127.0.0.1:") {
			t.Fatalf("metrics address %q", s.MetricsAddr)
		}
		resp, err := http.Get("http://" + s.MetricsAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok\n" {
			t.Errorf("healthz %q", b)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadFlagsStartNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--logs", "fancy"}, "not one of tui, console, json, none"},
		{[]string{"--log-level", "loud"}, "--log-level \"loud\""},
		{[]string{"--metrics-local-port", "-1"}, "out of range"},
		{[]string{"--metrics-local-port", "70000"}, "out of range"},
		{[]string{"--metrics-local-port", busyPort}, "--metrics-local-port"},
	} {
		stdout, _, err := start(t, tc.args, func(*Started, *status.Recorder) { t.Error("started") })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
		if stdout != "" {
			t.Errorf("%q: printed %q", tc.args, stdout)
		}
	}
}

// Whatever --logs says (the default tui falls back to console here: stdin
// and stdout are not terminals), a warning and an error count in /status
// (warnings_total, errors_total, log, last_warning) and /metrics
// (psyche_log_warnings_total, psyche_log_errors_total), read over HTTP.
func TestEveryModeCountsWarnings(t *testing.T) {
	for _, args := range [][]string{{"--logs", "console"}, {"--logs", "json"}, {"--logs", "none"}, nil} {
		t.Run(strings.Join(append([]string{"logs"}, args...), " "), func(t *testing.T) {
			_, _, err := start(t, append(args, "--metrics-local-port", "0"), func(s *Started, rec *status.Recorder) {
				s.Log.Warn("peer slow", "peer", "p1")
				s.Log.Error("step failed", "step", 4)
				var st struct {
					Warnings    uint64           `json:"warnings_total"`
					Errors      uint64           `json:"errors_total"`
					Log         []status.LogLine `json:"log"`
					LastWarning *status.LogLine  `json:"last_warning"`
				}
				if err := json.Unmarshal(httpGet(t, "http://"+s.MetricsAddr+"/status"), &st); err != nil {
					t.Fatal(err)
				}
				if st.Warnings != 1 || st.Errors != 1 || st.LastWarning == nil || st.LastWarning.Message != "peer slow peer=p1" {
					t.Errorf("/status: %d warnings (last %+v), %d errors", st.Warnings, st.LastWarning, st.Errors)
				}
				if !slices.ContainsFunc(st.Log, func(l status.LogLine) bool { return l.Message == "step failed step=4" && l.Level == "ERROR" }) {
					t.Errorf("/status log %+v", st.Log)
				}
				p := expfmt.NewTextParser(model.UTF8Validation)
				fams, err := p.TextToMetricFamilies(bytes.NewReader(httpGet(t, "http://"+s.MetricsAddr+"/metrics")))
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{"psyche_log_warnings_total", "psyche_log_errors_total"} {
					f := fams[name]
					if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter().GetValue() != 1 {
						t.Errorf("/metrics %s: %v", name, f)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return b
}
