package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// keyFile writes a funded keypair file for the CLI.
func keyFile(t *testing.T, v *localnet.Validator, lamports uint64) (string, solana.PrivateKey) {
	t.Helper()
	key := localnettest.NewFundedKeypair(t, v, lamports)
	path := filepath.Join(t.TempDir(), key.PublicKey().String()+".json")
	if err := wallet.Save(path, key, false); err != nil {
		t.Fatal(err)
	}
	return path, key
}

func TestJoinAuthorizationCommands(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	programtest.Deploy(t, v, "psyche_authorizer")
	grantorPath, grantor := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	granteePath, grantee := keyFile(t, v, solana.LAMPORTS_PER_SOL)
	delegate := solana.NewWallet().PublicKey()
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, nil, append(args, net...)...)
	}
	read := func() map[string]any {
		t.Helper()
		out, errOut, code := run("join-authorization-read", "--join-authority", grantor.PublicKey().String(), "--authorizer", grantee.PublicKey().String())
		if code != 0 {
			t.Fatalf("read: exit %d: %s", code, errOut)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("read printed %q: %v", out, err)
		}
		return m
	}

	out, errOut, code := run("join-authorization-create", "-w", grantorPath, "--authorizer", grantee.PublicKey().String())
	if code != 0 || !strings.Contains(out, "signature: ") {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	if m := read(); m["active"] != true || m["grantee"] != grantee.PublicKey().String() || m["scope"].(map[string]any)["text"] != "CoordinatorJoinRun" {
		t.Fatalf("after create: %v", m)
	}

	// A second create fails by name (--inactive makes it a different transaction).
	_, errOut, code = run("join-authorization-create", "-w", grantorPath, "--authorizer", grantee.PublicKey().String(), "--inactive")
	if code != exitFailure || !strings.Contains(errOut, "AuthorizationAlreadyExists") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("re-create: exit %d, stderr %q; want one line naming AuthorizationAlreadyExists", code, errOut)
	}

	_, errOut, code = run("join-authorization-delegate", "-w", granteePath, "--join-authority", grantor.PublicKey().String(), "--delegates-added", delegate.String())
	if code != 0 {
		t.Fatalf("delegate: exit %d: %s", code, errOut)
	}
	if d := read()["delegates"].([]any); len(d) != 1 || d[0] != delegate.String() {
		t.Fatalf("delegates %v", d)
	}

	_, errOut, code = run("join-authorization-delete", "-w", grantorPath, "--authorizer", grantee.PublicKey().String())
	if code != 0 {
		t.Fatalf("delete: exit %d: %s", code, errOut)
	}
	_, errOut, code = run("join-authorization-read", "--join-authority", grantor.PublicKey().String(), "--authorizer", grantee.PublicKey().String())
	if code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("read after delete: exit %d, %q", code, errOut)
	}

	_, errOut, code = run("join-authorization-create", "-w", grantorPath, "--authorizer", "not-a-key")
	if code != exitBadInput || !strings.Contains(errOut, "not a base58 public key") {
		t.Fatalf("bad grantee: exit %d, %q", code, errOut)
	}
	// AUTHORIZER is honoured as the grantee.
	_, errOut, code = runCLI(t, []string{"AUTHORIZER=11111111111111111111111111111111"}, append([]string{"join-authorization-create", "-w", grantorPath}, net...)...)
	if code != 0 {
		t.Fatalf("create via AUTHORIZER: exit %d: %s", code, errOut)
	}
}
