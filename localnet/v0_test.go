package localnet_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func TestVersionedTransactionWithLookupTable(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	// Create a lookup table (keyed by a recent slot, which the program checks
	// against the SlotHashes sysvar) and extend it with the recipient.
	slot, err := client.GetSlot(ctx, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	slotLE := binary.LittleEndian.AppendUint64(nil, slot)
	table, bump, err := solana.FindProgramAddress([][]byte{payer.PublicKey().Bytes(), slotLE}, solana.AddressLookupTableProgramID)
	if err != nil {
		t.Fatal(err)
	}
	altAccounts := func() []*solana.AccountMeta {
		return []*solana.AccountMeta{solana.Meta(table).WRITE(), solana.Meta(payer.PublicKey()).SIGNER(),
			solana.Meta(payer.PublicKey()).WRITE().SIGNER(), solana.Meta(solana.SystemProgramID)}
	}
	create := append(binary.LittleEndian.AppendUint32(nil, 0), append(slotLE, bump)...)
	extend := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, 2), 1)
	send(t, ctx, v, payer, nil,
		solana.NewInstruction(solana.AddressLookupTableProgramID, altAccounts(), create),
		solana.NewInstruction(solana.AddressLookupTableProgramID, altAccounts(), append(extend, to.Bytes()...)),
	)
	nextSlot(t, ctx, client) // extended addresses are usable from the next slot

	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := solana.NewTransaction([]solana.Instruction{system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build()},
		bh.Value.Blockhash, solana.TransactionPayer(payer.PublicKey()),
		solana.TransactionAddressTables(map[solana.PublicKey]solana.PublicKeySlice{table: {to}}))
	if err != nil {
		t.Fatal(err)
	}
	if !tx.Message.IsVersioned() {
		t.Fatal("solana-go built a legacy message")
	}
	if _, err := tx.Sign(func(solana.PublicKey) *solana.PrivateKey { return &payer }); err != nil {
		t.Fatal(err)
	}
	sig, err := client.SendTransaction(ctx, tx)
	if err != nil {
		t.Fatalf("send v0: %v", err)
	}
	localnettest.WaitConfirmed(t, v, sig)
	if got := balance(t, v, to); got != 1_000_000 {
		t.Fatalf("recipient balance = %d", got)
	}

	_, err = client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{})
	var rpcErr *jsonrpc.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32015 {
		t.Fatalf("getTransaction(v0) without maxSupportedTransactionVersion: %v", err)
	}
	maxVersion := uint64(0)
	got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{MaxSupportedTransactionVersion: &maxVersion})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 0 || len(got.Meta.LoadedAddresses.Writable) != 1 || !got.Meta.LoadedAddresses.Writable[0].Equals(to) {
		t.Fatalf("version=%v loaded=%+v", got.Version, got.Meta.LoadedAddresses)
	}
	// Balances cover static then loaded keys: the recipient is last.
	if n := len(got.Meta.PostBalances); n != 3 || got.Meta.PostBalances[n-1] != 1_000_000 {
		t.Fatalf("post balances = %v", got.Meta.PostBalances)
	}
}

func TestSendBase58AndAccountEncodings(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	tx := buildTx(t, ctx, client, payer, nil, system.NewTransferInstruction(2_000_000, payer.PublicKey(), to).Build())
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, v, "sendTransaction", []any{solana.Base58(raw).String()}) // base58 is the default encoding
	if r.Error != nil {
		t.Fatalf("sendTransaction base58: %+v", r.Error)
	}
	localnettest.WaitConfirmed(t, v, tx.Signatures[0])

	// The same account in every encoding decodes to the same bytes.
	want, err := client.GetAccountInfoWithOpts(ctx, solana.TokenProgramID, &rpc.GetAccountInfoOpts{Encoding: solana.EncodingBase64})
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []solana.EncodingType{solana.EncodingBase58, solana.EncodingBase64Zstd, solana.EncodingJSONParsed} {
		got, err := client.GetAccountInfoWithOpts(ctx, solana.TokenProgramID, &rpc.GetAccountInfoOpts{Encoding: enc})
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if !bytes.Equal(got.Value.Data.GetBinary(), want.Value.Data.GetBinary()) {
			t.Errorf("%s: data differs from base64", enc)
		}
	}
	// rentEpoch (u64) and lamports arrive as exact JSON integers.
	r = call(t, v, "getAccountInfo", []any{to.String(), map[string]any{"encoding": "base64"}})
	var acct struct {
		Value struct {
			Lamports  json.Number `json:"lamports"`
			RentEpoch json.Number `json:"rentEpoch"`
		} `json:"value"`
	}
	if err := json.Unmarshal(r.Result, &acct); err != nil || acct.Value.Lamports != "2000000" {
		t.Fatalf("account = %s, %v", r.Result, err)
	}
	if _, err := acct.Value.RentEpoch.Int64(); err != nil && acct.Value.RentEpoch != "18446744073709551615" {
		t.Fatalf("rentEpoch = %s", acct.Value.RentEpoch)
	}
}
