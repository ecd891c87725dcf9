package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Verification (programs/coordinator/README.md states the protocol). In a
// run with verification_percent > 0 every trainer commits on chain, in the
// round it trains, to the hash of its payload and of its replay state
// before and after the step (trainer.ReplayState: DeMo's momentum and
// counters), and serves the state before over p2p. When the round's
// training phase closes, the program draws a seed nobody knew at commit
// time; it picks the contributions to replay and, for each, a verifier
// among the other members. The verifier fetches the state and the batch,
// replays the step on the consensus weights it holds (the round is not
// applied yet) and posts MATCH, MISMATCH (with its own hashes) or NO_DATA
// before the round ends. A round's payload is applied only if it was
// committed, the committed hash is the payload's, and it was either not to
// be verified or judged MATCH: every client reads the same verdicts on
// chain, so replicas stay identical.

// commitRecord is one member's commitment in a round, as the chain holds it.
type commitRecord struct {
	committed, fresh, probation bool
	payload, before, after      [32]byte
	verdict                     uint8
}

// roundCommits reads the commitments of round r's first n members.
func roundCommits(r *coordinator.Round, n int) []commitRecord {
	out := make([]commitRecord, n)
	for i := range out {
		c := &r.Commits[i]
		out[i] = commitRecord{committed: c.Flags&coordinator.CommitCommitted != 0, fresh: c.Flags&coordinator.CommitFresh != 0,
			probation: c.Flags&coordinator.CommitProbation != 0, payload: c.Payload, before: c.StateBefore, after: c.StateAfter, verdict: c.Verdict}
	}
	return out
}

// mustVerify is the program's rule: a contribution is replayed when the
// round's seed samples it, or when its trainer was on probation when it
// committed (first epoch in the run, or recently at fault).
func mustVerify(c commitRecord, seed [32]byte, index int, percent uint8) bool {
	return schedule.MustVerify(percent, seed, uint16(index), c.probation)
}

// verification is what a round record keeps of the round's verification:
// the rate from the state in which it ran, the seed and the commitments
// once it is final.
type verification struct {
	percent uint8
	seed    [32]byte
	commits []commitRecord
}

// excludes says whether member i's contribution is left out whatever its
// payload: not committed, or to be verified and not judged MATCH.
func (vr *verification) excludes(i int) bool {
	if vr == nil {
		return false
	}
	if i >= len(vr.commits) {
		return true
	}
	c := vr.commits[i]
	return !c.committed || (c.verdict != coordinator.VerdictMatch && mustVerify(c, vr.seed, i, vr.percent))
}

// admits is the verification part of the consensus rule for member i whose
// payload hashes to hash: not excluded, and the payload it committed to.
func (vr *verification) admits(i int, hash [32]byte) bool {
	return vr == nil || (!vr.excludes(i) && vr.commits[i].payload == hash)
}

// stateHash is what a trainer commits for a replay state (also the p2p
// blob address it is served under).
func stateHash(rs []byte) [32]byte { return sha256.Sum256(rs) }

// replayKey names one contribution: (step, member index).
type replayKey [2]uint32

// replayResult is a finished replay, or why it could not judge.
type replayResult struct {
	verdict                uint8
	claimPayload, claimAft [32]byte
	// payload is the replay's payload (kept for disputes: the accused
	// serves its rerun's, and a committee member knows the size to fetch).
	payload []byte
	// fetched: a committee member tried to fetch the accused trainer's
	// rerun, and verdict is its final vote (RERUN or MISMATCH).
	fetched bool
	// skip: the replay could not run for a reason of ours (our data, our
	// model): post nothing.
	skip error
}

type (
	replayAction struct {
		rec    *roundRecord
		index  int
		commit commitRecord
		batch  batchRange
	}
	verdictAction struct {
		step          uint32
		verifier, idx uint16
		res           replayResult
	}
)

func (a replayAction) String() string {
	return fmt.Sprintf("replay member %d's step %d", a.index, a.rec.step)
}
func (a verdictAction) String() string {
	return fmt.Sprintf("post %s on member %d's step %d", coordinator.VerdictName(a.res.verdict), a.idx, a.step)
}

