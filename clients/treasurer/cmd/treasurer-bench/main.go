// Command treasurer-bench deploys the Authorizer, the Coordinator and the
// Treasurer on a fresh local validator, drives a Treasurer run through
// creation, configuration, one epoch of a single client, claims, a second
// epoch of another client whose points a third party settles (creating its
// record) before it claims, close and withdrawal, then a second run with a join deposit and vesting where three
// clients deposit and one is found at fault (real commit, verify and
// answer_dispute instructions), so that burn_forfeited burns its burned
// points and deposit, and prints the compute units of each instruction
// (transaction totals: run_create includes the system create_account of the
// coordinator account, claims the settle_points and token transfer CPIs).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
)

func main() {
	flag.Parse() // no flags: -h prints the usage line instead of running
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "treasurer-bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	ctx context.Context
	net *programtest.Net
}

// measure sends ixs and prints the transaction's compute units under label.
func (b *bench) measure(label string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) error {
	cu, err := b.net.Measure(b.ctx, label, payer, ixs, signers...)
	if err != nil {
		return err
	}
	fmt.Printf("%-66s %8d\n", label, cu)
	return nil
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	net, err := programtest.Launch(ctx, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Coordinator, deploy.Treasurer)
	if err != nil {
		return err
	}
	defer net.Stop()
	c := net.Chain
	b := &bench{ctx: ctx, net: net}
	admin, user, user2 := solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey
	for _, k := range []solana.PrivateKey{admin, user, user2} {
		if _, err := c.Airdrop(ctx, k.PublicKey(), 100*solana.LAMPORTS_PER_SOL); err != nil {
			return err
		}
	}
	p := treasurer.Program{ID: net.IDs[deploy.Treasurer], Coordinator: coordinator.Program{ID: net.IDs[deploy.Coordinator]}}
	a, u := admin.PublicKey(), user.PublicKey()

	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(ctx, c, a, mint.PublicKey(), a, 6, treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, admin, ixs, mint); err != nil {
		return err
	}
	create, funder, err := treasurer.CreateTokenAccount(a, a, mint.PublicKey(), treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, admin, []solana.Instruction{create, treasurer.MintTo(treasurer.TokenProgramID, mint.PublicKey(), funder, a, 1_000_000)}); err != nil {
		return err
	}

	fmt.Printf("%-66s %8s\n", "instruction", "CU")
	account := solana.NewWallet().PrivateKey
	ixs, r, err := p.CreateRun(ctx, c, a, account.PublicKey(), treasurer.CreateParams{
		RunID: "bench", MainAuthority: a, JoinAuthority: a, ClientVersion: "v1", Mint: mint.PublicKey(), TokenProgram: treasurer.TokenProgramID,
	})
	if err != nil {
		return err
	}
	if err := b.measure("run_create (+ create_account, ATA, init_coordinator)", admin, ixs, account); err != nil {
		return err
	}
	if err := b.measure("top-up (SPL transfer_checked into the run)", admin, []solana.Instruction{r.TopUp(funder, a, 10_000, 6)}); err != nil {
		return err
	}
	params, err := coordinator.LoadParams("config/smoke.toml")
	if err != nil {
		return err
	}
	// One client, one witness, seconds-long epoch.
	cfg := *params.Config
	cfg.InitMinClients, cfg.MinClients, cfg.WitnessNodes = 1, 1, 1
	cfg.WarmupTime, cfg.EpochTime, cfg.MaxRoundTrainTime = 1, 4, 2
	earning, resume := uint64(1000), false
	if err := b.step("run_update (metadata)", admin)(r.Update(a, treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Metadata: params.Metadata}})); err != nil {
		return err
	}
	if err := b.step("run_update (config + model + rates + resume)", admin)(r.Update(a, treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &cfg, Model: params.Model}, EarningRate: &earning, Paused: &resume,
	})); err != nil {
		return err
	}
	if err := b.step("participant_create", user)(r.CreateParticipant(u, u)); err != nil {
		return err
	}
	create, userTokens, err := treasurer.CreateTokenAccount(u, u, mint.PublicKey(), treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, user, []solana.Instruction{create}); err != nil {
		return err
	}
	// Anyone may join (an Everyone grant by the join authority).
	auth := authorizer.Program{ID: authorizer.Default().ID}
	grant, everyone, err := auth.Create(a, a, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		return err
	}
	activate, err := auth.SetActive(a, everyone, true)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, admin, []solana.Instruction{grant, activate}); err != nil {
		return err
	}
	if err := b.epoch(r, everyone, user); err != nil {
		return err
	}
	if err := b.step("participant_claim (settle + transfer)", user)(r.Claim(u, userTokens)); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	if err := b.step("participant_claim (nothing new)", user)(r.Claim(u, userTokens)); err != nil {
		return err
	}
	// Another client earns an epoch and has no record: a third party (the
	// admin) settles its points, then it claims them.
	u2 := user2.PublicKey()
	if err := b.epoch(r, everyone, user2); err != nil {
		return err
	}
	if err := b.step("participant_settle (creates the record; by a third party)", admin)(r.Settle(a, u2)); err != nil {
		return err
	}
	create, user2Tokens, err := treasurer.CreateTokenAccount(u2, u2, mint.PublicKey(), treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, user2, []solana.Instruction{create}); err != nil {
		return err
	}
	if err := b.step("participant_claim (settled points: transfer only)", user2)(r.Claim(u2, user2Tokens)); err != nil {
		return err
	}
	pause := true
	if err := b.step("run_update (pause)", admin)(r.Update(a, treasurer.UpdateParams{Paused: &pause})); err != nil {
		return err
	}
	if err := b.step("run_close (+ free_coordinator)", admin)(r.Close(a, a)); err != nil {
		return err
	}
	if err := b.step("run_withdraw (closed run)", admin)(r.Withdraw(a, funder, 8_000)); err != nil {
		return err
	}
	return b.forfeits(p, admin, mint.PublicKey(), funder, &cfg, params.Model)
}

