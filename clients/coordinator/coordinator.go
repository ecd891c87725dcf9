// Package coordinator is the client side of the Coordinator program: the
// on-chain state machine of a training run. It derives the run's instance
// address, builds every instruction for a program deployed at any id
// (localnet and devnet ids differ), creates runs (allocating the large
// zero-copy account), fetches and checks the accounts, and reads what a
// client needs from the state: the phase, the round, the members and each
// member's role (through clients/schedule, which mirrors the program).
package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/schedule"
)

// Limits and sizes fixed by the program's layout.
const (
	// AccountSize is the CoordinatorAccount's data size (discriminator included).
	AccountSize = 201_400
	// StateVersion is the layout version the program writes (state.version).
	StateVersion = 7
	MaxRunIDLen  = 32
	MaxClients   = 256
	// StoredRounds is the length of the round ring buffer.
	StoredRounds = 4
	// MaxClientVersionLen bounds the client version string.
	MaxClientVersionLen = 64
)

// The program's types, as generated from its IDL.
type (
	State           = coordinator.CoordinatorAccount
	Instance        = coordinator.CoordinatorInstance
	RunMetadata     = coordinator.RunMetadata
	Config          = coordinator.CoordinatorConfig
	Model           = coordinator.Model
	Progress        = coordinator.Progress
	Round           = coordinator.Round
	WitnessMetadata = coordinator.WitnessMetadata
	UpdateParams    = coordinator.UpdateParams
	ClientSlot      = coordinator.ClientSlot
	Commitment      = coordinator.Commit
	Dispute         = coordinator.Dispute
)

// RunState is the phase of a run (the account's run_state tag).
type RunState uint8

const (
	Uninitialized RunState = iota
	WaitingForMembers
	Warmup
	RoundTrain
	RoundWitness
	Cooldown
	Finished
	Paused
)

var runStateNames = [...]string{"Uninitialized", "WaitingForMembers", "Warmup", "RoundTrain", "RoundWitness", "Cooldown", "Finished", "Paused"}

func (s RunState) String() string {
	if int(s) < len(runStateNames) {
		return runStateNames[s]
	}
	return fmt.Sprintf("RunState(%d)", uint8(s))
}

// Member states within an epoch (EpochClient.state).
const (
	MemberHealthy uint8 = 1
	MemberDropped uint8 = 2
	MemberLeft    uint8 = 3
	// MemberFaulted: found at fault by a dispute (no epoch reward).
	MemberFaulted uint8 = 4
)

// Commitment flags (Commit.flags).
const (
	CommitCommitted uint8 = 1 << 0
	// CommitFresh: state_before is a fresh, zero-momentum state.
	CommitFresh uint8 = 1 << 1
	// CommitProbation: the member was on probation when it committed (first
	// epoch in the run, or a recent fault); the commitment must be verified.
	CommitProbation uint8 = 1 << 2
)

// Verdicts (Commit.verdict) and committee votes (Dispute.votes; 0 = none).
const (
	VerdictNone     uint8 = 0
	VerdictMatch    uint8 = 1
	VerdictMismatch uint8 = 2
	VerdictNoData   uint8 = 3
	// VoteRerun is a committee vote only, on an answered MISMATCH dispute:
	// the trainer served its rerun's payload, whose hash is the accuser's.
	VoteRerun uint8 = 4
)

// VerdictName names a verdict or committee vote.
func VerdictName(v uint8) string {
	switch v {
	case VerdictNone:
		return "none"
	case VerdictMatch:
		return "MATCH"
	case VerdictMismatch:
		return "MISMATCH"
	case VerdictNoData:
		return "NO_DATA"
	case VoteRerun:
		return "RERUN"
	}
	return fmt.Sprintf("unknown(%d)", v)
}

// Architectures (Model.architecture).
const (
	ArchGPT2 uint8 = 1
	// ArchLlama: RMSNorm, rotary positions (Model.RopeTheta), grouped-query
	// attention (Model.NKvHead), SwiGLU (Model.IntermediateSize), no biases,
	// the lm-head tied to the token embedding unless Model.Untied.
	ArchLlama uint8 = 2
)

// A Llama's rotary scaling (Model.rope_scaling): none, or Llama 3.1's
// (trainer.RopeLlama3) with Model.RopeFactor, RopeLowFreqFactor,
// RopeHighFreqFactor and RopeOriginalContext.
const (
	RopeNone   uint8 = 0
	RopeLlama3 uint8 = 1
)

