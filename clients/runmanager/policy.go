// Package runmanager supervises a training client (psyche-client train): it
// restarts the client after a crash with exponential backoff, updates it when
// the run wants another client version, and on Ctrl-C asks it to leave the
// run. The policy (backoff, exit codes, env files, the supervisor loop) is
// here, free of real processes so it is tested without them; Start runs the
// real ones. psyche-client run-manager is its command.
package runmanager

import (
	"regexp"
	"strconv"
	"time"
)

// The exit codes of psyche-client train that the supervisor treats apart.
const (
	// ExitBadInput: the client refused its flags, files or keys; restarting
	// cannot help.
	ExitBadInput = 2
	// ExitVersionMismatch: the run wants another client version (the
	// client's last stderr line says which).
	ExitVersionMismatch = 10
)

// Action is what the supervisor does after the client exited.
type Action int

const (
	// Finish: the run is over for this client (exit 0).
	Finish Action = iota
	// Restart after a crash (any other exit, or death by a signal).
	Restart
	// Update the client to the version the run wants, then restart.
	Update
	// GiveUp: bad input, reported and not retried.
	GiveUp
)

func (a Action) String() string {
	return [...]string{"finish", "restart", "update", "give up"}[a]
}

// Decide is the exit-code policy: code is the client's exit code, -1 when a
// signal killed it.
func Decide(code int) Action {
	switch code {
	case 0:
		return Finish
	case ExitBadInput:
		return GiveUp
	case ExitVersionMismatch:
		return Update
	}
	return Restart
}

// Backoff spaces restarts: Initial before the first, doubling up to Max, and
// back to Initial once a client ran for Healthy (it was not crash-looping).
type Backoff struct {
	Initial, Max, Healthy time.Duration
	next                  time.Duration
}

// DefaultBackoff is 1 s doubling to 5 min, reset after 10 min of running.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 5 * time.Minute, Healthy: 10 * time.Minute}
}

// Next is the delay before restarting a client that ran for ran.
func (b *Backoff) Next(ran time.Duration) time.Duration {
	if b.next == 0 || ran >= b.Healthy {
		b.next = b.Initial
	}
	d := min(b.next, b.Max)
	b.next = min(2*d, b.Max)
	return d
}

// wantsVersion matches psyche-client train's message for exit code 10:
// `the run requires another client version: the run wants "v2", this is "v1"`.
var wantsVersion = regexp.MustCompile(`the run wants ("(?:[^"\\]|\\.)*")`)

// RequiredVersion is the version the run wants according to the client's
// output (the last such message), "" when it does not say.
func RequiredVersion(output string) string {
	all := wantsVersion.FindAllStringSubmatch(output, -1)
	if len(all) == 0 {
		return ""
	}
	v, err := strconv.Unquote(all[len(all)-1][1])
	if err != nil {
		return ""
	}
	return v
}
