package otlp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// warner turns failed exports into warnings, at most one per signal every
// WarnEvery, each saying how many failures it stood for.
type warner struct {
	log *slog.Logger
	mu  sync.Mutex
	by  map[string]*signalWarner
}

func newWarner(log *slog.Logger) *warner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &warner{log: log, by: map[string]*signalWarner{}}
}

func (w *warner) signal(name string) *signalWarner {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.by[name]
	if s == nil {
		s = &signalWarner{log: w.log, name: name}
		w.by[name] = s
	}
	return s
}

type signalWarner struct {
	log  *slog.Logger
	name string

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (s *signalWarner) fail(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	now := time.Now()
	if !s.last.IsZero() && now.Sub(s.last) < WarnEvery {
		s.suppressed++
		s.mu.Unlock()
		return
	}
	n := s.suppressed + 1
	s.last, s.suppressed = now, 0
	s.mu.Unlock()
	s.log.Warn("OpenTelemetry export failed; training goes on without it", "signal", s.name, "err", err, "failures", n)
}

// The exporters below report a failed export as a warning and to the SDK
// as done, so that nothing else (the SDK's global error handler) prints it.

type metricExporter struct {
	sdkmetric.Exporter
	w *signalWarner
}

func (e metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	e.w.fail(e.Exporter.Export(ctx, rm))
	return nil
}

type spanExporter struct {
	sdktrace.SpanExporter
	w *signalWarner
}

func (e spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.w.fail(e.SpanExporter.ExportSpans(ctx, spans))
	return nil
}

type logExporter struct {
	sdklog.Exporter
	w *signalWarner
}

func (e logExporter) Export(ctx context.Context, records []sdklog.Record) error {
	e.w.fail(e.Exporter.Export(ctx, validRecords(records)))
	return nil
}