// Data types (Model.data_type).
const (
	// DataPretraining: the loss on every token.
	DataPretraining uint8 = 1
	// DataFinetuning: data with a loss mask (chat conversations or
	// prompt/completion pairs that data prepare --examples wrote), the loss
	// on the answers only.
	DataFinetuning uint8 = 2
)

// FineTuning reports whether the run's model is trained on loss-masked
// data (data_type "finetuning").
func FineTuning(m *Model) bool { return m.DataType == DataFinetuning }

// Tokenizers (Model.tokenizer).
const (
	TokenizerByte uint8 = 1
	TokenizerGPT2 uint8 = 2
	// TokenizerJSON: a Hugging Face tokenizer.json file, named by its SHA-256
	// in Model.TokenizerHash; Model.VocabSize is at most 262144, the most
	// the data format takes.
	TokenizerJSON uint8 = 3
)

// TokenizerName names the model's tokenizer as a run config does: "byte",
// "gpt2", or "json:" and the file's SHA-256 in lowercase hex.
func TokenizerName(m *Model) string {
	switch m.Tokenizer {
	case TokenizerByte:
		return "byte"
	case TokenizerGPT2:
		return "gpt2"
	case TokenizerJSON:
		return tokenizerJSONPrefix + hex.EncodeToString(m.TokenizerHash[:])
	}
	return fmt.Sprintf("unknown(%d)", m.Tokenizer)
}

// Optimizers (Model.optimizer).
const (
	// OptimizerDistro: one optimizer step per round, DCT-compressed momentum
	// (Model.InnerSteps 1, OuterLearningRate and ValueBits 0).
	OptimizerDistro uint8 = 1
	// OptimizerSparseLoCo: Model.InnerSteps local AdamW steps per round, then
	// a top-k, ValueBits-quantized pseudo-gradient with error feedback
	// (CompressionDecay) and an outer step at OuterLearningRate.
	OptimizerSparseLoCo uint8 = 2
	// MaxInnerSteps bounds Model.InnerSteps.
	MaxInnerSteps = 1000
)

// Numeric contracts (Model.precision): how every replica of the run
// computes (clients/trainer/README.md, "Numeric contract"). Accounts written
// before the field existed hold 0 there: fp32.
const (
	// PrecisionFP32: numeric contract v2, every operation in fp32.
	PrecisionFP32 uint8 = 0
	// PrecisionMX8: numeric contract v3, each matrix product's operands
	// quantized along K in blocks of 32 to int8 with a power-of-two scale,
	// exact int32 block dot products, fp32 accumulation across blocks in
	// order; everything else as in v2.
	PrecisionMX8 uint8 = 1
)

// PrecisionName names a numeric contract as a run config does ("fp32",
// "mx8"), or "unknown(N)".
func PrecisionName(tag uint8) string { return EnumName("precision", tag) }

// Gradient shards (Model.grad_shards_log2): a step's weight gradients and
// loss are summed over 1 << GradShardsLog2 token shards, each an in-order
// chain from zero, joined by a fixed balanced binary tree, so that a client
// spreading its share over devices dividing the count computes the same bits
// as one device (trainer.Config.GradShards). Accounts written before the
// field existed hold 0 there: one shard.
const (
	// MaxGradShardsLog2 bounds Model.GradShardsLog2: at most 64 shards.
	MaxGradShardsLog2 uint8 = 6
	// MaxGradShards is the largest gradient shard count, 1 << MaxGradShardsLog2.
	MaxGradShards = 1 << MaxGradShardsLog2
)

// GradShards is the gradient shard count of a Model.grad_shards_log2 (a run
// config's grad_shards, 1 to 64), or 0 for a value the program refuses.
func GradShards(log2 uint8) int {
	if log2 > MaxGradShardsLog2 {
		return 0
	}
	return 1 << log2
}

// FirstHealthCheckHeight is the height of the first round of an epoch that
// accepts health checks: 2, or 3 with overlapped rounds (Config.Overlap = 1:
// round r's witness reports attest round r-1's payloads).
func FirstHealthCheckHeight(s *State) uint32 {
	if s.Config.Overlap != 0 {
		return 3
	}
	return 2
}

// Dispute states (Dispute.state): free, open, or how it was settled.
const (
	DisputeFree         uint8 = 0
	DisputeOpen         uint8 = 1
	DisputeTransient    uint8 = 2
	DisputeTrainerFault uint8 = 3
	DisputeAccuserFault uint8 = 4
	DisputeUnresolved   uint8 = 5
	// DisputeRefuted: the committee got the data of a NO_DATA accusation and
	// it replays; a forgiven mistake of the accuser's.
	DisputeRefuted uint8 = 6
)

// Program addresses one deployment of the Coordinator.
type Program struct {
	ID solana.PublicKey
}

// Default is the deployment named by the IDL the bindings were generated from.
func Default() Program { return Program{ID: coordinator.ProgramID} }

// ErrBadRunID is returned for a run id the program would refuse.
var ErrBadRunID = errors.New("run id must be 1 to 32 bytes")

// InstanceAddress derives the CoordinatorInstance PDA of a run id.
func (p Program) InstanceAddress(runID string) (solana.PublicKey, error) {
	if len(runID) == 0 || len(runID) > MaxRunIDLen {
		return solana.PublicKey{}, fmt.Errorf("%q: %w", runID, ErrBadRunID)
	}
	addr, _, err := solana.FindProgramAddress([][]byte{[]byte("coordinator"), []byte(runID)}, p.ID)
	return addr, err
}

// rebind points an instruction built by the bindings at this deployment.
func (p Program) rebind(ix solana.Instruction, err error) (solana.Instruction, error) {
	return chain.Rebind(p.ID, ix, err)
}

// CreateParams describes a new run.
type CreateParams struct {
	RunID         string
	MainAuthority solana.PublicKey
	// JoinAuthority grants join_run authorizations in the Authorizer.
	JoinAuthority solana.PublicKey
	ClientVersion string
}

// Run names one run: its instance PDA and its coordinator account.
type Run struct {
	Program  Program
	Instance solana.PublicKey
	Account  solana.PublicKey
}

// CreateRun returns the instructions that allocate a fresh coordinator account
// (rent exempt, owned by the program) and initialise the run; send them in one
// transaction signed by payer and account, so nobody can initialise the
// account in between.
func (p Program) CreateRun(ctx context.Context, c *chain.Client, payer solana.PublicKey, account solana.PublicKey, params CreateParams) ([]solana.Instruction, Run, error) {
	instance, err := p.InstanceAddress(params.RunID)
	if err != nil {
		return nil, Run{}, err
	}
	if len(params.ClientVersion) == 0 || len(params.ClientVersion) > MaxClientVersionLen {
		return nil, Run{}, fmt.Errorf("client version %q must be 1 to %d bytes", params.ClientVersion, MaxClientVersionLen)
	}
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, AccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, Run{}, fmt.Errorf("reading the rent for the coordinator account: %w", err)
	}
	alloc, err := system.NewCreateAccountInstruction(rent, AccountSize, p.ID, payer, account).ValidateAndBuild()
	if err != nil {
		return nil, Run{}, err
	}
	init, err := p.rebind(coordinator.NewInitCoordinatorInstruction(coordinator.InitCoordinatorParams{
		MainAuthority: params.MainAuthority,
		JoinAuthority: params.JoinAuthority,
		RunId:         params.RunID,
		ClientVersion: params.ClientVersion,
	}, payer, instance, account, solana.SystemProgramID))
	if err != nil {
		return nil, Run{}, err
	}
	return []solana.Instruction{alloc, init}, Run{Program: p, Instance: instance, Account: account}, nil
}

// Update replaces what params holds (nil parts are kept).
func (r Run) Update(authority solana.PublicKey, params UpdateParams) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewUpdateInstruction(params, authority, r.Instance, r.Account))
}

// UpdateClientVersion sets the client version joiners must run.
func (r Run) UpdateClientVersion(authority solana.PublicKey, version string) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewUpdateClientVersionInstruction(
		coordinator.UpdateClientVersionParams{ClientVersion: version}, authority, r.Instance, r.Account))
}

