package localnet_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

type slotHash struct {
	slot uint64
	hash solana.Hash
}

// readSlotHashes reads the SlotHashes sysvar (bincode: u64 count, then
// (u64 slot, [32]u8 hash) entries) and the slot it was read at.
func readSlotHashes(t *testing.T, ctx context.Context, client *rpc.Client) ([]slotHash, uint64) {
	t.Helper()
	info, err := client.GetAccountInfoWithOpts(ctx, solana.SysVarSlotHashesPubkey, &rpc.GetAccountInfoOpts{Encoding: solana.EncodingBase64})
	if err != nil {
		t.Fatalf("SlotHashes sysvar: %v", err)
	}
	data := info.Value.Data.GetBinary()
	n := binary.LittleEndian.Uint64(data)
	if len(data) < 8+40*int(n) {
		t.Fatalf("SlotHashes: %d entries in %d bytes", n, len(data))
	}
	out := make([]slotHash, n)
	for i := range out {
		e := data[8+40*i:]
		out[i].slot = binary.LittleEndian.Uint64(e)
		copy(out[i].hash[:], e[8:40])
	}
	return out, info.Context.Slot
}

// SlotHashes holds a bank hash per produced slot, newest first, at most
// 512: not the slot's blockhash (litesvm's next blockhash follows from the
// previous one, so anyone could predict it), and the same on every read and
// after a restart from the ledger.
func TestSlotHashesAreUnpredictableAndPersist(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	v := localnettest.Start(t, localnet.Options{LedgerDir: dir, SlotDuration: 5 * time.Millisecond})
	client := localnettest.Client(v)
	waitSlot(t, ctx, client, 600)

	entries, at := readSlotHashes(t, ctx, client)
	if len(entries) != 512 || entries[0].slot != at {
		t.Fatalf("%d entries, newest slot %d at slot %d; want 512 from the slot in progress", len(entries), entries[0].slot, at)
	}
	produced, err := client.GetBlocks(ctx, at-600, &at, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	produced = produced[len(produced)-512:]
	seen := map[solana.Hash]bool{}
	for i, e := range entries {
		if want := produced[len(produced)-1-i]; e.slot != want {
			t.Fatalf("entry %d is slot %d, want %d: one entry per produced slot, newest first", i, e.slot, want)
		}
		if seen[e.hash] {
			t.Fatalf("slot %d repeats a hash", e.slot)
		}
		seen[e.hash] = true
	}
	noDetails, noRewards := rpc.TransactionDetailsNone, false
	for _, e := range []slotHash{entries[1], entries[100], entries[511]} {
		block, err := client.GetBlockWithOpts(ctx, e.slot, &rpc.GetBlockOpts{TransactionDetails: noDetails, Rewards: &noRewards})
		if err != nil {
			t.Fatal(err)
		}
		if block.Blockhash == e.hash {
			t.Fatalf("slot %d: SlotHashes holds the blockhash, which the blockhash chain predicts", e.slot)
		}
	}

	again, _ := readSlotHashes(t, ctx, client)
	sameHashes(t, "a second read", entries, again)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	v = localnettest.Start(t, localnet.Options{LedgerDir: dir, SlotDuration: time.Second})
	client = localnettest.Client(v)
	after, _ := readSlotHashes(t, ctx, client)
	if n := sameHashes(t, "after a restart", entries, after); n < 400 {
		t.Fatalf("only %d of the entries read before the restart are still there", n)
	}
	// The snapshot the restart resumed from holds the newest slot before it.
	snap, err := client.GetHighestSnapshotSlot(ctx)
	if err != nil || snap.Incremental != nil || snap.Full < at {
		t.Fatalf("getHighestSnapshotSlot = %+v, %v; read at %d before the restart", snap, err, at)
	}
	slots := map[uint64]bool{}
	for _, e := range after {
		slots[e.slot] = true
	}
	if !slots[snap.Full] || !slots[snap.Full+1] {
		t.Fatalf("SlotHashes after the restart lacks the snapshot's slot %d or the one after it", snap.Full)
	}
}

// sameHashes fails if a slot in both lists has different hashes; it returns
// how many slots are in both.
func sameHashes(t *testing.T, when string, before, after []slotHash) int {
	t.Helper()
	bySlot := map[uint64]solana.Hash{}
	for _, e := range before {
		bySlot[e.slot] = e.hash
	}
	common := 0
	for _, e := range after {
		if h, ok := bySlot[e.slot]; ok {
			common++
			if h != e.hash {
				t.Fatalf("%s: slot %d hash %s, was %s", when, e.slot, e.hash, h)
			}
		}
	}
	return common
}
