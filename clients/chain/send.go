package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"
)

// maxSendAttempts bounds re-sends after a blockhash expired unconfirmed. A
// transaction cannot land once its blockhash has expired, so a re-send with a
// fresh blockhash never executes the instructions twice.
const maxSendAttempts = 3

// Send builds a transaction from ixs paid by payer, signs it with payer and
// signers, sends it with preflight checks and waits until it is confirmed.
// A failing transaction returns a *TxError.
func (c *Client) Send(ctx context.Context, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) (solana.Signature, error) {
	return c.send(ctx, sendPolicy{attempts: maxSendAttempts, wait: c.ConfirmTimeout}, payer, ixs, signers)
}

// Resend says how SendResending re-sends a transaction.
type Resend struct {
	// Attempts bounds the copies sent; at least one is.
	Attempts int
	// After is how long one copy may stay unconfirmed before the next is
	// sent with a fresh blockhash; 0 means the client's ConfirmTimeout.
	After time.Duration
	// NextSlot, when set, names failures that a later slot cures (the loader
	// refuses to touch a program twice in one slot): the transaction is sent
	// again, as a further attempt, once the confirmed slot has advanced.
	NextSlot func(*TxError) bool
	// Log, when set, hears of every copy that was not confirmed.
	Log *slog.Logger
}

// SendResending is Send for a transaction that may safely land twice: its
// instructions are idempotent (a loader write of the same bytes at the same
// offset) or fail once their work is done (creating an account that exists).
// Instead of waiting for a blockhash to expire, a copy that is not confirmed
// within r.After is followed by another with a fresh blockhash, and sending
// errors are retried too, up to r.Attempts copies. A copy that lands late
// counts: the earlier signatures are checked before every re-send, and when a
// later copy is rejected. Failed transactions return a *TxError at once.
func (c *Client) SendResending(ctx context.Context, r Resend, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) (solana.Signature, error) {
	p := sendPolicy{attempts: max(r.Attempts, 1), wait: r.After, resend: true, nextSlot: r.NextSlot, log: r.Log}
	if p.wait <= 0 {
		p.wait = c.ConfirmTimeout
	}
	return c.send(ctx, p, payer, ixs, signers)
}

// sendPolicy is what Send and SendResending differ in.
type sendPolicy struct {
	attempts int
	wait     time.Duration // how long one copy is waited for
	// resend re-sends copies that were not confirmed in wait, and after
	// sending errors; without it only copies whose blockhash expired are.
	resend   bool
	nextSlot func(*TxError) bool
	log      *slog.Logger
}

func (c *Client) send(ctx context.Context, p sendPolicy, payer solana.PrivateKey, ixs []solana.Instruction, signers []solana.PrivateKey) (solana.Signature, error) {
	keys := append([]solana.PrivateKey{payer}, signers...)
	var (
		sent []solana.Signature // copies the cluster accepted
		last error
	)
	for attempt := 1; attempt <= p.attempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return solana.Signature{}, err
		}
		if sig, ok := c.landed(ctx, sent); ok {
			return sig, nil
		}
		earlier := sent
		sig, accepted, err := c.sendCopy(ctx, p, payer.PublicKey(), ixs, keys)
		if accepted {
			sent = append(sent, sig)
		} else {
			sig = solana.Signature{}
		}
		if err == nil {
			return sig, nil
		}
		var te *TxError
		switch {
		case errors.As(err, &te) && p.nextSlot != nil && p.nextSlot(te):
			if werr := c.WaitNextSlot(ctx); werr != nil {
				return sig, fmt.Errorf("%w (waiting for the next slot: %w)", err, werr)
			}
		case te != nil:
			// Rejected or failed: an earlier copy that seemed lost may have
			// landed since and done the work (the account is "already in use").
			if s, ok := c.landed(ctx, earlier); ok {
				return s, nil
			}
			return sig, err
		case errors.As(err, new(invalid)) || ctx.Err() != nil:
			return sig, err
		case errors.Is(err, errExpired) || p.resend:
			if p.log != nil {
				p.log.Warn("transaction not confirmed, re-sending", "attempt", attempt, "err", err)
			}
		default:
			return sig, err
		}
		last = err
	}
	return solana.Signature{}, fmt.Errorf("transaction not confirmed after %d attempts: %w", p.attempts, last)
}

