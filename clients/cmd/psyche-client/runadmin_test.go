package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	solrpc "github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// One permissionless authorization covers every run of its join authority:
// creating a second run with --permissionless finds it and succeeds (it
// failed with AuthorizationAlreadyExists, exit 1, which stopped set -e
// scripts). A deactivated one is still an error that says so.
func TestCreateRunPermissionlessAgain(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, admin := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	ok, fails := cliWith(t, nil, "--rpc", v.RPCURL, "--ws-rpc", v.WSURL, "-w", adminPath)

	first := ok("create-run", "--run-id", "first", "--permissionless")
	if !strings.Contains(first, "permissionless authorization: ") || strings.Count(first, "signature: ") != 2 {
		t.Fatalf("first create-run printed %q", first)
	}
	// A new blockhash: the same authorization transaction sent again under
	// the first one's would be that transaction, already confirmed.
	waitNewBlockhash(t, v.RPCURL)
	second := ok("create-run", "--run-id", "second", "--permissionless")
	addr, _, _ := authorizer.Default().Address(admin.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	if !strings.Contains(second, "permissionless authorization: "+addr.String()+" (exists already and is active") || strings.Count(second, "signature: ") != 1 {
		t.Fatalf("second create-run printed %q", second)
	}
	if out, errOut, code := runCLI(t, nil, "can-join", "--rpc", v.RPCURL, "--run-id", "second", "--authorizer", authorizer.Everyone.String(),
		"--address", solana.NewWallet().PublicKey().String()); code != 0 || !strings.Contains(out, `"can_join": true`) {
		t.Fatalf("the second run does not let everyone join: exit %d, %s%s", code, out, errOut)
	}

	// Switched off by its owner: create-run does not switch it back on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	off, err := authorizer.Default().SetActive(admin.PublicKey(), addr, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := programtest.Chain(t, v).Send(ctx, admin, []solana.Instruction{off}); err != nil {
		t.Fatal(err)
	}
	fails(exitFailure, "permissionless authorization "+addr.String()+" is inactive", "create-run", "--run-id", "third", "--permissionless")
	if _, errOut, code := runCLI(t, nil, "json-dump-run", "--rpc", v.RPCURL, "--run-id", "third"); code != 0 {
		t.Fatalf("the run itself was not created: %s", errOut)
	}
}

// update-config checks every rule of the program against the run before it
// sends anything: a refused [config] no longer leaves the [metadata] of the
// same file applied (it was sent first, printed its signature, then the
// config failed with exit 1). A partial [config] keeps the run's other keys.
func TestUpdateConfigChecksFirst(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, _ := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	ok, fails := cliWith(t, nil, "--rpc", v.RPCURL, "--ws-rpc", v.WSURL)
	as := func(args ...string) []string { return append(args, "--run-id", "cfg", "-w", adminPath) }
	dump := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(ok("json-dump-run", "--run-id", "cfg")), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	file := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	test, err := os.ReadFile("../../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	ok(as("create-run", "--permissionless")...)

	// Before any config: a partial [config] has nothing to keep keys from.
	partial := file("partial.toml", "[config]\nverification_percent = 50\n")
	fails(exitBadInput, "[config] leaves out warmup_time, cooldown_time", as("update-config", "--config-path", partial)...)

	ok(as("update-config", "--config-path", "../../../config/smoke.toml")...)
	bad := strings.Replace(strings.Replace(string(test), `name = "smoke"`, `name = "renamed"`, 1), "verification_percent = 0", "verification_percent = 150", 1)
	badPath := file("bad.toml", bad)
	line := strings.Count(bad[:strings.Index(bad, "verification_percent = 150")], "\n") + 1
	out, errOut, code := runCLI(t, nil, as("update-config", "--config-path", badPath, "--rpc", v.RPCURL, "--ws-rpc", v.WSURL)...)
	want := "bad.toml:" + strconv.Itoa(line) + ": config.verification_percent = 150: must be 0 to 100 (the program refuses it: ConfigVerificationPercent); nothing was sent"
	if code != exitBadInput || !strings.Contains(errOut, want) || strings.Contains(out, "signature") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, no signature and %q", code, out, errOut, want)
	}
	if name := dump()["metadata"].(map[string]any)["name"]; name != "smoke" {
		t.Fatalf("the refused file changed the metadata to %v", name)
	}

	// Partial [config]: the keys it leaves out keep their values.
	if out := ok(as("update-config", "--config-path", partial)...); !strings.Contains(out, "[config] kept from the run's current config: warmup_time, cooldown_time,") {
		t.Fatalf("partial update printed %q", out)
	}
	m := dump()
	if epoch := m["epoch"].(map[string]any); epoch["last_step"] != 0.0 || epoch["drain_end_step"] != 0.0 {
		t.Fatalf("epoch of a run that never ran: %v", epoch)
	}
	cfg := m["config"].(map[string]any)
	if cfg["verification_percent"] != 50.0 || cfg["epoch_time"] != 10.0 || cfg["total_steps"] != 100.0 || cfg["forgive_per_epoch"] != 1.0 || cfg["vesting_epochs"] != 0.0 {
		t.Fatalf("after the partial update: %v", cfg)
	}
	// A kept key that breaks a rule with a given one is named as the run's.
	fails(exitBadInput, "config.witness_nodes = 3: must be at most min_clients (2)", as("update-config", "--config-path", file("min.toml", "[config]\nmin_clients = 2\ninit_min_clients = 2\n"))...)

	// Running: the file's [config] is refused before its [metadata] is sent.
	ok(as("set-paused", "--resume")...)
	fails(exitBadInput, "RunNotHalted", as("update-config", "--config-path", file("renamed.toml", strings.Replace(string(test), `name = "smoke"`, `name = "renamed"`, 1)))...)
	if name := dump()["metadata"].(map[string]any)["name"]; name != "smoke" {
		t.Fatalf("a refused update changed the metadata to %v", name)
	}
	// The metadata alone may change while the run runs.
	ok(as("update-config", "--config-path", file("meta.toml", "[metadata]\nname = \"renamed\"\n"))...)
	if name := dump()["metadata"].(map[string]any)["name"]; name != "renamed" {
		t.Fatalf("metadata %v, want renamed", name)
	}
}

