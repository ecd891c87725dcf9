package client

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/status"
)

// round decides a member's part in the current round: train its share once
// it holds the model the round trains on (of the step before; two before
// in an overlapped round, see consensus.go), health-check the previous
// round's members, and (as a witness) report once everyone delivered or
// the round is nearly over. step is the model's step once the planned
// applies ran.
func (e *engine) round(v *coordinator.View, in *inputs, now time.Time, current bool, step uint32, add func(action)) error {
	r := v.Round
	rec := e.rounds[r.Step]
	if rec == nil || rec.height != r.Height {
		return nil // this round began before this client saw it
	}
	role, err := v.Schedule().Role(uint16(v.Me))
	if err != nil {
		return err
	}
	add(roleAction{role.Witness})
	// An overlapped round that ends the epoch carries no update: nobody
	// would attest it.
	skip := rec.overlap && lastRound(v)
	if current && rec.trained == nil && r.Step == step+lag(v) && v.Phase == coordinator.RoundTrain && !skip {
		a := trainAction{rec: rec, batch: batchRange{role.Batch.Start, role.Batch.Len}, index: uint16(v.Me)}
		if v.State.Config.VerificationPercent > 0 {
			a.commit = true
			if v.Slot != nil {
				a.linked = v.Slot.StateAfter
			}
		}
		add(a)
	}
	e.verifications(v, in, current, step, add)
	e.healthChecks(v, add)
	if rec.allIn.IsZero() && in.allDelivered(rec) {
		rec.allIn = now
	}
	// A member still catching up witnesses too: what it saw delivered does
	// not depend on its own model.
	if role.Witness && e.witnessed != r.Step {
		if a, ok := e.witness(v, in, rec); ok {
			add(a)
		}
	}
	return nil
}

// witnessMargin is how long before the round's train time runs out (by the
// chain's clock) a witness reports without waiting for everyone: 2 s, or a
// twentieth of a longer train time, since the rounds that run long are
// those of loaded machines and networks, where a report takes longer to land
// (wan-harness scale: 256 members on 2 cores sent theirs 2 s before a 300 s
// deadline, and every one arrived after it).
func witnessMargin(trainTime time.Duration) time.Duration {
	return max(2*time.Second, trainTime/20)
}

// witness reports the round: participants are the members whose valid
// payload we hold, broadcasts their commitments. In an overlapped round
// the payloads are the previous round's (none in an epoch's first round),
// and the report waits for them and for every member of this round to
// announce its own (so the round lasts as long as the slower of the two).
func (e *engine) witness(v *coordinator.View, in *inputs, rec *roundRecord) (action, bool) {
	attested := rec
	all := in.allDelivered(rec) && committedAll(v, rec, in)
	if rec.overlap {
		attested = e.rounds[rec.step-1]
		if attested != nil && attested.height+1 != rec.height {
			attested = nil // the previous epoch's: ended unattested
		}
		all = (attested == nil || in.allDelivered(attested)) && (lastRound(v) || in.allAnnounced(rec))
	}
	trainTime := time.Duration(v.State.Config.MaxRoundTrainTime) * time.Second
	deadline := v.PhaseStart.Add(trainTime - witnessMargin(trainTime))
	if !all && v.Phase == coordinator.RoundTrain && v.ChainNow.Before(deadline) {
		return nil, false
	}
	report := coordinator.WitnessReport{Step: rec.step, Index: uint16(v.Me)}
	if w := rec.trained; w != nil {
		report.Loss = w.loss
		if w.trainTime > 0 {
			report.TokensPerSec = uint64(float64(w.tokens) / w.trainTime.Seconds())
		}
	}
	if attested == nil {
		// Nothing to attest: empty filters.
		attested = &roundRecord{step: rec.step}
	}
	var err error
	if report.Participants, report.Broadcasts, err = e.filters(attested, in); err != nil {
		return nil, false
	}
	return witnessAction{rec, report, all}, true
}

