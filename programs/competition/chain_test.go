// The Competition program on a real SVM (the embedded localnet, LiteSVM):
// deployed through the loader, driven through its generated bindings from
// creation to close, with the token movements checked at every step.
package competition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	bind "github.com/psyche-go/psyche/clients/bindings/competition"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

const (
	boardSpace = 21_003
	stake      = 50
	reward     = 1_000
)

type env struct {
	t      *testing.T
	ctx    context.Context
	net    *programtest.Net
	c      *chain.Client
	tp     solana.PublicKey
	mint   solana.PublicKey
	minter solana.PrivateKey
	comp   solana.PublicKey
	board  solana.PublicKey
	pool   solana.PublicKey
}

func (e *env) send(payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	_, err := e.c.Send(ctx, payer, ixs, signers...)
	return err
}

func (e *env) must(payer solana.PrivateKey, ix solana.Instruction, err error, signers ...solana.PrivateKey) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.send(payer, []solana.Instruction{ix}, signers...); err != nil {
		e.t.Fatalf("send: %v", err)
	}
}

// fails sends ix and wants the program error `name`.
func (e *env) fails(name string, payer solana.PrivateKey, ix solana.Instruction, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	// A transaction identical to one sent in this slot would be that one.
	if err := e.c.WaitNextSlot(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	err = e.send(payer, []solana.Instruction{ix})
	var te *chain.TxError
	if !errors.As(err, &te) || te.Name != name {
		e.t.Fatalf("want %s, got %v", name, err)
	}
}

// wallet is a funded key with a token account holding `tokens`.
func (e *env) wallet(tokens uint64) (solana.PrivateKey, solana.PublicKey) {
	e.t.Helper()
	k := localnettest.NewFundedKeypair(e.t, e.net.Validator, 5*solana.LAMPORTS_PER_SOL)
	create, ata, err := treasurer.CreateTokenAccount(k.PublicKey(), k.PublicKey(), e.mint, e.tp)
	if err != nil {
		e.t.Fatal(err)
	}
	ixs := []solana.Instruction{create}
	if tokens > 0 {
		ixs = append(ixs, treasurer.MintTo(e.tp, e.mint, ata, e.minter.PublicKey(), tokens))
	}
	if err := e.send(k, ixs, e.minter); err != nil {
		e.t.Fatal(err)
	}
	return k, ata
}

func (e *env) balance(account solana.PublicKey) uint64 {
	e.t.Helper()
	a, err := treasurer.FetchTokenAccount(e.ctx, e.c, account)
	if err != nil {
		e.t.Fatal(err)
	}
	return a.Amount
}

func (e *env) competition() *bind.Competition {
	e.t.Helper()
	data, _, err := e.c.AccountData(e.ctx, e.comp)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := bind.ParseAccount_Competition(data)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) boardState() *bind.Board {
	e.t.Helper()
	data, _, err := e.c.AccountData(e.ctx, e.board)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := bind.ParseAccount_Board(data)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// tick sends round_tick until it does something (a seed waits for a newer
// slot hash).
func (e *env) tick(payer solana.PrivateKey) {
	e.t.Helper()
	for i := 0; ; i++ {
		if err := e.c.WaitNextSlot(e.ctx); err != nil {
			e.t.Fatal(err)
		}
		ix, err := bind.NewRoundTickInstruction(bind.RoundTickParams{}, e.comp, e.board)
		if err != nil {
			e.t.Fatal(err)
		}
		err = e.send(payer, []solana.Instruction{ix})
		var te *chain.TxError
		if err == nil {
			return
		}
		if !errors.As(err, &te) || te.Name != "NothingToTick" || i == 20 {
			e.t.Fatalf("round_tick: %v", err)
		}
	}
}

func TestCompetitionOnChain(t *testing.T) {
	net := programtest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Competition)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := &env{t: t, ctx: ctx, net: net, c: net.Chain, tp: solana.TokenProgramID}
	if !net.IDs[deploy.Competition].Equals(bind.ProgramID) {
		t.Fatalf("deployed at %s, the bindings say %s", net.IDs[deploy.Competition], bind.ProgramID)
	}
	authority := localnettest.NewFundedKeypair(t, net.Validator, 10*solana.LAMPORTS_PER_SOL)
	e.minter = authority
	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(ctx, e.c, authority.PublicKey(), mint.PublicKey(), authority.PublicKey(), 6, e.tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.send(authority, ixs, mint); err != nil {
		t.Fatal(err)
	}
	e.mint = mint.PublicKey()
	createTokens, authorityTokens, err := treasurer.CreateTokenAccount(authority.PublicKey(), authority.PublicKey(), e.mint, e.tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.send(authority, []solana.Instruction{createTokens, treasurer.MintTo(e.tp, e.mint, authorityTokens, authority.PublicKey(), 100_000)}); err != nil {
		t.Fatal(err)
	}

	// Create: the client allocates the board in the same transaction.
	const id = "chain-test"
	e.comp, _, err = solana.FindProgramAddress([][]byte{[]byte("Competition"), []byte(id)}, bind.ProgramID)
	if err != nil {
		t.Fatal(err)
	}
	if e.pool, err = treasurer.AssociatedTokenAddress(e.comp, e.mint, e.tp); err != nil {
		t.Fatal(err)
	}
	board := solana.NewWallet().PrivateKey
	e.board = board.PublicKey()
	rent, err := e.c.RPC.GetMinimumBalanceForRentExemption(ctx, boardSpace, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	alloc := system.NewCreateAccountInstruction(rent, boardSpace, bind.ProgramID, authority.PublicKey(), e.board).Build()
	params := bind.CompetitionCreateParams{
		Id: id, Architecture: 1, MaxParams: 1_000_000, SeqLen: 1024, DataLocation: "hf://datasets/test", SequencesPerPage: 10,
		EpsilonStartPpm: 5_000, EpsilonEndPpm: 1_000, EpsilonDecaySlots: 1_000, PagesPerRound: 4, TemperaturePpm: 1_000_000,
		RoundSlots: 3_000, RewardPerRound: reward, ValidatorStake: stake, Quorum: 2,
	}
	create, err := bind.NewCompetitionCreateInstruction(params, authority.PublicKey(), authority.PublicKey(), e.comp, e.board, e.mint, e.pool,
		e.tp, solana.SPLAssociatedTokenAccountProgramID, solana.SystemProgramID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.send(authority, []solana.Instruction{alloc, create}, board); err != nil {
		t.Fatalf("competition_create: %v", err)
	}
	if c := e.competition(); c.Pool != e.pool || c.Board != e.board || c.Quorum != 2 {
		t.Fatalf("competition %+v", c)
	}
	// Fund the pool.
	e.must(authority, treasurer.TransferChecked(e.tp, authorityTokens, e.mint, e.pool, authority.PublicKey(), 10_000, 6), nil)

	// Three validators stake; two miners commit.
	type member struct {
		key    solana.PrivateKey
		tokens solana.PublicKey
	}
	var validators, miners []member
	for range 3 {
		k, a := e.wallet(stake)
		validators = append(validators, member{k, a})
		ix, err := bind.NewValidatorJoinInstruction(bind.ValidatorJoinParams{}, k.PublicKey(), e.comp, e.board, bind.ProgramID, a, e.pool, e.mint, e.tp)
		e.must(k, ix, err)
		if e.balance(a) != 0 {
			t.Fatal("the stake did not move")
		}
	}
	for i := range 2 {
		k, a := e.wallet(0)
		miners = append(miners, member{k, a})
		sub, _, _ := solana.FindProgramAddress([][]byte{[]byte("Submission"), e.comp[:], k.PublicKey().Bytes()}, bind.ProgramID)
		p := bind.SubmissionCommitParams{Commitment: [32]byte{byte(i + 1)}, Revision: [32]byte{byte(i + 9)}, Params: 124_000, Repo: "miner/model"}
		ix, err := bind.NewSubmissionCommitInstruction(p, k.PublicKey(), e.comp, e.board, sub, solana.SystemProgramID)
		e.must(k, ix, err)
	}
	if e.balance(e.pool) != 10_000+3*stake {
		t.Fatalf("pool %d", e.balance(e.pool))
	}

	// Open and seed a round.
	e.tick(authority)
	e.tick(authority)
	b := e.boardState()
	if b.Round.State != 2 || b.Round.Entries != 2 || b.Round.Eligible[0] != 0b11 || b.Round.Seed == [32]byte{} {
		t.Fatalf("round %+v", b.Round)
	}
	// Two validators agree (entry 0 wins every page: the most it can), the
	// third votes another table first.
	vote := func(v member, table byte) (solana.Instruction, error) {
		p := bind.RoundVoteParams{Round: b.Round.Number, TableHash: [32]byte{table}, Wins: []uint16{4, 0}}
		return bind.NewRoundVoteInstruction(p, v.key.PublicKey(), e.comp, e.board, e.pool)
	}
	ix, err := vote(validators[2], 0xee)
	e.must(validators[2].key, ix, err)
	ix, err = vote(validators[0], 1)
	e.must(validators[0].key, ix, err)
	ix, err = vote(validators[0], 1)
	e.fails("AlreadyVoted", validators[0].key, ix, err)
	ix, err = vote(validators[1], 1)
	e.must(validators[1].key, ix, err)
	b = e.boardState()
	c := e.competition()
	if b.Round.State != 3 || b.Round.Agreeing != 2 || b.Validators[2].Status != 2 || c.Forfeited != stake || c.Stakes != 2*stake {
		t.Fatalf("after the quorum: round %+v, validator 2 %+v, competition %+v", b.Round, b.Validators[2], c)
	}
	earned0, earned1 := b.Submissions[0].Earned, b.Submissions[1].Earned
	if earned1 == 0 || earned0 <= earned1 || earned0+earned1 > reward || earned0+earned1 < reward-2 || c.Unclaimed != earned0+earned1 {
		t.Fatalf("earned %d and %d of %d, unclaimed %d", earned0, earned1, reward, c.Unclaimed)
	}

	// The miners claim, once.
	for i, m := range miners {
		sub, _, _ := solana.FindProgramAddress([][]byte{[]byte("Submission"), e.comp[:], m.key.PublicKey().Bytes()}, bind.ProgramID)
		claim := func() (solana.Instruction, error) {
			return bind.NewSubmissionClaimInstruction(bind.SubmissionClaimParams{}, m.key.PublicKey(), e.comp, e.board, sub, e.pool, m.tokens, e.mint, e.tp)
		}
		ix, err := claim()
		e.must(m.key, ix, err)
		if want := b.Submissions[i].Earned; e.balance(m.tokens) != want {
			t.Fatalf("miner %d holds %d, earned %d", i, e.balance(m.tokens), want)
		}
		ix, err = claim()
		e.fails("NothingToClaim", m.key, ix, err)
	}

	// The forfeited stake is burned: the supply drops.
	before, err := treasurer.FetchMint(ctx, e.c, e.mint)
	if err != nil {
		t.Fatal(err)
	}
	ix, err = bind.NewStakeBurnInstruction(bind.StakeBurnParams{}, e.comp, e.pool, e.mint, e.tp)
	e.must(authority, ix, err)
	after, err := treasurer.FetchMint(ctx, e.c, e.mint)
	if err != nil {
		t.Fatal(err)
	}
	if before.Supply-after.Supply != stake {
		t.Fatalf("supply %d -> %d", before.Supply, after.Supply)
	}

	// The honest validators leave with their stakes; the faulted one cannot.
	for _, v := range validators[:2] {
		ix, err := bind.NewValidatorLeaveInstruction(bind.ValidatorLeaveParams{}, v.key.PublicKey(), e.comp, e.board, v.tokens, e.pool, e.mint, e.tp)
		e.must(v.key, ix, err)
		if e.balance(v.tokens) != stake {
			t.Fatal("the stake did not come back")
		}
	}
	ix, err = bind.NewValidatorLeaveInstruction(bind.ValidatorLeaveParams{}, validators[2].key.PublicKey(), e.comp, e.board, bind.ProgramID, bind.ProgramID, bind.ProgramID, bind.ProgramID)
	e.fails("ValidatorFaulted", validators[2].key, ix, err)

	// Nothing is reserved now: the authority closes and takes the rest.
	closeIx, err := bind.NewCompetitionCloseInstruction(bind.CompetitionCloseParams{}, authority.PublicKey(), authority.PublicKey(), e.comp, e.board)
	e.must(authority, closeIx, err)
	rest := e.balance(e.pool)
	withdraw, err := bind.NewCompetitionWithdrawInstruction(bind.CompetitionWithdrawParams{Amount: rest + 1}, authority.PublicKey(), e.comp, e.pool,
		authorityTokens, e.mint, e.tp)
	e.fails("WithdrawExceedsUnallocated", authority, withdraw, err)
	withdraw, err = bind.NewCompetitionWithdrawInstruction(bind.CompetitionWithdrawParams{Amount: rest}, authority.PublicKey(), e.comp, e.pool,
		authorityTokens, e.mint, e.tp)
	e.must(authority, withdraw, err)
	if e.balance(e.pool) != 0 || !e.competition().Closed {
		t.Fatal("the pool is not empty or the competition not closed")
	}
	if _, _, err := e.c.AccountData(ctx, e.board); err == nil {
		t.Fatal("the board is still open")
	}
}
