package coordinator_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// slotHash is one SlotHashes entry.
type slotHash struct {
	Slot uint64
	Hash [32]byte
}

// slotHashes reads the SlotHashes sysvar: (slot, hash) entries, newest first.
func (e *env) slotHashes() []slotHash {
	e.t.Helper()
	data, _, err := e.c.AccountData(e.ctx(), solana.SysVarSlotHashesPubkey)
	if err != nil || len(data) < 8 {
		e.t.Fatalf("SlotHashes: %v (%d bytes)", err, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if uint64(len(data)) < 8+40*n {
		e.t.Fatalf("SlotHashes: %d entries in %d bytes", n, len(data))
	}
	out := make([]slotHash, n)
	for i := range out {
		b := data[8+40*i:]
		out[i].Slot = binary.LittleEndian.Uint64(b)
		copy(out[i].Hash[:], b[8:40])
	}
	return out
}

// TestGrindCannotChooseTheVerifier is audit finding F6 as an attack on
// localnet: the last elected witness to report decides when RoundTrain
// ends. It reads SlotHashes every slot and reports only when the seed it can
// compute makes its colluder the cheater's verifier. The verify seed now
// comes from the first slot after the one RoundTrain ended in, so in every
// round the seed the grinder chose by is not the one drawn, and the entry
// drawn from was not in SlotHashes when the grinder acted.
func TestGrindCannotChooseTheVerifier(t *testing.T) {
	e := setup(t, "grind-run")
	a := e.authority
	clients := e.newClients(8)
	keys := byKey(clients)
	config, model := testRun(t)
	config.VerificationPercent, config.WitnessNodes, config.InitMinClients, config.MinClients = 100, 0, 8, 2
	config.MaxRoundTrainTime, config.RoundWitnessTime, config.EpochTime = 30, 10, 600
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))
	for _, c := range clients {
		e.join(c)
	}
	e.waitFor(coordinator.Warmup, a)
	for _, c := range clients {
		if coordinator.Phase(e.state()) != coordinator.Warmup {
			break
		}
		e.mustSend(c.key, e.ix(e.run.WarmupWitness(c.key.PublicKey())))
	}
	chosen := 0
	const rounds = 8
	for round := range rounds {
		s := e.waitFor(coordinator.RoundTrain, a)
		r := coordinator.CurrentRound(s)
		members := coordinator.Members(s)[:r.ClientsLen]
		const cheater, colluder = 0, 1
		grinder := uint16(len(members) - 1)
		for _, m := range members {
			args := coordinator.CommitArgs{Step: r.Step, Index: m.Index, Payload: [32]byte{byte(m.Index), byte(round)},
				StateBefore: [32]byte{byte(m.Index), 2}, StateAfter: [32]byte{byte(m.Index), 3}, Fresh: true}
			e.mustSend(keys[m.Signer].key, e.ix(e.run.Commit(m.Signer, args)))
		}
		for _, m := range members[:grinder] {
			e.mustSend(keys[m.Signer].key, e.ix(e.run.Witness(m.Signer, e.report(s, m.Index, keys))))
		}
		// The grinder waits, slot by slot, for a seed it likes (the old rule:
		// the newest SlotHashes entry at its report), for at most 40 slots.
		var seen []slotHash
		var predicted schedule.Seed
		for try := 0; try < 40; try++ {
			seen = e.slotHashes()
			predicted = schedule.VerifySeed(schedule.Seed(r.Seed), seen[0].Slot, seen[0].Hash)
			if v, _ := schedule.Verifier(predicted, cheater, r.ClientsLen); v == colluder {
				break
			}
			time.Sleep(60 * time.Millisecond)
		}
		g := members[grinder].Signer
		e.mustSend(keys[g].key, e.ix(e.run.Witness(g, e.report(s, grinder, keys))))
		s = e.waitFor(coordinator.RoundWitness, a)
		ended := coordinator.CurrentRound(s).VerifySlot
		// A tick in a later slot draws the seed.
		for coordinator.CurrentRound(s).VerifySeed == ([32]byte{}) {
			e.tick()
			s = e.state()
		}
		r = coordinator.CurrentRound(s)
		var drawnFrom *slotHash
		for _, h := range e.slotHashes() {
			if h.Slot == ended+1 {
				drawnFrom = &h
			}
		}
		if drawnFrom == nil {
			t.Fatalf("round %d: no SlotHashes entry for slot %d", round, ended+1)
		}
		if got := schedule.VerifySeed(schedule.Seed(r.Seed), drawnFrom.Slot, drawnFrom.Hash); got != schedule.Seed(r.VerifySeed) {
			t.Fatalf("round %d: the verify seed is not drawn from the slot after RoundTrain's (%d)", round, ended)
		}
		for _, h := range seen {
			if h.Slot >= drawnFrom.Slot {
				t.Fatalf("round %d: the grinder saw slot %d, drawn from before it reported", round, h.Slot)
			}
		}
		if predicted == schedule.Seed(r.VerifySeed) {
			t.Fatalf("round %d: the grinder's seed was drawn", round)
		}
		if v, _ := schedule.Verifier(schedule.Seed(r.VerifySeed), cheater, r.ClientsLen); v == colluder {
			chosen++
		}
		// Every drawn verifier posts MATCH: the last verdict ends the round.
		for _, m := range members {
			v, _ := schedule.Verifier(schedule.Seed(r.VerifySeed), m.Index, r.ClientsLen)
			vk := keys[members[v].Signer].key
			args := coordinator.VerifyArgs{Step: r.Step, VerifierIndex: v, Index: m.Index, Verdict: coordinator.VerdictMatch}
			e.mustSend(vk, e.ix(e.run.Verify(vk.PublicKey(), args)))
		}
		if p := coordinator.Phase(e.state()); p == coordinator.RoundWitness {
			t.Fatalf("round %d: every contribution judged, still in RoundWitness", round)
		}
	}
	// Before the fix the audit saw 4 of 4. Chance alone: 1/7 a round.
	t.Logf("the colluder verified the cheater in %d of %d rounds", chosen, rounds)
}
