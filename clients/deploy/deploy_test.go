package deploy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
	"github.com/psyche-go/psyche/programs/toolchain/buildtest"
)

const sol = 1_000_000_000

// The SPL Memo program that litesvm bundles (loader v2: its account is the ELF).
var memoProgramID = solana.MustPublicKeyFromBase58("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")

// echoReturn is the conformance program's "echo_return" instruction.
func echoReturn(program solana.PublicKey, payload []byte) solana.Instruction {
	d := sha256.Sum256([]byte("global:echo_return"))
	return solana.NewInstruction(program, nil, append(d[:8:8], payload...))
}

// invoke sends one instruction paid by payer and returns its execution error
// (nil on success) and return data; failures land on chain (no preflight) so
// that their logs can be read.
func invoke(t *testing.T, ctx context.Context, client *rpc.Client, payer solana.PrivateKey, ix solana.Instruction) ([]byte, error) {
	t.Helper()
	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := solana.NewTransaction([]solana.Instruction{ix}, bh.Value.Blockhash, solana.TransactionPayer(payer.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Sign(func(solana.PublicKey) *solana.PrivateKey { return &payer }); err != nil {
		t.Fatal(err)
	}
	sig, err := client.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := client.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed})
		if err == nil && got != nil && got.Meta != nil {
			if got.Meta.Err != nil {
				return nil, errors.New(strings.Join(got.Meta.LogMessages, "\n"))
			}
			return got.Meta.ReturnData.Data.Content, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("transaction %s did not land", sig)
	return nil, nil
}

func TestProgramLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 100*sol)
	authority := localnettest.NewFundedKeypair(t, v, sol)
	d := deploy.New(v.RPCURL, payer)
	d.ConfirmTimeout = 20 * time.Second

	program, err := solana.NewRandomPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Deploy(ctx, program, authority, elf, deploy.DeployOptions{}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	id := program.PublicKey()
	info, err := d.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(info.Code, elf) || len(info.Code) != 2*len(elf) || info.Authority == nil || !info.Authority.Equals(authority.PublicKey()) {
		t.Fatalf("program data: %d code bytes (want %d, the ELF first), authority %v", len(info.Code), 2*len(elf), info.Authority)
	}
	// Deployed code runs from the next slot on.
	waitRuns(t, ctx, client, payer, echoReturn(id, []byte("ping")), []byte("ping"))

	// Upgrade to a different program (SPL Memo); only the authority may.
	memo, err := client.GetAccountInfo(ctx, memoProgramID)
	if err != nil {
		t.Fatal(err)
	}
	memoELF := memo.Value.Data.GetBinary()
	if err := d.Upgrade(ctx, id, payer, memoELF); err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("upgrade by a non-authority: err = %v, want a rejection", err)
	}
	if err := d.Upgrade(ctx, id, authority, memoELF); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	memoIx := solana.NewInstruction(id, nil, []byte("a memo"))
	waitRuns(t, ctx, client, payer, memoIx, nil)

	// Hand the authority over; the old one loses its rights.
	next := localnettest.NewFundedKeypair(t, v, sol)
	nextKey := next.PublicKey()
	if err := d.SetAuthority(ctx, id, authority, &nextKey); err != nil {
		t.Fatalf("set authority: %v", err)
	}
	if info, err := d.Info(ctx, id); err != nil || info.Authority == nil || !info.Authority.Equals(nextKey) {
		t.Fatalf("authority after set: %v, %v", info, err)
	}
	if _, err := d.Close(ctx, id, authority, payer.PublicKey()); err == nil {
		t.Fatal("the old authority closed the program")
	}

	// Close returns the program data's lamports to the recipient.
	recipient := solana.NewWallet().PublicKey()
	moved, err := d.Close(ctx, id, next, recipient)
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	bal, err := client.GetBalance(ctx, recipient, rpc.CommitmentConfirmed)
	if err != nil || moved == 0 || bal.Value != moved {
		t.Fatalf("recipient holds %v lamports (err %v), close reported %d", bal, err, moved)
	}
	if _, err := invoke(t, ctx, client, payer, memoIx); err == nil {
		t.Fatal("a closed program still runs")
	}
}

func TestImmutableProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	payer := localnettest.NewFundedKeypair(t, v, 100*sol)
	d := deploy.New(v.RPCURL, payer)
	program, _ := solana.NewRandomPrivateKey()
	if err := d.Deploy(ctx, program, payer, elf, deploy.DeployOptions{MaxDataLen: len(elf)}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if err := d.SetAuthority(ctx, program.PublicKey(), payer, nil); err != nil {
		t.Fatalf("make immutable: %v", err)
	}
	info, err := d.Info(ctx, program.PublicKey())
	if err != nil || info.Authority != nil {
		t.Fatalf("immutable program info %+v, %v", info, err)
	}
	if err := d.Upgrade(ctx, program.PublicKey(), payer, elf); err == nil {
		t.Fatal("upgraded an immutable program")
	}
}

