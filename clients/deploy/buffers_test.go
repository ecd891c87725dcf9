package deploy_test

import (
	"context"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// TestBuffers lists buffers by authority (only that authority's, not a
// deployed program's data) and closes them.
func TestBuffers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator")
	}
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := localnettest.Client(v)
	mine := localnettest.NewFundedKeypair(t, v, 10*sol)
	other := localnettest.NewFundedKeypair(t, v, 10*sol)
	d := deploy.New(v.RPCURL, mine)
	memo, err := client.GetAccountInfo(ctx, memoProgramID)
	if err != nil {
		t.Fatal(err)
	}
	data := memo.Value.Data.GetBinary()
	want := map[solana.PublicKey]bool{}
	for range 2 {
		b, err := d.WriteBuffer(ctx, mine, data)
		if err != nil {
			t.Fatal(err)
		}
		want[b] = true
	}
	if _, err := deploy.New(v.RPCURL, other).WriteBuffer(ctx, other, data); err != nil {
		t.Fatal(err)
	}

	got, err := d.Buffers(ctx, mine.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d buffers, want %d: %+v", len(got), len(want), got)
	}
	for _, b := range got {
		if !want[b.Address] || b.Lamports == 0 || b.DataLen != uint64(deploy.BufferMetadataSize+len(data)) {
			t.Fatalf("unexpected buffer %+v", b)
		}
	}

	recipient := solana.NewWallet().PublicKey()
	var total uint64
	for _, b := range got {
		if err := d.CloseBuffer(ctx, b.Address, mine, recipient); err != nil {
			t.Fatal(err)
		}
		total += b.Lamports
	}
	if left, err := d.Buffers(ctx, mine.PublicKey()); err != nil || len(left) != 0 {
		t.Fatalf("after closing: %v, %v", left, err)
	}
	bal, err := client.GetBalance(ctx, recipient, rpc.CommitmentConfirmed)
	if err != nil || bal.Value != total {
		t.Fatalf("recipient holds %v (err %v), want the buffers' %d lamports", bal, err, total)
	}
	if theirs, err := d.Buffers(ctx, other.PublicKey()); err != nil || len(theirs) != 1 {
		t.Fatalf("the other authority's buffers: %v, %v", theirs, err)
	}
}
