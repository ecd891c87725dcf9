package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
)

// roundWork is a round this client trained, kept until it is applied.
type roundWork struct {
	step, height uint32
	members      []coordinator.Member // the round's clients, in index order
	peers        []peer.ID            // their p2p ids, same order
	lr           float32
	loss         float32
	tokens       uint64
	started      time.Time
	trainTime    time.Duration
	sent         uint64
	// allIn is when every member's payload was first seen here: the round
	// overhead is from then until the next round starts.
	allIn time.Time
}

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

// round trains this client's share of the current round once, then (as a
// witness) reports once everyone delivered or the round is nearly over.
func (c *Client) round(ctx context.Context, s *coordinator.State, idx uint16) error {
	r := coordinator.CurrentRound(s)
	c.mu.Lock()
	c.curStep = r.Step
	c.mu.Unlock()
	if c.tr == nil {
		if err := c.ensureModel(ctx, s); err != nil || c.tr == nil {
			return err // without the model this client cannot take part
		}
	}
	sr := coordinator.ScheduleRound(s, r)
	role, err := sr.Role(idx)
	if err != nil {
		return err
	}
	if role.Witness {
		_ = c.cfg.Recorder.SetRole(status.RoleWitness)
	} else {
		_ = c.cfg.Recorder.SetRole(status.RoleTrainer)
	}
	if c.trained == nil && r.Step > c.lastStep && coordinator.Phase(s) == coordinator.RoundTrain {
		if err := c.train(ctx, s, r, role.Batch); err != nil {
			return err
		}
	}
	c.healthChecks(ctx, s, r)
	if w := c.trained; w != nil && w.allIn.IsZero() && c.allDelivered(w) {
		w.allIn = time.Now()
	}
	if role.Witness && c.trained != nil && c.trained.step == r.Step && c.witnessed != r.Step {
		c.witness(ctx, s, r, idx)
	}
	return nil
}

func (c *Client) train(ctx context.Context, s *coordinator.State, r *coordinator.Round, batch schedule.Assignment) error {
	c.stopSharing()
	start := time.Now()
	n := c.data.Info().NumSequences
	idx := make([]uint64, batch.Len)
	for i := range idx {
		idx[i] = (batch.Start + uint64(i)) % n // the cursor wraps around the dataset
	}
	seqs, err := c.data.Sequences(ctx, idx)
	if err != nil {
		return fmt.Errorf("step %d: fetch the assigned sequences: %w", r.Step, err)
	}
	in, tg, err := provider.InputsAndTargets(seqs)
	if err != nil {
		return err
	}
	seqLen := len(seqs[0]) - 1
	loss, err := c.tr.Step(ctx, in, tg, seqLen)
	if err != nil {
		return fmt.Errorf("step %d: %w", r.Step, err)
	}
	if c.cfg.TrainingDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.TrainingDelay):
		}
	}
	lr := LearningRate(&c.model, r.Step, s.Epoch.StartStep, s.Epoch.ColdStart != 0)
	payload, err := c.tr.DeMoGenerate(DeMo(&c.model, lr))
	if err != nil {
		return fmt.Errorf("step %d: %w", r.Step, err)
	}
	trainTime := time.Since(start)
	if c.cfg.GradientsDir != "" {
		if err := writeAtomic(filepath.Join(c.cfg.GradientsDir, fmt.Sprintf("%s-step%d.demo", c.cfg.RunID, r.Step)), payload); err != nil {
			c.log.Warn("writing the payload failed", "err", err)
		}
	}
	ann, err := c.cfg.Node.Publish(ctx, uint64(r.Step), p2p.BatchID{Start: batch.Start, End: batch.Start + batch.Len - 1}, payload)
	if err != nil {
		return fmt.Errorf("step %d: publish the payload: %w", r.Step, err)
	}
	c.store(ann, payload)
	members := coordinator.Members(s)[:r.ClientsLen]
	w := &roundWork{step: r.Step, height: r.Height, members: members, lr: lr, loss: loss,
		tokens: uint64(len(in)), started: start, trainTime: trainTime, sent: uint64(len(payload))}
	for _, m := range members {
		id, _ := identity.PeerIDFromPublicKey(m.P2PIdentity[:])
		w.peers = append(w.peers, id)
	}
	c.trained = w
	c.log.Debug("trained", "step", r.Step, "loss", loss, "sequences", batch.Len, "payload_bytes", len(payload), "took", trainTime)
	return nil
}

