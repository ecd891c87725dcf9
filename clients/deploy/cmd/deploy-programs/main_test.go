package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
	"github.com/psyche-go/psyche/programs/toolchain/buildtest"
)

func TestDeployPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, keys := t.TempDir(), t.TempDir()
	payerPath := filepath.Join(t.TempDir(), "id.json")
	payer := localnettest.NewFundedKeypair(t, v, 50_000_000_000)
	if err := wallet.Save(payerPath, payer, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conformance.so"), elf, 0o644); err != nil {
		t.Fatal(err)
	}
	program := solana.NewWallet().PrivateKey
	if err := wallet.Save(filepath.Join(keys, "conformance-keypair.json"), program, false); err != nil {
		t.Fatal(err)
	}
	args := []string{"-rpc", v.RPCURL, "-w", payerPath, "-dir", dir, "-keys", keys}
	for _, want := range []string{"deployed", "unchanged"} {
		var out, errOut bytes.Buffer
		if err := run(ctx, args, &out, &errOut); err != nil {
			t.Fatalf("run: %v\n%s", err, errOut.String())
		}
		if !strings.Contains(out.String(), program.PublicKey().String()) || !strings.Contains(out.String(), want) {
			t.Fatalf("output does not report %s:\n%s", want, out.String())
		}
	}

	// A program without a keypair is reported, the others still handled.
	if err := os.WriteFile(filepath.Join(dir, "orphan.so"), elf, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "orphan: program keypair") || !strings.Contains(out.String(), "unchanged") {
		t.Fatalf("err %v, output:\n%s", err, out.String())
	}
	if err := run(ctx, []string{"-rpc", v.RPCURL, "-w", payerPath, "-dir", t.TempDir()}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "no programs") {
		t.Fatalf("empty dir: %v", err)
	}
}