// verifications decides a member's part as a verifier of the current round,
// once its training phase closed: replay each contribution the round's seed
// assigns to it (holding the round's starting weights), and post each
// verdict once the replay finished.
func (e *engine) verifications(v *coordinator.View, in *inputs, current bool, step uint32, add func(action)) {
	r := v.Round
	rec := e.rounds[r.Step]
	percent := v.State.Config.VerificationPercent
	if rec == nil || rec.height != r.Height || v.Phase != coordinator.RoundWitness || percent == 0 || v.Me < 0 || v.SeedPending() {
		return
	}
	n := int(r.ClientsLen)
	commits := roundCommits(r, n)
	for i, c := range commits {
		if !c.committed || c.verdict != coordinator.VerdictNone || !mustVerify(c, r.VerifySeed, i, percent) {
			continue
		}
		if ver, ok := coordinator.VerifierOf(v.State, r, uint16(i)); !ok || int(ver) != v.Me {
			continue
		}
		key := replayKey{r.Step, uint32(i)}
		if res, ok := in.verdicts[key]; ok {
			if !e.posted[key] && res.skip == nil {
				add(verdictAction{r.Step, uint16(v.Me), uint16(i), res})
			}
			continue
		}
		// The replay needs the weights the round trained from.
		if e.replaying[key] || !current || step+1 != r.Step {
			continue
		}
		role, err := v.Schedule().Role(uint16(i))
		if err != nil {
			continue
		}
		e.replaying[key] = true
		add(replayAction{rec, i, c, batchRange{role.Batch.Start, role.Batch.Len}})
	}
}

// committedAll says whether every member whose payload is here also has
// its commitment to that payload on chain: a witness waits for both, so
// the training phase does not close before honest commitments land.
func committedAll(v *coordinator.View, rec *roundRecord, in *inputs) bool {
	if v.State.Config.VerificationPercent == 0 {
		return true
	}
	commits := roundCommits(v.Round, len(rec.members))
	for i := range rec.members {
		h, ok := in.delivered(rec, i)
		if ok && (!commits[i].committed || commits[i].payload != h) {
			return false
		}
	}
	return true
}

// commitAfterTraining sends the commitment of a trained step; a commitment
// the program refuses leaves the contribution out of the round (logged).
func (c *Client) commit(ctx context.Context, step uint32, index uint16, payload []byte, before, after []byte) {
	o := op{kind: opCommit, commit: coordinator.CommitArgs{Step: step, Index: index, Payload: sha256.Sum256(payload),
		StateBefore: stateHash(before), StateAfter: stateHash(after), Fresh: trainer.FreshReplayState(before)}}
	if err := c.chain.Submit(ctx, o, false); err != nil {
		c.log.Warn("commit failed: this step's payload will not be applied", "step", step, "err", err)
		return
	}
	c.vstats.Commitments.Committed++
}

// replayer is the trainer replays run on, built on first use like the
// model's (a replay must not disturb this client's own state).
func (c *Client) replayer() (*trainer.Trainer, error) {
	if c.replay != nil {
		return c.replay, nil
	}
	if c.replayClosed {
		return nil, errors.New("the client is closed")
	}
	cfg, err := TrainerConfig(&c.model, c.cfg.MicroBatch)
	if err != nil {
		return nil, err
	}
	cfg.Recompute = c.recompute // the model's choice (buildModel)
	tr, err := trainer.New(cfg, InitSeed(c.cfg.RunID))
	if err != nil {
		return nil, err
	}
	if c.cfg.Threads > 0 {
		if err := tr.SetThreads(c.cfg.Threads); err != nil {
			tr.Close()
			return nil, err
		}
	}
	// The model's backend, on one device (psyche-client verify's rule).
	if err := c.placeTrainer(tr, nil); err != nil {
		tr.Close()
		return nil, err
	}
	c.replay = tr
	return tr, nil
}

