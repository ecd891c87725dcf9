// Package competition is the client side of the Competition program
// (programs/competition): SN9's model competitions with validators held to
// bit-exact agreement. It derives the Competition and Submission addresses,
// builds every instruction for a program deployed at any id, reads the
// accounts, and runs the validator's loop (Decide, Validator) over the
// evaluation of clients/competition/evaluate and the arithmetic of
// clients/competition/rules.
package competition

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/bindings/competition"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// The program's account types, as generated from its IDL.
type (
	Account    = competition.Competition
	Board      = competition.Board
	Entry      = competition.Entry
	Submission = competition.Submission
	Model      = competition.Model
)

// Sizes and limits of the program (programs/competition/interface).
const (
	BoardSize      = 21_003
	MaxIDLen       = 32
	MaxRepoLen     = 192
	MaxSubmissions = 256
	MaxValidators  = 32
)

// Entry and validator states (the board's status bytes).
const (
	EntryActive   = 0
	EntryExcluded = 1

	ValidatorActive  = 0
	ValidatorLeft    = 1
	ValidatorFaulted = 2
)

// ValidateScope is the Authorizer scope that admits a validator to a
// permissioned competition; the grantor is the competition's authority.
var ValidateScope = []byte("CompetitionValidate")

// Program addresses one deployment of the Competition program and the
// Authorizer its permissioned competitions admit validators through.
type Program struct {
	ID         solana.PublicKey
	Authorizer authorizer.Program
}

// Default is the deployment named by the IDLs the bindings were generated from.
func Default() Program {
	return Program{ID: competition.ProgramID, Authorizer: authorizer.Default()}
}

func (p Program) authorizer() authorizer.Program {
	if p.Authorizer.ID.IsZero() {
		return authorizer.Default()
	}
	return p.Authorizer
}

// ErrBadID is returned for a competition id that is empty or over 32 bytes.
var ErrBadID = errors.New("a competition id is 1 to 32 bytes")

// Address derives the Competition PDA ["Competition", id].
func (p Program) Address(id string) (solana.PublicKey, error) {
	if len(id) == 0 || len(id) > MaxIDLen {
		return solana.PublicKey{}, fmt.Errorf("%q: %w", id, ErrBadID)
	}
	addr, _, err := solana.FindProgramAddress([][]byte{[]byte("Competition"), []byte(id)}, p.ID)
	return addr, err
}

// SubmissionAddress derives the Submission PDA ["Submission", competition, miner].
func (p Program) SubmissionAddress(comp, miner solana.PublicKey) (solana.PublicKey, error) {
	addr, _, err := solana.FindProgramAddress([][]byte{[]byte("Submission"), comp[:], miner[:]}, p.ID)
	return addr, err
}

func (p Program) rebind(ix solana.Instruction, err error) (solana.Instruction, error) {
	return chain.Rebind(p.ID, ix, err)
}

// Competition names one competition and the accounts its instructions need.
type Competition struct {
	Program Program
	Address solana.PublicKey
	ID      string
	Board   solana.PublicKey
	// Mint, TokenProgram and Pool are zero without a reward pool.
	Mint, TokenProgram, Pool solana.PublicKey
}

// HasPool reports whether the competition pays rewards.
func (k Competition) HasPool() bool { return !k.Mint.IsZero() }

// optional is the account, or the program id standing for an absent one
// (Anchor's convention).
func (k Competition) optional(a solana.PublicKey) solana.PublicKey {
	if a.IsZero() {
		return k.Program.ID
	}
	return a
}

// CreateParams describes a new competition (the program checks each
// field; see programs/competition/README.md).
type CreateParams = competition.CompetitionCreateParams

