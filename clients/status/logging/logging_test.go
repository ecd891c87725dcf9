package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/psyche-go/psyche/clients/status"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"tui", TUI, false}, {"console", Console, false}, {"json", JSON, false}, {"none", None, false},
		{"", "", true}, {"TUI", "", true}, {"text", "", true},
	} {
		got, err := ParseMode(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseMode(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "tui, console, json, none") {
			t.Errorf("error does not list the accepted values: %v", err)
		}
	}
}

func TestNewWritesWhereAsked(t *testing.T) {
	for _, tc := range []struct {
		mode  Mode
		check func(t *testing.T, out string)
	}{
		{Console, func(t *testing.T, out string) {
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "msg=\"peer slow\"") || !strings.Contains(out, "peer=abc") {
				t.Errorf("console output %q", out)
			}
			if strings.Contains(out, "hidden") {
				t.Error("debug line shown at info level")
			}
		}},
		{JSON, func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &m); err != nil {
				t.Fatalf("json output %q: %v", out, err)
			}
			if m["msg"] != "peer slow" || m["peer"] != "abc" || m["level"] != "WARN" {
				t.Errorf("json record %v", m)
			}
		}},
		{None, func(t *testing.T, out string) {
			if out != "" {
				t.Errorf("none wrote %q", out)
			}
		}},
		{TUI, func(t *testing.T, out string) {
			if out != "" {
				t.Errorf("tui mode wrote to the terminal: %q", out)
			}
		}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			var buf bytes.Buffer
			rec := status.NewRecorder("r", status.Options{})
			log, err := New(tc.mode, &buf, rec, slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("hidden")
			log.Warn("peer slow", "peer", "abc")
			log.With("step", 3).Error("step failed")
			tc.check(t, buf.String())
			// Every mode feeds the recorder: the panel, /status and /metrics
			// count warnings and errors whatever --logs says.
			s := rec.Snapshot()
			if len(s.Log) != 2 || s.Log[0].Message != "peer slow peer=abc" || s.Log[0].Level != "WARN" || s.Log[1].Message != "step failed step=3" {
				t.Errorf("recorder lines %+v", s.Log)
			}
			if s.WarningsTotal != 1 || s.ErrorsTotal != 1 || s.LastWarning == nil || s.LastWarning.Message != "peer slow peer=abc" || s.LastError == nil {
				t.Errorf("counters: %d warnings (last %+v), %d errors (last %+v)", s.WarningsTotal, s.LastWarning, s.ErrorsTotal, s.LastError)
			}
		})
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	if _, err := New("fancy", &bytes.Buffer{}, rec, nil); err == nil {
		t.Error("unknown mode accepted")
	}
	for _, m := range Modes() {
		if _, err := New(m, &bytes.Buffer{}, nil, nil); err == nil {
			t.Errorf("%s without a recorder accepted", m)
		}
	}
}

func TestRecorderHandlerFormatting(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	log := slog.New(NewRecorderHandler(rec, slog.LevelDebug)).With("run", "r1").WithGroup("p2p")
	log.Info("joined", "peer", "x y", slog.Group("bw", "in", 10, "out", 20), slog.Group("empty"), "err", errors.New("a=b"))
	log.Debug("multi\nline")
	s := rec.Snapshot()
	want := []string{
		`joined run=r1 p2p.peer="x y" p2p.bw.in=10 p2p.bw.out=20 p2p.err="a=b"`,
		`multi line run=r1`,
	}
	if len(s.Log) != len(want) {
		t.Fatalf("lines %+v", s.Log)
	}
	for i, w := range want {
		if s.Log[i].Message != w {
			t.Errorf("line %d = %q, want %q", i, s.Log[i].Message, w)
		}
	}
}

// TestRecorderHandlerConformance runs the standard library's handler test
// suite, parsing each panel line back into a map. The panel stamps records
// that have no time with the Recorder's clock; a sentinel clock tells those
// apart.
func TestRecorderHandlerConformance(t *testing.T) {
	var rec *status.Recorder
	sentinel := time.Unix(1, 0)
	slogtest.Run(t, func(t *testing.T) slog.Handler {
		rec = status.NewRecorder("r", status.Options{Now: func() time.Time { return sentinel }})
		return NewRecorderHandler(rec, slog.LevelDebug)
	}, func(t *testing.T) map[string]any {
		s := rec.Snapshot()
		if len(s.Log) != 1 {
			t.Fatalf("%d lines", len(s.Log))
		}
		l := s.Log[0]
		m := map[string]any{slog.LevelKey: l.Level}
		if !l.Time.Equal(sentinel) {
			m[slog.TimeKey] = l.Time
		}
		msg, rest, _ := strings.Cut(l.Message, " ")
		m[slog.MessageKey] = msg
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			path := strings.Split(k, ".")
			cur := m
			for _, g := range path[:len(path)-1] {
				sub, ok := cur[g].(map[string]any)
				if !ok {
					sub = map[string]any{}
					cur[g] = sub
				}
				cur = sub
			}
			cur[path[len(path)-1]] = v
		}
		return m
	})
}