// SetFutureEpochRates sets the rates of the next epoch to form; nil keeps one.
func (r Run) SetFutureEpochRates(authority solana.PublicKey, earning, slashing *uint64) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewSetFutureEpochRatesInstruction(
		coordinator.SetFutureEpochRatesParams{EarningRateTotalShared: earning, SlashingRatePerClient: slashing},
		authority, r.Instance, r.Account))
}

// SetPaused pauses or resumes the run.
func (r Run) SetPaused(authority solana.PublicKey, paused bool) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewSetPausedInstruction(
		coordinator.SetPausedParams{Paused: paused}, authority, r.Instance, r.Account))
}

// JoinRun registers user for the next epoch under authorization (an
// Authorizer account granting user authorizer.JoinRunScope from the join
// authority). The program refuses it without the proof that user holds the
// p2p key (P2pKeyNotProven): JoinRunProven builds both.
func (r Run) JoinRun(user, authorization solana.PublicKey, p2pIdentity [32]byte) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewJoinRunInstruction(
		coordinator.JoinRunParams{Signer: user, P2PIdentity: p2pIdentity}, user, authorization, r.Instance, r.Account, instructionsSysvar))
}

// LeaveRun withdraws user's pending join and leaves the current epoch.
func (r Run) LeaveRun(user solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewLeaveRunInstruction(coordinator.LeaveRunParams{}, user, r.Instance, r.Account))
}

// Tick advances the run if a condition or timer allows.
func (r Run) Tick(user solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewTickInstruction(coordinator.TickParams{}, user, r.Instance, r.Account))
}

// WarmupWitness reports that user has the model loaded.
func (r Run) WarmupWitness(user solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewWarmupWitnessInstruction(coordinator.WarmupWitnessParams{}, user, r.Instance, r.Account))
}

// WitnessReport is what an elected witness reports for a round.
type WitnessReport struct {
	Step            uint32
	Index           uint16
	Participants    *schedule.Bloom
	Broadcasts      *schedule.Bloom
	BroadcastMerkle [32]byte
	Loss            float32
	TokensPerSec    uint64
	BandwidthPerSec uint64
	Efficiency      float32
}

// BloomOf converts a schedule filter to the program's layout.
func BloomOf(b *schedule.Bloom) coordinator.Bloom {
	return coordinator.Bloom{Bits: b.Words, Salt: b.Salt, NumBits: b.NumBits, NumHashes: b.NumHashes}
}

// ScheduleBloom converts a stored filter to the schedule's type.
func ScheduleBloom(b coordinator.Bloom) *schedule.Bloom {
	return &schedule.Bloom{Words: b.Bits, Salt: b.Salt, NumBits: b.NumBits, NumHashes: b.NumHashes}
}

// Witness reports a round.
func (r Run) Witness(user solana.PublicKey, w WitnessReport) (solana.Instruction, error) {
	if w.Participants == nil || w.Broadcasts == nil {
		return nil, errors.New("a witness report needs both bloom filters")
	}
	return r.Program.rebind(coordinator.NewWitnessInstruction(coordinator.WitnessParams{
		Step:             w.Step,
		Index:            w.Index,
		ParticipantBloom: BloomOf(w.Participants),
		BroadcastBloom:   BloomOf(w.Broadcasts),
		BroadcastMerkle:  w.BroadcastMerkle,
		Metadata: coordinator.WitnessMetadata{
			Loss: w.Loss, TokensPerSec: w.TokensPerSec, BandwidthPerSec: w.BandwidthPerSec, Efficiency: w.Efficiency,
		},
	}, user, r.Instance, r.Account))
}

// HealthCheck accuses the member at index (signer accused) of not delivering
// in the round before the one training step.
func (r Run) HealthCheck(user solana.PublicKey, step uint32, index uint16, accused solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewHealthCheckInstruction(
		coordinator.HealthCheckParams{Step: step, Index: index, Accused: accused}, user, r.Instance, r.Account))
}

// CommitArgs is a member's commitment to its step of the current round
// (sent in RoundTrain): the SHA-256 of its payload bytes and of its private
// replay state before and after the step. Fresh says StateBefore is a fresh,
// zero-momentum state; otherwise it must equal the StateAfter of the
// member's previous commitment.
type CommitArgs struct {
	Step                             uint32
	Index                            uint16
	Payload, StateBefore, StateAfter [32]byte
	Fresh                            bool
}

