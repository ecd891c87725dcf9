// Package treasurer is the client side of the Treasurer program: token
// rewards for Coordinator runs. It derives the Run, Participant and join
// authorization addresses, builds every instruction for a program deployed at
// any id, creates runs (the Coordinator run is created by CPI, with the Run
// PDA as its main authority), fetches the accounts, and computes with the
// program's rules what a claim would pay, what burn_forfeited would burn,
// what the run must keep and how many epochs its tokens fund. The SPL helpers in tokens.go (mints, token
// accounts, transfers) serve Token and Token-2022 alike, so no spl-token CLI
// is needed.
package treasurer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	bin "github.com/gagliardetto/binary"
	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// The program's account types, as generated from its IDL.
type (
	RunAccount  = treasurer.Run
	Participant = treasurer.Participant
)

// Program addresses one deployment of the Treasurer, the Coordinator it
// drives and the Authorizer its deposits grant joins in (a zero Authorizer id
// means the default one).
type Program struct {
	ID          solana.PublicKey
	Coordinator coordinator.Program
	Authorizer  authorizer.Program
}

// Default is the deployment named by the IDLs the bindings were generated from.
func Default() Program {
	return Program{ID: treasurer.ProgramID, Coordinator: coordinator.Default(), Authorizer: authorizer.Default()}
}

// authorizer is the Authorizer deployment, the default one when unset.
func (p Program) authorizer() authorizer.Program {
	if p.Authorizer.ID.IsZero() {
		return authorizer.Default()
	}
	return p.Authorizer
}

// DefaultIndex is a run's index when none is chosen: the first 8 bytes of
// sha256(run_id), little-endian (as the reference's tools compute it).
func DefaultIndex(runID string) uint64 {
	h := sha256.Sum256([]byte(runID))
	return binary.LittleEndian.Uint64(h[:8])
}

// RunAddress derives the Run PDA ["Run", index LE].
func (p Program) RunAddress(index uint64) (solana.PublicKey, error) {
	addr, _, err := solana.FindProgramAddress([][]byte{[]byte("Run"), binary.LittleEndian.AppendUint64(nil, index)}, p.ID)
	return addr, err
}

// ParticipantAddress derives the Participant PDA ["Participant", run, user].
func (p Program) ParticipantAddress(run, user solana.PublicKey) (solana.PublicKey, error) {
	addr, _, err := solana.FindProgramAddress([][]byte{[]byte("Participant"), run[:], user[:]}, p.ID)
	return addr, err
}

// rebind points an instruction built by the bindings at this deployment.
func (p Program) rebind(ix solana.Instruction, err error) (solana.Instruction, error) {
	return chain.Rebind(p.ID, ix, err)
}

// Run names one Treasurer run and the accounts its instructions need.
type Run struct {
	Program      Program
	Address      solana.PublicKey
	Index        uint64
	Mint         solana.PublicKey
	TokenProgram solana.PublicKey
	// Collateral is the Run's associated token account: rewards are paid
	// from it, and any transfer into it tops the run up.
	Collateral  solana.PublicKey
	Coordinator coordinator.Run
}

// CreateParams describes a new run.
type CreateParams struct {
	RunID string
	// Index of the Run PDA; nil means DefaultIndex(RunID).
	Index *uint64
	// MainAuthority configures the run and withdraws what nobody is owed.
	MainAuthority solana.PublicKey
	// JoinAuthority grants join_run authorizations in the Authorizer. With a
	// JoinDeposit it must be zero or the Run (it is set to the Run).
	JoinAuthority solana.PublicKey
	// JoinDeposit, when set, makes the Run its own join authority: a user
	// joins after participant_deposit of this many base units (0: a free
	// registration through the Treasurer).
	JoinDeposit   *uint64
	ClientVersion string
	Mint          solana.PublicKey
	// TokenProgram owns Mint: SPL Token or Token-2022.
	TokenProgram solana.PublicKey
}

