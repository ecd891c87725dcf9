package coordinator

import (
	"encoding/hex"
	"fmt"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/schedule"
)

// MemberStateName names a member's state in an epoch (EpochClient.state).
func MemberStateName(s uint8) string {
	switch s {
	case MemberHealthy:
		return "healthy"
	case MemberDropped:
		return "dropped"
	case MemberLeft:
		return "left"
	case MemberFaulted:
		return "faulted"
	}
	return fmt.Sprintf("unknown(%d)", s)
}

// DisputeStateName names a dispute's state.
func DisputeStateName(v uint8) string {
	switch v {
	case DisputeFree:
		return "free"
	case DisputeOpen:
		return "open"
	case DisputeTransient:
		return "transient"
	case DisputeTrainerFault:
		return "trainer_fault"
	case DisputeAccuserFault:
		return "accuser_fault"
	case DisputeUnresolved:
		return "unresolved"
	case DisputeRefuted:
		return "refuted"
	}
	return fmt.Sprintf("unknown(%d)", v)
}

// EnumName is the run config's name for a tag of one of its enum keys
// ("architecture", "optimizer", "checkpoint", "data", "schedule",
// "data_type", "precision"), as update-config reads it.
func EnumName(key string, tag uint8) string {
	for name, t := range enums[key] {
		if t == tag {
			return name
		}
	}
	return fmt.Sprintf("unknown(%d)", tag)
}

// SlotSigner is the signer registered in client slot i.
func SlotSigner(s *State, i uint16) solana.PublicKey {
	return s.Clients[int(i)%MaxClients].Signer
}

// RoundSigners are the signers of round r's members in index order, when
// the chain still tells them: the epoch's list only loses members (when a
// round starts, keeping order), so its first r.clients_len entries are r's
// members as long as the newest round has as many.
func RoundSigners(s *State, r *Round) ([]solana.PublicKey, bool) {
	n := int(r.ClientsLen)
	if n == 0 || n > MaxClients || CurrentRound(s).ClientsLen != r.ClientsLen {
		return nil, false
	}
	out := make([]solana.PublicKey, n)
	for i := range out {
		out[i] = SlotSigner(s, s.Epoch.Clients[i].Slot)
	}
	return out, true
}

// StoredRoundsOf lists the rounds the state holds, the current one first
// (rounds emptied when the epoch started are left out).
func StoredRoundsOf(s *State) []*Round {
	var out []*Round
	head := int(s.Epoch.RoundsHead)
	for k := range StoredRounds {
		if r := &s.Epoch.Rounds[(head+StoredRounds-k)%StoredRounds]; r.ClientsLen > 0 {
			out = append(out, r)
		}
	}
	return out
}

// VerificationSummary is the run's verification as JSON-ready values
// (json-dump-run and the explorer show it): its settings, the commitments
// and verdicts of every stored round (the current one first) and every
// dispute in the table.
func VerificationSummary(s *State) map[string]any {
	c := s.Config
	rounds := []map[string]any{}
	for _, r := range StoredRoundsOf(s) {
		rounds = append(rounds, roundVerification(s, r, r == CurrentRound(s)))
	}
	disputes := []map[string]any{}
	for i := range s.Disputes {
		if d := &s.Disputes[i]; d.State != DisputeFree {
			disputes = append(disputes, disputeSummary(s, d))
		}
	}
	return map[string]any{
		"percent": c.VerificationPercent, "forgive_per_epoch": c.ForgivePerEpoch, "vesting_epochs": c.VestingEpochs,
		"disputes_opened": s.DisputesOpened, "rounds": rounds, "disputes": disputes,
	}
}

// roundVerification lists a stored round's commitments. A member's signer
// is given while the chain still tells it (RoundSigners).
func roundVerification(s *State, r *Round, current bool) map[string]any {
	percent := s.Config.VerificationPercent
	seeded := r.VerifySeed != [32]byte{}
	n := min(int(r.ClientsLen), len(r.Commits))
	signers, known := RoundSigners(s, r)
	members := make([]map[string]any, 0, n)
	for i := range n {
		cm := r.Commits[i]
		committed, probation := cm.Flags&CommitCommitted != 0, cm.Flags&CommitProbation != 0
		m := map[string]any{
			"index": i, "committed": committed, "fresh": cm.Flags&CommitFresh != 0, "probation": probation,
			"must_verify": committed && seeded && schedule.MustVerify(percent, schedule.Seed(r.VerifySeed), uint16(i), probation),
			"verifier":    nil, "verdict": VerdictName(cm.Verdict),
		}
		if known {
			m["signer"] = signers[i].String()
		}
		switch {
		case cm.Verdict != VerdictNone:
			m["verifier"] = cm.Verifier
		case seeded && current:
			if v, ok := VerifierOf(s, r, uint16(i)); ok {
				m["verifier"] = v
			}
		case seeded:
			if v, ok := schedule.Verifier(schedule.Seed(r.VerifySeed), uint16(i), r.ClientsLen); ok {
				m["verifier"] = v
			}
		}
		if committed {
			m["payload"], m["state_before"], m["state_after"] = hex.EncodeToString(cm.Payload[:]), hex.EncodeToString(cm.StateBefore[:]), hex.EncodeToString(cm.StateAfter[:])
		}
		members = append(members, m)
	}
	out := map[string]any{"step": r.Step, "height": r.Height, "current": current, "members": members, "verify_seed": nil}
	if seeded {
		out["verify_seed"] = hex.EncodeToString(r.VerifySeed[:])
	}
	return out
}

func disputeSummary(s *State, d *Dispute) map[string]any {
	committee := []map[string]any{}
	for j := range min(int(d.CommitteeLen), len(d.Committee)) {
		committee = append(committee, map[string]any{"signer": SlotSigner(s, d.Committee[j]).String(), "vote": VerdictName(d.Votes[j])})
	}
	h := func(b [32]byte) string { return hex.EncodeToString(b[:]) }
	return map[string]any{
		"id": d.Id, "state": DisputeStateName(d.State), "kind": VerdictName(d.Kind), "step": d.Step, "deadline_step": d.DeadlineStep,
		"epoch": d.Epoch, "trainer": SlotSigner(s, d.TrainerSlot).String(), "trainer_index": d.TrainerIndex,
		"accuser": SlotSigner(s, d.AccuserSlot).String(), "committee": committee,
		"batch_start": d.BatchStart, "batch_len": d.BatchLen, "epoch_start_step": d.EpochStartStep, "cold_start": d.ColdStart != 0, "fresh": d.Fresh != 0,
		"payload": h(d.Payload), "state_before": h(d.StateBefore), "state_after": h(d.StateAfter),
		"claimed_payload": h(d.ClaimedPayload), "claimed_after": h(d.ClaimedAfter),
	}
}

// EpochLastStep is the last step the current epoch trains, as a user counts
// steps: once the epoch's time is up, the program sets epoch.last_step to
// the step after the two drain rounds (programs/coordinator/README.md,
// "Drain"), which can lie past the run's end; this is the step before it,
// clamped to total_steps. 0 while the epoch's time is not up.
func EpochLastStep(s *State) uint32 {
	if s.Epoch.LastStep == 0 {
		return 0
	}
	return min(s.Epoch.LastStep-1, s.Config.TotalSteps)
}
