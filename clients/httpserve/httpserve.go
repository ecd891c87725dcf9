// Package httpserve runs the clients' HTTP servers (data server, checkpoint
// hub) with the same timeouts and shutdown.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve serves h on ln until ctx ends, then shuts down: requests in flight
// get a few seconds to finish and are then cut (clients retry; ranges
// resume). There is no whole-request timeout, since transfers may be large;
// handlers bound silence themselves. name prefixes errors ("data server").
func Serve(ctx context.Context, ln net.Listener, h http.Handler, name string) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// shutdownGrace is how long requests in flight may run after ctx ends.
const shutdownGrace = 5 * time.Second
