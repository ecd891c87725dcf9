// Command treasurer-bench deploys the Authorizer, the Coordinator and the
// Treasurer on a fresh local validator, drives a Treasurer run through
// creation, configuration, one epoch of a single client, claims, close and
// withdrawal, and prints the compute units of each instruction (transaction
// totals: run_create includes the system create_account of the coordinator
// account, claims the settle_points and token transfer CPIs).
package main

import (
	"context"
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
	fmt.Printf("%-52s %8d\n", label, cu)
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
	admin, user := solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey
	for _, k := range []solana.PrivateKey{admin, user} {
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

	fmt.Printf("%-52s %8s\n", "instruction", "CU")
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
	rc, err := coordinator.LoadRunConfig("config/test.toml")
	if err != nil {
		return err
	}
	params, err := rc.Params()
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
	if err := b.epoch(r, admin, user); err != nil {
		return err
	}
	if err := b.step("participant_claim (settle + transfer)", user)(r.Claim(u, userTokens)); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	if err := b.step("participant_claim (nothing new)", user)(r.Claim(u, userTokens)); err != nil {
		return err
	}
	pause := true
	if err := b.step("run_update (pause)", admin)(r.Update(a, treasurer.UpdateParams{Paused: &pause})); err != nil {
		return err
	}
	if err := b.step("run_close (+ free_coordinator)", admin)(r.Close(a, a)); err != nil {
		return err
	}
	return b.step("run_withdraw (closed run)", admin)(r.Withdraw(a, funder, 9_000))
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

// epoch has user join (permissionless grant), warm up, witness every round
// and the admin tick until the epoch's points are paid.
func (b *bench) epoch(r treasurer.Run, admin, user solana.PrivateKey) error {
	a, u := admin.PublicKey(), user.PublicKey()
	auth := authorizer.Program{ID: authorizer.Default().ID}
	grant, addr, err := auth.Create(a, a, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		return err
	}
	activate, err := auth.SetActive(a, addr, true)
	if err != nil {
		return err
	}
	if _, err := b.net.Chain.Send(b.ctx, admin, []solana.Instruction{grant, activate}); err != nil {
		return err
	}
	var p2p [32]byte
	_, _ = rand.Read(p2p[:])
	join, err := r.Coordinator.JoinRun(u, addr, p2p)
	if err != nil {
		return err
	}
	if _, err := b.net.Chain.Send(b.ctx, user, []solana.Instruction{join}); err != nil {
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
