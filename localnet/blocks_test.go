package localnet_test

import (
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// getTransaction with jsonParsed, and the block and cluster methods
// explorers and indexers call, through solana-go's client.
func TestBlockAndClusterMethods(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond})
	ctx := testContext(t)
	client := localnettest.Client(v)
	waitSlot(t, ctx, client, 3) // past genesis: the transaction's block has a parent block
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	to := solana.NewWallet().PublicKey()

	supplyBefore, err := client.GetSupply(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	sig := send(t, ctx, v, payer, nil, system.NewTransferInstruction(solana.LAMPORTS_PER_SOL, payer.PublicKey(), to).Build())
	maxVersion := uint64(0)

	parsed, err := client.GetParsedTransaction(ctx, sig, &rpc.GetParsedTransactionOpts{
		Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &maxVersion,
	})
	if err != nil {
		t.Fatalf("getTransaction jsonParsed: %v", err)
	}
	keys := parsed.Transaction.Message.AccountKeys
	if len(keys) != 3 || !keys[0].PublicKey.Equals(payer.PublicKey()) || !keys[0].Signer || !keys[0].Writable ||
		!keys[1].PublicKey.Equals(to) || keys[1].Signer || !keys[1].Writable || keys[2].Writable {
		t.Fatalf("account keys = %+v", keys)
	}
	ix := parsed.Transaction.Message.Instructions[0]
	info, _ := ix.Parsed.MarshalJSON()
	if ix.Program != "system" || !ix.ProgramId.Equals(solana.SystemProgramID) || ix.Parsed == nil {
		t.Fatalf("instruction = %+v", ix)
	}
	if want := `{"info":{"destination":"` + to.String() + `","lamports":1000000000,"source":"` + payer.PublicKey().String() + `"},"type":"transfer"}`; string(info) != want {
		t.Fatalf("parsed = %s, want %s", info, want)
	}

	block, err := client.GetBlockWithOpts(ctx, parsed.Slot, &rpc.GetBlockOpts{
		Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &maxVersion,
	})
	if err != nil {
		t.Fatalf("getBlock: %v", err)
	}
	found := false
	for _, tx := range block.Transactions {
		decoded, err := tx.GetTransaction()
		if err == nil && decoded.Signatures[0].Equals(sig) {
			found = tx.Meta.Fee == fee
		}
	}
	if !found || block.BlockHeight == nil || *block.BlockHeight != parsed.Slot || block.BlockTime == nil ||
		*block.BlockTime != *parsed.BlockTime || len(block.Rewards) != 0 {
		t.Fatalf("block %d = %+v (transaction found: %v)", parsed.Slot, block, found)
	}
	parent, err := client.GetBlockWithOpts(ctx, block.ParentSlot, &rpc.GetBlockOpts{TransactionDetails: rpc.TransactionDetailsNone})
	if err != nil || !parent.Blockhash.Equals(block.PreviousBlockhash) {
		t.Fatalf("parent block = %+v, %v; want blockhash %s", parent, err, block.PreviousBlockhash)
	}
	parsedBlock, err := client.GetParsedBlockWithOpts(ctx, parsed.Slot, &rpc.GetBlockOpts{MaxSupportedTransactionVersion: &maxVersion})
	if err != nil || len(parsedBlock.Transactions) != len(block.Transactions) {
		t.Fatalf("getBlock jsonParsed = %+v, %v", parsedBlock, err)
	}

	end := parsed.Slot
	slots, err := client.GetBlocks(ctx, block.ParentSlot, &end, rpc.CommitmentConfirmed)
	if err != nil || len(slots) != 2 || slots[0] != block.ParentSlot || slots[1] != parsed.Slot {
		t.Fatalf("getBlocks(%d, %d) = %v, %v", block.ParentSlot, end, slots, err)
	}
	withLimit, err := client.GetBlocksWithLimit(ctx, 0, 3, rpc.CommitmentFinalized)
	if err != nil || len(*withLimit) != 3 || (*withLimit)[0] != 0 {
		t.Fatalf("getBlocksWithLimit = %v, %v", withLimit, err)
	}
	blockTime, err := client.GetBlockTime(ctx, parsed.Slot)
	if err != nil || blockTime == nil || *blockTime != *parsed.BlockTime {
		t.Fatalf("getBlockTime = %v, %v", blockTime, err)
	}
	if first, err := client.GetFirstAvailableBlock(ctx); err != nil || first != 0 {
		t.Fatalf("getFirstAvailableBlock = %d, %v", first, err)
	}

	// The supply fell by the fee the runtime burned, exactly.
	supplyAfter, err := client.GetSupply(ctx, rpc.CommitmentConfirmed)
	if err != nil || supplyBefore.Value.Total-supplyAfter.Value.Total != fee || supplyAfter.Value.Circulating != supplyAfter.Value.Total ||
		supplyAfter.Value.NonCirculating != 0 {
		t.Fatalf("supply before %+v, after %+v, %v", supplyBefore.Value, supplyAfter.Value, err)
	}

	// One node: leader, vote account and cluster node.
	identity, err := client.GetIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	votes, err := client.GetVoteAccounts(ctx, &rpc.GetVoteAccountsOpts{Commitment: rpc.CommitmentConfirmed})
	if err != nil || len(votes.Current) != 1 || len(votes.Delinquent) != 0 {
		t.Fatalf("getVoteAccounts = %+v, %v", votes, err)
	}
	vote := votes.Current[0]
	if !vote.NodePubkey.Equals(identity.Identity) || vote.ActivatedStake == 0 || !vote.EpochVoteAccount || vote.LastVote == 0 {
		t.Fatalf("vote account = %+v", vote)
	}
	voteAccount, err := client.GetAccountInfo(ctx, vote.VotePubkey)
	if err != nil || !voteAccount.Value.Owner.Equals(solana.VoteProgramID) {
		t.Fatalf("vote account %s: %+v, %v", vote.VotePubkey, voteAccount, err)
	}
	nodes, err := client.GetClusterNodes(ctx)
	if err != nil || len(nodes) != 1 || !nodes[0].Pubkey.Equals(identity.Identity) || nodes[0].RPC == nil {
		t.Fatalf("getClusterNodes = %+v, %v", nodes, err)
	}
	leaders, err := client.GetSlotLeaders(ctx, parsed.Slot, 4)
	if err != nil || len(leaders) != 4 || !leaders[3].Equals(identity.Identity) {
		t.Fatalf("getSlotLeaders = %v, %v", leaders, err)
	}

	// Bad parameters are refused with Agave's codes.
	for _, tc := range []struct {
		method string
		params []any
		code   int
	}{
		{"getBlock", []any{parsed.Slot, map[string]any{"commitment": "processed"}}, -32602},
		{"getBlock", []any{parsed.Slot, map[string]any{"encoding": "hex"}}, -32602},
		{"getBlock", []any{parsed.Slot + 100_000}, -32004},
		{"getBlocks", []any{0, 10, map[string]any{"commitment": "processed"}}, -32602},
		{"getBlocksWithLimit", []any{0, 500_001}, -32602},
		{"getSlotLeaders", []any{0, 5001}, -32602},
		{"getRecentPerformanceSamples", []any{721}, -32602},
		{"getTransaction", []any{sig.String(), map[string]any{"commitment": "processed"}}, -32602},
	} {
		r := call(t, v, tc.method, tc.params)
		if r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("%s %v: error %+v, want code %d", tc.method, tc.params, r.Error, tc.code)
		}
	}
}

