package chain

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/ws"
)

// LogEntry is one transaction's logs, as pushed by logsSubscribe.
type LogEntry struct {
	Slot      uint64
	Signature solana.Signature
	Err       any // nil when the transaction succeeded
	Logs      []string
}

// recentSignatures bounds the memory used to drop a transaction reported by
// several subscriptions (it mentions several of the followed programs).
const recentSignatures = 4096

// FollowLogs calls fn for every transaction that mentions one of programs,
// once each, until ctx ends. It reconnects when the websocket drops, with a
// growing pause; log lines are lost only while disconnected.
func (c *Client) FollowLogs(ctx context.Context, programs []solana.PublicKey, log *slog.Logger, fn func(LogEntry)) error {
	if len(programs) == 0 {
		return fmt.Errorf("follow logs: no program to follow")
	}
	seen := make(map[solana.Signature]bool)
	var order []solana.Signature
	deliver := func(e LogEntry) {
		if seen[e.Signature] {
			return
		}
		seen[e.Signature] = true
		order = append(order, e.Signature)
		if len(order) > recentSignatures {
			delete(seen, order[0])
			order = order[1:]
		}
		fn(e)
	}
	pause := 250 * time.Millisecond
	for {
		err := c.followOnce(ctx, programs, deliver)
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("log subscription dropped; reconnecting", "ws", c.wsURL, "err", err, "in", pause)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Second)
	}
}

func (c *Client) followOnce(ctx context.Context, programs []solana.PublicKey, deliver func(LogEntry)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := ws.Connect(ctx, c.wsURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.wsURL, err)
	}
	defer conn.Close()
	entries := make(chan LogEntry)
	errs := make(chan error, len(programs))
	for _, p := range programs {
		sub, err := conn.LogsSubscribeMentions(p, rpc.CommitmentConfirmed)
		if err != nil {
			return fmt.Errorf("subscribe to logs of %s: %w", p, err)
		}
		// Not sub.Unsubscribe (it races in solana-go v1.14; account.go):
		// closing the connection ends the subscriptions.
		go func() {
			for {
				r, err := sub.Recv(ctx)
				if err != nil {
					errs <- err
					return
				}
				select {
				case entries <- LogEntry{Slot: r.Context.Slot, Signature: r.Value.Signature, Err: r.Value.Err, Logs: r.Value.Logs}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case e := <-entries:
			deliver(e)
		}
	}
}

// EventData returns the payloads of the "Program data:" log lines (Anchor
// events: an 8-byte discriminator, then Borsh), in order. Lines that are not
// valid base64 are skipped: logs are not trusted input.
func EventData(logs []string) [][]byte {
	var out [][]byte
	for _, l := range logs {
		rest, ok := strings.CutPrefix(l, "Program data: ")
		if !ok {
			continue
		}
		for _, field := range strings.Fields(rest) {
			if b, err := base64.StdEncoding.DecodeString(field); err == nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// TransactionLogs fetches a confirmed transaction's log lines.
func (c *Client) TransactionLogs(ctx context.Context, sig solana.Signature) ([]string, error) {
	maxVersion := uint64(0)
	out, err := c.RPC.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
		Encoding:                       solana.EncodingBase64,
		Commitment:                     rpc.CommitmentConfirmed,
		MaxSupportedTransactionVersion: &maxVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("get transaction %s: %w", sig, err)
	}
	if out.Meta == nil {
		return nil, fmt.Errorf("transaction %s has no metadata", sig)
	}
	return out.Meta.LogMessages, nil
}
