// Package statusflags holds the observability flags of the training client
// (--logs, --log-level, --metrics-local-port, the --oltp-* OpenTelemetry
// export) and starts what they ask for: the logger, the metrics endpoint,
// the OTLP exporters, and the terminal UI or console progress lines.
package statusflags

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel"
	"golang.org/x/term"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/logging"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/otlp"
	"github.com/psyche-go/psyche/clients/status/progress"
	"github.com/psyche-go/psyche/clients/status/tui"
)

// Flag names.
const (
	Logs        = "logs"
	LogLevel    = "log-level"
	MetricsPort = "metrics-local-port"
	// The OpenTelemetry flags keep the reference client's spelling "oltp".
	OTLPMetricsURL = "oltp-metrics-url"
	OTLPTracingURL = "oltp-tracing-url"
	OTLPLogsURL    = "oltp-logs-url"
	OTLPAuthHeader = "oltp-auth-header"
	OTLPInterval   = "oltp-report-interval"
)

// otlpShutdown bounds how long the OTLP exporters may take to send what is
// queued once the client stops.
const otlpShutdown = 5 * time.Second

// Flags returns the observability flags with their defaults.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: Logs, Value: string(logging.TUI), Usage: "tui: terminal UI (console when stdout is not a terminal); console: progress lines on stdout, logs on stderr; json: JSON logs on stderr; none"},
		&cli.StringFlag{Name: LogLevel, Value: "info", Usage: "debug, info, warn or error"},
		&cli.IntFlag{Name: MetricsPort, Usage: "serve Prometheus /metrics, JSON /status and /healthz on 127.0.0.1 at this port (0 picks one); off when absent"},
		&cli.StringFlag{Name: OTLPMetricsURL, EnvVars: []string{"OLTP_METRICS_URL"}, Usage: "push the metrics /metrics serves to this OpenTelemetry collector, OTLP/HTTP protobuf (e.g. http://collector:4318/v1/metrics; a URL without a path gets /v1/metrics); off when absent. The --oltp-* flags keep the reference client's spelling (\"oltp\" for OTLP) for compatibility"},
		&cli.StringFlag{Name: OTLPTracingURL, EnvVars: []string{"OLTP_TRACING_URL"}, Usage: "send traces (a span per round, child spans for train, publish, fetch, apply, witness, tick, verify) to this OTLP/HTTP URL (.../v1/traces); off when absent"},
		&cli.StringFlag{Name: OTLPLogsURL, EnvVars: []string{"OLTP_LOGS_URL"}, Usage: "send the logs (at --log-level) to this OTLP/HTTP URL (.../v1/logs), besides --logs; off when absent"},
		&cli.StringFlag{Name: OTLPAuthHeader, EnvVars: []string{"OLTP_AUTH_HEADER"}, Usage: "header sent with every OTLP export: \"Name: value\" (e.g. \"Authorization: Bearer TOKEN\"), or only the Authorization value (e.g. \"Bearer TOKEN\")"},
		&cli.StringFlag{Name: OTLPInterval, EnvVars: []string{"OLTP_REPORT_INTERVAL"}, Value: "60", Usage: "how often metrics are pushed over OTLP: seconds (e.g. 60, 2.5) or a duration (e.g. 30s)"},
	}
}

// Option adds to what Start is told.
type Option func(*options)

type options struct{ wallet, version string }

// ClientIdentity names the client in exported telemetry: its wallet's
// public key and its version (OpenTelemetry resource attributes).
func ClientIdentity(wallet, version string) Option {
	return func(o *options) { o.wallet, o.version = wallet, version }
}

// RoundTracer is clients/client's Tracer, as the OTLP exporter provides it.
type RoundTracer interface {
	Span(step uint32, kind string) (end func(err error))
	RoundDone(step uint32)
}

