package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/idl"
)

// coordinatorCommands administer and inspect runs of the Coordinator program.
func coordinatorCommands() []*cli.Command {
	return []*cli.Command{
		createRunCommand(),
		updateConfigCommand(),
		setPausedCommand(),
		tickCommand(),
		setFutureEpochRatesCommand(),
		updateClientVersionCommand(),
		checkpointCommand(),
		closeRunCommand(),
		jsonDumpRunCommand(),
		jsonDumpUserCommand(),
		listRunsCommand(),
		canJoinCommand(),
	}
}

func createRunCommand() *cli.Command {
	return &cli.Command{
		Name:   "create-run",
		Usage:  "create a run: allocate its coordinator account and initialise it; the wallet pays and is the main authority",
		Flags:  append(createRunFlags(), coordinatorRunFlags()...),
		Action: createRun,
	}
}

func createRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	a, err := newCoordinatorCtx(c)
	if err != nil {
		return err
	}
	me := a.wallet.PublicKey()
	join, err := joinAuthority(c, me)
	if err != nil {
		return err
	}
	runID := c.String(runIDFlag.Name)
	account := solana.NewWallet().PrivateKey
	ixs, run, err := a.program.CreateRun(c.Context, a.client, me, account.PublicKey(), coordinator.CreateParams{
		RunID: runID, MainAuthority: me, JoinAuthority: join, ClientVersion: c.String(clientVersionFlag.Name),
	})
	if err != nil {
		return badInput(err)
	}
	sig, err := a.client.Send(c.Context, a.wallet, ixs, account)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "run %q: instance %s, coordinator account %s\nsignature: %s\n", runID, run.Instance, run.Account, sig)
	return permissionlessGrant(c, a.client, a.wallet)
}

// joinAuthority is the run's join authority: --join-authority, else the
// wallet me. --permissionless needs the wallet, which then grants everyone.
func joinAuthority(c *cli.Context, me solana.PublicKey) (solana.PublicKey, error) {
	join := me
	if s := c.String(joinAuthorityFlag.Name); s != "" {
		var err error
		if join, err = parsePubkey("--join-authority", s); err != nil {
			return join, err
		}
	}
	if c.Bool(permissionlessFlag.Name) && !join.Equals(me) {
		return join, badInputf("--permissionless needs the wallet to be the join authority")
	}
	return join, nil
}

