package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/coordinator/coordsim"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

// TestChainWatchFollowsVerification drives one round of config/tiny.toml
// with 5 members on the real run state machine (coordsim) and reads the
// account after every instruction, as status-watch -rpc does: member 0's
// contribution is judged MISMATCH and a committee finds it at fault,
// members 1-3 are judged MATCH, member 4's verifier posts nothing. The
// step notes, the live lines and the summary must say so.
func TestChainWatchFollowsVerification(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sim, err := coordsim.Start(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	p, err := coordinator.LoadParams("../../../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	p.Config.InitMinClients = 5
	p.Metadata, p.Progress = nil, nil
	now := int64(1_700_000_000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sim.Create("demo", "v1", p, now))
	must(sim.SetFutureEpochRates(ptr(uint64(1000)), ptr(uint64(7)), now))

	names := map[solana.PublicKey]string{}
	keys := make([]solana.PublicKey, 5)
	for i := range keys {
		k := sha256.Sum256(fmt.Appendf(nil, "member %d", i))
		keys[i] = solana.PublicKeyFromBytes(k[:])
		names[keys[i]] = fmt.Sprintf("c%d", i)
		must(sim.Join(keys[i], sha256.Sum256(k[:]), now))
	}
	var out syncbuf.Buffer
	w := newWatch(names, &out)
	see := func() *coordinator.State {
		s := sim.State()
		w.record(s)
		return s
	}
	now += int64(p.Config.WaitingForMembersExtraTime)
	must(sim.Tick(keys[0], now))
	for _, k := range keys {
		must(sim.WarmupWitness(k, now))
	}
	st := see()
	if coordinator.Phase(st) != coordinator.RoundTrain {
		t.Fatalf("phase %s, want RoundTrain", coordinator.Phase(st))
	}
	mem := coordinator.Members(st)
	step := st.Progress.Step
	for i := range uint16(5) {
		must(sim.Commit(mem[i].Signer, coordinator.CommitArgs{Step: step, Index: i, Payload: [32]byte{byte(i)}, StateAfter: [32]byte{byte(i), 1}, Fresh: true}, now))
	}
	see()
	if note := w.note(mem[0].Signer, uint64(step)); note != "" {
		t.Errorf("note before the verify seed: %q", note)
	}
	r := coordinator.CurrentRound(st)
	for _, i := range schedule.Witnesses(r.ClientsLen, st.Config.WitnessNodes, schedule.Seed(r.Seed)) {
		must(sim.Witness(mem[i].Signer, fullReport(t, st, i), now))
	}
	must(sim.Tick(keys[0], now)) // draws the verify seed
	st = see()
	r = coordinator.CurrentRound(st)
	if r.VerifySeed == ([32]byte{}) {
		t.Fatal("no verify seed")
	}
	seed := schedule.Seed(r.VerifySeed)
	verifierOf := func(trainer uint16) uint16 {
		v, ok := schedule.Verifier(seed, trainer, r.ClientsLen)
		if !ok {
			t.Fatal("no verifier")
		}
		return v
	}
	verdict := func(trainer uint16, v uint8) {
		t.Helper()
		by := verifierOf(trainer)
		must(sim.Verify(mem[by].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: by, Index: trainer, Verdict: v,
			ClaimedPayload: [32]byte{0xaa}, ClaimedAfter: [32]byte{0xbb}}, now))
		see()
	}
	verdict(0, coordinator.VerdictMismatch)
	for i := range uint16(3) {
		verdict(i+1, coordinator.VerdictMatch)
	}
	if note := w.note(mem[4].Signer, uint64(step)); !strings.Contains(note, "to verify by c") {
		t.Errorf("member 4 while its round is open: %q", note)
	}
	st = see()
	d, ok := coordinator.FindDispute(st, 1)
	if !ok {
		t.Fatal("no dispute opened")
	}
	for k := range 2 {
		i := memberInSlot(st, d.Committee[k])
		must(sim.JudgeDispute(mem[i].Signer, 1, coordinator.VerdictMismatch, now))
		see()
	}
	now += int64(p.Config.RoundWitnessTime)
	must(sim.Tick(keys[1], now)) // member 4 unjudged: the window closes the round
	see()

	name := func(i uint16) string { return names[mem[i].Signer] }
	for i, want := range []string{
		fmt.Sprintf("  <<< MISMATCH by %s, probation, dispute 1: left out", name(verifierOf(0))),
		fmt.Sprintf("  verified MATCH by %s, probation", name(verifierOf(1))),
		fmt.Sprintf("  verified MATCH by %s, probation", name(verifierOf(2))),
		fmt.Sprintf("  verified MATCH by %s, probation", name(verifierOf(3))),
		fmt.Sprintf("  UNJUDGED (no verdict by %s, probation): left out", name(verifierOf(4))),
	} {
		if got := w.note(mem[i].Signer, uint64(step)); got != want {
			t.Errorf("note on member %d:\ngot  %q\nwant %q", i, got, want)
		}
	}
	if got := w.note(mem[0].Signer, uint64(step)+1); got != "" {
		t.Errorf("note on a step not seen: %q", got)
	}
	live := out.String()
	for _, want := range []string{
		fmt.Sprintf("[verify] dispute 1 opened: %s accuses c0 of step %d (MISMATCH); committee ", name(verifierOf(0)), step),
		"[verify] dispute 1 settled: TRAINER_FAULT (c0 at fault)\n",
		"[verify] c0 found at fault: slashed 7, 0 points burned\n",
	} {
		if strings.Count(live, want) != 1 {
			t.Errorf("live lines lack %q once:\n%s", want, live)
		}
	}
	var sum strings.Builder
	w.summary(&sum)
	for _, want := range []string{
		"verification   25% of contributions sampled",
		"contributions  5 committed in 1 rounds; 5 to verify (5 on probation): 3 MATCH, 1 MISMATCH, 0 NO_DATA, 1 unjudged\n",
		"disputes       1 opened: 1 TRAINER_FAULT, 0 ACCUSER_FAULT, 0 TRANSIENT, 0 UNRESOLVED, 0 REFUTED, 0 open\n",
		"faults         c0 (slashed 7, 0 points burned)\n",
		"points         0 burned, 7 slashed in all\n",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	// Rounds long past are kept only as counts, which sum up the same.
	w.countOld(step + 1 + keptRounds + 1) // past the next round too
	var later strings.Builder
	w.summary(&later)
	if len(w.rounds) != 0 || later.String() != sum.String() {
		t.Errorf("%d rounds kept; summary after counting them:\n%s", len(w.rounds), later.String())
	}
}

// memberInSlot is the epoch index of the member in slot.
func memberInSlot(s *coordinator.State, slot uint16) uint16 {
	for i := range int(s.Epoch.ClientsLen) {
		if s.Epoch.Clients[i].Slot == slot {
			return uint16(i)
		}
	}
	panic(fmt.Sprintf("slot %d is in no epoch entry", slot))
}

func ptr[T any](v T) *T { return &v }

// fullReport is a witness report of the member at index naming every
// member of the current round.
func fullReport(t *testing.T, s *coordinator.State, index uint16) coordinator.WitnessReport {
	t.Helper()
	r := coordinator.CurrentRound(s)
	bits, hashes := schedule.BloomParams(int(r.ClientsLen))
	part, err := schedule.NewBloom(bits, hashes, [8]byte{byte(index), 1})
	if err != nil {
		t.Fatal(err)
	}
	bcast, err := schedule.NewBloom(bits, hashes, [8]byte{byte(index), 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range coordinator.Members(s)[:r.ClientsLen] {
		part.Add(m.Signer)
		bcast.Add(m.Signer)
	}
	return coordinator.WitnessReport{Step: r.Step, Index: index, Participants: part, Broadcasts: bcast, BroadcastMerkle: [32]byte{1}}
}

// A run that cannot be read is an error before anything is followed.
func TestChainWatchNeedsTheRun(t *testing.T) {
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), []string{"-rpc", "http://127.0.0.1:1", "-run-id", "demo", "http://127.0.0.1:1"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `following run "demo" on chain`) {
		t.Fatalf("err = %v", err)
	}
}

// A run that does not verify sums up in one line.
func TestChainWatchVerificationOff(t *testing.T) {
	w := newWatch(nil, nil)
	w.record(&coordinator.State{})
	var sum strings.Builder
	w.summary(&sum)
	if sum.String() != "verification   off (verification_percent = 0)\n" {
		t.Errorf("summary %q", sum.String())
	}
}
