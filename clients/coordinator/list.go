package coordinator

import (
	"context"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
)

// Listed is one run found by ListRuns: its instance and what it holds.
type Listed struct {
	Instance *Instance
	Run      Run
}

// ListRuns finds every CoordinatorInstance of the program (list-runs and
// the explorer), in the order the RPC node returns them.
func (p Program) ListRuns(ctx context.Context, c *chain.Client) ([]Listed, error) {
	res, err := c.RPC.GetProgramAccountsWithOpts(ctx, p.ID, &rpc.GetProgramAccountsOpts{
		Encoding:   solana.EncodingBase64,
		Commitment: rpc.CommitmentConfirmed,
		Filters: []rpc.RPCFilter{{Memcmp: &rpc.RPCFilterMemcmp{
			Offset: 0, Bytes: solana.Base58(coordinator.Account_CoordinatorInstance[:]),
		}}},
	})
	if err != nil {
		return nil, fmt.Errorf("listing the runs of %s: %w", p.ID, err)
	}
	var out []Listed
	for _, acc := range res {
		inst, err := coordinator.ParseAccount_CoordinatorInstance(acc.Account.Data.GetBinary())
		if err != nil {
			continue // not an instance after all; the filter is only a prefix match
		}
		out = append(out, Listed{Instance: inst, Run: Run{Program: p, Instance: acc.Pubkey, Account: inst.CoordinatorAccount}})
	}
	return out, nil
}
