package treasurer_test

import (
	"errors"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	tbindings "github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// newDepositClients are clients of a run that grants joins itself: each has
// minted tokens and a Participant, and joins once it deposits (deposit).
func (e *env) newDepositClients(n int, minted uint64) []*client {
	e.t.Helper()
	out := make([]*client, n)
	for i := range out {
		c := &client{key: localnettest.NewFundedKeypair(e.t, e.v, solana.LAMPORTS_PER_SOL), p2p: newP2PKey(e.t)}
		c.tokens = e.tokenAccount(c.key.PublicKey(), minted)
		u := c.key.PublicKey()
		e.mustSend(c.key, e.ix(e.run.CreateParticipant(u, u)))
		participant, auth, err := e.run.AuthorizationAddress(u)
		if err != nil {
			e.t.Fatal(err)
		}
		c.auth = auth
		e.watched = append(e.watched, participant, auth)
		out[i] = c
	}
	return out
}

// voteRerun has dispute id's committee vote RERUN until the dispute is
// settled (a majority of the committee decides).
func (e *env) voteRerun(clients []*client, id uint64) {
	e.t.Helper()
	keys := map[solana.PublicKey]solana.PrivateKey{}
	for _, c := range clients {
		keys[c.key.PublicKey()] = c.key
	}
	s := e.state()
	d, ok := coordinator.FindDispute(s, id)
	if !ok {
		e.t.Fatalf("no dispute %d", id)
	}
	for _, slot := range d.Committee[:d.CommitteeLen] {
		if d, _ := coordinator.FindDispute(e.state(), id); d.State != coordinator.DisputeOpen {
			return
		}
		judge := keys[s.Clients[slot].Signer]
		e.mustSend(judge, e.ix(e.run.Coordinator.JudgeDispute(judge.PublicKey(), id, coordinator.VoteRerun)))
	}
}

func (e *env) runAccount() *treasurer.RunAccount {
	e.t.Helper()
	_, acc, err := e.p.Open(e.ctx(), e.c, e.run.Index)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc
}

func (e *env) participant(c *client) *treasurer.Participant {
	e.t.Helper()
	p, err := e.run.FetchParticipant(e.ctx(), e.c, c.key.PublicKey())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) supply() uint64 {
	e.t.Helper()
	m, err := treasurer.FetchMint(e.ctx(), e.c, e.mint)
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Supply
}

// A Treasurer run with a join deposit of 100 and rewards that vest one epoch
// later. Three clients deposit to join (nobody joins without one, not even
// under the authority's own grant) and train epoch 0: 900 points, all
// unvested, so a claim pays nothing and the paused run cannot close. In
// epoch 1 the third is found at fault by real Coordinator instructions (its
// drawn verifier posts MISMATCH, its own rerun reproduces the verifier's
// hashes and the dispute's committee votes RERUN: a TRANSIENT past
// forgive_per_epoch = 0): its unvested 300 points move to its slot's
// burned, and its deposit is forfeited. Once the run is Finished the others
// claim exactly what vested; withdrawals never reach burned points or
// deposits; burn_forfeited (sent by an outsider) fails whole while the
// run's tokens, deposits aside, are short, then burns 300 points plus the
// 100-token deposit: the supply and the run's balance drop by exactly 400.
// The others' deposits come back (one by its user, one by the authority of
// the Finished run), and the run closes once nothing is reserved. Every
// rejection names its error and changes no account.
func TestForfeitsBurned(t *testing.T) {
	deposit := uint64(100)
	e := setupRun(t, "forfeits", treasurer.TokenProgramID, 0, &deposit)
	a := e.authority
	run := e.run
	e.watched = append(e.watched, e.mint, run.Coordinator.Account)
	outsider := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)

	if acc := e.runAccount(); !acc.JoinAuthority.Equals(run.Address) || acc.JoinDeposit != deposit {
		t.Fatalf("run: join authority %s, deposit %d; want the Run %s and %d", acc.JoinAuthority, acc.JoinDeposit, run.Address, deposit)
	}
	inst, err := e.p.Coordinator.FetchInstance(e.ctx(), e.c, run.Coordinator.Instance)
	if err != nil || !inst.JoinAuthority.Equals(run.Address) {
		t.Fatalf("coordinator instance %+v, %v: the Run must grant joins", inst, err)
	}
	params := testRun(t)
	config := *params.Config
	// smoke.toml elects every member of three a witness: the verdict on the
	// cheat's step ends its round, so the cheat is found at fault in the
	// next one, where it reports nothing, and the other two still make the
	// quorum (2 of 3).
	config.VestingEpochs, config.VerificationPercent, config.ForgivePerEpoch = 1, 100, 0
	earning, slashing, resume, pause := uint64(900), uint64(50), false, true
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &config, Model: params.Model}, EarningRate: &earning, SlashingRate: &slashing,
		Paused: &resume, JoinDeposit: &deposit,
	})))
	funder := e.tokenAccount(a.PublicKey(), 10_000)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 1799, e.decimals)})

	clients := e.newDepositClients(3, 1000)
	c0, c1, cheat := clients[0], clients[1], clients[2]
	u0, u1, uc := c0.key.PublicKey(), c1.key.PublicKey(), cheat.key.PublicKey()

	// No deposit, no join: the authorization does not exist, and one the
	// authority grants is not at the PDA of the join authority (the Run).
	e.expectError("AccountNotInitialized", c0.key, e.joinIxs(c0, c0.auth))
	grant, grantAddr, err := e.auth.Create(a.PublicKey(), a.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		t.Fatal(err)
	}
	activate, err := e.auth.SetActive(a.PublicKey(), grantAddr, true)
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(a, []solana.Instruction{grant, activate})
	e.expectError("ConstraintSeeds", c0.key, e.joinIxs(c0, grantAddr))

	// Deposits: exactly the run's amount, once.
	e.expectError("DepositMismatch", c0.key, e.ix(run.Deposit(u0, solana.PublicKey{}, deposit-1)))
	for _, c := range clients {
		sig := e.mustSend(c.key, e.ix(run.Deposit(c.key.PublicKey(), solana.PublicKey{}, deposit)))
		logs, err := e.c.TransactionLogs(e.ctx(), sig)
		if err != nil {
			t.Fatal(err)
		}
		var made *tbindings.DepositMade
		for _, d := range chain.EventData(logs) {
			if ev, err := tbindings.ParseEvent_DepositMade(d); err == nil {
				made = ev
			}
		}
		if made == nil || made.Amount != deposit || made.Epoch != 0 || !made.User.Equals(c.key.PublicKey()) {
			t.Fatalf("DepositMade %+v", made)
		}
		auth, err := e.auth.Fetch(e.ctx(), e.c, c.auth)
		participant, _, _ := run.AuthorizationAddress(c.key.PublicKey())
		if err != nil || !auth.Active || !auth.Grantor.Equals(run.Address) || !auth.Grantee.Equals(participant) ||
			len(auth.Delegates) != 1 || !auth.Delegates[0].Equals(c.key.PublicKey()) {
			t.Fatalf("join authorization %+v, %v", auth, err)
		}
	}
	e.expectError("DepositAlreadyMade", c0.key, e.ix(run.Deposit(u0, solana.PublicKey{}, deposit)))
	if p := e.participant(c0); p.Deposit != deposit || !p.Deposited || p.DepositEpoch != 0 {
		t.Fatalf("participant after the deposit: %+v", p)
	}
	if acc := e.runAccount(); acc.TotalDeposits != 3*deposit || e.balance(run.Collateral) != 1799+3*deposit || e.balance(c0.tokens) != 1000-deposit {
		t.Fatalf("deposits held %d, run balance %d, client balance %d", acc.TotalDeposits, e.balance(run.Collateral), e.balance(c0.tokens))
	}

	// Epoch 0: the three share 900 points, none claimable before the next epoch end.
	s := e.epoch(clients, coordinator.WaitingForMembers)
	for _, c := range clients {
		slot, ok := coordinator.Slot(s, c.key.PublicKey())
		if !ok || slot.Earned != 0 || slot.Unvested[0] != 300 {
			t.Fatalf("epoch 0: slot %+v", slot)
		}
	}
	if r := treasurer.ReserveOf(s); r != (treasurer.Reserve{Unvested: 900}) {
		t.Fatalf("reserve after epoch 0: %+v", r)
	}
	e.mustSend(c0.key, e.ix(run.Claim(u0, solana.PublicKey{})))
	if got := e.balance(c0.tokens); got != 1000-deposit {
		t.Fatalf("a claim of unvested points paid %d", got-(1000-deposit))
	}
	// Halted with unvested points, the run cannot close; before Finished
	// nothing can be withdrawn and only users take their deposits back.
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{Paused: &pause})))
	e.expectError("UnvestedPointsRemain", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.expectError("RunNotFinished", a, e.ix(run.Withdraw(a.PublicKey(), funder, 1)))
	e.expectError("NotDepositor", a, e.ix(run.WithdrawDeposit(a.PublicKey(), u1, solana.PublicKey{})))
	// Out of the run, a user takes its deposit back (its authorization is
	// closed) and deposits again (a new one is granted).
	e.mustSend(c1.key, e.ix(run.WithdrawDeposit(u1, u1, solana.PublicKey{})))
	if _, err := e.auth.Fetch(e.ctx(), e.c, c1.auth); err == nil || e.balance(c1.tokens) != 1000 || e.runAccount().TotalDeposits != 2*deposit {
		t.Fatalf("after a deposit return: authorization %v, balance %d", err, e.balance(c1.tokens))
	}
	e.expectError("AccountNotInitialized", c1.key, e.joinIxs(c1, c1.auth))
	e.mustSend(c1.key, e.ix(run.Deposit(u1, solana.PublicKey{}, deposit)))
	if p := e.participant(c1); !p.Deposited || p.DepositEpoch != 1 || e.runAccount().TotalDeposits != 3*deposit {
		t.Fatalf("deposit again in epoch 1: %+v", p)
	}
	// Epoch 1 is the last: two steps.
	config.TotalSteps = e.state().Progress.Step + 1
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Config: &config}, Paused: &resume})))

	// Epoch 1: the cheat commits; in RoundWitness its drawn verifier posts
	// MISMATCH, the cheat's own rerun reproduces the verifier's hashes, and
	// the committee, having fetched the rerun, votes RERUN: a TRANSIENT
	// beyond forgive_per_epoch = 0 is a fault.
	for _, c := range clients {
		e.join(c)
	}
	e.expectError("DepositLocked", c0.key, e.ix(run.WithdrawDeposit(u0, u0, solana.PublicKey{})))
	s = e.advance(clients, func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.RoundTrain })
	r := coordinator.CurrentRound(s)
	ti := uint16(coordinator.MemberIndex(s, uc))
	e.mustSend(cheat.key, e.ix(run.Coordinator.Commit(uc, coordinator.CommitArgs{
		Step: r.Step, Index: ti, Payload: [32]byte{1}, StateBefore: [32]byte{2}, StateAfter: [32]byte{3}, Fresh: true,
	})))
	e.witnessRound(clients)
	s = e.state()
	if coordinator.Phase(s) != coordinator.RoundWitness {
		t.Fatalf("after the witnesses: %v", coordinator.Phase(s))
	}
	// The verify seed comes from a later slot: a tick draws it.
	for coordinator.CurrentRound(s).VerifySeed == ([32]byte{}) {
		e.tick()
		s = e.state()
	}
	r = coordinator.CurrentRound(s)
	v, ok := schedule.Verifier(schedule.Seed(r.VerifySeed), ti, r.ClientsLen)
	if !ok || !coordinator.MustVerify(s, r, ti) {
		t.Fatal("the cheat's commitment is not to be verified")
	}
	verifier := coordinator.Members(s)[v].Signer
	var vkey solana.PrivateKey
	for _, c := range clients {
		if c.key.PublicKey().Equals(verifier) {
			vkey = c.key
		}
	}
	claimed, after := [32]byte{0xaa}, [32]byte{0xbb}
	e.mustSend(vkey, e.ix(run.Coordinator.Verify(verifier, coordinator.VerifyArgs{
		Step: r.Step, VerifierIndex: v, Index: ti, Verdict: coordinator.VerdictMismatch, ClaimedPayload: claimed, ClaimedAfter: after,
	})))
	id := s.DisputesOpened + 1
	e.mustSend(cheat.key, e.ix(run.Coordinator.AnswerDispute(uc, id, claimed, after)))
	e.voteRerun(clients, id)
	s = e.state()
	slot, _ := coordinator.Slot(s, uc)
	if slot.Burned != 300 || slot.HasFault != 1 || slot.LastFaultEpoch != 1 || slot.Slashed != slashing || slot.Unvested != [4]uint64{} {
		t.Fatalf("the cheat's slot after the fault: %+v", slot)
	}
	if d, _ := coordinator.FindDispute(s, s.DisputesOpened); d.State != coordinator.DisputeTrainerFault {
		t.Fatalf("dispute %+v", d)
	}
	if f := treasurer.ForfeitOf(s, e.participant(cheat), uc); f != (treasurer.Forfeit{Points: 300, Deposit: deposit, Revoke: true}) {
		t.Fatalf("forfeit %+v", f)
	}
	e.endRound(r)
	cheat.stopped = true
	// The forfeited deposit never comes back; a claim pays nothing (its
	// earned points are 0, its slash 50) and records the fault.
	e.expectError("DepositForfeited", cheat.key, e.ix(run.WithdrawDeposit(uc, uc, solana.PublicKey{})))
	e.mustSend(cheat.key, e.ix(run.Claim(uc, solana.PublicKey{})))
	if p := e.participant(cheat); !p.HasFault || p.LastFaultEpoch != 1 || p.SlashedPoints != slashing || p.ClaimedPoints != 0 {
		t.Fatalf("the cheat's record after its claim: %+v", p)
	}

	// Finished: every unvested point vests; the cheat's burned points stay.
	s = e.advance(clients, func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.Finished })
	for _, c := range clients[:2] {
		if slot, _ := coordinator.Slot(s, c.key.PublicKey()); slot.Earned != 750 || slot.Unvested != [4]uint64{} {
			t.Fatalf("finished: slot %+v, want 300 + 450 vested", slot)
		}
	}
	if r := treasurer.ReserveOf(s); r != (treasurer.Reserve{Claims: 1500, Burned: 300}) {
		t.Fatalf("reserve at Finished: %+v", r)
	}
	e.expectError("UnclaimedPointsRemain", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.expectError("RunFinished", c0.key, e.ix(run.Deposit(u0, solana.PublicKey{}, deposit)))
	for _, c := range clients[:2] {
		e.mustSend(c.key, e.ix(run.Claim(c.key.PublicKey(), solana.PublicKey{})))
		if got := e.balance(c.tokens); got != 1000-deposit+750 {
			t.Fatalf("client holds %d after claiming 750", got)
		}
	}

	// 1799 + 300 - 1500 = 599 left, 600 reserved (300 burned points, 200 +
	// 100 deposits): nothing is withdrawable and the burn is short.
	held := e.balance(run.Collateral)
	acc := e.runAccount()
	s = e.state()
	if held != 599 || treasurer.ReservedTokens(acc, s) != 600 {
		t.Fatalf("held %d, reserved %d", held, treasurer.ReservedTokens(acc, s))
	}
	e.expectError("WithdrawExceedsUnallocated", a, e.ix(run.Withdraw(a.PublicKey(), funder, 1)))
	e.expectError("BurnPending", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.expectError("BurnExceedsBalance", outsider, e.ix(run.BurnForfeited(uc)))
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 101, e.decimals)})
	e.expectError("WithdrawExceedsUnallocated", a, e.ix(run.Withdraw(a.PublicKey(), funder, 101)))
	e.mustSend(a, e.ix(run.Withdraw(a.PublicKey(), funder, 100)))

	// Only the Treasurer takes burned points out of the Coordinator; a burn
	// takes the user's own record and authorization.
	e.expectError("Unauthorized", a, e.ix(run.Coordinator.TakeBurned(a.PublicKey(), uc)))
	forged, err := run.BurnForfeited(uc)
	if err != nil {
		t.Fatal(err)
	}
	p0, _, _ := run.AuthorizationAddress(u0)
	forged.Accounts()[2].PublicKey = p0
	e.expectError("ParticipantMismatch", outsider, []solana.Instruction{forged})
	if forged, err = run.BurnForfeited(uc); err != nil {
		t.Fatal(err)
	}
	forged.Accounts()[8].PublicKey = c0.auth
	e.expectError("AuthorizationMismatch", outsider, []solana.Instruction{forged})

	// The burn: 300 points and the 100-token deposit, paid to nobody.
	supply, held := e.supply(), e.balance(run.Collateral)
	sig := e.mustSend(outsider, e.ix(run.BurnForfeited(uc)))
	if got := e.supply(); got != supply-400 {
		t.Fatalf("supply %d after the burn, want %d - 400", got, supply)
	}
	if got := e.balance(run.Collateral); got != held-400 || got != 2*deposit {
		t.Fatalf("run holds %d after the burn, want %d - 400 (the two deposits left)", got, held)
	}
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	var burned *tbindings.ForfeitsBurned
	for _, d := range chain.EventData(logs) {
		if ev, err := tbindings.ParseEvent_ForfeitsBurned(d); err == nil {
			burned = ev
		}
	}
	if burned == nil || burned.Points != 300 || burned.Deposit != deposit || !burned.User.Equals(uc) {
		t.Fatalf("ForfeitsBurned %+v", burned)
	}
	p := e.participant(cheat)
	if p.BurnedPoints != 300 || p.BurnedDeposit != deposit || p.Deposit != 0 || p.Deposited {
		t.Fatalf("the cheat's record after the burn: %+v", p)
	}
	if slot, _ := coordinator.Slot(e.state(), uc); slot.Burned != 0 {
		t.Fatalf("the slot still holds %d burned points", slot.Burned)
	}
	if _, err := e.auth.Fetch(e.ctx(), e.c, cheat.auth); err == nil {
		t.Fatal("the cheat's join authorization survived the burn of its deposit")
	}
	if acc := e.runAccount(); acc.TotalBurned != 400 || acc.TotalDeposits != 2*deposit {
		t.Fatalf("run burned %d, holds deposits %d", acc.TotalBurned, acc.TotalDeposits)
	}
	e.expectError("NothingToBurn", outsider, e.ix(run.BurnForfeited(uc)))
	e.expectError("AccountNotInitialized", cheat.key, e.joinIxs(cheat, cheat.auth))
	e.expectError("NoDeposit", cheat.key, e.ix(run.WithdrawDeposit(uc, uc, solana.PublicKey{})))
	e.expectError("DepositsRemain", a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))

	// Deposits back: one by its user, one by the authority of the Finished
	// run (its authorization's rent goes back to the user).
	e.expectError("NotDepositor", outsider, e.ix(run.WithdrawDeposit(outsider.PublicKey(), u1, solana.PublicKey{})))
	e.mustSend(c0.key, e.ix(run.WithdrawDeposit(u0, u0, solana.PublicKey{})))
	e.mustSend(a, e.ix(run.WithdrawDeposit(a.PublicKey(), u1, solana.PublicKey{})))
	for _, c := range clients[:2] {
		if got := e.balance(c.tokens); got != 1000+750 {
			t.Fatalf("client holds %d, want 1000 + 750 earned", got)
		}
		if _, err := e.auth.Fetch(e.ctx(), e.c, c.auth); err == nil {
			t.Fatal("a returned deposit left its join authorization")
		}
	}
	if got := e.balance(cheat.tokens); got != 1000-deposit {
		t.Fatalf("the cheat holds %d, want its 1000 minus the burned deposit", got)
	}
	if got := e.balance(run.Collateral); got != 0 {
		t.Fatalf("the run holds %d after every claim, burn and return", got)
	}
	e.mustSend(a, e.ix(run.Close(a.PublicKey(), a.PublicKey())))
	e.expectError("RunClosed", outsider, e.ix(run.BurnForfeited(uc)))
	e.expectError("RunClosed", c0.key, e.ix(run.WithdrawDeposit(u0, u0, solana.PublicKey{})))
	if acc := e.runAccount(); !acc.Closed || acc.TotalClaimedPoints != 1500 || acc.TotalBurned != 400 || acc.TotalDeposits != 0 {
		t.Fatalf("closed run %+v", acc)
	}
}

