package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestCoordinatorCommands(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, admin := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	otherPath, other := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	// No default wallet: a command without -w (json-dump-*, list-runs,
	// can-join) must need none.
	noWallet := []string{"WALLET_FILE=" + filepath.Join(t.TempDir(), "absent.json")}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, noWallet, append(args, net...)...)
	}
	ok, fails := cliWith(t, noWallet, net...)
	dump := func() map[string]any {
		t.Helper()
		var m map[string]any
		out := ok("json-dump-run", "--run-id", "cli-run")
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("json-dump-run printed %q: %v", out, err)
		}
		return m
	}
	id := func(args ...string) []string { return append(args, "--run-id", "cli-run") }
	as := func(path string, args ...string) []string { return append(id(args...), "-w", path) }

	if out := ok(as(adminPath, "create-run", "--permissionless")...); !strings.Contains(out, "permissionless authorization: ") {
		t.Fatalf("create-run printed %q", out)
	}
	fails(exitFailure, "AlreadyInitialized", as(adminPath, "create-run")...)
	fails(exitBadInput, "run id", "create-run", "--run-id", strings.Repeat("x", 33), "-w", adminPath)
	var runs []map[string]any
	if err := json.Unmarshal([]byte(ok("list-runs")), &runs); err != nil || len(runs) != 1 || runs[0]["run_id"] != "cli-run" || runs[0]["run_state"] != "Uninitialized" {
		t.Fatalf("list-runs: %v %v", runs, err)
	}

	// Run config files: bad ones name the key and line and send nothing.
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[config]\nwarmup_time = 3\nwarmup_tmie = 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(exitBadInput, "bad.toml:3: unknown key config.warmup_tmie", as(adminPath, "update-config", "--config-path", bad)...)
	fails(exitBadInput, "no such file", as(adminPath, "update-config", "--config-path", bad+".missing")...)
	cfg := "../../../config/smoke.toml"
	fails(exitFailure, "Unauthorized", as(otherPath, "update-config", "--config-path", cfg)...)
	ok(as(adminPath, "update-config", "--config-path", cfg)...)
	m := dump()
	if m["metadata"].(map[string]any)["name"] != "smoke" || m["config"].(map[string]any)["epoch_time"] != 10.0 || m["model"].(map[string]any)["learning_rate"] != 0.0010000000474974513 {
		t.Fatalf("after update-config: metadata %v config %v model lr %v", m["metadata"], m["config"], m["model"].(map[string]any)["learning_rate"])
	}
	if model := m["model"].(map[string]any); model["optimizer"] != 1.0 || model["inner_steps"] != 1.0 || model["value_bits"] != 0.0 ||
		model["outer_learning_rate"] != 0.0 || model["precision"] != 0.0 || model["grad_shards"] != 1.0 || m["config"].(map[string]any)["overlap"] != false {
		t.Fatalf("after update-config: optimizer fields %v, overlap %v", model, m["config"].(map[string]any)["overlap"])
	}
	// A SparseLoCo config applies while the run is still uninitialized.
	ok(as(adminPath, "update-config", "--config-path", "../../../config/sparseloco.toml")...)
	if model := dump()["model"].(map[string]any); model["optimizer"] != 2.0 || model["inner_steps"] != 10.0 || model["value_bits"] != 2.0 || model["outer_learning_rate"] != 8.0 {
		t.Fatalf("after the SparseLoCo config: %v", model)
	}
	ok(as(adminPath, "update-config", "--config-path", cfg)...)

	ok(as(adminPath, "set-future-epoch-rates", "--earning-rate-total-shared", "100")...)
	fails(exitBadInput, "non-negative integer", as(adminPath, "set-future-epoch-rates", "--slashing-rate-per-client", "-5")...)
	ok(as(adminPath, "update-client-version", "--new-version", "v2")...)
	if m := dump(); m["client_version"] != "v2" || m["future_rates"].(map[string]any)["earning_rate_total_shared"] != 100.0 {
		t.Fatalf("client version %v, future rates %v", m["client_version"], m["future_rates"])
	}

	// can-join: the permissionless grant lets anyone in; a missing one does not.
	everyone := authorizer.Everyone.String()
	if out := ok(id("can-join", "--authorizer", everyone, "--address", other.PublicKey().String())...); !strings.Contains(out, `"can_join": true`) {
		t.Fatalf("can-join printed %s", out)
	}
	out, _, code := run(id("can-join", "--authorizer", other.PublicKey().String(), "--address", other.PublicKey().String())...)
	if code != exitFailure || !strings.Contains(out, "no such authorization") {
		t.Fatalf("can-join without a grant: exit %d, %s", code, out)
	}

	// Resume; a member joins (through the Go client: joining is the trainer's job).
	ok(as(adminPath, "set-paused", "--resume")...)
	if dump()["run_state"] != "WaitingForMembers" {
		t.Fatal("resume did not start the run")
	}
	fails(exitFailure, "TickTooEarly", as(otherPath, "tick")...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := programtest.Chain(t, v)
	r, _, err := coordinator.Default().Open(ctx, c, "cli-run")
	if err != nil {
		t.Fatal(err)
	}
	authAddr, _, _ := authorizer.Default().Address(admin.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	_, p2pKey, _ := ed25519.GenerateKey(nil)
	join, err := r.JoinRunProven(other.PublicKey(), authAddr, p2pKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, other, join); err != nil {
		t.Fatal(err)
	}
	var user map[string]any
	if err := json.Unmarshal([]byte(ok(id("json-dump-user", "--address", other.PublicKey().String())...)), &user); err != nil || user["pending_join"] != true {
		t.Fatalf("json-dump-user: %v %v", user, err)
	}
	fails(exitFailure, "not registered", id("json-dump-user", "--address", admin.PublicKey().String())...)
	fails(exitFailure, "RunNotHalted", as(adminPath, "close-run")...)

	ok(as(adminPath, "set-paused")...)
	fails(exitFailure, "RunHalted", as(otherPath, "checkpoint", "--repo", "http://example/ckpt")...)
	ok(as(adminPath, "close-run")...)
	fails(exitFailure, "not found", id("json-dump-run")...)
}