// Create returns the instructions that allocate the board (rent exempt,
// owned by the program) and create the competition; send them in one
// transaction signed by payer, authority and board. A zero mint makes a
// competition without a reward pool.
func (p Program) Create(ctx context.Context, c *chain.Client, payer, authority, board, mint, tokenProgram solana.PublicKey, params CreateParams) ([]solana.Instruction, Competition, error) {
	addr, err := p.Address(params.Id)
	if err != nil {
		return nil, Competition{}, err
	}
	k := Competition{Program: p, Address: addr, ID: params.Id, Board: board}
	if !mint.IsZero() {
		if err := treasurer.CheckTokenProgram(tokenProgram); err != nil {
			return nil, Competition{}, err
		}
		pool, err := treasurer.AssociatedTokenAddress(addr, mint, tokenProgram)
		if err != nil {
			return nil, Competition{}, err
		}
		k.Mint, k.TokenProgram, k.Pool = mint, tokenProgram, pool
	}
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, BoardSize, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, Competition{}, fmt.Errorf("reading the rent for the board: %w", err)
	}
	alloc, err := system.NewCreateAccountInstruction(rent, BoardSize, p.ID, payer, board).ValidateAndBuild()
	if err != nil {
		return nil, Competition{}, err
	}
	// The Associated Token program is passed with or without a pool: the
	// program checks it either way (competition_create.rs).
	create, err := p.rebind(competition.NewCompetitionCreateInstruction(params, payer, authority, addr, board,
		k.optional(k.Mint), k.optional(k.Pool), k.optional(k.TokenProgram), treasurer.AssociatedTokenProgramID, solana.SystemProgramID))
	if err != nil {
		return nil, Competition{}, err
	}
	return []solana.Instruction{alloc, create}, k, nil
}

// ErrNotCompetition is returned for an account that exists but is not the
// expected account of this program.
var ErrNotCompetition = errors.New("not an account of this Competition program")

// Open finds a competition by its id and reads its account.
func (p Program) Open(ctx context.Context, c *chain.Client, id string) (Competition, *Account, error) {
	addr, err := p.Address(id)
	if err != nil {
		return Competition{}, nil, err
	}
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return Competition{}, nil, fmt.Errorf("competition %q: %w", id, err)
	}
	if !owner.Equals(p.ID) {
		return Competition{}, nil, fmt.Errorf("account %s is owned by %s: %w", addr, owner, ErrNotCompetition)
	}
	acc, err := competition.ParseAccount_Competition(data)
	if err != nil {
		return Competition{}, nil, fmt.Errorf("account %s: %w: %v", addr, ErrNotCompetition, err)
	}
	k := Competition{Program: p, Address: addr, ID: acc.Id, Board: acc.Board}
	if !acc.RewardMint.IsZero() {
		k.Mint, k.TokenProgram, k.Pool = acc.RewardMint, acc.TokenProgram, acc.Pool
	}
	return k, acc, nil
}

// Account reads the competition's account again.
func (k Competition) Account(ctx context.Context, c *chain.Client) (*Account, error) {
	_, acc, err := k.Program.Open(ctx, c, k.ID)
	return acc, err
}

// ReadBoard reads the board.
func (k Competition) ReadBoard(ctx context.Context, c *chain.Client) (*Board, error) {
	data, owner, err := c.AccountData(ctx, k.Board)
	if err != nil {
		return nil, fmt.Errorf("board %s: %w", k.Board, err)
	}
	if !owner.Equals(k.Program.ID) {
		return nil, fmt.Errorf("board %s is owned by %s: %w", k.Board, owner, ErrNotCompetition)
	}
	b, err := competition.ParseAccount_Board(data)
	if err != nil {
		return nil, fmt.Errorf("board %s: %w: %v", k.Board, ErrNotCompetition, err)
	}
	return b, nil
}

// ReadSubmission reads a miner's Submission (nil, nil when it has none).
func (k Competition) ReadSubmission(ctx context.Context, c *chain.Client, miner solana.PublicKey) (*Submission, error) {
	addr, err := k.Program.SubmissionAddress(k.Address, miner)
	if err != nil {
		return nil, err
	}
	data, owner, err := c.AccountData(ctx, addr)
	if errors.Is(err, chain.ErrAccountNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("submission of %s: %w", miner, err)
	}
	if !owner.Equals(k.Program.ID) {
		return nil, fmt.Errorf("submission %s is owned by %s: %w", addr, owner, ErrNotCompetition)
	}
	s, err := competition.ParseAccount_Submission(data)
	if err != nil {
		return nil, fmt.Errorf("submission %s: %w: %v", addr, ErrNotCompetition, err)
	}
	return s, nil
}