// CreateRun returns the instructions that allocate the coordinator account
// (rent exempt, owned by the Coordinator) and create the run; send them in one
// transaction signed by payer and account.
func (p Program) CreateRun(ctx context.Context, c *chain.Client, payer, account solana.PublicKey, params CreateParams) ([]solana.Instruction, Run, error) {
	if len(params.RunID) == 0 || len(params.RunID) > coordinator.MaxRunIDLen {
		return nil, Run{}, fmt.Errorf("%q: %w", params.RunID, coordinator.ErrBadRunID)
	}
	if len(params.ClientVersion) == 0 || len(params.ClientVersion) > coordinator.MaxClientVersionLen {
		return nil, Run{}, fmt.Errorf("client version %q must be 1 to %d bytes", params.ClientVersion, coordinator.MaxClientVersionLen)
	}
	if err := CheckTokenProgram(params.TokenProgram); err != nil {
		return nil, Run{}, err
	}
	index := DefaultIndex(params.RunID)
	if params.Index != nil {
		index = *params.Index
	}
	run, err := p.OpenIndex(index, params.RunID, account, params.Mint, params.TokenProgram)
	if err != nil {
		return nil, Run{}, err
	}
	join, deposit := params.JoinAuthority, uint64(0)
	if params.JoinDeposit != nil {
		if !join.IsZero() && !join.Equals(run.Address) {
			return nil, Run{}, fmt.Errorf("a run with a join deposit is its own join authority (%s), not %s", run.Address, join)
		}
		join, deposit = run.Address, *params.JoinDeposit
	}
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, coordinator.AccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, Run{}, fmt.Errorf("reading the rent for the coordinator account: %w", err)
	}
	alloc, err := system.NewCreateAccountInstruction(rent, coordinator.AccountSize, p.Coordinator.ID, payer, account).ValidateAndBuild()
	if err != nil {
		return nil, Run{}, err
	}
	create, err := p.rebind(treasurer.NewRunCreateInstruction(treasurer.RunCreateParams{
		Index:         index,
		RunId:         params.RunID,
		ClientVersion: params.ClientVersion,
		MainAuthority: params.MainAuthority,
		JoinAuthority: join,
		JoinDeposit:   deposit,
	}, payer, run.Address, run.Collateral, params.Mint, run.Coordinator.Instance, account, p.Coordinator.ID,
		params.TokenProgram, AssociatedTokenProgramID, solana.SystemProgramID))
	if err != nil {
		return nil, Run{}, err
	}
	return []solana.Instruction{alloc, create}, run, nil
}

// OpenIndex names a run from what CreateRun derives, without reading the chain.
func (p Program) OpenIndex(index uint64, runID string, account, mint, tokenProgram solana.PublicKey) (Run, error) {
	addr, err := p.RunAddress(index)
	if err != nil {
		return Run{}, err
	}
	instance, err := p.Coordinator.InstanceAddress(runID)
	if err != nil {
		return Run{}, err
	}
	collateral, err := AssociatedTokenAddress(addr, mint, tokenProgram)
	if err != nil {
		return Run{}, err
	}
	return Run{
		Program: p, Address: addr, Index: index, Mint: mint, TokenProgram: tokenProgram, Collateral: collateral,
		Coordinator: coordinator.Run{Program: p.Coordinator, Instance: instance, Account: account},
	}, nil
}

// ErrNotTreasurer is returned for an account that exists but is not the
// expected account of this Treasurer program.
var ErrNotTreasurer = errors.New("not an account of this Treasurer program")

// Open finds a run by its index and reads its Run account.
func (p Program) Open(ctx context.Context, c *chain.Client, index uint64) (Run, *RunAccount, error) {
	addr, err := p.RunAddress(index)
	if err != nil {
		return Run{}, nil, err
	}
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return Run{}, nil, fmt.Errorf("treasurer run %d: %w", index, err)
	}
	if !owner.Equals(p.ID) {
		return Run{}, nil, fmt.Errorf("account %s is owned by %s: %w", addr, owner, ErrNotTreasurer)
	}
	acc, err := treasurer.ParseAccount_Run(data)
	if err != nil {
		return Run{}, nil, fmt.Errorf("account %s: %w: %v", addr, ErrNotTreasurer, err)
	}
	collateral, err := AssociatedTokenAddress(addr, acc.CollateralMint, acc.TokenProgram)
	if err != nil {
		return Run{}, nil, err
	}
	return Run{
		Program: p, Address: addr, Index: index, Mint: acc.CollateralMint, TokenProgram: acc.TokenProgram, Collateral: collateral,
		Coordinator: coordinator.Run{Program: p.Coordinator, Instance: acc.CoordinatorInstance, Account: acc.CoordinatorAccount},
	}, acc, nil
}