// startReplay replays a contribution in the background (the inbox's spawn:
// inline in simulations) on the weights the model holds now (the round's
// starting weights) and hands the verdict to the inbox.
func (c *Client) startReplay(ctx context.Context, a replayAction) error {
	params, err := c.tr.Params()
	if err != nil {
		return err
	}
	job := replayJob{step: a.rec.step, index: a.index, from: a.rec.peers[a.index], commit: a.commit, batch: a.batch, params: params, u: a.rec.update}
	accuse, withhold := c.cheating(CheatFalseAccusation), c.cheating(CheatFalseNoData)
	c.inbox.spawn(func() {
		res := c.runReplay(ctx, job)
		switch {
		case accuse:
			res = replayResult{verdict: coordinator.VerdictMismatch, claimPayload: sha256.Sum256([]byte("made up")), claimAft: sha256.Sum256([]byte("up"))}
		case withhold:
			res = replayResult{verdict: coordinator.VerdictNoData}
		}
		if res.skip != nil {
			c.log.Warn("could not replay a contribution", "step", job.step, "member", job.index, "err", res.skip)
		} else {
			c.log.Info("replayed a contribution", "step", job.step, "member", job.index, "verdict", coordinator.VerdictName(res.verdict))
		}
		c.inbox.setVerdict(replayKey{job.step, uint32(job.index)}, res)
	})
	return nil
}

// replayJob is everything a replay needs, copied out of the loop.
type replayJob struct {
	step   uint32
	index  int
	from   peer.ID
	commit commitRecord
	batch  batchRange
	params []float32
	u      Update
}

// replayTimeout bounds fetching a replay state.
const replayTimeout = 20 * time.Second

// runReplay fetches the committed state before (from the trainer, checked
// against its hash) and the batch, replays the step and compares bits.
func (c *Client) runReplay(ctx context.Context, j replayJob) replayResult {
	fetchCtx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	bound := uint64(56 + 12*len(j.params)) // header + at most three optimizer buffers
	rs, err := c.node.FetchFrom(fetchCtx, j.from, j.commit.before, bound)
	if err != nil {
		if ctx.Err() != nil {
			return replayResult{skip: ctx.Err()}
		}
		c.log.Info("the committed replay state could not be fetched", "step", j.step, "member", j.index, "err", err)
		return replayResult{verdict: coordinator.VerdictNoData}
	}
	if j.commit.fresh && !trainer.FreshReplayState(rs) {
		return replayResult{verdict: coordinator.VerdictMismatch}
	}
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	tr, err := c.replayer()
	if err != nil {
		return replayResult{skip: err}
	}
	if err := tr.LoadReplayState(rs, j.params); err != nil {
		if errors.Is(err, trainer.ErrState) {
			return replayResult{verdict: coordinator.VerdictMismatch} // it committed a state no trainer has
		}
		return replayResult{skip: err}
	}
	payload, _, _, err := j.u.Run(ctx, tr, c.fetch, schedule.Assignment{Start: j.batch.start, Len: j.batch.len})
	if err != nil {
		return replayResult{skip: err}
	}
	rs, err = tr.ReplayState()
	if err != nil {
		return replayResult{skip: err}
	}
	after, err := j.u.After(rs)
	if err != nil {
		return replayResult{skip: err}
	}
	res := replayResult{claimPayload: sha256.Sum256(payload), claimAft: stateHash(after), payload: payload}
	if res.claimPayload == j.commit.payload && res.claimAft == j.commit.after {
		res.verdict = coordinator.VerdictMatch
	} else {
		res.verdict = coordinator.VerdictMismatch
	}
	return res
}

// fetch reads sequences of the run's data (a FetchFunc).
func (c *Client) fetch(ctx context.Context, start, n uint64) (in, tg []int32, seqLen int, err error) {
	return BatchSequences(ctx, c.data, start, n)
}

// BatchSequences fetches the n sequences of a batch from start (global
// index modulo the dataset size: the cursor wraps around) as inputs and
// targets, as a trainer reads them.
func BatchSequences(ctx context.Context, data provider.Provider, start, n uint64) (in, tg []int32, seqLen int, err error) {
	size := data.Info().NumSequences
	idx := make([]uint64, n)
	for i := range idx {
		idx[i] = (start + uint64(i)) % size
	}
	seqs, err := data.Sequences(ctx, idx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fetch the sequences %d..%d: %w", start, start+n-1, err)
	}
	info := data.Info()
	in, tg, err = provider.InputsAndTargets(info, seqs)
	if err != nil {
		return nil, nil, 0, err
	}
	return in, tg, int(info.SeqLen), nil
}

