// Package programtest deploys the repo's built programs on a local validator
// through the BPF upgradeable loader, as the dev recipes do on devnet, so
// program tests exercise the loader's deploy-time checks too.
package programtest

import (
	"context"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/programs"
	"github.com/psyche-go/psyche/idl"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// Deploy deploys a program built into programs/target/deploy at the id of
// its keypair in programs/keys and returns the id. The upgrade authority is a
// fresh funded key.
func Deploy(t testing.TB, v *localnet.Validator, name string) solana.PublicKey {
	t.Helper()
	repo, err := programs.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	authority := localnettest.NewFundedKeypair(t, v, 100*solana.LAMPORTS_PER_SOL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := repo.Deploy(ctx, v.RPCURL, authority, authority, name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Chain returns a client for v that names the errors of every IDL'd program.
func Chain(t testing.TB, v *localnet.Validator) *chain.Client {
	t.Helper()
	c, err := chain.New(v.RPCURL, v.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := idl.ErrorTables()
	if err != nil {
		t.Fatal(err)
	}
	c.Errors = tables
	c.PollInterval = 50 * time.Millisecond
	return c
}
