package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/comptest"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// compTiny is the e2e test's model shape (clients/competition): about 22k
// parameters, so that miners train and validators evaluate in moments.
var compTiny = trainer.Config{Name: "tiny", Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2, SeqLen: 32, MicroBatch: 4}

// syncBuffer is a bytes.Buffer a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bgCLI is a psyche-client process the test stops.
type bgCLI struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

func startCLI(t *testing.T, args ...string) *bgCLI {
	t.Helper()
	p := &bgCLI{cmd: exec.Command(builtCLI(t), args...), stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the process's exit code once it exits (within d).
func (p *bgCLI) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("psyche-client %s still runs after %v:\n%s", strings.Join(p.cmd.Args[1:4], " "), d, p.stderr)
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// The competition commands on localnet, as the e2e test of
// clients/competition runs them through the Go API: a competition with a
// reward pool, two validators, a miner training with train --competition,
// another submitting a file, the validators agreeing, check, claims,
// withdraw, pause, and every command's bad input refused before anything is
// sent.
func TestCompetitionCommands(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_competition")
	adminPath, admin := keyFile(t, v, 10*solana.LAMPORTS_PER_SOL)
	v1Path, v1 := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	v2Path, v2 := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	minerAPath, minerA := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	minerBPath, minerB := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	ok, fails := cliWith(t, nil, net...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := programtest.Chain(t, v)
	p := competition.Default()
	dir := t.TempDir()
	_, dataDir := comptest.Dataset(t, 12, 32)
	h := comptest.StartHub(t)
	fileHub := filepath.Join(dir, "filehub")
	if err := os.MkdirAll(fileHub, 0o755); err != nil {
		t.Fatal(err)
	}

	tokens := func(owner solana.PublicKey, mint solana.PublicKey) uint64 {
		t.Helper()
		ata, err := treasurer.AssociatedTokenAddress(owner, mint, treasurer.TokenProgramID)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := treasurer.FetchTokenAccount(ctx, c, ata)
		if errors.Is(err, chain.ErrAccountNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return acc.Amount
	}
	lamports := func(k solana.PublicKey) uint64 {
		t.Helper()
		b, err := c.Balance(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	exists := func(addr solana.PublicKey) bool {
		t.Helper()
		_, _, err := c.AccountData(ctx, addr)
		if errors.Is(err, chain.ErrAccountNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	show := func(id string) competition.Summary {
		t.Helper()
		var s competition.Summary
		if err := json.Unmarshal([]byte(ok("competition", "show", "--id", id)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	saveModel := func(name string, cfg trainer.Config, seed uint64) string {
		t.Helper()
		tr, err := trainer.New(cfg, seed)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		path := filepath.Join(dir, name)
		if err := tr.SaveModel(path, nil); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// A mint with 2 decimals; the validators hold their stakes.
	m := regexp.MustCompile(`mint (\w+) \(decimals 2`).FindStringSubmatch(ok("mint-create", "--decimals", "2", "-w", adminPath))
	if m == nil {
		t.Fatal("mint-create printed no mint")
	}
	mint := m[1]
	mintKey := solana.MustPublicKeyFromBase58(mint)
	ok("mint-to", "--mint", mint, "--amount", "1000.00", "-w", adminPath)
	for _, k := range []solana.PrivateKey{v1, v2} {
		ok("mint-to", "--mint", mint, "--amount", "5.00", "--to", k.PublicKey().String(), "-w", adminPath)
	}

	// create: bad input is one line, exit 2, and nothing sent.
	const id = "cli-comp"
	addr, _ := p.Address(id)
	create := func(extra ...string) []string {
		args := []string{"competition", "create", "--id", id, "--data", dataDir, "--architecture", "gpt2", "--max-params", "100000",
			"--sequences-per-page", "4", "--pages-per-round", "6", "--epsilon", "0.01", "--temperature", "0.5", "--round-slots", "600",
			"--quorum", "2", "--mint", mint, "--reward-per-round", "10.00", "--validator-stake", "0.5", "-w", adminPath}
		return append(args, extra...)
	}
	adminLamports := lamports(admin.PublicKey())
	for _, bad := range []struct{ want, flag, value string }{
		{"more than 6 decimal places", "--epsilon", "0.0000001"},
		{"at most 1", "--epsilon", "1.5"},
		{"not a decimal", "--epsilon", "1%"},
		{"0.001 to 100", "--temperature", "0.0001"},
		{"exceeds --epsilon", "--epsilon-end", "0.02"},
		{"gpt2 or llama", "--architecture", "bert"},
		{"fp32 or mx8", "--precision", "bf16"},
		{"1 to 257", "--pages-per-round", "258"},
		{"1 to 32", "--quorum", "33"},
		{"not a non-negative integer", "--max-params", "-1"},
		{"the dataset's sequences are 32 tokens", "--seq-len", "64"},
		{"holds 3", "--pages-per-round", "200"}, // ~370 pages of 4; 200 pages of 8 are not there
		{"--data-root", "--data", "http://127.0.0.1:1/data"},
		{"not 64 hex digits", "--data-root", "abc"},
		{"does not match the pinned root", "--data-root", strings.Repeat("ab", 32)},
		{"1 to 32 bytes", "--id", strings.Repeat("x", 33)},
		{"not a base58 public key", "--mint", "nope"},
		{"at most 2 places", "--validator-stake", "0.001"},
	} {
		args := create(bad.flag, bad.value)
		if bad.want == "holds 3" {
			args = create("--sequences-per-page", "8", bad.flag, bad.value)
			bad.want = "whole pages of 8 sequences"
		}
		fails(exitBadInput, bad.want, args...)
	}
	fails(exitBadInput, "--quorum is required", "competition", "create", "--id", id, "--data", dataDir, "--architecture", "gpt2", "--max-params", "1",
		"--sequences-per-page", "4", "--pages-per-round", "6", "--epsilon", "0.01", "--temperature", "0.5", "--round-slots", "600", "-w", adminPath)
	fails(exitBadInput, "need a reward pool", "competition", "create", "--id", id, "--data", dataDir, "--architecture", "gpt2", "--max-params", "1",
		"--sequences-per-page", "4", "--pages-per-round", "6", "--epsilon", "0.01", "--temperature", "0.5", "--round-slots", "600", "--quorum", "1",
		"--reward-per-round", "1", "-w", adminPath)
	if exists(addr) || lamports(admin.PublicKey()) != adminLamports {
		t.Fatal("a refused create sent something")
	}

	out := ok(create()...)
	if !strings.Contains(out, addr.String()) || !strings.Contains(out, "pool: ") {
		t.Fatalf("create printed %q", out)
	}
	fails(exitFailure, "CompetitionAlreadyExists", create()...)
	ok("mint-to", "--mint", mint, "--amount", "500.00", "--to", addr.String(), "-w", adminPath) // fund the pool
	s := show(id)
	if s.EpsilonStartPPM != 10_000 || s.EpsilonEndPPM != 10_000 || s.Temperature != 0.5 || s.SeqLen != 32 || s.DataLocation != dataDir ||
		s.Pool == nil || s.Pool.Balance != 50_000 || s.Pool.RewardPerRound != 1000 || s.ValidatorStake != 50 || s.Round.Phase != "none" {
		t.Fatalf("show after create: %+v, pool %+v", s, s.Pool)
	}

	// A permissioned competition admits only the validators its authority authorizes.
	ok("competition", "create", "--id", "cli-perm", "--data", dataDir, "--architecture", "llama", "--max-params", "1000", "--sequences-per-page", "4",
		"--pages-per-round", "2", "--epsilon", "0", "--temperature", "1", "--round-slots", "10", "--quorum", "1", "--permissioned", "-w", adminPath)
	fails(exitFailure, "join-authorization-create --scope CompetitionValidate", "competition", "join", "--id", "cli-perm", "-w", v1Path)
	ok("join-authorization-create", "--scope", string(competition.ValidateScope), "--authorizer", v1.PublicKey().String(), "-w", adminPath)
	ok("competition", "join", "--id", "cli-perm", "-w", v1Path)
	var list []map[string]any
	if err := json.Unmarshal([]byte(ok("competition", "list")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("list: %v", list)
	}
	for _, l := range list {
		if want := map[string]float64{id: 0, "cli-perm": 1}[l["id"].(string)]; l["validators"] != want || l["phase"] != "none" || l["entries"] != 0.0 {
			t.Fatalf("list: %v", l)
		}
	}

	// Validators join, staking 0.5 tokens.
	ok("competition", "join", "--id", id, "-w", v1Path)
	ok("competition", "join", "--id", id, "-w", v2Path)
	if got := tokens(v1.PublicKey(), mintKey); got != 450 {
		t.Fatalf("v1 holds %d after staking 50 of 500", got)
	}
	fails(exitFailure, "active validator of competition", "competition", "join", "--id", id, "-w", v1Path)

	// update: bad input, the wrong signer.
	fails(exitBadInput, "--id is required", "competition", "update", "--pause", "-w", adminPath)
	fails(exitBadInput, "nothing to change", "competition", "update", "--id", id, "-w", adminPath)
	fails(exitBadInput, "exclude each other", "competition", "update", "--id", id, "--pause", "--resume", "-w", adminPath)
	fails(exitBadInput, "would exceed epsilon_start 0.01", "competition", "update", "--id", id, "--epsilon-end", "0.5", "-w", adminPath)
	fails(exitBadInput, "1 to 32", "competition", "update", "--id", id, "--quorum", "0", "-w", adminPath)
	fails(exitFailure, "AuthorityMismatch", "competition", "update", "--id", id, "--round-slots", "500", "-w", minerAPath)
	ok("competition", "update", "--id", id, "--epsilon-decay-slots", "0", "-w", adminPath)

	// Miner B submits a file (untrained); refused before anything is sent:
	// a model over max_params, a full checkpoint, another architecture, a bad repo.
	fileRepo := "file://" + fileHub
	modelB := saveModel("b.safetensors", compTiny, 2)
	big := compTiny
	big.Layers, big.Channels = 4, 128 // ~0.8M parameters
	llama := trainer.Config{Name: "l", Arch: trainer.ArchLlama, Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2, KVHeads: 1, Hidden: 64,
		RopeTheta: 10000, SeqLen: 32, MicroBatch: 4}
	full := filepath.Join(dir, "full.safetensors")
	if tr, err := trainer.New(compTiny, 3); err != nil {
		t.Fatal(err)
	} else {
		if err := tr.SaveCheckpoint(full, nil); err != nil {
			t.Fatal(err)
		}
		tr.Close()
	}
	submitB := func(model string, extra ...string) []string {
		return append([]string{"competition", "submit", "--id", id, "--model", model, "--hub-repo", fileRepo, "-w", minerBPath}, extra...)
	}
	minerBLamports := lamports(minerB.PublicKey())
	fails(exitBadInput, "too large", submitB(saveModel("big.safetensors", big, 1))...)
	fails(exitBadInput, "parameters-only", submitB(full)...)
	fails(exitBadInput, "wrong architecture", submitB(saveModel("llama.safetensors", llama, 1))...)
	fails(exitBadInput, "no such file", submitB(filepath.Join(dir, "absent.safetensors"))...)
	fails(exitBadInput, "--hub-repo", "competition", "submit", "--id", id, "--model", modelB, "--hub-repo", "ftp://host/x", "-w", minerBPath)
	fails(exitBadInput, "--model is required", "competition", "submit", "--id", id, "--hub-repo", fileRepo, "-w", minerBPath)
	subB, _ := p.SubmissionAddress(addr, minerB.PublicKey())
	if held, _ := os.ReadDir(fileHub); exists(subB) || len(held) != 0 || lamports(minerB.PublicKey()) != minerBLamports {
		t.Fatalf("a refused submit sent or uploaded something: %d files", len(held))
	}
	out = ok(submitB(modelB)...)
	if !regexp.MustCompile(`(?m)^revision: [0-9a-f]{64}\ncommitment: [0-9a-f]{64}\nslot: [1-9]`).MatchString(out) {
		t.Fatalf("submit printed %q", out)
	}

	// Miner A trains a model alone from fresh weights of the tiny shape; its
	// first session beats nothing (+Inf) and is submitted.
	shape := saveModel("shape.safetensors", compTiny, 9)
	trainA := func(extra ...string) []string {
		return append([]string{"train", "--competition", id, "--checkpoint-dir", filepath.Join(dir, "a"), "--hub-repo", h.Repo, "--threads", "1",
			"-w", minerAPath}, extra...)
	}
	fails(exitBadInput, "--run-id does not apply with --competition", trainA("--model-config", shape, "--run-id", "r")...)
	fails(exitBadInput, "give one start", trainA()...)
	fails(exitBadInput, "give one start", trainA("--model-config", shape, "--load-best")...)
	fails(exitBadInput, "unknown model config", trainA("--model-config", "enormous")...)
	fails(exitBadInput, "--init-seed applies with --model-config only", trainA("--load-best", "--init-seed", "3")...)
	fails(exitBadInput, "--checkpoint-dir is required", "train", "--competition", id, "--hub-repo", h.Repo, "--model-config", shape, "-w", minerAPath)
	fails(exitBadInput, "--steps does not apply without --competition", "train", "--run-id", "r", "--steps", "3", "-w", minerAPath)
	fails(exitBadInput, "no final round", trainA("--load-best")...)
	fails(exitBadInput, "has no entry", trainA("--load-submission", minerA.PublicKey().String())...)
	_, errOut, code := runCLI(t, nil, append(trainA("--model-config", shape, "--steps", "30", "--sessions", "2", "--learning-rate", "0.01"), net...)...)
	if code != 0 || !strings.Contains(errOut, "decision=\"submitted ") || strings.Count(errOut, "msg=session") != 2 {
		t.Fatalf("train --competition: exit %d\n%s", code, errOut)
	}
	t.Logf("train --competition:\n%s", errOut)
	for _, f := range []string{"model-30.safetensors", "model-60.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, "a", f)); err != nil {
			t.Fatal(err)
		}
	}
	if s := show(id); len(s.Entries) != 2 || s.Entries[0].Miner != minerB.PublicKey().String() || s.Entries[1].Miner != minerA.PublicKey().String() ||
		s.Entries[1].Repo != h.Repo || s.Entries[0].Repo != fileRepo {
		t.Fatalf("entries after the submissions: %+v", s.Entries)
	}

	// validate and check: bad input.
	fails(exitBadInput, "--id is required", "competition", "validate", "-w", v1Path)
	fails(exitBadInput, "--poll-ms must be at least 1", "competition", "validate", "--id", id, "--poll-ms", "0", "-w", v1Path)
	fails(exitBadInput, "--id is required", "competition", "check")
	fails(exitFailure, "only a seeded round", "competition", "check", "--id", id, "--model-dir", filepath.Join(dir, "check"))
	_, errOut, code = runCLI(t, nil, append([]string{"competition", "validate", "--id", id, "-w", minerAPath, "--model-dir", filepath.Join(dir, "x")}, net...)...)
	if code != exitFailure || !strings.Contains(errOut, "is not an active validator of competition") {
		t.Fatalf("validate by a non-validator: exit %d, %s", code, errOut)
	}

	// The first validator runs alone: it opens round 1, seeds it, votes, and
	// the round waits for the quorum of 2. Pausing then keeps the round
	// final once the second validator votes.
	validate := func(path, name string, extra ...string) *bgCLI {
		args := append([]string{"competition", "validate", "--id", id, "--model-dir", filepath.Join(dir, name), "--poll-ms", "100",
			"--threads", "1", "-w", path}, extra...)
		return startCLI(t, append(args, net...)...)
	}
	waitShow := func(what string, cond func(competition.Summary) bool) competition.Summary {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			s := show(id)
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after a minute: round %d %s, votes %v", what, s.Round.Number, s.Round.Phase, s.Round.Votes)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	val1 := validate(v1Path, "v1")
	waitShow("round 1 with a vote", func(s competition.Summary) bool { return s.Round.Number == 1 && len(s.Round.Votes) == 1 })
	ok("competition", "update", "--id", id, "--pause", "-w", adminPath)
	val2 := validate(v2Path, "v2")
	s = waitShow("round 1 final", func(s competition.Summary) bool { return s.Round.Phase == "final" })
	if s.Round.Number != 1 || len(s.Round.Votes) != 2 || !*s.Round.Votes[0].Agrees || !*s.Round.Votes[1].Agrees || !s.Paused {
		t.Fatalf("the final round: %+v", s.Round)
	}
	out = ok("competition", "check", "--id", id, "--model-dir", filepath.Join(dir, "check"))
	digest := regexp.MustCompile(`(?m)^digest: ([0-9a-f]{64})$`).FindStringSubmatch(out)
	if digest == nil || digest[1] != s.Round.FinalDigest || strings.Count(out, " MATCH\n") != 2 || strings.Contains(out, "DIFFERS") ||
		!strings.Contains(out, "faulted: none") || !strings.Contains(out, "table hash: ") ||
		!regexp.MustCompile(`entry 1 \(\w+\): wins 6, mean loss`).MatchString(out) || !strings.Contains(out, "entry 0 ("+minerB.PublicKey().String()+"): wins 0") {
		t.Fatalf("check printed:\n%s", out)
	}
	t.Logf("check:\n%s", out)
	table := ok("competition", "standings", "--id", id)
	if !strings.Contains(table, "round 1 final (2 entries eligible, 2 votes of a quorum of 2)") ||
		!regexp.MustCompile(`(?m)^ +1 +\S+ +\d+ active +6 `).MatchString(table) || !regexp.MustCompile(`(?m)^ +0 +\S+ +\d+ active +0 `).MatchString(table) ||
		strings.Count(table, "validator ") != 2 {
		t.Fatalf("standings printed:\n%s", table)
	}
	for _, v := range []solana.PublicKey{v1.PublicKey(), v2.PublicKey()} {
		if !strings.Contains(out, "vote "+v.String()+" ") {
			t.Fatalf("check names no vote of %s:\n%s", v, out)
		}
	}

	// v2 stops on Ctrl-C (exit 0); v1 leaves, and its validator stops (exit 1).
	val2.cmd.Process.Signal(os.Interrupt)
	if code := val2.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("validate after Ctrl-C: exit %d\n%s", code, val2.stderr)
	}
	fails(exitBadInput, "--id is required", "competition", "leave", "-w", v1Path)
	ok("competition", "leave", "--id", id, "-w", v1Path)
	if got := tokens(v1.PublicKey(), mintKey); got != 500 {
		t.Fatalf("v1 holds %d after leaving, want its 500 back", got)
	}
	if code := val1.wait(t, 20*time.Second); code != exitFailure || !strings.Contains(val1.stderr.String(), "is not an active validator of competition") {
		t.Fatalf("validate after leaving: exit %d\n%s", code, val1.stderr)
	}

	// Claims pay what show says; the pool keeps what it owes.
	s = show(id)
	a, b := s.Entries[1], s.Entries[0]
	if a.Wins != 6 || b.Wins != 0 || a.Claimable == 0 || b.Claimable == 0 || a.Claimable+b.Claimable > 1000 || a.Claimable <= b.Claimable {
		t.Fatalf("entries after the final round: %+v", s.Entries)
	}
	fails(exitBadInput, "--id is required", "competition", "claim", "-w", minerAPath)
	fails(exitFailure, "no entry", "competition", "claim", "--id", id, "-w", v2Path)
	out = ok("competition", "claim", "--id", id, "-w", minerAPath)
	if got := tokens(minerA.PublicKey(), mintKey); got != a.Claimable || !strings.Contains(out, "claimed "+strconv.FormatUint(a.Claimable, 10)+" base units") {
		t.Fatalf("claim printed %q; miner A holds %d, show said %d", out, got, a.Claimable)
	}
	fails(exitFailure, "nothing to claim: entry 1", "competition", "claim", "--id", id, "-w", minerAPath)

	// Nothing was forfeited: nothing to burn.
	fails(exitBadInput, "--id is required", "competition", "burn-stakes", "-w", adminPath)
	fails(exitFailure, "NothingToBurn", "competition", "burn-stakes", "--id", id, "-w", minerBPath)

	// Withdraw: bad input, the wrong signer, an amount, then everything withdrawable.
	fails(exitBadInput, "at most 2 places", "competition", "withdraw", "--id", id, "--amount", "0.001", "-w", adminPath)
	fails(exitBadInput, "not a base58 public key", "competition", "withdraw", "--id", id, "--to", "nope", "-w", adminPath)
	fails(exitFailure, "AuthorityMismatch", "competition", "withdraw", "--id", id, "--amount", "1", "-w", minerAPath)
	ok("competition", "withdraw", "--id", id, "--amount", "1", "-w", adminPath)
	s = show(id)
	withdrawable := s.Pool.Withdrawable
	if out := ok("competition", "withdraw", "--id", id, "-w", adminPath); !strings.Contains(out, "withdrew "+strconv.FormatUint(withdrawable, 10)+" base units") {
		t.Fatalf("withdraw printed %q, show said %d withdrawable", out, withdrawable)
	}
	s = show(id)
	if s.Pool.Withdrawable != 0 || s.Pool.Balance != s.Pool.Unclaimed+s.Pool.Stakes || s.Pool.Unclaimed != b.Claimable || s.Pool.Stakes != 50 {
		t.Fatalf("the pool after withdrawing: %+v", s.Pool)
	}
	if got := tokens(admin.PublicKey(), mintKey); got != 100_000+1+withdrawable {
		t.Fatalf("admin holds %d after withdrawing 1 and %d", got, withdrawable)
	}

	// Close is refused while a reward is unclaimed.
	fails(exitBadInput, "not a base58 public key", "competition", "close", "--id", id, "--spill", "nope", "-w", adminPath)
	fails(exitFailure, "UnclaimedRewardsRemain", "competition", "close", "--id", id, "-w", adminPath)

	// A miner starts from the best entry (A's); paused, it trains but does not submit.
	_, errOut, code = runCLI(t, nil, append(trainA("--load-best", "--steps", "2", "--eval-pages", "2"), net...)...)
	if code != 0 || !strings.Contains(errOut, "the best entry 1") || !strings.Contains(errOut, "msg=session") || strings.Contains(errOut, "submitted ") {
		t.Fatalf("train --load-best: exit %d\n%s", code, errOut)
	}

	// Reading needs no wallet; a competition that does not exist is one line.
	noWallet := []string{"WALLET_FILE=" + filepath.Join(t.TempDir(), "absent.json")}
	if out, errOut, code := runCLI(t, noWallet, append([]string{"competition", "show", "--id", id}, net...)...); code != 0 || !strings.Contains(out, `"final_digest"`) {
		t.Fatalf("show without a wallet: exit %d, %s", code, errOut)
	}
	fails(exitFailure, "no competition \"nope\"", "competition", "show", "--id", "nope")
	fails(exitBadInput, "--id is required", "competition", "show")
	fails(exitBadInput, "--id is required", "competition", "join", "-w", v1Path)
	if _, errOut, code := runCLI(t, nil, "competition", "list", "extra"); code != exitBadInput || !strings.Contains(errOut, "takes no arguments") {
		t.Fatalf("list with an argument: exit %d, %s", code, errOut)
	}
	fails(exitBadInput, "not a base58 public key", "competition", "list", "--competition-program-id", "nope")

	// A competition that owes nothing closes: show and list say so, and its
	// validators stop.
	fails(exitFailure, "AuthorityMismatch", "competition", "close", "--id", "cli-perm", "-w", v1Path)
	ok("competition", "close", "--id", "cli-perm", "-w", adminPath)
	var closed map[string]any
	if err := json.Unmarshal([]byte(ok("competition", "show", "--id", "cli-perm")), &closed); err != nil || closed["closed"] != true {
		t.Fatalf("show of a closed competition: %v, %v", closed, err)
	}
	if out := ok("competition", "list"); !strings.Contains(out, `"phase": "closed"`) {
		t.Fatalf("list after close: %s", out)
	}
	fails(exitFailure, "is closed", "competition", "join", "--id", "cli-perm", "-w", v2Path)
	_, errOut, code = runCLI(t, nil, append([]string{"competition", "validate", "--id", "cli-perm", "-w", v1Path, "--model-dir", filepath.Join(dir, "x")}, net...)...)
	if code != exitFailure || !strings.Contains(errOut, `competition "cli-perm" is closed`) {
		t.Fatalf("validate of a closed competition: exit %d, %s", code, errOut)
	}

	// validate --join stakes again for a validator that left, and waits out the pause.
	val1 = validate(v1Path, "v1", "--join")
	waitShow("v1 back", func(s competition.Summary) bool { return s.Validators[0].Status == "active" && s.Pool.Stakes == 100 })
	val1.cmd.Process.Signal(os.Interrupt)
	if code := val1.wait(t, 20*time.Second); code != 0 || !strings.Contains(val1.stderr.String(), "validates competition") {
		t.Fatalf("validate --join after Ctrl-C: exit %d\n%s", code, val1.stderr)
	}
}

// Every competition command names its missing required flags in one line,
// exit 2, before it reads a key or a cluster.
func TestCompetitionMissingRequiredFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		missing []string
	}{
		{[]string{"competition", "create"}, []string{"id", "data", "architecture", "max-params", "sequences-per-page", "pages-per-round", "epsilon",
			"temperature", "round-slots", "quorum"}},
		{[]string{"competition", "update"}, []string{"id"}},
		{[]string{"competition", "show"}, []string{"id"}},
		{[]string{"competition", "standings"}, []string{"id"}},
		{[]string{"competition", "join"}, []string{"id"}},
		{[]string{"competition", "leave"}, []string{"id"}},
		{[]string{"competition", "submit"}, []string{"id", "model", "hub-repo"}},
		{[]string{"competition", "validate"}, []string{"id"}},
		{[]string{"competition", "check"}, []string{"id"}},
		{[]string{"competition", "claim"}, []string{"id"}},
		{[]string{"competition", "burn-stakes"}, []string{"id"}},
		{[]string{"competition", "withdraw"}, []string{"id"}},
		{[]string{"competition", "close"}, []string{"id"}},
		{[]string{"train", "--competition", "c"}, []string{"checkpoint-dir", "hub-repo"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			verb := " is required"
			if len(tc.missing) > 1 {
				verb = " are required"
			}
			name := strings.Join(tc.args, " ")
			if tc.args[0] == "train" {
				name = "train"
			}
			want := "psyche-client: " + name + ": --" + strings.Join(tc.missing, ", --") + verb + "\n"
			if code != exitBadInput || errOut != want {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", code, errOut, exitBadInput, want)
			}
		})
	}
}
