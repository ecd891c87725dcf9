//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/runmanager"
	"github.com/psyche-go/psyche/internal/syncbuf"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// rmProc is a running `psyche-client run-manager`.
type rmProc struct {
	cmd    *exec.Cmd
	stderr syncbuf.Buffer
	done   chan struct{}
	code   int
}

func startRunManager(t *testing.T, env []string, args ...string) *rmProc {
	t.Helper()
	p := &rmProc{done: make(chan struct{})}
	p.cmd = exec.Command(builtCLI(t), append([]string{"run-manager"}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
		} else if err != nil {
			p.code = -2
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("run-manager's stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// wait is run-manager's exit code and stderr.
func (p *rmProc) wait(t *testing.T, within time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
		return p.code, p.stderr.String()
	case <-time.After(within):
		t.Fatalf("run-manager still running after %s", within)
	}
	return 0, ""
}

// waitFile waits until path exists and holds want, while p runs.
func (p *rmProc) waitFile(t *testing.T, path, want string, within time.Duration) {
	t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), want) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("run-manager exited %d before %s held %q", p.code, filepath.Base(path), want)
		default:
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s holds %q after %s, want %q in it", filepath.Base(path), b, within, want)
}

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The exit codes run-manager's policy knows are train's.
func TestRunManagerExitCodesAreTrains(t *testing.T) {
	if runmanager.ExitBadInput != exitBadInput || runmanager.ExitVersionMismatch != exitVersionMismatch {
		t.Fatal("clients/runmanager's exit codes differ from psyche-client's")
	}
}

// A client that crashes twice is restarted twice, after growing delays,
// with the env file's variables and the operator's flags, then finishes.
func TestRunManagerRestartsAfterCrash(t *testing.T) {
	dir := t.TempDir()
	child := script(t, dir, "child.sh", `
n=$(($(cat "$DIR/starts" 2>/dev/null || echo 0) + 1))
echo $n > "$DIR/starts"
echo "$n $(date +%s%N) $FROM_FILE|$QUOTED|$EXPORTED|$*" >> "$DIR/calls"
[ $n -le 2 ] && { echo "psyche-client: crash $n" >&2; exit 1; }
exit 0
`)
	env := writeFile(t, filepath.Join(dir, "client.env"), "# the client's settings\n\nFROM_FILE=1\nQUOTED=\"a b # c\"\nexport EXPORTED='x'\n")
	p := startRunManager(t, []string{"DIR=" + dir}, "--child-command", child, "--env-file", env, "--restart-delay", "200ms",
		"--run-id", "r1", "--", "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--threads", "1")
	code, errOut := p.wait(t, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	calls := strings.Split(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "calls"))))), "\n")
	if len(calls) != 3 {
		t.Fatalf("%d starts, want 3: %q", len(calls), calls)
	}
	var at []int64
	for i, c := range calls {
		f := strings.SplitN(c, " ", 3)
		want := fmt.Sprintf("1|a b # c|x|--run-id r1 --checkpoint-dir %s --threads 1", filepath.Join(dir, "ckpt"))
		if f[0] != strconv.Itoa(i+1) || f[2] != want {
			t.Fatalf("start %d saw %q, want %q", i+1, f[2], want)
		}
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		at = append(at, ns)
	}
	if gap1, gap2 := time.Duration(at[1]-at[0]), time.Duration(at[2]-at[1]); gap1 < 200*time.Millisecond || gap2 < 400*time.Millisecond {
		t.Fatalf("restarts after %s and %s, want at least 200ms and 400ms", gap1, gap2)
	}
	for _, want := range []string{"psyche-client: crash 1", "the client exited (exit status 1)", "restart 1 in 200ms", "restart 2 in 400ms", "start 3:", "the client finished"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

// A client that exits 10 with train's message is updated with the
// operator's command and restarted; the command may rewrite the env file.
func TestRunManagerUpdatesOnVersionMismatch(t *testing.T) {
	dir := t.TempDir()
	msg := fmt.Errorf("%w: the run wants %q, this is %q", client.ErrVersionMismatch, "v2", "v1")
	child := script(t, dir, "child.sh", `
echo "$CLIENT_VERSION" >> "$DIR/versions"
[ "$CLIENT_VERSION" = v2 ] && exit 0
printf '%s\n' 'psyche-client: `+msg.Error()+`' >&2
exit 10
`)
	env := writeFile(t, filepath.Join(dir, "client.env"), "CLIENT_VERSION=v1\n")
	update := `echo "$PSYCHE_REQUIRED_VERSION" >> "$DIR/updates"; echo "CLIENT_VERSION=$PSYCHE_REQUIRED_VERSION" > "$DIR/client.env"`
	p := startRunManager(t, []string{"DIR=" + dir}, "--child-command", child, "--env-file", env, "--restart-delay", "10ms",
		"--update-command", update, "--run-id", "r1")
	if code, errOut := p.wait(t, 30*time.Second); code != 0 || !strings.Contains(errOut, `the run requires client version "v2": running the update command`) {
		t.Fatalf("exit %d", code)
	}
	if v := string(must(os.ReadFile(filepath.Join(dir, "versions")))); v != "v1\nv2\n" {
		t.Fatalf("the client ran as %q, want v1 then v2", v)
	}
	if u := string(must(os.ReadFile(filepath.Join(dir, "updates")))); u != "v2\n" {
		t.Fatalf("the update command saw PSYCHE_REQUIRED_VERSION %q", u)
	}

	// Without an update command: exit 10, saying which version.
	writeFile(t, env, "CLIENT_VERSION=v1\n")
	p = startRunManager(t, []string{"DIR=" + dir}, "--child-command", child, "--env-file", env, "--run-id", "r1")
	code, errOut := p.wait(t, 30*time.Second)
	last := lastLine(errOut)
	if code != exitVersionMismatch || !strings.HasPrefix(last, "psyche-client: ") || !strings.Contains(last, `the run requires client version "v2"`) || !strings.Contains(last, "--update-command") {
		t.Fatalf("without --update-command: exit %d, last line %q", code, last)
	}
}

// Ctrl-C reaches the client, which leaves; run-manager then exits 0.
func TestRunManagerForwardsInterrupt(t *testing.T) {
	dir := t.TempDir()
	child := script(t, dir, "child.sh", `
trap 'echo INT > "$DIR/got"; exit 0' INT
echo ready > "$DIR/ready"
while :; do sleep 0.05; done
`)
	p := startRunManager(t, []string{"DIR=" + dir}, "--child-command", child, "--run-id", "r1")
	p.waitFile(t, filepath.Join(dir, "ready"), "ready", 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code, errOut := p.wait(t, 30*time.Second); code != 0 || !strings.Contains(errOut, "asking the client to leave the run") || !strings.Contains(errOut, "the client left (exit status 0)") {
		t.Fatalf("exit %d", code)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "got")); string(got) != "INT\n" {
		t.Fatalf("the client got %q, want INT", got)
	}

	// A second signal kills a client that does not leave.
	stubborn := script(t, dir, "stubborn.sh", `
trap 'echo INT >> "$DIR/stubborn"' INT TERM
echo ready > "$DIR/stubborn"
while :; do sleep 0.05; done
`)
	p = startRunManager(t, []string{"DIR=" + dir}, "--child-command", stubborn, "--run-id", "r1")
	p.waitFile(t, filepath.Join(dir, "stubborn"), "ready", 30*time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitFile(t, filepath.Join(dir, "stubborn"), "INT", 30*time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, errOut := p.wait(t, 30*time.Second); code != exitFailure || !strings.Contains(lastLine(errOut), "killed the client") {
		t.Fatalf("after two signals: exit %d", code)
	}
}

// Bad input is exit 2 and one line: a malformed env file names its line,
// and a client's exit 2 is not retried.
func TestRunManagerBadInput(t *testing.T) {
	dir := t.TempDir()
	child := script(t, dir, "child.sh", `
echo x >> "$DIR/starts"
echo "psyche-client: --device must be auto, cpu, cuda or cuda:0, not \"tpu\"" >&2
exit 2
`)
	bad := writeFile(t, filepath.Join(dir, "bad.env"), "# fine\nA=1\nthis is not an assignment\n")
	_, errOut, code := runCLI(t, []string{"DIR=" + dir}, "run-manager", "--child-command", child, "--env-file", bad, "--run-id", "r1")
	if code != exitBadInput || errOut != "psyche-client: --env-file "+bad+`:3: not KEY=VALUE: "this is not an assignment"`+"\n" {
		t.Fatalf("malformed env file: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "starts")); err == nil {
		t.Fatal("the client started despite a malformed env file")
	}
	for _, args := range [][]string{
		{"--run-id", "r1", "--", "--run-id", "r2"},
		{"--restart-delay", "0s", "--run-id", "r1"},
	} {
		if _, errOut, code := runCLI(t, nil, append([]string{"run-manager", "--child-command", child}, args...)...); code != exitBadInput || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}

	_, errOut, code = runCLI(t, []string{"DIR=" + dir}, "run-manager", "--child-command", child, "--restart-delay", "10ms", "--run-id", "r1")
	if starts := string(must(os.ReadFile(filepath.Join(dir, "starts")))); starts != "x\n" {
		t.Fatalf("the client started %d times, want once", strings.Count(starts, "x"))
	}
	if want := `the client exited 2 (bad input), not restarting it: --device must be auto, cpu, cuda or cuda:0, not "tpu"`; code != exitBadInput || lastLine(errOut) != "psyche-client: "+want {
		t.Fatalf("client exit 2: exit %d, last line %q", code, lastLine(errOut))
	}
}

// Without --run-id, run-manager picks the first run the wallet may join as
// list-runs and can-join see it (under a numeric contract train's
// --precision accepts), and runs the real train in it: the run
// wants v2, the client is v1 (its env file), so train exits 10, the update
// command moves the env file to v2, and the restarted train joins; Ctrl-C
// makes it leave and run-manager exit 0.
func TestRunManagerPicksRunAndUpdatesRealClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and real clients")
	}
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, _ := keyFile(t, v, 10*solana.LAMPORTS_PER_SOL) // four runs of about 1.4 SOL of rent each
	userPath, user := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	ok, _ := cliWith(t, nil, net...)
	// "0-new" is not configured; "a-closed" is, but its join authority grants
	// nobody; "b-open" lets everyone in (through the admin's permissionless
	// grant, made with "0-new").
	ok("create-run", "--run-id", "0-new", "--permissionless", "-w", adminPath)
	ok("create-run", "--run-id", "a-closed", "--join-authority", solana.NewWallet().PublicKey().String(), "-w", adminPath)
	ok("update-config", "--run-id", "a-closed", "--config-path", "../../../config/smoke.toml", "-w", adminPath)
	ok("set-paused", "--run-id", "a-closed", "--resume", "-w", adminPath)
	// "a-mx8" lets everyone in too, but trains under mx8, which the client's
	// --precision fp32 leaves out.
	test, err := os.ReadFile("../../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	mx8 := writeFile(t, filepath.Join(t.TempDir(), "mx8.toml"), strings.Replace(string(test), "[model]\n", "[model]\nprecision = \"mx8\"\n", 1))
	ok("create-run", "--run-id", "a-mx8", "-w", adminPath)
	ok("update-config", "--run-id", "a-mx8", "--config-path", mx8, "-w", adminPath)
	ok("set-paused", "--run-id", "a-mx8", "--resume", "-w", adminPath)
	ok("create-run", "--run-id", "b-open", "--client-version", "v2", "-w", adminPath)
	ok("update-config", "--run-id", "b-open", "--config-path", "../../../config/smoke.toml", "-w", adminPath)
	ok("set-paused", "--run-id", "b-open", "--resume", "-w", adminPath)

	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	// A small local dataset, as the run pins no data root.
	in := filepath.Join(dir, "corpus")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(in, "a.txt"), strings.Repeat("We hold these truths to be self-evident. ", 200))
	data := filepath.Join(dir, "data")
	mustRunCLI(t, "data", "prepare", "--input", in, "--split", "all", "--tokenizer", "byte", "--seq-len", "128", "--out", data)
	env := writeFile(t, filepath.Join(dir, "client.env"), "CLIENT_VERSION=v1\n")
	update := `echo "$PSYCHE_REQUIRED_VERSION" >> ` + filepath.Join(dir, "updates") + `; echo "CLIENT_VERSION=$PSYCHE_REQUIRED_VERSION" > ` + env
	t.Setenv("RUN_ID", "")
	os.Unsetenv("RUN_ID")
	p := startRunManager(t, []string{"TMPDIR=" + tmp, "WALLET_FILE=" + filepath.Join(dir, "absent.json")},
		"--env-file", env, "--update-command", update, "--restart-delay", "100ms", "--",
		"-w", userPath, "--logs", "json", "--threads", "1", "--precision", "fp32", "--bind-p2p-interface", "127.0.0.1",
		"--p2p-rendezvous-dir", filepath.Join(dir, "rendezvous"), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--data-dir", data, "--rpc", v.RPCURL, "--ws-rpc", v.WSURL)
	p.waitFile(t, filepath.Join(dir, "updates"), "v2\n", 2*time.Minute)
	// The restarted client (v2) joins b-open.
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("run-manager exited %d", p.code)
		default:
		}
		if _, _, code := runCLI(t, nil, append([]string{"json-dump-user", "--run-id", "b-open", "--address", user.PublicKey().String()}, net...)...); code == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the restarted client did not join b-open")
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, errOut := p.wait(t, 2*time.Minute)
	for _, want := range []string{`run "a-closed": no such authorization`, `run "a-mx8": trains with numeric contract mx8; the client accepts fp32 (--precision)`,
		`chose run "b-open" (the first of 2 configured runs`, "--run-id b-open", "exit status 10",
		`the run requires client version "v2": running the update command`, "start 2:", "the client left (exit status 0)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d after Ctrl-C", code)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