// UpdateParams changes what may change; nil fields stay.
type UpdateParams = competition.CompetitionUpdateParams

// Update is competition_update, signed by the authority.
func (k Competition) Update(authority solana.PublicKey, params UpdateParams) (solana.Instruction, error) {
	return k.Program.rebind(competition.NewCompetitionUpdateInstruction(params, authority, k.Address))
}

// JoinValidator is validator_join: the stake moves from the validator's
// associated token account; in a permissioned competition the validator's
// authorization from authority is passed.
func (k Competition) JoinValidator(validator, authority solana.PublicKey, acc *Account) (solana.Instruction, error) {
	auth := k.Program.ID
	if acc.Permissioned {
		a, err := k.Authorization(authority, validator)
		if err != nil {
			return nil, err
		}
		auth = a
	}
	from, err := k.tokens(validator, acc.ValidatorStake > 0)
	if err != nil {
		return nil, err
	}
	staked := acc.ValidatorStake > 0
	return k.Program.rebind(competition.NewValidatorJoinInstruction(competition.ValidatorJoinParams{}, validator, k.Address, k.Board, auth,
		from, k.when(staked, k.Pool), k.when(staked, k.Mint), k.when(staked, k.TokenProgram)))
}

// Authorization is the Authorizer PDA that admits validator (its own, not
// the permissionless one) to the competition of authority.
func (k Competition) Authorization(authority, validator solana.PublicKey) (solana.PublicKey, error) {
	a, _, err := k.Program.authorizer().Address(authority, validator, ValidateScope)
	return a, err
}

// when is a when used, else the program id (an absent account).
func (k Competition) when(used bool, a solana.PublicKey) solana.PublicKey {
	if used {
		return a
	}
	return k.Program.ID
}

// tokens is owner's associated token account of the mint, or the program
// id when no tokens move.
func (k Competition) tokens(owner solana.PublicKey, used bool) (solana.PublicKey, error) {
	if !used {
		return k.Program.ID, nil
	}
	return treasurer.AssociatedTokenAddress(owner, k.Mint, k.TokenProgram)
}

// LeaveValidator is validator_leave: the stake goes back to the validator's
// associated token account.
func (k Competition) LeaveValidator(validator solana.PublicKey, stake uint64) (solana.Instruction, error) {
	to, err := k.tokens(validator, stake > 0)
	if err != nil {
		return nil, err
	}
	staked := stake > 0
	return k.Program.rebind(competition.NewValidatorLeaveInstruction(competition.ValidatorLeaveParams{}, validator, k.Address, k.Board,
		to, k.when(staked, k.Pool), k.when(staked, k.Mint), k.when(staked, k.TokenProgram)))
}

// CommitParams is a miner's submission.
type CommitParams = competition.SubmissionCommitParams

// Commit is submission_commit.
func (k Competition) Commit(miner solana.PublicKey, params CommitParams) (solana.Instruction, error) {
	sub, err := k.Program.SubmissionAddress(k.Address, miner)
	if err != nil {
		return nil, err
	}
	return k.Program.rebind(competition.NewSubmissionCommitInstruction(params, miner, k.Address, k.Board, sub, solana.SystemProgramID))
}

// Tick is round_tick (anyone).
func (k Competition) Tick() (solana.Instruction, error) {
	return k.Program.rebind(competition.NewRoundTickInstruction(competition.RoundTickParams{}, k.Address, k.Board))
}

// VoteComputeUnits is the compute budget of a vote: one that finalizes a
// round of 256 entries took 98,160 CU with one fault (competition-bench),
// and each further fault or vote adds little; this leaves three times that.
const VoteComputeUnits = 300_000

