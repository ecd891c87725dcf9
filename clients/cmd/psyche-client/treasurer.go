package main

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	tbindings "github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/idl"
)

// treasurerCommands are the token-reward commands and the SPL helpers that
// let localnet and devnet flows run without the spl-token CLI. Amounts are
// token base units, or decimal amounts ("1.5") converted with the mint's decimals.
func treasurerCommands() []*cli.Command {
	return []*cli.Command{
		mintCreateCommand(),
		mintToCommand(),
		treasurerCreateRunCommand(),
		treasurerUpdateRunCommand(),
		treasurerTopUpRewardsCommand(),
		treasurerClaimRewardsCommand(),
		treasurerSettleCommand(),
		treasurerDepositCommand(),
		treasurerWithdrawDepositCommand(),
		treasurerBurnForfeitedCommand(),
		treasurerWithdrawCommand(),
		treasurerJSONDumpRunCommand(),
		treasurerCloseRunCommand(),
	}
}

// joinDepositFlag is treasurer-create-run's and treasurer-update-run's.
var joinDepositFlag = &cli.StringFlag{
	Name: "join-deposit",
	Usage: "tokens (base units, or a decimal amount) a user deposits with treasurer-deposit to be allowed to join; " +
		"the run becomes its own join authority (0: joining needs a free treasurer-deposit)",
}

func mintCreateCommand() *cli.Command {
	return &cli.Command{
		Name:  "mint-create",
		Usage: "create a token mint; the wallet pays and is its mint authority",
		Flags: append([]cli.Flag{
			&cli.UintFlag{Name: "decimals", Usage: "decimal places of the token (0 to 18)", Value: 0},
			&cli.BoolFlag{Name: "token-2022", Usage: "create it under Token-2022 instead of SPL Token"},
		}, signerFlags()...),
		Action: mintCreate,
	}
}

func mintCreate(c *cli.Context) error {
	decimals := c.Uint("decimals")
	if decimals > 18 {
		return badInputf("--decimals %d: at most 18", decimals)
	}
	t, err := newTreasurerCtx(c)
	if err != nil {
		return err
	}
	program := treasurer.TokenProgramID
	if c.Bool("token-2022") {
		program = treasurer.Token2022ProgramID
	}
	mint := solana.NewWallet().PrivateKey
	me := t.wallet.PublicKey()
	ixs, err := treasurer.CreateMint(c.Context, t.client, me, mint.PublicKey(), me, uint8(decimals), program)
	if err != nil {
		return err
	}
	sig, err := t.client.Send(c.Context, t.wallet, ixs, mint)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "mint %s (decimals %d, program %s)\nsignature: %s\n", mint.PublicKey(), decimals, program, sig)
	return nil
}

func mintToCommand() *cli.Command {
	return &cli.Command{
		Name:  "mint-to",
		Usage: "mint tokens into an owner's associated token account (created if missing); the wallet must be the mint authority",
		Flags: append([]cli.Flag{mintFlag,
			&cli.StringFlag{Name: "amount", Usage: "base units, or a decimal amount of tokens such as 1.5 (required)"},
			&cli.StringFlag{Name: "to", Usage: "the owner's pubkey (default: the wallet)"},
		}, signerFlags()...),
		Action: mintTo,
	}
}

func mintTo(c *cli.Context) error {
	if err := requireFlags(c, mintFlag.Name, "amount"); err != nil {
		return err
	}
	t, err := newTreasurerCtx(c)
	if err != nil {
		return err
	}
	mint, err := parsePubkey("--mint", c.String(mintFlag.Name))
	if err != nil {
		return err
	}
	owner, err := pubkeyOrWallet(c, "to", t.wallet)
	if err != nil {
		return err
	}
	info, err := treasurer.FetchMint(c.Context, t.client, mint)
	if err != nil {
		return badInput(err)
	}
	amount, err := parseAmount("--amount", c.String("amount"), info.Decimals)
	if err != nil {
		return err
	}
	create, account, err := treasurer.CreateTokenAccount(t.wallet.PublicKey(), owner, mint, info.TokenProgram)
	if err != nil {
		return err
	}
	ix := treasurer.MintTo(info.TokenProgram, mint, account, t.wallet.PublicKey(), amount)
	return t.send(c, []solana.Instruction{create, ix}, fmt.Sprintf("minted %d base units into %s", amount, account))
}