// Commit commits user (the member at c.Index) to its step.
func (r Run) Commit(user solana.PublicKey, c CommitArgs) (solana.Instruction, error) {
	var fresh uint8
	if c.Fresh {
		fresh = 1
	}
	return r.Program.rebind(coordinator.NewCommitInstruction(coordinator.CommitParams{
		Step: c.Step, Index: c.Index, Payload: c.Payload, StateBefore: c.StateBefore, StateAfter: c.StateAfter, Fresh: fresh,
	}, user, r.Instance, r.Account))
}

// VerifyArgs is the verdict (VerdictMatch, VerdictMismatch or VerdictNoData)
// of the verifier at VerifierIndex on the commitment of the trainer at Index,
// in the round's RoundWitness phase, with the verifier's own replay hashes
// (zero for MATCH and NO_DATA).
type VerifyArgs struct {
	Step                         uint32
	VerifierIndex, Index         uint16
	Verdict                      uint8
	ClaimedPayload, ClaimedAfter [32]byte
}

// Verify posts user's verdict.
func (r Run) Verify(user solana.PublicKey, v VerifyArgs) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewVerifyInstruction(coordinator.VerifyParams{
		Step: v.Step, VerifierIndex: v.VerifierIndex, Index: v.Index, Verdict: v.Verdict,
		ClaimedPayload: v.ClaimedPayload, ClaimedAfter: v.ClaimedAfter,
	}, user, r.Instance, r.Account))
}

// AnswerDispute answers open MISMATCH dispute id as its accused trainer
// (user) with the hashes of its own rerun of the step: equal to the
// accuser's claimed hashes, the dispute settles TRANSIENT (or, past the
// run's forgive_per_epoch, TRAINER_FAULT); different, the program refuses
// it (RerunDiffers) and the committee decides.
func (r Run) AnswerDispute(user solana.PublicKey, id uint64, rerunPayload, rerunAfter [32]byte) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewAnswerDisputeInstruction(coordinator.AnswerDisputeParams{
		Id: id, RerunPayload: rerunPayload, RerunAfter: rerunAfter,
	}, user, r.Instance, r.Account))
}

// JudgeDispute casts user's vote (VerdictMatch, VerdictMismatch or
// VerdictNoData) on open dispute id as a member of its committee.
func (r Run) JudgeDispute(user solana.PublicKey, id uint64, vote uint8) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewJudgeDisputeInstruction(coordinator.JudgeDisputeParams{Id: id, Vote: vote},
		user, r.Instance, r.Account))
}

// FindDispute is the stored dispute with the given id, if the table still holds it.
func FindDispute(s *State, id uint64) (*Dispute, bool) {
	for i := range s.Disputes {
		d := &s.Disputes[i]
		if id != 0 && d.Id == id && d.State != DisputeFree {
			return d, true
		}
	}
	return nil, false
}

// Checkpoint records where user uploaded the latest model.
func (r Run) Checkpoint(user solana.PublicKey, repo, revision string) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewCheckpointInstruction(
		coordinator.CheckpointParams{Repo: repo, Revision: revision}, user, r.Instance, r.Account))
}

// MaxEvalTaskLen bounds an EvalReport's task name (bytes).
const MaxEvalTaskLen = 32

// EvalReport is a client's score of the model after optimizer step Step on
// one benchmark task: accuracy and length-normalized accuracy in [0, 1] over
// Count (at least 1) items. The program takes it from any registered client
// for a trained step (1 <= Step < Progress.Step) and a task of 1 to
// MaxEvalTaskLen bytes of UTF-8 without NUL (EvalReport otherwise).
type EvalReport struct {
	Step         uint32
	Task         string
	Acc, AccNorm float32
	Count        uint32
}

// ReportEval publishes user's benchmark score as an EvalReported event; the
// run's account does not change. A NaN score fails to encode.
func (r Run) ReportEval(user solana.PublicKey, e EvalReport) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewReportEvalInstruction(coordinator.ReportEvalParams{
		Step: e.Step, Task: e.Task, Acc: e.Acc, AccNorm: e.AccNorm, Count: e.Count,
	}, user, r.Instance, r.Account))
}

// EvalReported is report_eval's event (Task zero-padded: FixedString reads it).
type EvalReported = coordinator.EvalReported