// ErrOtherRun is returned for a Run that drives another run id's
// Coordinator instance. Anyone may create a Run at any index, a run id's
// default index included, so an index alone does not name a run.
var ErrOtherRun = errors.New("the Treasurer run at this index belongs to another run id")

// OpenRunID finds a run by its run id, at its default index.
func (p Program) OpenRunID(ctx context.Context, c *chain.Client, runID string) (Run, *RunAccount, error) {
	return p.OpenRunAt(ctx, c, DefaultIndex(runID), runID)
}

// OpenRunAt finds run id's Run at index: Open, refusing (ErrOtherRun) a Run
// there whose Coordinator instance is not the run id's.
func (p Program) OpenRunAt(ctx context.Context, c *chain.Client, index uint64, runID string) (Run, *RunAccount, error) {
	want, err := p.Coordinator.InstanceAddress(runID)
	if err != nil {
		return Run{}, nil, err
	}
	r, acc, err := p.Open(ctx, c, index)
	if err != nil {
		return Run{}, nil, err
	}
	if !acc.CoordinatorInstance.Equals(want) {
		return Run{}, nil, fmt.Errorf("treasurer run %d (%s) drives coordinator instance %s, not run id %q's %s: %w",
			index, r.Address, acc.CoordinatorInstance, runID, want, ErrOtherRun)
	}
	return r, acc, nil
}

// UpdateParams is what run_update forwards to the Coordinator; nil parts are
// left unchanged.
type UpdateParams struct {
	Coordinator   coordinator.UpdateParams
	EarningRate   *uint64
	SlashingRate  *uint64
	Paused        *bool
	ClientVersion *string
	// JoinDeposit applies to deposits made from then on (above 0 only in a
	// run that is its own join authority).
	JoinDeposit *uint64
}

// Update changes the Coordinator run through the Treasurer (signed by the
// run's main authority). The program refuses an earning rate that no funding
// can ever cover (UnfundableRate: one epoch of it above the supply of a mint
// without a mint authority; CheckEarningRate is the same rule), and a
// slashing rate of 0 for the coming epochs of a run that asks for or holds
// deposits when the update sets either (ZeroSlashingRate; CheckSlashingRate).
func (r Run) Update(authority solana.PublicKey, u UpdateParams) (solana.Instruction, error) {
	params := treasurer.RunUpdateParams{
		EpochEarningRateTotalShared: u.EarningRate,
		EpochSlashingRatePerClient:  u.SlashingRate,
		Paused:                      u.Paused,
		ClientVersion:               u.ClientVersion,
		JoinDeposit:                 u.JoinDeposit,
	}
	// The coordinator's layout types and ours are generated from the same
	// IDL definitions: same Borsh bytes, different Go types.
	var err error
	if params.Metadata, err = convert[treasurer.RunMetadata](u.Coordinator.Metadata); err != nil {
		return nil, err
	}
	if params.Config, err = convert[treasurer.CoordinatorConfig](u.Coordinator.Config); err != nil {
		return nil, err
	}
	if params.Model, err = convert[treasurer.Model](u.Coordinator.Model); err != nil {
		return nil, err
	}
	if params.Progress, err = convert[treasurer.Progress](u.Coordinator.Progress); err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewRunUpdateInstruction(params, authority, r.Address, r.Coordinator.Instance, r.Coordinator.Account,
		r.Program.Coordinator.ID, r.Mint))
}

// convert re-decodes a Borsh value into the identically laid out type T.
func convert[T any, S any](src *S) (*T, error) {
	if src == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := bin.NewBorshEncoder(&buf).Encode(src); err != nil {
		return nil, fmt.Errorf("encode %T: %w", src, err)
	}
	out := new(T)
	if err := bin.NewBorshDecoder(buf.Bytes()).Decode(out); err != nil {
		return nil, fmt.Errorf("decode %T: %w", out, err)
	}
	return out, nil
}

// CreateParticipant makes user's claim record (user signs; payer pays rent).
func (r Run) CreateParticipant(payer, user solana.PublicKey) (solana.Instruction, error) {
	addr, err := r.Program.ParticipantAddress(r.Address, user)
	if err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewParticipantCreateInstruction(treasurer.ParticipantCreateParams{}, payer, user, r.Address, addr, solana.SystemProgramID))
}