// permissionlessGrant follows a run's creation, with --permissionless, with
// the wallet's active permissionless join authorization (grantee = everyone,
// the join scope). One such grant covers every run of the join authority, so
// an active one that exists already is success; an inactive one is an error
// (re-activating it would open every run of the authority, which its owner
// switched off).
func permissionlessGrant(c *cli.Context, client *chain.Client, wallet solana.PrivateKey) error {
	if !c.Bool(permissionlessFlag.Name) {
		return nil
	}
	auth, err := authorizerProgram(c)
	if err != nil {
		return err
	}
	me := wallet.PublicKey()
	create, addr, err := auth.Create(me, me, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		return err
	}
	existing, err := auth.Fetch(c.Context, client, addr)
	switch {
	case err == nil:
		if !existing.Grantor.Equals(me) || !existing.Grantee.Equals(authorizer.Everyone) || !bytes.Equal(existing.Scope, authorizer.JoinRunScope) {
			return fmt.Errorf("the run exists, but the account %s at the address of the wallet's permissionless authorization grants %s to %s from %s, not the join scope to everyone from the wallet",
				addr, existing.Scope, existing.Grantee, existing.Grantor)
		}
		if !existing.Active {
			return fmt.Errorf("the run exists, but the wallet's permissionless authorization %s is inactive, so nobody may join without a grant of their own; "+
				"to open the run, delete it (join-authorization-delete --authorizer %s) and create it again (join-authorization-create --authorizer %s)",
				addr, authorizer.Everyone, authorizer.Everyone)
		}
		fmt.Fprintf(c.App.Writer, "permissionless authorization: %s (exists already and is active: it lets everyone join every run of this join authority)\n", addr)
		return nil
	case !errors.Is(err, chain.ErrAccountNotFound):
		return fmt.Errorf("the run exists, but reading the permissionless authorization %s failed: %w", addr, err)
	}
	activate, err := auth.SetActive(me, addr, true)
	if err != nil {
		return err
	}
	sig, err := client.Send(c.Context, wallet, []solana.Instruction{create, activate})
	if err != nil {
		return fmt.Errorf("the run exists, but the permissionless authorization failed: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "permissionless authorization: %s\nsignature: %s\n", addr, sig)
	return nil
}

func updateConfigCommand() *cli.Command {
	return &cli.Command{
		Name: "update-config",
		Usage: "apply a run config TOML file (metadata, config, model, progress; config/README.md documents the format). " +
			"Every rule of the program is checked against the run before anything is sent; a [config] section that leaves out required keys keeps their current values",
		Flags:  append([]cli.Flag{&cli.StringFlag{Name: "config-path", Usage: "the run config TOML file (required)"}}, coordinatorRunFlags()...),
		Action: updateConfig,
	}
}

func updateConfig(c *cli.Context) error {
	if err := requireFlags(c, "config-path", runIDFlag.Name); err != nil {
		return err
	}
	rc, err := coordinator.LoadRunConfig(c.String("config-path"))
	if err != nil {
		return badInput(err)
	}
	a, err := newCoordinatorCtx(c)
	if err != nil {
		return err
	}
	run, err := a.open(c)
	if err != nil {
		return err
	}
	s, err := run.FetchState(c.Context, a.client)
	if err != nil {
		return err
	}
	params, kept, err := rc.ParamsOver(&s.Config)
	if err != nil {
		return badInputf("%w: %s: %w", coordinator.ErrRunConfig, c.String("config-path"), err)
	}
	if err := rc.CheckUpdate(s, params); err != nil {
		return badInputf("%w; nothing was sent", err)
	}
	if len(kept) > 0 {
		fmt.Fprintf(c.App.Writer, "[config] kept from the run's current config: %s\n", strings.Join(kept, ", "))
	}
	return sendUpdate(c, a, run, params)
}

// sendUpdate sends a checked update in two transactions: together the
// sections exceed the 1,232-byte limit. [config], [model] and [progress] go
// first: only they depend on the run's phase, so when they are refused
// nothing has changed, and the metadata that follows can only fail on the
// way (then the error says that the rest was applied).
func sendUpdate(c *cli.Context, a *coordinatorCtx, run coordinator.Run, params coordinator.UpdateParams) error {
	me := a.wallet.PublicKey()
	applied := ""
	if params.Config != nil || params.Model != nil || params.Progress != nil {
		ix, err := run.Update(me, coordinator.UpdateParams{Config: params.Config, Model: params.Model, Progress: params.Progress})
		if err != nil {
			return err
		}
		if err := a.send(c, ix); err != nil {
			return err
		}
		applied = "[config], [model] and [progress] were applied (signature above)"
	}
	if params.Metadata == nil {
		return nil
	}
	ix, err := run.Update(me, coordinator.UpdateParams{Metadata: params.Metadata})
	if err != nil {
		return err
	}
	if err := a.send(c, ix); err != nil {
		if applied != "" {
			return fmt.Errorf("%s, but [metadata] was not: %w; run update-config again", applied, err)
		}
		return err
	}
	return nil
}

func setPausedCommand() *cli.Command {
	return &cli.Command{
		Name:   "set-paused",
		Usage:  "pause the run (at the end of the epoch if rounds are running), or resume it with --resume",
		Flags:  append([]cli.Flag{&cli.BoolFlag{Name: "resume", Usage: "resume instead of pausing"}}, coordinatorRunFlags()...),
		Action: setPaused,
	}
}

func setPaused(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) {
		return r.SetPaused(me, !c.Bool("resume"))
	})
}

func tickCommand() *cli.Command {
	return &cli.Command{
		Name:   "tick",
		Usage:  "advance the run if a timer or condition allows (anyone may)",
		Flags:  coordinatorRunFlags(),
		Action: tick,
	}
}

func tick(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) { return r.Tick(me) })
}

