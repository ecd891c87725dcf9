package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestTreasurerCommands(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	programtest.Deploy(t, v, "psyche_treasurer")
	adminPath, admin := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	userPath, user := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	ok, fails := cliWith(t, nil, net...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := programtest.Chain(t, v)
	balance := func(owner, mint solana.PublicKey) uint64 {
		t.Helper()
		addr, err := treasurer.AssociatedTokenAddress(owner, mint, treasurer.TokenProgramID)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := treasurer.FetchTokenAccount(ctx, c, addr)
		if err != nil {
			t.Fatal(err)
		}
		return acc.Amount
	}

	// A mint with 2 decimals; amounts are base units or decimals.
	out := ok("mint-create", "--decimals", "2", "-w", adminPath)
	m := regexp.MustCompile(`mint (\w+) \(decimals 2`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("mint-create printed %q", out)
	}
	mint := m[1]
	mintKey := solana.MustPublicKeyFromBase58(mint)
	ok("mint-to", "--mint", mint, "--amount", "10.00", "-w", adminPath)
	ok("mint-to", "--mint", mint, "--amount", "5", "--to", user.PublicKey().String(), "-w", adminPath)
	if got := balance(admin.PublicKey(), mintKey); got != 1000 {
		t.Fatalf("admin holds %d base units after minting 10.00", got)
	}
	fails(exitBadInput, "at most 2 places", "mint-to", "--mint", mint, "--amount", "1.234", "-w", adminPath)
	fails(exitBadInput, "not a token amount", "mint-to", "--mint", mint, "--amount", "-5", "-w", adminPath)
	fails(exitBadInput, "at most 18", "mint-create", "--decimals", "19", "-w", adminPath)
	fails(exitBadInput, "not an SPL Token", "mint-to", "--mint", admin.PublicKey().String(), "--amount", "1", "-w", adminPath)

	// A mint with a freeze authority cannot be a run's collateral: the CLI
	// says why before sending anything.
	freezable := solana.NewWallet().PrivateKey
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, treasurer.MintSize, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	alloc := system.NewCreateAccountInstruction(rent, treasurer.MintSize, treasurer.TokenProgramID, admin.PublicKey(), freezable.PublicKey()).Build()
	initMint := append(append(append([]byte{20, 0}, admin.PublicKey().Bytes()...), 1), admin.PublicKey().Bytes()...) // InitializeMint2, freeze authority
	if _, err := c.Send(ctx, admin, []solana.Instruction{alloc,
		solana.NewInstruction(treasurer.TokenProgramID, solana.AccountMetaSlice{solana.Meta(freezable.PublicKey()).WRITE()}, initMint)}, freezable); err != nil {
		t.Fatal(err)
	}
	fails(exitBadInput, "freeze authority", "treasurer-create-run", "--mint", freezable.PublicKey().String(), "--run-id", "cli-freeze", "-w", adminPath)

	run := func(path string, args ...string) []string { return append(args, "--run-id", "cli-t", "-w", path) }
	if out := ok(run(adminPath, "treasurer-create-run", "--mint", mint, "--permissionless")...); !strings.Contains(out, "permissionless authorization: ") {
		t.Fatalf("treasurer-create-run printed %q", out)
	}
	fails(exitFailure, "RunAlreadyExists", run(adminPath, "treasurer-create-run", "--mint", mint)...)
	fails(exitBadInput, "run id", "treasurer-create-run", "--mint", mint, "--run-id", strings.Repeat("x", 33), "-w", adminPath)
	fails(exitBadInput, "nothing to change", run(adminPath, "treasurer-update-run")...)
	fails(exitBadInput, "exclude each other", run(adminPath, "treasurer-update-run", "--pause", "--resume")...)
	fails(exitFailure, "RunAuthorityMismatch", run(userPath, "treasurer-update-run", "--resume")...)
	ok(run(adminPath, "treasurer-update-run", "--config-path", "../../../config/smoke.toml", "--earning-rate-total-shared", "100", "--resume")...)
	var dump map[string]any
	if err := json.Unmarshal([]byte(ok("json-dump-run", "--run-id", "cli-t")), &dump); err != nil {
		t.Fatal(err)
	}
	if dump["run_state"] != "WaitingForMembers" || dump["future_rates"].(map[string]any)["earning_rate_total_shared"] != 100.0 {
		t.Fatalf("after treasurer-update-run: %v, rates %v", dump["run_state"], dump["future_rates"])
	}

	ok(run(adminPath, "treasurer-top-up-rewards", "--collateral-amount", "2.5")...)
	r, _, err := treasurer.Default().OpenRunID(ctx, c, "cli-t")
	if err != nil {
		t.Fatal(err)
	}
	if acc, err := treasurer.FetchTokenAccount(ctx, c, r.Collateral); err != nil || acc.Amount != 250 {
		t.Fatalf("the run holds %+v, %v; want 250", acc, err)
	}
	fails(exitFailure, "RunNotFinished", run(adminPath, "treasurer-withdraw", "--amount", "1")...)
	// Reading needs no wallet file.
	noWallet := []string{"WALLET_FILE=" + filepath.Join(t.TempDir(), "absent.json")}
	if out, errOut, code := runCLI(t, noWallet, append([]string{"treasurer-json-dump-run", "--run-id", "cli-t"}, net...)...); code != 0 || !strings.Contains(out, `"main_authority"`) {
		t.Fatalf("treasurer-json-dump-run without a wallet: exit %d, %s %s", code, out, errOut)
	}

	// Index squatting: a Run for "cli-squat" made at "cli-victim"'s default
	// index. Commands naming cli-victim refuse it and send nothing; named
	// with its own run id and --run-index, it opens.
	squatterPath, _ := keyFile(t, v, 3*solana.LAMPORTS_PER_SOL)
	victimIndex := strconv.FormatUint(treasurer.DefaultIndex("cli-victim"), 10)
	ok("treasurer-create-run", "--mint", mint, "--run-id", "cli-squat", "--run-index", victimIndex, "-w", squatterPath)
	adminTokens := balance(admin.PublicKey(), mintKey)
	for _, args := range [][]string{
		{"treasurer-top-up-rewards", "--collateral-amount", "1", "-w", adminPath},
		{"treasurer-update-run", "--resume", "-w", adminPath},
		{"treasurer-json-dump-run"},
	} {
		fails(exitFailure, "belongs to another run id", append(args, "--run-id", "cli-victim")...)
	}
	if got := balance(admin.PublicKey(), mintKey); got != adminTokens {
		t.Fatalf("a refused top-up moved tokens: %d -> %d", adminTokens, got)
	}
	ok("treasurer-json-dump-run", "--run-id", "cli-squat", "--run-index", victimIndex)

	// A user not in the run cannot claim; once joined it claims (nothing earned yet).
	fails(exitFailure, "UserNotInRun", run(userPath, "treasurer-claim-rewards")...)
	authAddr, _, _ := authorizer.Default().Address(admin.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	join, err := r.Coordinator.JoinRunProven(user.PublicKey(), authAddr, treasurerP2PKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, user, join); err != nil {
		t.Fatal(err)
	}
	// Nothing earned, nothing to settle; bad input is refused before sending.
	fails(exitFailure, "NothingToSettle", run(adminPath, "treasurer-settle", "--user", user.PublicKey().String())...)
	fails(exitBadInput, "--user is required", run(adminPath, "treasurer-settle")...)
	fails(exitBadInput, "not a base58 public key", run(adminPath, "treasurer-settle", "--user", "nope")...)
	for range 2 {
		if out := ok(run(userPath, "treasurer-claim-rewards")...); !strings.Contains(out, "claimed 0 base units") {
			t.Fatalf("claim printed %q", out)
		}
	}
	if got := balance(user.PublicKey(), mintKey); got != 5 {
		t.Fatalf("user holds %d, want 5", got)
	}
	var tdump map[string]any
	if err := json.Unmarshal([]byte(ok("treasurer-json-dump-run", "--run-id", "cli-t", "--address", user.PublicKey().String())), &tdump); err != nil {
		t.Fatal(err)
	}
	if tdump["balance"] != 250.0 || tdump["reserved"] != 0.0 || tdump["claimable"] != 0.0 || tdump["run_state"] != "WaitingForMembers" || tdump["participant"] == nil {
		t.Fatalf("treasurer-json-dump-run: %v", tdump)
	}
	// 250 free tokens pay 2 epochs at 100; the mint (1005 minted, with an
	// authority) could cover an epoch.
	if f, _ := tdump["funding"].(map[string]any); f == nil || f["earning_rate"] != 100.0 || f["available"] != 250.0 || f["epochs_funded"] != 2.0 ||
		f["supply"] != 1005.0 || f["supply_fixed"] != false || f["unfundable"] != false {
		t.Fatalf("treasurer-json-dump-run funding: %v", tdump["funding"])
	}

	// Only a run that is its own join authority takes deposits; refused before sending.
	fails(exitBadInput, "not the run: create the run with --join-deposit", run(adminPath, "treasurer-update-run", "--join-deposit", "1")...)

	// Pause (immediate while waiting for members), close, withdraw everything.
	fails(exitFailure, "RunAuthorityMismatch", run(userPath, "treasurer-close-run")...)
	ok(run(adminPath, "treasurer-update-run", "--pause")...)
	ok(run(adminPath, "treasurer-close-run")...)
	// A new slot, so the same instructions make a new transaction.
	time.Sleep(300 * time.Millisecond)
	fails(exitFailure, "RunClosed", run(adminPath, "treasurer-close-run")...)
	if out := ok(run(adminPath, "treasurer-withdraw")...); !strings.Contains(out, "withdrew 250 base units") {
		t.Fatalf("withdraw printed %q", out)
	}
	if got := balance(admin.PublicKey(), mintKey); got != 1000 {
		t.Fatalf("admin holds %d after withdrawing the run's tokens, want 1000", got)
	}

	// A run with a join deposit of 1.50 tokens: the user deposits, joins
	// under the printed grantee, cannot take the deposit back while pending,
	// leaves and takes it back; nothing is forfeited.
	deposit := func(path string, args ...string) []string { return append(args, "--run-id", "cli-d", "-w", path) }
	fails(exitBadInput, "excludes --join-authority and --permissionless", deposit(adminPath, "treasurer-create-run", "--mint", mint, "--join-deposit", "1", "--permissionless")...)
	if out := ok(deposit(adminPath, "treasurer-create-run", "--mint", mint, "--join-deposit", "1.50")...); !strings.Contains(out, "join deposit 150 base units") ||
		!strings.Contains(out, "deposits open once treasurer-update-run sets --slashing-rate-per-client above 0") {
		t.Fatalf("treasurer-create-run --join-deposit printed %q", out)
	}
	// F5: a fault that slashes nothing can leave no trace, so a deposit run
	// needs a slashing rate above 0; refused before anything is sent.
	fails(exitBadInput, "needs a slashing rate above 0", deposit(userPath, "treasurer-deposit")...)
	fails(exitBadInput, "give --slashing-rate-per-client above 0 too",
		deposit(adminPath, "treasurer-update-run", "--config-path", "../../../config/smoke.toml", "--join-deposit", "1.5", "--resume")...)
	fails(exitBadInput, "--slashing-rate-per-client 0: a run that asks for or holds join deposits needs a slashing rate above 0",
		deposit(adminPath, "treasurer-update-run", "--slashing-rate-per-client", "0")...)
	ok(deposit(adminPath, "treasurer-update-run", "--config-path", "../../../config/smoke.toml", "--join-deposit", "1.5",
		"--slashing-rate-per-client", "1", "--resume")...)
	ok("mint-to", "--mint", mint, "--amount", "500", "--to", user.PublicKey().String(), "-w", adminPath)
	out = ok(deposit(userPath, "treasurer-deposit")...)
	g := regexp.MustCompile(`deposited 150 base units\n(?s:.*)train with --authorizer (\w+)`).FindStringSubmatch(out)
	if g == nil {
		t.Fatalf("treasurer-deposit printed %q", out)
	}
	fails(exitFailure, "DepositAlreadyMade", deposit(userPath, "treasurer-deposit")...)
	if got := balance(user.PublicKey(), mintKey); got != 505-150 {
		t.Fatalf("user holds %d after depositing 150 of 505", got)
	}
	dr, _, err := treasurer.Default().OpenRunID(ctx, c, "cli-d")
	if err != nil {
		t.Fatal(err)
	}
	grantee := solana.MustPublicKeyFromBase58(g[1])
	joinAuth, _, _ := authorizer.Default().Address(dr.Address, grantee, authorizer.JoinRunScope)
	join, err = dr.Coordinator.JoinRunProven(user.PublicKey(), joinAuth, treasurerP2PKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, user, join); err != nil {
		t.Fatalf("join under the deposit's authorization: %v", err)
	}
	fails(exitFailure, "DepositLocked", deposit(userPath, "treasurer-withdraw-deposit")...)
	fails(exitFailure, "NothingToBurn", deposit(adminPath, "treasurer-burn-forfeited", "--address", user.PublicKey().String())...)
	fails(exitBadInput, "--address is required", deposit(adminPath, "treasurer-burn-forfeited")...)
	var ddump map[string]any
	if err := json.Unmarshal([]byte(ok("treasurer-json-dump-run", "--run-id", "cli-d", "--address", user.PublicKey().String())), &ddump); err != nil {
		t.Fatal(err)
	}
	p, _ := ddump["participant"].(map[string]any)
	if ddump["join_deposit"] != 150.0 || ddump["deposits_enforced"] != true || ddump["total_deposits"] != 150.0 || ddump["reserved_tokens"] != 150.0 ||
		ddump["withdrawable"] != 0.0 || len(ddump["burned_pending"].(map[string]any)) != 0 || ddump["authorizer"] != g[1] ||
		p == nil || p["deposit"] != 150.0 || p["deposited"] != true || ddump["forfeit"].(map[string]any)["revoke"] != false {
		t.Fatalf("treasurer-json-dump-run of a deposit run: %v", ddump)
	}
	leave, err := dr.Coordinator.LeaveRun(user.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, user, []solana.Instruction{leave}); err != nil {
		t.Fatal(err)
	}
	if out := ok(deposit(userPath, "treasurer-withdraw-deposit")...); !strings.Contains(out, "returned a deposit of 150 base units") {
		t.Fatalf("treasurer-withdraw-deposit printed %q", out)
	}
	if got := balance(user.PublicKey(), mintKey); got != 505 {
		t.Fatalf("user holds %d after its deposit came back, want 505", got)
	}
}

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in       string
		decimals uint8
		want     uint64
		ok       bool
	}{
		{"1500", 2, 1500, true},
		{"1.5", 2, 150, true},
		{"1.50", 2, 150, true},
		{".5", 1, 5, true},
		{"7.", 3, 7000, true},
		{"0", 0, 0, true},
		{"18446744073709551615", 0, 1<<64 - 1, true},
		{"18446744073709551616", 0, 0, false},
		{"184467440737095516.16", 2, 0, false},
		{"1.234", 2, 0, false},
		{"1.5", 0, 0, false},
		{"-5", 2, 0, false},
		{"+5", 2, 0, false},
		{"", 2, 0, false},
		{".", 2, 0, false},
		{"1e3", 2, 0, false},
		{"1,5", 2, 0, false},
	} {
		got, err := parseAmount("--amount", tc.in, tc.decimals)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("parseAmount(%q, %d) = %d, %v; want %d", tc.in, tc.decimals, got, err, tc.want)
		}
		if !tc.ok && err == nil {
			t.Errorf("parseAmount(%q, %d) = %d; want an error", tc.in, tc.decimals, got)
		}
	}
}