// EvalReports decodes the EvalReported events among a transaction's log
// lines (chain.TransactionLogs, or a chain.LogEntry's), in order.
func EvalReports(logs []string) []*EvalReported {
	return events(logs, coordinator.Event_EvalReported, coordinator.ParseEvent_EvalReported)
}

// MaxPromptTokens bounds a PromptReport's tokens.
const MaxPromptTokens = 32

// PromptReport is the continuation that the model after optimizer step Step
// generated for prompt number Prompt of the clients' list (eval.Prompts):
// 1 to MaxPromptTokens token ids, each below the run's vocab_size. The
// program takes it from any registered client for a trained step
// (1 <= Step < Progress.Step), PromptReport otherwise.
type PromptReport struct {
	Step   uint32
	Prompt uint16
	Tokens []uint32
}

// ReportPrompt publishes user's generated tokens as a PromptReported event;
// the run's account does not change.
func (r Run) ReportPrompt(user solana.PublicKey, p PromptReport) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewReportPromptInstruction(coordinator.ReportPromptParams{
		Step: p.Step, Prompt: p.Prompt, Tokens: p.Tokens,
	}, user, r.Instance, r.Account))
}

// PromptReported is report_prompt's event: Tokens[:Len] are the generated ids.
type PromptReported = coordinator.PromptReported

// PromptReports decodes the PromptReported events among a transaction's log
// lines, in order.
func PromptReports(logs []string) []*PromptReported {
	return events(logs, coordinator.Event_PromptReported, coordinator.ParseEvent_PromptReported)
}

// events decodes the events with discriminator disc among a transaction's
// log lines, in order. Payloads that do not decode are skipped, as
// chain.EventData skips bad lines: any program a transaction calls can log,
// so logs are not trusted input.
func events[T any](logs []string, disc [8]byte, parse func([]byte) (*T, error)) []*T {
	var out []*T
	for _, data := range chain.EventData(logs) {
		if len(data) < 8 || [8]byte(data[:8]) != disc {
			continue
		}
		if ev, err := parse(data); err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// TakeBurned is the main authority taking user's burned points (zeroed in
// the slot); the Treasurer calls it by CPI from burn_forfeited and burns as
// many tokens.
func (r Run) TakeBurned(authority, user solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewTakeBurnedInstruction(coordinator.TakeBurnedParams{User: user}, authority, r.Instance, r.Account))
}

// Free closes the run's two accounts (only while halted); rent goes to spill.
func (r Run) Free(authority, spill solana.PublicKey) (solana.Instruction, error) {
	return r.Program.rebind(coordinator.NewFreeCoordinatorInstruction(coordinator.FreeCoordinatorParams{}, authority, spill, r.Instance, r.Account))
}

// ErrNotCoordinator is returned for an account that exists but is not the
// expected account of this Coordinator program.
var ErrNotCoordinator = errors.New("not an account of this Coordinator program")

// FetchInstance reads and decodes a run's instance, checking its owner.
func (p Program) FetchInstance(ctx context.Context, c *chain.Client, addr solana.PublicKey) (*Instance, error) {
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !owner.Equals(p.ID) {
		return nil, fmt.Errorf("account %s is owned by %s: %w", addr, owner, ErrNotCoordinator)
	}
	inst, err := coordinator.ParseAccount_CoordinatorInstance(data)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w: %v", addr, ErrNotCoordinator, err)
	}
	return inst, nil
}

// Open finds a run by id.
func (p Program) Open(ctx context.Context, c *chain.Client, runID string) (Run, *Instance, error) {
	addr, err := p.InstanceAddress(runID)
	if err != nil {
		return Run{}, nil, err
	}
	inst, err := p.FetchInstance(ctx, c, addr)
	if err != nil {
		return Run{}, nil, fmt.Errorf("run %q: %w", runID, err)
	}
	return Run{Program: p, Instance: addr, Account: inst.CoordinatorAccount}, inst, nil
}

// FetchState reads and decodes the run's coordinator account.
func (r Run) FetchState(ctx context.Context, c *chain.Client) (*State, error) {
	data, owner, err := c.AccountData(ctx, r.Account)
	if err != nil {
		return nil, err
	}
	if !owner.Equals(r.Program.ID) {
		return nil, fmt.Errorf("account %s is owned by %s: %w", r.Account, owner, ErrNotCoordinator)
	}
	return DecodeState(data)
}