func setFutureEpochRatesCommand() *cli.Command {
	return &cli.Command{
		Name:   "set-future-epoch-rates",
		Usage:  "set the reward points shared per epoch and the slash per dropped client, from the next epoch on",
		Flags:  append([]cli.Flag{earningRateFlag, slashingRateFlag}, coordinatorRunFlags()...),
		Action: setFutureEpochRates,
	}
}

func setFutureEpochRates(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	earning, slashing, err := epochRates(c)
	if err != nil {
		return err
	}
	if earning == nil && slashing == nil {
		return badInputf("give --earning-rate-total-shared and/or --slashing-rate-per-client")
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) {
		return r.SetFutureEpochRates(me, earning, slashing)
	})
}

// epochRates reads --earning-rate-total-shared and --slashing-rate-per-client
// (nil when not given).
func epochRates(c *cli.Context) (earning, slashing *uint64, err error) {
	if earning, err = optionalU64(c, earningRateFlag.Name); err != nil {
		return nil, nil, err
	}
	if slashing, err = optionalU64(c, slashingRateFlag.Name); err != nil {
		return nil, nil, err
	}
	return earning, slashing, nil
}

func updateClientVersionCommand() *cli.Command {
	return &cli.Command{
		Name:   "update-client-version",
		Usage:  "set the client version joiners must run (while the run is paused)",
		Flags:  append([]cli.Flag{&cli.StringFlag{Name: "new-version", Usage: "1 to 64 bytes (required)"}}, coordinatorRunFlags()...),
		Action: updateClientVersion,
	}
}

func updateClientVersion(c *cli.Context) error {
	if err := requireFlags(c, "new-version", runIDFlag.Name); err != nil {
		return err
	}
	v := c.String("new-version")
	if len(v) == 0 || len(v) > coordinator.MaxClientVersionLen {
		return badInputf("--new-version must be 1 to %d bytes", coordinator.MaxClientVersionLen)
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) {
		return r.UpdateClientVersion(me, v)
	})
}

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "as a member of the run, record where the latest model was uploaded",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "repo", Usage: "where the checkpoint is, at most 192 bytes (required)"},
			&cli.StringFlag{Name: "revision", Usage: "its revision (at most 64 bytes)"},
		}, coordinatorRunFlags()...),
		Action: checkpoint,
	}
}

func checkpoint(c *cli.Context) error {
	if err := requireFlags(c, "repo", runIDFlag.Name); err != nil {
		return err
	}
	repo, rev := c.String("repo"), c.String("revision")
	if len(repo) == 0 || len(repo) > 192 || len(rev) > 64 {
		return badInputf("--repo must be 1 to 192 bytes and --revision at most 64")
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) {
		return r.Checkpoint(me, repo, rev)
	})
}

func closeRunCommand() *cli.Command {
	return &cli.Command{
		Name:   "close-run",
		Usage:  "close a halted run (paused, finished or never started) and reclaim both accounts' rent",
		Flags:  append([]cli.Flag{spillFlag}, coordinatorRunFlags()...),
		Action: closeRun,
	}
}

func closeRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	spill := solana.PublicKey{}
	if s := c.String(spillFlag.Name); s != "" {
		var err error
		if spill, err = parsePubkey("--spill", s); err != nil {
			return err
		}
	}
	return adminSend(c, func(r coordinator.Run, me solana.PublicKey) (solana.Instruction, error) {
		if spill.IsZero() {
			spill = me
		}
		return r.Free(me, spill)
	})
}

func jsonDumpRunCommand() *cli.Command {
	return &cli.Command{
		Name: "json-dump-run",
		Usage: "print a run's state as JSON: every config key as a run config file names it; progress.step is the next step to train; " +
			"epoch.last_step is the epoch's last step once its time is up (0 before), drain_end_step the program's raw epoch.last_step (the step that ends the drain, possibly past total_steps)",
		Flags:  append([]cli.Flag{runIDFlag}, coordinatorReadFlags()...),
		Action: jsonDumpRun,
	}
}

func jsonDumpRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	run, inst, s, err := readRun(c)
	if err != nil {
		return err
	}
	return printJSON(c, runJSON(run, inst, s))
}

