// Package statusflags holds the observability flags of the training client
// (--logs, --log-level, --metrics-local-port) and starts what they ask for:
// the logger, the metrics endpoint, and the terminal UI or console progress
// lines.
package statusflags

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/logging"
	"github.com/psyche-go/psyche/clients/status/metrics"
	"github.com/psyche-go/psyche/clients/status/progress"
	"github.com/psyche-go/psyche/clients/status/tui"
)

// Flag names.
const (
	Logs        = "logs"
	LogLevel    = "log-level"
	MetricsPort = "metrics-local-port"
)

// Flags returns the observability flags with their defaults.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: Logs, Value: string(logging.TUI), Usage: "tui: terminal UI (console when stdout is not a terminal); console: progress lines on stdout, logs on stderr; json: JSON logs on stderr; none"},
		&cli.StringFlag{Name: LogLevel, Value: "info", Usage: "debug, info, warn or error"},
		&cli.IntFlag{Name: MetricsPort, Usage: "serve Prometheus /metrics, JSON /status and /healthz on 127.0.0.1 at this port (0 picks one); off when absent"},
	}
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
func Start(ctx context.Context, c *cli.Context, rec *status.Recorder, cancel context.CancelFunc, t Terminal) (*Started, error) {
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
	fellBack := false
	if mode == logging.TUI && !(isTerminal(t.Stdin) && isTerminal(t.Stdout)) {
		mode, fellBack = logging.Console, true
	}
	log, err := logging.New(mode, t.Stderr, rec, level)
	if err != nil {
		return nil, err
	}
	s := &Started{Log: log, Mode: mode}
	if fellBack {
		log.Info("stdin or stdout is not a terminal; --logs tui falls back to console")
	}
	if addr != "" {
		srv, err := metrics.Listen(addr, rec, log)
		if err != nil {
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
