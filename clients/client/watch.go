package client

import (
	"context"
	"time"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// watch follows the Coordinator account with accountSubscribe and hands each
// decoded state to out, newest first: an undelivered older state is
// replaced. When a subscription fails it reconnects after a growing pause,
// each time on the next endpoint, so a dead RPC node is left for a backup
// and retried later. Staleness (a node behind another) is judged by the
// receiver from the state's nonce.
func (c *Client) watch(ctx context.Context, chains []*chain.Client, out chan *coordinator.State) {
	pause := watchPause
	for i := 0; ; i++ {
		cl := chains[i%len(chains)]
		heard := false
		err := cl.SubscribeAccount(ctx, c.run.Account, func(u chain.AccountUpdate) {
			heard = true
			if !u.Owner.Equals(c.run.Program.ID) {
				c.log.Warn("the run account is not owned by the coordinator program", "account", c.run.Account, "owner", u.Owner)
				return
			}
			s, err := coordinator.DecodeState(u.Data)
			if err != nil {
				c.log.Warn("undecodable coordinator notification", "ws", cl.WSURL(), "err", err)
				return
			}
			select {
			case <-out:
			default:
			}
			out <- s
		})
		if ctx.Err() != nil {
			return
		}
		if heard {
			pause = watchPause
		}
		c.failed(cl, err)
		next := chains[(i+1)%len(chains)]
		c.log.Warn("coordinator subscription dropped; reconnecting", "ws", cl.WSURL(), "err", err, "next", next.WSURL(), "in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, watchPauseMax)
	}
}

// watchPause and watchPauseMax bound the wait between reconnects.
const (
	watchPause    = 250 * time.Millisecond
	watchPauseMax = 5 * time.Second
)
