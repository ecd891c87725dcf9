package localnet_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	bin "github.com/gagliardetto/binary"
	"github.com/gagliardetto/solana-go"
	associatedtokenaccount "github.com/gagliardetto/solana-go/programs/associated-token-account"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"
	confirm "github.com/gagliardetto/solana-go/rpc/sendAndConfirmTransaction"
	"github.com/gorilla/websocket"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

const fee = 5000 // lamports per signature

func TestTransferConfirmedBySignatureSubscribe(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 2*solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	tx := buildTx(t, ctx, client, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build())
	sig, err := confirm.SendAndConfirmTransaction(ctx, client, wsClient(t, ctx, v), tx)
	if err != nil {
		t.Fatalf("send and confirm: %v", err)
	}

	bal, err := client.GetBalance(ctx, to, rpc.CommitmentFinalized)
	if err != nil || bal.Value != 1_000_000 {
		t.Fatalf("recipient balance = %v, %v; want 1000000", bal, err)
	}
	bal, err = client.GetBalance(ctx, payer.PublicKey(), rpc.CommitmentProcessed)
	if want := 2*solana.LAMPORTS_PER_SOL - 1_000_000 - fee; err != nil || bal.Value != want {
		t.Fatalf("payer balance = %v, %v; want %d", bal, err, want)
	}

	maxVersion := uint64(0)
	got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Encoding: solana.EncodingBase64, MaxSupportedTransactionVersion: &maxVersion})
	if err != nil {
		t.Fatalf("getTransaction: %v", err)
	}
	if got.Meta.Fee != fee || got.Meta.Err != nil {
		t.Errorf("meta fee=%d err=%v; want %d, nil", got.Meta.Fee, got.Meta.Err, fee)
	}
	if len(got.Meta.PreBalances) != 3 || got.Meta.PreBalances[0]-got.Meta.PostBalances[0] != 1_000_000+fee ||
		got.Meta.PostBalances[1] != 1_000_000 {
		t.Errorf("balances pre=%v post=%v", got.Meta.PreBalances, got.Meta.PostBalances)
	}
	if len(got.Meta.LogMessages) == 0 || !strings.Contains(got.Meta.LogMessages[0], "11111111111111111111111111111111 invoke [1]") {
		t.Errorf("logs = %q", got.Meta.LogMessages)
	}
	decoded, err := got.Transaction.GetTransaction()
	if err != nil || !decoded.Signatures[0].Equals(sig) {
		t.Errorf("transaction bytes decode to %v, %v", decoded, err)
	}
	if got.BlockTime == nil || time.Since(got.BlockTime.Time()) > time.Minute {
		t.Errorf("blockTime = %v", got.BlockTime)
	}

	sigs, err := client.GetSignaturesForAddress(ctx, to)
	if err != nil || len(sigs) != 1 || !sigs[0].Signature.Equals(sig) {
		t.Fatalf("getSignaturesForAddress = %v, %v", sigs, err)
	}
	st, err := client.GetSignatureStatuses(ctx, true, sig, solana.Signature{1})
	if err != nil || st.Value[0] == nil || st.Value[0].ConfirmationStatus != rpc.ConfirmationStatusFinalized || st.Value[1] != nil {
		t.Fatalf("getSignatureStatuses = %+v, %v", st, err)
	}

	// The same transaction again is a duplicate: preflight says so.
	if _, err := client.SendTransaction(ctx, tx); err == nil || !strings.Contains(err.Error(), "already been processed") {
		t.Fatalf("duplicate send: err = %v", err)
	}
	// Subscribing after the fact notifies at once.
	sub, err := wsClient(t, ctx, v).SignatureSubscribe(sig, rpc.CommitmentFinalized)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-sub.Response():
		if r.Value.Err != nil {
			t.Fatalf("late signature notification err = %v", r.Value.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification for an already processed signature")
	}
}