func treasurerCreateRunCommand() *cli.Command {
	return &cli.Command{
		Name:   "treasurer-create-run",
		Usage:  "create a run whose rewards the Treasurer pays in --mint; the wallet pays and is the run authority",
		Flags:  append(append([]cli.Flag{mintFlag, joinDepositFlag}, createRunFlags()...), treasurerRunFlags()...),
		Action: treasurerCreateRun,
	}
}

func treasurerCreateRun(c *cli.Context) error {
	if err := requireFlags(c, mintFlag.Name, runIDFlag.Name); err != nil {
		return err
	}
	index, err := runIndex(c)
	if err != nil {
		return err
	}
	mint, err := parsePubkey("--mint", c.String(mintFlag.Name))
	if err != nil {
		return err
	}
	t, err := newTreasurerCtx(c)
	if err != nil {
		return err
	}
	me := t.wallet.PublicKey()
	deposit := c.IsSet(joinDepositFlag.Name)
	if deposit && (c.IsSet(joinAuthorityFlag.Name) || c.Bool(permissionlessFlag.Name)) {
		return badInputf("--join-deposit makes the run its own join authority: it excludes --join-authority and --permissionless")
	}
	join, err := joinAuthority(c, me)
	if err != nil {
		return err
	}
	info, err := treasurer.FetchMint(c.Context, t.client, mint)
	if err != nil {
		return badInput(err)
	}
	if err := info.CheckCollateral(); err != nil {
		return badInputf("--mint %s: %v (programs/treasurer/README.md lists what a run accepts)", mint, err)
	}
	params := treasurer.CreateParams{
		RunID: c.String(runIDFlag.Name), Index: &index, MainAuthority: me, JoinAuthority: join, ClientVersion: c.String(clientVersionFlag.Name),
		Mint: mint, TokenProgram: info.TokenProgram,
	}
	if deposit {
		amount, err := parseAmount("--join-deposit", c.String(joinDepositFlag.Name), info.Decimals)
		if err != nil {
			return err
		}
		params.JoinAuthority, params.JoinDeposit = solana.PublicKey{}, &amount
	}
	runID := params.RunID
	account := solana.NewWallet().PrivateKey
	ixs, r, err := t.program.CreateRun(c.Context, t.client, me, account.PublicKey(), params)
	if err != nil {
		return badInput(err)
	}
	sig, err := t.client.Send(c.Context, t.wallet, ixs, account)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "run %q: treasurer run %s (index %d), token account %s, coordinator instance %s, coordinator account %s\nsignature: %s\n",
		runID, r.Address, r.Index, r.Collateral, r.Coordinator.Instance, r.Coordinator.Account, sig)
	if deposit {
		fmt.Fprintf(c.App.Writer, "join deposit %d base units: users join after treasurer-deposit\n", *params.JoinDeposit)
		if *params.JoinDeposit > 0 {
			// A new run has no rates, and a fault must slash for a deposit to be at stake.
			fmt.Fprintf(c.App.Writer, "deposits open once treasurer-update-run sets --%s above 0\n", slashingRateFlag.Name)
		}
	}
	return permissionlessGrant(c, t.client, t.wallet)
}

func treasurerUpdateRunCommand() *cli.Command {
	return &cli.Command{
		Name:  "treasurer-update-run",
		Usage: "configure a Treasurer run (the Coordinator accepts changes only from the Treasurer): config file, epoch rates, pause/resume, client version",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config-path", Usage: "a run config TOML file (config/README.md)"},
			earningRateFlag,
			slashingRateFlag,
			&cli.BoolFlag{Name: "pause", Usage: "pause the run"},
			&cli.BoolFlag{Name: "resume", Usage: "resume the run (after the other changes)"},
			&cli.StringFlag{Name: "client-version", Usage: "the client version joiners must run (1 to 64 bytes)"},
			&cli.StringFlag{Name: joinDepositFlag.Name, Usage: "the join deposit of deposits made from now on (base units, or a decimal amount; above 0 only in a run created with --join-deposit)"},
		}, treasurerRunFlags()...),
		Action: treasurerUpdateRun,
	}
}

func treasurerUpdateRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	if c.Bool("pause") && c.Bool("resume") {
		return badInputf("--pause and --resume exclude each other")
	}
	var u treasurer.UpdateParams
	var err error
	if u.EarningRate, u.SlashingRate, err = epochRates(c); err != nil {
		return err
	}
	if c.Bool("pause") || c.Bool("resume") {
		paused := c.Bool("pause")
		u.Paused = &paused
	}
	if c.IsSet("client-version") {
		v := c.String("client-version")
		if len(v) == 0 || len(v) > coordinator.MaxClientVersionLen {
			return badInputf("--client-version %q must be 1 to %d bytes", v, coordinator.MaxClientVersionLen)
		}
		u.ClientVersion = &v
	}
	var metadata *coordinator.RunMetadata
	if path := c.String("config-path"); path != "" {
		params, err := coordinator.LoadParams(path)
		if err != nil {
			return badInput(err)
		}
		// Metadata goes alone: with the model it would not fit one transaction.
		metadata = params.Metadata
		u.Coordinator = coordinator.UpdateParams{Config: params.Config, Model: params.Model, Progress: params.Progress}
	}
	if metadata == nil && u == (treasurer.UpdateParams{}) && !c.IsSet(joinDepositFlag.Name) {
		return badInputf("nothing to change: give --config-path, a rate, --pause/--resume, --client-version or --join-deposit")
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	if c.IsSet(joinDepositFlag.Name) || u.EarningRate != nil {
		info, err := treasurer.FetchMint(c.Context, t.client, r.Mint)
		if err != nil {
			return err
		}
		if c.IsSet(joinDepositFlag.Name) {
			amount, err := parseAmount("--join-deposit", c.String(joinDepositFlag.Name), info.Decimals)
			if err != nil {
				return err
			}
			u.JoinDeposit = &amount
		}
		// The program's rule (UnfundableRate), checked before anything is sent.
		if u.EarningRate != nil {
			if err := treasurer.CheckEarningRate(info, *u.EarningRate); err != nil {
				return badInputf("--%s: %v", earningRateFlag.Name, err)
			}
		}
	}
	if u.SlashingRate != nil || u.JoinDeposit != nil {
		if err := checkDepositRules(c, t, r, u); err != nil {
			return err
		}
	}
	me := t.wallet.PublicKey()
	// A pause goes first, so the new config lands on a halted run.
	if u.Paused != nil && *u.Paused {
		ix, err := r.Update(me, treasurer.UpdateParams{Paused: u.Paused})
		if err != nil {
			return err
		}
		if err := t.send(c, []solana.Instruction{ix}, "paused"); err != nil {
			return err
		}
		u.Paused = nil
	}
	if metadata != nil {
		ix, err := r.Update(me, treasurer.UpdateParams{Coordinator: coordinator.UpdateParams{Metadata: metadata}})
		if err != nil {
			return err
		}
		if err := t.send(c, []solana.Instruction{ix}, "metadata updated"); err != nil {
			return err
		}
	}
	if u == (treasurer.UpdateParams{}) {
		return nil
	}
	ix, err := r.Update(me, u)
	if err != nil {
		return err
	}
	return t.send(c, []solana.Instruction{ix}, "run updated")
}

// checkDepositRules applies run_update's rules for an update u that sets
// the join deposit or the slashing rate, before anything is sent: a deposit
// above 0 only in a run that is its own join authority
// (JoinNotThroughTreasurer), and a slashing rate above 0 for the coming
// epochs of a run that asks for or holds deposits (ZeroSlashingRate).
func checkDepositRules(c *cli.Context, t *treasurerCtx, r treasurer.Run, u treasurer.UpdateParams) error {
	_, acc, err := t.program.Open(c.Context, t.client, r.Index)
	if err != nil {
		return err
	}
	deposit := acc.JoinDeposit
	if u.JoinDeposit != nil {
		deposit = *u.JoinDeposit
		if deposit > 0 && !acc.JoinAuthority.Equals(r.Address) {
			return badInputf("--%s: the run's join authority is %s, not the run: create the run with --%s to take deposits",
				joinDepositFlag.Name, acc.JoinAuthority, joinDepositFlag.Name)
		}
	}
	if u.SlashingRate != nil {
		if err := treasurer.CheckSlashingRate(deposit, acc.TotalDeposits, *u.SlashingRate); err != nil {
			return badInputf("--%s %d: %v", slashingRateFlag.Name, *u.SlashingRate, err)
		}
		return nil
	}
	s, err := r.Coordinator.FetchState(c.Context, t.client)
	if err != nil {
		return err
	}
	if err := treasurer.CheckSlashingRate(deposit, acc.TotalDeposits, s.FutureRates.SlashingRatePerClient); err != nil {
		return badInputf("--%s: %v: give --%s above 0 too", joinDepositFlag.Name, err, slashingRateFlag.Name)
	}
	return nil
}

