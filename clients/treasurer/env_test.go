package treasurer_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
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
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// env is one validator with the Authorizer, the Coordinator and the
// Treasurer deployed through the loader, a mint, and a Treasurer run created
// by authority (its main and join authority, and the mint's authority).
type env struct {
	t         *testing.T
	v         *localnet.Validator
	c         *chain.Client
	p         treasurer.Program
	auth      authorizer.Program
	authority solana.PrivateKey
	mint      solana.PublicKey
	decimals  uint8
	run       treasurer.Run
	// tokens are the token accounts whose balances a failed instruction must not change.
	tokens []solana.PublicKey
	// watched are accounts (participants, authorizations, the mint, the
	// coordinator account) whose data a failed instruction must not change.
	watched []solana.PublicKey
}

func setup(t *testing.T, runID string, tokenProgram solana.PublicKey, decimals uint8) *env {
	return setupRun(t, runID, tokenProgram, decimals, nil)
}

// setupRun is setup with a join deposit (nil: none; the authority grants joins).
func setupRun(t *testing.T, runID string, tokenProgram solana.PublicKey, decimals uint8, joinDeposit *uint64) *env {
	n := programtest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Coordinator, deploy.Treasurer)
	e := &env{t: t, v: n.Validator, c: n.Chain, auth: authorizer.Default(), decimals: decimals,
		p:         treasurer.Program{ID: n.IDs[deploy.Treasurer], Coordinator: coordinator.Program{ID: n.IDs[deploy.Coordinator]}},
		authority: localnettest.NewFundedKeypair(t, n.Validator, 10*solana.LAMPORTS_PER_SOL)}
	a := e.authority.PublicKey()
	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(e.ctx(), e.c, a, mint.PublicKey(), a, decimals, tokenProgram)
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(e.authority, ixs, mint)
	e.mint = mint.PublicKey()

	account := solana.NewWallet().PrivateKey
	params := treasurer.CreateParams{
		RunID: runID, MainAuthority: a, JoinAuthority: a, ClientVersion: "v1", Mint: e.mint, TokenProgram: tokenProgram,
	}
	if joinDeposit != nil {
		// The Run grants joins itself.
		params.JoinAuthority, params.JoinDeposit = solana.PublicKey{}, joinDeposit
	}
	ixs, run, err := e.p.CreateRun(e.ctx(), e.c, a, account.PublicKey(), params)
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(e.authority, ixs, account)
	e.run = run
	e.tokens = append(e.tokens, run.Collateral)
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

// tokenAccount creates owner's associated token account, minting amount into it.
func (e *env) tokenAccount(owner solana.PublicKey, amount uint64) solana.PublicKey {
	e.t.Helper()
	create, addr, err := treasurer.CreateTokenAccount(e.authority.PublicKey(), owner, e.mint, e.run.TokenProgram)
	if err != nil {
		e.t.Fatal(err)
	}
	ixs := []solana.Instruction{create}
	if amount > 0 {
		ixs = append(ixs, treasurer.MintTo(e.run.TokenProgram, e.mint, addr, e.authority.PublicKey(), amount))
	}
	e.mustSend(e.authority, ixs)
	e.tokens = append(e.tokens, addr)
	return addr
}

func (e *env) balance(addr solana.PublicKey) uint64 {
	e.t.Helper()
	acc, err := treasurer.FetchTokenAccount(e.ctx(), e.c, addr)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc.Amount
}

// snapshot is every tracked token balance and the Run account's bytes.
func (e *env) snapshot() string {
	e.t.Helper()
	out := ""
	for _, a := range e.tokens {
		out += fmt.Sprintf("%s=%d ", a, e.balance(a))
	}
	data, _, err := e.c.AccountData(e.ctx(), e.run.Address)
	if err != nil {
		e.t.Fatal(err)
	}
	out += string(data)
	for _, a := range e.watched {
		data, owner, err := e.c.AccountData(e.ctx(), a)
		switch {
		case errors.Is(err, chain.ErrAccountNotFound):
			out += fmt.Sprintf(" %s: none", a)
		case err != nil:
			e.t.Fatal(err)
		default:
			out += fmt.Sprintf(" %s (%s): %x", a, owner, data)
		}
	}
	return out
}

// expectError sends ixs, wants the named program error, and checks that no
// tokens moved and the Run did not change.
func (e *env) expectError(name string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	before := e.snapshot()
	// Two slots: a transaction identical to one sent in the same slot (same
	// blockhash) is the same transaction, and Send would report the first's outcome.
	time.Sleep(200 * time.Millisecond)
	_, err := e.send(payer, ixs, signers...)
	var te *chain.TxError
	if !errors.As(err, &te) || te.Name != name {
		e.t.Fatalf("want program error %s, got %v", name, err)
	}
	if e.snapshot() != before {
		e.t.Errorf("tokens moved or the run changed although the instruction failed with %s", name)
	}
}

func (e *env) state() *coordinator.State {
	e.t.Helper()
	s, err := e.run.Coordinator.FetchState(e.ctx(), e.c)
	if err != nil {
		e.t.Fatalf("fetch state: %v", err)
	}
	return s
}

// client is a simulated training client: a wallet, its join authorization,
// p2p key (join_run needs the proof that the joiner holds it) and token
// account.
type client struct {
	key    solana.PrivateKey
	auth   solana.PublicKey
	p2p    ed25519.PrivateKey
	tokens solana.PublicKey
	// stopped clients neither train nor report.
	stopped bool
}