// Claim pays user what it earned and has not claimed into its token account
// userCollateral (the associated one when zero).
func (r Run) Claim(user, userCollateral solana.PublicKey) (solana.Instruction, error) {
	addr, err := r.Program.ParticipantAddress(r.Address, user)
	if err != nil {
		return nil, err
	}
	if userCollateral.IsZero() {
		if userCollateral, err = AssociatedTokenAddress(user, r.Mint, r.TokenProgram); err != nil {
			return nil, err
		}
	}
	return r.Program.rebind(treasurer.NewParticipantClaimInstruction(treasurer.ParticipantClaimParams{}, user, r.Address, addr,
		r.Collateral, userCollateral, r.Mint, r.Coordinator.Instance, r.Coordinator.Account, r.Program.Coordinator.ID, r.TokenProgram))
}

// Settle moves user's earned and slashed points from its Coordinator slot
// into its Participant record (created if missing, payer paying the rent) and
// pays nothing, so that the slot can be reused; user's later claim pays
// exactly what it would have paid without it. Anyone may send it (payer
// signs; user does not).
func (r Run) Settle(payer, user solana.PublicKey) (solana.Instruction, error) {
	addr, err := r.Program.ParticipantAddress(r.Address, user)
	if err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewParticipantSettleInstruction(treasurer.ParticipantSettleParams{}, payer, user, r.Address, addr,
		r.Coordinator.Instance, r.Coordinator.Account, r.Program.Coordinator.ID, solana.SystemProgramID))
}

// Settleable is what Settle would move for user now: the (earned, slashed)
// points its slot holds (ok false when it has no slot; both 0 means
// NothingToSettle).
func Settleable(s *coordinator.State, user solana.PublicKey) (earned, slashed uint64, ok bool) {
	slot, ok := coordinator.Slot(s, user)
	if !ok {
		return 0, 0, false
	}
	return slot.Earned, slot.Slashed, true
}

// Withdraw sends amount tokens nobody is owed to destination (a token account
// of the run's mint); the run must be Finished or closed.
func (r Run) Withdraw(authority, destination solana.PublicKey, amount uint64) (solana.Instruction, error) {
	return r.Program.rebind(treasurer.NewRunWithdrawInstruction(treasurer.RunWithdrawParams{Amount: amount}, authority, r.Address,
		r.Collateral, destination, r.Mint, r.Coordinator.Account, r.TokenProgram))
}

// Close frees the Coordinator run (halted, every point claimed); its rent goes to spill.
func (r Run) Close(authority, spill solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(treasurer.NewRunCloseInstruction(treasurer.RunCloseParams{}, authority, spill, r.Address,
		r.Coordinator.Instance, r.Coordinator.Account, r.Program.Coordinator.ID))
}

// TopUp transfers amount base units from the funder's token account into the run.
func (r Run) TopUp(from, owner solana.PublicKey, amount uint64, decimals uint8) solana.Instruction {
	return TransferChecked(r.TokenProgram, from, r.Mint, r.Collateral, owner, amount, decimals)
}

// FetchParticipant reads user's claim record.
func (r Run) FetchParticipant(ctx context.Context, c *chain.Client, user solana.PublicKey) (*Participant, error) {
	addr, err := r.Program.ParticipantAddress(r.Address, user)
	if err != nil {
		return nil, err
	}
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !owner.Equals(r.Program.ID) {
		return nil, fmt.Errorf("account %s is owned by %s: %w", addr, owner, ErrNotTreasurer)
	}
	p, err := treasurer.ParseAccount_Participant(data)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w: %v", addr, ErrNotTreasurer, err)
	}
	return p, nil
}

// AuthorizationAddress is user's join authorization in a run that is its
// own join authority: the Authorizer PDA ["Authorization", run, participant,
// "CoordinatorJoinRun"], granted by the Run to the user's Participant PDA with
// the user as its delegate. A client joins with it (psyche-client train
// --authorizer <participant>).
func (r Run) AuthorizationAddress(user solana.PublicKey) (participant, authorization solana.PublicKey, err error) {
	if participant, err = r.Program.ParticipantAddress(r.Address, user); err != nil {
		return solana.PublicKey{}, solana.PublicKey{}, err
	}
	authorization, _, err = r.Program.authorizer().Address(r.Address, participant, authorizer.JoinRunScope)
	return participant, authorization, err
}

