// Command authorizer-bench deploys the Authorizer on a fresh local validator
// and prints the compute units each instruction consumes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/localnet"
)

func main() {
	flag.Parse() // no flags: -h prints the usage line instead of running
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "authorizer-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	net, err := programtest.Launch(ctx, localnet.Options{}, deploy.Authorizer)
	if err != nil {
		return err
	}
	defer net.Stop()
	c := net.Chain
	grantor := solana.NewWallet().PrivateKey
	grantee := solana.NewWallet().PrivateKey
	for _, k := range []solana.PrivateKey{grantor, grantee} {
		if _, err := c.Airdrop(ctx, k.PublicKey(), 200*solana.LAMPORTS_PER_SOL); err != nil {
			return err
		}
	}
	p := authorizer.Program{ID: net.IDs[deploy.Authorizer]}
	g, ge := grantor.PublicKey(), grantee.PublicKey()

	fmt.Printf("%-44s %8s\n", "instruction", "CU")
	measure := func(label string, payer solana.PrivateKey, ix solana.Instruction, err error) error {
		if err != nil {
			return err
		}
		cu, err := net.Measure(ctx, label, payer, []solana.Instruction{ix})
		if err != nil {
			return err
		}
		fmt.Printf("%-44s %8d\n", label, cu)
		return nil
	}
	create, addr, err := p.Create(g, g, ge, authorizer.JoinRunScope)
	if err := measure("authorization_create", grantor, create, err); err != nil {
		return err
	}
	ix, err := p.SetActive(g, addr, true)
	if err := measure("authorization_grantor_update (activate)", grantor, ix, err); err != nil {
		return err
	}
	keys := make([]solana.PublicKey, authorizer.MaxDelegates)
	for i := range keys {
		keys[i] = solana.NewWallet().PublicKey()
	}
	ix, err = p.UpdateDelegates(ge, ge, addr, false, keys[:1])
	if err := measure("authorization_grantee_update (+1 -> 1)", grantee, ix, err); err != nil {
		return err
	}
	ix, err = p.UpdateDelegates(ge, ge, addr, false, keys[1:20])
	if err := measure("authorization_grantee_update (+19 -> 20)", grantee, ix, err); err != nil {
		return err
	}
	ix, err = p.UpdateDelegates(ge, ge, addr, false, keys[20:])
	if err := measure("authorization_grantee_update (+12 -> 32)", grantee, ix, err); err != nil {
		return err
	}
	ix, err = p.UpdateDelegates(ge, ge, addr, true, nil)
	if err := measure("authorization_grantee_update (clear)", grantee, ix, err); err != nil {
		return err
	}
	ix, err = p.SetActive(g, addr, false)
	if err := measure("authorization_grantor_update (deactivate)", grantor, ix, err); err != nil {
		return err
	}
	ix, err = p.Close(g, g, addr)
	return measure("authorization_close", grantor, ix, err)
}