func (c *Client) store(a p2p.Announcement, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	step := uint32(a.Step)
	if c.anns[step] == nil {
		c.anns[step] = map[peer.ID]p2p.Announcement{}
	}
	c.anns[step][a.Signer] = a
	if payload != nil {
		c.payloads[a.Hash] = payload
	}
}

// receive keeps the announcements of current steps and fetches and validates
// their payloads in the background.
func (c *Client) receive(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-c.cfg.Node.Messages():
			if !ok {
				return
			}
			if f := m.Finished; f != nil && f.Signer != c.self {
				c.recordShare(f)
				continue
			}
			a := m.Announcement
			if a == nil || a.Signer == c.self {
				continue
			}
			c.mu.Lock()
			cur := c.curStep
			_, dup := c.anns[uint32(a.Step)][a.Signer]
			c.mu.Unlock()
			// Only the current and next step are kept, so a peer cannot make us hoard.
			if dup || a.Step+1 < uint64(cur) || a.Step > uint64(cur)+1 {
				continue
			}
			c.store(*a, nil)
			go c.fetch(ctx, *a)
		}
	}
}

// fetch downloads a payload (hash-checked by the p2p layer) and keeps it if
// it is a valid payload for this model; a peer that sends an invalid one is banned.
func (c *Client) fetch(ctx context.Context, a p2p.Announcement) {
	data, err := c.cfg.Node.FetchBlob(ctx, a)
	if err != nil {
		c.log.Debug("payload fetch failed", "step", a.Step, "from", a.Signer, "err", err)
		return
	}
	c.mu.Lock()
	tr, model := c.tr, c.model
	c.mu.Unlock()
	if tr == nil {
		return
	}
	if err := tr.ValidatePayload(DeMo(&model, 0), data); err != nil {
		c.log.Warn("rejected an invalid payload", "step", a.Step, "from", a.Signer, "err", err)
		c.cfg.Node.Ban(a.Signer, "invalid DeMo payload")
		return
	}
	c.mu.Lock()
	c.payloads[a.Hash] = data
	c.mu.Unlock()
}

// delivered is the hash of the validated payload member i sent for the round, if any.
func (c *Client) delivered(w *roundWork, i int) (p2p.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.anns[w.step][w.peers[i]]
	if !ok {
		return p2p.Hash{}, false
	}
	_, have := c.payloads[a.Hash]
	return a.Hash, have
}

func (c *Client) allDelivered(w *roundWork) bool {
	for i := range w.members {
		if _, ok := c.delivered(w, i); !ok {
			return false
		}
	}
	return true
}

// witness reports the round: participants are the members whose valid
// payload we hold, broadcasts their commitments. It waits for everyone until
// two seconds before the round's train time is up.
func (c *Client) witness(ctx context.Context, s *coordinator.State, r *coordinator.Round, idx uint16) {
	w := c.trained
	all := c.allDelivered(w)
	deadline := time.Unix(s.RunStateStart+int64(s.Config.MaxRoundTrainTime)-2, 0)
	if !all && coordinator.Phase(s) == coordinator.RoundTrain && time.Now().Before(deadline) {
		return
	}
	bits, hashes := schedule.BloomParams(len(w.members))
	var salts [16]byte
	_, _ = rand.Read(salts[:])
	participants, err := schedule.NewBloom(bits, hashes, [8]byte(salts[:8]))
	if err != nil {
		c.log.Error("bloom", "err", err)
		return
	}
	broadcasts, _ := schedule.NewBloom(bits, hashes, [8]byte(salts[8:]))
	for i, m := range w.members {
		if h, ok := c.delivered(w, i); ok {
			participants.Add(m.Signer)
			broadcasts.Add(Commitment(m.Signer, w.step, h))
		}
	}
	tps := uint64(0)
	if w.trainTime > 0 {
		tps = uint64(float64(w.tokens) / w.trainTime.Seconds())
	}
	ix, err := c.run.Witness(c.me, coordinator.WitnessReport{Step: r.Step, Index: idx, Participants: participants, Broadcasts: broadcasts,
		Loss: w.loss, TokensPerSec: tps})
	if err != nil {
		c.log.Error("witness", "err", err)
		return
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, []solana.Instruction{ix}); err != nil {
		var te *chain.TxError
		if errors.As(err, &te) && (te.Name == "AlreadyWitnessed" || te.Name == "WrongRound") {
			c.witnessed = r.Step
		}
		c.log.Warn("witness failed", "step", r.Step, "err", err)
		return
	}
	c.witnessed = r.Step
	c.log.Debug("witnessed", "step", r.Step, "all_delivered", all)
}