// postVerdict sends a verdict; one the program refuses is not sent again.
func (c *Client) postVerdict(ctx context.Context, a verdictAction) {
	if !c.e.posted[replayKey{a.step, uint32(a.idx)}] {
		c.vstats.replayed(a.res.verdict)
	}
	c.e.posted[replayKey{a.step, uint32(a.idx)}] = true
	o := op{kind: opVerify, verify: coordinator.VerifyArgs{Step: a.step, VerifierIndex: a.verifier, Index: a.idx,
		Verdict: a.res.verdict, ClaimedPayload: a.res.claimPayload, ClaimedAfter: a.res.claimAft}}
	if err := c.chain.Submit(ctx, o, false); err != nil {
		var te *chain.TxError
		if !errors.As(err, &te) {
			c.e.posted[replayKey{a.step, uint32(a.idx)}] = false // not delivered: try again
		}
		c.log.Warn("verdict not accepted", "step", a.step, "member", a.idx, "err", err)
		return
	}
	c.vstats.Replays.Posted++
	c.log.Info("verdict posted", "step", a.step, "member", a.idx, "verdict", coordinator.VerdictName(a.res.verdict))
}

// verifyStats is what the status shows of verification (the loop's only).
type verifyStats struct {
	status.Verification
	// disputes involving this client (trainer, accuser, committee), by id:
	// the last state seen.
	disputes map[uint64]uint8
}

// judged counts the verdict on this client's contribution to rec, once rec
// is applied.
func (s *verifyStats) judged(rec *roundRecord, me solana.PublicKey) {
	if rec.trained == nil || rec.verify == nil {
		return
	}
	for i, m := range rec.members {
		if !m.Signer.Equals(me) || i >= len(rec.verify.commits) {
			continue
		}
		c := rec.verify.commits[i]
		switch {
		case !c.committed:
		case c.verdict == coordinator.VerdictMatch:
			s.Commitments.Match++
		case c.verdict == coordinator.VerdictMismatch:
			s.Commitments.Mismatch++
		case c.verdict == coordinator.VerdictNoData:
			s.Commitments.NoData++
		case mustVerify(c, rec.verify.seed, i, rec.verify.percent):
			s.Commitments.Unjudged++
		}
	}
}

// replayed counts a replay this client finished as a verifier.
func (s *verifyStats) replayed(verdict uint8) {
	s.Replays.Run++
	switch verdict {
	case coordinator.VerdictMatch:
		s.Replays.Match++
	case coordinator.VerdictMismatch:
		s.Replays.Mismatch++
	case coordinator.VerdictNoData:
		s.Replays.NoData++
	}
}

// observe reads the disputes involving this client and its slot from v.
func (s *verifyStats) observe(v *coordinator.View) {
	me := slotIndex(v.State, v)
	if me < 0 {
		return
	}
	if s.disputes == nil {
		s.disputes = map[uint64]uint8{}
	}
	for _, d := range v.State.Disputes {
		involved := int(d.TrainerSlot) == me || int(d.AccuserSlot) == me
		for j := range min(int(d.CommitteeLen), len(d.Committee)) {
			involved = involved || int(d.Committee[j]) == me
		}
		if d.State != coordinator.DisputeFree && involved {
			s.disputes[d.Id] = d.State
		}
	}
	s.Disputes = status.Disputes{}
	for _, st := range s.disputes {
		switch st {
		case coordinator.DisputeOpen:
			s.Disputes.Open++
		case coordinator.DisputeTransient:
			s.Disputes.Transient++
		case coordinator.DisputeTrainerFault:
			s.Disputes.TrainerFault++
		case coordinator.DisputeAccuserFault:
			s.Disputes.AccuserFault++
		case coordinator.DisputeUnresolved:
			s.Disputes.Unresolved++
		case coordinator.DisputeRefuted:
			s.Disputes.Refuted++
		}
	}
	s.Burned, s.Unvested, s.HasFault = v.Slot.Burned, v.Slot.Unvested[:], v.Slot.HasFault != 0
	s.Slashed, s.FaultEpoch = v.Slot.Slashed, v.Slot.LastFaultEpoch
}
