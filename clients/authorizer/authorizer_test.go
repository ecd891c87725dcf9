package authorizer_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"

	"github.com/psyche-go/psyche/clients/authorizer"
	bindings "github.com/psyche-go/psyche/clients/bindings/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// env is one validator with the Authorizer deployed through the loader.
type env struct {
	t       *testing.T
	v       *localnet.Validator
	c       *chain.Client
	p       authorizer.Program
	grantor solana.PrivateKey
}

func setup(t *testing.T) *env {
	n := programtest.Start(t, localnet.Options{}, deploy.Authorizer)
	return &env{t: t, v: n.Validator, c: n.Chain, p: authorizer.Program{ID: n.IDs[deploy.Authorizer]},
		grantor: localnettest.NewFundedKeypair(t, n.Validator, 10*solana.LAMPORTS_PER_SOL)}
}

// in returns the environment reporting to a subtest.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) send(payer solana.PrivateKey, ixs ...solana.Instruction) (solana.Signature, error) {
	return e.c.Send(e.ctx(), payer, ixs)
}

func (e *env) mustSend(payer solana.PrivateKey, ixs ...solana.Instruction) solana.Signature {
	e.t.Helper()
	sig, err := e.send(payer, ixs...)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return sig
}

func (e *env) fetch(addr solana.PublicKey) *authorizer.Authorization {
	e.t.Helper()
	a, err := e.p.Fetch(e.ctx(), e.c, addr)
	if err != nil {
		e.t.Fatalf("fetch %s: %v", addr, err)
	}
	return a
}

