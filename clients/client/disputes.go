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
// on chain, which decides who pays. A committee of up to three other
// members replays the step again and votes; a majority settles it (the
// trainer at FAULT, or the accuser). The accused trainer may answer that its
// own rerun reproduces the verifier's bits, serving the rerun's payload by
// hash: committee members whose replay also gives the verifier's bits fetch
// it from the trainer and vote RERUN when they get it (a majority makes it
// TRANSIENT, nondeterminism forgiven once per epoch), MISMATCH when they do
// not (an answer that only copies the public hashes). They wait for an
// answer until the dispute's last round. The committee replays after the
// round was applied, on the weights the round trained from: every client
// keeps a copy of them when it applies a round that has a dispute, until the
// dispute's deadline has passed.

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
		step             uint32
		payload, stateAf [32]byte
		rerun            []byte // the rerun's payload, served by hash
	}
	// rerunAction fetches the accused trainer's rerun payload (a committee
	// member whose replay gave the accuser's bits, after the answer).
	rerunAction struct {
		d   coordinator.Dispute
		res replayResult
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
func (a rerunAction) String() string {
	return fmt.Sprintf("fetch the rerun of dispute %d from its trainer", a.d.Id)
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
			if res.skip != nil || pos < 0 {
				e.judged[d.Id] = true
				if res.skip == nil && res.claimPayload == d.ClaimedPayload && res.claimAft == d.ClaimedAfter {
					add(answerAction{d.Id, d.Step, res.claimPayload, res.claimAft, res.payload})
				}
				continue
			}
			vote, fetch, wait := committeeVote(d, res, v.Step)
			switch {
			case wait:
			case fetch:
				if !e.reruns[d.Id] {
					e.reruns[d.Id] = true
					add(rerunAction{d, res})
				}
			default:
				e.judged[d.Id] = true
				add(voteAction{d.Id, vote})
			}
			continue
		}
		if !e.judging[d.Id] && e.snapshots[d.Step] {
			e.judging[d.Id] = true
			add(judgeAction{d, pos})
		}
	}
}

// committeeVote is a committee member's vote on dispute d from its replay
// res, at the run's step: the replay's verdict, except when it gives the
// accuser's bits of a MISMATCH (the commitment was wrong): then the trainer
// may show a rerun, fetched once it answered (fetch), waited for until the
// dispute's last round (wait), and MISMATCH without one.
func committeeVote(d coordinator.Dispute, res replayResult, step uint32) (vote uint8, fetch, wait bool) {
	agrees := d.Kind == coordinator.VerdictMismatch && res.claimPayload == d.ClaimedPayload && res.claimAft == d.ClaimedAfter
	switch {
	case res.verdict == coordinator.VerdictMatch || !agrees || res.fetched:
		return res.verdict, false, false
	case d.Answered != 0:
		return 0, true, false
	case step < d.DeadlineStep:
		return 0, false, true
	}
	return coordinator.VerdictMismatch, false, false
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
	if a.vote < 0 && c.cheating(CheatCopyAnswer) {
		c.inbox.setJudgement(d.Id, d.Step, replayResult{claimPayload: d.ClaimedPayload, claimAft: d.ClaimedAfter})
		return nil
	}
	params := c.snapshots[d.Step]
	if params == nil {
		return nil
	}
	slot := &v.State.Clients[int(d.TrainerSlot)%len(v.State.Clients)]
	from, err := identity.PeerIDFromPublicKey(slot.P2PIdentity[:])
	if err != nil {
		return nil
	}
	// Members 0: only an overlapped round's update needs the round's member
	// count, and overlapped runs are not verified (ConfigOverlap).
	u := NewUpdate(&c.model, v.State.Config.TotalSteps, d.Step, int(c.model.InnerSteps), 0, d.EpochStartStep, d.ColdStart != 0, v.State.Config.Overlap != 0)
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

// sendAnswer serves the rerun's payload by hash, for the committee to
// fetch, then answers: the answer alone proves nothing.
func (c *Client) sendAnswer(ctx context.Context, a answerAction) {
	if c.cheating(CheatCopyAnswer) {
		// Nothing to serve: the rerun never ran.
	} else if _, err := c.node.Serve(uint64(a.step), a.rerun); err != nil {
		c.e.judged[a.id] = false
		c.log.Warn("cannot serve the rerun of a disputed step", "dispute", a.id, "err", err)
		return
	}
	err := c.chain.Submit(ctx, op{kind: opAnswer, dispute: a.id, claim: [2][32]byte{a.payload, a.stateAf}}, false)
	c.logDispute(err, "dispute answer", a.id)
}

// startRerunFetch fetches the accused trainer's rerun payload by the
// accuser's hash in the background; the vote is RERUN if it arrives.
func (c *Client) startRerunFetch(ctx context.Context, v *coordinator.View, a rerunAction) {
	d, res := a.d, a.res
	slot := &v.State.Clients[int(d.TrainerSlot)%len(v.State.Clients)]
	from, err := identity.PeerIDFromPublicKey(slot.P2PIdentity[:])
	c.inbox.spawn(func() {
		if err == nil {
			fctx, cancel := context.WithTimeout(ctx, replayTimeout)
			_, err = c.node.FetchFrom(fctx, from, d.ClaimedPayload, uint64(len(res.payload)))
			cancel()
		}
		res.fetched, res.verdict = true, coordinator.VoteRerun
		if err != nil {
			res.verdict = coordinator.VerdictMismatch
		}
		c.log.Info("fetched the rerun of a disputed step", "dispute", d.Id, "vote", coordinator.VerdictName(res.verdict), "err", err)
		c.inbox.setJudgement(d.Id, d.Step, res)
	})
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
