package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// A client's JSON log (--logs json), followed as it is written.

// stepEvent is a "step" (trained) or "applied" (followed) line.
type stepEvent struct {
	Step                   uint64
	Trained                bool
	Loss                   float64
	Applied, Of            int
	Digest                 string
	Train, Round, Overhead float64 // seconds
	Time                   time.Time
}

type clientLog struct {
	mu sync.Mutex
	logData
}

// logData is what a client's log said.
type logData struct {
	steps      map[uint64]stepEvent
	order      []uint64
	joined     []time.Time
	finished   time.Time
	modelReady time.Time
	left       bool
	drops      []uint64 // members this client's health checks dropped
	fetches    []fetchEvent
	fetchFails int
	warnings   int
	errors     int
	lastWarn   string
	lines      int
}

type fetchEvent struct {
	Step    uint64
	Bytes   float64
	Seconds float64
	Time    time.Time
}

// followLog reads path as it grows until done is closed and the end is read.
func followLog(path string, done <-chan struct{}) *clientLog {
	l := &clientLog{logData: logData{steps: map[uint64]stepEvent{}}}
	go func() {
		var f *os.File
		for {
			var err error
			if f, err = os.Open(path); err == nil {
				break
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 1<<20)
		var partial []byte
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				partial = append(partial, line...)
				if line[len(line)-1] == '\n' {
					l.parse(partial)
					partial = partial[:0]
				}
			}
			if errors.Is(err, io.EOF) {
				select {
				case <-done:
					// One last read after the exit.
					rest, _ := io.ReadAll(r)
					partial = append(partial, rest...)
					for _, ln := range splitLines(partial) {
						l.parse(ln)
					}
					return
				case <-time.After(250 * time.Millisecond):
				}
				continue
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

func (l *clientLog) parse(line []byte) {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return
	}
	num := func(k string) float64 {
		v, _ := m[k].(float64)
		return v
	}
	str := func(k string) string {
		v, _ := m[k].(string)
		return v
	}
	ts, _ := time.Parse(time.RFC3339Nano, str("time"))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines++
	switch str("level") {
	case "WARN":
		l.warnings++
		l.lastWarn = str("msg") + ": " + str("err")
	case "ERROR":
		l.errors++
		l.lastWarn = str("msg") + ": " + str("err")
	}
	switch str("msg") {
	case "step", "applied":
		e := stepEvent{Step: uint64(num("step")), Trained: str("msg") == "step", Loss: num("loss"),
			Applied: int(num("applied")), Of: int(num("of")), Digest: str("digest"),
			Train: num("train_seconds"), Round: num("round_seconds"), Overhead: num("round_overhead_seconds"), Time: ts}
		if _, ok := l.steps[e.Step]; !ok {
			l.order = append(l.order, e.Step)
		}
		l.steps[e.Step] = e
	case "joined the run":
		l.joined = append(l.joined, ts)
	case "the run is finished":
		l.finished = ts
	case "model ready":
		if l.modelReady.IsZero() {
			l.modelReady = ts
		}
	case "left the run":
		l.left = true
	case "health check dropped a member that did not deliver":
		l.drops = append(l.drops, uint64(num("member")))
	case "fetched the model from peers":
		l.fetches = append(l.fetches, fetchEvent{Step: uint64(num("step")), Bytes: num("bytes"), Seconds: num("seconds"), Time: ts})
	case "fetching the model from peers failed; retrying":
		l.fetchFails++
	}
}

// snapshot copies what the log said so far.
func (l *clientLog) snapshot() logData {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.logData
	c.steps = make(map[uint64]stepEvent, len(l.steps))
	for k, v := range l.steps {
		c.steps[k] = v
	}
	c.order = append([]uint64(nil), l.order...)
	c.drops = append([]uint64(nil), l.drops...)
	c.fetches = append([]fetchEvent(nil), l.fetches...)
	c.joined = append([]time.Time(nil), l.joined...)
	return c
}

// Finished reports whether the client logged the end of the run.
func (l *clientLog) Finished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.finished.IsZero()
}

// LastStep is the highest step the client trained or applied.
func (l *clientLog) LastStep() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m uint64
	for s := range l.steps {
		m = max(m, s)
	}
	return m
}