func jsonDumpUserCommand() *cli.Command {
	return &cli.Command{
		Name:  "json-dump-user",
		Usage: "print one client's registration and role in a run as JSON",
		Flags: append([]cli.Flag{runIDFlag,
			&cli.StringFlag{Name: "address", Usage: "the client's signer pubkey (required)"},
		}, coordinatorReadFlags()...),
		Action: jsonDumpUser,
	}
}

func jsonDumpUser(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name, "address"); err != nil {
		return err
	}
	user, err := parsePubkey("--address", c.String("address"))
	if err != nil {
		return err
	}
	_, _, s, err := readRun(c)
	if err != nil {
		return err
	}
	out, err := userJSON(s, user)
	if err != nil {
		return err
	}
	return printJSON(c, out)
}

func listRunsCommand() *cli.Command {
	return &cli.Command{
		Name:   "list-runs",
		Usage:  "list the runs of the Coordinator program as JSON",
		Flags:  coordinatorReadFlags(),
		Action: listRuns,
	}
}

func listRuns(c *cli.Context) error {
	a, err := newReadCtx(c)
	if err != nil {
		return err
	}
	runs, err := fetchRuns(c, a)
	if err != nil {
		return err
	}
	return printJSON(c, runs)
}

func canJoinCommand() *cli.Command {
	return &cli.Command{
		Name:  "can-join",
		Usage: "check whether a user may join a run under an authorization (exit 0: yes, 1: no)",
		Flags: append([]cli.Flag{runIDFlag, granteeFlag,
			&cli.StringFlag{Name: "address", Usage: "the user's signer pubkey (required)"},
			authorizerProgramFlag, scopeFlag,
		}, coordinatorReadFlags()...),
		Action: canJoinRun,
	}
}

func canJoinRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name, granteeFlag.Name, "address"); err != nil {
		return err
	}
	grantee, err := parsePubkey("--authorizer", c.String(granteeFlag.Name))
	if err != nil {
		return err
	}
	user, err := parsePubkey("--address", c.String("address"))
	if err != nil {
		return err
	}
	auth, err := authorizerProgram(c)
	if err != nil {
		return err
	}
	a, err := newReadCtx(c)
	if err != nil {
		return err
	}
	v, err := checkJoin(c.Context, a, auth, c.String(runIDFlag.Name), grantee, user, []byte(c.String(scopeFlag.Name)))
	if err != nil {
		return err
	}
	if err := printJSON(c, map[string]any{
		"can_join": v.ok, "run_id": v.inst.RunId, "join_authority": v.inst.JoinAuthority.String(),
		"authorization": v.authorization.String(), "address": user.String(), "reason": v.reason,
	}); err != nil {
		return err
	}
	if !v.ok {
		return cli.Exit("", exitFailure)
	}
	return nil
}

// joinVerdict is can-join's answer for one run.
type joinVerdict struct {
	ok            bool
	reason        string // why not
	inst          *coordinator.Instance
	authorization solana.PublicKey
}

// checkJoin tells whether user may join the run runID under grantee's
// authorization of scope from the run's join authority (can-join, and
// run-manager choosing a run).
func checkJoin(ctx context.Context, a *coordinatorCtx, auth authorizer.Program, runID string, grantee, user solana.PublicKey, scope []byte) (joinVerdict, error) {
	_, inst, err := a.program.Open(ctx, a.client, runID)
	if err != nil {
		return joinVerdict{}, err
	}
	addr, _, err := auth.Address(inst.JoinAuthority, grantee, scope)
	if err != nil {
		return joinVerdict{}, badInput(err)
	}
	v := joinVerdict{inst: inst, authorization: addr}
	authz, err := auth.Fetch(ctx, a.client, addr)
	switch {
	case errors.Is(err, chain.ErrAccountNotFound):
		v.reason = "no such authorization"
	case err != nil:
		return joinVerdict{}, err
	case authorizer.IsValidFor(authz, inst.JoinAuthority, user, scope):
		v.ok = true
	default:
		v.reason = "the authorization is inactive or does not cover this address"
	}
	return v, nil
}

