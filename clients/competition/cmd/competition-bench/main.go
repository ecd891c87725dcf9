// Command competition-bench deploys the Authorizer and the Competition
// program on a fresh local validator and prints the compute units of each
// instruction (transaction totals) in a competition of 32 and one of 256
// submissions: creation, updates, validators joining with a stake, commits
// (a miner's first, which creates its Submission, and a later one), the
// ticks that open and seed a round, votes (a lying one, the one that
// finalizes the round: weights, payouts and the liar's fault over every
// entry, and a late agreeing one), a claim, the stake burn, a withdrawal, a
// validator leaving and the close.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
)

func main() {
	flag.Parse() // no flags: -h prints the usage line instead of running
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "competition-bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	ctx   context.Context
	net   *programtest.Net
	admin solana.PrivateKey
	mint  solana.PublicKey
	p     competition.Program
	rows  []string
	cu    map[string][]uint64
}

func (b *bench) measure(label string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) error {
	cu, err := b.net.Measure(b.ctx, label, payer, ixs, signers...)
	if err != nil {
		return err
	}
	if _, ok := b.cu[label]; !ok {
		b.rows = append(b.rows, label)
	}
	b.cu[label] = append(b.cu[label], cu)
	return nil
}

func (b *bench) send(payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) error {
	_, err := b.net.Chain.Send(b.ctx, payer, ixs, signers...)
	return err
}

