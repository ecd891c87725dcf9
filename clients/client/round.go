package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
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
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

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

// round trains this client's share of the current round once it holds the
// model of the step before, then (as a witness) reports once everyone
// delivered or the round is nearly over.
func (c *Client) round(ctx context.Context, s *coordinator.State, idx uint16) error {
	r := coordinator.CurrentRound(s)
	rec := c.rounds[r.Step]
	if rec == nil || rec.height != r.Height {
		return nil // this round began before this client saw it
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
	if c.tr != nil && rec.trained == nil && r.Step == c.lastStep+1 && coordinator.Phase(s) == coordinator.RoundTrain {
		if err := c.train(ctx, rec, role.Batch); err != nil {
			return err
		}
	}
	c.healthChecks(ctx, s, r)
	if rec.allIn.IsZero() && c.allDelivered(rec) {
		rec.allIn = time.Now()
	}
	// A member still catching up witnesses too: what it saw delivered does
	// not depend on its own model.
	if role.Witness && c.witnessed != r.Step {
		c.witness(ctx, s, r, rec, idx)
	}
	return nil
}

func (c *Client) train(ctx context.Context, rec *roundRecord, batch schedule.Assignment) error {
	start := time.Now()
	n := c.data.Info().NumSequences
	idx := make([]uint64, batch.Len)
	for i := range idx {
		idx[i] = (batch.Start + uint64(i)) % n // the cursor wraps around the dataset
	}
	seqs, err := c.data.Sequences(ctx, idx)
	if err != nil {
		return fmt.Errorf("step %d: fetch the assigned sequences: %w", rec.step, err)
	}
	in, tg, err := provider.InputsAndTargets(seqs)
	if err != nil {
		return err
	}
	seqLen := len(seqs[0]) - 1
	loss, err := c.tr.Step(ctx, in, tg, seqLen)
	if err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	if c.cfg.TrainingDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.TrainingDelay):
		}
	}
	payload, err := c.tr.DeMoGenerate(DeMo(&c.model, rec.lr))
	if err != nil {
		return fmt.Errorf("step %d: %w", rec.step, err)
	}
	trainTime := time.Since(start)
	if c.cfg.GradientsDir != "" {
		path := filepath.Join(c.cfg.GradientsDir, fmt.Sprintf("%s-step%d.demo", c.cfg.RunID, rec.step))
		if err := writeGradients(path, payload); err != nil {
			c.log.Warn("writing the payload failed", "err", err)
		}
	}
	ann, err := c.cfg.Node.Publish(ctx, uint64(rec.step), p2p.BatchID{Start: batch.Start, End: batch.Start + batch.Len - 1}, payload)
	if err != nil {
		return fmt.Errorf("step %d: publish the payload: %w", rec.step, err)
	}
	c.store(ann, payload)
	rec.trained = &trainStats{loss: loss, tokens: uint64(len(in)), trainTime: trainTime, sent: uint64(len(payload))}
	c.log.Debug("trained", "step", rec.step, "loss", loss, "sequences", batch.Len, "payload_bytes", len(payload), "took", trainTime)
	return nil
}

// writeGradients keeps a payload in --write-gradients-dir, made if missing.
func writeGradients(path string, payload []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, payload, 0o644)
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

// maxBufferedSteps bounds how many steps of announcements and payloads a
// client keeps ahead of its model, so a peer cannot make it hoard; a joiner
// further behind than this loads a newer model.
const maxBufferedSteps = 64

// receive keeps the announcements of the steps this client has yet to apply
// (up to the next step) and fetches and validates their payloads in the
// background, and keeps the model roots peers announce.
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
			cur, applied := c.curStep, c.appliedStep
			_, dup := c.anns[uint32(a.Step)][a.Signer]
			c.mu.Unlock()
			if dup || a.Step <= uint64(applied) || a.Step > uint64(cur)+1 || a.Step+maxBufferedSteps < uint64(cur) {
				continue
			}
			c.store(*a, nil)
			go c.fetch(ctx, *a)
		}
	}
}

// validator is the trainer that checks payloads: the model, or the model
// being loaded (a payload's shape does not depend on the weights).
func (c *Client) validator() (*trainer.Trainer, coordinator.Model) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tr != nil {
		return c.tr, c.model
	}
	return c.loading, c.model
}

