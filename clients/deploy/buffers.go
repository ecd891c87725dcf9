package deploy

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
)

// stateBuffer is the loader's tag for a buffer account.
const stateBuffer = 1

// Buffer is a loader buffer account: the leftover of an interrupted or
// failed deployment, holding rent until it is closed.
type Buffer struct {
	Address  solana.PublicKey
	Lamports uint64
	DataLen  uint64 // bytes of the account, header included
}

// Buffers lists the buffers whose authority is authority, by address. The
// cluster filters on the 37-byte header (tag, Some, authority) and returns no
// data, so the listing is cheap even on a public cluster.
func (c *Client) Buffers(ctx context.Context, authority solana.PublicKey) ([]Buffer, error) {
	header := make([]byte, BufferMetadataSize)
	binary.LittleEndian.PutUint32(header, stateBuffer)
	header[4] = 1 // Option::Some
	copy(header[5:], authority[:])
	zero := uint64(0)
	res, err := c.Chain.RPC.GetProgramAccountsWithOpts(ctx, solana.BPFLoaderUpgradeableProgramID, &rpc.GetProgramAccountsOpts{
		Commitment: rpc.CommitmentConfirmed,
		Encoding:   solana.EncodingBase64,
		DataSlice:  &rpc.DataSlice{Offset: &zero, Length: &zero},
		Filters:    []rpc.RPCFilter{{Memcmp: &rpc.RPCFilterMemcmp{Offset: 0, Bytes: header}}},
	})
	if err != nil {
		return nil, fmt.Errorf("list the loader buffers of %s: %w", authority, err)
	}
	out := make([]Buffer, 0, len(res))
	for _, a := range res {
		out = append(out, Buffer{Address: a.Pubkey, Lamports: a.Account.Lamports, DataLen: a.Account.Space})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address.String() < out[j].Address.String() })
	return out, nil
}