func treasurerTopUpRewardsCommand() *cli.Command {
	return &cli.Command{
		Name:  "treasurer-top-up-rewards",
		Usage: "transfer tokens from the wallet's token account into the run's",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "collateral-amount", Usage: "base units, or a decimal amount of tokens such as 1.5 (required)"},
		}, treasurerRunFlags()...),
		Action: treasurerTopUpRewards,
	}
}

func treasurerTopUpRewards(c *cli.Context) error {
	if err := requireFlags(c, "collateral-amount", runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	info, err := treasurer.FetchMint(c.Context, t.client, r.Mint)
	if err != nil {
		return err
	}
	amount, err := parseAmount("--collateral-amount", c.String("collateral-amount"), info.Decimals)
	if err != nil {
		return err
	}
	me := t.wallet.PublicKey()
	from, err := treasurer.AssociatedTokenAddress(me, r.Mint, r.TokenProgram)
	if err != nil {
		return err
	}
	return t.send(c, []solana.Instruction{r.TopUp(from, me, amount, info.Decimals)}, fmt.Sprintf("the run holds %d more base units", amount))
}

func treasurerClaimRewardsCommand() *cli.Command {
	return &cli.Command{
		Name:   "treasurer-claim-rewards",
		Usage:  "claim the wallet's earned rewards (1 token base unit per point, minus slashes) into its associated token account",
		Flags:  treasurerRunFlags(),
		Action: treasurerClaimRewards,
	}
}

func treasurerClaimRewards(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	me := t.wallet.PublicKey()
	create, account, err := treasurer.CreateTokenAccount(me, me, r.Mint, r.TokenProgram)
	if err != nil {
		return err
	}
	ixs := []solana.Instruction{create}
	if _, err := r.FetchParticipant(c.Context, t.client, me); errors.Is(err, chain.ErrAccountNotFound) {
		ix, err := r.CreateParticipant(me, me)
		if err != nil {
			return err
		}
		ixs = append(ixs, ix)
	} else if err != nil {
		return err
	}
	claim, err := r.Claim(me, account)
	if err != nil {
		return err
	}
	before, after, err := sendMeasured(c, t.client, t.wallet, append(ixs, claim), account)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "claimed %d base units into %s (balance %d)\n", after-before, account, after)
	return nil
}

func treasurerSettleCommand() *cli.Command {
	return &cli.Command{
		Name: "treasurer-settle",
		Usage: "move a user's earned and slashed points from its Coordinator slot into its participant record (anyone may; " +
			"the wallet pays the record's rent if it has none) so the slot can be reused; pays nothing: the user's later " +
			"treasurer-claim-rewards pays exactly what it would have",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "user", Aliases: []string{"address"}, Usage: "the user whose points to settle (required)"},
		}, treasurerRunFlags()...),
		Action: treasurerSettle,
	}
}

func treasurerSettle(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name, "user"); err != nil {
		return err
	}
	user, err := parsePubkey("--user", c.String("user"))
	if err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	ix, err := r.Settle(t.wallet.PublicKey(), user)
	if err != nil {
		return err
	}
	sig, err := t.client.Send(c.Context, t.wallet, []solana.Instruction{ix})
	if err != nil {
		return err
	}
	logs, err := t.client.TransactionLogs(c.Context, sig)
	if err != nil {
		return err
	}
	var ev *tbindings.PointsSettled
	for _, d := range chain.EventData(logs) {
		if e, err := tbindings.ParseEvent_PointsSettled(d); err == nil {
			ev = e
		}
	}
	if ev == nil {
		return fmt.Errorf("transaction %s: no PointsSettled event in its logs", sig)
	}
	fmt.Fprintf(c.App.Writer, "settled %s: %d earned and %d slashed points moved into its record; it can claim %d base units\n",
		user, ev.SettledEarnedPoints, ev.SettledSlashedPoints, ev.Claimable)
	s, err := r.Coordinator.FetchState(c.Context, t.client)
	if err != nil {
		return err
	}
	var held []string
	if slot, ok := coordinator.Slot(s, user); ok {
		held = treasurer.SlotHolds(slot)
	}
	if len(held) > 0 {
		fmt.Fprintf(c.App.Writer, "its slot stays held: %s\n", strings.Join(held, ", "))
	} else {
		fmt.Fprintln(c.App.Writer, "its slot is free for another client")
	}
	fmt.Fprintf(c.App.Writer, "signature: %s\n", sig)
	return nil
}

