//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	solrpc "github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/internal/syncbuf"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// devRecipes are the `just dev` recipes that the seed doc names.
var devRecipes = []string{
	"setup-solana-localnet-test-run",
	"setup-solana-localnet-light-test-run",
	"setup-solana-localnet-permissioned-test-run",
	"setup-solana-localnet-permissioned-light-test-run",
	"setup-solana-localnet-test-run-treasurer",
	"setup-solana-localnet-light-test-run-treasurer",
	"setup-solana-localnet-permissioned-test-run-treasurer",
	"setup-solana-localnet-permissioned-light-test-run-treasurer",
	"setup-solana-devnet-test-run",
	"setup-solana-devnet-light-test-run",
	"setup-solana-devnet-permissioned-test-run",
	"setup-solana-devnet-permissioned-light-test-run",
	"setup-solana-devnet-test-run-treasurer",
	"setup-solana-devnet-light-test-run-treasurer",
	"setup-solana-devnet-permissioned-test-run-treasurer",
	"setup-solana-devnet-permissioned-light-test-run-treasurer",
	"close-dev-programs",
	"start-training-localnet-client",
	"start-training-localnet-light-client",
	"start-training-devnet-client",
	"start-training-devnet-light-client",
}

func repoRoot(t *testing.T) string {
	t.Helper()
	repo, err := deploy.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	return repo.Root
}

// justPath finds the just that scripts/setup.sh installs.
func justPath(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(repoRoot(t), "bin", "just"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("just")
	if err != nil {
		t.Fatal("just is not installed: run scripts/setup.sh")
	}
	return p
}

// hasNVIDIAGPU reports whether the driver sees a GPU, as the recipes ask it.
func hasNVIDIAGPU() bool { return nvidiaGPUs() > 0 }

// nvidiaGPUs counts the GPUs as common.sh's gpu_count does.
func nvidiaGPUs() int {
	if gpus, _ := os.ReadDir("/proc/driver/nvidia/gpus"); len(gpus) > 0 {
		return len(gpus)
	}
	out, err := exec.Command("nvidia-smi", "-L").Output()
	if err != nil {
		return 0
	}
	return strings.Count(string(out), "GPU ")
}

// devParallelism is the --data-parallelism --tensor-parallelism train.sh
// gives the 1.1B client here: the most groups that divide both the GPUs
// and the run's 8 gradient shards, the GPUs of a group (at most 8).
func devParallelism() string {
	gpus, dp := max(nvidiaGPUs(), 1), 1
	for gpus%(dp*2) == 0 && dp*2 <= 8 {
		dp *= 2
	}
	return fmt.Sprintf("--data-parallelism %d --tensor-parallelism %d", dp, min(gpus/dp, 8))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// recipe is one `just dev` invocation in its own process group, as a
// terminal would run it (Ctrl-C reaches the whole group).
type recipe struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// devEnv isolates a recipe from the user's files: its own HOME (so wallet),
// ledger and ports, the test's psyche-client and the programs already built.
func devEnv(t *testing.T, home string, extra ...string) []string {
	return append(os.Environ(), append([]string{
		"HOME=" + home, "WALLET_FILE=", "PSYCHE_CLIENT=" + builtCLI(t), "BUILD_PROGRAMS=0",
		"LEDGER=" + filepath.Join(home, "ledger"), "DRY_RUN=",
	}, extra...)...)
}

func startRecipe(t *testing.T, env []string, stdin string, args ...string) *recipe {
	t.Helper()
	r := &recipe{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(justPath(t), append([]string{"--justfile", filepath.Join(repoRoot(t), "justfile"), "dev"}, args...)...)
	r.cmd.Dir, r.cmd.Env = t.TempDir(), env
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.Stdin = strings.NewReader(stdin)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		// SIGTERM first: the script then stops the validator it started in a
		// process group of its own, which a SIGKILL would leave running.
		select {
		case <-r.done:
		default:
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
				<-r.done
			}
		}
		if t.Failed() {
			t.Logf("just dev %s:\n%s", strings.Join(args, " "), r.out.String())
		}
	})
	return r
}

