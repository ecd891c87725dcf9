package otlp_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/otlp"
	"github.com/psyche-go/psyche/clients/status/otlp/otlptest"
)

// BenchmarkTelemetryStep is what one training step costs the client's
// loop in telemetry, with OTLP export off and on (to a live receiver on
// loopback, and to a collector that never answers): the step recorded,
// its round traced as the client does (train, publish, two fetches,
// witness, tick, apply, the round's end) and its log line.
//
//	go test -run '^$' -bench TelemetryStep -benchmem ./clients/status/otlp/
func BenchmarkTelemetryStep(b *testing.B) {
	type tracer interface {
		Span(step uint32, kind string) func(error)
		RoundDone(step uint32)
	}
	run := func(b *testing.B, rec *status.Recorder, log *slog.Logger, tr tracer) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			step := uint32(i + 1)
			if tr != nil {
				for _, k := range []string{"train", "publish", "fetch", "fetch", "witness", "tick"} {
					tr.Span(step, k)(nil)
				}
			}
			if err := rec.RecordStep(status.StepStat{Step: uint64(step), Loss: 2.5, Tokens: 4096, Duration: time.Second, BytesOut: 1000, BytesIn: 2000, Digest: "abcd"}); err != nil {
				b.Fatal(err)
			}
			log.Info("step", "step", step, "loss", 2.5, "tokens", 4096, "train_seconds", 0.26, "sent_bytes", 1000, "digest", "abcd")
			if tr != nil {
				tr.Span(step, "apply")(nil)
				tr.RoundDone(step)
			}
		}
	}
	local := slog.NewTextHandler(discard{}, nil) // the local logs, formatted and dropped
	b.Run("off", func(b *testing.B) {
		run(b, status.NewRecorder("bench", status.Options{}), slog.New(local), nil)
	})
	for _, target := range []string{"receiver", "blackhole"} {
		b.Run("on/"+target, func(b *testing.B) {
			base := otlptest.Blackhole(b)
			if target == "receiver" {
				base = otlptest.New(b).URL
			}
			rec := status.NewRecorder("bench", status.Options{})
			exp, err := otlp.New(otlp.Config{MetricsURL: base + "/v1/metrics", TracesURL: base + "/v1/traces", LogsURL: base + "/v1/logs",
				Interval: time.Second, Resource: otlp.Resource{RunID: "bench", Wallet: "w", Version: "v1"}}, metrics.Registry(rec))
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				exp.Shutdown(ctx)
			}()
			log := slog.New(slog.NewMultiHandler(local, exp.LogHandler(slog.LevelInfo)))
			run(b, rec, log, exp.Rounds())
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
