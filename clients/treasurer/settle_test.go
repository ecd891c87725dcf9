package treasurer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	tbindings "github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// Slots held forever (audit): a member dropped and slashed in epoch 1 never
// comes back and never claims, so its Coordinator slot keeps its points and
// stays held. With every one of the 256 slots held, a new join fails with
// ClientsFull; once a third party settles the absent member's points
// (participant_settle: it creates the member's record, pays nothing) the
// join succeeds in that slot, and the absent member's later claim pays
// exactly earned - slashed, what it would have paid without the settle.
func TestSettleFreesSlots(t *testing.T) {
	e := setup(t, "settle", treasurer.TokenProgramID, 0)
	a := e.authority
	run := e.run
	params := testRun(t)
	config := *params.Config
	config.InitMinClients = 4
	earning, slashing, resume, pause := uint64(1000), uint64(50), false, true
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &config, Model: params.Model}, EarningRate: &earning, SlashingRate: &slashing, Paused: &resume,
	})))
	funder := e.tokenAccount(a.PublicKey(), 10_000)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 5_000, e.decimals)})
	clients := e.newClients(4)

	// Epoch 0: the four share 1000 points. Epoch 1: the absent member stops
	// after the first round and a member's health check drops it (slashed).
	e.epoch(clients, coordinator.WaitingForMembers)
	for _, c := range clients {
		e.join(c)
	}
	e.advance(clients, func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.RoundTrain })
	e.playRound(clients)
	absent := clients[3]
	absent.stopped = true
	ua := absent.key.PublicKey()
	e.playRound(clients)
	s := e.state()
	r := coordinator.CurrentRound(s)
	e.mustSend(clients[0].key, e.ix(run.Coordinator.HealthCheck(clients[0].key.PublicKey(), r.Step, uint16(coordinator.MemberIndex(s, ua)), ua)))
	start := s.Progress.Epoch
	e.advance(clients, func(s *coordinator.State) bool {
		return coordinator.Phase(s) == coordinator.WaitingForMembers && s.Progress.Epoch > start
	})
	// Paused, so that the joins below stay pending and hold their slots.
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{Paused: &pause})))
	s = e.state()
	slot, ok := coordinator.Slot(s, ua)
	if !ok || slot.Earned == 0 || slot.Slashed != slashing || len(treasurer.SlotHolds(slot)) != 1 {
		t.Fatalf("the absent member's slot: %+v, held by %q", slot, treasurer.SlotHolds(slot))
	}
	earned, want := slot.Earned, slot.Earned-slashing
	if got := treasurer.Claimable(s, nil, ua); got != want {
		t.Fatalf("claimable %d, want earned %d - slashed %d", got, earned, slashing)
	}
	if frees := treasurer.SettleFrees(s); len(frees) != 4 {
		t.Fatalf("a settle would free %d slots, want the four members'", len(frees))
	}

	// Every other slot is taken by a pending joiner (one Everyone grant).
	g := a.PublicKey()
	grant, everyone, err := e.auth.Create(g, g, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		t.Fatal(err)
	}
	activate, err := e.auth.SetActive(g, everyone, true)
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(a, []solana.Instruction{grant, activate})
	held := 0
	for _, c := range s.Clients {
		if c.Occupied != 0 {
			held++
		}
	}
	e.fillSlots(coordinator.MaxClients-held, everyone)
	s = e.state()
	for i := range s.Clients {
		if c := &s.Clients[i]; c.Occupied == 0 || len(treasurer.SlotHolds(c)) == 0 {
			t.Fatalf("slot %d is free after filling: %+v", i, c)
		}
	}
	newcomer := &client{key: solana.NewWallet().PrivateKey, p2p: newP2PKey(t)}
	e.expectError("ClientsFull", a, e.joinIxs(newcomer, everyone), newcomer.key)

	// Settles that do nothing fail: a pending joiner holds no points, a
	// stranger has no slot; a record of another user is refused.
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	participant, err := e.p.ParticipantAddress(run.Address, ua)
	if err != nil {
		t.Fatal(err)
	}
	e.watched = append(e.watched, participant, run.Coordinator.Account)
	e.expectError("NothingToSettle", outsider, e.ix(run.Settle(outsider.PublicKey(), s.Clients[coordinator.MaxClients-1].Signer)))
	e.expectError("UserNotInRun", outsider, e.ix(run.Settle(outsider.PublicKey(), outsider.PublicKey())))
	c0 := clients[0].key.PublicKey()
	e.mustSend(clients[0].key, e.ix(run.CreateParticipant(c0, c0)))
	forged, err := run.Settle(outsider.PublicKey(), ua)
	if err != nil {
		t.Fatal(err)
	}
	forged.Accounts()[3].PublicKey, _ = e.p.ParticipantAddress(run.Address, c0)
	e.expectError("ParticipantMismatch", outsider, []solana.Instruction{forged})
	if forged, err = run.Settle(outsider.PublicKey(), ua); err != nil {
		t.Fatal(err)
	}
	forged.Accounts()[3].PublicKey = solana.NewWallet().PublicKey()
	e.expectError("ConstraintSeeds", outsider, []solana.Instruction{forged})

	// The settle: sent by a third party, it pays nothing, creates the
	// absent member's record with its points and keeps them reserved.
	acc := e.runAccount()
	reserved, tokens := treasurer.ReservedTokens(acc, s), e.balance(run.Collateral)
	sig := e.mustSend(outsider, e.ix(run.Settle(outsider.PublicKey(), ua)))
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	var settled *tbindings.PointsSettled
	for _, d := range chain.EventData(logs) {
		if ev, err := tbindings.ParseEvent_PointsSettled(d); err == nil {
			settled = ev
		}
	}
	if settled == nil || !settled.User.Equals(ua) || settled.SettledEarnedPoints != earned || settled.SettledSlashedPoints != slashing || settled.Claimable != want {
		t.Fatalf("PointsSettled %+v", settled)
	}
	p := e.participant(absent)
	if p.EarnedPoints != earned || p.SlashedPoints != slashing || p.ClaimedPoints != 0 {
		t.Fatalf("the absent member's record after the settle: %+v", p)
	}
	s, acc = e.state(), e.runAccount()
	if acc.UnclaimedSettledPoints != want || treasurer.ReservedTokens(acc, s) != reserved || e.balance(run.Collateral) != tokens {
		t.Fatalf("after the settle: run %+v, reserved %d (was %d), balance %d (was %d)", acc, treasurer.ReservedTokens(acc, s), reserved,
			e.balance(run.Collateral), tokens)
	}
	if got := e.balance(absent.tokens); got != 0 {
		t.Fatalf("a settle paid %d", got)
	}
	if got := treasurer.Claimable(s, p, ua); got != want {
		t.Fatalf("claimable after the settle %d, want %d", got, want)
	}
	slot, _ = coordinator.Slot(s, ua)
	if held := treasurer.SlotHolds(slot); len(held) != 0 {
		t.Fatalf("the settled slot is still held by %q", held)
	}
	e.expectError("NothingToSettle", outsider, e.ix(run.Settle(outsider.PublicKey(), ua)))

	// The newcomer joins, in the absent member's slot.
	time.Sleep(200 * time.Millisecond)
	e.mustSend(a, e.joinIxs(newcomer, everyone), newcomer.key)
	s = e.state()
	if _, ok := coordinator.Slot(s, ua); ok {
		t.Fatal("the absent member still has a slot")
	}
	if c, ok := coordinator.Slot(s, newcomer.key.PublicKey()); !ok || c.Pending == 0 || c.Earned != 0 || c.Slashed != 0 {
		t.Fatalf("the newcomer's slot %+v", c)
	}
	e.expectError("UserNotInRun", outsider, e.ix(run.Settle(outsider.PublicKey(), ua)))

	// The absent member claims later, without a slot: exactly earned -
	// slashed, once; the run's reserve for it is released.
	e.mustSend(absent.key, e.ix(run.Claim(ua, solana.PublicKey{})))
	if got := e.balance(absent.tokens); got != want {
		t.Fatalf("the absent member's claim paid %d, want earned %d - slashed %d", got, earned, slashing)
	}
	time.Sleep(200 * time.Millisecond)
	e.mustSend(absent.key, e.ix(run.Claim(ua, solana.PublicKey{})))
	if got := e.balance(absent.tokens); got != want {
		t.Fatalf("a second claim paid %d more", got-want)
	}
	if acc := e.runAccount(); acc.UnclaimedSettledPoints != 0 || acc.TotalClaimedPoints != want {
		t.Fatalf("after the claim: %+v", acc)
	}
	if p := e.participant(absent); p.ClaimedPoints != want || p.EarnedPoints != earned || p.SlashedPoints != slashing {
		t.Fatalf("the absent member's record after its claim: %+v", p)
	}
}

// fillSlots has n new wallets join (pending) under the authorization, the
// authority paying, a few transactions at a time.
func (e *env) fillSlots(n int, authorization solana.PublicKey) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	joiners := make(chan *client)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range joiners {
				ixs, err := e.run.Coordinator.JoinRunProven(c.key.PublicKey(), authorization, c.p2p)
				if err == nil {
					_, err = e.c.Send(ctx, e.authority, ixs, c.key)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for range n {
		joiners <- &client{key: solana.NewWallet().PrivateKey, p2p: newP2PKey(e.t)}
	}
	close(joiners)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("filling the slots: %v", err)
	}
}
