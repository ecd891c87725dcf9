package treasurer_test

import (
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/treasurer"
)

// A run paid in a mint whose supply can never grow (its mint authority
// revoked) refuses an earning rate above that supply: no funding could ever
// cover one epoch of it (UnfundableRate). Rates up to the supply pass, and
// FundingOf reports how many epochs the run's free tokens pay.
func TestUnfundableRate(t *testing.T) {
	e := setup(t, "unfundable", treasurer.TokenProgramID, 0)
	a := e.authority
	run := e.run
	funder := e.tokenAccount(a.PublicKey(), 1000)
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 700, e.decimals)})
	rate := uint64(5000)
	// With a mint authority, more can be minted: the rate passes, and the
	// dump flags it, the whole supply not covering one epoch.
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{EarningRate: &rate})))
	mint, err := treasurer.FetchMint(e.ctx(), e.c, e.mint)
	if err != nil || mint.SupplyFixed || mint.Supply != 1000 {
		t.Fatalf("mint %+v, %v", mint, err)
	}
	_, acc, err := e.p.Open(e.ctx(), e.c, run.Index)
	if err != nil {
		t.Fatal(err)
	}
	if f := treasurer.FundingOf(acc, e.state(), mint, e.balance(run.Collateral)); !f.Unfundable || f.Available != 700 || *f.EpochsFunded != 0 {
		t.Fatalf("funding at %d per epoch: %+v", rate, f)
	}

	// Revoke the mint authority (SPL SetAuthority, MintTokens, none): the
	// supply is fixed at 1000.
	e.mustSend(a, []solana.Instruction{solana.NewInstruction(run.TokenProgram,
		solana.AccountMetaSlice{solana.Meta(e.mint).WRITE(), solana.Meta(a.PublicKey()).SIGNER()}, []byte{6, 0, 0})})
	if mint, err = treasurer.FetchMint(e.ctx(), e.c, e.mint); err != nil || !mint.SupplyFixed {
		t.Fatalf("mint after revoking its authority %+v, %v", mint, err)
	}
	over := uint64(1001)
	if err := treasurer.CheckEarningRate(mint, over); err == nil {
		t.Fatal("CheckEarningRate passed a rate above a fixed supply")
	}
	e.watched = append(e.watched, run.Coordinator.Account)
	e.expectError("UnfundableRate", a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{EarningRate: &over})))
	// The run's mint only.
	wrong, err := run.Update(a.PublicKey(), treasurer.UpdateParams{EarningRate: &rate})
	if err != nil {
		t.Fatal(err)
	}
	wrong.Accounts()[5].PublicKey = funder
	e.expectError("MintMismatch", a, []solana.Instruction{wrong})
	// Up to the supply, and updates without a rate, pass.
	full := uint64(1000)
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{EarningRate: &full})))
	slashing := uint64(3)
	e.mustSend(a, e.ix(run.Update(a.PublicKey(), treasurer.UpdateParams{SlashingRate: &slashing})))
	s := e.state()
	if s.FutureRates.EarningRateTotalShared != full || s.FutureRates.SlashingRatePerClient != slashing {
		t.Fatalf("future rates %+v", s.FutureRates)
	}
	if f := treasurer.FundingOf(acc, s, mint, e.balance(run.Collateral)); f.Unfundable || !f.SupplyFixed || *f.EpochsFunded != 0 || f.Available != 700 {
		t.Fatalf("funding at %d per epoch: %+v", full, f)
	}
	e.mustSend(a, []solana.Instruction{run.TopUp(funder, a.PublicKey(), 300, e.decimals)})
	if f := treasurer.FundingOf(acc, s, mint, e.balance(run.Collateral)); *f.EpochsFunded != 1 {
		t.Fatalf("funding with the whole supply: %+v", f)
	}
}
