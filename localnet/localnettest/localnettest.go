// Package localnettest starts the embedded local validator for tests and
// provides the few chain helpers every integration test needs.
package localnettest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
)

// Start launches a validator for the test, fails the test if it cannot, and
// stops it in t.Cleanup. Unless opts.Stderr is set, the server log is kept
// (last 64 KiB) and printed if the test fails.
func Start(t testing.TB, opts localnet.Options) *localnet.Validator {
	t.Helper()
	if err := localnet.CheckInstalled(); err != nil {
		t.Fatalf("%v", err)
	}
	var log *tailBuffer
	if opts.Stderr == nil {
		log = &tailBuffer{max: 64 << 10}
		opts.Stderr = log
		if opts.Stdout == nil {
			opts.Stdout = log
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := localnet.Start(ctx, opts)
	if err != nil {
		if log != nil {
			t.Logf("localnet log:\n%s", log.String())
		}
		t.Fatalf("start localnet: %v", err)
	}
	t.Cleanup(func() {
		if err := v.Stop(); err != nil {
			t.Errorf("stop localnet: %v", err)
		}
		if log != nil && t.Failed() {
			t.Logf("localnet log:\n%s", log.String())
		}
	})
	return v
}

// Client returns an RPC client for v.
func Client(v *localnet.Validator) *rpc.Client {
	return rpc.New(v.RPCURL)
}

// Fund airdrops lamports to pubkey and waits until the airdrop is confirmed.
func Fund(t testing.TB, v *localnet.Validator, pubkey solana.PublicKey, lamports uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sig, err := Client(v).RequestAirdrop(ctx, pubkey, lamports, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatalf("airdrop %d lamports to %s: %v", lamports, pubkey, err)
	}
	WaitConfirmed(t, v, sig)
}

// NewFundedKeypair returns a fresh keypair holding lamports.
func NewFundedKeypair(t testing.TB, v *localnet.Validator, lamports uint64) solana.PrivateKey {
	t.Helper()
	key, err := solana.NewRandomPrivateKey()
	if err != nil {
		t.Fatalf("new keypair: %v", err)
	}
	Fund(t, v, key.PublicKey(), lamports)
	return key
}

// WaitConfirmed polls the signature's status until it is confirmed and fails
// the test if the transaction failed or does not land within 30 s.
func WaitConfirmed(t testing.TB, v *localnet.Validator, sig solana.Signature) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := Client(v)
	for {
		out, err := client.GetSignatureStatuses(ctx, true, sig)
		if err == nil && len(out.Value) == 1 && out.Value[0] != nil {
			st := out.Value[0]
			if st.Err != nil {
				t.Fatalf("transaction %s failed: %v", sig, st.Err)
			}
			if st.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || st.ConfirmationStatus == rpc.ConfirmationStatusFinalized {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("transaction %s not confirmed (last error: %v): %v", sig, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tailBuffer keeps the last max bytes written to it; safe for the two
// goroutines exec uses to copy stdout and stderr.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