// Audit finding F5: in a deposit run with a slashing rate of 0 and no
// vesting, a member found at fault holds nothing in its slot, the slot frees
// at the next round, and one transaction [another wallet's join_run,
// participant_withdraw_deposit] returns the deposit (burn_forfeited then
// finds NothingToBurn). No deposit is taken where a fault slashes nothing,
// so the attack cannot start: a new deposit run has no rates and refuses
// deposits until its authority sets a slashing rate above 0, and run_update
// refuses to leave a run that asks for or holds deposits with a slashing
// rate of 0 (ZeroSlashingRate), whichever of the two it sets. Every
// rejection changes no account.
func TestDepositsNeedSlashing(t *testing.T) {
	deposit := uint64(100)
	e := setupRun(t, "no-slash", treasurer.TokenProgramID, 0, &deposit)
	a := e.authority
	run := e.run
	e.watched = append(e.watched, run.Coordinator.Account)
	c := e.newDepositClients(1, 1000)[0]
	u := c.key.PublicKey()
	update := func(p treasurer.UpdateParams) []solana.Instruction { return e.ix(run.Update(a.PublicKey(), p)) }

	// Created with a deposit, the run slashes nothing yet: no deposit.
	if err := treasurer.CheckDepositSlashing(e.state(), u); !errors.Is(err, treasurer.ErrZeroSlashingRate) {
		t.Fatalf("CheckDepositSlashing on a new run: %v", err)
	}
	e.expectError("ZeroSlashingRate", c.key, e.ix(run.Deposit(u, solana.PublicKey{}, deposit)))

	// Configured with a slashing rate of 0, or asking for a deposit without
	// setting a rate, the run is refused.
	params := testRun(t)
	zero, none, earning, slashing, resume := uint64(0), uint64(0), uint64(900), uint64(50), false
	e.expectError("ZeroSlashingRate", a, update(treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: params.Config, Model: params.Model}, EarningRate: &earning, SlashingRate: &zero, Paused: &resume,
	}))
	e.expectError("ZeroSlashingRate", a, update(treasurer.UpdateParams{JoinDeposit: &deposit}))
	if err := treasurer.CheckSlashingRate(deposit, 0, zero); !errors.Is(err, treasurer.ErrZeroSlashingRate) {
		t.Fatalf("CheckSlashingRate passed a deposit run at rate 0: %v", err)
	}
	// A free registration (no deposit asked, none held) may slash nothing;
	// asking for a deposit again needs a rate.
	e.mustSend(a, update(treasurer.UpdateParams{JoinDeposit: &none, SlashingRate: &zero}))
	e.expectError("ZeroSlashingRate", a, update(treasurer.UpdateParams{JoinDeposit: &deposit}))

	// With a rate above 0 deposits open, and the rate cannot drop to 0 while
	// deposits are asked or held.
	e.mustSend(a, update(treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: params.Config, Model: params.Model}, EarningRate: &earning, SlashingRate: &slashing,
		Paused: &resume, JoinDeposit: &deposit,
	}))
	if err := treasurer.CheckDepositSlashing(e.state(), u); err != nil {
		t.Fatalf("CheckDepositSlashing at rate %d: %v", slashing, err)
	}
	e.mustSend(c.key, e.ix(run.Deposit(u, solana.PublicKey{}, deposit)))
	e.expectError("ZeroSlashingRate", a, update(treasurer.UpdateParams{SlashingRate: &zero}))
	e.expectError("ZeroSlashingRate", a, update(treasurer.UpdateParams{SlashingRate: &zero, JoinDeposit: &none}))
	if s := e.state(); s.FutureRates.SlashingRatePerClient != slashing {
		t.Fatalf("future slashing rate %d, want %d", s.FutureRates.SlashingRatePerClient, slashing)
	}
	if acc := e.runAccount(); acc.JoinDeposit != deposit || acc.TotalDeposits != deposit {
		t.Fatalf("run: join deposit %d, deposits held %d", acc.JoinDeposit, acc.TotalDeposits)
	}
}