// fund gives each key lamports, 20 transfers a transaction.
func (b *bench) fund(keys []solana.PrivateKey, lamports uint64) error {
	for i := 0; i < len(keys); i += 20 {
		var ixs []solana.Instruction
		for _, k := range keys[i:min(i+20, len(keys))] {
			ix, err := system.NewTransferInstruction(lamports, b.admin.PublicKey(), k.PublicKey()).ValidateAndBuild()
			if err != nil {
				return err
			}
			ixs = append(ixs, ix)
		}
		if err := b.send(b.admin, ixs); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	net, err := programtest.Launch(ctx, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Competition)
	if err != nil {
		return err
	}
	defer net.Stop()
	b := &bench{ctx: ctx, net: net, admin: solana.NewWallet().PrivateKey, p: competition.Program{ID: net.IDs[deploy.Competition]}, cu: map[string][]uint64{}}
	if _, err := net.Chain.Airdrop(ctx, b.admin.PublicKey(), 1000*solana.LAMPORTS_PER_SOL); err != nil {
		return err
	}
	mint := solana.NewWallet().PrivateKey
	a := b.admin.PublicKey()
	ixs, err := treasurer.CreateMint(ctx, net.Chain, a, mint.PublicKey(), a, 6, treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	if err := b.send(b.admin, ixs, mint); err != nil {
		return err
	}
	b.mint = mint.PublicKey()
	sizes := []int{32, 256}
	for _, n := range sizes {
		if err := b.competition(n); err != nil {
			return fmt.Errorf("%d submissions: %w", n, err)
		}
	}
	fmt.Printf("%-58s %12s %12s\n", "instruction (transaction CU)", "32 entries", "256 entries")
	for _, r := range b.rows {
		fmt.Printf("%-58s", r)
		for _, cu := range b.cu[r] {
			fmt.Printf(" %12d", cu)
		}
		fmt.Println()
	}
	return nil
}

func (b *bench) competition(n int) error {
	c, a := b.net.Chain, b.admin.PublicKey()
	board := solana.NewWallet().PrivateKey
	const stake = 1_000
	ixs, k, err := b.p.Create(b.ctx, c, a, a, board.PublicKey(), b.mint, treasurer.TokenProgramID, competition.CreateParams{
		Id: fmt.Sprintf("bench-%d", n), Architecture: 0, MaxParams: 1 << 30, SeqLen: 128, Precision: 0,
		DataLocation: "http://127.0.0.1:9200/", SequencesPerPage: 8,
		EpsilonStartPpm: 10_000, EpsilonEndPpm: 2_000, EpsilonDecaySlots: 10_000, PagesPerRound: 64, TemperaturePpm: 40_000,
		RoundSlots: 10_000, RewardPerRound: 1_000_000, ValidatorStake: stake, Quorum: 2,
	})
	if err != nil {
		return err
	}
	if err := b.measure("competition_create (+ board create_account, pool ATA)", b.admin, ixs, board); err != nil {
		return err
	}
	if err := b.send(b.admin, []solana.Instruction{treasurer.MintTo(treasurer.TokenProgramID, b.mint, k.Pool, a, 1_000_000_000)}); err != nil {
		return err
	}
	temp := uint32(50_000)
	ix, err := k.Update(a, competition.UpdateParams{TemperaturePpm: &temp})
	if err != nil {
		return err
	}
	if err := b.measure("competition_update (temperature)", b.admin, []solana.Instruction{ix}); err != nil {
		return err
	}

	vals := []solana.PrivateKey{solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey}
	miners := make([]solana.PrivateKey, n)
	for i := range miners {
		miners[i] = solana.NewWallet().PrivateKey
	}
	if err := b.fund(append(append([]solana.PrivateKey{}, vals...), miners...), solana.LAMPORTS_PER_SOL/10); err != nil {
		return err
	}
	acc, err := k.Account(b.ctx, c)
	if err != nil {
		return err
	}
	for i, v := range vals {
		create, ata, err := treasurer.CreateTokenAccount(a, v.PublicKey(), b.mint, treasurer.TokenProgramID)
		if err != nil {
			return err
		}
		if err := b.send(b.admin, []solana.Instruction{create, treasurer.MintTo(treasurer.TokenProgramID, b.mint, ata, a, stake)}); err != nil {
			return err
		}
		ix, err := k.JoinValidator(v.PublicKey(), a, acc)
		if err != nil {
			return err
		}
		if i == 0 {
			err = b.measure("validator_join (stake transfer)", v, []solana.Instruction{ix})
		} else {
			err = b.send(v, []solana.Instruction{ix})
		}
		if err != nil {
			return err
		}
	}
	for i, m := range miners {
		ix, err := k.Commit(m.PublicKey(), competition.CommitParams{Commitment: [32]byte{byte(i), 1}, Revision: [32]byte{byte(i), 2},
			Params: 1 << 20, Repo: "http://127.0.0.1:9100/competition/miners"})
		if err != nil {
			return err
		}
		if i == n-1 {
			err = b.measure("submission_commit (first: creates the Submission)", m, []solana.Instruction{ix})
		} else {
			err = b.send(m, []solana.Instruction{ix})
		}
		if err != nil {
			return err
		}
	}
	if err := c.WaitNextSlot(b.ctx); err != nil {
		return err
	}
	again, err := k.Commit(miners[0].PublicKey(), competition.CommitParams{Commitment: [32]byte{9}, Revision: [32]byte{9}, Params: 1 << 20,
		Repo: "http://127.0.0.1:9100/competition/miners"})
	if err != nil {
		return err
	}
	if err := b.measure("submission_commit (a later model)", miners[0], []solana.Instruction{again}); err != nil {
		return err
	}
	if err := c.WaitNextSlot(b.ctx); err != nil {
		return err
	}
	tick, err := k.Tick()
	if err != nil {
		return err
	}
	if err := b.measure("round_tick (opens: eligibility of every entry)", b.admin, []solana.Instruction{tick}); err != nil {
		return err
	}
	if err := c.WaitNextSlot(b.ctx); err != nil {
		return err
	}
	if err := c.WaitNextSlot(b.ctx); err != nil {
		return err
	}
	if err := b.measure("round_tick (seeds: a SlotHashes entry)", b.admin, []solana.Instruction{tick}); err != nil {
		return err
	}
	bd, err := k.ReadBoard(b.ctx, c)
	if err != nil {
		return err
	}
	wins := make([]uint16, bd.Round.Entries)
	for i := range wins {
		wins[i] = uint16(i % 64)
	}
	lie, err := k.Vote(vals[2].PublicKey(), bd.Round.Number, [32]byte{0xba, 0xd}, wins, [32]byte{})
	if err != nil {
		return err
	}
	if err := b.measure("round_vote (not final)", vals[2], lie); err != nil {
		return err
	}
	honest := func(v solana.PrivateKey) ([]solana.Instruction, error) {
		return k.Vote(v.PublicKey(), bd.Round.Number, [32]byte{1}, wins, [32]byte{})
	}
	v0, err := honest(vals[0])
	if err != nil {
		return err
	}
	if err := b.send(vals[0], v0); err != nil {
		return err
	}
	v1, err := honest(vals[1])
	if err != nil {
		return err
	}
	if err := b.measure("round_vote (finalizes: weights, payouts, 1 fault)", vals[1], v1); err != nil {
		return err
	}
	claims, err := k.Claim(miners[1].PublicKey(), miners[1].PublicKey())
	if err != nil {
		return err
	}
	if err := b.measure("submission_claim (+ idempotent ATA creation)", miners[1], claims); err != nil {
		return err
	}
	burn, err := k.BurnStakes()
	if err != nil {
		return err
	}
	if err := b.measure("stake_burn", b.admin, []solana.Instruction{burn}); err != nil {
		return err
	}
	dest, _ := treasurer.AssociatedTokenAddress(a, b.mint, treasurer.TokenProgramID)
	createDest, _, err := treasurer.CreateTokenAccount(a, a, b.mint, treasurer.TokenProgramID)
	if err != nil {
		return err
	}
	w, err := k.Withdraw(a, dest, 1_000)
	if err != nil {
		return err
	}
	if err := b.measure("competition_withdraw (+ idempotent ATA creation)", b.admin, []solana.Instruction{createDest, w}); err != nil {
		return err
	}
	leave, err := k.LeaveValidator(vals[0].PublicKey(), stake)
	if err != nil {
		return err
	}
	return b.measure("validator_leave (stake returned)", vals[0], []solana.Instruction{leave})
}
