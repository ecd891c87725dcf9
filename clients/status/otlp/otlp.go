// Package otlp exports a training client's metrics, traces and logs to
// OpenTelemetry collectors over OTLP/HTTP (protobuf), for train's
// --oltp-metrics-url, --oltp-tracing-url, --oltp-logs-url,
// --oltp-auth-header and --oltp-report-interval.
//
// Metrics are the ones /metrics serves, read from the same Prometheus
// registry (clients/status/metrics.Registry) through the OpenTelemetry
// Prometheus bridge, so there is one list of metrics. Traces are one span
// per round with a child span per piece of work (Rounds, which
// clients/client's Config.Tracer accepts). Logs are the slog records
// (LogHandler, teed with the local handler).
//
// Exporting never holds up the caller: spans and log records go into
// bounded queues that drop when full, metrics are read on the reader's own
// schedule, every export has a timeout, and a failed export costs a warning
// at most once a minute per signal.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ServiceName is the service.name every signal carries.
const ServiceName = "psyche-client"

// ScopeName names the instrumentation scope of the client's spans and logs.
const ScopeName = "github.com/psyche-go/psyche/clients"

// Defaults and bounds. A dead collector costs each export at most
// ExportTimeout, in the exporter's own goroutine.
const (
	DefaultReportInterval = 60 * time.Second
	MinReportInterval     = 100 * time.Millisecond
	ExportTimeout         = 5 * time.Second
	// MaxQueue bounds the spans and the log records waiting for export;
	// beyond it the oldest log records and the newest spans are dropped.
	MaxQueue = 2048
	// BatchInterval is how often queued spans and logs are sent.
	BatchInterval = 2 * time.Second
	// WarnEvery rate-limits the warnings about failed exports, per signal.
	WarnEvery = time.Minute
)

// The exporters retry a failed request within ExportTimeout, backing off
// from retryInitial to retryMax.
const retryInitial, retryMax = 500 * time.Millisecond, 2 * time.Second

// Resource says who exports: it becomes the resource attributes
// service.name (psyche-client), service.version, service.instance.id and
// client.pubkey (the wallet), run.id and client.version.
type Resource struct {
	RunID   string
	Wallet  string // the client's wallet public key
	Version string // the client version
}

// Attributes are the resource attributes of r, valid UTF-8 (the version
// comes from the environment).
func (r Resource) Attributes() []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.String("service.name", ServiceName)}
	if v := validUTF8(r.Version); v != "" {
		kv = append(kv, attribute.String("service.version", v), attribute.String("client.version", v))
	}
	if w := validUTF8(r.Wallet); w != "" {
		kv = append(kv, attribute.String("service.instance.id", w), attribute.String("client.pubkey", w))
	}
	if id := validUTF8(r.RunID); id != "" {
		kv = append(kv, attribute.String("run.id", id))
	}
	return kv
}

// Config is what to export where. An empty URL leaves that signal off.
type Config struct {
	MetricsURL, TracesURL, LogsURL string
	// Headers are sent with every export (e.g. Authorization).
	Headers map[string]string
	// Interval is how often metrics are pushed (0: DefaultReportInterval).
	Interval time.Duration
	Resource Resource
	// Warn receives the rate-limited warnings about failed exports; it
	// should not itself export to OTLP. Nil discards them.
	Warn *slog.Logger
	// HTTPClient, when set, carries the exports (tests).
	HTTPClient *http.Client
}

// Enabled says whether any signal is exported.
func (c Config) Enabled() bool {
	return c.MetricsURL != "" || c.TracesURL != "" || c.LogsURL != ""
}

// ParseURL checks a collector URL: http or https with a host. A URL without
// a path gets the signal's standard one (/v1/metrics, /v1/traces, /v1/logs).
func ParseURL(raw, signal string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is out of range 1..65535", raw, p)
		}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/" + signal
	}
	return u.String(), nil
}

// ParseAuthHeader reads --oltp-auth-header: "Name: value" sends that
// header; anything else (e.g. "Bearer x", as the reference client takes
// it) is the value of the Authorization header.
func ParseAuthHeader(s string) (name, value string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "", errors.New("empty header")
	}
	if strings.ContainsAny(s, "\r\n\x00") {
		return "", "", errors.New("the header contains a line break or NUL")
	}
	name, value = "Authorization", s
	if n, v, ok := strings.Cut(s, ":"); ok && isToken(n) {
		name, value = n, strings.TrimSpace(v)
	}
	if value == "" {
		return "", "", fmt.Errorf("header %s has no value", name)
	}
	for _, r := range value {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return "", "", errors.New("the header value contains a control character")
		}
	}
	return name, value, nil
}

// isToken says whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= 0x20 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// ParseInterval reads --oltp-report-interval: seconds ("60", "2.5", as the
// reference client) or a Go duration ("30s", "500ms"), at least
// MinReportInterval.
func ParseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f != f || f > 1e9 { // NaN or absurd
			return 0, fmt.Errorf("%q is not a usable number of seconds", s)
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%q: want seconds (e.g. 60) or a duration (e.g. 30s)", s)
	}
	if d < MinReportInterval {
		return 0, fmt.Errorf("%q: must be at least %v", s, MinReportInterval)
	}
	return d, nil
}

// Exporter exports what Config asks for until Shutdown.
type Exporter struct {
	rounds *Rounds
	logs   *sdklog.LoggerProvider
	warn   *warner

	shutdowns []func(context.Context) error
}

