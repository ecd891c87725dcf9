package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/psyche-go/psyche/clients/status"
)

// shutdownGrace bounds how long in-flight scrapes may finish after the
// context ends.
const shutdownGrace = 5 * time.Second

// LocalAddr is the address --metrics-local-port binds: loopback only, since
// the endpoints are unauthenticated. Port 0 picks a free port.
func LocalAddr(port int) (string, error) {
	if port < 0 || port > 65535 {
		return "", fmt.Errorf("metrics port %d is out of range 0..65535", port)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Registry holds every metric of rec: the client's (collector.go, read
// from one Snapshot per gathering) and the Go runtime and process
// collectors. It is what /metrics serves and what clients/status/otlp
// exports, so both carry the same metrics.
func Registry(rec *status.Recorder) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(rec), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves /metrics, /status and /healthz for rec.
func Handler(rec *status.Recorder, log *slog.Logger) http.Handler {
	reg := Registry(rec)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(rec.Snapshot())
		if err != nil {
			http.Error(w, "encoding status: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(b, '\n'))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Server is a bound, not yet serving, metrics endpoint.
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// Listen binds addr (see LocalAddr) for rec's endpoints.
func Listen(addr string, rec *status.Recorder, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	return &Server{
		ln:  ln,
		log: log,
		srv: &http.Server{
			Handler:           Handler(rec, log),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}, nil
}

// Addr is the bound address, e.g. to learn the port picked for port 0.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down gracefully; it returns nil
// after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(s.ln) }()
	s.log.Info("metrics endpoint listening", "url", "http://"+s.Addr().String()+"/metrics")
	select {
	case err := <-done:
		return fmt.Errorf("metrics endpoint: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("metrics endpoint shutdown: %w", err)
	}
	return nil
}
