package client

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/otlp"
	"github.com/psyche-go/psyche/clients/status/otlp/otlptest"
)

// traceSim makes a simulated client export over OTLP, as the CLI sets it
// up: Config.Tracer (what newClient does with it: the network's publish
// and fetch spans), the logs teed, the recorder's metrics.
func traceSim(t *testing.T, sc *simClient, r *otlptest.Receiver) *otlp.Exporter {
	t.Helper()
	exp, err := otlp.New(otlp.Config{MetricsURL: r.URL + "/v1/metrics", TracesURL: r.URL + "/v1/traces", LogsURL: r.URL + "/v1/logs",
		Interval: time.Hour, // pushed once, at shutdown
		Resource: otlp.Resource{RunID: "sim", Wallet: sc.wallet.PublicKey().String(), Version: "test"}}, metrics.Registry(sc.c.cfg.Recorder))
	if err != nil {
		t.Fatal(err)
	}
	c := sc.c
	c.cfg.Tracer = exp.Rounds()
	n := tracedNetwork{c.node, c.cfg.Tracer}
	c.node, c.inbox.node = n, n
	c.log = slog.New(slog.NewMultiHandler(c.log.Handler(), exp.LogHandler(slog.LevelInfo))).With("client", sc.name)
	c.inbox.log = c.log
	return exp
}

// Three real clients (engine, executor, trainer) train a simulated run to
// Finished, each exporting to an OTLP/HTTP receiver: every round a client
// applied has one round span whose children are the work it did in it
// (train, publish, fetch, apply, witness, tick), and the metrics and logs
// carry each client's wallet.
func TestTracingSimRunExportsRounds(t *testing.T) {
	rcv := otlptest.New(t)
	r := newSimRun(t, 1)
	clients := []*simClient{r.add("a", true), r.add("b", true), r.add("c", true)}
	var exps []*otlp.Exporter
	for _, sc := range clients {
		exps = append(exps, traceSim(t, sc, rcv))
	}
	r.finish()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range exps {
		e.Shutdown(ctx)
	}
	total := int(r.sim.State().Config.TotalSteps)

	type key struct{ wallet, step string }
	rounds := map[key]otlptest.Span{}
	spans := rcv.Spans()
	for _, s := range spans {
		if s.Name == otlp.RoundSpan {
			k := key{s.Resource["client.pubkey"], s.Attrs["psyche.step"]}
			if _, dup := rounds[k]; dup {
				t.Errorf("two round spans for %v", k)
			}
			rounds[k] = s
		}
	}
	kinds := map[string]map[string]int{} // client -> kind -> spans
	for _, s := range spans {
		if s.Name == otlp.RoundSpan {
			continue
		}
		w := s.Resource["client.pubkey"]
		parent, ok := rounds[key{w, s.Attrs["psyche.step"]}]
		if !ok || parent.SpanID != s.ParentID || parent.TraceID != s.TraceID {
			t.Errorf("%s span of step %s is not a child of its round", s.Name, s.Attrs["psyche.step"])
		}
		if kinds[w] == nil {
			kinds[w] = map[string]int{}
		}
		kinds[w][s.Name]++
	}
	for _, sc := range clients {
		w := sc.wallet.PublicKey().String()
		for step := 1; step <= total; step++ {
			if _, ok := rounds[key{w, strconv.Itoa(step)}]; !ok {
				t.Errorf("%s: no round span for step %d", sc.name, step)
			}
		}
		k := kinds[w]
		t.Logf("%s: %d round spans, children %v", sc.name, total, k)
		if k["apply"] < total {
			t.Errorf("%s: %d apply spans for %d steps", sc.name, k["apply"], total)
		}
		for _, kind := range []string{SpanTrain, SpanPublish, SpanFetch, SpanWitness, SpanTick} {
			if k[kind] == 0 {
				t.Errorf("%s: no %s spans", sc.name, kind)
			}
		}
		if k[SpanTrain] != k[SpanPublish] {
			t.Errorf("%s: %d train spans but %d publish spans", sc.name, k[SpanTrain], k[SpanPublish])
		}
	}

	steps, finished := map[string]float64{}, map[string]bool{}
	for _, p := range rcv.Points() {
		if p.Name == "psyche_steps_total" {
			steps[p.Resource["client.pubkey"]] = p.Value
		}
	}
	for _, l := range rcv.Logs() {
		if l.Body == "the run is finished" {
			finished[l.Resource["client.pubkey"]] = true
		}
	}
	for _, sc := range clients {
		w := sc.wallet.PublicKey().String()
		if steps[w] != float64(sc.c.cfg.Recorder.Snapshot().StepsTotal) || steps[w] == 0 {
			t.Errorf("%s: psyche_steps_total %v, recorder %d", sc.name, steps[w], sc.c.cfg.Recorder.Snapshot().StepsTotal)
		}
		if !finished[w] {
			t.Errorf("%s: its last log line was not exported", sc.name)
		}
	}
}