func treasurerDepositCommand() *cli.Command {
	return &cli.Command{
		Name: "treasurer-deposit",
		Usage: "as a client of a run with a join deposit, deposit it from the wallet's associated token account and get the join " +
			"authorization (creates the wallet's participant record if missing); train with the printed --authorizer",
		Flags:  append([]cli.Flag{authorizerProgramFlag}, treasurerRunFlags()...),
		Action: treasurerDeposit,
	}
}

func treasurerDeposit(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	_, acc, err := t.program.Open(c.Context, t.client, r.Index)
	if err != nil {
		return err
	}
	me := t.wallet.PublicKey()
	var ixs []solana.Instruction
	if _, err := r.FetchParticipant(c.Context, t.client, me); errors.Is(err, chain.ErrAccountNotFound) {
		ix, err := r.CreateParticipant(me, me)
		if err != nil {
			return err
		}
		ixs = append(ixs, ix)
	} else if err != nil {
		return err
	}
	if acc.JoinDeposit > 0 {
		// The program's rule (ZeroSlashingRate), checked before anything is sent.
		s, err := r.Coordinator.FetchState(c.Context, t.client)
		if err != nil {
			return err
		}
		if err := treasurer.CheckDepositSlashing(s, me); err != nil {
			return badInput(err)
		}
	}
	ix, err := r.Deposit(me, solana.PublicKey{}, acc.JoinDeposit)
	if err != nil {
		return err
	}
	if err := t.send(c, append(ixs, ix), fmt.Sprintf("deposited %d base units", acc.JoinDeposit)); err != nil {
		return err
	}
	participant, auth, err := r.AuthorizationAddress(me)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "join authorization %s: train with --authorizer %s (AUTHORIZER=%s)\n", auth, participant, participant)
	return nil
}

func treasurerWithdrawDepositCommand() *cli.Command {
	return &cli.Command{
		Name: "treasurer-withdraw-deposit",
		Usage: "take the wallet's join deposit back into its associated token account (not while pending, in the epoch or disputed, " +
			"never after a fault since the deposit); its join authorization is revoked. With --address, the run authority " +
			"returns that user's deposit once the run is Finished",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "address", Usage: "the depositor (default: the wallet)"},
			authorizerProgramFlag,
		}, treasurerRunFlags()...),
		Action: treasurerWithdrawDeposit,
	}
}

func treasurerWithdrawDeposit(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	user, err := pubkeyOrWallet(c, "address", t.wallet)
	if err != nil {
		return err
	}
	me := t.wallet.PublicKey()
	create, account, err := treasurer.CreateTokenAccount(me, user, r.Mint, r.TokenProgram)
	if err != nil {
		return err
	}
	ix, err := r.WithdrawDeposit(me, user, account)
	if err != nil {
		return err
	}
	before, after, err := sendMeasured(c, t.client, t.wallet, []solana.Instruction{create, ix}, account)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "returned a deposit of %d base units into %s\n", after-before, account)
	return nil
}

func treasurerBurnForfeitedCommand() *cli.Command {
	return &cli.Command{
		Name: "treasurer-burn-forfeited",
		Usage: "burn what a user forfeited by faults (anyone may): the burned points its slot holds and, after a fault since its " +
			"deposit, its join deposit; the tokens leave the run's account and the supply, paid to nobody",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "address", Usage: "the user (required)"},
			authorizerProgramFlag,
		}, treasurerRunFlags()...),
		Action: treasurerBurnForfeited,
	}
}

func treasurerBurnForfeited(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name, "address"); err != nil {
		return err
	}
	user, err := parsePubkey("--address", c.String("address"))
	if err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	ix, err := r.BurnForfeited(user)
	if err != nil {
		return err
	}
	before, after, err := sendMeasured(c, t.client, t.wallet, []solana.Instruction{ix}, r.Collateral)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "burned %d base units forfeited by %s\n", before-after, user)
	return nil
}

func treasurerWithdrawCommand() *cli.Command {
	return &cli.Command{
		Name:  "treasurer-withdraw",
		Usage: "as the run authority, take tokens nobody is owed (not points to claim, vest or burn, nor deposits) once the run is Finished or closed",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "amount", Usage: "base units, or a decimal amount of tokens such as 1.5 (default: everything not owed to participants)"},
			&cli.StringFlag{Name: "to", Usage: "owner of the receiving associated token account (default: the wallet; created if missing)"},
		}, treasurerRunFlags()...),
		Action: treasurerWithdraw,
	}
}

