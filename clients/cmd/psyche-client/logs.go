package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/idl"
)

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "follow the logs of transactions that mention the given programs (default: ours) until Ctrl-C",
		ArgsUsage: "[PROGRAM_ID...]",
		Flags:     []cli.Flag{rpcFlag, wsRPCFlag},
		Action: func(c *cli.Context) error {
			var programs []solana.PublicKey
			for _, a := range c.Args().Slice() {
				p, err := parsePubkey("PROGRAM_ID", a)
				if err != nil {
					return err
				}
				programs = append(programs, p)
			}
			if len(programs) == 0 {
				for _, name := range idl.Names() {
					d, err := idl.Load(name)
					if err != nil {
						return err
					}
					id, err := d.ProgramID()
					if err != nil {
						return err
					}
					programs = append(programs, id)
				}
			}
			client, err := newChainClient(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			fmt.Fprintf(c.App.ErrWriter, "following logs of %d program(s) on %s; Ctrl-C stops\n", len(programs), client.WSURL())
			return client.FollowLogs(ctx, programs, log, func(e chain.LogEntry) {
				status := "ok"
				if e.Err != nil {
					status = fmt.Sprintf("failed: %v", e.Err)
				}
				fmt.Fprintf(c.App.Writer, "slot %d  %s  %s\n", e.Slot, e.Signature, status)
				for _, l := range e.Logs {
					fmt.Fprintf(c.App.Writer, "    %s\n", l)
				}
			})
		},
	}
}
