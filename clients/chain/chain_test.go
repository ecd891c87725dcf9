package chain_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestSendConfirmSimulateFollow(t *testing.T) {
	// Long slots keep one blockhash for the whole test, so two sends of the
	// same instructions are the same transaction.
	v := localnettest.Start(t, localnet.Options{SlotDuration: 20 * time.Second})
	c, err := chain.New(v.RPCURL, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.WSURL() == "" {
		t.Fatal("no websocket URL derived")
	}
	c, _ = chain.New(v.RPCURL, v.WSURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	payer := solana.NewWallet().PrivateKey
	if _, err := c.Airdrop(ctx, payer.PublicKey(), 2*solana.LAMPORTS_PER_SOL); err != nil {
		t.Fatal(err)
	}
	to := solana.NewWallet().PublicKey()

	entries := make(chan chain.LogEntry, 16)
	go c.FollowLogs(ctx, []solana.PublicKey{solana.SystemProgramID}, slog.New(slog.NewTextHandler(io.Discard, nil)), func(e chain.LogEntry) { entries <- e })
	transfer := system.NewTransferInstruction(solana.LAMPORTS_PER_SOL/2, payer.PublicKey(), to).Build()
	sim, err := c.Simulate(ctx, payer, []solana.Instruction{transfer})
	if err != nil || sim.UnitsConsumed == nil || len(sim.Logs) == 0 {
		t.Fatalf("simulate: %+v, %v", sim, err)
	}
	sig1, err := c.Send(ctx, payer, []solana.Instruction{transfer})
	if err != nil {
		t.Fatal(err)
	}
	sig2, err := c.Send(ctx, payer, []solana.Instruction{transfer})
	if err != nil || sig2 != sig1 {
		t.Fatalf("resending the same transaction: %s, %v; want %s and no error", sig2, err, sig1)
	}
	if bal, _ := c.Balance(ctx, to); bal != solana.LAMPORTS_PER_SOL/2 {
		t.Fatalf("recipient holds %d, want one transfer", bal)
	}
	// The subscription may register after the first transfers: send distinct
	// ones until one is reported, then check that it is one of ours.
	sent := map[solana.Signature]bool{sig1: true}
	next := time.After(0)
	for lamports := uint64(1); ; {
		select {
		case e := <-entries:
			if !sent[e.Signature] || e.Err != nil || len(e.Logs) == 0 {
				t.Fatalf("log entry %+v is not one of our transfers", e)
			}
		case <-ctx.Done():
			t.Fatal("no log entry for any transfer")
		case <-next:
			sig, err := c.Send(ctx, payer, []solana.Instruction{system.NewTransferInstruction(lamports, payer.PublicKey(), to).Build()})
			if err != nil {
				t.Fatal(err)
			}
			sent[sig] = true
			lamports++
			next = time.After(200 * time.Millisecond)
			continue
		}
		break
	}

	tooMuch := system.NewTransferInstruction(100*solana.LAMPORTS_PER_SOL, payer.PublicKey(), to).Build()
	_, err = c.Send(ctx, payer, []solana.Instruction{tooMuch})
	var te *chain.TxError
	if !errors.As(err, &te) || te.Instruction != 0 || !chain.IsCode(err, 1) || len(te.Logs) == 0 {
		t.Fatalf("overdraft: %#v", err)
	}
	if _, _, err := c.AccountData(ctx, solana.NewWallet().PublicKey()); !errors.Is(err, chain.ErrAccountNotFound) {
		t.Fatalf("missing account: %v", err)
	}
}

// SendResending: a transfer lands once; a failed transaction is not sent
// again unless NextSlot says a later slot cures it, and then only within
// Attempts.
func TestSendResending(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	c, err := chain.New(v.RPCURL, v.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	c.PollInterval = 20 * time.Millisecond
	payer, to := localnettest.NewFundedKeypair(t, v, 2*solana.LAMPORTS_PER_SOL), solana.NewWallet().PublicKey()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := chain.Resend{Attempts: 3, After: 5 * time.Second}
	transfer := system.NewTransferInstruction(solana.LAMPORTS_PER_SOL/4, payer.PublicKey(), to).Build()
	if _, err := c.SendResending(ctx, r, payer, []solana.Instruction{transfer}); err != nil {
		t.Fatal(err)
	}
	if bal, _ := c.Balance(ctx, to); bal != solana.LAMPORTS_PER_SOL/4 {
		t.Fatalf("recipient holds %d, want one transfer", bal)
	}

	tooMuch := []solana.Instruction{system.NewTransferInstruction(100*solana.LAMPORTS_PER_SOL, payer.PublicKey(), to).Build()}
	for _, tc := range []struct {
		name     string
		cured    int // how many failures NextSlot says the next slot cures
		calls    int // want: NextSlot consulted
		attempts string
	}{
		{"not cured", 0, 1, ""},
		{"cured once", 1, 2, ""},
		{"always cured", 100, 3, "after 3 attempts"},
	} {
		calls := 0
		r.NextSlot = func(te *chain.TxError) bool {
			calls++
			return calls <= tc.cured
		}
		_, err := c.SendResending(ctx, r, payer, tooMuch)
		var te *chain.TxError
		if !errors.As(err, &te) || !chain.IsCode(te, 1) || calls != tc.calls || !strings.Contains(err.Error(), tc.attempts) {
			t.Errorf("%s: %d NextSlot calls (want %d), err %v", tc.name, calls, tc.calls, err)
		}
	}
}
