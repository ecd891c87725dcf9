package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
)

func predownloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "predownload",
		Usage: "fetch a run's training data into --data-cache-dir ahead of time (verified against the run's pinned root)",
		Flags: []cli.Flag{runIDFlag, rpcFlag, wsRPCFlag, coordinatorProgramFlag, dataCacheDirFlag,
			&cli.BoolFlag{Name: "data", Usage: "fetch the run's dataset", Value: true},
			&cli.BoolFlag{Name: "model", Usage: "fetch the model (a run's model comes from its seed or, when joining later, from its members: nothing to fetch ahead)"},
		},
		Action: func(c *cli.Context) error {
			if c.String(dataCacheDirFlag.Name) == "" && c.Bool("data") {
				return badInputf("--%s is required to keep the data", dataCacheDirFlag.Name)
			}
			a, err := newReadCtx(c)
			if err != nil {
				return err
			}
			run, err := a.open(c)
			if err != nil {
				return err
			}
			s, err := run.FetchState(c.Context, a.client)
			if err != nil {
				return err
			}
			if c.Bool("model") {
				fmt.Fprintln(c.App.Writer, "model: built from the run's seed, or loaded from the run's members when joining after step 1; nothing to fetch ahead")
			}
			if !c.Bool("data") {
				return nil
			}
			loc := coordinator.FixedString(s.Model.DataLocation[:])
			if !strings.HasPrefix(loc, "http://") && !strings.HasPrefix(loc, "https://") {
				fmt.Fprintf(c.App.Writer, "data: the run reads a local directory (%s); nothing to fetch\n", loc)
				return nil
			}
			p, err := provider.Open(c.Context, []provider.Source{{Location: loc, Root: runDataRoot(s)}},
				provider.HTTPOptions{CacheDir: c.String(dataCacheDirFlag.Name)})
			if err != nil {
				return err
			}
			defer p.Close()
			n := p.Info().NumSequences
			const batch = 1024
			for start := uint64(0); start < n; start += batch {
				idx := make([]uint64, min(batch, n-start))
				for i := range idx {
					idx[i] = start + uint64(i)
				}
				if _, err := p.Sequences(c.Context, idx); err != nil {
					return fmt.Errorf("data: %w", err)
				}
			}
			fmt.Fprintf(c.App.Writer, "data: %d sequences of %d tokens from %s verified and cached in %s\n", n, p.Info().SeqLen, loc, c.String(dataCacheDirFlag.Name))
			return nil
		},
	}
}