// coordinatorCtx is what every coordinator command needs.
type coordinatorCtx struct {
	program coordinator.Program
	client  *chain.Client
	wallet  solana.PrivateKey
}

// newReadCtx is a context for read-only commands (no wallet).
func newReadCtx(c *cli.Context) (*coordinatorCtx, error) {
	program := coordinator.Default()
	if s := c.String(coordinatorProgramFlag.Name); s != "" {
		id, err := parsePubkey("--coordinator-program-id", s)
		if err != nil {
			return nil, err
		}
		program.ID = id
	}
	if _, err := program.InstanceAddress(c.String(runIDFlag.Name)); err != nil && c.IsSet(runIDFlag.Name) {
		return nil, badInput(err)
	}
	client, err := newChainClient(c)
	if err != nil {
		return nil, err
	}
	// Name the program's errors under an overridden id too.
	if tables, ok := client.Errors.(chain.ErrorTables); ok {
		d, err := idl.Load("psyche_coordinator")
		if err != nil {
			return nil, err
		}
		d.AddErrors(tables, program.ID)
	}
	return &coordinatorCtx{program: program, client: client}, nil
}

// readRun opens the run of --run-id and reads its state, without a wallet.
func readRun(c *cli.Context) (coordinator.Run, *coordinator.Instance, *coordinator.State, error) {
	a, err := newReadCtx(c)
	if err != nil {
		return coordinator.Run{}, nil, nil, err
	}
	run, inst, err := a.program.Open(c.Context, a.client, c.String(runIDFlag.Name))
	if err != nil {
		return coordinator.Run{}, nil, nil, err
	}
	s, err := run.FetchState(c.Context, a.client)
	if err != nil {
		return coordinator.Run{}, nil, nil, err
	}
	return run, inst, s, nil
}

func newCoordinatorCtx(c *cli.Context) (*coordinatorCtx, error) {
	key, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	a, err := newReadCtx(c)
	if err != nil {
		return nil, err
	}
	a.wallet = key
	return a, nil
}

func (a *coordinatorCtx) open(c *cli.Context) (coordinator.Run, error) {
	run, _, err := a.program.Open(c.Context, a.client, c.String(runIDFlag.Name))
	return run, err
}

func (a *coordinatorCtx) send(c *cli.Context, ix solana.Instruction) error {
	sig, err := a.client.Send(c.Context, a.wallet, []solana.Instruction{ix})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "signature: %s\n", sig)
	return nil
}

// adminSend opens the run and sends one instruction signed by the wallet.
func adminSend(c *cli.Context, build func(coordinator.Run, solana.PublicKey) (solana.Instruction, error)) error {
	a, err := newCoordinatorCtx(c)
	if err != nil {
		return err
	}
	run, err := a.open(c)
	if err != nil {
		return err
	}
	ix, err := build(run, a.wallet.PublicKey())
	if err != nil {
		return err
	}
	return a.send(c, ix)
}

func optionalU64(c *cli.Context, name string) (*uint64, error) {
	if !c.IsSet(name) {
		return nil, nil
	}
	v, err := strconv.ParseUint(c.String(name), 10, 64)
	if err != nil {
		return nil, badInputf("--%s %q is not a non-negative integer", name, c.String(name))
	}
	return &v, nil
}

func printJSON(c *cli.Context, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, string(out))
	return nil
}

// f32 widens a stored f32 for JSON.
func f32(v float32) float64 { return float64(v) }