func treasurerWithdraw(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	info, err := treasurer.FetchMint(c.Context, t.client, r.Mint)
	if err != nil {
		return err
	}
	var amount uint64
	if c.IsSet("amount") {
		if amount, err = parseAmount("--amount", c.String("amount"), info.Decimals); err != nil {
			return err
		}
	} else {
		// Everything not reserved for claims, as the program computes it.
		held, err := treasurer.FetchTokenAccount(c.Context, t.client, r.Collateral)
		if err != nil {
			return err
		}
		_, acc, err := t.program.Open(c.Context, t.client, r.Index)
		if err != nil {
			return err
		}
		var s *coordinator.State
		if !acc.Closed {
			if s, err = r.Coordinator.FetchState(c.Context, t.client); err != nil {
				return err
			}
		}
		amount = held.Amount - min(held.Amount, treasurer.ReservedTokens(acc, s))
	}
	owner, err := pubkeyOrWallet(c, "to", t.wallet)
	if err != nil {
		return err
	}
	create, to, err := treasurer.CreateTokenAccount(t.wallet.PublicKey(), owner, r.Mint, r.TokenProgram)
	if err != nil {
		return err
	}
	ix, err := r.Withdraw(t.wallet.PublicKey(), to, amount)
	if err != nil {
		return err
	}
	return t.send(c, []solana.Instruction{create, ix}, fmt.Sprintf("withdrew %d base units into %s", amount, to))
}

func treasurerJSONDumpRunCommand() *cli.Command {
	return &cli.Command{
		Name:   "treasurer-json-dump-run",
		Usage:  "print a Treasurer run as JSON: accounts, token balance, deposits, what is reserved (points to claim, settled, unvested, burned points pending per client), slots a settle would free, funding (epochs the free tokens pay at the earning rate, unfundable), and with --address that user's record, claim, deposit and forfeit",
		Flags:  append([]cli.Flag{&cli.StringFlag{Name: "address", Usage: "a participant's pubkey"}}, treasurerReadFlags()...),
		Action: treasurerJSONDumpRun,
	}
}

func treasurerJSONDumpRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRunWith(c, newTreasurerReadCtx)
	if err != nil {
		return err
	}
	_, acc, err := t.program.Open(c.Context, t.client, r.Index)
	if err != nil {
		return err
	}
	held, err := treasurer.FetchTokenAccount(c.Context, t.client, r.Collateral)
	if err != nil {
		return err
	}
	mint, err := treasurer.FetchMint(c.Context, t.client, r.Mint)
	if err != nil {
		return err
	}
	out := map[string]any{
		"run":                  r.Address.String(),
		"index":                r.Index,
		"main_authority":       acc.MainAuthority.String(),
		"join_authority":       acc.JoinAuthority.String(),
		"coordinator_instance": r.Coordinator.Instance.String(),
		"coordinator_account":  r.Coordinator.Account.String(),
		"mint":                 r.Mint.String(),
		"token_program":        r.TokenProgram.String(),
		"token_account":        r.Collateral.String(),
		"balance":              held.Amount,
		"total_claimed_points": acc.TotalClaimedPoints,
		"closed":               acc.Closed,
		"join_deposit":         acc.JoinDeposit,
		"deposits_enforced":    acc.JoinAuthority.Equals(r.Address),
		"total_deposits":       acc.TotalDeposits,
		"total_burned":         acc.TotalBurned,
		"unclaimed_settled":    acc.UnclaimedSettledPoints,
	}
	var state *coordinator.State
	if !acc.Closed {
		if state, err = r.Coordinator.FetchState(c.Context, t.client); err != nil {
			return err
		}
		out["run_state"] = coordinator.Phase(state).String()
		reserve := treasurer.ReserveOfRun(acc, state)
		out["reserved"] = reserve.Points()
		out["reserve"] = reserve
		// Clients whose slot only unsettled points hold: treasurer-settle frees it.
		frees := []string{}
		for _, k := range treasurer.SettleFrees(state) {
			frees = append(frees, k.String())
		}
		out["settle_frees"] = frees
		// Burned points waiting for treasurer-burn-forfeited, per client.
		pending := map[string]uint64{}
		for _, slot := range state.Clients {
			if slot.Occupied != 0 && slot.Burned > 0 {
				pending[slot.Signer.String()] = slot.Burned
			}
		}
		out["burned_pending"] = pending
	}
	reserved := treasurer.ReservedTokens(acc, state)
	out["reserved_tokens"] = reserved
	out["withdrawable"] = held.Amount - min(held.Amount, reserved)
	out["funding"] = treasurer.FundingOf(acc, state, mint, held.Amount)
	if s := c.String("address"); s != "" {
		user, err := parsePubkey("--address", s)
		if err != nil {
			return err
		}
		p, err := r.FetchParticipant(c.Context, t.client, user)
		switch {
		case errors.Is(err, chain.ErrAccountNotFound):
			out["participant"] = nil
		case err != nil:
			return err
		default:
			out["participant"] = map[string]any{
				"earned_points": p.EarnedPoints, "slashed_points": p.SlashedPoints, "claimed_points": p.ClaimedPoints,
				"deposit": p.Deposit, "deposited": p.Deposited, "deposit_epoch": p.DepositEpoch,
				"has_fault": p.HasFault, "last_fault_epoch": p.LastFaultEpoch,
				"burned_points": p.BurnedPoints, "burned_deposit": p.BurnedDeposit,
			}
		}
		if state != nil {
			out["claimable"] = treasurer.Claimable(state, p, user)
			out["forfeit"] = treasurer.ForfeitOf(state, p, user)
		}
		if participant, auth, err := r.AuthorizationAddress(user); err == nil && acc.JoinAuthority.Equals(r.Address) {
			out["join_authorization"] = auth.String()
			out["authorizer"] = participant.String()
		}
	}
	return printJSON(c, out)
}

