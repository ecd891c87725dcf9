package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/wallet"
)

var cliBuild struct {
	once sync.Once
	path string
	err  error
}

// builtCLI builds the psyche-client binary once per test process, so CLI tests
// run the real program with its real exit codes.
func builtCLI(t testing.TB) string {
	t.Helper()
	cliBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "psyche-client-test")
		if err != nil {
			cliBuild.err = err
			return
		}
		cliBuild.path = filepath.Join(dir, "psyche-client")
		out, err := exec.Command("go", "build", "-o", cliBuild.path, ".").CombinedOutput()
		if err != nil {
			cliBuild.err = errors.New(string(out))
		}
	})
	if cliBuild.err != nil {
		t.Fatalf("build psyche-client: %v", cliBuild.err)
	}
	return cliBuild.path
}

// runCLI runs the built binary with env added to the test's environment.
// cliWith runs psyche-client with env and the arguments given, followed by
// extra (network flags): ok wants exit 0 and returns stdout; fails wants
// exit code and a one-line error containing want.
func cliWith(t *testing.T, env []string, extra ...string) (ok func(args ...string) string, fails func(code int, want string, args ...string)) {
	ok = func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, env, append(args, extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, errOut)
		}
		return out
	}
	fails = func(code int, want string, args ...string) {
		t.Helper()
		_, errOut, got := runCLI(t, env, append(args, extra...)...)
		if got != code || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Fatalf("%s: exit %d, stderr %q; want exit %d and one line with %q", args[0], got, errOut, code, want)
		}
	}
	return ok, fails
}

func runCLI(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIIn(t, "", env, args...)
}

// runCLIIn is runCLI in the working directory dir ("" = the test's).
func runCLIIn(t testing.TB, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(builtCLI(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run psyche-client: %v", err)
	}
	return o.String(), e.String(), code
}

func TestKeygenPubkey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.json")
	out, errOut, code := runCLI(t, nil, "keygen", "-o", path)
	if code != 0 {
		t.Fatalf("keygen exit %d: %s", code, errOut)
	}
	key, err := wallet.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, key.PublicKey().String()) {
		t.Errorf("keygen output %q lacks the pubkey", out)
	}
	out, _, code = runCLI(t, nil, "pubkey", path)
	if code != 0 || strings.TrimSpace(out) != key.PublicKey().String() {
		t.Errorf("pubkey = %q (exit %d)", out, code)
	}
	// WALLET_FILE is honoured when no path is given.
	out, _, code = runCLI(t, []string{"WALLET_FILE=" + path}, "pubkey")
	if code != 0 || strings.TrimSpace(out) != key.PublicKey().String() {
		t.Errorf("pubkey via WALLET_FILE = %q (exit %d)", out, code)
	}
	// A second keygen to the same path must not destroy the wallet.
	_, errOut, code = runCLI(t, nil, "keygen", "-o", path)
	if code != exitBadInput || !strings.Contains(errOut, "refusing to overwrite") {
		t.Errorf("keygen over existing: exit %d, %q", code, errOut)
	}
	if again, _ := wallet.Load(path); string(again) != string(key) {
		t.Error("refused keygen changed the wallet")
	}
}

func TestBadInputExitsTwoWithOneLine(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("not json"), 0o600)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing keypair file", []string{"pubkey", filepath.Join(dir, "none.json")}, "does not exist"},
		{"corrupt keypair file", []string{"pubkey", garbage}, "not a JSON array"},
		{"bad pubkey", []string{"balance", "not-a-key"}, "not a base58 public key"},
		{"bad amount", []string{"airdrop", "1.2.3", "11111111111111111111111111111111"}, "not a number"},
		{"unreachable rpc", []string{"balance", "--rpc", "http://127.0.0.1:1", "11111111111111111111111111111111"}, "cannot reach the RPC endpoint"},
		{"unknown flag", []string{"balance", "--nope"}, "unknown flag --nope"},
		{"flag after an argument", []string{"balance", "11111111111111111111111111111111", "--rpc", "http://127.0.0.1:1"}, "put flags before arguments"},
		{"missing required flag", []string{"join-authorization-read", "--authorizer", "11111111111111111111111111111111"}, "join-authorization-read: --join-authority is required"},
		{"unknown command", []string{"nosuch"}, "no command \"nosuch\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			if code != exitBadInput {
				t.Errorf("exit = %d, want %d", code, exitBadInput)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr = %q, want it to mention %q", errOut, tc.want)
			}
		})
	}
}

func TestParseSOL(t *testing.T) {
	for in, want := range map[string]uint64{"1": 1e9, "0.5": 5e8, "2.000000001": 2000000001, ".25": 25e7} {
		got, err := parseSOL(in)
		if err != nil || got != want {
			t.Errorf("parseSOL(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "x", "1.0000000001", "-1", "99999999999999999999"} {
		if _, err := parseSOL(bad); err == nil {
			t.Errorf("parseSOL(%q) accepted", bad)
		}
	}
	if formatSOL(1500000000) != "1.5" || formatSOL(2e9) != "2" || formatSOL(1) != "0.000000001" {
		t.Error("formatSOL")
	}
}

// A keypair file that group or others may access is refused for signing,
// in one line saying how to fix it, with exit 2, before any request; the
// override signs with it, and reading its public key needs neither.
func TestInsecureKeyfileRefusedForSigning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id.json")
	if out, errOut, code := runCLI(t, nil, "keygen", "-o", path); code != 0 {
		t.Fatalf("keygen: %s %s", out, errOut)
	}
	// The endpoint answers nothing: the wallet check comes before any request.
	sign := []string{"tick", "--run-id", "r", "-w", path, "--rpc", "http://127.0.0.1:1"}
	if _, errOut, _ := runCLI(t, nil, sign...); strings.Contains(errOut, "chmod") {
		t.Fatalf("a 0600 keypair file was refused: %s", errOut)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runCLI(t, nil, sign...)
		if code != exitBadInput || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "chmod 600 "+path) {
			t.Errorf("mode %04o: exit %d, stderr %q; want exit %d and one line saying chmod 600", mode, code, errOut, exitBadInput)
		}
		if _, errOut, _ := runCLI(t, nil, append(sign, "--allow-insecure-keyfile")...); strings.Contains(errOut, "chmod") {
			t.Errorf("mode %04o with --allow-insecure-keyfile: %s", mode, errOut)
		}
		if out, errOut, code := runCLI(t, nil, "pubkey", path); code != 0 || out == "" {
			t.Errorf("mode %04o: pubkey: exit %d %s", mode, code, errOut)
		}
	}
}

// Every command that takes a wallet for signing takes the override too.
func TestEveryWalletCommandTakesTheOverride(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			var hasWallet, hasOverride bool
			for _, f := range c.Flags {
				hasWallet = hasWallet || f == walletFlag
				hasOverride = hasOverride || f == insecureKeyfileFlag
			}
			if hasWallet != hasOverride {
				t.Errorf("%s: --%s %v but --%s %v", name, walletFlag.Name, hasWallet, insecureKeyfileFlag.Name, hasOverride)
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", newApp().Commands)
}
