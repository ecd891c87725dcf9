package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// env is one validator with the Authorizer and the Coordinator deployed
// through the loader, and a run created by authority.
type env struct {
	t         *testing.T
	v         *localnet.Validator
	c         *chain.Client
	p         coordinator.Program
	auth      authorizer.Program
	authority solana.PrivateKey
	run       coordinator.Run
}

func setup(t *testing.T, runID string) *env {
	n := programtest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Coordinator)
	e := &env{t: t, v: n.Validator, c: n.Chain, p: coordinator.Program{ID: n.IDs[deploy.Coordinator]}, auth: authorizer.Default(),
		authority: localnettest.NewFundedKeypair(t, n.Validator, 10*solana.LAMPORTS_PER_SOL)}
	account := solana.NewWallet().PrivateKey
	ixs, run, err := e.p.CreateRun(e.ctx(), e.c, e.authority.PublicKey(), account.PublicKey(), coordinator.CreateParams{
		RunID: runID, MainAuthority: e.authority.PublicKey(), JoinAuthority: e.authority.PublicKey(), ClientVersion: "v1",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(e.authority, ixs, account)
	e.run = run
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) send(payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) (solana.Signature, error) {
	return e.c.Send(e.ctx(), payer, ixs, signers...)
}

func (e *env) mustSend(payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) solana.Signature {
	e.t.Helper()
	sig, err := e.send(payer, ixs, signers...)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return sig
}

// ix fails the test on an instruction-building error.
func (e *env) ix(ix solana.Instruction, err error) []solana.Instruction {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	return []solana.Instruction{ix}
}

func (e *env) state() *coordinator.State {
	e.t.Helper()
	s, err := e.run.FetchState(e.ctx(), e.c)
	if err != nil {
		e.t.Fatalf("fetch state: %v", err)
	}
	return s
}

// raw is both run accounts' bytes, to prove a failed instruction changed nothing.
func (e *env) raw() string {
	e.t.Helper()
	var out string
	for _, a := range []solana.PublicKey{e.run.Instance, e.run.Account} {
		data, owner, err := e.c.AccountData(e.ctx(), a)
		if err != nil {
			e.t.Fatal(err)
		}
		out += owner.String() + string(data)
	}
	return out
}

// expectError sends ixs, wants the named program error, and checks that the
// run's accounts did not change.
func (e *env) expectError(name string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	e.expectFailure(name, func(te *chain.TxError) bool { return te.Name == name }, payer, ixs, signers...)
}

// expectCode is expectError for a code the client's error tables do not name.
func (e *env) expectCode(code uint32, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	e.expectFailure(fmt.Sprintf("code %d", code), func(te *chain.TxError) bool { return te.Code != nil && *te.Code == code }, payer, ixs, signers...)
}

func (e *env) expectFailure(want string, match func(*chain.TxError) bool, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	before := e.raw()
	// Two slots: a transaction identical to one sent in the same slot (same
	// blockhash) is the same transaction, and Send would report the first's outcome.
	time.Sleep(200 * time.Millisecond)
	_, err := e.send(payer, ixs, signers...)
	var te *chain.TxError
	if !errors.As(err, &te) || !match(te) {
		e.t.Fatalf("want program error %s, got %v", want, err)
	}
	if e.raw() != before {
		e.t.Errorf("run accounts changed although the instruction failed with %s", want)
	}
}

// authorize grants user the join scope from the run's join authority.
func (e *env) authorize(user solana.PublicKey) solana.PublicKey {
	e.t.Helper()
	g := e.authority.PublicKey()
	create, addr, err := e.auth.Create(g, g, user, authorizer.JoinRunScope)
	if err != nil {
		e.t.Fatal(err)
	}
	activate, err := e.auth.SetActive(g, addr, true)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mustSend(e.authority, []solana.Instruction{create, activate})
	return addr
}

// testRun is config/smoke.toml: timers of seconds, so a whole run takes well
// under a minute.
func testRun(t *testing.T) (coordinator.Config, coordinator.Model) {
	t.Helper()
	p, err := coordinator.LoadParams("../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	return *p.Config, *p.Model
}
