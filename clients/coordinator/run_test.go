package coordinator_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// client is a simulated training client: a wallet, its authorization and p2p
// identity, and whether it still delivers (a stopped client neither trains
// nor reports).
type client struct {
	key     solana.PrivateKey
	auth    solana.PublicKey
	p2pKey  ed25519.PrivateKey
	p2p     [32]byte // p2pKey's public key
	stopped bool
}

func (e *env) newClients(n int) []*client {
	out := make([]*client, n)
	for i := range out {
		c := &client{key: localnettest.NewFundedKeypair(e.t, e.v, solana.LAMPORTS_PER_SOL)}
		c.auth = e.authorize(c.key.PublicKey())
		_, c.p2pKey, _ = ed25519.GenerateKey(rand.Reader)
		c.p2p = [32]byte(c.p2pKey.Public().(ed25519.PublicKey))
		out[i] = c
	}
	return out
}

func (e *env) join(c *client) solana.Signature {
	e.t.Helper()
	return e.mustSend(c.key, e.joinIxs(c))
}

// joinIxs are c's join_run with its p2p key proof.
func (e *env) joinIxs(c *client) []solana.Instruction {
	e.t.Helper()
	ixs, err := e.run.JoinRunProven(c.key.PublicKey(), c.auth, c.p2pKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return ixs
}

// waitFor ticks (as ticker) until the run reaches phase, tolerating
// TickTooEarly; other failures end the test.
func (e *env) waitFor(phase coordinator.RunState, ticker solana.PrivateKey) *coordinator.State {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := e.state()
		if coordinator.Phase(s) == phase {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run still %v, want %v", coordinator.Phase(s), phase)
		}
		_, err := e.send(ticker, e.ix(e.run.Tick(ticker.PublicKey())))
		var te *chain.TxError
		if err != nil && (!errors.As(err, &te) || te.Name != "TickTooEarly") {
			e.t.Fatalf("tick in %v: %v", coordinator.Phase(s), err)
		}
		if err != nil {
			time.Sleep(150 * time.Millisecond)
		}
	}
}

// byKey maps signers to simulated clients.
func byKey(clients []*client) map[solana.PublicKey]*client {
	m := map[solana.PublicKey]*client{}
	for _, c := range clients {
		m[c.key.PublicKey()] = c
	}
	return m
}

