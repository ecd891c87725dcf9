package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p/identity"
)

// Disputes. A MISMATCH or NO_DATA verdict leaves the contribution out of
// the round at once (every replica reads the verdict) and opens a dispute
// on chain, which decides who pays: the accused trainer may show that its
// own rerun reproduces the verifier's bits (TRANSIENT), and a committee of
// up to three other members replays the step again and votes; a majority
// settles it (the trainer at FAULT, or the accuser). The committee replays
// after the round was applied, on the weights the round trained from: every
// client keeps a copy of them when it applies a round that has a dispute,
// until the dispute's deadline has passed.

type (
	// judgeAction replays a disputed contribution: as a committee member
	// (vote), or as the accused (answer if the rerun gives the accuser's bits).
	judgeAction struct {
		d    coordinator.Dispute
		vote int // the committee position, -1 for the accused
	}
	voteAction struct {
		id   uint64
		vote uint8
	}
	answerAction struct {
		id               uint64
		payload, stateAf [32]byte
	}
)

func (a judgeAction) String() string {
	return fmt.Sprintf("replay disputed step %d of slot %d (dispute %d)", a.d.Step, a.d.TrainerSlot, a.d.Id)
}
func (a voteAction) String() string {
	return fmt.Sprintf("vote %s on dispute %d", coordinator.VerdictName(a.vote), a.id)
}
func (a answerAction) String() string {
	return fmt.Sprintf("answer dispute %d: the rerun reproduces the accuser's bits", a.id)
}

// slotIndex is the index of me's slot in s, -1 when it has none.
func slotIndex(s *coordinator.State, v *coordinator.View) int {
	if v.Slot == nil {
		return -1
	}
	for i := range s.Clients {
		if &s.Clients[i] == v.Slot {
			return i
		}
	}
	return -1
}

// disputes decides this client's part in the open disputes: replay the
// disputed step when it sits on the committee or is the accused (holding
// the weights the step trained from), then vote or answer.
func (e *engine) disputes(v *coordinator.View, in *inputs, add func(action)) {
	me := slotIndex(v.State, v)
	if me < 0 {
		return
	}
	for _, d := range v.State.Disputes {
		if d.State != coordinator.DisputeOpen {
			continue
		}
		pos := -2
		for j := range min(int(d.CommitteeLen), len(d.Committee)) {
			if int(d.Committee[j]) == me && d.Votes[j] == 0 {
				pos = j
			}
		}
		if int(d.TrainerSlot) == me && d.Kind == coordinator.VerdictMismatch {
			pos = -1
		}
		if pos == -2 || e.judged[d.Id] {
			continue
		}
		if res, ok := in.judgements[d.Id]; ok {
			e.judged[d.Id] = true
			switch {
			case res.skip != nil:
			case pos >= 0:
				add(voteAction{d.Id, res.verdict})
			case res.claimPayload == d.ClaimedPayload && res.claimAft == d.ClaimedAfter:
				add(answerAction{d.Id, res.claimPayload, res.claimAft})
			}
			continue
		}
		if !e.judging[d.Id] && e.snapshots[d.Step] {
			e.judging[d.Id] = true
			add(judgeAction{d, pos})
		}
	}
}

// snapshotWanted says whether applying rec must keep the weights it starts
// from: one of its contributions is disputed.
func snapshotWanted(rec *roundRecord) bool {
	if rec.verify == nil {
		return false
	}
	for _, c := range rec.verify.commits {
		if c.verdict == coordinator.VerdictMismatch || c.verdict == coordinator.VerdictNoData {
			return true
		}
	}
	return false
}

// keepSnapshot keeps the weights a disputed round starts from; snapshots
// older than any dispute's deadline are dropped.
func (c *Client) keepSnapshot(step uint32) error {
	params, err := c.tr.Params()
	if err != nil {
		return err
	}
	c.snapshots[step] = params
	c.e.snapshots[step] = true
	for st := range c.snapshots {
		if st+disputeSteps < step {
			delete(c.snapshots, st)
			delete(c.e.snapshots, st)
		}
	}
	return nil
}

// disputeSteps bounds how many steps a dispute stays open (the program's
// deadline is its step + 2), with a margin.
const disputeSteps = 4

// startJudge replays a disputed contribution in the background.
func (c *Client) startJudge(ctx context.Context, v *coordinator.View, a judgeAction) error {
	d := a.d
	params := c.snapshots[d.Step]
	if params == nil {
		return nil
	}
	slot := &v.State.Clients[int(d.TrainerSlot)%len(v.State.Clients)]
	from, err := identity.PeerIDFromPublicKey(slot.P2PIdentity[:])
	if err != nil {
		return nil
	}
	u := NewUpdate(&c.model, v.State.Config.TotalSteps, d.Step, int(c.model.InnerSteps), d.EpochStartStep, d.ColdStart != 0)
	job := replayJob{step: d.Step, index: int(d.TrainerIndex), from: from, batch: batchRange{d.BatchStart, uint64(d.BatchLen)},
		params: params, u: u,
		commit: commitRecord{committed: true, fresh: d.Fresh != 0, payload: d.Payload, before: d.StateBefore, after: d.StateAfter}}
	id := d.Id
	c.inbox.spawn(func() {
		res := c.runReplay(ctx, job)
		c.log.Info("replayed a disputed contribution", "dispute", id, "step", job.step, "verdict", coordinator.VerdictName(res.verdict), "err", res.skip)
		c.inbox.setJudgement(id, job.step, res)
	})
	return nil
}

func (c *Client) sendVote(ctx context.Context, a voteAction) {
	err := c.chain.Submit(ctx, op{kind: opJudge, dispute: a.id, vote: a.vote}, false)
	c.logDispute(err, "dispute vote", a.id, "vote", coordinator.VerdictName(a.vote))
}

func (c *Client) sendAnswer(ctx context.Context, a answerAction) {
	err := c.chain.Submit(ctx, op{kind: opAnswer, dispute: a.id, claim: [2][32]byte{a.payload, a.stateAf}}, false)
	c.logDispute(err, "dispute answer", a.id)
}

func (c *Client) logDispute(err error, what string, id uint64, kv ...any) {
	args := append([]any{"dispute", id}, kv...)
	if err != nil {
		var te *chain.TxError
		if !errors.As(err, &te) {
			c.e.judged[id] = false // not delivered: decide again
		}
		c.log.Warn(what+" not accepted", append(args, "err", err)...)
		return
	}
	c.log.Info(what+" sent", args...)
}
