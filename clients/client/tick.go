package client

import (
	"context"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
)

// tickEvery bounds how often one client tries to tick.
const tickEvery = 500 * time.Millisecond

// tick decides whether to advance the run: when the phase's timer is up by
// the chain's clock, or the round's verify seed waits to be drawn (the program checks the same clock, so a client whose
// own clock is off neither ticks early nor stalls), with probability 2/n
// among n members (always for 2 or fewer), as the reference does, so not
// every client pays for the same transition. A client that was never a
// member ticks WaitingForMembers only once it is pending.
func (e *engine) tick(v *coordinator.View, now time.Time) (action, bool) {
	if !(v.TimerUp() || v.SeedPending()) || now.Sub(e.lastTick) < tickEvery {
		return nil, false
	}
	if v.Phase == coordinator.WaitingForMembers && !e.everMember && !v.Pending() {
		return nil, false
	}
	e.lastTick = now
	n := max(len(v.Members), 1)
	if n > 2 && e.rng.IntN(n) >= 2 {
		return nil, false
	}
	return tickAction{v.Phase}, true
}

// sendTick simulates the tick first (no fee for one that cannot advance),
// then sends it.
func (c *Client) sendTick(ctx context.Context, a tickAction) {
	if err := c.chain.Submit(ctx, op{kind: opTick}, true); err != nil {
		return
	}
	if err := c.chain.Submit(ctx, op{kind: opTick}, false); err != nil {
		c.log.Debug("tick not accepted", "phase", a.phase, "err", err)
	}
}