func newBloom(t *testing.T, items int) *schedule.Bloom {
	bits, hashes := schedule.BloomParams(items)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	b, err := schedule.NewBloom(bits, hashes, salt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// report is the witness report of the client at index for the current round:
// every round member that still delivers is a participant, and its
// commitment (a stand-in hash) a broadcast.
func (e *env) report(s *coordinator.State, index uint16, clients map[solana.PublicKey]*client) coordinator.WitnessReport {
	r := coordinator.CurrentRound(s)
	members := coordinator.Members(s)[:r.ClientsLen]
	participants, broadcasts := newBloom(e.t, len(members)), newBloom(e.t, len(members))
	for _, m := range members {
		if c := clients[m.Signer]; c != nil && !c.stopped {
			participants.Add(m.Signer)
			broadcasts.Add(sha256.Sum256(append(m.Signer[:], byte(r.Step))))
		}
	}
	return coordinator.WitnessReport{Step: r.Step, Index: index, Participants: participants, Broadcasts: broadcasts,
		Loss: 2.5, TokensPerSec: 1000, BandwidthPerSec: 1 << 20, Efficiency: 0.9}
}

// playRound has every elected witness that still delivers report the current
// round (the run must be in RoundTrain), with roles computed by
// clients/schedule exactly as the program does, then ticks until the run
// leaves the round. It returns the phase after the round.
func (e *env) playRound(clients []*client) coordinator.RunState {
	e.t.Helper()
	s := e.state()
	r := coordinator.CurrentRound(s)
	round := coordinator.ScheduleRound(s, r)
	keys := byKey(clients)
	covered := map[uint64]bool{}
	for _, m := range coordinator.Members(s)[:r.ClientsLen] {
		role, err := round.Role(m.Index)
		if err != nil {
			e.t.Fatal(err)
		}
		for seq := role.Batch.Start; seq < role.Batch.Start+role.Batch.Len; seq++ {
			covered[seq] = true
		}
		c := keys[m.Signer]
		if !role.Witness || c == nil || c.stopped || m.State != coordinator.MemberHealthy {
			continue
		}
		e.mustSend(c.key, e.ix(e.run.Witness(c.key.PublicKey(), e.report(s, m.Index, keys))))
	}
	if len(covered) != int(r.BatchSize) {
		e.t.Errorf("step %d: assignments cover %d sequences, batch is %d", r.Step, len(covered), r.BatchSize)
	}
	for {
		s := e.state()
		p := coordinator.Phase(s)
		if p != coordinator.RoundWitness && (p != coordinator.RoundTrain || coordinator.CurrentRound(s).Step != r.Step) {
			return p
		}
		e.tick()
	}
}

// tick sends a tick, tolerating TickTooEarly (after which it waits a little).
func (e *env) tick() {
	e.t.Helper()
	_, err := e.send(e.authority, e.ix(e.run.Tick(e.authority.PublicKey())))
	var te *chain.TxError
	switch {
	case err == nil:
	case errors.As(err, &te) && te.Name == "TickTooEarly":
		time.Sleep(150 * time.Millisecond)
	default:
		e.t.Fatalf("tick: %v", err)
	}
}

// runUntil plays rounds (clients witnessing) and ticks until the run reaches phase.
func (e *env) runUntil(phase coordinator.RunState, clients []*client) *coordinator.State {
	e.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		s := e.state()
		switch coordinator.Phase(s) {
		case phase:
			return s
		case coordinator.RoundTrain:
			e.playRound(clients)
		default:
			e.tick()
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run still %v, want %v", coordinator.Phase(s), phase)
		}
	}
}

// A run of four wallets through two epochs, a health-check drop, a pause and
// resume, to Finished; every rejection path leaves the accounts unchanged.
func TestSimulatedRun(t *testing.T) {
	e := setup(t, "sim-run")
	a := e.authority
	all := e.newClients(5)
	clients, leaver := all[:4], all[4]
	keys := byKey(clients)
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)

	// Configure: only the main authority may, and only while halted.
	config, model := testRun(t)
	update := coordinator.UpdateParams{Config: &config, Model: &model}
	e.expectError("Unauthorized", outsider, e.ix(e.run.Update(outsider.PublicKey(), update)))
	e.expectError("RunUninitialized", clients[0].key, e.joinIxs(clients[0]))
	e.expectError("RunHalted", a, e.ix(e.run.Tick(a.PublicKey())))
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), update)))
	earning, slashing := uint64(1000), uint64(50)
	e.mustSend(a, e.ix(e.run.SetFutureEpochRates(a.PublicKey(), &earning, &slashing)))

	// Pause, so that all four joins count together when the run resumes.
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), true)))
	for _, c := range clients {
		sig := e.join(c)
		logs, err := e.c.TransactionLogs(e.ctx(), sig)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := bindings.ParseEvent_ClientJoined(chain.EventData(logs)[0])
		if err != nil || !ev.Signer.Equals(c.key.PublicKey()) {
			t.Fatalf("ClientJoined %+v, %v", ev, err)
		}
	}
	// A fifth joins and changes its mind: its pending join is withdrawn.
	e.join(leaver)
	sig := e.mustSend(leaver.key, e.ix(e.run.LeaveRun(leaver.key.PublicKey())))
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := bindings.ParseEvent_ClientLeft(chain.EventData(logs)[0]); err != nil || !ev.Signer.Equals(leaver.key.PublicKey()) {
		t.Fatalf("ClientLeft %+v, %v", ev, err)
	}
	e.expectError("NotAClient", leaver.key, e.ix(e.run.LeaveRun(leaver.key.PublicKey())))
	again := *clients[0]
	_, again.p2pKey, _ = ed25519.GenerateKey(rand.Reader)
	e.expectError("AlreadyJoined", clients[0].key, e.joinIxs(&again))
	// Unauthorized: someone else's authorization, or a signer other than the identity.
	e.expectError("JoinNotAuthorized", outsider, e.ix(e.run.JoinRun(outsider.PublicKey(), clients[0].auth, clients[0].p2p)))
	forged, err := e.run.JoinRun(clients[1].key.PublicKey(), clients[1].auth, clients[1].p2p)
	if err != nil {
		t.Fatal(err)
	}
	forged.Accounts()[0].PublicKey = outsider.PublicKey()
	e.expectError("SignerMismatch", outsider, []solana.Instruction{forged})

	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))
	e.expectError("RunNotHalted", a, e.ix(e.run.Update(a.PublicKey(), update)))
	e.expectError("RunNotHalted", a, e.ix(e.run.Free(a.PublicKey(), a.PublicKey())))

	// Epoch 0 forms with all four; warmup ends once as many as will be
	// elected witnesses reported ready.
	s := e.waitFor(coordinator.Warmup, a)
	if n := len(coordinator.Members(s)); n != 4 {
		t.Fatalf("epoch formed with %d members, want 4", n)
	}
	e.expectError("TickTooEarly", a, e.ix(e.run.Tick(a.PublicKey())))
	for _, c := range clients[:3] {
		e.mustSend(c.key, e.ix(e.run.WarmupWitness(c.key.PublicKey())))
	}
	s = e.state()
	if coordinator.Phase(s) != coordinator.RoundTrain {
		t.Fatalf("after 3 warmup witnesses: %v", coordinator.Phase(s))
	}

	// Rejections in the first round.
	r := coordinator.CurrentRound(s)
	round := coordinator.ScheduleRound(s, r)
	var witness, nonWitness *client
	var witnessIndex, nonWitnessIndex uint16
	for _, m := range coordinator.Members(s) {
		role, _ := round.Role(m.Index)
		if role.Witness && witness == nil {
			witness, witnessIndex = keys[m.Signer], m.Index
		} else if !role.Witness {
			nonWitness, nonWitnessIndex = keys[m.Signer], m.Index
		}
	}
	if witness == nil || nonWitness == nil {
		t.Fatalf("3 of 4 are elected; got witness %v non-witness %v", witness, nonWitness)
	}
	e.expectError("NotAWitness", nonWitness.key, e.ix(e.run.Witness(nonWitness.key.PublicKey(), e.report(s, nonWitnessIndex, keys))))
	stale := e.report(s, witnessIndex, keys)
	stale.Step--
	e.expectError("WrongRound", witness.key, e.ix(e.run.Witness(witness.key.PublicKey(), stale)))
	bad := e.report(s, witnessIndex, keys)
	bad.Participants.NumBits = 100
	e.expectError("InvalidBloom", witness.key, e.ix(e.run.Witness(witness.key.PublicKey(), bad)))
	e.expectError("ClientIndexMismatch", witness.key, e.ix(e.run.Witness(witness.key.PublicKey(), e.report(s, nonWitnessIndex, keys))))

	// Rounds 0 and 1 with everyone; the last client stops delivering after
	// round 0, and in round 2 a member's health check drops it.
	if p := e.playRound(clients); p != coordinator.RoundTrain {
		t.Fatalf("after round 0: %v", p)
	}
	stopped := clients[3]
	stopped.stopped = true
	if p := e.playRound(clients); p != coordinator.RoundTrain {
		t.Fatalf("after round 1: %v", p)
	}
	s = e.state()
	r = coordinator.CurrentRound(s)
	if r.Height != 2 {
		t.Fatalf("third round has height %d", r.Height)
	}
	idx := coordinator.MemberIndex(s, stopped.key.PublicKey())
	healthyIdx := coordinator.MemberIndex(s, clients[0].key.PublicKey())
	e.expectError("ClientHealthy", clients[1].key, e.ix(e.run.HealthCheck(clients[1].key.PublicKey(), r.Step, uint16(healthyIdx), clients[0].key.PublicKey())))
	sig = e.mustSend(clients[0].key, e.ix(e.run.HealthCheck(clients[0].key.PublicKey(), r.Step, uint16(idx), stopped.key.PublicKey())))
	logs, err = e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := bindings.ParseEvent_ClientDropped(chain.EventData(logs)[0]); err != nil || !ev.Client.Equals(stopped.key.PublicKey()) {
		t.Fatalf("ClientDropped %+v, %v", ev, err)
	}
	if slot, _ := coordinator.Slot(e.state(), stopped.key.PublicKey()); slot.Slashed != slashing {
		t.Errorf("dropped client slashed %d points, want %d", slot.Slashed, slashing)
	}

	// Play until the epoch's time is up and the drain ends in Cooldown; then
	// the next epoch waits for members, and the finishers share the reward.
	s = e.runUntil(coordinator.WaitingForMembers, clients)
	if s.Progress.Epoch != 1 {
		t.Fatalf("epoch %d after the first Cooldown", s.Progress.Epoch)
	}
	var earned uint64
	for _, c := range clients[:3] {
		slot, _ := coordinator.Slot(s, c.key.PublicKey())
		earned += slot.Earned
	}
	if slot, _ := coordinator.Slot(s, stopped.key.PublicKey()); earned != earning || slot.Earned != 0 {
		t.Errorf("finishers earned %d in all (want %d), the dropped client %d", earned, earning, slot.Earned)
	}

	// Epoch 1: the three rejoin; a pause requested mid-round ends the epoch.
	active := clients[:3]
	for _, c := range active {
		e.join(c)
	}
	e.waitFor(coordinator.Warmup, a)
	for _, c := range active {
		e.mustSend(c.key, e.ix(e.run.WarmupWitness(c.key.PublicKey())))
	}
	e.playRound(active)
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), true)))
	e.expectError("AlreadyPaused", a, e.ix(e.run.SetPaused(a.PublicKey(), true)))
	s = e.runUntil(coordinator.Paused, active)

	// While paused the authority may change the config: finish two steps on.
	config.TotalSteps = s.Progress.Step + 1
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))
	for _, c := range active {
		e.join(c)
	}
	s = e.waitFor(coordinator.Warmup, a)
	if s.Epoch.ColdStart != 1 {
		t.Error("the first epoch after a pause is not a cold start")
	}
	for _, c := range active {
		e.mustSend(c.key, e.ix(e.run.WarmupWitness(c.key.PublicKey())))
	}
	e.runUntil(coordinator.Finished, active)
	s = e.state()
	if s.Progress.Step != config.TotalSteps+1 {
		t.Errorf("finished at step %d, total_steps %d", s.Progress.Step, config.TotalSteps)
	}
	e.expectError("RunFinished", clients[0].key, e.joinIxs(clients[0]))
	e.mustSend(a, e.ix(e.run.Free(a.PublicKey(), a.PublicKey())))
}