// filters are a witness's report of rec's payloads: the members whose valid
// payload it holds, and their commitments.
func (e *engine) filters(rec *roundRecord, in *inputs) (participants, broadcasts *schedule.Bloom, err error) {
	bits, hashes := schedule.BloomParams(len(rec.members))
	salts := e.bloomSalts(rec.step)
	if participants, err = schedule.NewBloom(bits, hashes, [8]byte(salts[:8])); err != nil {
		return nil, nil, err // BloomParams gives valid parameters
	}
	if broadcasts, err = schedule.NewBloom(bits, hashes, [8]byte(salts[8:16])); err != nil {
		return nil, nil, err
	}
	for i, m := range rec.members {
		if h, ok := in.delivered(rec, i); ok {
			participants.Add(m.Signer)
			broadcasts.Add(Commitment(m.Signer, rec.step, h))
		}
	}
	return participants, broadcasts, nil
}

// bloomSalts are a witness's filter salts for a step: keyed by its secret
// salt, so no peer can craft entries that collide in them.
func (e *engine) bloomSalts(step uint32) [32]byte {
	return sha256.Sum256(binary.LittleEndian.AppendUint32(append([]byte("psyche:bloom-salt:v1"), e.salt[:]...), step))
}

// healthChecks accuses members of the previous round that fewer than a
// quorum of its witnesses saw deliver (from the third round of an epoch on,
// as the program requires), once each.
// In an overlapped run the previous round's reports attest the round
// before it, so checks start a round later, as the program's do.
func (e *engine) healthChecks(v *coordinator.View, add func(action)) {
	r := v.Round
	if r.Height < coordinator.FirstHealthCheckHeight(v.State) || v.Phase != coordinator.RoundTrain {
		return
	}
	prev := v.Prev
	var blooms []*schedule.Bloom
	for _, w := range prev.Witnesses[:min(int(prev.WitnessesLen), len(prev.Witnesses))] {
		blooms = append(blooms, coordinator.ScheduleBloom(w.ParticipantBloom))
	}
	for _, m := range v.Members[:min(int(prev.ClientsLen), len(v.Members))] {
		key := [2]uint32{r.Step, uint32(m.Index)}
		if m.State != coordinator.MemberHealthy || m.Signer.Equals(e.me) || e.accused[key] ||
			schedule.Healthy(blooms, prev.WitnessCount, m.Signer) {
			continue
		}
		e.accused[key] = true
		add(healthCheckAction{r.Step, m.Index, m.Signer})
	}
}

func (c *Client) setRole(a roleAction) {
	if a.witness {
		_ = c.cfg.Recorder.SetRole(status.RoleWitness)
	} else {
		_ = c.cfg.Recorder.SetRole(status.RoleTrainer)
	}
}

// sendWitness sends the report; a report the program already holds or no
// longer takes counts as done.
func (c *Client) sendWitness(ctx context.Context, a witnessAction) {
	err := c.chain.Submit(ctx, op{kind: opWitness, report: a.report}, false)
	if err != nil {
		var te *chain.TxError
		if errors.As(err, &te) && (te.Name == "AlreadyWitnessed" || te.Name == "WrongRound") {
			c.e.witnessed = a.report.Step
		}
		if te != nil && te.Name == "NotInEpoch" && c.e.holdJoin {
			// Decided before this client's leave landed (a restart's
			// step aside): it is no longer a witness of the epoch.
			c.e.witnessed = a.report.Step
			c.log.Debug("witness: this client left the epoch", "step", a.report.Step)
			return
		}
		c.log.Warn("witness failed", "step", a.report.Step, "err", err)
		return
	}
	c.e.witnessed = a.report.Step
	c.log.Debug("witnessed", "step", a.report.Step, "all_delivered", a.all)
}

func (c *Client) healthCheck(ctx context.Context, a healthCheckAction) {
	if err := c.chain.Submit(ctx, op{kind: opHealthCheck, step: a.step, index: a.index, accused: a.accused}, false); err != nil {
		c.log.Debug("health check not accepted", "accused", a.accused, "err", err)
		return
	}
	c.log.Info("health check dropped a member that did not deliver", "step", a.step, "member", a.accused)
}