// tokenAccountOf is userCollateral, or user's associated token account when zero.
func (r Run) tokenAccountOf(user, userCollateral solana.PublicKey) (solana.PublicKey, error) {
	if !userCollateral.IsZero() {
		return userCollateral, nil
	}
	return AssociatedTokenAddress(user, r.Mint, r.TokenProgram)
}

// Deposit makes user's join deposit of amount base units (the run's
// join_deposit) from userCollateral (the associated one when zero) and
// grants its join authorization; user signs and pays the authorization's
// rent. A deposit above 0 is refused while a fault would slash nothing
// (ZeroSlashingRate; CheckDepositSlashing).
func (r Run) Deposit(user, userCollateral solana.PublicKey, amount uint64) (solana.Instruction, error) {
	participant, auth, err := r.AuthorizationAddress(user)
	if err != nil {
		return nil, err
	}
	if userCollateral, err = r.tokenAccountOf(user, userCollateral); err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewParticipantDepositInstruction(treasurer.ParticipantDepositParams{Amount: amount},
		user, r.Address, participant, userCollateral, r.Collateral, r.Mint, r.Coordinator.Account, auth,
		r.Program.authorizer().ID, r.TokenProgram, solana.SystemProgramID))
}

// WithdrawDeposit returns user's deposit into userCollateral (the associated
// one when zero) and revokes its join authorization (rent back to user).
// signer is user, or the run authority once the run is Finished.
func (r Run) WithdrawDeposit(signer, user, userCollateral solana.PublicKey) (solana.Instruction, error) {
	participant, auth, err := r.AuthorizationAddress(user)
	if err != nil {
		return nil, err
	}
	if userCollateral, err = r.tokenAccountOf(user, userCollateral); err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewParticipantWithdrawDepositInstruction(treasurer.ParticipantWithdrawDepositParams{},
		signer, user, r.Address, participant, r.Collateral, userCollateral, r.Mint, r.Coordinator.Account, auth,
		r.Program.authorizer().ID, r.TokenProgram))
}

// BurnForfeited burns what user forfeited: its slot's burned points and, after
// a fault since its deposit, its deposit (its join authorization is closed,
// the rent going back to user). Anyone may send it.
func (r Run) BurnForfeited(user solana.PublicKey) (solana.Instruction, error) {
	participant, auth, err := r.AuthorizationAddress(user)
	if err != nil {
		return nil, err
	}
	return r.Program.rebind(treasurer.NewBurnForfeitedInstruction(treasurer.BurnForfeitedParams{},
		user, r.Address, participant, r.Collateral, r.Mint, r.Coordinator.Instance, r.Coordinator.Account, r.Program.Coordinator.ID,
		auth, r.Program.authorizer().ID, r.TokenProgram))
}

// Claimable is what a claim by user would pay now: the points the Coordinator
// holds for it plus those already settled, minus slashes and past claims (the
// program's rule; p may be nil before the first claim).
func Claimable(s *coordinator.State, p *Participant, user solana.PublicKey) uint64 {
	var earned, slashed, claimed uint64
	if slot, ok := coordinator.Slot(s, user); ok {
		earned, slashed = slot.Earned, slot.Slashed
	}
	if p != nil {
		earned += p.EarnedPoints
		slashed += p.SlashedPoints
		claimed = p.ClaimedPoints
	}
	if earned < slashed+claimed || slashed+claimed < slashed {
		return 0
	}
	return earned - slashed - claimed
}

// Reserve is the points the run must cover, by kind (the program's rule for
// withdrawals and closing): what the Coordinator still holds, and what
// participant_settle moved into Participant records unpaid.
type Reserve struct {
	// Claims is every client's unsettled earned - slashed.
	Claims uint64 `json:"claims"`
	// Unvested points vest into earned (or are burned by a fault).
	Unvested uint64 `json:"unvested"`
	// Burned points wait for burn_forfeited.
	Burned uint64 `json:"burned"`
	// Settled is what Participant records owe after participant_settle
	// (the Run's unclaimed_settled_points).
	Settled uint64 `json:"settled"`
}

// Points is the sum of the four.
func (r Reserve) Points() uint64 { return r.Claims + r.Unvested + r.Burned + r.Settled }