// step measures the instruction a builder returns: b.step(label, payer)(build(...)).
func (b *bench) step(label string, payer solana.PrivateKey) func(solana.Instruction, error) error {
	return func(ix solana.Instruction, err error) error {
		if err != nil {
			return err
		}
		return b.measure(label, payer, []solana.Instruction{ix})
	}
}

// epoch has user join (under authorization, with a new p2p key), warm up,
// witness every round and tick until the epoch's points are paid.
func (b *bench) epoch(r treasurer.Run, authorization solana.PublicKey, user solana.PrivateKey) error {
	u := user.PublicKey()
	_, p2p, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	join, err := r.Coordinator.JoinRunProven(u, authorization, p2p)
	if err != nil {
		return err
	}
	if _, err := b.net.Chain.Send(b.ctx, user, join); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s, err := r.Coordinator.FetchState(b.ctx, b.net.Chain)
		if err != nil {
			return err
		}
		if slot, ok := coordinator.Slot(s, u); ok && slot.Earned > 0 {
			return nil
		}
		var ix solana.Instruction
		switch coordinator.Phase(s) {
		case coordinator.Warmup:
			ix, err = r.Coordinator.WarmupWitness(u)
		case coordinator.RoundTrain:
			round := coordinator.CurrentRound(s)
			if round.WitnessesLen > 0 {
				ix, err = r.Coordinator.Tick(u)
				break
			}
			bits, hashes := schedule.BloomParams(1)
			var salt [8]byte
			bloom, berr := schedule.NewBloom(bits, hashes, salt)
			if berr != nil {
				return berr
			}
			bloom.Add(u)
			ix, err = r.Coordinator.Witness(u, coordinator.WitnessReport{Step: round.Step, Index: 0, Participants: bloom, Broadcasts: bloom,
				BroadcastMerkle: sha256.Sum256(u[:])})
		default:
			ix, err = r.Coordinator.Tick(u)
		}
		if err != nil {
			return err
		}
		if _, err := b.net.Chain.Send(b.ctx, user, []solana.Instruction{ix}); err != nil {
			var te *chain.TxError
			if !errors.As(err, &te) || (te.Name != "TickTooEarly" && te.Name != "AlreadyWitnessed") {
				return err
			}
			time.Sleep(150 * time.Millisecond)
		}
	}
	return errors.New("the epoch did not pay its points within a minute")
}