func treasurerCloseRunCommand() *cli.Command {
	return &cli.Command{
		Name:   "treasurer-close-run",
		Usage:  "as the run authority, free the halted run's coordinator accounts once nothing is reserved (every point claimed, none unvested, burned points burned, deposits returned or burned); the run's tokens stay withdrawable",
		Flags:  append([]cli.Flag{spillFlag}, treasurerRunFlags()...),
		Action: treasurerCloseRun,
	}
}

func treasurerCloseRun(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name); err != nil {
		return err
	}
	t, r, err := openTreasurerRun(c)
	if err != nil {
		return err
	}
	spill, err := pubkeyOrWallet(c, spillFlag.Name, t.wallet)
	if err != nil {
		return err
	}
	ix, err := r.Close(t.wallet.PublicKey(), spill)
	if err != nil {
		return err
	}
	return t.send(c, []solana.Instruction{ix}, "run closed")
}

type treasurerCtx struct {
	program treasurer.Program
	client  *chain.Client
	wallet  solana.PrivateKey
}

// newTreasurerCtx is newTreasurerReadCtx with the wallet that signs.
func newTreasurerCtx(c *cli.Context) (*treasurerCtx, error) {
	key, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	t, err := newTreasurerReadCtx(c)
	if err != nil {
		return nil, err
	}
	t.wallet = key
	return t, nil
}

// newTreasurerReadCtx connects to the cluster for commands that only read:
// no wallet file is needed.
func newTreasurerReadCtx(c *cli.Context) (*treasurerCtx, error) {
	program := treasurer.Default()
	var err error
	for _, o := range []struct {
		flag string
		id   *solana.PublicKey
	}{{treasurerProgramFlag.Name, &program.ID}, {coordinatorProgramFlag.Name, &program.Coordinator.ID}} {
		if s := c.String(o.flag); s != "" {
			if *o.id, err = parsePubkey("--"+o.flag, s); err != nil {
				return nil, err
			}
		}
	}
	if program.Authorizer, err = authorizerProgram(c); err != nil {
		return nil, err
	}
	client, err := newChainClient(c)
	if err != nil {
		return nil, err
	}
	// Name the programs' errors under overridden ids too.
	if tables, ok := client.Errors.(chain.ErrorTables); ok {
		for name, id := range map[string]solana.PublicKey{"psyche_treasurer": program.ID, "psyche_coordinator": program.Coordinator.ID} {
			d, err := idl.Load(name)
			if err != nil {
				return nil, err
			}
			d.AddErrors(tables, id)
		}
	}
	return &treasurerCtx{program: program, client: client}, nil
}