// ReserveOf reads the reserve of a Coordinator run.
func ReserveOf(s *coordinator.State) Reserve {
	var r Reserve
	for _, c := range s.Clients {
		if c.Occupied == 0 {
			continue
		}
		if c.Earned > c.Slashed {
			r.Claims += c.Earned - c.Slashed
		}
		for _, u := range c.Unvested {
			r.Unvested += u
		}
		r.Burned += c.Burned
	}
	return r
}

// ReserveOfRun is ReserveOf with the points settled into the run's
// Participant records and not claimed yet (s nil: the run is closed, its
// Coordinator points went with the account).
func ReserveOfRun(acc *RunAccount, s *coordinator.State) Reserve {
	var r Reserve
	if s != nil && !acc.Closed {
		r = ReserveOf(s)
	}
	r.Settled = acc.UnclaimedSettledPoints
	return r
}

// Reserved is the points the Coordinator holds that the run keeps tokens
// for: every client's unsettled earned - slashed, unvested and
// burned-but-not-yet-burned points (ReserveOfRun adds the settled ones).
func Reserved(s *coordinator.State) uint64 { return ReserveOf(s).Points() }

// ReservedTokens is what the run keeps: the reserved points (the
// Coordinator's none once the run is closed, s nil), the points settled into
// records and not claimed, and every deposit held.
func ReservedTokens(acc *RunAccount, s *coordinator.State) uint64 {
	return ReserveOfRun(acc, s).Points() + acc.TotalDeposits
}

// Forfeit is what burn_forfeited would burn for one user.
type Forfeit struct {
	// Points are the burned points its slot holds.
	Points uint64 `json:"points"`
	// Deposit is its deposit when forfeited (Revoke).
	Deposit uint64 `json:"deposit"`
	// Revoke: a deposit is held and a fault was found in its epoch or later.
	Revoke bool `json:"revoke"`
}

// faultSince says whether a fault at or after epoch is known, in the
// record or the slot.
func faultSince(p *Participant, slot *coordinator.ClientSlot, epoch uint32) bool {
	return (p != nil && p.HasFault && p.LastFaultEpoch >= epoch) ||
		(slot != nil && slot.HasFault != 0 && slot.LastFaultEpoch >= epoch)
}

// ForfeitOf is what burn_forfeited would burn for user now (the program's
// rule; p may be nil when user has no Participant).
func ForfeitOf(s *coordinator.State, p *Participant, user solana.PublicKey) Forfeit {
	var f Forfeit
	slot, ok := coordinator.Slot(s, user)
	if !ok {
		slot = nil
	}
	if slot != nil {
		f.Points = slot.Burned
	}
	if p != nil && p.Deposited && faultSince(p, slot, p.DepositEpoch) {
		f.Deposit, f.Revoke = p.Deposit, true
	}
	return f
}

// SlotHolds names what keeps a Coordinator slot from being reused by
// another client, as the program's ClientSlot::is_free decides: nothing
// (an empty list) means the slot is free. A participant_settle removes
// "unsettled points"; burn_forfeited removes "burned points".
func SlotHolds(slot *coordinator.ClientSlot) []string {
	var held []string
	if slot.Pending != 0 {
		held = append(held, "pending join")
	}
	if slot.InEpoch != 0 {
		held = append(held, "in the epoch")
	}
	if slot.Earned != 0 || slot.Slashed != 0 {
		held = append(held, "unsettled points")
	}
	for _, u := range slot.Unvested {
		if u != 0 {
			held = append(held, "unvested points")
			break
		}
	}
	if slot.Burned != 0 {
		held = append(held, "burned points")
	}
	if slot.OpenDisputes != 0 {
		held = append(held, "open disputes")
	}
	return held
}

// SettleFrees lists the clients whose slot a participant_settle would free
// now: only unsettled earned or slashed points hold it.
func SettleFrees(s *coordinator.State) []solana.PublicKey {
	var out []solana.PublicKey
	for i := range s.Clients {
		c := &s.Clients[i]
		if held := SlotHolds(c); c.Occupied != 0 && len(held) == 1 && held[0] == "unsettled points" {
			out = append(out, c.Signer)
		}
	}
	return out
}

// ErrUnfundableRate is run_update's UnfundableRate, found before sending.
var ErrUnfundableRate = errors.New("no funding can ever cover one epoch at this earning rate")

