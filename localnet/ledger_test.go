package localnet_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func balance(t *testing.T, v *localnet.Validator, key solana.PublicKey) uint64 {
	t.Helper()
	out, err := localnettest.Client(v).GetBalance(testContext(t), key, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatalf("getBalance: %v", err)
	}
	return out.Value
}

func TestLedgerSurvivesRestartAndKill(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	v := localnettest.Start(t, localnet.Options{LedgerDir: dir})
	key := localnettest.NewFundedKeypair(t, v, 3*solana.LAMPORTS_PER_SOL)
	genesis, err := localnettest.Client(v).GetGenesisHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := localnettest.Client(v).GetSignaturesForAddress(ctx, key.PublicKey())
	if err != nil || len(sigs) != 1 {
		t.Fatalf("signatures before restart: %v, %v", sigs, err)
	}
	if err := v.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// A clean restart keeps balances, history and the genesis hash.
	v = localnettest.Start(t, localnet.Options{LedgerDir: dir})
	if got := balance(t, v, key.PublicKey()); got != 3*solana.LAMPORTS_PER_SOL {
		t.Fatalf("balance after restart = %d", got)
	}
	if g, err := localnettest.Client(v).GetGenesisHash(ctx); err != nil || !g.Equals(genesis) {
		t.Fatalf("genesis hash after restart = %v, %v; want %v", g, err, genesis)
	}
	st, err := localnettest.Client(v).GetSignatureStatuses(ctx, true, sigs[0].Signature)
	if err != nil || st.Value[0] == nil {
		t.Fatalf("airdrop status after restart = %+v, %v", st, err)
	}

	// A second server on the same ledger is refused.
	if other, err := localnet.Start(ctx, localnet.Options{LedgerDir: dir}); err == nil {
		other.Stop()
		t.Fatal("second server on a ledger in use started")
	}

	// After SIGKILL, everything older than a snapshot interval survives.
	localnettest.Fund(t, v, key.PublicKey(), solana.LAMPORTS_PER_SOL)
	time.Sleep(1500 * time.Millisecond)
	if err := v.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	v = localnettest.Start(t, localnet.Options{LedgerDir: dir})
	if got := balance(t, v, key.PublicKey()); got != 4*solana.LAMPORTS_PER_SOL {
		t.Fatalf("balance after kill -9 = %d, want %d", got, 4*solana.LAMPORTS_PER_SOL)
	}
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}

	// --reset starts from genesis.
	v = localnettest.Start(t, localnet.Options{LedgerDir: dir, Reset: true})
	if got := balance(t, v, key.PublicKey()); got != 0 {
		t.Fatalf("balance after reset = %d", got)
	}
}

func TestCorruptLedgerIsRefused(t *testing.T) {
	dir := t.TempDir()
	v := localnettest.Start(t, localnet.Options{LedgerDir: dir})
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.bin")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(state, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	if other, err := localnet.Start(testContext(t), localnet.Options{LedgerDir: dir, Stderr: &log}); err == nil {
		other.Stop()
		t.Fatal("server started from a corrupt snapshot")
	}
	if !log.contains("checksum mismatch") {
		t.Fatalf("log does not explain the refusal:\n%s", log.String())
	}
}

func TestBlockhashWindowAndClock(t *testing.T) {
	const slot = 25 * time.Millisecond
	v := localnettest.Start(t, localnet.Options{SlotDuration: slot})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	start := bh.Context.Slot
	if bh.Value.LastValidBlockHeight != start+150 {
		t.Fatalf("lastValidBlockHeight = %d at slot %d", bh.Value.LastValidBlockHeight, start)
	}
	young := signTx(t, bh.Value.Blockhash, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build())
	old := signTx(t, bh.Value.Blockhash, payer, nil, system.NewTransferInstruction(2_000_000, payer.PublicKey(), to).Build())

	waitSlot(t, ctx, client, start+100)
	sig, err := client.SendTransaction(ctx, young)
	if err != nil {
		t.Fatalf("100-slot-old blockhash rejected: %v", err)
	}
	localnettest.WaitConfirmed(t, v, sig)

	waitSlot(t, ctx, client, start+200)
	_, err = client.SendTransaction(ctx, old)
	var rpcErr *jsonrpc.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32002 || rpcErr.Message != "Transaction simulation failed: Blockhash not found" {
		t.Fatalf("200-slot-old blockhash: err = %v", err)
	}
	valid, err := client.IsBlockhashValid(ctx, bh.Value.Blockhash, rpc.CommitmentFinalized)
	if err != nil || valid.Value {
		t.Fatalf("isBlockhashValid(expired) = %v, %v", valid, err)
	}
	if got := balance(t, v, to); got != 1_000_000 {
		t.Fatalf("recipient balance = %d, want only the young transfer", got)
	}

	// The Clock sysvar follows the slot and wall time.
	info, err := client.GetAccountInfo(ctx, solana.SysVarClockPubkey)
	if err != nil {
		t.Fatal(err)
	}
	data := info.Value.Data.GetBinary()
	clockSlot := binary.LittleEndian.Uint64(data[0:8])
	unix := int64(binary.LittleEndian.Uint64(data[32:40]))
	if clockSlot+10 < info.Context.Slot || clockSlot > info.Context.Slot {
		t.Errorf("clock slot %d, context slot %d", clockSlot, info.Context.Slot)
	}
	if d := time.Since(time.Unix(unix, 0)); d < -2*time.Second || d > 3*time.Second {
		t.Errorf("clock unix_timestamp %d is %v from now", unix, d)
	}
}

func waitSlot(t *testing.T, ctx context.Context, client *rpc.Client, slot uint64) {
	t.Helper()
	for {
		s, err := client.GetSlot(ctx, rpc.CommitmentProcessed)
		if err != nil {
			t.Fatalf("getSlot: %v", err)
		}
		if s >= slot {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