// Vote is round_vote, with the compute budget a finalizing vote needs.
func (k Competition) Vote(validator solana.PublicKey, round uint64, tableHash [32]byte, wins []uint16, invalid [32]byte) ([]solana.Instruction, error) {
	budget, err := computebudget.NewSetComputeUnitLimitInstruction(VoteComputeUnits).ValidateAndBuild()
	if err != nil {
		return nil, err
	}
	vote, err := k.Program.rebind(competition.NewRoundVoteInstruction(competition.RoundVoteParams{
		Round: round, TableHash: tableHash, Wins: wins, Invalid: invalid,
	}, validator, k.Address, k.Board, k.optional(k.Pool)))
	if err != nil {
		return nil, err
	}
	return []solana.Instruction{budget, vote}, nil
}

// Claim is submission_claim, preceded by the idempotent creation of the
// miner's associated token account (payer pays its rent).
func (k Competition) Claim(payer, miner solana.PublicKey) ([]solana.Instruction, error) {
	if !k.HasPool() {
		return nil, errors.New("the competition has no reward pool: there is nothing to claim")
	}
	sub, err := k.Program.SubmissionAddress(k.Address, miner)
	if err != nil {
		return nil, err
	}
	ata, to, err := treasurer.CreateTokenAccount(payer, miner, k.Mint, k.TokenProgram)
	if err != nil {
		return nil, err
	}
	claim, err := k.Program.rebind(competition.NewSubmissionClaimInstruction(competition.SubmissionClaimParams{}, miner, k.Address, k.Board, sub,
		k.Pool, to, k.Mint, k.TokenProgram))
	if err != nil {
		return nil, err
	}
	return []solana.Instruction{ata, claim}, nil
}

// BurnStakes is stake_burn (anyone): burns the stakes of faulted validators.
func (k Competition) BurnStakes() (solana.Instruction, error) {
	return k.Program.rebind(competition.NewStakeBurnInstruction(competition.StakeBurnParams{}, k.Address, k.Pool, k.Mint, k.TokenProgram))
}

// Withdraw is competition_withdraw: amount to the destination token account.
func (k Competition) Withdraw(authority, destination solana.PublicKey, amount uint64) (solana.Instruction, error) {
	return k.Program.rebind(competition.NewCompetitionWithdrawInstruction(competition.CompetitionWithdrawParams{Amount: amount},
		authority, k.Address, k.Pool, destination, k.Mint, k.TokenProgram))
}

// Close is competition_close: the board's rent goes to spill.
func (k Competition) Close(authority, spill solana.PublicKey) (solana.Instruction, error) {
	return k.Program.rebind(competition.NewCompetitionCloseInstruction(competition.CompetitionCloseParams{}, authority, spill, k.Address, k.Board))
}

// Constraints are the competition's model constraints as the evaluator
// takes them; vocab and tokenizer come from its dataset.
func Constraints(acc *Account, vocab uint32, tokenizerName string) (evaluate.Constraints, error) {
	arch, err := evaluate.ArchitectureOf(acc.Architecture)
	if err != nil {
		return evaluate.Constraints{}, err
	}
	prec, err := evaluate.PrecisionOf(acc.Precision)
	if err != nil {
		return evaluate.Constraints{}, err
	}
	return evaluate.Constraints{Architecture: arch, MaxParams: acc.MaxParams, Vocab: vocab, Tokenizer: tokenizerName, SeqLen: acc.SeqLen, Precision: prec}, nil
}

// TokenizerHash is a competition's tokenizer_hash for a dataset whose
// manifest names tokenizer: the SHA-256 of the name ("byte", "gpt2", or
// "json:" and the start of the tokenizer file's hash). Validators refuse a
// dataset whose tokenizer does not hash to it.
func TokenizerHash(tokenizer string) [32]byte { return sha256.Sum256([]byte(tokenizer)) }
