package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
)

// Following the run. Every client applies every round of the run, whether
// it trained in it or not: a member applies the rounds it trains, and a
// client that is not a member (a joiner waiting for its epoch, one that sat
// an epoch out, one still loading the model) applies the rounds the members
// train. So a replica never falls behind, and a joiner that loaded the model
// of an older step catches up by applying the rounds since.
//
// A round is recorded from the state in which it is current (its member
// list: members are removed only when the next round starts, which renumbers
// them) and completed from the first state in which its witness reports are
// final (a later round runs, or the rounds are over). Records outlive the
// Coordinator's 4-round history, so a client may apply many rounds late.

// roundRecord is one round as this client saw it on chain.
type roundRecord struct {
	step, height uint32
	members      []coordinator.Member // the round's clients, in index order
	peers        []peer.ID            // their p2p ids, same order
	lr           float32
	// final is set once the witness reports below can no longer change.
	final        bool
	witnessCount uint16
	participants []*schedule.Bloom
	broadcasts   []*schedule.Bloom
	// trained is set when this client trained in the round.
	trained *trainStats
	// allIn is when every member's payload was first seen here: the round
	// overhead is from then until the next round starts.
	allIn time.Time
}

// trainStats is what this client did in a round it trained.
type trainStats struct {
	loss      float32
	tokens    uint64
	trainTime time.Duration
	sent      uint64
}

// captureRounds records the current round and completes the records whose
// witness reports became final in s.
func (c *Client) captureRounds(s *coordinator.State) {
	phase := coordinator.Phase(s)
	running := phase == coordinator.RoundTrain || phase == coordinator.RoundWitness
	cur := coordinator.CurrentRound(s)
	if running && cur.ClientsLen > 0 && c.rounds[cur.Step] == nil && cur.Step > c.lastStep {
		members := coordinator.Members(s)[:min(int(cur.ClientsLen), int(s.Epoch.ClientsLen))]
		rec := &roundRecord{step: cur.Step, height: cur.Height, members: members,
			lr: LearningRate(&s.Model, cur.Step, s.Epoch.StartStep, s.Epoch.ColdStart != 0)}
		for _, m := range members {
			id, _ := identity.PeerIDFromPublicKey(m.P2PIdentity[:])
			rec.peers = append(rec.peers, id)
		}
		c.rounds[cur.Step] = rec
		if c.followFrom == 0 {
			// Announcements of this round may have gone out before our gossip
			// mesh formed; the next round is the first we surely see whole.
			c.followFrom = cur.Step + 1
		}
	}
	if c.followFrom == 0 && !running && s.Progress.Step > 0 {
		c.followFrom = s.Progress.Step
	}
	for step, rec := range c.rounds {
		if step+maxBufferedSteps < s.Progress.Step {
			// Its payloads are no longer kept: a client this far behind
			// loads a newer model instead.
			delete(c.rounds, step)
			continue
		}
		if rec.final {
			continue
		}
		r := findRound(s, rec.step, rec.height)
		if r == nil || (running && r == cur) {
			continue // still running, or gone unseen: applyReady notices the gap
		}
		rec.final = true
		rec.witnessCount = r.WitnessCount
		for _, w := range r.Witnesses[:min(int(r.WitnessesLen), len(r.Witnesses))] {
			rec.participants = append(rec.participants, coordinator.ScheduleBloom(w.ParticipantBloom))
			rec.broadcasts = append(rec.broadcasts, coordinator.ScheduleBloom(w.BroadcastBloom))
		}
	}
}

// findRound is the stored round with the given step and height.
func findRound(s *coordinator.State, step, height uint32) *coordinator.Round {
	for i := range s.Epoch.Rounds {
		r := &s.Epoch.Rounds[i]
		if r.Step == step && r.Height == height && r.ClientsLen > 0 {
			return r
		}
	}
	return nil
}

// errMissed means this client cannot apply a round: it never saw the round,
// or never received a payload the witnesses attested.
var errMissed = errors.New("missed a round")

