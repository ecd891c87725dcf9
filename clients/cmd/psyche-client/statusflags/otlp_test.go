package statusflags

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/otlp/otlptest"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

// The --oltp-* flags export metrics, round spans and logs to a real
// OTLP/HTTP receiver, with the client's identity as resource attributes
// and the auth header on every request; the local logs go on as before.
func TestOTLPFlagsExport(t *testing.T) {
	r := otlptest.New(t)
	var out, errOut syncbuf.Buffer
	rec := status.NewRecorder("run-flags", status.Options{})
	app := &cli.App{
		Name:  "client",
		Flags: Flags(),
		Action: func(c *cli.Context) error {
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			s, err := Start(ctx, c, rec, cancel, Terminal{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut},
				ClientIdentity("WalletKey1", "v9"))
			if err != nil {
				return err
			}
			if s.Tracer == nil {
				t.Fatal("no tracer with --oltp-tracing-url")
			}
			recordSteps(t, rec, 2)
			for _, k := range []string{"train", "publish", "apply"} {
				s.Tracer.Span(2, k)(nil)
			}
			s.Tracer.RoundDone(2)
			s.Log.Info("trained", "step", 2)
			s.Log.Debug("below the level")
			if !r.Wait(10*time.Second, func() bool { return len(r.Points()) > 0 }) {
				t.Error("no metrics pushed")
			}
			cancel()
			return s.Wait()
		},
	}
	err := app.RunContext(context.Background(), []string{"client", "--logs", "console",
		"--oltp-metrics-url", r.URL, "--oltp-tracing-url", r.URL + "/v1/traces", "--oltp-logs-url", r.URL + "/v1/logs",
		"--oltp-auth-header", "Bearer tok", "--oltp-report-interval", "0.2"})
	if err != nil {
		t.Fatal(err)
	}
	// Shutdown flushed the spans and logs before Wait returned.
	res := func(what string, m map[string]string) {
		t.Helper()
		if m["service.name"] != "psyche-client" || m["run.id"] != "run-flags" || m["client.pubkey"] != "WalletKey1" || m["service.version"] != "v9" {
			t.Errorf("%s resource %v", what, m)
		}
	}
	spans := r.Spans()
	names := map[string]bool{}
	for _, s := range spans {
		res("span", s.Resource)
		names[s.Name] = true
	}
	for _, n := range []string{"round", "train", "publish", "apply"} {
		if !names[n] {
			t.Errorf("no %s span: %+v", n, spans)
		}
	}
	var trained bool
	for _, l := range r.Logs() {
		res("log", l.Resource)
		if l.Body == "trained" {
			trained = true
		}
		if l.Body == "below the level" {
			t.Error("a debug record was exported at --log-level info")
		}
	}
	if !trained {
		t.Errorf("log record missing: %+v", r.Logs())
	}
	for _, p := range r.Points() {
		res("metric", p.Resource)
	}
	for _, h := range r.Headers() {
		if h.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization %q", h.Get("Authorization"))
		}
	}
	if !strings.Contains(errOut.String(), "msg=trained") {
		t.Errorf("local logs lost: %q", errOut.String())
	}
}

func TestOTLPBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--oltp-metrics-url", "collector:4318"}, "--oltp-metrics-url"},
		{[]string{"--oltp-tracing-url", "ftp://x/"}, "--oltp-tracing-url"},
		{[]string{"--oltp-logs-url", "http://"}, "--oltp-logs-url"},
		{[]string{"--oltp-auth-header", "Authorization:"}, "--oltp-auth-header"},
		{[]string{"--oltp-report-interval", "0"}, "--oltp-report-interval"},
		{[]string{"--oltp-report-interval", "soon"}, "--oltp-report-interval"},
	} {
		stdout, stderr, err := start(t, append([]string{"--logs", "console"}, tc.args...), func(*Started, *status.Recorder) { t.Error("started") })
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err = %v, want one line naming %s", tc.args, err, tc.want)
		}
		if stdout != "" || stderr != "" {
			t.Errorf("%q: printed %q / %q", tc.args, stdout, stderr)
		}
	}
}

// A real p2p node logs its start (its peer ID and multiaddrs, raw bytes
// underneath) through the logger Start returns, as train does: with
// --oltp-logs-url the record reaches the collector with the IDs and
// addresses as text, and so do the records around it. Each export used to
// fail ("string field contains invalid UTF-8") and no log ever arrived.
func TestOTLPExportsP2PNodeLogs(t *testing.T) {
	r := otlptest.New(t)
	var id, addrs string
	_, stderr, err := start(t, []string{"--logs", "json", "--oltp-logs-url", r.URL}, func(s *Started, _ *status.Recorder) {
		node, err := p2p.New(context.Background(), p2p.Config{RunID: "run-p2p-logs", ListenInterface: "127.0.0.1", DisableRunDHT: true, Logger: s.Log})
		if err != nil {
			t.Fatal(err)
		}
		id = node.ID().String()
		var as []string
		for _, a := range node.Addrs() { // the host's addresses and its ID
			as = append(as, strings.TrimSuffix(a.String(), "/p2p/"+id))
		}
		addrs = "[" + strings.Join(as, " ") + "]"
		s.Log.Info("after the node")
		node.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "OpenTelemetry export failed") {
		t.Errorf("export failed: %s", stderr)
	}
	var started, after int
	for _, l := range r.Logs() {
		switch l.Body {
		case "p2p node started":
			started++
			if l.Attrs["peer"] != id || l.Attrs["addrs"] != addrs || l.Attrs["run"] != "run-p2p-logs" {
				t.Errorf("p2p node started: %v; want peer=%s addrs=%s", l.Attrs, id, addrs)
			}
		case "after the node":
			after++
		}
	}
	if started != 1 || after != 1 {
		t.Errorf("received %d p2p node started and %d later records: %+v", started, after, r.Logs())
	}
	if n := strings.Count(stderr, `"msg":"p2p node started"`); n != 1 {
		t.Errorf("p2p node started logged %d times locally: %s", n, stderr)
	}
}