// A run's numeric contract is set by its config (precision = "mx8") and
// shown by json-dump-run; train --precision fp32 refuses to join it with one
// line and exit 2 (restarting would not help), and leaves no slot behind;
// so does a CPU client the 1.1B run does not fit (ErrMemory).
func TestTrainRefusesPrecision(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, _ := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	userPath, user := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	ok, fails := cliWith(t, nil, "--rpc", v.RPCURL, "--ws-rpc", v.WSURL)
	test, err := os.ReadFile("../../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	mx8 := filepath.Join(t.TempDir(), "mx8.toml")
	if err := os.WriteFile(mx8, []byte(strings.Replace(string(test), "[model]\n", "[model]\nprecision = \"mx8\"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	as := func(args ...string) []string { return append(args, "--run-id", "mx", "-w", adminPath) }
	ok(as("create-run", "--permissionless")...)
	ok(as("update-config", "--config-path", mx8)...)
	ok(as("set-paused", "--resume")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(ok("json-dump-run", "--run-id", "mx")), &m); err != nil {
		t.Fatal(err)
	}
	if p := m["model"].(map[string]any)["precision"]; p != 1.0 {
		t.Fatalf("json-dump-run: precision %v, want 1 (mx8)", p)
	}
	fails(exitBadInput, "the run trains with numeric contract mx8, and this client was started with --precision fp32 (accepts: fp32)",
		"train", "--run-id", "mx", "-w", userPath, "--logs", "none", "--precision", "fp32", "--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", t.TempDir())
	fails(exitFailure, "is not registered in this run", "json-dump-user", "--run-id", "mx", "--address", user.PublicKey().String())

	// The seed's 1.1B run on this CPU at 8 sequences a pass: its host
	// memory is past any CI machine's, said in one line before joining.
	big := func(args ...string) []string { return append(args, "--run-id", "big", "-w", adminPath) }
	ok(big("create-run", "--permissionless")...)
	ok(big("update-config", "--config-path", "../../../config/llama-1.1b.toml")...)
	ok(big("set-paused", "--resume")...)
	fails(exitBadInput, "of host memory at --micro-batch-size 8 (two trainers: the run verifies, and replays have their own) and this machine has",
		"train", "--run-id", "big", "-w", userPath, "--logs", "none", "--device", "cpu", "--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", t.TempDir())
	fails(exitFailure, "is not registered in this run", "json-dump-user", "--run-id", "big", "--address", user.PublicKey().String())
}

// train checks its endpoints first, as every command does: none answering
// is bad input (exit 2, "cannot reach the RPC endpoint"); it was a raw
// getAccountInfo error and exit 1. A fallback that answers is used.
func TestTrainUnreachableRPC(t *testing.T) {
	key := solana.NewWallet().PrivateKey
	keyPath := filepath.Join(t.TempDir(), "k.json")
	if err := wallet.Save(keyPath, key, false); err != nil {
		t.Fatal(err)
	}
	_, fails := cliWith(t, nil)
	fails(exitBadInput, "cannot reach the RPC endpoint http://127.0.0.1:1", "train", "--run-id", "r", "-w", keyPath, "--logs", "none", "--rpc", "http://127.0.0.1:1")
	fails(exitBadInput, "cannot reach the RPC endpoint http://127.0.0.1:2", "train", "--run-id", "r", "-w", keyPath, "--logs", "none",
		"--rpc", "http://127.0.0.1:1", "--rpc-2", "http://127.0.0.1:2")

	v := localnettest.Start(t, localnet.Options{})
	_, errOut, code := runCLI(t, nil, "train", "--run-id", "absent", "-w", keyPath, "--logs", "none", "--rpc", "http://127.0.0.1:1", "--rpc-2", v.RPCURL)
	if code != exitFailure || strings.Contains(errOut, "cannot reach") || !strings.Contains(errOut, "not found") {
		t.Fatalf("with a fallback that answers: exit %d, %q; want the run not found through it", code, errOut)
	}
}

// waitNewBlockhash waits until the cluster's latest blockhash changes.
func waitNewBlockhash(t *testing.T, rpcURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := solrpc.New(rpcURL)
	first, err := c.GetLatestBlockhash(ctx, solrpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	for {
		now, err := c.GetLatestBlockhash(ctx, solrpc.CommitmentConfirmed)
		if err != nil {
			t.Fatal(err)
		}
		if now.Value.Blockhash != first.Value.Blockhash {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
