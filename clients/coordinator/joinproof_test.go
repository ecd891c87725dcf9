package coordinator_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// Identity squatting (audit, medium): an attacker who knows a member's p2p
// identity (it is gossiped) registered it first, and the member's own
// join_run then failed with P2pIdentityTaken. join_run now needs the p2p
// key's signature over (program, run, signer): a bare join, a proof by
// another key and the victim's own proof replayed under another signer are
// all refused, and the victim then joins.
func TestJoinNeedsTheP2PKey(t *testing.T) {
	e := setup(t, "join-proof")
	a := e.authority
	config, model := testRun(t)
	e.mustSend(a, e.ix(e.run.Update(a.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model})))
	e.mustSend(a, e.ix(e.run.SetPaused(a.PublicKey(), true)))
	clients := e.newClients(2)
	victim, attacker := clients[0], clients[1]

	// A bare join under the victim's identity.
	e.expectError("P2pKeyNotProven", attacker.key, e.ix(e.run.JoinRun(attacker.key.PublicKey(), attacker.auth, victim.p2p)))
	// The attacker's own key signs, but the victim's identity is registered.
	own, err := e.run.JoinRunProven(attacker.key.PublicKey(), attacker.auth, attacker.p2pKey)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := e.run.JoinRun(attacker.key.PublicKey(), attacker.auth, victim.p2p)
	if err != nil {
		t.Fatal(err)
	}
	e.expectError("P2pKeyNotProven", attacker.key, []solana.Instruction{own[0], bare})
	// The victim's real proof (seen in its transaction) replayed for the attacker.
	theirs := e.joinIxs(victim)
	e.expectError("P2pKeyNotProven", attacker.key, []solana.Instruction{theirs[0], bare})
	// A proof of another run's join does not carry over either.
	otherRun := coordinator.JoinMessage(e.run.Program.ID, solana.NewWallet().PublicKey(), attacker.key.PublicKey())
	other := coordinator.Ed25519Instruction(victim.p2p, ed25519.Sign(victim.p2pKey, otherRun), otherRun)
	e.expectError("P2pKeyNotProven", attacker.key, []solana.Instruction{other, bare})
	// A signature by another key, claimed as the victim's, fails in the
	// runtime's precompile, before join_run runs.
	msg := coordinator.JoinMessage(e.run.Program.ID, e.run.Account, attacker.key.PublicKey())
	forged := coordinator.Ed25519Instruction(victim.p2p, ed25519.Sign(attacker.p2pKey, msg), msg)
	e.expectFailure("a precompile failure", func(te *chain.TxError) bool { return te.Instruction == 0 }, attacker.key, []solana.Instruction{forged, bare})

	e.join(victim)
	e.join(attacker)
	s, err := e.run.FetchState(e.ctx(), e.c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[solana.PublicKey][32]byte{}
	for _, c := range s.Clients[:2] {
		got[c.Signer] = c.P2PIdentity
	}
	if got[victim.key.PublicKey()] != victim.p2p || got[attacker.key.PublicKey()] != attacker.p2p {
		t.Fatalf("registered identities %v", got)
	}
	// The key must be a whole ed25519 private key.
	if _, err := e.run.JoinRunProven(victim.key.PublicKey(), victim.auth, ed25519.PrivateKey(make([]byte, 12))); err == nil {
		t.Fatal("a 12-byte p2p key was taken")
	}
}
