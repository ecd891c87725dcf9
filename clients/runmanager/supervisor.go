package runmanager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Exit is how a client process ended.
type Exit struct {
	// Code is the exit code, -1 when a signal killed the client.
	Code int
	// Status describes it ("exit status 1", "signal: killed").
	Status string
	// Output is the end of the client's stderr, where psyche-client prints
	// its error.
	Output string
}

// Message is the client's own error: the last non-empty line of its output,
// without the "psyche-client: " prefix.
func (e Exit) Message() string {
	lines := strings.Split(strings.TrimRight(e.Output, "\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	return strings.TrimPrefix(last, "psyche-client: ")
}

// Child is a started client.
type Child interface {
	// Wait blocks until the client exits.
	Wait() Exit
	// Interrupt asks the client to leave the run (SIGINT).
	Interrupt() error
	// Kill ends it now.
	Kill() error
}

// Config is what the supervisor runs.
type Config struct {
	// Start starts the client (again); n counts the starts, from 1.
	Start func(n int) (Child, error)
	// Update runs the operator's update command for the version the run
	// wants ("" when the client did not say); nil when none is configured.
	Update func(ctx context.Context, version string) error
	// Backoff spaces the restarts.
	Backoff Backoff
	// Signals are Ctrl-C and SIGTERM: the first asks the client to leave,
	// the second kills it.
	Signals <-chan os.Signal
	// Logf reports what the supervisor does, one line each.
	Logf func(format string, args ...any)
	// Now and After are the clock (time.Now and time.After when nil).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Result is how the supervisor ended: the exit code for its own process,
// and for a non-zero one what went wrong.
type Result struct {
	Code int
	Msg  string
}

// Run supervises the client until it finishes the run, refuses its input,
// needs an update nobody configured, or a signal stops it.
func Run(cfg Config) Result {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	for n := 1; ; n++ {
		child, err := cfg.Start(n)
		if err != nil {
			return Result{1, fmt.Sprintf("starting the client: %v", err)}
		}
		started := cfg.Now()
		done := make(chan Exit, 1)
		go func() { done <- child.Wait() }()
		var ex Exit
		select {
		case ex = <-done:
		case sig := <-cfg.Signals:
			return stop(cfg, child, done, sig)
		}
		ran := cfg.Now().Sub(started)
		switch Decide(ex.Code) {
		case Finish:
			cfg.Logf("the client finished (exit status 0)")
			return Result{}
		case GiveUp:
			return Result{ExitBadInput, fmt.Sprintf("the client exited %d (bad input), not restarting it: %s", ex.Code, ex.Message())}
		case Update:
			v := RequiredVersion(ex.Output)
			shown := fmt.Sprintf("%q", v)
			if v == "" {
				shown = "(the client did not say which)"
			}
			if cfg.Update == nil {
				return Result{ExitVersionMismatch, fmt.Sprintf("the run requires client version %s; update the client, or give --update-command to update and restart it automatically", shown)}
			}
			cfg.Logf("the run requires client version %s: running the update command", shown)
			if r, stopped := update(cfg, v); stopped || r.Code != 0 {
				return r
			}
		}
		delay := cfg.Backoff.Next(ran)
		cfg.Logf("the client exited (%s) after %s; restart %d in %s", ex.Status, ran.Round(time.Millisecond), n, delay)
		select {
		case <-cfg.After(delay):
		case sig := <-cfg.Signals:
			cfg.Logf("%v: stopping (no client running)", sig)
			return Result{}
		}
	}
}

// update runs the update command; a signal cancels it and stops the
// supervisor.
func update(cfg Config, version string) (r Result, stopped bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cfg.Update(ctx, version) }()
	select {
	case err := <-done:
		if err != nil {
			return Result{1, fmt.Sprintf("the update command failed: %v", err)}, false
		}
		cfg.Logf("the update command succeeded")
		return Result{}, false
	case sig := <-cfg.Signals:
		cfg.Logf("%v: stopping the update command", sig)
		cancel()
		<-done
		return Result{}, true
	}
}

// stop asks the client to leave the run and waits for it; a second signal
// kills it.
func stop(cfg Config, child Child, done <-chan Exit, sig os.Signal) Result {
	cfg.Logf("%v: asking the client to leave the run (again to kill it)", sig)
	if err := child.Interrupt(); err != nil {
		cfg.Logf("interrupting the client: %v", err)
	}
	select {
	case ex := <-done:
		cfg.Logf("the client left (%s)", ex.Status)
		return Result{}
	case sig := <-cfg.Signals:
		cfg.Logf("%v: killing the client", sig)
		if err := child.Kill(); err != nil {
			cfg.Logf("killing the client: %v", err)
		}
		ex := <-done
		return Result{1, fmt.Sprintf("killed the client before it left the run (%s)", ex.Status)}
	}
}
