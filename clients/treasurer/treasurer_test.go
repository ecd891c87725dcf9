package treasurer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	tbindings "github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// Three clients train two epochs of a Treasurer run: their token balances
// after claiming equal the points they earned; double claims pay nothing;
// every rejection names its error and moves no tokens; the authority
// withdraws only what nobody is owed, after the run finished, and closes it.
func TestRewardedRun(t *testing.T) {
	e := setup(t, "rewards", treasurer.TokenProgramID, 6)
	a := e.authority
	run := e.run

	// The Coordinator run's main authority is the Run PDA, so the authority
	// can only drive it through the Treasurer.
	inst, err := e.p.Coordinator.FetchInstance(e.ctx(), e.c, run.Coordinator.Instance)
	if err != nil {
		t.Fatal(err)
	}
	if !inst.MainAuthority.Equals(run.Address) || !inst.JoinAuthority.Equals(a.PublicKey()) {
		t.Fatalf("coordinator instance authorities %s/%s, want the Run %s and %s", inst.MainAuthority, inst.JoinAuthority, run.Address, a.PublicKey())
	}
	opened, acc, err := e.p.OpenRunID(e.ctx(), e.c, "rewards")
	if err != nil || opened != run || !acc.MainAuthority.Equals(a.PublicKey()) || acc.Index != treasurer.DefaultIndex("rewards") {
		t.Fatalf("open run: %+v %+v %v", opened, acc, err)
	}
	// Anyone may create a Run at another run id's default index: opening by
	// run id refuses it, opening with its own run id at that index finds it.
	squat, account := uint64(treasurer.DefaultIndex("victim")), solana.NewWallet().PrivateKey
	ixs, _, err := e.p.CreateRun(e.ctx(), e.c, a.PublicKey(), account.PublicKey(), treasurer.CreateParams{
		RunID: "squatter", Index: &squat, MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1",
		Mint: e.mint, TokenProgram: treasurer.TokenProgramID,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(a, ixs, account)
	if _, _, err := e.p.OpenRunID(e.ctx(), e.c, "victim"); !errors.Is(err, treasurer.ErrOtherRun) {
		t.Fatalf("open a squatted run id: %v, want ErrOtherRun", err)
	}
	if _, acc, err := e.p.OpenRunAt(e.ctx(), e.c, squat, "squatter"); err != nil || acc.Index != squat {
		t.Fatalf("open the squatter's run at its index: %+v, %v", acc, err)
	}
	if col, err := treasurer.FetchTokenAccount(e.ctx(), e.c, run.Collateral); err != nil || !col.Owner.Equals(run.Address) || !col.Mint.Equals(e.mint) {
		t.Fatalf("run token account %+v, %v", col, err)
	}
	params := testRun(t)
	direct, err := run.Coordinator.Update(a.PublicKey(), coordinator.UpdateParams{Config: params.Config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.send(a, []solana.Instruction{direct}); err == nil {
		t.Fatal("the authority updated the Coordinator run directly")
	}

	// Fund the run (a plain transfer into its token account) and configure it.
	funder := e.tokenAccount(a.PublicKey(), 1_000_000)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 5_000, e.decimals)})
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	earning, slashing, resume := uint64(1000), uint64(50), false
	e.expectError("RunAuthorityMismatch", outsider, e.ix(run.Update(outsider.PublicKey(), treasurer.UpdateParams{Paused: &resume})))
	e.expectError("EmptyUpdate", a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{})))
	// Metadata, config and model together exceed a transaction: two updates,
	// the second also setting the rates and resuming after the update.
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Metadata: params.Metadata}})))
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: params.Config, Model: params.Model}, EarningRate: &earning, SlashingRate: &slashing, Paused: &resume,
	})))
	if s := e.state(); coordinator.Phase(s) != coordinator.WaitingForMembers || s.FutureRates.EarningRateTotalShared != earning {
		t.Fatalf("after run_update: %v, rates %+v", coordinator.Phase(s), s.FutureRates)
	}

	clients := e.newClients(3)
	for _, c := range clients {
		e.mustSend(c.key, e.ix(run.CreateParticipant(c.key.PublicKey(), c.key.PublicKey())))
	}
	e.expectError("ParticipantAlreadyExists", clients[0].key, e.ix(run.CreateParticipant(clients[0].key.PublicKey(), clients[0].key.PublicKey())))
	// The authority grants joins here, so a deposit could not gate them.
	five := uint64(5)
	e.expectError("JoinNotThroughTreasurer", a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{JoinDeposit: &five})))
	e.expectError("JoinNotThroughTreasurer", clients[0].key, e.ix(run.Deposit(clients[0].key.PublicKey(), clients[0].tokens, 0)))

	// Epoch 0: the three share 1000 points.
	s := e.epoch(clients, coordinator.WaitingForMembers)
	earned := map[solana.PublicKey]uint64{}
	var total uint64
	for _, c := range clients {
		slot, ok := coordinator.Slot(s, c.key.PublicKey())
		if !ok {
			t.Fatal("a client has no slot")
		}
		earned[c.key.PublicKey()] = slot.Earned
		total += slot.Earned
	}
	if total != earning {
		t.Fatalf("epoch 0 paid %d points, want %d", total, earning)
	}

	// Client 0 claims mid-run; its slot's points move into its record.
	c0 := clients[0]
	if got := treasurer.Claimable(s, nil, c0.key.PublicKey()); got != earned[c0.key.PublicKey()] {
		t.Fatalf("claimable %d, earned %d", got, earned[c0.key.PublicKey()])
	}
	sig := e.mustSend(c0.key, e.ix(run.Claim(c0.key.PublicKey(), solana.PublicKey{})))
	if got := e.balance(c0.tokens); got != earned[c0.key.PublicKey()] {
		t.Fatalf("client 0 holds %d after claiming %d points", got, earned[c0.key.PublicKey()])
	}
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := tbindings.ParseEvent_RewardsClaimed(chain.EventData(logs)[0]); err != nil || ev.Amount != earned[c0.key.PublicKey()] || !ev.User.Equals(c0.key.PublicKey()) {
		t.Fatalf("RewardsClaimed %+v, %v", ev, err)
	}
	if slot, _ := coordinator.Slot(e.state(), c0.key.PublicKey()); slot.Earned != 0 {
		t.Errorf("the coordinator still holds %d points of a settled client", slot.Earned)
	}
	p, err := run.FetchParticipant(e.ctx(), e.c, c0.key.PublicKey())
	if err != nil || p.EarnedPoints != earned[c0.key.PublicKey()] || p.ClaimedPoints != p.EarnedPoints {
		t.Fatalf("participant %+v, %v", p, err)
	}
	// A second claim succeeds and pays nothing (a slot later, so that it is
	// a new transaction, not the first one again).
	before := e.snapshot()
	time.Sleep(200 * time.Millisecond)
	e.mustSend(c0.key, e.ix(run.Claim(c0.key.PublicKey(), solana.PublicKey{})))
	if e.snapshot() != before {
		t.Error("a second claim moved tokens or changed the run")
	}

	// Rejections: none moves a token.
	stranger := e.tokenAccount(outsider.PublicKey(), 0)
	e.expectError("AccountNotInitialized", outsider, e.ix(run.Claim(outsider.PublicKey(), stranger)))
	c1, c2 := clients[1], clients[2]
	forClient1, err := run.Claim(c1.key.PublicKey(), stranger)
	if err != nil {
		t.Fatal(err)
	}
	forClient1.Accounts()[0].PublicKey = outsider.PublicKey()
	e.expectError("ParticipantMismatch", outsider, []solana.Instruction{forClient1})
	e.expectError("TokenAccountOwnerMismatch", c1.key, e.ix(run.Claim(c1.key.PublicKey(), c2.tokens)))
	// A Coordinator run the authority owns directly, passed as this run's.
	fakeAccount := solana.NewWallet().PrivateKey
	fakeIxs, fake, err := e.p.Coordinator.CreateRun(e.ctx(), e.c, a.PublicKey(), fakeAccount.PublicKey(), coordinator.CreateParams{
		RunID: "forged", MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(a, fakeIxs, fakeAccount)
	forged, err := run.Claim(c1.key.PublicKey(), solana.PublicKey{})
	if err != nil {
		t.Fatal(err)
	}
	forged.Accounts()[6].PublicKey, forged.Accounts()[7].PublicKey = fake.Instance, fake.Account
	e.expectError("CoordinatorMismatch", c1.key, []solana.Instruction{forged})
	otherMint, err := run.Claim(c1.key.PublicKey(), solana.PublicKey{})
	if err != nil {
		t.Fatal(err)
	}
	otherMint.Accounts()[5].PublicKey = funder
	e.expectError("MintMismatch", c1.key, []solana.Instruction{otherMint})
	e.expectError("RunNotFinished", a, e.ix(run.Withdraw(a.PublicKey(), funder, 1)))
	e.expectError("RunAuthorityMismatch", outsider, e.ix(run.Withdraw(outsider.PublicKey(), stranger, 1)))

	// Pause (immediate while waiting for members), set the run to finish two
	// steps into the next epoch, and resume in one run_update.
	pause := true
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{Paused: &pause})))
	config := *params.Config
	config.TotalSteps = e.state().Progress.Step + 1
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &config}, Paused: &resume,
	})))

	// Epoch 1 to Finished: another 1000 points.
	// Each client's points are those settled into its record plus those the
	// coordinator still holds.
	s = e.epoch(clients, coordinator.Finished)
	total = 0
	for _, c := range clients {
		k := c.key.PublicKey()
		slot, _ := coordinator.Slot(s, k)
		p, err := run.FetchParticipant(e.ctx(), e.c, k)
		if err != nil {
			t.Fatal(err)
		}
		earned[k] = p.EarnedPoints + slot.Earned
		total += earned[k]
	}
	if total != 2*earning {
		t.Fatalf("two epochs paid %d points, want %d", total, 2*earning)
	}

	// While client 2 has not claimed, its points stay reserved.
	for _, c := range clients[:2] {
		e.mustSend(c.key, e.ix(run.Claim(c.key.PublicKey(), solana.PublicKey{})))
	}
	reserved := treasurer.Reserved(e.state())
	if reserved != earned[c2.key.PublicKey()] {
		t.Fatalf("reserved %d, client 2 is owed %d", reserved, earned[c2.key.PublicKey()])
	}
	free := e.balance(run.Collateral) - reserved
	e.expectError("WithdrawExceedsUnallocated", a, e.ix(run.Withdraw(a.PublicKey(), funder, free+1)))
	e.expectError("UnclaimedPointsRemain", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.mustSend(a, e.ix(run.Withdraw(a.PublicKey(), funder, free)))
	e.mustSend(c2.key, e.ix(run.Claim(c2.key.PublicKey(), solana.PublicKey{})))

	for _, c := range clients {
		k := c.key.PublicKey()
		p, err := run.FetchParticipant(e.ctx(), e.c, k)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.balance(c.tokens); got != earned[k] || p.EarnedPoints != earned[k] || p.ClaimedPoints != earned[k] {
			t.Errorf("client %s holds %d tokens, earned %d points (record: earned %d, claimed %d)", k, got, earned[k], p.EarnedPoints, p.ClaimedPoints)
		}
	}
	if got := e.balance(run.Collateral); got != 0 {
		t.Errorf("the run holds %d tokens after every claim and the withdrawal", got)
	}

	// Close: the Coordinator run's rent returns; a later top-up can be
	// withdrawn whole; claims end.
	e.mustSend(a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	if _, _, err := e.c.AccountData(e.ctx(), run.Coordinator.Account); err == nil {
		t.Error("the coordinator account survived run_close")
	}
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 7, e.decimals)})
	e.expectError("RunClosed", c0.key, e.ix(run.Claim(c0.key.PublicKey(), solana.PublicKey{})))
	e.expectError("RunClosed", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.mustSend(a, e.ix(run.Withdraw(a.PublicKey(), funder, 7)))
	if _, acc, err := e.p.Open(e.ctx(), e.c, run.Index); err != nil || !acc.Closed || acc.TotalClaimedPoints != 2*earning {
		t.Fatalf("closed run %+v, %v", acc, err)
	}
}

