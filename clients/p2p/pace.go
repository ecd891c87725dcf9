package p2p

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// pacePiece is the most a capped upload writes at once, so that a slow
// upload is a steady stream rather than a long stall followed by a burst.
const pacePiece = 32 << 10

var errPaceDeadline = errors.New("upload rate cap: the response cannot be sent before its deadline")

// pacer spreads writes over time at rate bytes per second, shared by every
// response that uses it. Each write books the next free slot of the schedule;
// idle time is not saved up, so there is never a burst above one piece.
type pacer struct {
	rate float64
	mu   sync.Mutex
	next time.Time // when the bytes booked so far have been sent at rate
}

func newPacer(bytesPerSecond int64) *pacer { return &pacer{rate: float64(bytesPerSecond)} }

// wait books size bytes and waits for their slot. A slot past ctx's deadline
// is not booked: the response would time out anyway, and booking it would
// delay everyone else.
func (p *pacer) wait(ctx context.Context, size int) error {
	p.mu.Lock()
	start := time.Now()
	if p.next.After(start) {
		start = p.next
	}
	if deadline, ok := ctx.Deadline(); ok && start.After(deadline) {
		p.mu.Unlock()
		return errPaceDeadline
	}
	p.next = start.Add(time.Duration(float64(size) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	return sleep(ctx, time.Until(start))
}

// pacedWriter writes to w in pieces of at most pacePiece bytes, each waiting
// for its slot of p.
type pacedWriter struct {
	ctx context.Context
	w   io.Writer
	p   *pacer
}

func (pw pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		piece := b[:min(len(b), pacePiece)]
		if err := pw.p.wait(pw.ctx, len(piece)); err != nil {
			return written, err
		}
		k, err := pw.w.Write(piece)
		written += k
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}