// sendCopy signs ixs with a fresh blockhash, sends the transaction and waits
// up to p.wait for it; accepted says whether the cluster took it.
func (c *Client) sendCopy(ctx context.Context, p sendPolicy, payer solana.PublicKey, ixs []solana.Instruction, keys []solana.PrivateKey) (sig solana.Signature, accepted bool, err error) {
	tx, lastValid, err := c.build(ctx, payer, ixs, keys)
	if err != nil {
		return solana.Signature{}, false, err
	}
	sig = tx.Signatures[0]
	if _, err := c.RPC.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{
		PreflightCommitment: rpc.CommitmentProcessed,
	}); err != nil {
		err = c.sendError(err)
		// The same instructions signed with the same blockhash make the same
		// transaction: report what the earlier copy did.
		var te *TxError
		if !errors.As(err, &te) || te.Kind != "AlreadyProcessed" {
			return sig, false, err
		}
	}
	if p.resend {
		// Re-sent after p.wait anyway: spare the block height polls.
		lastValid = 0
	}
	return sig, true, c.confirm(ctx, sig, lastValid, p.wait)
}

// landed returns the first of sigs that is confirmed without error.
func (c *Client) landed(ctx context.Context, sigs []solana.Signature) (solana.Signature, bool) {
	if len(sigs) == 0 {
		return solana.Signature{}, false
	}
	out, err := c.RPC.GetSignatureStatuses(ctx, true, sigs...)
	if err != nil {
		return solana.Signature{}, false
	}
	for i, st := range out.Value {
		if i < len(sigs) && st != nil && st.Err == nil &&
			(st.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || st.ConfirmationStatus == rpc.ConfirmationStatusFinalized) {
			return sigs[i], true
		}
	}
	return solana.Signature{}, false
}

// WaitNextSlot returns once the cluster's confirmed slot has advanced.
func (c *Client) WaitNextSlot(ctx context.Context) error {
	start, err := c.RPC.GetSlot(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return fmt.Errorf("get slot: %w", err)
	}
	tick := time.NewTicker(c.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		slot, err := c.RPC.GetSlot(ctx, rpc.CommitmentConfirmed)
		if err != nil {
			return fmt.Errorf("get slot: %w", err)
		}
		if slot > start {
			return nil
		}
	}
}

// Simulate runs ixs without committing them and returns the logs and compute
// units; a failing simulation returns them with a *TxError.
func (c *Client) Simulate(ctx context.Context, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) (*rpc.SimulateTransactionResult, error) {
	keys := append([]solana.PrivateKey{payer}, signers...)
	tx, _, err := c.build(ctx, payer.PublicKey(), ixs, keys)
	if err != nil {
		return nil, err
	}
	out, err := c.RPC.SimulateTransactionWithOpts(ctx, tx, &rpc.SimulateTransactionOpts{
		SigVerify:  true,
		Commitment: rpc.CommitmentProcessed,
	})
	if err != nil {
		return nil, fmt.Errorf("simulate transaction: %w", err)
	}
	if out.Value.Err != nil {
		return out.Value, c.decode(out.Value.Err, solana.Signature{}, out.Value.Logs, tx)
	}
	return out.Value, nil
}

func (c *Client) build(ctx context.Context, payer solana.PublicKey, ixs []solana.Instruction, keys []solana.PrivateKey) (*solana.Transaction, uint64, error) {
	bh, err := c.RPC.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, 0, fmt.Errorf("get a recent blockhash from %s: %w", c.rpcURL, err)
	}
	tx, err := solana.NewTransaction(ixs, bh.Value.Blockhash, solana.TransactionPayer(payer))
	if err != nil {
		return nil, 0, invalid{fmt.Errorf("build transaction: %w", err)}
	}
	_, err = tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
		for i := range keys {
			if keys[i].PublicKey().Equals(k) {
				return &keys[i]
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, invalid{fmt.Errorf("sign transaction: %w", err)}
	}
	return tx, bh.Value.LastValidBlockHeight, nil
}

var errExpired = errors.New("blockhash expired before the transaction was confirmed")

// invalid is the error of a transaction that cannot be built or signed:
// sending it again cannot help.
type invalid struct{ error }

