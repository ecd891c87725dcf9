package localnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/ws"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wsClient(t *testing.T, ctx context.Context, v *localnet.Validator) *ws.Client {
	t.Helper()
	c, err := ws.Connect(ctx, v.WSURL)
	if err != nil {
		t.Fatalf("websocket connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// buildTx signs a transaction paid by payer with the latest blockhash.
func buildTx(t *testing.T, ctx context.Context, client *rpc.Client, payer solana.PrivateKey, signers []solana.PrivateKey, ixs ...solana.Instruction) *solana.Transaction {
	t.Helper()
	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatalf("getLatestBlockhash: %v", err)
	}
	return signTx(t, bh.Value.Blockhash, payer, signers, ixs...)
}

func signTx(t *testing.T, blockhash solana.Hash, payer solana.PrivateKey, signers []solana.PrivateKey, ixs ...solana.Instruction) *solana.Transaction {
	t.Helper()
	tx, err := solana.NewTransaction(ixs, blockhash, solana.TransactionPayer(payer.PublicKey()))
	if err != nil {
		t.Fatalf("new transaction: %v", err)
	}
	all := append([]solana.PrivateKey{payer}, signers...)
	if _, err := tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
		for i := range all {
			if all[i].PublicKey().Equals(k) {
				return &all[i]
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("sign: %v", err)
	}
	return tx
}

// send sends a transaction with preflight and waits for confirmation.
func send(t *testing.T, ctx context.Context, v *localnet.Validator, payer solana.PrivateKey, signers []solana.PrivateKey, ixs ...solana.Instruction) solana.Signature {
	t.Helper()
	client := localnettest.Client(v)
	tx := buildTx(t, ctx, client, payer, signers, ixs...)
	sig, err := client.SendTransaction(ctx, tx)
	if err != nil {
		t.Fatalf("sendTransaction: %v", err)
	}
	localnettest.WaitConfirmed(t, v, sig)
	return sig
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// post sends a raw HTTP body and returns the status and body.
func post(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp.StatusCode, out
}

// call makes one JSON-RPC call with raw params and decodes the envelope.
func call(t *testing.T, v *localnet.Validator, method string, params any) rpcResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	status, out := post(t, v.RPCURL, body)
	if status != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", method, status, out)
	}
	var r rpcResponse
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s: decode %s: %v", method, out, err)
	}
	return r
}

// logBuffer collects a server log written from exec's copying goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }
