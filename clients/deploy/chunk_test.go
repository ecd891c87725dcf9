package deploy

import (
	"testing"

	"github.com/gagliardetto/solana-go"
)

// TestChunkSizeFillsATransaction checks that a write of chunkSize bytes fits
// the 1232-byte limit and one more byte would not, with and without a separate
// authority (one signature more).
func TestChunkSizeFillsATransaction(t *testing.T) {
	payer := solana.NewWallet().PrivateKey
	c := &Client{Payer: payer}
	buffer := solana.NewWallet().PublicKey()
	size := func(authority solana.PublicKey, n int) int {
		tx, err := solana.NewTransaction([]solana.Instruction{writeIx(buffer, authority, 0, make([]byte, n))},
			solana.Hash{}, solana.TransactionPayer(payer.PublicKey()))
		if err != nil {
			t.Fatal(err)
		}
		tx.Signatures = make([]solana.Signature, tx.Message.Header.NumRequiredSignatures)
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return len(raw)
	}
	for name, authority := range map[string]solana.PublicKey{"payer is authority": payer.PublicKey(), "separate authority": solana.NewWallet().PublicKey()} {
		n, err := c.chunkSize(buffer, authority)
		if err != nil {
			t.Fatal(err)
		}
		if size(authority, n) > maxTxSize || size(authority, n+1) <= maxTxSize {
			t.Errorf("%s: chunk %d gives %d bytes, chunk+1 gives %d; want the largest that fits %d",
				name, n, size(authority, n), size(authority, n+1), maxTxSize)
		}
	}
}