// Terminal is where the UI and progress lines go; Stdin and Stdout are
// checked to be terminals before --logs tui draws on them.
type Terminal struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Started is what Start set going.
type Started struct {
	Log *slog.Logger
	// Mode is the --logs mode in effect (tui falls back to console off a terminal).
	Mode logging.Mode
	// MetricsAddr is the bound metrics address, empty when off.
	MetricsAddr string
	// Tracer exports each round's work over OTLP (for clients/client's
	// Config.Tracer); nil when --oltp-tracing-url is absent.
	Tracer RoundTracer

	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Wait blocks until the UI, progress printer and metrics endpoint have
// stopped (they stop when ctx ends, or the UI when the user quits) and
// returns their errors.
func (s *Started) Wait() error {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

func (s *Started) goRun(f func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := f(); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	}()
}

// Start reads the flags in c and starts the logger, metrics endpoint and
// UI for rec until ctx ends. Quitting the UI calls cancel, which should end
// ctx after the client has left its run. Bad flag values are reported
// before anything starts.
func Start(ctx context.Context, c *cli.Context, rec *status.Recorder, cancel context.CancelFunc, t Terminal, opts ...Option) (*Started, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	mode, err := logging.ParseMode(c.String(Logs))
	if err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String(LogLevel))); err != nil {
		return nil, fmt.Errorf("--%s %q: want debug, info, warn or error", LogLevel, c.String(LogLevel))
	}
	addr := ""
	if c.IsSet(MetricsPort) {
		if addr, err = metrics.LocalAddr(c.Int(MetricsPort)); err != nil {
			return nil, fmt.Errorf("--%s: %w", MetricsPort, err)
		}
	}
	ocfg, err := otlpConfig(c, rec, o)
	if err != nil {
		return nil, err
	}
	fellBack := false
	if mode == logging.TUI && !(isTerminal(t.Stdin) && isTerminal(t.Stdout)) {
		mode, fellBack = logging.Console, true
	}
	log, err := logging.New(mode, t.Stderr, rec, level)
	if err != nil {
		return nil, err
	}
	var exp *otlp.Exporter
	local := log
	if ocfg.Enabled() {
		// Export failures are warned about on the local logs only.
		ocfg.Warn = local
		if exp, err = otlp.New(ocfg, metrics.Registry(rec)); err != nil {
			return nil, err
		}
		if h := exp.LogHandler(level); h != nil {
			log = slog.New(slog.NewMultiHandler(log.Handler(), h))
		}
	}
	s := &Started{Log: log, Mode: mode}
	if fellBack {
		log.Info("stdin or stdout is not a terminal; --logs tui falls back to console")
	}
	if exp != nil {
		// The SDK's own errors and log lines would go to stderr, under a
		// terminal UI: they go to the local logs instead.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(exp.ErrorHandler()))
		otel.SetLogger(logr.FromSlogHandler(local.Handler()))
		if r := exp.Rounds(); r != nil {
			s.Tracer = r
		}
		log.Info("exporting OpenTelemetry", "metrics", ocfg.MetricsURL, "traces", ocfg.TracesURL, "logs", ocfg.LogsURL, "metrics_interval", ocfg.Interval.String())
		s.goRun(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otlpShutdown)
			defer cancel()
			exp.Shutdown(sctx)
			return nil
		})
	}
	if addr != "" {
		srv, err := metrics.Listen(addr, rec, log)
		if err != nil {
			if exp != nil {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				exp.Shutdown(sctx)
				cancel()
			}
			return nil, fmt.Errorf("--%s: %w", MetricsPort, err)
		}
		s.MetricsAddr = srv.Addr().String()
		s.goRun(func() error { return srv.Serve(ctx) })
	}
	switch mode {
	case logging.TUI:
		s.goRun(func() error {
			err := tui.Run(ctx, rec, cancel, tui.Options{Input: t.Stdin, Output: t.Stdout})
			// The alternate screen is gone: leave the run's outcome on the terminal.
			fmt.Fprint(t.Stdout, progress.Summary(rec.Snapshot()))
			return err
		})
	case logging.Console:
		s.goRun(func() error { return progress.Follow(ctx, rec, t.Stdout, "") })
	}
	return s, nil
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// otlpConfig reads the --oltp-* flags.
func otlpConfig(c *cli.Context, rec *status.Recorder, o options) (otlp.Config, error) {
	cfg := otlp.Config{Resource: otlp.Resource{RunID: rec.Snapshot().RunID, Wallet: o.wallet, Version: o.version}}
	for _, u := range []struct {
		dst          *string
		flag, signal string
	}{{&cfg.MetricsURL, OTLPMetricsURL, "metrics"}, {&cfg.TracesURL, OTLPTracingURL, "traces"}, {&cfg.LogsURL, OTLPLogsURL, "logs"}} {
		if raw := c.String(u.flag); raw != "" {
			v, err := otlp.ParseURL(raw, u.signal)
			if err != nil {
				return cfg, fmt.Errorf("--%s: %w", u.flag, err)
			}
			*u.dst = v
		}
	}
	if raw := c.String(OTLPAuthHeader); raw != "" {
		name, value, err := otlp.ParseAuthHeader(raw)
		if err != nil {
			return cfg, fmt.Errorf("--%s: %w", OTLPAuthHeader, err)
		}
		cfg.Headers = map[string]string{name: value}
	}
	d, err := otlp.ParseInterval(c.String(OTLPInterval))
	if err != nil {
		return cfg, fmt.Errorf("--%s: %w", OTLPInterval, err)
	}
	cfg.Interval = d
	return cfg, nil
}
