package explorer

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/httpserve"
)

// static holds the page: plain HTML, CSS and JavaScript, no dependencies,
// so it works offline.
//
//go:embed static
var static embed.FS

// Routes:
//
//	GET /                       the runs (static/index.html; app.js renders it)
//	GET /runs/{id}              a run's page (the same file), 404 for an unknown run
//	GET /static/...             the page's script and style
//	GET /api/runs               RunList
//	GET /api/runs/{id}          RunDetail, 404 with {"error": ...} for an unknown run
//	GET /api/stream             server-sent events: "update" with the RunList at every change
//	GET /api/runs/{id}/stream   "update" with the RunDetail at every change; "gone" if the run is closed
//	GET /competitions                     the competitions (the same page)
//	GET /competitions/{id}                a competition's page, 404 for an unknown one
//	GET /api/competitions                 CompetitionList
//	GET /api/competitions/{id}            CompetitionDetail, 404 with {"error": ...} for an unknown one
//	GET /api/stream/competitions          "update" with the CompetitionList at every change
//	GET /api/competitions/{id}/stream     "update" with the CompetitionDetail at every change; "gone" once it is unknown
//
// Requests wait for the indexer's first read of the chain. Streams end
// when ctx does, so that the server shuts down promptly.
func Handler(ctx context.Context, x *Indexer) http.Handler {
	s := &server{ctx: ctx, x: x}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /runs/{id}", s.runPage)
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /api/runs", s.list)
	mux.HandleFunc("GET /api/runs/{id}", s.run)
	mux.HandleFunc("GET /api/stream", s.listStream)
	mux.HandleFunc("GET /api/runs/{id}/stream", s.runStream)
	mux.HandleFunc("GET /competitions", s.page)
	mux.HandleFunc("GET /competitions/{id}", s.competitionPage)
	mux.HandleFunc("GET /api/competitions", s.competitions)
	mux.HandleFunc("GET /api/competitions/{id}", s.competition)
	mux.HandleFunc("GET /api/stream/competitions", s.competitionsStream)
	mux.HandleFunc("GET /api/competitions/{id}/stream", s.competitionStream)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.notFound(w, r, fmt.Errorf("no page at %s: the explorer serves / and /runs/RUN_ID, /competitions and /competitions/ID", r.URL.Path))
	})
	return mux
}

// Serve runs x and serves its pages on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, x *Indexer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	indexed := make(chan error, 1)
	go func() { indexed <- x.Run(ctx) }()
	err := httpserve.Serve(ctx, ln, Handler(ctx, x), "explorer")
	cancel()
	return errors.Join(err, <-indexed)
}

type server struct {
	ctx context.Context
	x   *Indexer
}

// ready waits for the indexer's first read; false if the client gave up.
func (s *server) ready(r *http.Request) bool {
	select {
	case <-s.x.Ready():
		return true
	case <-r.Context().Done():
		return false
	case <-s.ctx.Done():
		return false
	}
}

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	http.ServeFileFS(w, r, static, "static/index.html")
}

func (s *server) runPage(w http.ResponseWriter, r *http.Request) {
	if !s.ready(r) {
		return
	}
	if _, err := s.x.RunJSON(r.PathValue("id")); err != nil {
		s.notFound(w, r, err)
		return
	}
	s.page(w, r)
}

func (s *server) competitionPage(w http.ResponseWriter, r *http.Request) {
	if !s.ready(r) {
		return
	}
	if _, err := s.x.CompetitionJSON(r.PathValue("id")); err != nil {
		s.notFound(w, r, err)
		return
	}
	s.page(w, r)
}

var notFoundPage = template.Must(template.New("404").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Not found · Psyche run explorer</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/static/style.css"></head>
<body><header><a class="brand" href="/">Psyche run explorer</a><nav><a href="/">Runs</a><a href="/competitions">Competitions</a></nav></header>
<main><h1>Not found</h1><p class="error" id="error">{{.}}</p><p><a href="/">All runs</a> · <a href="/competitions">All competitions</a></p></main></body></html>
`))

// notFound answers 404 with err: as JSON to the API, as a page otherwise.
func (s *server) notFound(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusNotFound, mustJSON(map[string]string{"error": err.Error()}))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_ = notFoundPage.Execute(w, err.Error())
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	if s.ready(r) {
		writeJSON(w, http.StatusOK, s.x.ListJSON())
	}
}

func (s *server) run(w http.ResponseWriter, r *http.Request) {
	if !s.ready(r) {
		return
	}
	body, err := s.x.RunJSON(r.PathValue("id"))
	if err != nil {
		s.notFound(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) competitions(w http.ResponseWriter, r *http.Request) {
	if s.ready(r) {
		writeJSON(w, http.StatusOK, s.x.CompetitionsJSON())
	}
}

func (s *server) competition(w http.ResponseWriter, r *http.Request) {
	if !s.ready(r) {
		return
	}
	body, err := s.x.CompetitionJSON(r.PathValue("id"))
	if err != nil {
		s.notFound(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) competitionsStream(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, func() ([]byte, error) { return s.x.CompetitionsJSON(), nil })
}

func (s *server) competitionStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.stream(w, r, func() ([]byte, error) { return s.x.CompetitionJSON(id) })
}

func (s *server) listStream(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, func() ([]byte, error) { return s.x.ListJSON(), nil })
}

func (s *server) runStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.stream(w, r, func() ([]byte, error) { return s.x.RunJSON(id) })
}

// streamPing keeps idle streams alive through proxies, and finds closed ones.
const streamPing = 15 * time.Second

// stream sends body as an "update" event now and after every change that
// alters it; when body fails (the run was closed, the competition is no
// longer listed) it sends "gone" and ends.
func (s *server) stream(w http.ResponseWriter, r *http.Request, body func() ([]byte, error)) {
	if !s.ready(r) {
		return
	}
	if _, err := body(); err != nil {
		s.notFound(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported by this connection", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	var last []byte
	for {
		changed := s.x.Changed() // before reading, so that no change goes unseen
		b, err := body()
		switch {
		case errors.Is(err, errNoRun) || errors.Is(err, errNoCompetition):
			msg, _ := json.Marshal(map[string]string{"error": err.Error()})
			fmt.Fprintf(w, "event: gone\ndata: %s\n\n", msg)
			flusher.Flush()
			return
		case !bytes.Equal(b, last):
			if _, err := fmt.Fprintf(w, "event: update\ndata: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
			last = b
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
