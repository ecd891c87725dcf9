// Package logging builds the client's *slog.Logger for --logs
// tui|console|json|none; every mode feeds the status Recorder.
package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/status"
)

// Mode is a --logs value.
type Mode string

const (
	// TUI sends log lines only to the Recorder's log panel, leaving the terminal to the UI.
	TUI Mode = "tui"
	// Console writes human-readable key=value lines.
	Console Mode = "console"
	// JSON writes one JSON object per line.
	JSON Mode = "json"
	// None discards logs.
	None Mode = "none"
)

// Modes lists the accepted --logs values.
func Modes() []Mode { return []Mode{TUI, Console, JSON, None} }

// ParseMode checks a --logs value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if Mode(s) == m {
			return m, nil
		}
	}
	return "", fmt.Errorf("--logs %q is not one of tui, console, json, none", s)
}

// New returns the logger for mode. Console and JSON write to w (normally
// stderr), None nowhere. In every mode each record at level also goes to
// rec (the TUI's log panel, and the log lines and warning and error
// counters of /status and /metrics), so they count what was logged
// whatever --logs says.
func New(mode Mode, w io.Writer, rec *status.Recorder, level slog.Leveler) (*slog.Logger, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("logging: a status recorder is required")
	}
	opts := &slog.HandlerOptions{Level: level}
	var out slog.Handler // what the mode writes besides rec; nil: nothing
	switch mode {
	case Console:
		out = slog.NewTextHandler(w, opts)
	case JSON:
		out = slog.NewJSONHandler(w, opts)
	}
	return slog.New(teeRecorder(out, rec, level)), nil
}

// teeRecorder returns a handler that gives each record to h (nil: none)
// and to rec, at level or above.
func teeRecorder(h slog.Handler, rec *status.Recorder, level slog.Leveler) slog.Handler {
	r := NewRecorderHandler(rec, level)
	if h == nil {
		return r
	}
	return slog.NewMultiHandler(h, r)
}

// RecorderHandler is a slog.Handler that appends each record, as one
// "message key=value ..." line, to a Recorder's log panel.
type RecorderHandler struct {
	rec   *status.Recorder
	level slog.Leveler
	attrs string // preformatted attributes from WithAttrs
	group string // prefix for later keys, "a.b." after WithGroup("a").WithGroup("b")
}

// NewRecorderHandler returns a handler feeding rec; a nil level means Info.
func NewRecorderHandler(rec *status.Recorder, level slog.Leveler) *RecorderHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &RecorderHandler{rec: rec, level: level}
}

func (h *RecorderHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *RecorderHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	h.rec.Log(r.Level, r.Time, b.String())
	return nil
}

func (h *RecorderHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		appendAttr(&b, h.group, a)
	}
	h2 := *h
	h2.attrs = b.String()
	return &h2
}

func (h *RecorderHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.group += name + "."
	return &h2
}

// appendAttr follows slog's rules: empty attributes and empty groups are
// dropped, and a group without a key inlines its members.
func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			group += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			appendAttr(b, group, ga)
		}
		return
	}
	var v string
	if a.Value.Kind() == slog.KindTime {
		v = a.Value.Time().Format(time.RFC3339Nano)
	} else {
		v = a.Value.String()
	}
	b.WriteByte(' ')
	b.WriteString(group)
	b.WriteString(a.Key)
	b.WriteByte('=')
	if v == "" || strings.ContainsAny(v, " =\"") || strconv.Quote(v) != `"`+v+`"` {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}
