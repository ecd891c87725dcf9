package localnet_test

import (
	"encoding/base64"
	"math/rand/v2"
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
