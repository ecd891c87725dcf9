package chain

import (
	"context"
	"errors"
	"fmt"
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
	keys := append([]solana.PrivateKey{payer}, signers...)
	var lastErr error
	for attempt := 0; attempt < maxSendAttempts; attempt++ {
		tx, lastValid, err := c.build(ctx, payer.PublicKey(), ixs, keys)
		if err != nil {
			return solana.Signature{}, err
		}
		sig, err := c.RPC.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{
			PreflightCommitment: rpc.CommitmentProcessed,
		})
		if err != nil {
			err = c.sendError(err)
			// The same instructions signed with the same blockhash make the same
			// transaction: report what the earlier copy did.
			var te *TxError
			if !errors.As(err, &te) || te.Kind != "AlreadyProcessed" {
				return solana.Signature{}, err
			}
			sig = tx.Signatures[0]
		}
		err = c.Confirm(ctx, sig, lastValid)
		if errors.Is(err, errExpired) {
			lastErr = err
			continue
		}
		return sig, err
	}
	return solana.Signature{}, fmt.Errorf("transaction not confirmed after %d attempts: %w", maxSendAttempts, lastErr)
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
		return nil, 0, fmt.Errorf("build transaction: %w", err)
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
		return nil, 0, fmt.Errorf("sign transaction: %w", err)
	}
	return tx, bh.Value.LastValidBlockHeight, nil
}

var errExpired = errors.New("blockhash expired before the transaction was confirmed")

// Confirm waits until sig is confirmed, fails, or (when lastValidBlockHeight is
// non-zero) can no longer land. It polls signature statuses, which every RPC
// node serves, so it works the same against localnet and public clusters.
func (c *Client) Confirm(ctx context.Context, sig solana.Signature, lastValidBlockHeight uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.ConfirmTimeout)
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