// healthChecks accuses members of the previous round that fewer than a
// quorum of its witnesses saw deliver (from the third round of an epoch on,
// as the program requires), once each.
func (c *Client) healthChecks(ctx context.Context, s *coordinator.State, r *coordinator.Round) {
	if r.Height < 2 || coordinator.Phase(s) != coordinator.RoundTrain {
		return
	}
	prev := coordinator.PreviousRound(s)
	var blooms []*schedule.Bloom
	for _, w := range prev.Witnesses[:min(int(prev.WitnessesLen), len(prev.Witnesses))] {
		blooms = append(blooms, coordinator.ScheduleBloom(w.ParticipantBloom))
	}
	members := coordinator.Members(s)
	for _, m := range members[:min(int(prev.ClientsLen), len(members))] {
		key := [2]uint32{r.Step, uint32(m.Index)}
		if m.State != coordinator.MemberHealthy || m.Signer.Equals(c.me) || c.accused[key] ||
			schedule.Healthy(blooms, prev.WitnessCount, m.Signer) {
			continue
		}
		c.accused[key] = true
		ix, err := c.run.HealthCheck(c.me, r.Step, m.Index, m.Signer)
		if err != nil {
			continue
		}
		if _, err := c.chain().Send(ctx, c.cfg.Wallet, []solana.Instruction{ix}); err != nil {
			c.log.Debug("health check not accepted", "accused", m.Signer, "err", err)
			continue
		}
		c.log.Info("health check dropped a member that did not deliver", "step", r.Step, "member", m.Signer)
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

// apply takes the consensus step for round w: the payloads of the round's
// members, in member index order, whose commitment is in the broadcast
// filters of at least a quorum of the round's elected witnesses.
func (c *Client) apply(ctx context.Context, s *coordinator.State, w *roundWork) error {
	c.trained = nil
	r := findRound(s, w.step, w.height)
	if r == nil {
		return fmt.Errorf("%w: round %d left the coordinator's history before this client applied it", ErrDiverged, w.step)
	}
	reports := r.Witnesses[:min(int(r.WitnessesLen), len(r.Witnesses))]
	quorum := int(schedule.Quorum(r.WitnessCount))
	var participants []*schedule.Bloom
	for _, rep := range reports {
		participants = append(participants, coordinator.ScheduleBloom(rep.ParticipantBloom))
	}
	var list [][]byte
	var received uint64
	for i, m := range w.members {
		hash, have := c.delivered(w, i)
		if hash == (p2p.Hash{}) {
			// Never announced to us: if a quorum saw it deliver, we are missing
			// an update the others apply.
			if schedule.Healthy(participants, r.WitnessCount, m.Signer) {
				return fmt.Errorf("%w: step %d: the witnesses attest member %s's payload, which never reached this client", ErrDiverged, w.step, m.Signer)
			}
			continue
		}
		votes := 0
		item := Commitment(m.Signer, w.step, hash)
		for _, rep := range reports {
			if coordinator.ScheduleBloom(rep.BroadcastBloom).Contains(item) {
				votes++
			}
		}
		if votes < quorum {
			continue
		}
		if !have {
			if err := c.fetchNow(ctx, w, i); err != nil {
				return fmt.Errorf("%w: step %d: attested payload of %s: %v", ErrDiverged, w.step, m.Signer, err)
			}
		}
		c.mu.Lock()
		p := c.payloads[hash]
		c.mu.Unlock()
		list = append(list, p)
		if w.peers[i] != c.self {
			received += uint64(len(p))
		}
	}
	if len(list) > 0 {
		if err := c.tr.DeMoApply(DeMo(&c.model, w.lr), list); err != nil {
			return fmt.Errorf("step %d: apply: %w", w.step, err)
		}
	}
	digest, err := ReplicaDigest(c.tr, w.step)
	if err != nil {
		return err
	}
	c.lastStep = w.step
	hexDigest := hex.EncodeToString(digest[:])
	overhead := time.Duration(0)
	if !w.allIn.IsZero() {
		overhead = time.Since(w.allIn)
	}
	c.log.Info("step", "step", w.step, "loss", w.loss, "applied", len(list), "of", len(w.members), "digest", hexDigest,
		"train_seconds", w.trainTime.Seconds(), "round_overhead_seconds", overhead.Seconds())
	if err := c.cfg.Recorder.RecordStep(status.StepStat{Step: uint64(w.step), Loss: status.Float(w.loss), Tokens: w.tokens,
		Duration: w.trainTime, BytesOut: w.sent, BytesIn: received, Digest: hexDigest}); err != nil {
		c.log.Warn("recording the step", "err", err)
	}
	c.prune(w.step)
	last := s.Progress.Step > s.Config.TotalSteps && coordinator.Phase(s) != coordinator.RoundTrain
	if w.step%uint32(c.cfg.EvalEvery) == 0 || last {
		return c.eval(ctx, w.step)
	}
	return nil
}

// fetchNow gets member i's attested payload when the background fetch has not.
func (c *Client) fetchNow(ctx context.Context, w *roundWork, i int) error {
	c.mu.Lock()
	a, ok := c.anns[w.step][w.peers[i]]
	c.mu.Unlock()
	if !ok {
		return errors.New("no announcement")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	data, err := c.cfg.Node.FetchBlob(ctx, a)
	if err != nil {
		return err
	}
	if err := c.tr.ValidatePayload(DeMo(&c.model, 0), data); err != nil {
		return err
	}
	c.mu.Lock()
	c.payloads[a.Hash] = data
	c.mu.Unlock()
	return nil
}

// prune forgets announcements and payloads of steps up to step.
func (c *Client) prune(step uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := map[p2p.Hash]bool{}
	for st, m := range c.anns {
		if st <= step {
			delete(c.anns, st)
			continue
		}
		for _, a := range m {
			keep[a.Hash] = true
		}
	}
	for h := range c.payloads {
		if !keep[h] {
			delete(c.payloads, h)
		}
	}
	c.cfg.Node.PruneBefore(uint64(step) + 1)
}

// phaseDuration is how long the phase lasts at most before a tick advances it.
func phaseDuration(s *coordinator.State, phase coordinator.RunState) (int64, bool) {
	cfg := s.Config
	switch phase {
	case coordinator.WaitingForMembers:
		return int64(cfg.WaitingForMembersExtraTime), true
	case coordinator.Warmup:
		return int64(cfg.WarmupTime), true
	case coordinator.RoundTrain:
		return int64(cfg.MaxRoundTrainTime), true
	case coordinator.RoundWitness:
		return int64(cfg.RoundWitnessTime), true
	case coordinator.Cooldown:
		return int64(cfg.CooldownTime), true
	}
	return 0, false
}

// maybeTick advances the run when its timer is up: it simulates the tick
// first (no fee for a tick that cannot advance) and sends it with
// probability 2/n among n members (always for 2 or fewer), as the reference
// does, so not every client pays for the same transition.
func (c *Client) maybeTick(ctx context.Context, s *coordinator.State, phase coordinator.RunState) {
	d, ok := phaseDuration(s, phase)
	if !ok || time.Now().Unix() < s.RunStateStart+d || time.Since(c.lastTick) < 500*time.Millisecond {
		return
	}
	if phase == coordinator.WaitingForMembers && !c.everMember {
		if slot, ok := coordinator.Slot(s, c.me); !ok || slot.Pending == 0 {
			return
		}
	}
	c.lastTick = time.Now()
	n := max(len(coordinator.Members(s)), 1)
	if n > 2 && c.rng.IntN(n) >= 2 {
		return
	}
	ix, err := c.run.Tick(c.me)
	if err != nil {
		return
	}
	ixs := []solana.Instruction{ix}
	if _, err := c.chain().Simulate(ctx, c.cfg.Wallet, ixs); err != nil {
		return
	}
	if _, err := c.chain().Send(ctx, c.cfg.Wallet, ixs); err != nil {
		c.log.Debug("tick not accepted", "phase", phase, "err", err)
	}
}

// writeAtomic writes data to path through a synced temporary file and a rename.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