// forfeits runs the second run: a join deposit of 100, rewards of 900 per
// epoch vesting one epoch later, every commitment verified, no TRANSIENT
// forgiven. Three clients deposit (the first deposit is measured) and train
// epoch 0; epoch 1 is the last: its first round, the third client commits,
// its drawn verifier posts MISMATCH, its rerun reproduces the verifier's
// hashes and the committee votes RERUN: a fault that burns its 300 unvested
// points and forfeits its deposit.
func (b *bench) forfeits(p treasurer.Program, admin solana.PrivateKey, mint, funder solana.PublicKey, base *coordinator.Config, model *coordinator.Model) error {
	ctx, c, a := b.ctx, b.net.Chain, admin.PublicKey()
	deposit := uint64(100)
	account := solana.NewWallet().PrivateKey
	ixs, r, err := p.CreateRun(ctx, c, a, account.PublicKey(), treasurer.CreateParams{
		RunID: "bench-forfeits", MainAuthority: a, ClientVersion: "v1", Mint: mint, TokenProgram: treasurer.TokenProgramID, JoinDeposit: &deposit,
	})
	if err != nil {
		return err
	}
	if err := b.measure("run_create (a join deposit: the Run grants joins)", admin, ixs, account); err != nil {
		return err
	}
	cfg := *base
	// Every member a witness: the verdict on the cheat's step ends its round,
	// the cheat is found at fault in the next one and reports nothing there,
	// and the other two still make the quorum (2 of 3).
	cfg.InitMinClients, cfg.MinClients, cfg.WitnessNodes = 3, 3, 3
	cfg.VestingEpochs, cfg.VerificationPercent, cfg.ForgivePerEpoch = 1, 100, 0
	earning, slashing, resume, pause := uint64(900), uint64(50), false, true
	if _, err := c.Send(ctx, admin, []solana.Instruction{r.TopUp(funder, a, 10_000, 6)}); err != nil {
		return err
	}
	update, err := r.Update(a, treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Config: &cfg, Model: model},
		EarningRate: &earning, SlashingRate: &slashing, Paused: &resume})
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, admin, []solana.Instruction{update}); err != nil {
		return err
	}
	clients := make([]solana.PrivateKey, 3)
	auths := map[solana.PublicKey]solana.PublicKey{}
	p2ps := map[solana.PublicKey]ed25519.PrivateKey{}
	for i := range clients {
		k := solana.NewWallet().PrivateKey
		clients[i] = k
		u := k.PublicKey()
		if _, err := c.Airdrop(ctx, u, 10*solana.LAMPORTS_PER_SOL); err != nil {
			return err
		}
		create, tokens, err := treasurer.CreateTokenAccount(a, u, mint, treasurer.TokenProgramID)
		if err != nil {
			return err
		}
		if _, err := c.Send(ctx, admin, []solana.Instruction{create, treasurer.MintTo(treasurer.TokenProgramID, mint, tokens, a, 1000)}); err != nil {
			return err
		}
		participant, err := r.CreateParticipant(u, u)
		if err != nil {
			return err
		}
		if _, err := c.Send(ctx, k, []solana.Instruction{participant}); err != nil {
			return err
		}
		label := ""
		if i == 0 {
			label = "participant_deposit (transfer + authorization: create, delegate)"
		}
		if err := b.maybe(label, k)(r.Deposit(u, tokens, deposit)); err != nil {
			return err
		}
		if _, auths[u], err = r.AuthorizationAddress(u); err != nil {
			return err
		}
		if _, p2ps[u], err = ed25519.GenerateKey(rand.Reader); err != nil {
			return err
		}
	}
	join := func() error {
		for _, k := range clients {
			ixs, err := r.Coordinator.JoinRunProven(k.PublicKey(), auths[k.PublicKey()], p2ps[k.PublicKey()])
			if err != nil {
				return err
			}
			if _, err := c.Send(ctx, k, ixs); err != nil {
				return err
			}
		}
		return nil
	}
	// Epoch 0.
	if err := join(); err != nil {
		return err
	}
	if _, err := b.play(r, admin, clients, func(s *coordinator.State) bool {
		return coordinator.Phase(s) == coordinator.WaitingForMembers && s.Progress.Epoch == 1
	}); err != nil {
		return err
	}
	// Epoch 1, the last (two steps).
	s, err := r.Coordinator.FetchState(ctx, c)
	if err != nil {
		return err
	}
	cfg.TotalSteps = s.Progress.Step + 1
	if err := b.send(admin)(r.Update(a, treasurer.UpdateParams{Paused: &pause})); err != nil {
		return err
	}
	if err := b.send(admin)(r.Update(a, treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Config: &cfg}, Paused: &resume})); err != nil {
		return err
	}
	if err := join(); err != nil {
		return err
	}
	if s, err = b.play(r, admin, clients, func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.RoundTrain }); err != nil {
		return err
	}
	cheat := clients[2]
	uc := cheat.PublicKey()
	round := coordinator.CurrentRound(s)
	ti := uint16(coordinator.MemberIndex(s, uc))
	if err := b.send(cheat)(r.Coordinator.Commit(uc, coordinator.CommitArgs{
		Step: round.Step, Index: ti, Payload: [32]byte{1}, StateBefore: [32]byte{2}, StateAfter: [32]byte{3}, Fresh: true,
	})); err != nil {
		return err
	}
	// The verify seed comes from the first slot after RoundTrain ended: play ticks until one draws it.
	if s, err = b.play(r, admin, clients, func(s *coordinator.State) bool {
		return coordinator.Phase(s) == coordinator.RoundWitness && coordinator.CurrentRound(s).VerifySeed != ([32]byte{})
	}); err != nil {
		return err
	}
	round = coordinator.CurrentRound(s)
	v, _ := schedule.Verifier(schedule.Seed(round.VerifySeed), ti, round.ClientsLen)
	verifier := coordinator.Members(s)[v].Signer
	claimed, after := [32]byte{0xaa}, [32]byte{0xbb}
	for _, k := range clients {
		if k.PublicKey().Equals(verifier) {
			if err := b.send(k)(r.Coordinator.Verify(verifier, coordinator.VerifyArgs{
				Step: round.Step, VerifierIndex: v, Index: ti, Verdict: coordinator.VerdictMismatch, ClaimedPayload: claimed, ClaimedAfter: after,
			})); err != nil {
				return err
			}
		}
	}
	id := s.DisputesOpened + 1
	if err := b.send(cheat)(r.Coordinator.AnswerDispute(uc, id, claimed, after)); err != nil {
		return err
	}
	// The committee, having fetched the rerun, votes RERUN (a majority
	// decides): a TRANSIENT past forgive_per_epoch = 0 is a fault.
	if s, err = r.Coordinator.FetchState(ctx, c); err != nil {
		return err
	}
	d, _ := coordinator.FindDispute(s, id)
	for _, slot := range d.Committee[:d.CommitteeLen] {
		if now, _ := coordinator.FindDispute(s, id); now.State != coordinator.DisputeOpen {
			break
		}
		judge := s.Clients[slot].Signer
		for _, k := range clients {
			if k.PublicKey().Equals(judge) {
				if err := b.send(k)(r.Coordinator.JudgeDispute(judge, id, coordinator.VoteRerun)); err != nil {
					return err
				}
			}
		}
		if s, err = r.Coordinator.FetchState(ctx, c); err != nil {
			return err
		}
	}
	if slot, _ := coordinator.Slot(s, uc); slot.Burned != 300 || slot.HasFault == 0 {
		return fmt.Errorf("the cheat's slot after its fault: %+v", slot)
	}
	if err := b.step("burn_forfeited (points + deposit: take_burned, burn, revoke)", admin)(r.BurnForfeited(uc)); err != nil {
		return err
	}
	if _, err := b.play(r, admin, clients[:2], func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.Finished }); err != nil {
		return err
	}
	u0 := clients[0].PublicKey()
	if err := b.step("participant_claim (vested points)", clients[0])(r.Claim(u0, solana.PublicKey{})); err != nil {
		return err
	}
	if err := b.step("participant_withdraw_deposit (transfer, revoke + close)", clients[0])(r.WithdrawDeposit(u0, u0, solana.PublicKey{})); err != nil {
		return err
	}
	if err := b.step("participant_settle (existing record: vested points)", admin)(r.Settle(a, clients[1].PublicKey())); err != nil {
		return err
	}
	return b.step("participant_withdraw_deposit (the authority, Finished run)", admin)(r.WithdrawDeposit(a, clients[1].PublicKey(), solana.PublicKey{}))
}