// runJSON summarizes the state: what an operator reads, not all 67 KB.
func runJSON(run coordinator.Run, inst *coordinator.Instance, s *coordinator.State) map[string]any {
	m := s.Model
	members := []map[string]any{}
	for _, mem := range coordinator.Members(s) {
		m := map[string]any{
			"index": mem.Index, "signer": mem.Signer.String(), "p2p_identity": hex.EncodeToString(mem.P2PIdentity[:]), "state": coordinator.MemberStateName(mem.State),
		}
		addSlotVerification(m, &s.Clients[int(s.Epoch.Clients[mem.Index].Slot)%coordinator.MaxClients])
		members = append(members, m)
	}
	out := map[string]any{
		"run_id":              inst.RunId,
		"instance":            run.Instance.String(),
		"coordinator_account": run.Account.String(),
		"main_authority":      inst.MainAuthority.String(),
		"join_authority":      inst.JoinAuthority.String(),
		"version":             s.Version,
		"nonce":               s.Nonce,
		"client_version":      coordinator.FixedString(s.ClientVersion[:]),
		"run_state":           coordinator.Phase(s).String(),
		"run_state_start":     s.RunStateStart,
		"pending_pause":       s.PendingPause != 0,
		"metadata": map[string]any{
			"name": coordinator.FixedString(s.Metadata.Name[:]), "description": coordinator.FixedString(s.Metadata.Description[:]),
			"num_parameters": s.Metadata.NumParameters, "vocab_size": s.Metadata.VocabSize,
		},
		"config":   configJSON(s.Config),
		"progress": map[string]any{"epoch": s.Progress.Epoch, "step": s.Progress.Step, "data_index": s.Progress.DataIndex},
		"model": map[string]any{
			"architecture": m.Architecture, "tokenizer": m.Tokenizer, "tokenizer_hash": hex.EncodeToString(m.TokenizerHash[:]), "vocab_size": m.VocabSize,
			"n_layer": m.NLayer, "n_head": m.NHead, "n_embd": m.NEmbd, "max_seq_len": m.MaxSeqLen,
			"checkpoint_kind": m.CheckpointKind, "checkpoint_repo": coordinator.FixedString(m.CheckpointRepo[:]),
			"checkpoint_revision": coordinator.FixedString(m.CheckpointRevision[:]),
			"data_location_kind":  m.DataLocationKind, "data_location": coordinator.FixedString(m.DataLocation[:]),
			"data_root": hex.EncodeToString(m.DataRoot[:]), "lr_schedule": m.LrSchedule,
			"learning_rate": f32(m.LearningRate), "final_learning_rate": f32(m.FinalLearningRate),
			"lr_warmup_steps": m.LrWarmupSteps, "lr_decay_steps": m.LrDecaySteps, "weight_decay": f32(m.WeightDecay),
			"clip_grad_norm": f32(m.ClipGradNorm), "compression_decay": f32(m.CompressionDecay),
			"compression_topk": m.CompressionTopk, "compression_chunk": m.CompressionChunk,
			"quantize_1bit": m.Quantize1bit != 0, "cold_start_warmup_steps": m.ColdStartWarmupSteps,
			"optimizer": m.Optimizer, "inner_steps": m.InnerSteps, "outer_learning_rate": f32(m.OuterLearningRate),
			"value_bits": m.ValueBits, "precision": m.Precision, "grad_shards": coordinator.GradShards(m.GradShardsLog2),
		},
		"verification":  coordinator.VerificationSummary(s),
		"current_rates": ratesJSON(s.CurrentRates),
		"future_rates":  ratesJSON(s.FutureRates),
		"epoch": map[string]any{
			"start_timestamp": s.Epoch.StartTimestamp, "start_step": s.Epoch.StartStep,
			"last_step": coordinator.EpochLastStep(s), "drain_end_step": s.Epoch.LastStep,
			"cold_start": s.Epoch.ColdStart != 0, "quorum_failed": s.Epoch.QuorumFailed != 0, "members": members,
		},
	}
	if p := coordinator.Phase(s); p == coordinator.RoundTrain || p == coordinator.RoundWitness || p == coordinator.Cooldown {
		r := coordinator.CurrentRound(s)
		out["round"] = map[string]any{
			"step": r.Step, "height": r.Height, "seed": hex.EncodeToString(r.Seed[:]), "data_index": r.DataIndex,
			"batch_size": r.BatchSize, "inner_steps": r.InnerSteps, "clients": r.ClientsLen,
			"witnesses_elected": r.WitnessCount, "witnesses_reported": r.WitnessesLen,
		}
	}
	return out
}

