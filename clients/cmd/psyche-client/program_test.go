package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestProgramCommands(t *testing.T) {
	// Short slots: the loader refuses a second change to a program in one slot.
	v := localnettest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond})
	walletPath, me := keyFile(t, v, 50*solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL, "-w", walletPath}
	// run puts the flags before positional arguments, where urfave/cli reads them.
	run := func(sub string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, nil, append(append([]string{"program", sub}, net...), args...)...)
	}
	repo, err := deploy.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	id := mustProgramID(t, repo, deploy.Authorizer)
	show := func(id string) map[string]any {
		t.Helper()
		out, errOut, code := runCLI(t, nil, "program", "show", "--program-id", id, "--rpc", v.RPCURL)
		if code != 0 {
			t.Fatalf("show: exit %d: %s", code, errOut)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("show printed %q", out)
		}
		return m
	}

	out, errOut, code := run("deploy", deploy.Authorizer)
	if code != 0 || !strings.Contains(out, "deployed") || !strings.Contains(out, id) {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	if m := show(id); m["authority"] != me.PublicKey().String() {
		t.Fatalf("show after deploy: %v", m)
	}
	out, _, code = run("deploy", deploy.Authorizer)
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("second deploy: exit %d\n%s", code, out)
	}
	so := filepath.Join(repo.Root, "programs", "target", "deploy", deploy.Authorizer+".so")
	if _, errOut, code = run("upgrade", "--program-id", id, "--so", so); code != 0 {
		t.Fatalf("upgrade: exit %d: %s", code, errOut)
	}
	out, errOut, code = run("close", "--program-id", id)
	if code != 0 || !strings.Contains(out, "closed "+id) {
		t.Fatalf("close: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code = runCLI(t, nil, "program", "show", "--program-id", id, "--rpc", v.RPCURL); code == 0 {
		t.Fatal("show succeeded for a closed program")
	}

	// Any .so at any keypair's id, made immutable.
	other := filepath.Join(t.TempDir(), "prog.json")
	if _, _, code = runCLI(t, nil, "keygen", "-o", other); code != 0 {
		t.Fatal("keygen")
	}
	otherKey, _ := wallet.Load(other)
	if _, errOut, code = run("deploy", "--so", so, "--program-keypair", other); code != 0 {
		t.Fatalf("deploy --so: exit %d: %s", code, errOut)
	}
	if _, errOut, code = run("set-authority", "--program-id", otherKey.PublicKey().String(), "--final"); code != 0 {
		t.Fatalf("set-authority --final: exit %d: %s", code, errOut)
	}
	if m := show(otherKey.PublicKey().String()); m["authority"] != "none (immutable)" {
		t.Fatalf("show after --final: %v", m)
	}

	for _, bad := range [][]string{
		{"deploy", "--so", walletPath, "--program-keypair", other},
		{"deploy", "--so", so},
		{"set-authority", "--program-id", id},
		{"upgrade", "--program-id", "nope", "--so", so},
	} {
		if _, errOut, code := run(bad[0], bad[1:]...); code != exitBadInput {
			t.Errorf("%v: exit %d (%s), want %d", bad, code, errOut, exitBadInput)
		}
	}
}

func mustProgramID(t *testing.T, repo deploy.Repo, name string) string {
	t.Helper()
	k, err := repo.Keypair(name)
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().String()
}
