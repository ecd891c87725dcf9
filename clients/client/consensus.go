package client

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/gagliardetto/solana-go"
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
//
// Overlapped rounds (config overlap = 1): round r's members train while
// round r-1's payloads are exchanged, so round r's witness reports attest
// round r-1's payloads, and round r-1 is applied once those reports are
// final (when round r+1 starts): one round late. A member trains round r
// on the model of step r-2 (r-1 in an epoch's first round). A round that
// ends its epoch has no next round to attest it, so nothing of it is
// applied; members skip training in a round they know to be the last.

// Commitment is what a witness puts in its broadcast filter for a member's
// payload: it binds the payload hash to the member's signer and the step, so
// a filter entry cannot be reused for another member or round.
func Commitment(signer solana.PublicKey, step uint32, hash p2p.Hash) [32]byte {
	h := sha256.New()
	h.Write([]byte("psyche:broadcast:v1"))
	h.Write(signer[:])
	h.Write(binary.LittleEndian.AppendUint32(nil, step))
	h.Write(hash[:])
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// roundRecord is one round as this client saw it on chain.
type roundRecord struct {
	step, height uint32
	members      []coordinator.Member // the round's clients, in index order
	peers        []peer.ID            // their p2p ids, same order
	update       Update               // how its contributions are computed
	// overlap: the round's payloads are attested by the next round's
	// witnesses (config overlap).
	overlap bool
	// final is set once the witness reports below can no longer change;
	// unattested when no reports attest the round (an overlapped round that
	// ended its epoch): nothing of it is applied.
	final, unattested bool
	witnessCount      uint16
	participants      []*schedule.Bloom
	broadcasts        []*schedule.Bloom
	// verify is the round's verification (nil: the run does not verify);
	// its seed and commitments are read with the witness reports.
	verify *verification
	// trained is set when this client trained in the round.
	trained *trainStats
	// allIn is when every member's payload was first seen here: the round
	// overhead is from then until the next round starts.
	allIn time.Time
	// seen is when this client first saw the round running.
	seen time.Time
}

// trainStats is what this client did in a round it trained.
type trainStats struct {
	loss      float32
	tokens    uint64
	trainTime time.Duration
	sent      uint64
}

// maxBufferedSteps bounds how many steps of rounds, announcements and
// payloads a client keeps ahead of its model, so a peer cannot make it
// hoard; a joiner further behind than this loads a newer model.
const maxBufferedSteps = 64

// captureRounds records the current round and completes the records whose
// witness reports became final in v.
func (e *engine) captureRounds(v *coordinator.View) {
	cur := v.Round
	if v.Running() && cur.ClientsLen > 0 && e.rounds[cur.Step] == nil && cur.Step > e.lastStep {
		members := v.RoundMembers()
		rec := &roundRecord{step: cur.Step, height: cur.Height, members: members, overlap: v.State.Config.Overlap != 0,
			update: NewUpdate(&v.State.Model, v.State.Config.TotalSteps, cur.Step, InnerSteps(cur), int(cur.ClientsLen), v.State.Epoch.StartStep, v.State.Epoch.ColdStart != 0,
				v.State.Config.Overlap != 0)}
		for _, m := range members {
			id, _ := identity.PeerIDFromPublicKey(m.P2PIdentity[:])
			rec.peers = append(rec.peers, id)
		}
		// The config changes only while the run is halted, so the state in
		// which the round runs has the round's verification rate.
		if p := v.State.Config.VerificationPercent; p > 0 {
			rec.verify = &verification{percent: p}
		}
		e.rounds[cur.Step] = rec
		if e.followFrom == 0 {
			// Announcements of this round may have gone out before our gossip
			// mesh formed; the next round is the first we surely see whole.
			e.followFrom = cur.Step + 1
		}
	}
	if e.followFrom == 0 && !v.Running() && v.Step > 0 {
		e.followFrom = v.Step
	}
	for step, rec := range e.rounds {
		if step+maxBufferedSteps < v.Step {
			// Its payloads are no longer kept: a client this far behind
			// loads a newer model instead.
			delete(e.rounds, step)
			continue
		}
		if rec.final {
			continue
		}
		if rec.overlap {
			completeOverlapped(v, rec)
			continue
		}
		r := v.FindRound(rec.step, rec.height)
		if r == nil || (v.Running() && r == cur) {
			continue // still running, or gone unseen: planApply notices the gap
		}
		rec.final = true
		if rec.verify != nil {
			rec.verify.seed, rec.verify.commits = r.VerifySeed, roundCommits(r, len(rec.members))
		}
		rec.attestedBy(r)
	}
}

// attestedBy completes rec with the witness reports of round r.
func (rec *roundRecord) attestedBy(r *coordinator.Round) {
	rec.final = true
	rec.witnessCount = r.WitnessCount
	for _, w := range r.Witnesses[:min(int(r.WitnessesLen), len(r.Witnesses))] {
		rec.participants = append(rec.participants, coordinator.ScheduleBloom(w.ParticipantBloom))
		rec.broadcasts = append(rec.broadcasts, coordinator.ScheduleBloom(w.BroadcastBloom))
	}
}

// completeOverlapped completes an overlapped round: with the next round's
// reports once they are final, or unattested once v shows that the round
// ended its epoch (the rounds are over and the run's next step is the
// round's successor, or the epoch running began right after it).
func completeOverlapped(v *coordinator.View, rec *roundRecord) {
	if next := v.FindRound(rec.step+1, rec.height+1); next != nil {
		if !v.Running() || next != v.Round {
			rec.attestedBy(next)
		}
		return
	}
	ended := !v.Running() && v.Step == rec.step+1 && v.Phase != coordinator.Uninitialized
	began := v.Running() && v.State.Epoch.StartStep == rec.step+1
	if ended || began {
		rec.final, rec.unattested = true, true
	}
}

// lag is how many steps the model may trail the current round's step for
// a member to train it: 2 in an overlapped round after an epoch's first.
func lag(v *coordinator.View) uint32 {
	if v.Running() && v.State.Config.Overlap != 0 && v.Round.Height > 0 {
		return 2
	}
	return 1
}

// lastRound says whether the current round is known to end its epoch: the
// drain is over after it, it trains the run's last step, or a pause waits.
func lastRound(v *coordinator.View) bool {
	s, r := v.State, v.Round
	return (s.Epoch.LastStep != 0 && r.Step+1 >= s.Epoch.LastStep) || r.Step >= s.Config.TotalSteps || s.PendingPause != 0
}

// errMissed means this client cannot apply a round: it never saw the round,
// or never received a payload the witnesses attested.
var errMissed = errors.New("missed a round")

// planApply plans, in step order, the application of every final round
// after the model's step; it returns the model's step once they are
// applied. A round this client cannot apply makes it drop the model and
// load a newer one from peers (stop: decide again after that): a replica
// that skipped an update would train on weights nobody else has.
func (e *engine) planApply(v *coordinator.View, in *inputs, add func(action)) (step uint32, stop bool) {
	step = e.lastStep
	if e.model != modelReady {
		return step, false
	}
	for {
		next := step + 1
		rec := e.rounds[next]
		if v.Step > next && (rec == nil || (!rec.final && v.FindRound(rec.step, rec.height) == nil)) {
			add(discardAction{next, fmt.Errorf("%w: step %d ended before this client saw it whole", errMissed, next)})
			return step, true
		}
		if rec == nil || !rec.final {
			return step, false
		}
		accept, err := acceptedPayloads(rec, in)
		if err != nil {
			add(discardAction{next, err})
			return step, true
		}
		add(applyAction{rec, accept})
		step = next
	}
}

// acceptedPayloads is the consensus rule: the members of the round, in
// member index order, whose payload's commitment is in the broadcast
// filters of at least a quorum of the round's elected witnesses. A member
// the witnesses attest but whose payload was never announced here means
// this replica cannot follow.
func acceptedPayloads(rec *roundRecord, in *inputs) ([]int, error) {
	if rec.unattested {
		return nil, nil
	}
	quorum := int(schedule.Quorum(rec.witnessCount))
	var accept []int
	for i, m := range rec.members {
		hash, _ := in.delivered(rec, i)
		if rec.verify.excludes(i) {
			continue // whatever it sent: nobody applies it
		}
		if hash == (p2p.Hash{}) {
			if schedule.Healthy(rec.participants, rec.witnessCount, m.Signer) {
				return nil, fmt.Errorf("%w: step %d: the witnesses attest member %s's payload, which never reached this client", errMissed, rec.step, m.Signer)
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
		if votes >= quorum && rec.verify.admits(i, hash) {
			accept = append(accept, i)
		}
	}
	return accept, nil
}

// applied records that the model is now of rec's step.
func (e *engine) applied(rec *roundRecord) {
	e.lastStep = rec.step
	delete(e.rounds, rec.step)
}

// discarded records that the replica was dropped: the client loads the
// model of step from or later and catches up from there.
func (e *engine) discarded(from uint32) {
	e.model = modelLoading
	e.loadFrom = max(e.loadFrom, from)
	e.shared = nil
	for step := range e.rounds {
		if step < from {
			delete(e.rounds, step)
		}
	}
}

// apply takes the consensus step for a round: the accepted payloads are
// applied in member order. A payload attested but not yet here is
// fetched from any announcer; one no peer serves is errMissed.
func (c *Client) apply(ctx context.Context, v *coordinator.View, a applyAction) error {
	rec := a.rec
	var list [][]byte
	var received uint64
	for _, i := range a.accept {
		p, err := c.inbox.payload(ctx, rec.step, rec.peers[i])
		if err != nil {
			return fmt.Errorf("%w: step %d: attested payload of %s: %v", errMissed, rec.step, rec.members[i].Signer, err)
		}
		list = append(list, p)
		if rec.peers[i] != c.e.self {
			received += uint64(len(p))
		}
	}
	if snapshotWanted(rec) {
		if err := c.keepSnapshot(rec.step); err != nil {
			return err
		}
	}
	if len(list) > 0 {
		if err := applyPayloads(c.tr, &rec.update, list); err != nil {
			return fmt.Errorf("step %d: apply: %w", rec.step, err)
		}
	}
	digest, err := ReplicaDigest(c.tr, rec.step)
	if err != nil {
		return err
	}
	c.e.applied(rec)
	c.vstats.judged(rec, c.e.me)
	c.inbox.prune(rec.step)
	hexDigest := hex.EncodeToString(digest[:])
	if c.onApply != nil {
		c.onApply(rec.step, list, hexDigest)
	}
	w := rec.trained
	if w == nil {
		// Followed, not trained: logged apart, so "step" lines stay the steps
		// this client trained.
		c.log.Info("applied", "step", rec.step, "applied", len(list), "of", len(rec.members), "digest", hexDigest)
		return nil
	}
	overhead := time.Duration(0)
	if !rec.allIn.IsZero() {
		overhead = c.now().Sub(rec.allIn)
	}
	var round time.Duration
	if next := c.e.rounds[rec.step+1]; next != nil && next.height == rec.height+1 && !next.seen.IsZero() && !rec.seen.IsZero() {
		round = next.seen.Sub(rec.seen)
	}
	c.log.Info("step", "step", rec.step, "loss", w.loss, "applied", len(list), "of", len(rec.members), "digest", hexDigest,
		"train_seconds", w.trainTime.Seconds(), "round_seconds", round.Seconds(), "round_overhead_seconds", overhead.Seconds())
	if err := c.cfg.Recorder.RecordStep(status.StepStat{Step: uint64(rec.step), Loss: status.Float(w.loss), Tokens: w.tokens,
		Duration: w.trainTime, BytesOut: w.sent, BytesIn: received, Digest: hexDigest, RoundTime: max(round, 0)}); err != nil {
		c.log.Warn("recording the step", "err", err)
	}
	last := v.Step > v.State.Config.TotalSteps && v.Phase != coordinator.RoundTrain
	if rec.step%uint32(c.cfg.EvalEvery) == 0 || last {
		return c.eval(ctx, rec.step)
	}
	return nil
}

// discard drops a replica that cannot follow the run.
func (c *Client) discard(a discardAction) {
	c.log.Warn("this replica cannot apply the next round; loading a newer model from peers", "step", a.from, "err", a.why)
	c.stopSharing()
	c.e.discarded(a.from)
}