func configJSON(c coordinator.Config) map[string]any {
	return map[string]any{
		"warmup_time": c.WarmupTime, "cooldown_time": c.CooldownTime, "max_round_train_time": c.MaxRoundTrainTime,
		"round_witness_time": c.RoundWitnessTime, "epoch_time": c.EpochTime,
		"waiting_for_members_extra_time": c.WaitingForMembersExtraTime, "total_steps": c.TotalSteps,
		"init_min_clients": c.InitMinClients, "min_clients": c.MinClients, "witness_nodes": c.WitnessNodes,
		"global_batch_size_start": c.GlobalBatchSizeStart, "global_batch_size_end": c.GlobalBatchSizeEnd,
		"global_batch_size_warmup_tokens": c.GlobalBatchSizeWarmupTokens, "overlap": c.Overlap != 0,
		"verification_percent": c.VerificationPercent, "forgive_per_epoch": c.ForgivePerEpoch, "vesting_epochs": c.VestingEpochs,
	}
}

func ratesJSON(r bindings.EpochRates) map[string]any {
	return map[string]any{"earning_rate_total_shared": r.EarningRateTotalShared, "slashing_rate_per_client": r.SlashingRatePerClient}
}

// addSlotVerification adds a client slot's verification fields to m.
func addSlotVerification(m map[string]any, slot *coordinator.ClientSlot) {
	m["has_fault"] = slot.HasFault != 0
	m["last_fault_epoch"] = slot.LastFaultEpoch
	m["burned"] = slot.Burned
	m["unvested"] = slot.Unvested[:]
	m["forgiven"] = slot.Forgiven
	m["open_disputes"] = slot.OpenDisputes
	m["state_after"] = hex.EncodeToString(slot.StateAfter[:])
}

func userJSON(s *coordinator.State, user solana.PublicKey) (map[string]any, error) {
	slot, ok := coordinator.Slot(s, user)
	if !ok {
		return nil, fmt.Errorf("%s is not registered in this run", user)
	}
	out := map[string]any{
		"address": user.String(), "p2p_identity": hex.EncodeToString(slot.P2PIdentity[:]),
		"earned": slot.Earned, "slashed": slot.Slashed, "pending_join": slot.Pending != 0, "in_epoch": slot.InEpoch != 0,
		"has_finished": slot.HasFinished != 0, "last_finished_epoch": slot.LastFinishedEpoch,
	}
	addSlotVerification(out, slot)
	idx := coordinator.MemberIndex(s, user)
	if idx < 0 {
		return out, nil
	}
	out["epoch_index"] = idx
	out["member_state"] = coordinator.MemberStateName(s.Epoch.Clients[idx].State)
	if p := coordinator.Phase(s); p == coordinator.RoundTrain || p == coordinator.RoundWitness {
		r := coordinator.CurrentRound(s)
		if idx < int(r.ClientsLen) {
			role, err := coordinator.ScheduleRound(s, r).Role(uint16(idx))
			if err != nil {
				return nil, err
			}
			out["round"] = map[string]any{"step": r.Step, "witness": role.Witness, "batch_start": role.Batch.Start, "batch_len": role.Batch.Len}
		}
	}
	return out, nil
}

// fetchRuns lists the program's runs with their phase and progress.
func fetchRuns(c *cli.Context, a *coordinatorCtx) ([]map[string]any, error) {
	listed, err := a.program.ListRuns(c.Context, a.client)
	if err != nil {
		return nil, err
	}
	runs := []map[string]any{}
	for _, l := range listed {
		inst := l.Instance
		entry := map[string]any{
			"run_id": inst.RunId, "instance": l.Run.Instance.String(), "coordinator_account": inst.CoordinatorAccount.String(),
			"main_authority": inst.MainAuthority.String(), "join_authority": inst.JoinAuthority.String(),
		}
		if s, err := l.Run.FetchState(c.Context, a.client); err == nil {
			entry["run_state"] = coordinator.Phase(s).String()
			entry["epoch"], entry["step"] = s.Progress.Epoch, s.Progress.Step
			if coordinator.Phase(s) != coordinator.Uninitialized {
				entry["precision"] = coordinator.PrecisionName(s.Model.Precision)
				entry["grad_shards"] = coordinator.GradShards(s.Model.GradShardsLog2)
			}
		}
		runs = append(runs, entry)
	}
	return runs, nil
}