// Blocks and their transactions survive a restart with the ledger; the
// first available block stays genesis.
func TestBlocksSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	v := localnettest.Start(t, localnet.Options{LedgerDir: dir, SlotDuration: 50 * time.Millisecond})
	payer := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	sig := send(t, ctx, v, payer, nil, system.NewTransferInstruction(1_000_000, payer.PublicKey(), solana.NewWallet().PublicKey()).Build())
	maxVersion := uint64(0)
	opts := &rpc.GetBlockOpts{TransactionDetails: rpc.TransactionDetailsSignatures, MaxSupportedTransactionVersion: &maxVersion}
	tx, err := localnettest.Client(v).GetTransaction(ctx, sig, &rpc.GetTransactionOpts{MaxSupportedTransactionVersion: &maxVersion})
	if err != nil {
		t.Fatal(err)
	}
	before, err := localnettest.Client(v).GetBlockWithOpts(ctx, tx.Slot, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}

	v = localnettest.Start(t, localnet.Options{LedgerDir: dir, SlotDuration: 50 * time.Millisecond})
	client := localnettest.Client(v)
	after, err := client.GetBlockWithOpts(ctx, tx.Slot, opts)
	if err != nil || !after.Blockhash.Equals(before.Blockhash) || len(after.Signatures) != len(before.Signatures) ||
		*after.BlockTime != *before.BlockTime {
		t.Fatalf("block %d after restart = %+v, %v; before %+v", tx.Slot, after, err, before)
	}
	if first, err := client.GetFirstAvailableBlock(ctx); err != nil || first != 0 {
		t.Fatalf("getFirstAvailableBlock after restart = %d, %v", first, err)
	}
	votes, err := client.GetVoteAccounts(ctx, nil)
	if err != nil || len(votes.Current)+len(votes.Delinquent) != 1 {
		t.Fatalf("getVoteAccounts after restart = %+v, %v", votes, err)
	}
}
