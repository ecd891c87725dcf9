package coordinator_test

import (
	"testing"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// Every account check fails with Anchor's code and changes nothing: wrong
// signer, read-only account, wrong owner, wrong discriminator, an account of
// another run, a forged authorization, re-initialisation, a wrong size, and
// malformed instruction data.
func TestAccountChecks(t *testing.T) {
	e := setup(t, "checks-a")
	a := e.authority
	outsider := localnettest.NewFundedKeypair(t, e.v, 2*solana.LAMPORTS_PER_SOL)
	config, model := testRun(t)
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), false)))

	// A second run, to pass its accounts where the first's belong.
	account := solana.NewWallet().PrivateKey
	ixs, other, err := e.p.CreateRun(e.ctx(), e.c, a.PublicKey(), account.PublicKey(), coordinator.CreateParams{
		RunID: "checks-b", MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(a, ixs, account)

	tick := func(r coordinator.Run) []solana.Instruction { return e.ix(r.Tick(outsider.PublicKey())) }
	mixed := coordinator.Run{Program: e.p, Instance: e.run.Instance, Account: other.Account}
	e.expectError("ConstraintHasOne", outsider, tick(mixed))
	swapped := coordinator.Run{Program: e.p, Instance: e.run.Account, Account: e.run.Account}
	e.expectError("AccountDiscriminatorMismatch", outsider, tick(swapped))
	systemOwned := coordinator.Run{Program: e.p, Instance: outsider.PublicKey(), Account: e.run.Account}
	e.expectError("AccountOwnedByWrongProgram", outsider, tick(systemOwned))

	readOnly := tick(e.run)
	readOnly[0].Accounts()[2].IsWritable = false
	e.expectError("ConstraintMut", outsider, readOnly)
	unsigned := e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config}))
	unsigned[0].Accounts()[0].IsSigner = false
	e.expectError("AccountNotSigner", outsider, unsigned)

	// An authorization from someone other than the join authority is not at
	// the PDA the run derives.
	auth := authorizer.Default()
	create, forged, err := auth.Create(outsider.PublicKey(), outsider.PublicKey(), authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		t.Fatal(err)
	}
	activate, _ := auth.SetActive(outsider.PublicKey(), forged, true)
	e.mustSend(outsider, []solana.Instruction{create, activate})
	e.expectError("ConstraintSeeds", outsider, e.ix(e.run.JoinRun(outsider.PublicKey(), forged, [32]byte{9})))
	// The coordinator account is not an authorization at all.
	e.expectError("AccountOwnedByWrongProgram", outsider, e.ix(e.run.JoinRun(outsider.PublicKey(), e.run.Account, [32]byte{9})))

	// init_coordinator on an initialized account, or one of the wrong size.
	ixs, _, err = e.p.CreateRun(e.ctx(), e.c, a.PublicKey(), e.run.Account, coordinator.CreateParams{
		RunID: "checks-c", MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	e.expectError("AccountDiscriminatorAlreadySet", a, ixs[1:])
	small := solana.NewWallet().PrivateKey
	ixs, _, err = e.p.CreateRun(e.ctx(), e.c, a.PublicKey(), small.PublicKey(), coordinator.CreateParams{
		RunID: "checks-c", MainAuthority: a.PublicKey(), JoinAuthority: a.PublicKey(), ClientVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	ixs[0], err = system.NewCreateAccountInstruction(solana.LAMPORTS_PER_SOL, coordinator.AccountSize-8, e.p.ID, a.PublicKey(), small.PublicKey()).ValidateAndBuild()
	if err != nil {
		t.Fatal(err)
	}
	e.expectCode(2019, a, ixs, small) // Anchor's ConstraintSpace

	// Malformed instruction data.
	ix := tick(e.run)[0]
	data, _ := ix.Data()
	unknown := append([]byte{}, data...)
	unknown[0] ^= 0xff
	e.expectError("InstructionFallbackNotFound", outsider, []solana.Instruction{solana.NewInstruction(e.p.ID, ix.Accounts(), unknown)})
	e.expectError("InstructionMissing", outsider, []solana.Instruction{solana.NewInstruction(e.p.ID, ix.Accounts(), data[:7])})
	trailing := append(append([]byte{}, data...), 0)
	e.expectError("InstructionDidNotDeserialize", outsider, []solana.Instruction{solana.NewInstruction(e.p.ID, ix.Accounts(), trailing)})
	paused := e.ix(e.run.SetPaused(a.PublicKey(), true))[0]
	pdata, _ := paused.Data()
	badBool := append([]byte{}, pdata...)
	badBool[8] = 2
	e.expectError("InstructionDidNotDeserialize", a, []solana.Instruction{solana.NewInstruction(e.p.ID, paused.Accounts(), badBool)})
}