// raw is an account's full state, to prove a failed instruction changed nothing.
func (e *env) raw(addr solana.PublicKey) string {
	e.t.Helper()
	data, owner, err := e.c.AccountData(e.ctx(), addr)
	if errors.Is(err, chain.ErrAccountNotFound) {
		return "absent"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	bal, _ := e.c.Balance(e.ctx(), addr)
	return owner.String() + string(data) + string(rune(bal))
}

// create makes an active authorization from e.grantor to grantee.
func (e *env) create(grantee solana.PublicKey, scope []byte) solana.PublicKey {
	e.t.Helper()
	g := e.grantor.PublicKey()
	create, addr, err := e.p.Create(g, g, grantee, scope)
	if err != nil {
		e.t.Fatal(err)
	}
	activate, _ := e.p.SetActive(g, addr, true)
	e.mustSend(e.grantor, create, activate)
	return addr
}

// expectError sends ixs, wants the named program error, and checks that the
// watched accounts did not change.
func (e *env) expectError(name string, payer solana.PrivateKey, watch []solana.PublicKey, ixs ...solana.Instruction) {
	e.t.Helper()
	before := make([]string, len(watch))
	for i, w := range watch {
		before[i] = e.raw(w)
	}
	_, err := e.send(payer, ixs...)
	var te *chain.TxError
	if !errors.As(err, &te) || te.Name != name {
		e.t.Fatalf("want program error %s, got %v", name, err)
	}
	for i, w := range watch {
		if e.raw(w) != before[i] {
			e.t.Errorf("%s changed although the instruction failed with %s", w, name)
		}
	}
}

func TestAuthorizationLifecycle(t *testing.T) {
	e := setup(t)
	g := e.grantor.PublicKey()
	grantee := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	delegates := []solana.PublicKey{solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey()}
	scope := authorizer.JoinRunScope

	// Given a new authorization: created inactive.
	create, addr, err := e.p.Create(g, g, grantee.PublicKey(), scope)
	if err != nil {
		t.Fatal(err)
	}
	sig := e.mustSend(e.grantor, create)
	a := e.fetch(addr)
	if a.Active || !a.Grantor.Equals(g) || !a.Grantee.Equals(grantee.PublicKey()) || !bytes.Equal(a.Scope, scope) || len(a.Delegates) != 0 {
		t.Fatalf("created %+v", a)
	}
	if authorizer.IsValidFor(a, g, grantee.PublicKey(), scope) {
		t.Error("inactive authorization is valid")
	}
	_, bump, _ := e.p.Address(g, grantee.PublicKey(), scope)
	if a.Bump != bump {
		t.Errorf("bump %d, want canonical %d", a.Bump, bump)
	}
	logs, err := e.c.TransactionLogs(e.ctx(), sig)
	if err != nil {
		t.Fatal(err)
	}
	events := chain.EventData(logs)
	if len(events) != 1 {
		t.Fatalf("events %d, logs %q", len(events), logs)
	}
	ev, err := bindings.ParseEvent_AuthorizationCreated(events[0])
	if err != nil || !ev.Authorization.Equals(addr) || !ev.Grantee.Equals(grantee.PublicKey()) || !bytes.Equal(ev.Scope, scope) {
		t.Fatalf("AuthorizationCreated event %+v, %v", ev, err)
	}

	// When the grantor activates it, it is valid for the grantee only.
	activate, _ := e.p.SetActive(g, addr, true)
	e.mustSend(e.grantor, activate)
	a = e.fetch(addr)
	if !a.Active || !authorizer.IsValidFor(a, g, grantee.PublicKey(), scope) || authorizer.IsValidFor(a, g, delegates[0], scope) {
		t.Fatalf("after activate %+v", a)
	}
	if a.GrantorUpdateUnixTimestamp < time.Now().Add(-time.Minute).Unix() {
		t.Errorf("grantor update time %d not stamped", a.GrantorUpdateUnixTimestamp)
	}

	// The grantee adds delegates (a duplicate is kept once); they become valid.
	ix, _ := e.p.UpdateDelegates(grantee.PublicKey(), grantee.PublicKey(), addr, false, []solana.PublicKey{delegates[0], delegates[1], delegates[0]})
	e.mustSend(grantee, ix)
	a = e.fetch(addr)
	if len(a.Delegates) != 2 || !authorizer.IsValidFor(a, g, delegates[1], scope) {
		t.Fatalf("after delegate %+v", a)
	}
	// Clearing and re-adding one shrinks the account and refunds rent.
	balBefore, _ := e.c.Balance(e.ctx(), grantee.PublicKey())
	ix, _ = e.p.UpdateDelegates(grantee.PublicKey(), grantee.PublicKey(), addr, true, []solana.PublicKey{delegates[1]})
	e.mustSend(grantee, ix)
	a = e.fetch(addr)
	if len(a.Delegates) != 1 || authorizer.IsValidFor(a, g, delegates[0], scope) || !authorizer.IsValidFor(a, g, delegates[1], scope) {
		t.Fatalf("after clear %+v", a)
	}
	data, _, _ := e.c.AccountData(e.ctx(), addr)
	if want := 8 + 1 + 32 + 32 + 4 + len(scope) + 1 + 4 + 32 + 8; len(data) != want {
		t.Errorf("account is %d bytes, want %d", len(data), want)
	}
	if balAfter, _ := e.c.Balance(e.ctx(), grantee.PublicKey()); balAfter+5000 <= balBefore {
		t.Errorf("shrinking did not refund rent: %d -> %d", balBefore, balAfter)
	}

	// Deactivate, then close: rent goes to the spill account.
	spill := solana.NewWallet().PublicKey()
	held, _ := e.c.Balance(e.ctx(), addr)
	deactivate, _ := e.p.SetActive(g, addr, false)
	closeIx, _ := e.p.Close(g, spill, addr)
	e.mustSend(e.grantor, deactivate, closeIx)
	if _, _, err := e.c.AccountData(e.ctx(), addr); !errors.Is(err, chain.ErrAccountNotFound) {
		t.Fatalf("closed account still there: %v", err)
	}
	if got, _ := e.c.Balance(e.ctx(), spill); got != held {
		t.Errorf("spill got %d, want %d", got, held)
	}
	// The address can be used again after a close.
	e.create(grantee.PublicKey(), scope)
}

func TestPermissionlessAuthorization(t *testing.T) {
	e := setup(t)
	addr := e.create(authorizer.Everyone, authorizer.JoinRunScope)
	a := e.fetch(addr)
	for i := 0; i < 3; i++ {
		if !authorizer.IsValidFor(a, e.grantor.PublicKey(), solana.NewWallet().PublicKey(), authorizer.JoinRunScope) {
			t.Fatal("permissionless authorization rejects a user")
		}
	}
	if authorizer.IsValidFor(a, solana.NewWallet().PublicKey(), e.grantor.PublicKey(), authorizer.JoinRunScope) {
		t.Fatal("valid for a different grantor")
	}
}

func TestRejections(t *testing.T) {
	e := setup(t)
	g := e.grantor.PublicKey()
	grantee := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	stranger := localnettest.NewFundedKeypair(t, e.v, solana.LAMPORTS_PER_SOL)
	scope := authorizer.JoinRunScope
	addr := e.create(grantee.PublicKey(), scope)

	t.Run("grantor update by another key", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.SetActive(stranger.PublicKey(), addr, false)
		e.expectError("GrantorMismatch", stranger, []solana.PublicKey{addr}, ix)
	})
	t.Run("grantor not signing", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.SetActive(g, addr, false)
		ix.Accounts()[0].IsSigner = false
		e.expectError("AccountNotSigner", stranger, []solana.PublicKey{addr}, ix)
	})
	t.Run("re-create", func(t *testing.T) {
		e := e.in(t)
		ix, _, _ := e.p.Create(g, g, grantee.PublicKey(), scope)
		e.expectError("AuthorizationAlreadyExists", e.grantor, []solana.PublicKey{addr}, ix)
	})
	t.Run("close while active", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.Close(g, g, addr)
		e.expectError("AuthorizationStillActive", e.grantor, []solana.PublicKey{addr}, ix)
	})
	t.Run("close by another key", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.Close(stranger.PublicKey(), stranger.PublicKey(), addr)
		e.expectError("GrantorMismatch", stranger, []solana.PublicKey{addr}, ix)
	})
	t.Run("delegates set by the grantor", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.UpdateDelegates(g, g, addr, false, []solana.PublicKey{stranger.PublicKey()})
		e.expectError("GranteeMismatch", e.grantor, []solana.PublicKey{addr}, ix)
	})
	t.Run("too many delegates", func(t *testing.T) {
		e := e.in(t)
		many := make([]solana.PublicKey, authorizer.MaxDelegates+1)
		for i := range many {
			many[i] = solana.NewWallet().PublicKey()
		}
		// 33 keys do not fit one transaction with the rest; add 32, then one more.
		ix, _ := e.p.UpdateDelegates(grantee.PublicKey(), grantee.PublicKey(), addr, false, many[:20])
		e.mustSend(grantee, ix)
		ix, _ = e.p.UpdateDelegates(grantee.PublicKey(), grantee.PublicKey(), addr, false, many[20:32])
		e.mustSend(grantee, ix)
		ix, _ = e.p.UpdateDelegates(grantee.PublicKey(), grantee.PublicKey(), addr, false, many[32:])
		e.expectError("TooManyDelegates", grantee, []solana.PublicKey{addr}, ix)
	})
	t.Run("wrong PDA", func(t *testing.T) {
		e := e.in(t)
		other, _, _ := e.p.Address(g, grantee.PublicKey(), []byte("OtherScope"))
		ix, _ := bindings.NewAuthorizationCreateInstruction(bindings.AuthorizationCreateParams{Grantee: grantee.PublicKey(), Scope: []byte("ThirdScope")}, g, g, other, solana.SystemProgramID)
		ix = rebind(ix, e.p.ID)
		e.expectError("ConstraintSeeds", e.grantor, []solana.PublicKey{other}, ix)
	})
	t.Run("scope longer than 32 bytes", func(t *testing.T) {
		e := e.in(t)
		long := bytes.Repeat([]byte("s"), 33)
		ix, _ := bindings.NewAuthorizationCreateInstruction(bindings.AuthorizationCreateParams{Grantee: grantee.PublicKey(), Scope: long}, g, g, addr, solana.SystemProgramID)
		e.expectError("ScopeTooLong", e.grantor, []solana.PublicKey{addr}, rebind(ix, e.p.ID))
	})
	t.Run("forged account owned by another program", func(t *testing.T) {
		e := e.in(t)
		// An account of the right size whose owner is another program.
		forged := solana.NewWallet()
		rent, _ := e.c.RPC.GetMinimumBalanceForRentExemption(e.ctx(), 200, "confirmed")
		mk := system.NewCreateAccountInstruction(rent, 200, solana.MemoProgramID, g, forged.PublicKey()).Build()
		if _, err := e.c.Send(e.ctx(), e.grantor, []solana.Instruction{mk}, forged.PrivateKey); err != nil {
			t.Fatal(err)
		}
		ix, _ := e.p.SetActive(g, forged.PublicKey(), true)
		e.expectError("AccountOwnedByWrongProgram", e.grantor, []solana.PublicKey{forged.PublicKey()}, ix)
	})
	t.Run("a missing account is not initialized", func(t *testing.T) {
		e := e.in(t)
		missing := solana.NewWallet().PublicKey()
		ix, _ := e.p.SetActive(g, missing, true)
		e.expectError("AccountNotInitialized", e.grantor, []solana.PublicKey{missing}, ix)
	})
	t.Run("unknown instruction", func(t *testing.T) {
		e := e.in(t)
		ix := solana.NewInstruction(e.p.ID, solana.AccountMetaSlice{}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		e.expectError("InstructionFallbackNotFound", e.grantor, nil, ix)
	})
	t.Run("truncated arguments", func(t *testing.T) {
		e := e.in(t)
		ix, _ := e.p.SetActive(g, addr, true)
		data, _ := ix.Data()
		bad := solana.NewInstruction(e.p.ID, ix.Accounts(), data[:8])
		e.expectError("InstructionDidNotDeserialize", e.grantor, []solana.PublicKey{addr}, bad)
	})
}

func rebind(ix solana.Instruction, id solana.PublicKey) solana.Instruction {
	data, _ := ix.Data()
	return solana.NewInstruction(id, ix.Accounts(), data)
}