// maybe measures the instruction when label is set, and only sends it otherwise.
func (b *bench) maybe(label string, payer solana.PrivateKey) func(solana.Instruction, error) error {
	if label != "" {
		return b.step(label, payer)
	}
	return b.send(payer)
}

// send sends the instruction a builder returns, unmeasured.
func (b *bench) send(payer solana.PrivateKey) func(solana.Instruction, error) error {
	return func(ix solana.Instruction, err error) error {
		if err != nil {
			return err
		}
		_, err = b.net.Chain.Send(b.ctx, payer, []solana.Instruction{ix})
		return err
	}
}

// play drives the run with clients (warmup reports, every elected witness
// reporting every member, ticks by the admin) until done holds: one
// transaction per look at the state.
func (b *bench) play(r treasurer.Run, admin solana.PrivateKey, clients []solana.PrivateKey, done func(*coordinator.State) bool) (*coordinator.State, error) {
	keys := map[solana.PublicKey]solana.PrivateKey{}
	for _, k := range clients {
		keys[k.PublicKey()] = k
	}
	reported := map[[2]uint32]bool{}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		s, err := r.Coordinator.FetchState(b.ctx, b.net.Chain)
		if err != nil {
			return nil, err
		}
		if done(s) {
			return s, nil
		}
		payer, ix, err := b.next(r, s, keys, reported)
		if err != nil {
			return nil, err
		}
		if ix == nil {
			payer, ix = admin, nil
			if ix, err = r.Coordinator.Tick(admin.PublicKey()); err != nil {
				return nil, err
			}
		}
		if _, err := b.net.Chain.Send(b.ctx, payer, []solana.Instruction{ix}); err != nil {
			var te *chain.TxError
			if !errors.As(err, &te) || te.Name != "TickTooEarly" {
				return nil, err
			}
			time.Sleep(150 * time.Millisecond)
		}
	}
	return nil, errors.New("the run did not get there within two minutes")
}

