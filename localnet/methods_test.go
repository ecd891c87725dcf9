package localnet_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestClusterInfoMethods(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond})
	ctx := testContext(t)
	client := localnettest.Client(v)

	ver, err := client.GetVersion(ctx)
	if err != nil || ver.SolanaCore == "" {
		t.Fatalf("getVersion = %+v, %v", ver, err)
	}
	id, err := client.GetIdentity(ctx)
	if err != nil || id.Identity.IsZero() {
		t.Fatalf("getIdentity = %+v, %v", id, err)
	}
	if h, err := client.GetHealth(ctx); err != nil || h != rpc.HealthOk {
		t.Fatalf("getHealth = %q, %v", h, err)
	}
	waitSlot(t, ctx, client, 3)
	slot, err := client.GetSlot(ctx, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	height, err := client.GetBlockHeight(ctx, rpc.CommitmentConfirmed)
	if err != nil || height < slot {
		t.Fatalf("getBlockHeight = %d, %v (slot %d)", height, err, slot)
	}
	epoch, err := client.GetEpochInfo(ctx, rpc.CommitmentProcessed)
	if err != nil || epoch.AbsoluteSlot < slot || epoch.SlotsInEpoch != 432000 || epoch.SlotIndex != epoch.AbsoluteSlot%432000 {
		t.Fatalf("getEpochInfo = %+v, %v", epoch, err)
	}
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, 0, rpc.CommitmentFinalized)
	if err != nil || rent != 890880 {
		t.Fatalf("rent exemption for 0 bytes = %d, %v", rent, err)
	}

	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	tx := signTx(t, bh.Value.Blockhash, payer, nil, system.NewTransferInstruction(1, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
	msg, err := tx.Message.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fee, err := client.GetFeeForMessage(ctx, base64.StdEncoding.EncodeToString(msg), rpc.CommitmentProcessed)
	if err != nil || fee.Value == nil || *fee.Value != 5000 {
		t.Fatalf("getFeeForMessage = %+v, %v", fee, err)
	}
	valid, err := client.IsBlockhashValid(ctx, bh.Value.Blockhash, rpc.CommitmentProcessed)
	if err != nil || !valid.Value {
		t.Fatalf("isBlockhashValid(latest) = %+v, %v", valid, err)
	}
}

func TestSignaturesForAddressPaging(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	key := solana.NewWallet().PublicKey()
	var sigs []solana.Signature // oldest first
	for i := range 3 {
		sig, err := client.RequestAirdrop(ctx, key, uint64(i+1)*solana.LAMPORTS_PER_SOL, rpc.CommitmentConfirmed)
		if err != nil {
			t.Fatal(err)
		}
		localnettest.WaitConfirmed(t, v, sig)
		sigs = append(sigs, sig)
	}
	limit := 2
	tests := []struct {
		name string
		opts rpc.GetSignaturesForAddressOpts
		want []solana.Signature
	}{
		{"all, newest first", rpc.GetSignaturesForAddressOpts{}, []solana.Signature{sigs[2], sigs[1], sigs[0]}},
		{"limit", rpc.GetSignaturesForAddressOpts{Limit: &limit}, []solana.Signature{sigs[2], sigs[1]}},
		{"before", rpc.GetSignaturesForAddressOpts{Before: sigs[2]}, []solana.Signature{sigs[1], sigs[0]}},
		{"until", rpc.GetSignaturesForAddressOpts{Until: sigs[0]}, []solana.Signature{sigs[2], sigs[1]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := client.GetSignaturesForAddressWithOpts(ctx, key, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tc.want) {
				t.Fatalf("got %d signatures, want %d", len(out), len(tc.want))
			}
			for i := range out {
				if !out[i].Signature.Equals(tc.want[i]) || out[i].Err != nil || out[i].BlockTime == nil {
					t.Errorf("entry %d = %+v, want %s", i, out[i], tc.want[i])
				}
			}
		})
	}
}

func TestProgramSubscribe(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	owner := solana.NewWallet().PublicKey()
	sub, err := wsClient(t, ctx, v).ProgramSubscribeWithOpts(owner, rpc.CommitmentConfirmed, solana.EncodingBase64,
		[]rpc.RPCFilter{{DataSize: 24}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, 24, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	small, big := solana.NewWallet().PrivateKey, solana.NewWallet().PrivateKey
	send(t, ctx, v, payer, []solana.PrivateKey{small, big},
		system.NewCreateAccountInstruction(rent, 8, owner, payer.PublicKey(), small.PublicKey()).Build(),
		system.NewCreateAccountInstruction(rent, 24, owner, payer.PublicKey(), big.PublicKey()).Build(),
	)
	select {
	case r := <-sub.Response():
		if !r.Value.Pubkey.Equals(big.PublicKey()) || len(r.Value.Account.Data.GetBinary()) != 24 {
			t.Fatalf("program notification for %s (%d bytes), want the 24-byte account", r.Value.Pubkey, len(r.Value.Account.Data.GetBinary()))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no program notification")
	}
}

// Random corruptions of a valid transaction are refused with client errors,
// never an internal error or a crash, and the server keeps serving.
func TestCorruptedTransactionsAreRefused(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	tx := buildTx(t, ctx, client, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	landed := 0
	for i := range 300 {
		bad := append([]byte(nil), raw...)
		switch i % 3 {
		case 0: // flip bytes anywhere
			for range 1 + rng.IntN(3) {
				bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
			}
		case 1: // corrupt the message only (signature now wrong, or structure broken)
			bad[65+rng.IntN(len(bad)-65)] = byte(rng.IntN(256))
		case 2: // truncate or extend
			if rng.IntN(2) == 0 {
				bad = bad[:rng.IntN(len(bad))]
			} else {
				bad = append(bad, byte(rng.IntN(256)))
			}
		}
		for _, method := range []string{"sendTransaction", "simulateTransaction"} {
			r := call(t, v, method, []any{base64.StdEncoding.EncodeToString(bad), map[string]any{"encoding": "base64"}})
			if r.Error != nil && (r.Error.Code == -32603 || r.Error.Code == 0) {
				t.Fatalf("%s of corrupted tx %x: internal error %+v", method, bad, r.Error)
			}
			if method == "sendTransaction" && r.Error == nil {
				landed++ // only a "corruption" that rewrote a byte with its own value
			}
		}
	}
	if landed > 1 {
		t.Errorf("%d corrupted transactions were accepted", landed)
	}
	if r := call(t, v, "getHealth", nil); string(r.Result) != `"ok"` {
		t.Fatalf("getHealth after corrupted input = %s", r.Result)
	}
}

// getBlockProduction, getBlockCommitment, getInflationReward,
// getLargestAccounts and the slot methods, with Agave's shapes (decoded by
// solana-go) and errors, on a localnet with 32-slot epochs so that an
// epoch boundary passes.
func TestProductionCommitmentRewardsAndLargestAccounts(t *testing.T) {
	const slotsPerEpoch = 32
	v := localnettest.Start(t, localnet.Options{SlotDuration: 25 * time.Millisecond, ExtraArgs: []string{"--slots-per-epoch", "32"}})
	ctx := testContext(t)
	client := localnettest.Client(v)
	id, err := client.GetIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitSlot(t, ctx, client, slotsPerEpoch+8) // into epoch 1: epoch 0's boundary block exists

	t.Run("getBlockProduction", func(t *testing.T) {
		prod, err := client.GetBlockProduction(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := prod.Value.Range
		if r.LastSlot != prod.Context.Slot || r.FirstSlot != r.LastSlot/slotsPerEpoch*slotsPerEpoch {
			t.Fatalf("default range %+v at slot %d, want the current epoch", r, prod.Context.Slot)
		}
		n := int64(r.LastSlot - r.FirstSlot + 1)
		if got := prod.Value.ByIdentity; len(got) != 1 || got[id.Identity] != [2]int64{n, n} {
			t.Fatalf("byIdentity = %v, want {%s: [%d %d]}", got, id.Identity, n, n)
		}
		last := uint64(10)
		other := solana.NewWallet().PublicKey()
		prod, err = client.GetBlockProductionWithOpts(ctx, &rpc.GetBlockProductionOpts{Range: &rpc.SlotRangeRequest{FirstSlot: 0, LastSlot: &last}, Identity: &id.Identity})
		if err != nil || prod.Value.ByIdentity[id.Identity] != [2]int64{11, 11} || prod.Value.Range.FirstSlot != 0 || prod.Value.Range.LastSlot != 10 {
			t.Fatalf("slots 0-10 = %+v, %v", prod, err)
		}
		prod, err = client.GetBlockProductionWithOpts(ctx, &rpc.GetBlockProductionOpts{Identity: &other})
		if err != nil || len(prod.Value.ByIdentity) != 0 {
			t.Fatalf("another identity = %+v, %v; want no entries", prod, err)
		}
		wantError(t, call(t, v, "getBlockProduction", []any{map[string]any{"range": map[string]any{"firstSlot": 5, "lastSlot": 3}}}),
			-32602, "lastSlot, 3, cannot be less than firstSlot, 5")
		wantError(t, call(t, v, "getBlockProduction", []any{map[string]any{"range": map[string]any{"firstSlot": 0, "lastSlot": 1e9}}}),
			-32602, "lastSlot, 1000000000, is too large; max ")
		wantError(t, call(t, v, "getBlockProduction", []any{map[string]any{"range": map[string]any{}}}), -32602, "Invalid params: missing field `firstSlot`.")
		wantError(t, call(t, v, "getBlockProduction", []any{map[string]any{"identity": "nope"}}), -32602, "Invalid param: Invalid")
	})

	t.Run("getBlockCommitment", func(t *testing.T) {
		votes, err := client.GetVoteAccounts(ctx, nil)
		if err != nil || len(votes.Current) != 1 {
			t.Fatalf("getVoteAccounts = %+v, %v", votes, err)
		}
		stake := votes.Current[0].ActivatedStake
		rooted, err := client.GetBlockCommitment(ctx, votes.Current[0].RootSlot)
		if err != nil || rooted.TotalStake != stake || len(rooted.Commitment) != 32 || rooted.Commitment[31] != stake {
			t.Fatalf("commitment of the root %d = %+v, %v; want the stake %d rooted (index 31)", votes.Current[0].RootSlot, rooted, err, stake)
		}
		future, err := client.GetBlockCommitment(ctx, 1<<40)
		if err != nil || future.Commitment != nil || future.TotalStake != stake {
			t.Fatalf("commitment of a future slot = %+v, %v; want null", future, err)
		}
		wantError(t, call(t, v, "getBlockCommitment", []any{"x"}), -32602, "Invalid params: invalid type: string, expected u64.")
	})

	t.Run("getInflationReward", func(t *testing.T) {
		keys := []solana.PublicKey{solana.NewWallet().PublicKey(), id.Identity}
		rewards, err := client.GetInflationReward(ctx, keys, nil) // the previous epoch, 0: ended, no rewards
		if err != nil || len(rewards) != 2 || rewards[0] != nil || rewards[1] != nil {
			t.Fatalf("getInflationReward = %v, %v; want [null, null]", rewards, err)
		}
		slot, err := client.GetSlot(ctx, rpc.CommitmentConfirmed)
		if err != nil {
			t.Fatal(err)
		}
		future := slot/slotsPerEpoch + 10 // rewards paid in the first block of the next epoch
		r := call(t, v, "getInflationReward", []any{[]string{keys[0].String()}, map[string]any{"epoch": future}})
		wantError(t, r, -32004, fmt.Sprintf("Block not available for slot %d", (future+1)*slotsPerEpoch))
		wantError(t, call(t, v, "getInflationReward", []any{[]string{"nope"}}), -32602, "Invalid param: Invalid")
		wantError(t, call(t, v, "getInflationReward", []any{[]string{keys[0].String()}, map[string]any{"epoch": 0, "commitment": "processed"}}),
			-32602, "Method does not support commitment below `confirmed`")
		wantError(t, call(t, v, "getInflationReward", []any{[]string{keys[0].String()}, map[string]any{"minContextSlot": 1 << 40}}),
			-32016, "Minimum context slot has not been reached")
	})

	t.Run("getLargestAccounts", func(t *testing.T) {
		whale := solana.NewWallet().PublicKey()
		localnettest.Fund(t, v, whale, 2_000_000*solana.LAMPORTS_PER_SOL) // more than anything but the faucet
		largest, err := client.GetLargestAccounts(ctx, rpc.CommitmentConfirmed, "")
		if err != nil || len(largest.Value) != 20 {
			t.Fatalf("getLargestAccounts = %+v, %v; want 20 accounts", largest, err)
		}
		for i, a := range largest.Value {
			if a.Lamports == 0 || (i > 0 && a.Lamports > largest.Value[i-1].Lamports) {
				t.Fatalf("entry %d = %+v: not largest first", i, a)
			}
		}
		if a := largest.Value[1]; !a.Address.Equals(whale) || a.Lamports != 2_000_000*solana.LAMPORTS_PER_SOL {
			t.Fatalf("second largest = %+v, want %s", a, whale)
		}
		circulating, err := client.GetLargestAccounts(ctx, rpc.CommitmentConfirmed, rpc.LargestAccountsFilterCirculating)
		if err != nil || len(circulating.Value) != 20 || !circulating.Value[1].Address.Equals(whale) {
			t.Fatalf("circulating = %+v, %v", circulating, err)
		}
		none, err := client.GetLargestAccounts(ctx, rpc.CommitmentConfirmed, rpc.LargestAccountsFilterNonCirculating)
		if err != nil || len(none.Value) != 0 {
			t.Fatalf("nonCirculating = %+v, %v; want none (nothing is non-circulating)", none, err)
		}
		wantError(t, call(t, v, "getLargestAccounts", []any{map[string]any{"filter": "all"}}),
			-32602, "Invalid params: unknown variant `all`, expected `circulating` or `nonCirculating`.")
	})

	t.Run("max retransmit and shred insert slots", func(t *testing.T) {
		before, err := client.GetSlot(ctx, rpc.CommitmentProcessed)
		if err != nil {
			t.Fatal(err)
		}
		retransmit, err1 := client.GetMaxRetransmitSlot(ctx)
		shred, err2 := client.GetMaxShredInsertSlot(ctx)
		after, err3 := client.GetSlot(ctx, rpc.CommitmentProcessed)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if retransmit < before || shred < retransmit || shred > after {
			t.Fatalf("max retransmit %d, shred insert %d; want the slot in progress (%d..%d)", retransmit, shred, before, after)
		}
	})

	// The Go package always gives the server a ledger: it has a snapshot.
	snap, err := client.GetHighestSnapshotSlot(ctx)
	slot, _ := client.GetSlot(ctx, rpc.CommitmentProcessed)
	if err != nil || snap.Incremental != nil || snap.Full > slot {
		t.Fatalf("getHighestSnapshotSlot = %+v, %v", snap, err)
	}
}

// wantError fails unless r is an error with code whose message starts with prefix.
func wantError(t *testing.T, r rpcResponse, code int, prefix string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != code || !strings.HasPrefix(r.Error.Message, prefix) {
		t.Errorf("got result %s, error %+v; want %d %q", r.Result, r.Error, code, prefix)
	}
}