// runIndex is --run-index, else the default index of --run-id.
func runIndex(c *cli.Context) (uint64, error) {
	runID := c.String(runIDFlag.Name)
	if len(runID) == 0 || len(runID) > coordinator.MaxRunIDLen {
		return 0, badInputf("--run-id %q: %v", runID, coordinator.ErrBadRunID)
	}
	if !c.IsSet(runIndexFlag.Name) {
		return treasurer.DefaultIndex(runID), nil
	}
	v, err := strconv.ParseUint(c.String(runIndexFlag.Name), 10, 64)
	if err != nil {
		return 0, badInputf("--run-index %q is not a non-negative integer", c.String(runIndexFlag.Name))
	}
	return v, nil
}

// openTreasurerRun opens --run-id's Run with the wallet that signs.
func openTreasurerRun(c *cli.Context) (*treasurerCtx, treasurer.Run, error) {
	return openTreasurerRunWith(c, newTreasurerCtx)
}

func openTreasurerRunWith(c *cli.Context, newCtx func(*cli.Context) (*treasurerCtx, error)) (*treasurerCtx, treasurer.Run, error) {
	index, err := runIndex(c)
	if err != nil {
		return nil, treasurer.Run{}, err
	}
	t, err := newCtx(c)
	if err != nil {
		return nil, treasurer.Run{}, err
	}
	runID := c.String(runIDFlag.Name)
	r, _, err := t.program.OpenRunAt(c.Context, t.client, index, runID)
	if errors.Is(err, treasurer.ErrOtherRun) {
		return nil, treasurer.Run{}, fmt.Errorf("run %q: %w; refusing to act on it (someone else's Run may squat this run id's index: "+
			"if the run's creator chose another, name it with --run-index)", runID, err)
	}
	if err != nil {
		return nil, treasurer.Run{}, fmt.Errorf("run %q: %w", runID, err)
	}
	return t, r, nil
}

func (t *treasurerCtx) send(c *cli.Context, ixs []solana.Instruction, done string) error {
	return sendSigned(c, t.client, t.wallet, ixs, done)
}

// sendSigned sends ixs signed by wallet and prints done (when given) and the
// signature: what every treasurer and competition command that sends ends with.
func sendSigned(c *cli.Context, client *chain.Client, wallet solana.PrivateKey, ixs []solana.Instruction, done string) error {
	sig, err := client.Send(c.Context, wallet, ixs)
	if err != nil {
		return err
	}
	if done != "" {
		fmt.Fprintln(c.App.Writer, done)
	}
	fmt.Fprintf(c.App.Writer, "signature: %s\n", sig)
	return nil
}

// sendMeasured is sendSigned that also returns the token balance of account
// before and after, for the commands that print what moved. An account the
// transaction creates held 0 before; a failed read of an existing one is an
// error, before anything is sent.
func sendMeasured(c *cli.Context, client *chain.Client, wallet solana.PrivateKey, ixs []solana.Instruction, account solana.PublicKey) (before, after uint64, err error) {
	b, err := treasurer.FetchTokenAccount(c.Context, client, account)
	if err != nil && !errors.Is(err, chain.ErrAccountNotFound) {
		return 0, 0, err
	}
	if err := sendSigned(c, client, wallet, ixs, ""); err != nil {
		return 0, 0, err
	}
	a, err := treasurer.FetchTokenAccount(c.Context, client, account)
	if err != nil {
		return 0, 0, err
	}
	return b.Amount, a.Amount, nil
}

// parseAmount reads a token amount: base units ("1500"), or a decimal amount
// ("1.5") scaled by the mint's decimals, exactly (no floating point).
func parseAmount(flag, s string, decimals uint8) (uint64, error) {
	whole, frac, hasPoint := strings.Cut(strings.TrimSpace(s), ".")
	bad := badInputf("%s %q is not a token amount (base units, or a decimal with at most %d places)", flag, s, decimals)
	if whole == "" && frac == "" || strings.ContainsAny(whole+frac, "+-") || (hasPoint && len(frac) > int(decimals)) {
		return 0, bad
	}
	n, ok := new(big.Int).SetString(whole+frac, 10)
	if whole+frac == "" || !ok {
		return 0, bad
	}
	if hasPoint {
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(int(decimals)-len(frac))), nil)
		n.Mul(n, scale)
	}
	if !n.IsUint64() {
		return 0, badInputf("%s %q does not fit a token amount (at most %d base units)", flag, s, uint64(1<<64-1))
	}
	return n.Uint64(), nil
}
