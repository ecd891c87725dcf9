// Package chain is the clients' access to a Solana cluster: sending and
// confirming transactions, and turning failures into errors that name the
// program error instead of a hex code.
package chain

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
)

// Client sends transactions to one cluster. It is safe for concurrent use.
type Client struct {
	RPC    *rpc.Client
	rpcURL string
	wsURL  string
	// Errors decodes custom program error codes; nil knows only Anchor's framework codes.
	Errors ErrorTable
	// ConfirmTimeout bounds the wait for one attempt's confirmation.
	ConfirmTimeout time.Duration
	// PollInterval is how often signature statuses are polled while confirming.
	PollInterval time.Duration
}

// New returns a client for the JSON-RPC endpoint rpcURL. wsURL may be empty:
// it then follows the Solana convention (same host, port + 1, ws scheme).
func New(rpcURL, wsURL string) (*Client, error) {
	u, err := url.Parse(rpcURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("RPC URL %q is not an http(s) URL", rpcURL)
	}
	if wsURL == "" {
		wsURL = DefaultWSURL(u)
	} else if w, err := url.Parse(wsURL); err != nil || (w.Scheme != "ws" && w.Scheme != "wss") || w.Host == "" {
		return nil, fmt.Errorf("websocket URL %q is not a ws(s) URL", wsURL)
	}
	return &Client{
		RPC:            rpc.New(rpcURL),
		rpcURL:         rpcURL,
		wsURL:          wsURL,
		ConfirmTimeout: 60 * time.Second,
		PollInterval:   250 * time.Millisecond,
	}, nil
}

// RPCURL and WSURL return the endpoints the client was made for.
func (c *Client) RPCURL() string { return c.rpcURL }
func (c *Client) WSURL() string  { return c.wsURL }

// DefaultWSURL derives the PubSub URL from an RPC URL the way the Solana CLI
// does: ws for http, wss for https, and port + 1 when a port is given.
func DefaultWSURL(u *url.URL) string {
	w := *u
	w.Scheme = "ws"
	if u.Scheme == "https" {
		w.Scheme = "wss"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			w.Host = u.Hostname() + ":" + strconv.Itoa(n+1)
		}
	}
	return w.String()
}

// Ping checks that the endpoint answers, with an error a user can act on.
func (c *Client) Ping(ctx context.Context) error {
	if _, err := c.RPC.GetVersion(ctx); err != nil {
		return fmt.Errorf("cannot reach the RPC endpoint %s: %w", c.rpcURL, err)
	}
	return nil
}

// Balance returns the lamports held by an account (0 if it does not exist).
func (c *Client) Balance(ctx context.Context, key solana.PublicKey) (uint64, error) {
	out, err := c.RPC.GetBalance(ctx, key, rpc.CommitmentConfirmed)
	if err != nil {
		return 0, fmt.Errorf("get balance of %s: %w", key, err)
	}
	return out.Value, nil
}

// AccountData returns an account's data and owner; ErrAccountNotFound if it does not exist.
func (c *Client) AccountData(ctx context.Context, key solana.PublicKey) ([]byte, solana.PublicKey, error) {
	out, err := c.RPC.GetAccountInfoWithOpts(ctx, key, &rpc.GetAccountInfoOpts{
		Encoding:   solana.EncodingBase64Zstd,
		Commitment: rpc.CommitmentConfirmed,
	})
	if errors.Is(err, rpc.ErrNotFound) || (err == nil && (out == nil || out.Value == nil)) {
		return nil, solana.PublicKey{}, fmt.Errorf("account %s: %w", key, ErrAccountNotFound)
	}
	if err != nil {
		return nil, solana.PublicKey{}, fmt.Errorf("get account %s: %w", key, err)
	}
	return out.Value.Data.GetBinary(), out.Value.Owner, nil
}

// ErrAccountNotFound is returned for accounts that do not exist on the cluster.
var ErrAccountNotFound = errors.New("account not found")

// Airdrop requests lamports from the cluster's faucet and waits for them.
func (c *Client) Airdrop(ctx context.Context, to solana.PublicKey, lamports uint64) (solana.Signature, error) {
	sig, err := c.RPC.RequestAirdrop(ctx, to, lamports, rpc.CommitmentConfirmed)
	if err != nil {
		return solana.Signature{}, fmt.Errorf("request airdrop from %s: %w", c.rpcURL, err)
	}
	return sig, c.Confirm(ctx, sig, 0)
}