// New sets up the exporters; nothing is sent before the first batch, and a
// collector that is down is not an error here. Metrics are gathered from
// gatherer (clients/status/metrics.Registry), which must be set when
// MetricsURL is.
func New(cfg Config, gatherer promclient.Gatherer) (*Exporter, error) {
	res, err := resource.Merge(resource.Empty(), resource.NewSchemaless(cfg.Resource.Attributes()...))
	if err != nil {
		return nil, err
	}
	e := &Exporter{warn: newWarner(cfg.Warn)}
	ctx := context.Background()
	if cfg.MetricsURL != "" {
		if gatherer == nil {
			return nil, errors.New("otlp: metrics need a gatherer")
		}
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(cfg.MetricsURL), otlpmetrichttp.WithTimeout(ExportTimeout),
			otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: ExportTimeout})}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(cfg.Headers))
		}
		if cfg.HTTPClient != nil {
			opts = append(opts, otlpmetrichttp.WithHTTPClient(cfg.HTTPClient))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp metrics: %w", err)
		}
		interval := cfg.Interval
		if interval == 0 {
			interval = DefaultReportInterval
		}
		reader := sdkmetric.NewPeriodicReader(metricExporter{exp, e.warn.signal("metrics")},
			sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(min(interval, ExportTimeout)),
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(gatherer))))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
		e.shutdowns = append(e.shutdowns, mp.Shutdown)
	}
	if cfg.TracesURL != "" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.TracesURL), otlptracehttp.WithTimeout(ExportTimeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: ExportTimeout})}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		if cfg.HTTPClient != nil {
			opts = append(opts, otlptracehttp.WithHTTPClient(cfg.HTTPClient))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp traces: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(spanExporter{exp, e.warn.signal("traces")},
			sdktrace.WithMaxQueueSize(MaxQueue), sdktrace.WithBatchTimeout(BatchInterval), sdktrace.WithExportTimeout(ExportTimeout)))
		e.rounds = newRounds(tp.Tracer(ScopeName))
		e.shutdowns = append(e.shutdowns, func(ctx context.Context) error {
			e.rounds.Close()
			return tp.Shutdown(ctx)
		})
	}
	if cfg.LogsURL != "" {
		opts := []otlploghttp.Option{otlploghttp.WithEndpointURL(cfg.LogsURL), otlploghttp.WithTimeout(ExportTimeout),
			otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: ExportTimeout})}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlploghttp.WithHeaders(cfg.Headers))
		}
		if cfg.HTTPClient != nil {
			opts = append(opts, otlploghttp.WithHTTPClient(cfg.HTTPClient))
		}
		exp, err := otlploghttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp logs: %w", err)
		}
		e.logs = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(logExporter{exp, e.warn.signal("logs")},
			sdklog.WithMaxQueueSize(MaxQueue), sdklog.WithExportInterval(BatchInterval), sdklog.WithExportTimeout(ExportTimeout))))
		e.shutdowns = append(e.shutdowns, e.logs.Shutdown)
	}
	return e, nil
}

// Rounds is the round tracer for clients/client's Config.Tracer; nil when
// traces are off. A nil *Rounds traces nothing, but store it in an
// interface only when it is not nil, so that the client sees no tracer.
func (e *Exporter) Rounds() *Rounds { return e.rounds }

// LogHandler is a slog handler that exports the records at level or above
// (nil: Info); nil when logs are off. Tee it with the local handler
// (slog.NewMultiHandler). Values are exported as the text the local
// handlers write for them (a peer ID's or a multiaddr's String), and any
// string that is not valid UTF-8 has its invalid bytes escaped (\xNN) on
// the way out, so that no record can stop a batch from being sent.
func (e *Exporter) LogHandler(level slog.Leveler) slog.Handler {
	if e.logs == nil {
		return nil
	}
	if level == nil {
		level = slog.LevelInfo
	}
	return leveled{textValues{otelslog.NewHandler(ScopeName, otelslog.WithLoggerProvider(e.logs))}, level}
}

// Shutdown sends what is queued, within ctx's deadline, and stops the
// exporters. A collector that cannot be reached is warned about, not an
// error: exporting is best effort.
func (e *Exporter) Shutdown(ctx context.Context) {
	done := make(chan struct{}, len(e.shutdowns))
	for _, f := range e.shutdowns {
		go func() {
			if err := f(ctx); err != nil {
				e.warn.signal("shutdown").fail(err)
			}
			done <- struct{}{}
		}()
	}
	for range e.shutdowns {
		<-done
	}
}

// ErrorHandler is for otel.SetErrorHandler: the SDK's own errors become
// the same rate-limited warnings (the default handler writes to stderr,
// over a terminal UI).
func (e *Exporter) ErrorHandler() func(error) {
	s := e.warn.signal("sdk")
	return s.fail
}

// leveled filters a handler by level.
type leveled struct {
	slog.Handler
	level slog.Leveler
}

func (h leveled) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.Handler.Enabled(ctx, l)
}

func (h leveled) WithAttrs(attrs []slog.Attr) slog.Handler {
	return leveled{h.Handler.WithAttrs(attrs), h.level}
}

func (h leveled) WithGroup(name string) slog.Handler {
	return leveled{h.Handler.WithGroup(name), h.level}
}