func TestRejectsBadInput(t *testing.T) {
	// No transaction is sent for input that cannot be a deployment: the RPC
	// address is never contacted.
	d := deploy.New("http://127.0.0.1:1", solana.NewWallet().PrivateKey)
	ctx := context.Background()
	program, _ := solana.NewRandomPrivateKey()
	for name, elf := range map[string][]byte{"empty": nil, "text": []byte("#!/bin/sh\necho hi\n")} {
		if err := d.Deploy(ctx, program, d.Payer, elf, deploy.DeployOptions{}); err == nil || !strings.Contains(err.Error(), "not an ELF") {
			t.Errorf("%s: err = %v, want 'not an ELF'", name, err)
		}
	}
	elf := append([]byte("\x7fELF"), make([]byte, 100)...)
	if err := d.Deploy(ctx, program, d.Payer, elf, deploy.DeployOptions{MaxDataLen: 10}); err == nil || !strings.Contains(err.Error(), "smaller than the program") {
		t.Errorf("max data len below size: err = %v", err)
	}
}

// waitRuns invokes ix until it succeeds (a deployment takes effect in the next
// slot) and checks its return data.
func waitRuns(t *testing.T, ctx context.Context, client *rpc.Client, payer solana.PrivateKey, ix solana.Instruction, want []byte) {
	t.Helper()
	var last error
	for i := 0; i < 20; i++ {
		ret, err := invoke(t, ctx, client, payer, ix)
		if err == nil {
			if !bytes.Equal(ret, want) {
				t.Fatalf("return data %q, want %q", ret, want)
			}
			return
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("program never ran: %v", last)
}

// lossyRPC forwards JSON-RPC to target but silently drops every third
// sendTransaction, answering with the transaction's real signature as a
// cluster that lost it would: only re-sending makes a deployment complete.
type lossyRPC struct {
	target  string
	mu      sync.Mutex
	sends   int
	dropped int
}

func (p *lossyRPC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params []json.RawMessage
	}
	if json.Unmarshal(body, &req) == nil && req.Method == "sendTransaction" && len(req.Params) > 0 {
		p.mu.Lock()
		p.sends++
		drop := p.sends%3 == 0
		if drop {
			p.dropped++
		}
		p.mu.Unlock()
		var encoded string
		if drop && json.Unmarshal(req.Params[0], &encoded) == nil {
			if raw, err := base64.StdEncoding.DecodeString(encoded); err == nil && len(raw) > 65 {
				// Wire format: compact-u16 signature count (1 byte here), then signatures.
				sig := solana.SignatureFromBytes(raw[1:65])
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%q}`, req.ID, sig.String())
				return
			}
		}
	}
	resp, err := http.Post(p.target, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func TestDeployRetriesLostWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	proxy := &lossyRPC{target: v.RPCURL}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	payer := localnettest.NewFundedKeypair(t, v, 100*sol)
	d := deploy.New(srv.URL, payer)
	d.ConfirmTimeout = time.Second
	d.Attempts = 10
	program, _ := solana.NewRandomPrivateKey()
	if err := d.Deploy(ctx, program, payer, elf, deploy.DeployOptions{}); err != nil {
		t.Fatalf("deploy through a lossy RPC: %v", err)
	}
	proxy.mu.Lock()
	sends, dropped := proxy.sends, proxy.dropped
	proxy.mu.Unlock()
	if dropped == 0 {
		t.Fatalf("the proxy dropped nothing (%d sends); the test did not exercise retries", sends)
	}
	info, err := deploy.New(v.RPCURL, payer).Info(ctx, program.PublicKey())
	if err != nil || !bytes.HasPrefix(info.Code, elf) {
		t.Fatalf("deployed code differs from the ELF after %d lost sends (err %v)", dropped, err)
	}
	t.Logf("%d of %d transactions were lost and re-sent", dropped, sends)
}

func TestEnsure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 100*sol)
	d := deploy.New(v.RPCURL, payer)
	memo, err := client.GetAccountInfo(ctx, memoProgramID)
	if err != nil {
		t.Fatal(err)
	}
	small := memo.Value.Data.GetBinary()
	if len(small) >= len(elf) {
		t.Fatalf("the memo program (%d bytes) must be smaller than the conformance program (%d)", len(small), len(elf))
	}
	program, _ := solana.NewRandomPrivateKey()
	id := program.PublicKey()
	for _, step := range []struct {
		elf  []byte
		opts deploy.DeployOptions
		want deploy.Action
	}{
		{small, deploy.DeployOptions{MaxDataLen: len(small)}, deploy.Deployed},
		{small, deploy.DeployOptions{}, deploy.Unchanged},
		{elf, deploy.DeployOptions{}, deploy.Upgraded}, // larger: extends first
		{elf, deploy.DeployOptions{}, deploy.Unchanged},
	} {
		got, err := d.Ensure(ctx, program, payer, step.elf, step.opts)
		if err != nil {
			t.Fatalf("ensure (want %s): %v", step.want, err)
		}
		if got != step.want {
			t.Fatalf("ensure did %s, want %s", got, step.want)
		}
	}
	info, err := d.Info(ctx, id)
	if err != nil || len(info.Code) != len(elf) || !bytes.Equal(info.Code, elf) {
		t.Fatalf("program data after extend + upgrade: %d bytes (want exactly the %d-byte ELF), err %v", len(info.Code), len(elf), err)
	}
	waitRuns(t, ctx, client, payer, echoReturn(id, []byte("extended")), []byte("extended"))
	other := localnettest.NewFundedKeypair(t, v, sol)
	if _, err := d.Ensure(ctx, program, other, small, deploy.DeployOptions{}); err == nil || !strings.Contains(err.Error(), "may not upgrade") {
		t.Fatalf("ensure by a non-authority: %v", err)
	}
}