// next is the next report a client owes (nil: none, tick).
func (b *bench) next(r treasurer.Run, s *coordinator.State, keys map[solana.PublicKey]solana.PrivateKey, reported map[[2]uint32]bool) (solana.PrivateKey, solana.Instruction, error) {
	switch coordinator.Phase(s) {
	case coordinator.Warmup:
		for _, m := range coordinator.Members(s) {
			if k, ok := keys[m.Signer]; ok && s.Epoch.Clients[m.Index].WarmupWitnessed == 0 {
				ix, err := r.Coordinator.WarmupWitness(m.Signer)
				return k, ix, err
			}
		}
	case coordinator.RoundTrain:
		round := coordinator.CurrentRound(s)
		members := coordinator.Members(s)[:round.ClientsLen]
		sr := coordinator.ScheduleRound(s, round)
		for _, m := range members {
			k, ok := keys[m.Signer]
			role, err := sr.Role(m.Index)
			if err != nil {
				return nil, nil, err
			}
			if !ok || !role.Witness || m.State != coordinator.MemberHealthy || reported[[2]uint32{round.Step, uint32(m.Index)}] {
				continue
			}
			reported[[2]uint32{round.Step, uint32(m.Index)}] = true
			bits, hashes := schedule.BloomParams(len(members))
			var salt [8]byte
			_, _ = rand.Read(salt[:])
			participants, err := schedule.NewBloom(bits, hashes, salt)
			if err != nil {
				return nil, nil, err
			}
			for _, o := range members {
				if _, ok := keys[o.Signer]; ok {
					participants.Add(o.Signer)
				}
			}
			ix, err := r.Coordinator.Witness(m.Signer, coordinator.WitnessReport{Step: round.Step, Index: m.Index,
				Participants: participants, Broadcasts: participants, BroadcastMerkle: sha256.Sum256(m.Signer[:])})
			return k, ix, err
		}
	}
	return nil, nil, nil
}