// Checkpoint kinds of a run's model (model.checkpoint.kind).
const (
	CheckpointEphemeral = 1 // no repo: the model lives only on its members
	CheckpointHub       = 2 // load from the hub repo (the run's first epoch)
	CheckpointP2P       = 3 // load from members; the hub repo stays as a fallback
)

// Phase is the run's state tag.
func Phase(s *State) RunState { return RunState(s.RunState) }

// CurrentRound is the round in progress (RoundTrain, RoundWitness, Cooldown).
func CurrentRound(s *State) *Round {
	return &s.Epoch.Rounds[int(s.Epoch.RoundsHead)%StoredRounds]
}

// PreviousRound is the round before the current one.
func PreviousRound(s *State) *Round {
	return &s.Epoch.Rounds[(int(s.Epoch.RoundsHead)+StoredRounds-1)%StoredRounds]
}

// Member is an entry of the current epoch's client list.
type Member struct {
	Index       uint16
	Signer      solana.PublicKey
	P2PIdentity [32]byte
	State       uint8
}

// Members lists the current epoch's entries in order (a round's clients are
// the first Round.ClientsLen of them).
func Members(s *State) []Member {
	n := min(int(s.Epoch.ClientsLen), MaxClients)
	out := make([]Member, n)
	for i := range n {
		e := s.Epoch.Clients[i]
		slot := s.Clients[int(e.Slot)%MaxClients]
		out[i] = Member{Index: uint16(i), Signer: slot.Signer, P2PIdentity: slot.P2PIdentity, State: e.State}
	}
	return out
}

// MemberIndex is signer's index in the current epoch, or -1.
func MemberIndex(s *State, signer solana.PublicKey) int {
	for _, m := range Members(s) {
		if m.Signer.Equals(signer) {
			return int(m.Index)
		}
	}
	return -1
}

// ScheduleRound is the round as clients/schedule computes roles from it.
func ScheduleRound(s *State, r *Round) schedule.Round {
	return schedule.Round{
		Seed:         schedule.Seed(r.Seed),
		DataIndex:    r.DataIndex,
		BatchSize:    r.BatchSize,
		InnerSteps:   r.InnerSteps,
		Clients:      r.ClientsLen,
		WitnessNodes: s.Config.WitnessNodes,
	}
}

// MustVerify says whether the commitment of member index of round r must be
// verified, as the program decides (clients/schedule.MustVerify on the
// stored commitment): false without a commitment.
func MustVerify(s *State, r *Round, index uint16) bool {
	if index >= r.ClientsLen || int(index) >= len(r.Commits) {
		return false
	}
	c := r.Commits[index]
	return c.Flags&CommitCommitted != 0 &&
		schedule.MustVerify(s.Config.VerificationPercent, schedule.Seed(r.VerifySeed), index, c.Flags&CommitProbation != 0)
}

// VerifierOf is who judges the commitment of member index of the current
// round r: the verifier its seed drew, or the fallback among the healthy
// members once the drawn one is no longer healthy (the program's
// verifier_of). Meaningful once the verify seed is drawn.
func VerifierOf(s *State, r *Round, index uint16) (uint16, bool) {
	seed := schedule.Seed(r.VerifySeed)
	healthy := func(i uint16) bool { return int(i) < len(s.Epoch.Clients) && s.Epoch.Clients[i].State == MemberHealthy }
	d, ok := schedule.Verifier(seed, index, r.ClientsLen)
	if !ok || healthy(d) {
		return d, ok
	}
	return schedule.FallbackVerifier(seed, index, d, r.ClientsLen, healthy)
}

// Slot finds signer's registration, if any.
func Slot(s *State, signer solana.PublicKey) (*ClientSlot, bool) {
	for i := range s.Clients {
		c := &s.Clients[i]
		if c.Occupied != 0 && c.Signer.Equals(signer) {
			return c, true
		}
	}
	return nil, false
}

// FixedString reads a zero-padded fixed-size string field.
func FixedString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Fixed zero-pads s into a field of n bytes; it fails if s does not fit.
func Fixed(s string, n int) ([]byte, error) {
	if len(s) > n {
		return nil, fmt.Errorf("%q is %d bytes; at most %d", s, len(s), n)
	}
	out := make([]byte, n)
	copy(out, s)
	return out, nil
}
