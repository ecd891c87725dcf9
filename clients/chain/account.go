package chain

import (
	"context"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/ws"
)

// AccountUpdate is one version of an account: pushed by accountSubscribe or
// read once when the subscription starts.
type AccountUpdate struct {
	Slot     uint64
	Lamports uint64
	Owner    solana.PublicKey
	Data     []byte
}

// errAccountClosed reports a notification without an account value (the
// account was closed while subscribed).
var errAccountClosed = errors.New("the account was closed")

// SubscribeAccount calls fn with the account's current contents, then with
// every change pushed by the websocket endpoint, until ctx ends (nil) or the
// subscription fails (the error: the caller decides whether to reconnect,
// here or on another endpoint). The first call reads the account over
// JSON-RPC after subscribing, so no change between the two is missed.
func (c *Client) SubscribeAccount(ctx context.Context, key solana.PublicKey, fn func(AccountUpdate)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := ws.Connect(ctx, c.wsURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.wsURL, err)
	}
	defer conn.Close()
	// base64+zstd: the Coordinator account is mostly zeros, and every
	// notification carries all of it (wan-harness measured the plain stream
	// at most of a 10 Mbit/s link).
	sub, err := conn.AccountSubscribeWithOpts(key, rpc.CommitmentConfirmed, solana.EncodingBase64Zstd)
	if err != nil {
		return fmt.Errorf("subscribe to account %s at %s: %w", key, c.wsURL, err)
	}
	// No sub.Unsubscribe: in solana-go v1.14 it races with the connection's
	// reader (it marks the subscription closed and closes its channels while
	// the reader may be delivering). Closing the connection (deferred above)
	// ends the subscription on both sides.
	out, err := c.RPC.GetAccountInfoWithOpts(ctx, key, &rpc.GetAccountInfoOpts{
		Encoding:   solana.EncodingBase64Zstd,
		Commitment: rpc.CommitmentConfirmed,
	})
	switch {
	case errors.Is(err, rpc.ErrNotFound) || (err == nil && (out == nil || out.Value == nil)):
		return fmt.Errorf("account %s: %w", key, ErrAccountNotFound)
	case err != nil:
		return fmt.Errorf("get account %s: %w", key, err)
	}
	fn(AccountUpdate{Slot: out.Context.Slot, Lamports: out.Value.Lamports, Owner: out.Value.Owner, Data: out.Value.Data.GetBinary()})
	for {
		r, err := sub.Recv(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("account subscription at %s: %w", c.wsURL, err)
		}
		if r.Value == nil || r.Value.Data == nil {
			return fmt.Errorf("account %s: %w", key, errAccountClosed)
		}
		fn(AccountUpdate{Slot: r.Context.Slot, Lamports: r.Value.Lamports, Owner: r.Value.Owner, Data: r.Value.Data.GetBinary()})
	}
}
