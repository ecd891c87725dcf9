package client

import (
	"context"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
)

// Tracer sees the client's work round by round: the CLI exports it as
// OpenTelemetry traces (clients/status/otlp), one span per round (step)
// with a child span per piece of work. Config.Tracer nil traces nothing.
//
// Its methods are called from the loop and from p2p fetches at once, so
// they must be safe for concurrent use, and must return at once (no I/O).
type Tracer interface {
	// Span starts a piece of work of kind (one of the Span* constants) in
	// the round of step and returns what ends it, with the work's error
	// (nil: it succeeded).
	Span(step uint32, kind string) (end func(err error))
	// RoundDone says that the round of step is over for this client: its
	// payloads were applied.
	RoundDone(step uint32)
}

// The kinds of work a Tracer sees.
const (
	SpanTrain   = "train"   // computing this client's update (data fetch included)
	SpanPublish = "publish" // announcing the payload and serving it
	SpanFetch   = "fetch"   // downloading a peer's payload
	SpanApply   = "apply"   // applying the round's attested payloads
	SpanWitness = "witness" // sending a witness report
	SpanTick    = "tick"    // advancing the Coordinator's state machine
	SpanVerify  = "verify"  // starting a replay of a contribution, posting a verdict, a dispute's replay
)

func noEnd(error) {}

// traceAction starts the span of an action that is part of a round, when
// the client traces; the returned function ends it (a no-op otherwise).
func (c *Client) traceAction(v *coordinator.View, a action) func(error) {
	t := c.cfg.Tracer
	if t == nil {
		return noEnd
	}
	var step uint32
	var kind string
	switch a := a.(type) {
	case trainAction:
		step, kind = a.rec.step, SpanTrain
	case applyAction:
		end := t.Span(a.rec.step, SpanApply)
		return func(err error) {
			end(err)
			t.RoundDone(a.rec.step)
		}
	case witnessAction:
		step, kind = a.rec.step, SpanWitness
	case tickAction:
		step, kind = v.Step, SpanTick
	case replayAction:
		step, kind = a.rec.step, SpanVerify
	case verdictAction:
		step, kind = a.step, SpanVerify
	case judgeAction:
		step, kind = a.d.Step, SpanVerify
	default:
		return noEnd
	}
	return t.Span(step, kind)
}

// tracedNetwork adds publish and fetch spans to a node's payload exchange.
type tracedNetwork struct {
	network
	t Tracer
}

func (n tracedNetwork) Publish(ctx context.Context, step uint64, batch p2p.BatchID, payload []byte) (p2p.Announcement, error) {
	end := n.t.Span(uint32(step), SpanPublish)
	a, err := n.network.Publish(ctx, step, batch, payload)
	end(err)
	return a, err
}

func (n tracedNetwork) FetchBlob(ctx context.Context, a p2p.Announcement) ([]byte, error) {
	end := n.t.Span(uint32(a.Step), SpanFetch)
	b, err := n.network.FetchBlob(ctx, a)
	end(err)
	return b, err
}
