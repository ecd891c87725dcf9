package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/deploy"
)

// devCommands back the `just dev` recipes (scripts/dev/) where a shell
// script alone would not do.
func devCommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "dev",
		Usage: "helpers of the `just dev` recipes",
		Subcommands: []*cli.Command{{
			Name: "close-programs",
			Usage: "close this checkout's programs (ids from programs/keys/) and every loader buffer whose authority is the wallet, " +
				"sending their lamports to the wallet; asks y/N first (irreversible: closed program ids cannot be reused)",
			Flags: []cli.Flag{
				rpcFlag, wsRPCFlag, walletFlag, insecureKeyfileFlag,
				&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask"},
			},
			Action: closeDevPrograms,
		}},
	}}
}

// closable is a loader account the wallet can close.
type closable struct {
	what     string // "program psyche_coordinator" or "buffer"
	address  solana.PublicKey
	lamports uint64
}

func closeDevPrograms(c *cli.Context) error {
	d, err := newDeployer(c)
	if err != nil {
		return err
	}
	repo, err := deploy.FindRepo(".")
	if err != nil {
		return badInput(err)
	}
	me := d.Payer.PublicKey()
	var todo []closable
	for _, name := range programNames() {
		key, err := repo.Keypair(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return badInput(err)
		}
		id := key.PublicKey()
		if _, err := d.RPC.GetAccountInfo(c.Context, id); errors.Is(err, rpc.ErrNotFound) {
			fmt.Fprintf(c.App.Writer, "%s %s: not deployed\n", name, id)
			continue
		} else if err != nil {
			return fmt.Errorf("read %s: %w", id, err)
		}
		info, err := d.Info(c.Context, id)
		if err != nil {
			fmt.Fprintf(c.App.Writer, "%s %s: skipped, %v (closed already?)\n", name, id, err)
			continue
		}
		if info.Authority == nil || !info.Authority.Equals(me) {
			fmt.Fprintf(c.App.Writer, "%s %s: skipped, its upgrade authority is %s, not the wallet\n", name, id, authorityString(info.Authority))
			continue
		}
		bal, err := d.RPC.GetBalance(c.Context, info.ProgramData, rpc.CommitmentConfirmed)
		if err != nil {
			return fmt.Errorf("read the balance of %s: %w", info.ProgramData, err)
		}
		todo = append(todo, closable{"program " + name, id, bal.Value})
	}
	buffers, err := d.Buffers(c.Context, me)
	if err != nil {
		return err
	}
	for _, b := range buffers {
		todo = append(todo, closable{"buffer", b.Address, b.Lamports})
	}
	if len(todo) == 0 {
		fmt.Fprintf(c.App.Writer, "nothing to close: no program or buffer of %s on %s\n", me, c.String(rpcFlag.Name))
		return nil
	}
	var total uint64
	for _, t := range todo {
		fmt.Fprintf(c.App.Writer, "%s %s: %s SOL\n", t.what, t.address, formatSOL(t.lamports))
		total += t.lamports
	}
	if !c.Bool("yes") {
		fmt.Fprintf(c.App.Writer, "Close these %d accounts for good and send %s SOL to %s? Closed program ids can never be used again. [y/N] ",
			len(todo), formatSOL(total), me)
		// A read error or end of input leaves the answer short of "y": no.
		answer, _ := bufio.NewReader(c.App.Reader).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(c.App.Writer, "nothing closed")
			return nil
		}
	}
	var recovered uint64
	for _, t := range todo {
		if t.what == "buffer" {
			err = d.CloseBuffer(c.Context, t.address, d.Payer, me)
		} else {
			_, err = d.Close(c.Context, t.address, d.Payer, me)
		}
		if err != nil {
			return fmt.Errorf("close %s %s (%s SOL recovered before it): %w", t.what, t.address, formatSOL(recovered), err)
		}
		recovered += t.lamports
		fmt.Fprintf(c.App.Writer, "closed %s %s\n", t.what, t.address)
	}
	fmt.Fprintf(c.App.Writer, "recovered %s SOL to %s\n", formatSOL(recovered), me)
	return nil
}