// wait waits for the recipe to exit and returns its exit code.
func (r *recipe) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("the recipe did not exit within %v", timeout)
	}
	if r.err == nil {
		return 0
	}
	if exit, ok := r.err.(*exec.ExitError); ok {
		return exit.ExitCode()
	}
	t.Fatal(r.err)
	return -1
}

// waitFor waits until the output contains s.
func (r *recipe) waitFor(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(r.out.String(), s) {
		select {
		case <-r.done:
			t.Fatalf("the recipe exited (%v) before printing %q", r.err, s)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v", s, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// interrupt is Ctrl-C: SIGINT to the recipe's process group.
func (r *recipe) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
}

// freePortPair finds a port P with P+1 also free (RPC and PubSub).
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		l.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free pair of ports")
	return 0
}

func TestDevRecipesListed(t *testing.T) {
	just := justPath(t)
	jf := filepath.Join(repoRoot(t), "justfile")
	out, err := exec.Command(just, "--justfile", jf, "--list").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^\s+dev \.\.\.\s+# \S`).Match(out) {
		t.Fatalf("just --list (%v) lacks the documented dev module:\n%s", err, out)
	}
	list, err := exec.Command(just, "--justfile", jf, "--list", "dev").CombinedOutput()
	if err != nil {
		t.Fatalf("just --list dev: %v\n%s", err, list)
	}
	dump, err := exec.Command(just, "--justfile", jf, "--dump", "--dump-format", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Modules map[string]struct {
			Recipes map[string]struct{ Doc *string } `json:"recipes"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(dump, &d); err != nil {
		t.Fatal(err)
	}
	for _, name := range devRecipes {
		r, ok := d.Modules["dev"].Recipes[name]
		if !ok || !bytes.Contains(list, []byte(name)) {
			t.Errorf("recipe %s is missing from the dev module", name)
			continue
		}
		if r.Doc == nil || *r.Doc == "" || strings.Contains(*r.Doc, "\n") {
			t.Errorf("recipe %s has no one-line doc comment", name)
		}
	}
}

// dumpRun is psyche-client json-dump-run.
func dumpRun(t *testing.T, rpc, runID string) map[string]any {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "json-dump-run", "--rpc", rpc, "--run-id", runID)
	if code != 0 {
		t.Fatalf("json-dump-run %s: exit %d: %s", runID, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRunConfig checks that the run on chain carries config/NAME.toml.
func checkRunConfig(t *testing.T, m map[string]any, name string) {
	t.Helper()
	rc, err := coordinator.LoadRunConfig(filepath.Join(repoRoot(t), "config", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	meta, cfg, model := m["metadata"].(map[string]any), m["config"].(map[string]any), m["model"].(map[string]any)
	if meta["name"] != rc.Metadata.Name || cfg["epoch_time"] != float64(rc.Config.EpochTime) ||
		cfg["global_batch_size_start"] != float64(rc.Config.GlobalBatchSizeStart) || model["n_layer"] != float64(rc.Model.NLayer) {
		t.Fatalf("the run does not carry config/%s.toml: metadata %v, config %v, model n_layer %v", name, meta, cfg, model["n_layer"])
	}
	if m["run_state"] != "WaitingForMembers" {
		t.Fatalf("run state %v, want WaitingForMembers (resumed)", m["run_state"])
	}
}

// waitRegistered waits until the client of recipe c has joined the run on chain.
func waitRegistered(t *testing.T, c *recipe, rpc, runID, address string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, errOut, code := runCLI(t, nil, "json-dump-user", "--rpc", rpc, "--run-id", runID, "--address", address)
		if code == 0 {
			return
		}
		select {
		case <-c.done:
			t.Fatalf("the client exited (%v) before joining", c.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not join run %s: %s", address, runID, errOut)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func canJoin(t *testing.T, rpc, runID, grantee, user string) bool {
	t.Helper()
	_, errOut, code := runCLI(t, nil, "can-join", "--rpc", rpc, "--run-id", runID, "--authorizer", grantee, "--address", user)
	if code > 1 {
		t.Fatalf("can-join: exit %d: %s", code, errOut)
	}
	return code == 0
}

// stopsCleanly interrupts a localnet recipe and checks that it exited 0
// without just reporting the signal (Ctrl-C is how it is meant to stop),
// that the validator shut down (final snapshot) and that its port is free.
func stopsCleanly(t *testing.T, r *recipe, home string, port int) {
	t.Helper()
	r.interrupt(t)
	exitsQuietly(t, r)
	log, err := os.ReadFile(filepath.Join(home, "ledger.log"))
	if err != nil || !bytes.Contains(log, []byte("stopped at slot")) || bytes.Contains(log, []byte("again")) {
		t.Fatalf("the validator did not stop cleanly (%v):\n%s", err, log)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Fatalf("port %d still answers after Ctrl-C", port)
	}
}

// exitsQuietly waits for an interrupted recipe: exit 0, and no "error:"
// from just ("recipe ... was terminated ... by signal 2").
func exitsQuietly(t *testing.T, r *recipe) {
	t.Helper()
	if code := r.wait(t, time.Minute); code != 0 || strings.Contains(r.out.String(), "error: recipe") {
		t.Fatalf("after Ctrl-C the recipe exited %d; want 0 and no error from just", code)
	}
}

func TestDevLocalnetLightRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts validators")
	}
	t.Parallel()
	home := t.TempDir()
	port := freePortPair(t)
	rpc := fmt.Sprintf("http://127.0.0.1:%d", port)
	long := "a-run-id-that-is-longer-than-32-bytes"
	r := startRecipe(t, devEnv(t, home, "RPC_PORT="+strconv.Itoa(port)), "", "setup-solana-localnet-light-test-run", "run_id="+long)
	r.waitFor(t, "following logs of", 2*time.Minute)
	out := r.out.String()
	walletPath := filepath.Join(home, ".config", "solana", "id.json")
	if !strings.Contains(out, "no wallet at "+walletPath+": creating one") || !fileExists(walletPath) {
		t.Fatalf("the recipe did not create the wallet at %s", walletPath)
	}
	if !strings.Contains(out, `warning: run id "`+long+`" is longer than 32 bytes`) {
		t.Fatal("no warning about the truncated run id")
	}
	m := dumpRun(t, rpc, long[:32])
	checkRunConfig(t, m, "llama-12m")
	key, err := wallet.Load(walletPath)
	if err != nil {
		t.Fatal(err)
	}
	if m["main_authority"] != key.PublicKey().String() {
		t.Fatalf("main authority %v, want the wallet %s", m["main_authority"], key.PublicKey())
	}
	if !canJoin(t, rpc, long[:32], "11111111111111111111111111111111", solana.NewWallet().PublicKey().String()) {
		t.Fatal("the permissionless run does not let everyone join")
	}

	// The 1.1B client recipe needs a GPU: without one it stops at once,
	// pointing to the light recipes, and joins nothing.
	env := devEnv(t, home, "RPC_PORT="+strconv.Itoa(port), "DATA_DIR="+filepath.Join(home, "data"))
	if !hasNVIDIAGPU() {
		g := startRecipe(t, env, "", "start-training-localnet-client", "run_id="+long)
		want := "error: the 1.1B run (config/llama-1.1b.toml) trains on a GPU and this machine has none: on a CPU use the 12M run " +
			"(just dev setup-solana-localnet-light-test-run, then just dev start-training-localnet-light-client)"
		if code := g.wait(t, time.Minute); code != 2 || !strings.Contains(g.out.String(), "\n"+want+"\n") {
			t.Fatalf("the 1.1B client on a machine without a GPU exited %d, printing\n%s\nwant exit 2 and\n%s", code, g.out.String(), want)
		}
	} else {
		t.Log("this machine has a GPU: the 1.1B client's refusal without one is not checked")
	}

	// Two training clients join, each with a keypair of its own that is
	// removed when Ctrl-C makes it leave.
	var clients []*recipe
	for range 2 {
		clients = append(clients, startRecipe(t, env, "", "start-training-localnet-light-client", "run_id="+long))
	}
	keyLine := regexp.MustCompile(`Wrote new keypair to (\S+)\npubkey: (\S+)`)
	var keys []string
	for _, c := range clients {
		c.waitFor(t, "pubkey: ", time.Minute)
		m := keyLine.FindStringSubmatch(c.out.String())
		if m == nil || filepath.Dir(m[1]) != filepath.Join(home, ".config", "solana", "solana-keys") || !fileExists(m[1]) {
			t.Fatalf("no fresh keypair under ~/.config/solana/solana-keys: %v", m)
		}
		waitRegistered(t, c, rpc, long[:32], m[2])
		keys = append(keys, m[1])
	}
	if keys[0] == keys[1] {
		t.Fatal("two clients share a keypair")
	}
	for i, c := range clients {
		c.interrupt(t)
		exitsQuietly(t, c)
		if !strings.Contains(c.out.String(), "left the run") || fileExists(keys[i]) {
			t.Fatalf("client %d did not leave the run and remove its keypair", i)
		}
	}
	stopsCleanly(t, r, home, port)
}

func TestDevLocalnetPermissionedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts validators")
	}
	t.Parallel()
	home := t.TempDir()
	port := freePortPair(t)
	rpc := fmt.Sprintf("http://127.0.0.1:%d", port)
	r := startRecipe(t, devEnv(t, home, "RPC_PORT="+strconv.Itoa(port)), "", "setup-solana-localnet-permissioned-light-test-run", "perm")
	r.waitFor(t, "following logs of", 2*time.Minute)
	checkRunConfig(t, dumpRun(t, rpc, "perm"), "llama-12m")
	userKey := solana.NewWallet().PrivateKey
	userPath := filepath.Join(home, "user.json")
	if err := wallet.Save(userPath, userKey, false); err != nil {
		t.Fatal(err)
	}
	user := userKey.PublicKey().String()
	if canJoin(t, rpc, "perm", "11111111111111111111111111111111", user) {
		t.Fatal("a permissioned run lets everyone join")
	}
	// Run the authorization command the recipe printed.
	line := regexp.MustCompile(`(?m)^\s+(\S*psyche-client join-authorization-create .*--authorizer USER_PUBKEY)$`).FindStringSubmatch(r.out.String())
	if line == nil {
		t.Fatal("the recipe printed no join-authorization-create command")
	}
	args := strings.Fields(strings.Replace(line[1], "USER_PUBKEY", user, 1))
	if _, errOut, code := runCLIIn(t, repoRoot(t), nil, args[1:]...); code != 0 {
		t.Fatalf("%s: exit %d: %s", line[1], code, errOut)
	}
	if !canJoin(t, rpc, "perm", user, user) {
		t.Fatal("the printed command did not authorize the user")
	}
	// The user trains under the grant with their own wallet, which stays.
	c := startRecipe(t, devEnv(t, home, "RPC_PORT="+strconv.Itoa(port), "DATA_DIR="+filepath.Join(home, "data"),
		"WALLET_FILE="+userPath, "AUTHORIZER="+user), "", "start-training-localnet-light-client", "run_id=perm")
	waitRegistered(t, c, rpc, "perm", user)
	c.interrupt(t)
	exitsQuietly(t, c)
	if !strings.Contains(c.out.String(), "left the run") || !fileExists(userPath) || strings.Contains(c.out.String(), "keygen") {
		t.Fatal("the authorized user's client did not leave the run, or touched the keys")
	}
	stopsCleanly(t, r, home, port)
}

func TestDevLocalnetTreasurerRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts validators")
	}
	t.Parallel()
	home := t.TempDir()
	port := freePortPair(t)
	rpc := fmt.Sprintf("http://127.0.0.1:%d", port)
	r := startRecipe(t, devEnv(t, home, "RPC_PORT="+strconv.Itoa(port), "REWARDS_TOKENS=777"), "", "setup-solana-localnet-light-test-run-treasurer", "paid")
	r.waitFor(t, "following logs of", 2*time.Minute)
	m := dumpRun(t, rpc, "paid")
	checkRunConfig(t, m, "llama-12m")
	if rates := m["future_rates"].(map[string]any); rates["earning_rate_total_shared"] != 10.0 || rates["slashing_rate_per_client"] != 10.0 {
		t.Fatalf("epoch rates %v, want 10 and 10", rates)
	}
	// The run's token account holds the top-up (SPL token account: amount at 64).
	acct := regexp.MustCompile(`token account (\S+),`).FindStringSubmatch(r.out.String())
	if acct == nil {
		t.Fatal("treasurer-create-run printed no token account")
	}
	info, err := solrpc.New(rpc).GetAccountInfo(context.Background(), solana.MustPublicKeyFromBase58(acct[1]))
	if err != nil {
		t.Fatal(err)
	}
	if data := info.Value.Data.GetBinary(); len(data) < 72 || binary.LittleEndian.Uint64(data[64:72]) != 777 {
		t.Fatalf("the run's token account does not hold the 777 tokens topped up")
	}
	if !canJoin(t, rpc, "paid", "11111111111111111111111111111111", solana.NewWallet().PublicKey().String()) {
		t.Fatal("the permissionless Treasurer run does not let everyone join")
	}
	stopsCleanly(t, r, home, port)
}

// TestDevDevnetFlowOnLocalnet runs a devnet recipe and close-dev-programs for
// real, pointed at a local validator (devnet is out of reach here).
func TestDevDevnetFlowOnLocalnet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator")
	}
	t.Parallel()
	port := freePortPair(t)
	v := localnettest.Start(t, localnet.Options{RPCPort: port, WSPort: port + 1})
	home := t.TempDir()
	walletPath := filepath.Join(home, "devnet-wallet.json")
	key := localnettest.NewFundedKeypair(t, v, 20*solana.LAMPORTS_PER_SOL)
	if err := wallet.Save(walletPath, key, false); err != nil {
		t.Fatal(err)
	}
	env := devEnv(t, home, "DEVNET_RPC="+v.RPCURL, "NEW_PROGRAM_IDS=0", "WALLET_FILE="+walletPath)
	r := startRecipe(t, env, "", "setup-solana-devnet-light-test-run", "run_id=on-devnet")
	if code := r.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	checkRunConfig(t, dumpRun(t, v.RPCURL, "on-devnet"), "llama-12m")

	// A program of this checkout that another key controls is left alone.
	programtest.Deploy(t, v, deploy.Treasurer)
	// A buffer left over by an interrupted deployment is closed too.
	d := deploy.New(v.RPCURL, key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	elf, err := os.ReadFile(filepath.Join(repoRoot(t), "programs", "target", "deploy", deploy.Authorizer+".so"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteBuffer(ctx, key, elf); err != nil {
		t.Fatal(err)
	}
	before, err := d.RPC.GetBalance(ctx, key.PublicKey(), "confirmed")
	if err != nil {
		t.Fatal(err)
	}
	// "N" (or nothing) keeps everything.
	r = startRecipe(t, env, "n\n", "close-dev-programs")
	if code := r.wait(t, time.Minute); code != 0 || !strings.Contains(r.out.String(), "nothing closed") {
		t.Fatalf("answering n: exit %d", code)
	}
	r = startRecipe(t, env, "y\n", "close-dev-programs")
	if code := r.wait(t, time.Minute); code != 0 {
		t.Fatalf("answering y: exit %d", code)
	}
	out := r.out.String()
	for _, want := range []string{"closed program psyche_coordinator", "closed program psyche_authorizer", "closed buffer", "recovered",
		"psyche_treasurer " + programID(t, deploy.Treasurer) + ": skipped, its upgrade authority is "} {
		if !strings.Contains(out, want) {
			t.Fatalf("close-dev-programs printed no %q", want)
		}
	}
	after, err := d.RPC.GetBalance(ctx, key.PublicKey(), "confirmed")
	if err != nil || after.Value <= before.Value {
		t.Fatalf("the wallet holds %v lamports after closing (err %v), %d before", after, err, before.Value)
	}
	if bufs, err := d.Buffers(ctx, key.PublicKey()); err != nil || len(bufs) != 0 {
		t.Fatalf("buffers left: %v, %v", bufs, err)
	}
	r = startRecipe(t, env, "", "close-dev-programs")
	if code := r.wait(t, time.Minute); code != 0 || !strings.Contains(r.out.String(), "nothing to close") {
		t.Fatalf("closing again: exit %d", code)
	}
}

// TestDevDevnetDryRuns checks the commands each devnet recipe would run, and
// that a dry run changes nothing: no wallet, no program keypair, no build.
func TestDevDevnetDryRuns(t *testing.T) {
	root := repoRoot(t)
	keysBefore := readDir(t, filepath.Join(root, "programs", "keys"))
	home := t.TempDir()
	w := filepath.Join(home, ".config", "solana", "id.json")
	pc := builtCLI(t)
	data := filepath.Join(home, "data")
	net := fmt.Sprintf("--rpc https://api.devnet.solana.com --ws-rpc wss://api.devnet.solana.com -w %s", w)
	setup := func(config, runID string, permissionless bool) []string {
		create := "create-run " + net + " --run-id " + runID
		if permissionless {
			create += " --permissionless"
		}
		return []string{
			"+ " + pc + " keys sync --new",
			"+ bash scripts/build-programs.sh",
			"+ " + pc + " balance " + net,
			"+ " + pc + " program deploy " + net + " psyche_coordinator psyche_authorizer",
			"+ " + pc + " " + create,
			"+ " + pc + " update-config " + net + " --run-id " + runID + " --config-path config/" + config + ".toml",
			"+ " + pc + " set-paused " + net + " --run-id " + runID + " --resume",
		}
	}
	withTreasurer := func(config, runID string, permissionless bool) []string {
		create := "treasurer-create-run " + net + " --run-id " + runID + ` --mint "$MINT"`
		if permissionless {
			create += " --permissionless"
		}
		return []string{
			"+ " + pc + " keys sync --new",
			"+ bash scripts/build-programs.sh",
			"+ " + pc + " balance " + net,
			"+ " + pc + " program deploy " + net + " psyche_coordinator psyche_authorizer psyche_treasurer",
			"+ " + pc + " mint-create " + net + " --decimals 0",
			"+ " + pc + " mint-to " + net + ` --mint "$MINT" --amount 1000000`,
			"+ " + pc + " " + create,
			"+ " + pc + " treasurer-top-up-rewards " + net + " --run-id " + runID + " --collateral-amount 1000",
			"+ " + pc + " treasurer-update-run " + net + " --run-id " + runID + " --config-path config/" + config + ".toml" +
				" --earning-rate-total-shared 10 --slashing-rate-per-client 10 --resume",
		}
	}
	// The dry runs run in parallel; the checks below wait for them all.
	t.Run("recipes", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"setup-solana-devnet-test-run"}, setup("llama-1.1b", "test", true)},
			{[]string{"setup-solana-devnet-light-test-run", "run_id=my-run"}, setup("llama-12m", "my-run", true)},
			{[]string{"setup-solana-devnet-permissioned-test-run", "bare"}, setup("llama-1.1b", "bare", false)},
			{[]string{"setup-solana-devnet-permissioned-light-test-run"}, setup("llama-12m", "test", false)},
			{[]string{"setup-solana-devnet-test-run-treasurer"}, withTreasurer("llama-1.1b", "test", true)},
			{[]string{"setup-solana-devnet-light-test-run-treasurer", "tr"}, withTreasurer("llama-12m", "tr", true)},
			{[]string{"setup-solana-devnet-permissioned-test-run-treasurer"}, withTreasurer("llama-1.1b", "test", false)},
			{[]string{"setup-solana-devnet-permissioned-light-test-run-treasurer", "run_id=x"}, withTreasurer("llama-12m", "x", false)},
			{[]string{"close-dev-programs"}, []string{"+ " + pc + " dev close-programs " + net}},
			// The 1.1B run: GPT-2's tokenizer, 2048-token sequences, the GPU
			// (a dry run prints the commands on a machine without one too).
			{[]string{"start-training-devnet-client", "run_id=my-run"}, []string{
				"+ " + pc + " data prepare --tokenizer gpt2 --seq-len 2048 --out " + data,
				"+ " + pc + " train " + net + " --run-id my-run --authorizer 11111111111111111111111111111111 --data-dir " + data + " --micro-batch-size 1 --device cuda " + devParallelism(),
			}},
			{[]string{"start-training-devnet-light-client"}, []string{
				"+ " + pc + " data prepare --tokenizer byte --seq-len 512 --out " + data,
				"+ " + pc + " train " + net + " --run-id test --authorizer 11111111111111111111111111111111 --data-dir " + data + " --micro-batch-size 1",
			}},
			// Arguments after the run id go to train; without a run id, all of them.
			{[]string{"start-training-devnet-light-client", "run_id=m", "--metrics-local-port", "9100", "--log-level", "debug info"}, []string{
				"+ " + pc + " data prepare --tokenizer byte --seq-len 512 --out " + data,
				"+ " + pc + " train " + net + " --run-id m --authorizer 11111111111111111111111111111111 --data-dir " + data +
					" --micro-batch-size 1 --metrics-local-port 9100 --log-level debug\\ info",
			}},
			{[]string{"start-training-devnet-client", "--metrics-local-port", "9100"}, []string{
				"+ " + pc + " data prepare --tokenizer gpt2 --seq-len 2048 --out " + data,
				"+ " + pc + " train " + net + " --run-id test --authorizer 11111111111111111111111111111111 --data-dir " + data + " --micro-batch-size 1 --device cuda " + devParallelism() + " --metrics-local-port 9100",
			}},
		} {
			t.Run(tc.args[0], func(t *testing.T) {
				t.Parallel()
				r := startRecipe(t, devEnv(t, home, "DRY_RUN=1", "NEW_PROGRAM_IDS=1", "BUILD_PROGRAMS=1", "DATA_DIR="+data), "", tc.args...)
				if code := r.wait(t, time.Minute); code != 0 {
					t.Fatalf("exit %d", code)
				}
				var got []string
				for _, l := range strings.Split(r.out.String(), "\n") {
					if strings.HasPrefix(l, "+ ") {
						got = append(got, l)
					}
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Fatalf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			})
		}
	})
	if fileExists(w) || fileExists(data) {
		t.Fatal("a dry run created the wallet or the dataset")
	}
	if keysAfter := readDir(t, filepath.Join(root, "programs", "keys")); keysAfter != keysBefore {
		t.Fatal("a dry run changed programs/keys/")
	}
}

// programID is the id of one of the repo's programs.
func programID(t *testing.T, name string) string {
	t.Helper()
	repo, err := deploy.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	key, err := repo.Keypair(name)
	if err != nil {
		t.Fatal(err)
	}
	return key.PublicKey().String()
}

// readDir returns a directory's files and contents, for comparison.
func readDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %x\n", e.Name(), data)
	}
	return b.String()
}

// TestDevBadInput: bad settings stop a recipe with a clear message before it
// builds, starts or writes anything.
func TestDevBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env    []string
		recipe string
		want   string
	}{
		{[]string{"RPC_PORT=http"}, "setup-solana-localnet-test-run", "RPC_PORT must be a port number, not http"},
		{[]string{"RPC_PORT=70000"}, "start-training-localnet-client", "RPC_PORT must be a port number, not 70000"},
		{[]string{"DRY_RUN=maybe"}, "setup-solana-localnet-light-test-run", "DRY_RUN must be 1 or 0, not maybe"},
		{[]string{"DEVNET_RPC=ftp://example"}, "setup-solana-devnet-test-run", "DEVNET_RPC must be an http(s) URL, not ftp://example"},
		{[]string{"DEVNET_RPC=devnet"}, "close-dev-programs", "DEVNET_RPC must be an http(s) URL, not devnet"},
		{[]string{"NEW_PROGRAM_IDS=yes"}, "setup-solana-devnet-light-test-run", "NEW_PROGRAM_IDS must be auto, 1 or 0, not yes"},
		{nil, "start-training-devnet-client", "set WALLET_FILE to a keypair that holds devnet SOL"},
		{[]string{"NEW_PROGRAM_IDS=0"}, "setup-solana-devnet-test-run-treasurer", "no wallet at "},
		{[]string{"WALLET_FILE=/nonexistent/w.json"}, "close-dev-programs", "no wallet at /nonexistent/w.json"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			home := t.TempDir()
			r := startRecipe(t, devEnv(t, home, append(tc.env, "DATA_DIR="+filepath.Join(home, "data"))...), "", tc.recipe)
			if code := r.wait(t, time.Minute); code == 0 || !strings.Contains(r.out.String(), tc.want) {
				t.Fatalf("exit %d, want a failure saying %q", code, tc.want)
			}
			if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 {
				t.Fatalf("the failed recipe left %v in HOME (%v)", entries, err)
			}
		})
	}
}