// applyReady applies, in step order, every final round after the model's
// step. A round this client cannot apply makes it drop the model and load a
// newer one from peers: a replica that skipped an update would train on
// weights nobody else has.
func (c *Client) applyReady(ctx context.Context, s *coordinator.State) error {
	for c.tr != nil {
		next := c.lastStep + 1
		rec := c.rounds[next]
		gone := s.Progress.Step > next && (rec == nil || (!rec.final && findRound(s, rec.step, rec.height) == nil))
		if gone {
			c.discardModel(next, fmt.Errorf("%w: step %d ended before this client saw it whole", errMissed, next))
			return nil
		}
		if rec == nil || !rec.final {
			return nil
		}
		err := c.apply(ctx, s, rec)
		if errors.Is(err, errMissed) {
			c.discardModel(next, err)
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// apply takes the consensus step for a round: the payloads of its members,
// in member index order, whose commitment is in the broadcast filters of at
// least a quorum of the round's elected witnesses.
func (c *Client) apply(ctx context.Context, s *coordinator.State, rec *roundRecord) error {
	quorum := int(schedule.Quorum(rec.witnessCount))
	var list [][]byte
	var received uint64
	for i, m := range rec.members {
		hash, have := c.delivered(rec, i)
		if hash == (p2p.Hash{}) {
			// Never announced to us: if a quorum saw it deliver, we are missing
			// an update the others apply.
			if schedule.Healthy(rec.participants, rec.witnessCount, m.Signer) {
				return fmt.Errorf("%w: step %d: the witnesses attest member %s's payload, which never reached this client", errMissed, rec.step, m.Signer)
			}
			continue
		}
		votes := 0
		item := Commitment(m.Signer, rec.step, hash)
		for _, b := range rec.broadcasts {
			if b.Contains(item) {
				votes++
			}
		}
		if votes < quorum {
			continue
		}
		if !have {
			if err := c.fetchNow(ctx, rec, i); err != nil {
				return fmt.Errorf("%w: step %d: attested payload of %s: %v", errMissed, rec.step, m.Signer, err)
			}
		}
		c.mu.Lock()
		p := c.payloads[hash]
		c.mu.Unlock()
		list = append(list, p)
		if rec.peers[i] != c.self {
			received += uint64(len(p))
		}
	}
	if len(list) > 0 {
		if err := c.tr.DeMoApply(DeMo(&c.model, rec.lr), list); err != nil {
			return fmt.Errorf("step %d: apply: %w", rec.step, err)
		}
	}
	digest, err := ReplicaDigest(c.tr, rec.step)
	if err != nil {
		return err
	}
	c.lastStep = rec.step
	delete(c.rounds, rec.step)
	c.prune(rec.step)
	hexDigest := hex.EncodeToString(digest[:])
	w := rec.trained
	if w == nil {
		// Followed, not trained: logged apart, so "step" lines stay the steps
		// this client trained.
		c.log.Info("applied", "step", rec.step, "applied", len(list), "of", len(rec.members), "digest", hexDigest)
		return nil
	}
	overhead := time.Duration(0)
	if !rec.allIn.IsZero() {
		overhead = time.Since(rec.allIn)
	}
	c.log.Info("step", "step", rec.step, "loss", w.loss, "applied", len(list), "of", len(rec.members), "digest", hexDigest,
		"train_seconds", w.trainTime.Seconds(), "round_overhead_seconds", overhead.Seconds())
	if err := c.cfg.Recorder.RecordStep(status.StepStat{Step: uint64(rec.step), Loss: status.Float(w.loss), Tokens: w.tokens,
		Duration: w.trainTime, BytesOut: w.sent, BytesIn: received, Digest: hexDigest}); err != nil {
		c.log.Warn("recording the step", "err", err)
	}
	last := s.Progress.Step > s.Config.TotalSteps && coordinator.Phase(s) != coordinator.RoundTrain
	if rec.step%uint32(c.cfg.EvalEvery) == 0 || last {
		return c.eval(ctx, rec.step)
	}
	return nil
}

// discardModel drops a replica that cannot follow the run; the client loads
// the model of step `from` or later from peers and catches up from there.
func (c *Client) discardModel(from uint32, why error) {
	c.log.Warn("this replica cannot apply the next round; loading a newer model from peers", "step", from, "err", why)
	c.stopSharing()
	c.mu.Lock()
	c.loading, c.tr = c.tr, nil
	c.mu.Unlock()
	c.loadFrom = max(c.loadFrom, from)
	for step := range c.rounds {
		if step < from {
			delete(c.rounds, step)
		}
	}
}