func (e *env) newClients(n int) []*client {
	out := make([]*client, n)
	g := e.authority.PublicKey()
	for i := range out {
		c := &client{key: localnettest.NewFundedKeypair(e.t, e.v, solana.LAMPORTS_PER_SOL), p2p: newP2PKey(e.t)}
		create, addr, err := e.auth.Create(g, g, c.key.PublicKey(), authorizer.JoinRunScope)
		if err != nil {
			e.t.Fatal(err)
		}
		activate, err := e.auth.SetActive(g, addr, true)
		if err != nil {
			e.t.Fatal(err)
		}
		e.mustSend(e.authority, []solana.Instruction{create, activate})
		c.auth = addr
		c.tokens = e.tokenAccount(c.key.PublicKey(), 0)
		out[i] = c
	}
	return out
}

func (e *env) join(c *client) {
	e.t.Helper()
	e.mustSend(c.key, e.joinIxs(c, c.auth))
}

// joinIxs is c's join_run under authorization, with the proof that c holds
// its p2p key.
func (e *env) joinIxs(c *client, authorization solana.PublicKey) []solana.Instruction {
	e.t.Helper()
	ixs, err := e.run.Coordinator.JoinRunProven(c.key.PublicKey(), authorization, c.p2p)
	if err != nil {
		e.t.Fatal(err)
	}
	return ixs
}

func newP2PKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tick sends a tick, tolerating TickTooEarly (after which it waits a little).
func (e *env) tick() {
	e.t.Helper()
	_, err := e.send(e.authority, e.ix(e.run.Coordinator.Tick(e.authority.PublicKey())))
	var te *chain.TxError
	switch {
	case err == nil:
	case errors.As(err, &te) && te.Name == "TickTooEarly":
		time.Sleep(150 * time.Millisecond)
	default:
		e.t.Fatalf("tick: %v", err)
	}
}

func newBloom(t *testing.T, items int) *schedule.Bloom {
	bits, hashes := schedule.BloomParams(items)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	b, err := schedule.NewBloom(bits, hashes, salt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// playRound has every elected witness report the current round (every
// member delivered), with roles from clients/schedule as the program
// computes them, then ticks until the run leaves the round.
func (e *env) playRound(clients []*client) {
	e.t.Helper()
	r := e.witnessRound(clients)
	e.endRound(r)
}

// witnessRound has every elected witness report the current round and
// returns it (the run is then in its RoundWitness phase).
func (e *env) witnessRound(clients []*client) *coordinator.Round {
	e.t.Helper()
	s := e.state()
	r := coordinator.CurrentRound(s)
	round := coordinator.ScheduleRound(s, r)
	keys := map[solana.PublicKey]*client{}
	for _, c := range clients {
		keys[c.key.PublicKey()] = c
	}
	members := coordinator.Members(s)[:r.ClientsLen]
	for _, m := range members {
		role, err := round.Role(m.Index)
		if err != nil {
			e.t.Fatal(err)
		}
		c := keys[m.Signer]
		if !role.Witness || c == nil || c.stopped || m.State != coordinator.MemberHealthy {
			continue
		}
		participants, broadcasts := newBloom(e.t, len(members)), newBloom(e.t, len(members))
		for _, o := range members {
			if oc := keys[o.Signer]; oc != nil && !oc.stopped {
				participants.Add(o.Signer)
				broadcasts.Add(sha256.Sum256(append(o.Signer[:], byte(r.Step))))
			}
		}
		report := coordinator.WitnessReport{Step: r.Step, Index: m.Index, Participants: participants, Broadcasts: broadcasts}
		e.mustSend(c.key, e.ix(e.run.Coordinator.Witness(c.key.PublicKey(), report)))
	}
	return r
}

// endRound ticks until the run leaves round r.
func (e *env) endRound(r *coordinator.Round) {
	e.t.Helper()
	for {
		s := e.state()
		p := coordinator.Phase(s)
		if p != coordinator.RoundWitness && (p != coordinator.RoundTrain || coordinator.CurrentRound(s).Step != r.Step) {
			return
		}
		e.tick()
	}
}

// epoch has clients join, then advances the run until the epoch ends with
// the run in phase.
func (e *env) epoch(clients []*client, phase coordinator.RunState) *coordinator.State {
	e.t.Helper()
	for _, c := range clients {
		e.join(c)
	}
	start := e.state().Progress.Epoch
	return e.advance(clients, func(s *coordinator.State) bool {
		return coordinator.Phase(s) == phase && s.Progress.Epoch > start
	})
}

// advance reports warmup, plays rounds and ticks until done holds.
func (e *env) advance(clients []*client, done func(*coordinator.State) bool) *coordinator.State {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	warmed := map[uint32]bool{}
	for {
		s := e.state()
		switch p := coordinator.Phase(s); {
		case done(s):
			return s
		case p == coordinator.Warmup && !warmed[s.Progress.Epoch]:
			// Warmup ends once as many as will be elected witnesses reported.
			for _, c := range clients {
				if !c.stopped && coordinator.Phase(e.state()) == coordinator.Warmup {
					e.mustSend(c.key, e.ix(e.run.Coordinator.WarmupWitness(c.key.PublicKey())))
				}
			}
			warmed[s.Progress.Epoch] = true
		case p == coordinator.RoundTrain:
			e.playRound(clients)
		default:
			e.tick()
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run still %v", coordinator.Phase(s))
		}
	}
}

// testRun is config/smoke.toml: timers of seconds.
func testRun(t *testing.T) coordinator.UpdateParams {
	t.Helper()
	p, err := coordinator.LoadParams("../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