// fetch downloads a payload (hash-checked by the p2p layer) and keeps it if
// it is a valid payload for this model; a peer that sends an invalid one is banned.
func (c *Client) fetch(ctx context.Context, a p2p.Announcement) {
	data, err := c.cfg.Node.FetchBlob(ctx, a)
	if err != nil {
		c.log.Debug("payload fetch failed", "step", a.Step, "from", a.Signer, "err", err)
		return
	}
	c.keepPayload(a, data)
}

// keepPayload validates a fetched payload and keeps it.
func (c *Client) keepPayload(a p2p.Announcement, data []byte) error {
	tr, model := c.validator()
	if tr == nil {
		return errors.New("no model to check the payload against yet")
	}
	if err := tr.ValidatePayload(DeMo(&model, 0), data); err != nil {
		c.log.Warn("rejected an invalid payload", "step", a.Step, "from", a.Signer, "err", err)
		c.cfg.Node.Ban(a.Signer, "invalid DeMo payload")
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.anns[uint32(a.Step)]; ok {
		c.payloads[a.Hash] = data
	}
	return nil
}

// delivered is the hash of the validated payload member i sent for the round, if any.
func (c *Client) delivered(rec *roundRecord, i int) (p2p.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.anns[rec.step][rec.peers[i]]
	if !ok {
		return p2p.Hash{}, false
	}
	_, have := c.payloads[a.Hash]
	return a.Hash, have
}

func (c *Client) allDelivered(rec *roundRecord) bool {
	for i := range rec.members {
		if _, ok := c.delivered(rec, i); !ok {
			return false
		}
	}
	return true
}

// witness reports the round: participants are the members whose valid
// payload we hold, broadcasts their commitments. It waits for everyone until
// two seconds before the round's train time is up.
func (c *Client) witness(ctx context.Context, s *coordinator.State, r *coordinator.Round, rec *roundRecord, idx uint16) {
	all := c.allDelivered(rec)
	deadline := time.Unix(s.RunStateStart+int64(s.Config.MaxRoundTrainTime)-2, 0)
	if !all && coordinator.Phase(s) == coordinator.RoundTrain && time.Now().Before(deadline) {
		return
	}
	bits, hashes := schedule.BloomParams(len(rec.members))
	var salts [16]byte
	_, _ = rand.Read(salts[:])
	participants, err := schedule.NewBloom(bits, hashes, [8]byte(salts[:8]))
	if err != nil {
		c.log.Error("bloom", "err", err)
		return
	}
	broadcasts, _ := schedule.NewBloom(bits, hashes, [8]byte(salts[8:]))
	for i, m := range rec.members {
		if h, ok := c.delivered(rec, i); ok {
			participants.Add(m.Signer)
			broadcasts.Add(Commitment(m.Signer, rec.step, h))
		}
	}
	report := coordinator.WitnessReport{Step: r.Step, Index: idx, Participants: participants, Broadcasts: broadcasts}
	if w := rec.trained; w != nil {
		report.Loss = w.loss
		if w.trainTime > 0 {
			report.TokensPerSec = uint64(float64(w.tokens) / w.trainTime.Seconds())
		}
	}
	ix, err := c.run.Witness(c.me, report)
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

// fetchNow gets member i's attested payload when the background fetch has not.
func (c *Client) fetchNow(ctx context.Context, rec *roundRecord, i int) error {
	c.mu.Lock()
	a, ok := c.anns[rec.step][rec.peers[i]]
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
	return c.keepPayload(a, data)
}

// servedSteps is how many applied steps' payloads this client keeps
// serving, for peers that apply them later (joiners catching up).
const servedSteps = 8

// prune forgets announcements and payloads of steps up to step, and of
// steps too far behind the run to be applied (a joiner loads a newer model).
func (c *Client) prune(step uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appliedStep = max(c.appliedStep, step)
	keep := map[p2p.Hash]bool{}
	for st, m := range c.anns {
		if st <= step || st+maxBufferedSteps < c.curStep {
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
	if step > servedSteps {
		c.cfg.Node.PruneBefore(uint64(step-servedSteps) + 1)
	}
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
