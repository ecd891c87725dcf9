package explorertest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// Competition is a competition of the Competition program on a Net, paying
// from a pool of a fresh mint (decimals 0), and the wallets that take part:
// validators (staking) and miners, whose submissions are made up (the
// explorer evaluates nothing).
type Competition struct {
	Net        *programtest.Net
	Authority  solana.PrivateKey
	Mint       solana.PublicKey
	K          competition.Competition
	Validators []solana.PrivateKey
	Miners     []solana.PrivateKey
}

// CompetitionProgram is n's Competition deployment.
func CompetitionProgram(n *programtest.Net) competition.Program {
	return competition.Program{ID: n.IDs[deploy.Competition]}
}

// NewCompetition creates the competition p describes (p.Id its id), its
// pool holding pool tokens.
func NewCompetition(ctx context.Context, n *programtest.Net, p competition.CreateParams, pool uint64) (*Competition, error) {
	c := n.Chain
	k := &Competition{Net: n, Authority: solana.NewWallet().PrivateKey}
	a := k.Authority.PublicKey()
	if _, err := c.Airdrop(ctx, a, 100*solana.LAMPORTS_PER_SOL); err != nil {
		return nil, err
	}
	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(ctx, c, a, mint.PublicKey(), a, 0, treasurer.TokenProgramID)
	if err != nil {
		return nil, err
	}
	if _, err := c.Send(ctx, k.Authority, ixs, mint); err != nil {
		return nil, fmt.Errorf("create mint: %w", err)
	}
	k.Mint = mint.PublicKey()
	board := solana.NewWallet().PrivateKey
	ixs, comp, err := CompetitionProgram(n).Create(ctx, c, a, a, board.PublicKey(), k.Mint, treasurer.TokenProgramID, p)
	if err != nil {
		return nil, err
	}
	ixs = append(ixs, treasurer.MintTo(treasurer.TokenProgramID, k.Mint, comp.Pool, a, pool))
	if _, err := c.Send(ctx, k.Authority, ixs, board); err != nil {
		return nil, fmt.Errorf("create competition %q: %w", p.Id, err)
	}
	k.K = comp
	return k, nil
}

// fund gives each key lamports, in one transaction from the authority.
func (k *Competition) fund(ctx context.Context, keys []solana.PrivateKey, lamports uint64) error {
	var ixs []solana.Instruction
	for _, key := range keys {
		ix, err := system.NewTransferInstruction(lamports, k.Authority.PublicKey(), key.PublicKey()).ValidateAndBuild()
		if err != nil {
			return err
		}
		ixs = append(ixs, ix)
	}
	_, err := k.Net.Chain.Send(ctx, k.Authority, ixs)
	return err
}

// JoinValidators has count fresh validators join, each staking the
// competition's validator stake (minted to it first).
func (k *Competition) JoinValidators(ctx context.Context, count int) error {
	c, a := k.Net.Chain, k.Authority.PublicKey()
	acc, err := k.K.Account(ctx, c)
	if err != nil {
		return err
	}
	keys := make([]solana.PrivateKey, count)
	for i := range keys {
		keys[i] = solana.NewWallet().PrivateKey
	}
	if err := k.fund(ctx, keys, solana.LAMPORTS_PER_SOL); err != nil {
		return err
	}
	for _, v := range keys {
		if acc.ValidatorStake > 0 {
			ix, ata, err := treasurer.CreateTokenAccount(a, v.PublicKey(), k.Mint, treasurer.TokenProgramID)
			if err != nil {
				return err
			}
			if _, err := c.Send(ctx, k.Authority, []solana.Instruction{ix, treasurer.MintTo(treasurer.TokenProgramID, k.Mint, ata, a, acc.ValidatorStake)}); err != nil {
				return err
			}
		}
		ix, err := k.K.JoinValidator(v.PublicKey(), a, acc)
		if err != nil {
			return err
		}
		if _, err := c.Send(ctx, v, []solana.Instruction{ix}); err != nil {
			return fmt.Errorf("validator_join: %w", err)
		}
		k.Validators = append(k.Validators, v)
	}
	return nil
}

// Commit has count fresh miners commit a made-up model each (params
// parameters, in repo explorer-test/miner-N), then waits a slot, so that
// a round opened next evaluates them.
func (k *Competition) Commit(ctx context.Context, count int, params uint64) error {
	keys := make([]solana.PrivateKey, count)
	for i := range keys {
		keys[i] = solana.NewWallet().PrivateKey
	}
	if err := k.fund(ctx, keys, solana.LAMPORTS_PER_SOL); err != nil {
		return err
	}
	for _, m := range keys {
		i := len(k.Miners)
		revision := sha256.Sum256(fmt.Appendf(nil, "%s model %d", k.K.ID, i))
		ix, err := k.K.Commit(m.PublicKey(), competition.CommitParams{
			Commitment: sha256.Sum256(append(revision[:], m.PublicKey().Bytes()...)), Revision: revision, Params: params,
			Repo: fmt.Sprintf("explorer-test/miner-%d", i),
		})
		if err != nil {
			return err
		}
		if _, err := k.Net.Chain.Send(ctx, m, []solana.Instruction{ix}); err != nil {
			return fmt.Errorf("submission_commit: %w", err)
		}
		k.Miners = append(k.Miners, m)
	}
	return k.Net.Chain.WaitNextSlot(ctx)
}

// OpenRound ticks until a new round is open and seeded (evaluating); it
// returns the board then.
func (k *Competition) OpenRound(ctx context.Context) (*competition.Board, error) {
	c := k.Net.Chain
	b, err := k.K.ReadBoard(ctx, c)
	if err != nil {
		return nil, err
	}
	next := b.Round.Number + 1
	tick, err := k.K.Tick()
	if err != nil {
		return nil, err
	}
	for {
		b, err := k.K.ReadBoard(ctx, c)
		if err != nil {
			return nil, err
		}
		if b.Round.Number == next && competition.Phase(b.Round.State) == competition.PhaseEvaluating {
			return b, nil
		}
		// A tick opens the round, the next one (a slot later) seeds it.
		// NothingToTick while the seed's slot has not passed.
		if _, err := c.Send(ctx, k.Authority, []solana.Instruction{tick}); err != nil {
			if te := (*chain.TxError)(nil); !errors.As(err, &te) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Vote has validator v vote wins (one per entry of the round), with no
// invalid entry, on the board's round; tableHash makes its digest.
func (k *Competition) Vote(ctx context.Context, v int, round uint64, tableHash [32]byte, wins []uint16) error {
	key := k.Validators[v]
	ixs, err := k.K.Vote(key.PublicKey(), round, tableHash, wins, [32]byte{})
	if err != nil {
		return err
	}
	if _, err := k.Net.Chain.Send(ctx, key, ixs); err != nil {
		return fmt.Errorf("validator %d's round_vote: %w", v, err)
	}
	return nil
}

// Update is competition_update by the authority.
func (k *Competition) Update(ctx context.Context, p competition.UpdateParams) error {
	ix, err := k.K.Update(k.Authority.PublicKey(), p)
	if err != nil {
		return err
	}
	_, err = k.Net.Chain.Send(ctx, k.Authority, []solana.Instruction{ix})
	return err
}

// Claim has miner m claim what it earned.
func (k *Competition) Claim(ctx context.Context, m int) error {
	key := k.Miners[m]
	ixs, err := k.K.Claim(key.PublicKey(), key.PublicKey())
	if err != nil {
		return err
	}
	_, err = k.Net.Chain.Send(ctx, key, ixs)
	return err
}
