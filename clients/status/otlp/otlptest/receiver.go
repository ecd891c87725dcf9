// Package otlptest is an OTLP/HTTP receiver for tests: a loopback HTTP
// server that decodes the official protobuf requests (metrics, traces,
// logs) and keeps what arrived, flattened for assertions.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span.
type Span struct {
	Name                      string
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Attrs, Resource           map[string]string
	Error                     bool // status code ERROR
	Start, End                time.Time
}

// Point is one received metric data point (gauge or sum).
type Point struct {
	Name            string
	Sum, Monotonic  bool // a sum (counter), and whether it is monotonic
	Value           float64
	Attrs, Resource map[string]string
}

// Log is a received log record.
type Log struct {
	Body, Severity  string
	Attrs, Resource map[string]string
}

// Receiver is a running OTLP/HTTP receiver. URL is its base; signals go
// to URL+"/v1/metrics", "/v1/traces" and "/v1/logs".
type Receiver struct {
	URL string

	mu      sync.Mutex
	spans   []Span
	points  []Point
	logs    []Log
	headers []http.Header
	errs    []error
}

// New starts a receiver on loopback, closed when the test ends.
func New(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.errs {
			t.Errorf("otlptest receiver: %v", err)
		}
	})
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	fail := func(code int, err error) {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		http.Error(w, err.Error(), code)
	}
	if req.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, fmt.Errorf("%s %s", req.Method, req.URL.Path))
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail(http.StatusUnsupportedMediaType, fmt.Errorf("%s: content type %q", req.URL.Path, ct))
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	var resp proto.Message
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	switch req.URL.Path {
	case "/v1/metrics":
		var m colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			fail(http.StatusBadRequest, fmt.Errorf("metrics: %w", err))
			return
		}
		r.addMetrics(&m)
		resp = &colmetrics.ExportMetricsServiceResponse{}
	case "/v1/traces":
		var m coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			fail(http.StatusBadRequest, fmt.Errorf("traces: %w", err))
			return
		}
		r.addTraces(&m)
		resp = &coltrace.ExportTraceServiceResponse{}
	case "/v1/logs":
		var m collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			fail(http.StatusBadRequest, fmt.Errorf("logs: %w", err))
			return
		}
		r.addLogs(&m)
		resp = &collogs.ExportLogsServiceResponse{}
	default:
		fail(http.StatusNotFound, fmt.Errorf("unknown path %s", req.URL.Path))
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) addMetrics(m *colmetrics.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range m.GetResourceMetrics() {
		res := attrs(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				for _, dp := range mt.GetGauge().GetDataPoints() {
					r.points = append(r.points, Point{Name: mt.GetName(), Value: dp.GetAsDouble() + float64(dp.GetAsInt()), Attrs: attrs(dp.GetAttributes()), Resource: res})
				}
				for _, dp := range mt.GetSum().GetDataPoints() {
					r.points = append(r.points, Point{Name: mt.GetName(), Sum: true, Monotonic: mt.GetSum().GetIsMonotonic(),
						Value: dp.GetAsDouble() + float64(dp.GetAsInt()), Attrs: attrs(dp.GetAttributes()), Resource: res})
				}
				for _, dp := range mt.GetHistogram().GetDataPoints() {
					r.points = append(r.points, Point{Name: mt.GetName(), Value: dp.GetSum(), Attrs: attrs(dp.GetAttributes()), Resource: res})
				}
				for _, dp := range mt.GetSummary().GetDataPoints() {
					r.points = append(r.points, Point{Name: mt.GetName(), Value: dp.GetSum(), Attrs: attrs(dp.GetAttributes()), Resource: res})
				}
			}
		}
	}
}

func (r *Receiver) addTraces(m *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range m.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Attrs: attrs(s.GetAttributes()), Resource: res, Error: s.GetStatus().GetCode() == 2,
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano()))})
			}
		}
	}
}

func (r *Receiver) addLogs(m *collogs.ExportLogsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rl := range m.GetResourceLogs() {
		res := attrs(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			for _, l := range sl.GetLogRecords() {
				r.logs = append(r.logs, Log{Body: value(l.GetBody()), Severity: l.GetSeverityText(), Attrs: attrs(l.GetAttributes()), Resource: res})
			}
		}
	}
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Points are the metric data points received so far.
func (r *Receiver) Points() []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Point(nil), r.points...)
}

// Logs are the log records received so far.
func (r *Receiver) Logs() []Log {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Log(nil), r.logs...)
}

// Headers are the headers of every request received so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Wait polls cond until it holds or timeout passes, and says which.
func (r *Receiver) Wait(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value flattens a value: arrays as "[a b]", maps as "{k=v k2=v2}", bytes
// in hex.
func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		vs := make([]string, len(x.ArrayValue.GetValues()))
		for i, e := range x.ArrayValue.GetValues() {
			vs[i] = value(e)
		}
		return "[" + strings.Join(vs, " ") + "]"
	case *commonpb.AnyValue_KvlistValue:
		kvs := make([]string, len(x.KvlistValue.GetValues()))
		for i, kv := range x.KvlistValue.GetValues() {
			kvs[i] = kv.GetKey() + "=" + value(kv.GetValue())
		}
		return "{" + strings.Join(kvs, " ") + "}"
	case nil:
		return ""
	}
	return v.String()
}

// Blackhole is a URL whose server accepts connections and never answers:
// the worst collector, for tests that exporting never waits on it. It is
// closed when the test ends.
func Blackhole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}
