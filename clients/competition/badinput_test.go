package competition_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// snapshot is every byte a refused instruction must leave as it was.
type snapshot struct {
	accounts map[solana.PublicKey][]byte
	pool     uint64
}

func (e *compEnv) snapshot(extra ...solana.PublicKey) snapshot {
	e.t.Helper()
	s := snapshot{accounts: map[solana.PublicKey][]byte{}}
	for _, a := range append([]solana.PublicKey{e.k.Address, e.k.Board}, extra...) {
		data, _, err := e.c.AccountData(e.ctx, a)
		if errors.Is(err, chain.ErrAccountNotFound) {
			data = nil
		} else if err != nil {
			e.t.Fatal(err)
		}
		s.accounts[a] = data
	}
	s.pool = e.balance(e.k.Pool)
	return s
}

func (e *compEnv) unchanged(what string, before snapshot) {
	e.t.Helper()
	after := e.snapshot(keysOf(before.accounts)...)
	for a, data := range before.accounts {
		if !bytes.Equal(data, after.accounts[a]) {
			e.t.Fatalf("%s changed account %s", what, a)
		}
	}
	if after.pool != before.pool {
		e.t.Fatalf("%s moved pool tokens: %d -> %d", what, before.pool, after.pool)
	}
}

func keysOf(m map[solana.PublicKey][]byte) []solana.PublicKey {
	var out []solana.PublicKey
	for k := range m {
		out = append(out, k)
	}
	return out
}

// withData is ix with other instruction data.
func withData(ix solana.Instruction, data []byte) solana.Instruction {
	return solana.NewInstruction(ix.ProgramID(), ix.Accounts(), data)
}

// withAccount is ix with account i replaced (keeping its flags, or with
// signer set as given).
func withAccount(ix solana.Instruction, i int, key solana.PublicKey, signer bool) solana.Instruction {
	var metas solana.AccountMetaSlice
	for j, m := range ix.Accounts() {
		c := *m
		if j == i {
			c.PublicKey, c.IsSigner = key, signer
		}
		metas = append(metas, &c)
	}
	data, _ := ix.Data()
	return solana.NewInstruction(ix.ProgramID(), metas, data)
}

