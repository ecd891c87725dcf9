// Package programtest is the one harness that starts a local validator with
// the repo's built programs (programs/target/deploy) deployed at the ids of
// their keypairs (programs/keys) through the BPF upgradeable loader, as the
// dev recipes deploy them on devnet, so that program tests and benchmarks
// exercise the loader's deploy-time checks too.
//
// Tests call Start; commands (the *-bench benchmarks) call Launch and take
// the compute units of transactions with Net.Measure. Tests that
// start their own validator deploy onto it with Deploy and talk to it with
// Chain. A missing validator (node or the localnet npm packages) or program
// fails with an error that says how to install or build it
// (scripts/setup.sh, scripts/build-programs.sh).
package programtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/idl"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// Net is a local validator with programs deployed on it.
type Net struct {
	*localnet.Validator
	// Chain talks to the validator and names the errors of every IDL'd program.
	Chain *chain.Client
	// IDs are the deployed programs' ids by name (deploy.Authorizer, ...).
	IDs map[string]solana.PublicKey
}

// Measure sends ixs paid by payer and signed by signers too, and returns the
// compute units the transaction consumed; a failure is reported under label.
func (n *Net) Measure(ctx context.Context, label string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) (uint64, error) {
	sig, err := n.Chain.Send(ctx, payer, ixs, signers...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", label, err)
	}
	return n.Chain.ComputeUnits(ctx, sig)
}

// deployTimeout bounds the deployment of one program.
const deployTimeout = 2 * time.Minute

// Launch starts a validator with opts and deploys the named programs, paid
// for and upgradeable by a fresh funded key. The caller stops the validator
// (Net.Stop).
func Launch(ctx context.Context, opts localnet.Options, names ...string) (*Net, error) {
	progs, err := load(names)
	if err != nil {
		return nil, err
	}
	v, err := localnet.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	n, err := deployOn(ctx, v, progs)
	if err != nil {
		_ = v.Stop()
		return nil, err
	}
	return n, nil
}

// Start is Launch for a test: it fails the test when the validator cannot
// start or a program is not built or not deployed, stops the validator in
// t.Cleanup, and prints the validator's log when the test fails.
func Start(t testing.TB, opts localnet.Options, names ...string) *Net {
	t.Helper()
	if err := localnet.CheckInstalled(); err != nil {
		t.Fatalf("%v", err)
	}
	progs, err := load(names)
	if err != nil {
		t.Fatal(err)
	}
	v := localnettest.Start(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(len(names), 1))*deployTimeout)
	defer cancel()
	n, err := deployOn(ctx, v, progs)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Deploy deploys one program on a validator the test started and returns
// its id. The upgrade authority is a fresh funded key.
func Deploy(t testing.TB, v *localnet.Validator, name string) solana.PublicKey {
	t.Helper()
	progs, err := load([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deployTimeout)
	defer cancel()
	n, err := deployOn(ctx, v, progs)
	if err != nil {
		t.Fatal(err)
	}
	return n.IDs[name]
}

// Chain returns a client for v that names the errors of every IDL'd program.
func Chain(t testing.TB, v *localnet.Validator) *chain.Client {
	t.Helper()
	c, err := newChain(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newChain(v *localnet.Validator) (*chain.Client, error) {
	c, err := chain.New(v.RPCURL, v.WSURL)
	if err != nil {
		return nil, err
	}
	if c.Errors, err = idl.ErrorTables(); err != nil {
		return nil, err
	}
	c.PollInterval = 50 * time.Millisecond
	return c, nil
}

// program is a built program and the keypair of its id.
type program struct {
	name string
	key  solana.PrivateKey
	elf  []byte
}

// load reads the named programs from the checkout, so that a missing build
// is reported before a validator starts.
func load(names []string) ([]program, error) {
	if len(names) == 0 {
		return nil, nil
	}
	repo, err := deploy.FindRepo(".")
	if err != nil {
		return nil, err
	}
	progs := make([]program, len(names))
	for i, name := range names {
		p := &progs[i]
		p.name = name
		if p.elf, err = repo.ELF(name); err != nil {
			return nil, err
		}
		if p.key, err = repo.Keypair(name); err != nil {
			return nil, err
		}
	}
	return progs, nil
}

// deployOn deploys progs on v, paid for and upgradeable by a fresh key
// holding 100 SOL per program.
func deployOn(ctx context.Context, v *localnet.Validator, progs []program) (*Net, error) {
	c, err := newChain(v)
	if err != nil {
		return nil, err
	}
	n := &Net{Validator: v, Chain: c, IDs: make(map[string]solana.PublicKey, len(progs))}
	if len(progs) == 0 {
		return n, nil
	}
	authority := solana.NewWallet().PrivateKey
	if _, err := c.Airdrop(ctx, authority.PublicKey(), uint64(len(progs))*100*solana.LAMPORTS_PER_SOL); err != nil {
		return nil, err
	}
	d := deploy.NewClient(c, authority)
	for _, p := range progs {
		if err := d.Deploy(ctx, p.key, authority, p.elf, deploy.DeployOptions{}); err != nil {
			return nil, fmt.Errorf("deploy %s: %w", p.name, err)
		}
		n.IDs[p.name] = p.key.PublicKey()
	}
	return n, nil
}