func TestAccountAndLogsSubscriptions(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()
	wsc := wsClient(t, ctx, v)

	accSub, err := wsc.AccountSubscribeWithOpts(to, rpc.CommitmentConfirmed, solana.EncodingBase64)
	if err != nil {
		t.Fatal(err)
	}
	logSub, err := wsc.LogsSubscribeMentions(to, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	slotSub, err := wsc.SlotSubscribe()
	if err != nil {
		t.Fatal(err)
	}
	sig := send(t, ctx, v, payer, nil, system.NewTransferInstruction(5_000_000, payer.PublicKey(), to).Build())

	select {
	case r := <-accSub.Response():
		if r.Value.Lamports != 5_000_000 || !r.Value.Owner.Equals(solana.SystemProgramID) {
			t.Fatalf("account notification = %+v", r.Value)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no account notification")
	}
	select {
	case r := <-logSub.Response():
		if !r.Value.Signature.Equals(sig) || r.Value.Err != nil || len(r.Value.Logs) == 0 {
			t.Fatalf("logs notification = %+v", r.Value)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no logs notification")
	}
	select {
	case r := <-slotSub.Response():
		if r.Slot == 0 || r.Parent != r.Slot-1 {
			t.Fatalf("slot notification = %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no slot notification")
	}
	accSub.Unsubscribe()
	logSub.Unsubscribe()
	slotSub.Unsubscribe()
}

// Subscribers of one account with different encodings each get their own
// (the server encodes each variant once per change).
func TestAccountSubscribersGetTheirEncoding(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	conn, read := rawWS(t, v)
	cfgs := []string{`{"encoding":"base64"}`, `{"encoding":"base64+zstd"}`, `{"encoding":"base64","dataSlice":{"offset":0,"length":0}}`, `{"encoding":"base64+zstd"}`}
	want := map[string]string{} // subscription id -> encoding
	for i, c := range cfgs {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"accountSubscribe","params":["%s",%s]}`, i+1, payer.PublicKey(), c)
		if err := conn.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
			t.Fatal(err)
		}
		m := read()
		want[string(m["result"])] = []string{"base64", "base64+zstd", "base64", "base64+zstd"}[i]
	}
	if len(want) != len(cfgs) {
		t.Fatalf("subscription ids %v are not distinct", want)
	}
	send(t, ctx, v, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
	for range cfgs {
		var n struct {
			Params struct {
				Subscription json.RawMessage
				Result       struct {
					Value struct {
						Data     []string
						Lamports uint64
					}
				}
			}
		}
		m := read()
		raw, _ := json.Marshal(m)
		if err := json.Unmarshal(raw, &n); err != nil || len(n.Params.Result.Value.Data) != 2 {
			t.Fatalf("notification %s: %v", raw, err)
		}
		d := n.Params.Result.Value.Data
		if _, err := base64.StdEncoding.DecodeString(d[0]); err != nil {
			t.Fatal(err)
		}
		got, id := d[1], string(n.Params.Subscription)
		if want[id] != got || n.Params.Result.Value.Lamports >= solana.LAMPORTS_PER_SOL {
			t.Fatalf("subscription %s got %s (lamports %d), want %s", id, got, n.Params.Result.Value.Lamports, want[id])
		}
		delete(want, id)
	}
}

func TestSPLTokenMint(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	mint := solana.NewWallet().PrivateKey
	owner := solana.NewWallet().PublicKey()

	rent, err := client.GetMinimumBalanceForRentExemption(ctx, 82, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, v, payer, []solana.PrivateKey{mint},
		system.NewCreateAccountInstruction(rent, 82, solana.TokenProgramID, payer.PublicKey(), mint.PublicKey()).Build(),
		token.NewInitializeMint2Instruction(6, payer.PublicKey(), payer.PublicKey(), mint.PublicKey()).Build(),
	)
	ata, _, err := solana.FindAssociatedTokenAddress(owner, mint.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	sig := send(t, ctx, v, payer, nil,
		associatedtokenaccount.NewCreateInstruction(payer.PublicKey(), owner, mint.PublicKey()).Build(),
		token.NewMintToInstruction(1_234_500_000, mint.PublicKey(), ata, payer.PublicKey(), nil).Build(),
	)

	bal, err := client.GetTokenAccountBalance(ctx, ata, rpc.CommitmentConfirmed)
	if err != nil || bal.Value.Amount != "1234500000" || bal.Value.Decimals != 6 || bal.Value.UiAmountString != "1234.5" {
		t.Fatalf("getTokenAccountBalance = %+v, %v", bal, err)
	}
	supply, err := client.GetTokenSupply(ctx, mint.PublicKey(), rpc.CommitmentConfirmed)
	if err != nil || supply.Value.Amount != "1234500000" {
		t.Fatalf("getTokenSupply = %+v, %v", supply, err)
	}
	byOwner, err := client.GetTokenAccountsByOwner(ctx, owner, &rpc.GetTokenAccountsConfig{Mint: ptr(mint.PublicKey())},
		&rpc.GetTokenAccountsOpts{Encoding: solana.EncodingBase64})
	if err != nil || len(byOwner.Value) != 1 || !byOwner.Value[0].Pubkey.Equals(ata) {
		t.Fatalf("getTokenAccountsByOwner = %+v, %v", byOwner, err)
	}
	var acct token.Account
	if err := acct.UnmarshalWithDecoder(bin.NewBinDecoder(byOwner.Value[0].Account.Data.GetBinary())); err != nil || acct.Amount != 1_234_500_000 || !acct.Owner.Equals(owner) {
		t.Fatalf("decoded token account = %+v, %v", acct, err)
	}

	parsed, err := client.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{Encoding: solana.EncodingJSONParsed})
	if err != nil {
		t.Fatal(err)
	}
	if raw := string(parsed.Value.Data.GetRawJSON()); !strings.Contains(raw, `"uiAmountString":"1234.5"`) || !strings.Contains(raw, `"type":"account"`) {
		t.Fatalf("jsonParsed token account = %s", raw)
	}

	maxVersion := uint64(0)
	got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{MaxSupportedTransactionVersion: &maxVersion})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Meta.PostTokenBalances) != 1 || got.Meta.PostTokenBalances[0].UiTokenAmount.Amount != "1234500000" ||
		!got.Meta.PostTokenBalances[0].Mint.Equals(mint.PublicKey()) || len(got.Meta.InnerInstructions) == 0 {
		t.Fatalf("token meta: post=%+v inner=%d", got.Meta.PostTokenBalances, len(got.Meta.InnerInstructions))
	}
}

func TestGetProgramAccountsFilters(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	program := solana.NewWallet().PublicKey() // owner of plain data accounts
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, 48, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	var keys []solana.PrivateKey
	var ixs []solana.Instruction
	for _, size := range []uint64{16, 48, 48} {
		k := solana.NewWallet().PrivateKey
		keys = append(keys, k)
		ixs = append(ixs, system.NewCreateAccountInstruction(rent, size, program, payer.PublicKey(), k.PublicKey()).Build())
	}
	send(t, ctx, v, payer, keys, ixs...)

	tests := []struct {
		name    string
		filters []rpc.RPCFilter
		want    int
	}{
		{"no filter", nil, 3},
		{"dataSize 48", []rpc.RPCFilter{{DataSize: 48}}, 2},
		{"dataSize 16", []rpc.RPCFilter{{DataSize: 16}}, 1},
		{"memcmp zeros", []rpc.RPCFilter{{Memcmp: &rpc.RPCFilterMemcmp{Offset: 8, Bytes: solana.Base58{0, 0, 0, 0}}}}, 3},
		{"memcmp nonzero", []rpc.RPCFilter{{Memcmp: &rpc.RPCFilterMemcmp{Offset: 0, Bytes: solana.Base58{1}}}}, 0},
		{"memcmp past end", []rpc.RPCFilter{{DataSize: 16}, {Memcmp: &rpc.RPCFilterMemcmp{Offset: 40, Bytes: solana.Base58{0}}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := client.GetProgramAccountsWithOpts(ctx, program, &rpc.GetProgramAccountsOpts{
				Encoding: solana.EncodingBase64, Filters: tc.filters,
				DataSlice: &rpc.DataSlice{Offset: ptr(uint64(0)), Length: ptr(uint64(4))},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tc.want {
				t.Fatalf("got %d accounts, want %d", len(out), tc.want)
			}
			for _, a := range out {
				if n := len(a.Account.Data.GetBinary()); n != 4 {
					t.Errorf("dataSlice: %d bytes, want 4", n)
				}
			}
		})
	}
}

func TestSimulateTransaction(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	ok := buildTx(t, ctx, client, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build())
	sim, err := client.SimulateTransactionWithOpts(ctx, ok, &rpc.SimulateTransactionOpts{
		SigVerify: true, Accounts: &rpc.SimulateTransactionAccountsOpts{Encoding: solana.EncodingBase64, Addresses: []solana.PublicKey{to}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sim.Value.Err != nil || len(sim.Value.Logs) == 0 || sim.Value.UnitsConsumed == nil || *sim.Value.UnitsConsumed == 0 ||
		len(sim.Value.Accounts) != 1 || sim.Value.Accounts[0].Lamports != 1_000_000 {
		t.Fatalf("simulation = %+v", sim.Value)
	}
	if bal, _ := client.GetBalance(ctx, to, rpc.CommitmentConfirmed); bal.Value != 0 {
		t.Fatalf("simulation changed state: balance %d", bal.Value)
	}

	tooMuch := buildTx(t, ctx, client, payer, nil, system.NewTransferInstruction(10*solana.LAMPORTS_PER_SOL, payer.PublicKey(), to).Build())
	sim, err = client.SimulateTransaction(ctx, tooMuch)
	if err != nil || sim.Value.Err == nil || !strings.Contains(fmt.Sprint(sim.Value.Err), "InstructionError") {
		t.Fatalf("failing simulation = %+v, %v", sim, err)
	}
	// Preflight rejects it with -32002, the error and the logs.
	_, err = client.SendTransaction(ctx, tooMuch)
	var rpcErr *jsonrpc.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32002 {
		t.Fatalf("preflight failure = %v", err)
	}
	if data, _ := json.Marshal(rpcErr.Data); !strings.Contains(string(data), "InstructionError") || !strings.Contains(string(data), "Program 11111111111111111111111111111111 invoke") {
		t.Fatalf("preflight failure data = %s", data)
	}
	// Without preflight it lands as failed and the fee is charged.
	sig, err := client.SendTransactionWithOpts(ctx, tooMuch, rpc.TransactionOpts{SkipPreflight: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := client.GetSignatureStatuses(ctx, false, sig)
	if err != nil || st.Value[0] == nil || st.Value[0].Err == nil {
		t.Fatalf("failed transaction status = %+v, %v", st, err)
	}
	if bal, _ := client.GetBalance(ctx, payer.PublicKey(), rpc.CommitmentConfirmed); bal.Value != solana.LAMPORTS_PER_SOL-fee {
		t.Fatalf("payer balance after failed tx = %d", bal.Value)
	}

	// A stale blockhash is replaced on request.
	stale := signTx(t, solana.Hash{7}, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), to).Build())
	sim, err = client.SimulateTransactionWithOpts(ctx, stale, &rpc.SimulateTransactionOpts{ReplaceRecentBlockhash: true})
	if err != nil || sim.Value.Err != nil {
		t.Fatalf("replaceRecentBlockhash simulation = %+v, %v", sim, err)
	}
	sim, err = client.SimulateTransaction(ctx, stale)
	if err != nil || fmt.Sprint(sim.Value.Err) != "BlockhashNotFound" {
		t.Fatalf("stale simulation = %+v, %v", sim, err)
	}
}

func TestMalformedRequests(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	huge := `{"jsonrpc":"2.0","id":1,"method":"getHealth","params":["` + strings.Repeat("x", 60_000) + `"]}`
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   int
	}{
		{"malformed JSON", `{"jsonrpc":"2.0",`, http.StatusOK, -32700},
		{"not an object", `42`, http.StatusOK, -32600},
		{"no jsonrpc version", `{"id":1,"method":"getSlot"}`, http.StatusOK, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"getWhatever"}`, http.StatusOK, -32601},
		{"pubkey of wrong type", `{"jsonrpc":"2.0","id":1,"method":"getBalance","params":[123]}`, http.StatusOK, -32602},
		{"invalid pubkey", `{"jsonrpc":"2.0","id":1,"method":"getBalance","params":["not-a-key"]}`, http.StatusOK, -32602},
		{"params not an array", `{"jsonrpc":"2.0","id":1,"method":"getBalance","params":{"a":1}}`, http.StatusOK, -32602},
		{"negative lamports", `{"jsonrpc":"2.0","id":1,"method":"requestAirdrop","params":["11111111111111111111111111111111",-1]}`, http.StatusOK, -32602},
		{"lamports above u64", `{"jsonrpc":"2.0","id":1,"method":"requestAirdrop","params":["11111111111111111111111111111111",18446744073709551616]}`, http.StatusOK, -32602},
		{"garbage transaction", `{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["AAAA",{"encoding":"base64"}]}`, http.StatusOK, -32602},
		{"bad base64", `{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["!!!!",{"encoding":"base64"}]}`, http.StatusOK, -32602},
		{"unknown encoding", `{"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":["11111111111111111111111111111111",{"encoding":"hex"}]}`, http.StatusOK, -32602},
		{"bad commitment", `{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"soon"}]}`, http.StatusOK, -32602},
		{"too many signatures", `{"jsonrpc":"2.0","id":1,"method":"getSignatureStatuses","params":[[` + strings.Repeat(`"1",`, 256) + `"1"]]}`, http.StatusOK, -32602},
		{"empty batch", `[]`, http.StatusOK, -32600},
		{"oversized body", huge, http.StatusRequestEntityTooLarge, -32600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, v.RPCURL, []byte(tc.body))
			if status != tc.wantStatus {
				t.Fatalf("HTTP %d, want %d: %s", status, tc.wantStatus, out)
			}
			var r rpcResponse
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("response is not JSON-RPC: %s", out)
			}
			if r.Error == nil || r.Error.Code != tc.wantCode {
				t.Fatalf("got %s, want error %d", out, tc.wantCode)
			}
		})
	}
	// A batch answers each member, and the server still serves afterwards.
	status, out := post(t, v.RPCURL, []byte(`[{"jsonrpc":"2.0","id":1,"method":"getHealth"},{"jsonrpc":"2.0","id":2,"method":"nope"},{"jsonrpc":"2.0","id":3,"method":"getSlot"}]`))
	var batch []rpcResponse
	if err := json.Unmarshal(out, &batch); status != 200 || err != nil || len(batch) != 3 ||
		string(batch[0].Result) != `"ok"` || batch[1].Error == nil || batch[1].Error.Code != -32601 || batch[2].Error != nil {
		t.Fatalf("batch: HTTP %d %s", status, out)
	}
	if r := call(t, v, "getHealth", nil); string(r.Result) != `"ok"` {
		t.Fatalf("getHealth after bad input = %s", r.Result)
	}
}

