package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// membership decides joining the epoch that forms next. A client that is
// not a member joins at once, in any phase: a registered client is a p2p
// participant, so it can follow the run and fetch the model while it waits
// for its epoch. A member still loading the model has the Warmup and the
// first two rounds to catch up (health checks start with the third); if it
// cannot train the second round either, it leaves before it would be
// dropped (and slashed), follows the run, and joins again once it holds the
// model. Members of the epoch join for the next one between epochs.
func (e *engine) membership(v *coordinator.View, current bool) (action, bool) {
	member := v.Member()
	switch {
	case member && !current && pastGrace(v) && e.mayLoadInTime(v):
		return stepAsideAction{}, true
	case v.Pending() || member || v.Phase == coordinator.Paused || v.Phase == coordinator.Uninitialized:
		return nil, false
	case e.holdJoin && !current:
		return nil, false
	case e.joinedEpoch == int64(v.Epoch) && !e.holdJoin:
		return nil, false // joined; the state does not show it yet
	}
	return joinAction{first: !e.dataOpen}, true
}

// mayLoadInTime says whether stepping aside can help a member that does
// not hold the model: it is still to be built (a restarted client first
// looks for a checkpoint), or a peer may send it. With no other holder on
// chain (every one crashed) nobody can, nor can anybody health-check this
// member: it resumes from a checkpoint instead (restoreDue).
func (e *engine) mayLoadInTime(v *coordinator.View) bool {
	return e.model != modelNone && len(e.modelHolders(v)) > 0
}

// pastGrace says whether a member that has not trained yet would be
// accused by the next health check: it missed the epoch's second round.
func pastGrace(v *coordinator.View) bool {
	switch v.Phase {
	case coordinator.RoundTrain:
		return v.Round.Height >= 2
	case coordinator.RoundWitness:
		return v.Round.Height >= 1
	}
	return false
}

// join registers for the epoch that forms next. The first time, the join
// is simulated before anything else: a run that refuses this client says
// so at once, and one whose data this client cannot read is never joined
// (a member that cannot train holds up every round).
func (c *Client) join(ctx context.Context, v *coordinator.View, a joinAction) error {
	if a.first {
		if err := c.chain.Submit(ctx, op{kind: opJoin}, true); err != nil {
			return c.joinFailed(err)
		}
		c.model = v.State.Model
		if err := c.openData(ctx); err != nil {
			return err
		}
		c.e.dataOpen = true
	}
	if err := c.chain.Submit(ctx, op{kind: opJoin}, false); err != nil {
		return c.joinFailed(err)
	}
	c.e.joinedEpoch, c.e.holdJoin = int64(v.Epoch), false
	c.log.Info("joined the run", "epoch", v.Epoch, "phase", v.Phase.String(), "step", v.Step)
	return nil
}

// joinFailed ends the client when the program refused the join (no or a
// wrong authorization, a full or finished run: retrying will not help);
// other failures are retried.
func (c *Client) joinFailed(err error) error {
	var te *chain.TxError
	if errors.As(err, &te) && te.Name == "P2pIdentityTaken" {
		// join_run proves the p2p key, so only a wallet holding this
		// node's key can hold its identity: another of the user's own.
		return fmt.Errorf("run %q: another wallet registered this client's p2p identity %x with proof of its key; "+
			"give each wallet its own --identity-secret-key-path (or none, for a random one): %w", c.cfg.RunID, c.p2pKey, err)
	}
	if errors.As(err, &te) && te.Code != nil && te.Name != "AlreadyJoined" && te.Name != "WrongPhase" {
		return fmt.Errorf("%w: run %q refused the join (authorization %s): %w", ErrNotAuthorized, c.cfg.RunID, c.cfg.Authorization, err)
	}
	c.log.Warn("join_run failed; retrying", "err", err)
	return nil
}

// notAClient says whether the program refused an instruction because this
// client is neither pending nor in the epoch.
func notAClient(err error) bool {
	var te *chain.TxError
	return errors.As(err, &te) && te.Name == "NotAClient"
}

// stepAside leaves the epoch while this client still loads the model; it
// joins again once it holds it.
func (c *Client) stepAside(ctx context.Context, v *coordinator.View) {
	if err := c.chain.Submit(ctx, op{kind: opLeave}, false); err != nil {
		if notAClient(err) {
			// The state acted on was stale: the epoch ended or dropped
			// this client meanwhile, so there is nothing to leave.
			c.log.Debug("leave_run: already out of the epoch", "err", err)
			c.e.holdJoin = true
			return
		}
		c.log.Warn("leaving the epoch failed; retrying", "err", err)
		return
	}
	c.e.holdJoin = true
	if c.e.joinedEpoch < 0 {
		// A member from before a restart (this process never joined):
		// the crash is the news, not this.
		c.log.Info("left the epoch this client was a member of before it restarted: it holds no model to train with yet; joining again once it does",
			"epoch", v.Epoch, "run_step", v.Step)
		return
	}
	c.log.Warn("left the epoch: the model from peers did not arrive in time to train; joining again once loaded",
		"epoch", v.Epoch, "run_step", v.Step, "have_step", c.e.lastStep)
}

// warmup reports ready (the client holds the model), once per epoch.
func (c *Client) warmup(ctx context.Context, v *coordinator.View) {
	if err := c.chain.Submit(ctx, op{kind: opWarmup}, false); err != nil {
		level := slog.LevelWarn
		if te := (*chain.TxError)(nil); errors.As(err, &te) && te.Name == "WrongPhase" {
			// The Warmup ended before it landed (a late joiner's race):
			// the client trains from the next epoch, nothing to act on.
			level = slog.LevelDebug
		}
		c.log.Log(ctx, level, "warmup_witness failed", "err", err)
		return
	}
	c.e.warmedEpoch = int64(v.Epoch)
}