func (e invalid) Unwrap() error { return e.error }

// Confirm waits until sig is confirmed, fails, or (when lastValidBlockHeight is
// non-zero) can no longer land. It polls signature statuses, which every RPC
// node serves, so it works the same against localnet and public clusters.
func (c *Client) Confirm(ctx context.Context, sig solana.Signature, lastValidBlockHeight uint64) error {
	return c.confirm(ctx, sig, lastValidBlockHeight, c.ConfirmTimeout)
}

// confirm is Confirm waiting at most wait.
func (c *Client) confirm(ctx context.Context, sig solana.Signature, lastValidBlockHeight uint64, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(c.PollInterval)
	defer tick.Stop()
	for {
		out, err := c.RPC.GetSignatureStatuses(ctx, false, sig)
		if err == nil && len(out.Value) == 1 && out.Value[0] != nil {
			st := out.Value[0]
			if st.Err != nil {
				return c.decodeLanded(ctx, st.Err, sig)
			}
			if st.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || st.ConfirmationStatus == rpc.ConfirmationStatusFinalized {
				return nil
			}
		}
		if err == nil && lastValidBlockHeight > 0 {
			if h, herr := c.RPC.GetBlockHeight(ctx, rpc.CommitmentConfirmed); herr == nil && h > lastValidBlockHeight {
				return errExpired
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for confirmation of %s: %w", sig, ctx.Err())
		case <-tick.C:
		}
	}
}

// sendError turns a sendTransaction failure into a *TxError when it is a
// failed preflight (JSON-RPC -32002 carrying the error and logs).
func (c *Client) sendError(err error) error {
	var rerr *jsonrpc.RPCError
	if errors.As(err, &rerr) && rerr.Code == -32002 {
		if data, ok := rerr.Data.(map[string]any); ok {
			var logs []string
			if raw, ok := data["logs"].([]any); ok {
				for _, l := range raw {
					if s, ok := l.(string); ok {
						logs = append(logs, s)
					}
				}
			}
			if e, ok := data["err"]; ok && e != nil {
				return c.decode(e, solana.Signature{}, logs, nil)
			}
		}
		return fmt.Errorf("transaction rejected: %s", rerr.Message)
	}
	return fmt.Errorf("send transaction to %s: %w", c.rpcURL, err)
}

// decodeLanded builds the error of a transaction that landed and failed,
// fetching its logs and accounts so the failing program can be named.
func (c *Client) decodeLanded(ctx context.Context, txErr any, sig solana.Signature) error {
	var logs []string
	var tx *solana.Transaction
	maxVersion := uint64(0)
	if out, err := c.RPC.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
		Encoding:                       solana.EncodingBase64,
		Commitment:                     rpc.CommitmentConfirmed,
		MaxSupportedTransactionVersion: &maxVersion,
	}); err == nil && out != nil {
		if out.Meta != nil {
			logs = out.Meta.LogMessages
		}
		tx, _ = out.Transaction.GetTransaction()
	}
	return c.decode(txErr, sig, logs, tx)
}

// ComputeUnits returns the compute units a confirmed transaction consumed.
func (c *Client) ComputeUnits(ctx context.Context, sig solana.Signature) (uint64, error) {
	maxVersion := uint64(0)
	out, err := c.RPC.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
		Encoding:                       solana.EncodingBase64,
		Commitment:                     rpc.CommitmentConfirmed,
		MaxSupportedTransactionVersion: &maxVersion,
	})
	if err != nil {
		return 0, fmt.Errorf("get transaction %s: %w", sig, err)
	}
	if out.Meta == nil || out.Meta.ComputeUnitsConsumed == nil {
		return 0, fmt.Errorf("transaction %s reports no compute units", sig)
	}
	return *out.Meta.ComputeUnitsConsumed, nil
}

// Rebind points an instruction built by generated bindings, which address the
// program id in the IDL, at the deployment with id (devnet ids differ).
func Rebind(id solana.PublicKey, ix solana.Instruction, err error) (solana.Instruction, error) {
	if err != nil {
		return nil, err
	}
	data, err := ix.Data()
	if err != nil {
		return nil, err
	}
	return solana.NewInstruction(id, ix.Accounts(), data), nil
}