func treasurerP2PKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// treasurer-settle: a member earns an epoch's points; a third party settles
// them (the member's record is created, nothing is paid, its slot is free)
// and the member's later claim pays exactly those points. json-dump shows
// the settled points and the run's funding; an earning rate the mint's fixed
// supply can never cover is refused before anything is sent.
func TestTreasurerSettleCommand(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	programtest.Deploy(t, v, "psyche_treasurer")
	adminPath, admin := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	userPath, user := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	outsiderPath, _ := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	ok, fails := cliWith(t, nil, net...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := programtest.Chain(t, v)
	m := regexp.MustCompile(`mint (\w+) `).FindStringSubmatch(ok("mint-create", "-w", adminPath))
	if m == nil {
		t.Fatal("mint-create printed no mint")
	}
	mint := solana.MustPublicKeyFromBase58(m[1])
	ok("mint-to", "--mint", m[1], "--amount", "10000", "-w", adminPath)
	run := func(path string, args ...string) []string { return append(args, "--run-id", "cli-settle", "-w", path) }
	ok(run(adminPath, "treasurer-create-run", "--mint", m[1], "--permissionless")...)
	ok(run(adminPath, "treasurer-top-up-rewards", "--collateral-amount", "2500")...)
	r, _, err := treasurer.Default().OpenRunID(ctx, c, "cli-settle")
	if err != nil {
		t.Fatal(err)
	}
	// One client, one witness, an epoch of seconds.
	params, err := coordinator.LoadParams("../../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := *params.Config
	cfg.InitMinClients, cfg.MinClients, cfg.WitnessNodes = 1, 1, 1
	cfg.WarmupTime, cfg.EpochTime, cfg.MaxRoundTrainTime = 1, 4, 2
	earning, resume := uint64(1000), false
	update, err := r.Update(admin.PublicKey(), treasurer.UpdateParams{
		Coordinator: coordinator.UpdateParams{Config: &cfg, Model: params.Model}, EarningRate: &earning, Paused: &resume,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, admin, []solana.Instruction{update}); err != nil {
		t.Fatal(err)
	}
	authAddr, _, _ := authorizer.Default().Address(admin.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	join, err := r.Coordinator.JoinRunProven(user.PublicKey(), authAddr, treasurerP2PKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, user, join); err != nil {
		t.Fatal(err)
	}
	playEpoch(t, ctx, c, r, user)

	u := user.PublicKey().String()
	out := ok(run(outsiderPath, "treasurer-settle", "--user", u)...)
	if !strings.Contains(out, "settled "+u+": 1000 earned and 0 slashed points moved into its record; it can claim 1000 base units\n") ||
		!strings.Contains(out, "its slot is free for another client") {
		t.Fatalf("treasurer-settle printed %q", out)
	}
	time.Sleep(300 * time.Millisecond)
	fails(exitFailure, "NothingToSettle", run(outsiderPath, "treasurer-settle", "--address", u)...)
	var dump map[string]any
	if err := json.Unmarshal([]byte(ok("treasurer-json-dump-run", "--run-id", "cli-settle", "--address", u)), &dump); err != nil {
		t.Fatal(err)
	}
	p, _ := dump["participant"].(map[string]any)
	reserve, _ := dump["reserve"].(map[string]any)
	funding, _ := dump["funding"].(map[string]any)
	if dump["unclaimed_settled"] != 1000.0 || reserve["settled"] != 1000.0 || reserve["claims"] != 0.0 || dump["reserved_tokens"] != 1000.0 ||
		dump["claimable"] != 1000.0 || p == nil || p["earned_points"] != 1000.0 || p["claimed_points"] != 0.0 ||
		len(dump["settle_frees"].([]any)) != 0 || funding["available"] != 1500.0 || funding["epochs_funded"] != 1.0 {
		t.Fatalf("treasurer-json-dump-run after the settle: %v", dump)
	}
	if out := ok(run(userPath, "treasurer-claim-rewards")...); !strings.Contains(out, "claimed 1000 base units") {
		t.Fatalf("the claim after the settle printed %q", out)
	}

	// Once nobody can mint more, a rate above the supply can never be funded.
	revoke := solana.NewInstruction(treasurer.TokenProgramID,
		solana.AccountMetaSlice{solana.Meta(mint).WRITE(), solana.Meta(admin.PublicKey()).SIGNER()}, []byte{6, 0, 0})
	if _, err := c.Send(ctx, admin, []solana.Instruction{revoke}); err != nil {
		t.Fatal(err)
	}
	fails(exitBadInput, "no funding can ever cover", run(adminPath, "treasurer-update-run", "--earning-rate-total-shared", "10001")...)
	ok(run(adminPath, "treasurer-update-run", "--earning-rate-total-shared", "10000")...)
	if err := json.Unmarshal([]byte(ok("treasurer-json-dump-run", "--run-id", "cli-settle")), &dump); err != nil {
		t.Fatal(err)
	}
	if f := dump["funding"].(map[string]any); f["supply_fixed"] != true || f["unfundable"] != false || f["epochs_funded"] != 0.0 {
		t.Fatalf("funding at the whole supply per epoch: %v", f)
	}
}

// playEpoch drives a one-client run (one witness) until the client has
// earned the epoch's points: warmup report, witness reports, ticks.
func playEpoch(t *testing.T, ctx context.Context, c *chain.Client, r treasurer.Run, user solana.PrivateKey) {
	t.Helper()
	u := user.PublicKey()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		s, err := r.Coordinator.FetchState(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if slot, ok := coordinator.Slot(s, u); ok && slot.Earned > 0 {
			return
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
			bloom, berr := schedule.NewBloom(bits, hashes, [8]byte{})
			if berr != nil {
				t.Fatal(berr)
			}
			bloom.Add(u)
			ix, err = r.Coordinator.Witness(u, coordinator.WitnessReport{Step: round.Step, Index: 0, Participants: bloom, Broadcasts: bloom,
				BroadcastMerkle: sha256.Sum256(u[:])})
		default:
			ix, err = r.Coordinator.Tick(u)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, user, []solana.Instruction{ix}); err != nil {
			var te *chain.TxError
			if !errors.As(err, &te) || (te.Name != "TickTooEarly" && te.Name != "AlreadyWitnessed") {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
		}
	}
	t.Fatal("the epoch did not pay its points within a minute")
}