func TestWebsocket63BitIDs(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	conn, read := rawWS(t, v)
	const id = "9007199254740993123" // > 2^53: a float64 would round it
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"rootSubscribe"}`)); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	for m = read(); m["id"] == nil; m = read() { // skip notifications
	}
	if string(m["id"]) != id {
		t.Fatalf("id echoed as %s, want %s", m["id"], id)
	}
	subID := string(m["result"])
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":18446744073709551615,"method":"rootUnsubscribe","params":[`+subID+`]}`)); err != nil {
		t.Fatal(err)
	}
	for m = read(); m["id"] == nil; m = read() {
	}
	if string(m["id"]) != "18446744073709551615" || string(m["result"]) != "true" {
		t.Fatalf("unsubscribe answer = %v", m)
	}
	// Malformed input on the socket gets an error and the socket stays usable.
	conn.WriteMessage(websocket.TextMessage, []byte(`{nope`))
	if m = read(); !bytes.Contains(m["error"], []byte("-32700")) {
		t.Fatalf("parse error answer = %v", m)
	}
	conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":5,"method":"accountSubscribe","params":["bad"]}`))
	if m = read(); !bytes.Contains(m["error"], []byte("-32602")) {
		t.Fatalf("bad param answer = %v", m)
	}
}

func TestU64Serialization(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	// Airdrop an amount above 2^53 and read it back exactly.
	const amount = "9007199254740993"
	r := call(t, v, "requestAirdrop", []json.RawMessage{json.RawMessage(`"` + solana.NewWallet().PublicKey().String() + `"`), json.RawMessage(amount)})
	if r.Error != nil {
		t.Fatalf("airdrop: %+v", r.Error)
	}
	var sig solana.Signature
	if err := json.Unmarshal(r.Result, &sig); err != nil {
		t.Fatal(err)
	}
	localnettest.WaitConfirmed(t, v, sig)
	maxVersion := uint64(0)
	got, err := localnettest.Client(v).GetTransaction(testContext(t), sig, &rpc.GetTransactionOpts{MaxSupportedTransactionVersion: &maxVersion})
	if err != nil || got.Meta.PostBalances[1] != 9007199254740993 {
		t.Fatalf("post balance = %v, %v", got, err)
	}
}

