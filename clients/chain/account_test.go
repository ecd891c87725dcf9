package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestSubscribeAccount(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	c, err := chain.New(v.RPCURL, v.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	payer := solana.NewWallet().PrivateKey
	if _, err := c.Airdrop(ctx, payer.PublicKey(), solana.LAMPORTS_PER_SOL); err != nil {
		t.Fatal(err)
	}

	// A missing account is an error the caller can recognise.
	if err := c.SubscribeAccount(ctx, solana.NewWallet().PublicKey(), func(chain.AccountUpdate) {}); !errors.Is(err, chain.ErrAccountNotFound) {
		t.Fatalf("subscribing to a missing account: %v, want ErrAccountNotFound", err)
	}

	updates := make(chan chain.AccountUpdate, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.SubscribeAccount(ctx, payer.PublicKey(), func(u chain.AccountUpdate) { updates <- u })
	}()
	first := <-updates
	if first.Lamports != solana.LAMPORTS_PER_SOL || !first.Owner.Equals(solana.SystemProgramID) {
		t.Fatalf("first update %+v: want the current balance, owned by the system program", first)
	}
	to := solana.NewWallet().PublicKey()
	if _, err := c.Send(ctx, payer, []solana.Instruction{system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build()}); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-updates:
		if u.Lamports >= first.Lamports-1_000_000 || u.Slot < first.Slot {
			t.Fatalf("pushed update %+v after a transfer from %+v", u, first)
		}
	case <-ctx.Done():
		t.Fatal("no notification for the transfer")
	}

	// The endpoint going away ends the subscription with an error (the
	// caller reconnects or fails over).
	if err := v.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the subscription ended without an error when the endpoint died")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription did not notice the endpoint dying")
	}
}
