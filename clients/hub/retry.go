package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Retry defaults: five tries over about 15 s ride out a restarting hub or a
// brief network loss without hiding a hub that is really down.
const (
	defaultAttempts = 5
	defaultBackoff  = time.Second
	maxBackoff      = 30 * time.Second
)

// transientError marks a failure worth trying again: the network, a stalled
// transfer, or a status that says "later" (408, 429, 5xx).
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func transient(err error) error { return &transientError{err} }

// transientStatus reports whether a response status may succeed on retry.
func transientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retry runs try until it succeeds, fails permanently, the attempts run out
// or ctx ends, doubling the wait between attempts.
func retry(ctx context.Context, attempts int, wait time.Duration, log *slog.Logger, what string, try func() error) error {
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	if wait <= 0 {
		wait = defaultBackoff
	}
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		var t *transientError
		if !errors.As(err, &t) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt >= attempts {
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, attempts, err)
		}
		log.Warn("hub transfer failed; retrying", "what", what, "attempt", attempt, "in", wait, "err", err)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-timer.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

// statusError describes an unexpected response, with the first line of the
// server's explanation.
func statusError(resp *http.Response) error {
	msg := readMessage(resp)
	if msg == "" {
		return fmt.Errorf("the hub answered %s", resp.Status)
	}
	return fmt.Errorf("the hub answered %s: %s", resp.Status, msg)
}

// readMessage is the first line of a response body, at most 200 bytes of it.
func readMessage(resp *http.Response) string {
	buf := make([]byte, 512)
	n, _ := io.ReadFull(resp.Body, buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return strings.ToValidUTF8(line, "?")
}
