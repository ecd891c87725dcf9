package otlp

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RoundSpan is the name of a round's span; its children are named by the
// work they time (train, publish, fetch, apply, witness, tick, verify).
const RoundSpan = "round"

// StepKey is the attribute carrying the step, on round spans and their
// children.
const StepKey = attribute.Key("psyche.step")

// maxRounds bounds the rounds kept open or remembered: the oldest is
// ended (if still open) and forgotten beyond it.
const maxRounds = 64

// Rounds traces a client's rounds: the first work seen for a step starts
// the round's span (a new trace), every piece of work is a child span of
// it, and RoundDone ends it. Work that comes after (a late fetch) is still
// a child of the ended round. It satisfies clients/client's Tracer; the
// zero of *Rounds (nil) traces nothing. Safe for concurrent use.
type Rounds struct {
	tracer trace.Tracer

	mu     sync.Mutex
	rounds map[uint32]*round
}

type round struct {
	ctx   context.Context // holds the round's span
	span  trace.Span
	ended bool
}

func newRounds(t trace.Tracer) *Rounds {
	return &Rounds{tracer: t, rounds: map[uint32]*round{}}
}

func noEnd(error) {}

// Span starts a child span of the round of step, named kind; the returned
// function ends it, recording err (nil: success).
func (r *Rounds) Span(step uint32, kind string) (end func(err error)) {
	if r == nil {
		return noEnd
	}
	_, sp := r.tracer.Start(r.round(step), kind, trace.WithAttributes(StepKey.Int64(int64(step))))
	return func(err error) {
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
}

// RoundDone ends the round span of step.
func (r *Rounds) RoundDone(step uint32) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd := r.rounds[step]; rd != nil && !rd.ended {
		rd.span.End()
		rd.ended = true
	}
}

// Close ends every round span still open (at shutdown).
func (r *Rounds) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rd := range r.rounds {
		if !rd.ended {
			rd.span.End()
			rd.ended = true
		}
	}
}

// round is the context of step's round span, started when first needed.
func (r *Rounds) round(step uint32) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd := r.rounds[step]; rd != nil {
		return rd.ctx
	}
	ctx, sp := r.tracer.Start(context.Background(), RoundSpan, trace.WithNewRoot(), trace.WithAttributes(StepKey.Int64(int64(step))))
	r.rounds[step] = &round{ctx: ctx, span: sp}
	if len(r.rounds) > maxRounds {
		oldest := step
		for s := range r.rounds {
			oldest = min(oldest, s)
		}
		if rd := r.rounds[oldest]; !rd.ended {
			rd.span.End()
		}
		delete(r.rounds, oldest)
	}
	return ctx
}