// CheckEarningRate is run_update's rule for a new epoch earning rate (1
// point = 1 base unit): refused when one epoch of it exceeds the supply of a
// mint that can never mint more (no mint authority). A mint with an
// authority may still mint what the rate needs; FundingOf says whether the
// supply covers an epoch now.
func CheckEarningRate(m MintInfo, rate uint64) error {
	if m.SupplyFixed && rate > m.Supply {
		return fmt.Errorf("%w: %d base units per epoch, but the mint's supply is %d and it has no mint authority", ErrUnfundableRate, rate, m.Supply)
	}
	return nil
}

// ErrZeroSlashingRate is the program's ZeroSlashingRate, found before
// sending.
var ErrZeroSlashingRate = errors.New("a run that asks for or holds join deposits needs a slashing rate above 0")

// CheckSlashingRate is run_update's rule when an update sets the slashing
// rate or the join deposit: the coming epochs' slashing rate once it is done
// (slashing) must be above 0 while the run asks for a deposit (joinDeposit,
// after the update) or holds deposits. A fault that slashes nothing can
// leave no trace (audit finding F5): the faulted member's slot frees once
// it is out of the epoch, another client can take it before the fault is
// recorded, and the deposit could come back.
func CheckSlashingRate(joinDeposit, totalDeposits, slashing uint64) error {
	if slashing == 0 && (joinDeposit > 0 || totalDeposits > 0) {
		return fmt.Errorf("%w: the coming epochs would slash nothing, and a faulted depositor could take its deposit back "+
			"(join deposit %d, deposits held %d)", ErrZeroSlashingRate, joinDeposit, totalDeposits)
	}
	return nil
}

// CheckDepositSlashing is participant_deposit's rule for a deposit above 0
// by user: the coming epochs' slashing rate is above 0, and so is the
// current one while user can still be found at fault at it (in the epoch
// under way, or named by an open dispute).
func CheckDepositSlashing(s *coordinator.State, user solana.PublicKey) error {
	if s.FutureRates.SlashingRatePerClient == 0 {
		return fmt.Errorf("%w: the run's slashing rate is 0 (its authority sets it with treasurer-update-run --slashing-rate-per-client)", ErrZeroSlashingRate)
	}
	if slot, ok := coordinator.Slot(s, user); ok && (slot.InEpoch != 0 || slot.OpenDisputes != 0) && s.CurrentRates.SlashingRatePerClient == 0 {
		return fmt.Errorf("%w: the epoch under way slashes nothing and %s is in it or named by an open dispute: deposit once it is over", ErrZeroSlashingRate, user)
	}
	return nil
}

// Funding is how far a run's tokens go at the earning rate of its coming
// epochs.
type Funding struct {
	// EarningRate is what each coming epoch pays its finishers in all (the
	// Coordinator's future_rates; 0 for a closed run).
	EarningRate uint64 `json:"earning_rate"`
	// Available is the run's balance minus what it must keep (ReservedTokens).
	Available uint64 `json:"available"`
	// EpochsFunded is how many epochs at EarningRate Available covers; nil
	// when the rate is 0 (nothing to fund).
	EpochsFunded *uint64 `json:"epochs_funded"`
	// Supply is the mint's supply; SupplyFixed says nobody can mint more.
	Supply      uint64 `json:"supply"`
	SupplyFixed bool   `json:"supply_fixed"`
	// Unfundable: one epoch at EarningRate needs more tokens than the
	// mint's whole supply, so no top-up can cover it: never with a fixed
	// supply, not before more is minted otherwise. Claims of such epochs
	// fail with InsufficientCollateral until the run holds enough.
	Unfundable bool `json:"unfundable"`
}

// FundingOf is the funding of the run acc (Coordinator state s, nil once
// closed) whose token account holds balance, in mint.
func FundingOf(acc *RunAccount, s *coordinator.State, mint MintInfo, balance uint64) Funding {
	f := Funding{Supply: mint.Supply, SupplyFixed: mint.SupplyFixed}
	if s != nil && !acc.Closed {
		f.EarningRate = s.FutureRates.EarningRateTotalShared
	}
	f.Available = balance - min(balance, ReservedTokens(acc, s))
	if f.EarningRate > 0 {
		n := f.Available / f.EarningRate
		f.EpochsFunded = &n
		f.Unfundable = f.EarningRate > f.Supply
	}
	return f
}