// Token-2022 with a 0-decimal mint: the run's token account, top-up,
// withdrawal and close work the same.
func TestToken2022Run(t *testing.T) {
	e := setup(t, "t22", treasurer.Token2022ProgramID, 0)
	a := e.authority
	run := e.run
	funder := e.tokenAccount(a.PublicKey(), 100)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 40, 0)})
	e.expectError("RunNotFinished", a, e.ix(run.Withdraw(a.PublicKey(), funder, 1)))
	e.expectError("RunAlreadyExists", a, func() []solana.Instruction {
		account := solana.NewWallet().PrivateKey
		ixs, _, err := e.p.CreateRun(e.ctx(), e.c, a.PublicKey(), account.PublicKey(), treasurer.CreateParams{
			RunID: "t22", MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1", Mint: e.mint, TokenProgram: treasurer.Token2022ProgramID,
		})
		if err != nil {
			t.Fatal(err)
		}
		return ixs[1:]
	}())
	// Never started, so it is halted and nobody earned anything.
	e.mustSend(a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.mustSend(a, e.ix(run.Withdraw(a.PublicKey(), funder, 40)))
	if got := e.balance(funder); got != 100 {
		t.Errorf("funder holds %d after withdrawing everything, want 100", got)
	}
}

// A client dropped by a health check is slashed: its claim pays its earned
// points minus the slash, and the reserve for withdrawals counts the same.
func TestSlashedClaims(t *testing.T) {
	e := setup(t, "slashed", treasurer.TokenProgramID, 0)
	a := e.authority
	run := e.run
	params := testRun(t)
	// Epochs form with all four (joins are not simultaneous), and go on
	// with three once one is dropped.
	config := *params.Config
	config.InitMinClients = 4
	earning, slashing, resume := uint64(1000), uint64(50), false
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &config, Model: params.Model}, EarningRate: &earning, SlashingRate: &slashing, Paused: &resume,
	})))
	// Underfunded at first: a claim the run cannot cover fails whole.
	funder := e.tokenAccount(a.PublicKey(), 10_000)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 100, e.decimals)})
	clients := e.newClients(4)
	for _, c := range clients {
		e.mustSend(c.key, e.ix(run.CreateParticipant(c.key.PublicKey(), c.key.PublicKey())))
	}

	// Epoch 0: the four share 1000 points.
	e.epoch(clients, coordinator.WaitingForMembers)

	// Epoch 1: the last client stops after the first round, and a member's
	// health check in the third round drops it.
	for _, c := range clients {
		e.join(c)
	}
	e.advance(clients, func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.RoundTrain })
	e.playRound(clients)
	dropped := clients[3]
	dropped.stopped = true
	e.playRound(clients)
	s := e.state()
	r := coordinator.CurrentRound(s)
	if coordinator.Phase(s) != coordinator.RoundTrain || r.Height != 2 {
		t.Fatalf("want the third round of epoch 1, got %v at height %d", coordinator.Phase(s), r.Height)
	}
	idx := coordinator.MemberIndex(s, dropped.key.PublicKey())
	e.mustSend(clients[0].key, e.ix(run.Coordinator.HealthCheck(clients[0].key.PublicKey(), r.Step, uint16(idx), dropped.key.PublicKey())))
	start := s.Progress.Epoch
	s = e.advance(clients, func(s *coordinator.State) bool {
		return coordinator.Phase(s) == coordinator.WaitingForMembers && s.Progress.Epoch > start
	})

	slot, _ := coordinator.Slot(s, dropped.key.PublicKey())
	if slot.Slashed != slashing || slot.Earned == 0 {
		t.Fatalf("dropped client: earned %d, slashed %d", slot.Earned, slot.Slashed)
	}
	var owed uint64
	for _, c := range clients {
		sl, _ := coordinator.Slot(s, c.key.PublicKey())
		owed += sl.Earned - min(sl.Earned, sl.Slashed)
	}
	if got := treasurer.Reserved(s); got != owed {
		t.Fatalf("reserved %d, owed %d", got, owed)
	}
	want := slot.Earned - slot.Slashed
	if got := treasurer.Claimable(s, nil, dropped.key.PublicKey()); got != want {
		t.Fatalf("claimable %d, want %d", got, want)
	}
	e.expectError("InsufficientCollateral", dropped.key, e.ix(run.Claim(dropped.key.PublicKey(), solana.PublicKey{})))
	if slot, _ := coordinator.Slot(e.state(), dropped.key.PublicKey()); slot.Earned == 0 {
		t.Fatal("a failed claim settled the points")
	}
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 9_900, e.decimals)})
	e.mustSend(dropped.key, e.ix(run.Claim(dropped.key.PublicKey(), solana.PublicKey{})))
	if got := e.balance(dropped.tokens); got != want {
		t.Fatalf("the dropped client received %d, want earned %d - slashed %d", got, slot.Earned, slot.Slashed)
	}
	p, err := run.FetchParticipant(e.ctx(), e.c, dropped.key.PublicKey())
	if err != nil || p.EarnedPoints != slot.Earned || p.SlashedPoints != slashing || p.ClaimedPoints != want {
		t.Fatalf("participant %+v, %v", p, err)
	}
}