// refused sends ix (after ok, the instructions that precede it in its
// transaction) signed by payer and signers, wants a failure, and checks that
// nothing changed.
func (e *compEnv) refused(what string, before snapshot, payer solana.PrivateKey, pre []solana.Instruction, ix solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	if err := e.c.WaitNextSlot(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	_, err := e.c.Send(e.ctx, payer, append(append([]solana.Instruction{}, pre...), ix), signers...)
	var te *chain.TxError
	if !errors.As(err, &te) {
		e.t.Fatalf("%s: want the program to refuse it, got %v", what, err)
	}
	e.unchanged(what, before)
}

// badInputs checks one instruction: the valid form simulates to success;
// its data cut short, with a byte more, or empty is refused; with signer
// (the index of its signing account) not signing, or another key signing
// in its place, it is refused; nothing changes.
func (e *compEnv) badInputs(name string, payer solana.PrivateKey, pre []solana.Instruction, ix solana.Instruction, signer int, signers ...solana.PrivateKey) {
	e.t.Helper()
	if _, err := e.c.Simulate(e.ctx, payer, append(append([]solana.Instruction{}, pre...), ix), signers...); err != nil {
		e.t.Fatalf("%s: the valid instruction does not simulate: %v", name, err)
	}
	extra := []solana.PublicKey{}
	for _, m := range ix.Accounts() {
		if m.IsWritable {
			extra = append(extra, m.PublicKey)
		}
	}
	before := e.snapshot(extra...)
	data, _ := ix.Data()
	e.refused(name+": data cut short", before, payer, pre, withData(ix, data[:len(data)-1]), signers...)
	e.refused(name+": a byte more", before, payer, pre, withData(ix, append(append([]byte{}, data...), 0)), signers...)
	e.refused(name+": no data", before, payer, pre, withData(ix, nil), signers...)
	e.refused(name+": an unknown instruction", before, payer, pre, withData(ix, append([]byte{1, 2, 3, 4, 5, 6, 7, 8}, data[8:]...)), signers...)
	if signer < 0 {
		return
	}
	// Another key pays, so that the signer's key is not a signer of the
	// transaction by paying.
	who := ix.Accounts()[signer].PublicKey
	other := localnettest.NewFundedKeypair(e.t, e.v, solana.LAMPORTS_PER_SOL)
	e.refused(name+": the signer does not sign", before, other, pre, withAccount(ix, signer, who, false), withoutKey(signers, who)...)
	e.refused(name+": another key signs", before, other, pre, withAccount(ix, signer, other.PublicKey(), true))
}

func withoutKey(keys []solana.PrivateKey, k solana.PublicKey) []solana.PrivateKey {
	var out []solana.PrivateKey
	for _, x := range keys {
		if !x.PublicKey().Equals(k) {
			out = append(out, x)
		}
	}
	return out
}

// Every instruction's malformed data, missing or wrong signers, and a
// submission over the size limit are refused by the program on the real
// SVM, and change nothing.
func TestCompetitionRefusesBadInput(t *testing.T) {
	n := programtest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond}, deploy.Authorizer, deploy.Competition)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := &compEnv{t: t, ctx: ctx, c: n.Chain, v: n.Validator,
		authority: localnettest.NewFundedKeypair(t, n.Validator, 10*solana.LAMPORTS_PER_SOL)}
	p := competition.Program{ID: n.IDs[deploy.Competition]}
	a := e.authority.PublicKey()
	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(ctx, e.c, a, mint.PublicKey(), a, 0, treasurer.TokenProgramID)
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.authority, ixs, mint)
	e.mint = mint.PublicKey()
	params := competition.CreateParams{
		Id: "bad", MaxParams: 1000, SeqLen: 32, DataLocation: "/data", SequencesPerPage: 2,
		EpsilonStartPpm: 10_000, EpsilonEndPpm: 10_000, PagesPerRound: 4, TemperaturePpm: 100_000,
		RoundSlots: 1000, RewardPerRound: 1000, ValidatorStake: 10, Quorum: 1,
	}
	board := solana.NewWallet().PrivateKey
	// competition_create, by an authority that is not the payer: refused
	// before the competition exists (the board allocated in the same
	// transaction each time).
	owner := localnettest.NewFundedKeypair(t, n.Validator, solana.LAMPORTS_PER_SOL)
	ixs, k, err := p.Create(ctx, e.c, a, owner.PublicKey(), board.PublicKey(), e.mint, treasurer.TokenProgramID, params)
	if err != nil {
		t.Fatal(err)
	}
	e.k = k
	for _, bad := range []struct {
		what string
		ix   solana.Instruction
	}{
		{"competition_create: data cut short", withData(ixs[1], func() []byte { d, _ := ixs[1].Data(); return d[:len(d)-1] }())},
		{"competition_create: the authority does not sign", withAccount(ixs[1], 1, owner.PublicKey(), false)},
	} {
		if err := e.c.WaitNextSlot(ctx); err != nil {
			t.Fatal(err)
		}
		fresh := solana.NewWallet().PrivateKey
		alloc, _, err := p.Create(ctx, e.c, a, owner.PublicKey(), fresh.PublicKey(), e.mint, treasurer.TokenProgramID, params)
		if err != nil {
			t.Fatal(err)
		}
		signers := []solana.PrivateKey{fresh}
		if _, err := e.c.Send(ctx, e.authority, []solana.Instruction{alloc[0], withAccount(bad.ix, 3, fresh.PublicKey(), false)}, signers...); err == nil {
			t.Fatalf("%s: accepted", bad.what)
		}
		if data, _, err := e.c.AccountData(ctx, k.Address); !errors.Is(err, chain.ErrAccountNotFound) {
			t.Fatalf("%s: the competition exists (%d bytes, %v)", bad.what, len(data), err)
		}
	}
	e.send(e.authority, ixs, board, owner)
	o := owner.PublicKey()
	e.send(e.authority, []solana.Instruction{treasurer.MintTo(treasurer.TokenProgramID, e.mint, k.Pool, a, 1_000_000)})

	paused := true
	upd, err := k.Update(o, competition.UpdateParams{Paused: &paused})
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("competition_update", owner, nil, upd, 0)

	val := localnettest.NewFundedKeypair(t, n.Validator, solana.LAMPORTS_PER_SOL)
	e.tokens(val.PublicKey(), 100)
	join, err := k.JoinValidator(val.PublicKey(), o, e.account())
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("validator_join", val, nil, join, 0)
	e.send(val, []solana.Instruction{join})

	miner := localnettest.NewFundedKeypair(t, n.Validator, solana.LAMPORTS_PER_SOL)
	commit := competition.CommitParams{Commitment: [32]byte{1}, Revision: [32]byte{2}, Params: 1000, Repo: "http://hub/m"}
	cix, err := k.Commit(miner.PublicKey(), commit)
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("submission_commit", miner, nil, cix, 0)
	sub, _ := p.SubmissionAddress(k.Address, miner.PublicKey())
	// Over the size limit: ModelTooLarge, nothing created.
	big := commit
	big.Params = 1001
	bix, err := k.Commit(miner.PublicKey(), big)
	if err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(sub)
	_, err = e.c.Send(ctx, miner, []solana.Instruction{bix})
	var te *chain.TxError
	if !errors.As(err, &te) || te.Name != "ModelTooLarge" {
		t.Fatalf("a model of 1001 parameters in a competition of 1000: %v", err)
	}
	e.unchanged("an over-size submission", before)
	e.send(miner, []solana.Instruction{cix})
	if err := e.c.WaitNextSlot(ctx); err != nil {
		t.Fatal(err)
	}

	tick, err := k.Tick()
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("round_tick", e.authority, nil, tick, -1)
	e.send(e.authority, []solana.Instruction{tick})
	for competition.Phase(e.board().Round.State) != competition.PhaseEvaluating {
		if err := e.c.WaitNextSlot(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Send(ctx, e.authority, []solana.Instruction{tick}); err != nil && competition.Phase(e.board().Round.State) != competition.PhaseEvaluating {
			var te *chain.TxError
			if !errors.As(err, &te) || te.Name != "NothingToTick" {
				t.Fatal(err)
			}
		}
	}
	b := e.board()
	vote, err := k.Vote(val.PublicKey(), b.Round.Number, [32]byte{7}, make([]uint16, b.Round.Entries), [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	// The compute budget instruction precedes the vote.
	e.badInputs("round_vote", val, vote[:1], vote[1], 0)
	// A vote whose wins do not fit the round (one entry more): BadVote.
	wrong, err := k.Vote(val.PublicKey(), b.Round.Number, [32]byte{7}, make([]uint16, b.Round.Entries+1), [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	before = e.snapshot()
	if _, err := e.c.Send(ctx, val, wrong); !errors.As(err, &te) || te.Name != "BadVote" {
		t.Fatalf("a vote of %d wins in a round of %d entries: %v", b.Round.Entries+1, b.Round.Entries, err)
	}
	e.unchanged("a vote that does not fit the round", before)
	e.send(val, vote) // quorum 1: final, the miner earns the reward

	claim, err := k.Claim(miner.PublicKey(), miner.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	e.tokens(miner.PublicKey(), 0)
	e.badInputs("submission_claim", miner, nil, claim[1], 0)

	leave, err := k.LeaveValidator(val.PublicKey(), 10)
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("validator_leave", val, nil, leave, 0)

	dest := e.tokens(o, 0)
	wd, err := k.Withdraw(o, dest, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("competition_withdraw", owner, nil, wd, 0)

	// A faulted stake to burn: a second validator votes against the final round.
	liar := localnettest.NewFundedKeypair(t, n.Validator, solana.LAMPORTS_PER_SOL)
	e.tokens(liar.PublicKey(), 10)
	join2, err := k.JoinValidator(liar.PublicKey(), o, e.account())
	if err != nil {
		t.Fatal(err)
	}
	e.send(liar, []solana.Instruction{join2})
	lie, err := k.Vote(liar.PublicKey(), b.Round.Number, [32]byte{8}, make([]uint16, b.Round.Entries), [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	e.send(liar, lie)
	burn, err := k.BurnStakes()
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("stake_burn", e.authority, nil, burn, -1)

	// competition_close: once nothing is owed.
	e.send(miner, claim)
	e.send(val, []solana.Instruction{leave})
	e.send(e.authority, []solana.Instruction{burn})
	cl, err := k.Close(o, o)
	if err != nil {
		t.Fatal(err)
	}
	e.badInputs("competition_close", owner, nil, cl, 0)
	e.send(owner, []solana.Instruction{cl})
}