func ptr[T any](v T) *T { return &v }

// With a compute-unit price and no compute-unit limit, the fee getTransaction
// reports and getFeeForMessage quotes are what the payer is charged: the
// default limit counts the ComputeBudget instruction itself as a builtin
// (3,000 units), as Agave does, so a transfer plus a price of 1 lamport per
// unit costs 5,000 + 6,000 lamports.
func TestPriorityFeeWithoutLimitIsWhatIsCharged(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	price := solana.NewInstruction(solana.MustPublicKeyFromBase58("ComputeBudget111111111111111111111111111111"), nil,
		binary.LittleEndian.AppendUint64([]byte{3}, 1_000_000)) // SetComputeUnitPrice: 1e6 micro-lamports
	tx := buildTx(t, ctx, client, payer, nil, price, system.NewTransferInstruction(1_000_000, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
	msg, err := tx.Message.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	quote, err := client.GetFeeForMessage(ctx, base64.StdEncoding.EncodeToString(msg), rpc.CommitmentProcessed)
	if err != nil || quote.Value == nil {
		t.Fatalf("getFeeForMessage: %+v, %v", quote, err)
	}
	sig, err := confirm.SendAndConfirmTransaction(ctx, client, wsClient(t, ctx, v), tx)
	if err != nil {
		t.Fatal(err)
	}
	bal, err := client.GetBalance(ctx, payer.PublicKey(), rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	charged := solana.LAMPORTS_PER_SOL - 1_000_000 - bal.Value
	maxVersion := uint64(0)
	got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Encoding: solana.EncodingBase64, MaxSupportedTransactionVersion: &maxVersion})
	if err != nil {
		t.Fatal(err)
	}
	if charged != 11_000 || got.Meta.Fee != charged || *quote.Value != charged {
		t.Errorf("charged %d, meta.fee %d, getFeeForMessage %d; want all 11000", charged, got.Meta.Fee, *quote.Value)
	}
}

// getRecentPrioritizationFees answers from the transactions sent: per slot
// of the last 150, the lowest compute-unit price, raised to the lowest
// price among those writing each given account; bad params are refused.
func TestRecentPrioritizationFees(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	fees := func(params any) []rpc.PriorizationFeeResult {
		t.Helper()
		r := call(t, v, "getRecentPrioritizationFees", params)
		var out []rpc.PriorizationFeeResult
		if r.Error != nil || json.Unmarshal(r.Result, &out) != nil {
			t.Fatalf("getRecentPrioritizationFees(%v): %s %+v", params, r.Result, r.Error)
		}
		return out
	}
	if got := fees([]any{}); len(got) == 0 || got[len(got)-1].PrioritizationFee != 0 {
		t.Fatalf("before any priced transaction: %+v, want recent slots at fee 0", got)
	}
	cheap, dear := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL), localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	send := func(payer solana.PrivateKey, price uint64) uint64 {
		t.Helper()
		ix := solana.NewInstruction(solana.MustPublicKeyFromBase58("ComputeBudget111111111111111111111111111111"), nil,
			binary.LittleEndian.AppendUint64([]byte{3}, price))
		tx := buildTx(t, ctx, client, payer, nil, ix, system.NewTransferInstruction(1_000_000, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
		sig, err := client.SendTransaction(ctx, tx)
		if err != nil {
			t.Fatal(err)
		}
		maxVersion := uint64(0)
		for range 100 {
			got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Encoding: solana.EncodingBase64, MaxSupportedTransactionVersion: &maxVersion, Commitment: rpc.CommitmentConfirmed})
			if err == nil && got != nil {
				return got.Slot
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("transaction %s not found", sig)
		return 0
	}
	// The airdrops are free transactions: send the priced ones in a later
	// slot, both in one where possible, and check each at its own slot.
	funded, err := client.GetSlot(ctx, rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	for s := funded; s <= funded; time.Sleep(20 * time.Millisecond) {
		if s, err = client.GetSlot(ctx, rpc.CommitmentProcessed); err != nil {
			t.Fatal(err)
		}
	}
	cheapSlot, dearSlot := send(cheap, 100), send(dear, 5_000)
	at := func(list []rpc.PriorizationFeeResult, slot uint64) uint64 {
		t.Helper()
		for _, f := range list {
			if f.Slot == slot {
				return f.PrioritizationFee
			}
		}
		t.Fatalf("slot %d not in %+v", slot, list)
		return 0
	}
	all := fees([]any{})
	if len(all) > 150 {
		t.Errorf("%d slots, want at most 150", len(all))
	}
	minDear := uint64(5_000)
	if cheapSlot == dearSlot {
		minDear = 100
	}
	if got := at(all, cheapSlot); got != 100 {
		t.Errorf("no accounts, slot of the 100 transaction: %d", got)
	}
	if got := at(all, dearSlot); got != minDear {
		t.Errorf("no accounts, slot of the 5000 transaction: %d, want %d", got, minDear)
	}
	if got := at(fees([]any{[]string{dear.PublicKey().String()}}), dearSlot); got != 5_000 {
		t.Errorf("the dear payer's account: %d, want 5000", got)
	}
	if got := at(fees([]any{[]string{cheap.PublicKey().String(), solana.NewWallet().PublicKey().String()}}), cheapSlot); got != 100 {
		t.Errorf("the cheap payer's account and an idle one: %d, want 100", got)
	}
	many := make([]string, 129)
	for i := range many {
		many[i] = solana.NewWallet().PublicKey().String()
	}
	for _, bad := range []any{[]any{"nope"}, []any{[]string{"nope"}}, []any{many}, []any{[]string{}, 1}} {
		if r := call(t, v, "getRecentPrioritizationFees", bad); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("params %.60v: %s %+v, want -32602", bad, r.Result, r.Error)
		}
	}
}

// base64+zstd (RLE blocks for runs, as account data is mostly zeros) decodes
// with a real zstd decoder (solana-go's) to the same bytes as base64: for a
// created account longer than a zstd block and for SlotHashes (entries,
// then zeros).
func TestAccountEncodingZstd(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	big := solana.NewWallet().PrivateKey
	const size = 300_000
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, size, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, v, payer, []solana.PrivateKey{big},
		system.NewCreateAccountInstruction(rent, size, solana.SystemProgramID, payer.PublicKey(), big.PublicKey()).Build())
	for _, key := range []solana.PublicKey{big.PublicKey(), solana.SysVarSlotHashesPubkey} {
		get := func(enc solana.EncodingType) []byte {
			out, err := client.GetAccountInfoWithOpts(ctx, key, &rpc.GetAccountInfoOpts{Encoding: enc, Commitment: rpc.CommitmentConfirmed})
			if err != nil {
				t.Fatalf("%s %s: %v", key, enc, err)
			}
			return out.Value.Data.GetBinary()
		}
		plain, packed := get(solana.EncodingBase64), get(solana.EncodingBase64Zstd)
		if len(plain) == 0 || !bytes.Equal(plain, packed) {
			t.Errorf("%s: base64+zstd gives %d bytes, base64 %d, equal %v", key, len(packed), len(plain), bytes.Equal(plain, packed))
		}
	}
}

// rawWS is a plain websocket to v's PubSub endpoint, closed with the test,
// and a reader of its next JSON message (10 s at most).
func rawWS(t *testing.T, v *localnet.Validator) (*websocket.Conn, func() map[string]json.RawMessage) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(v.WSURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, func() map[string]json.RawMessage {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		return m
	}
}
