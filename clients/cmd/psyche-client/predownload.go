package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/hub"
)

func predownloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "predownload",
		Usage: "fetch a run's training data (--data, into --data-cache-dir) and hub checkpoint (--model, into --checkpoint-dir) ahead of time, verified",
		Flags: []cli.Flag{runIDFlag, rpcFlag, wsRPCFlag, coordinatorProgramFlag, dataCacheDirFlag,
			&cli.BoolFlag{Name: "data", Usage: "fetch the run's dataset", Value: true},
			&cli.BoolFlag{Name: "model", Usage: "fetch the run's hub checkpoint into --checkpoint-dir (a run without one starts from its seed, or shares the model among its members: nothing to fetch)"},
			&cli.StringFlag{Name: "checkpoint-dir", Usage: "where train --checkpoint-dir looks for the run's hub checkpoint (required with --model when the run has one)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlags(c, runIDFlag.Name); err != nil {
				return err
			}
			if c.String(dataCacheDirFlag.Name) == "" && c.Bool("data") {
				return badInputf("--%s is required to keep the data", dataCacheDirFlag.Name)
			}
			_, _, s, err := readRun(c)
			if err != nil {
				return err
			}
			if c.Bool("model") {
				if err := predownloadModel(c, s); err != nil {
					return err
				}
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

// predownloadModel fetches the run's announced hub checkpoint, if it has one,
// into --checkpoint-dir as <revision>.safetensors, where train looks first.
// A p2p run keeps its hub repo, and the revision its checkpointers announce,
// for joiners that find no member holding the model.
func predownloadModel(c *cli.Context, s *coordinator.State) error {
	w := c.App.Writer
	kind := s.Model.CheckpointKind
	switch {
	case kind == coordinator.CheckpointEphemeral,
		kind == coordinator.CheckpointP2P && (s.Model.CheckpointRepo[0] == 0 || s.Model.CheckpointRevision[0] == 0):
		fmt.Fprintln(w, "model: the run's members share it when you join; nothing to fetch ahead")
		return nil
	case kind == coordinator.CheckpointHub, kind == coordinator.CheckpointP2P:
	default:
		return fmt.Errorf("model: the run has checkpoint kind %d, which this client does not know", kind)
	}
	repo := coordinator.FixedString(s.Model.CheckpointRepo[:])
	rev := coordinator.FixedString(s.Model.CheckpointRevision[:])
	if rev == "" {
		fmt.Fprintln(w, "model: the run starts from its seed weights; nothing to fetch")
		return nil
	}
	if _, err := hub.FileURL(repo, rev); err != nil {
		return fmt.Errorf("model: the run's hub checkpoint cannot be fetched: %w", err)
	}
	dir := c.String("checkpoint-dir")
	if dir == "" {
		return badInputf("--checkpoint-dir is required: the run's model is revision %s on the hub %s", rev, repo)
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	path, err := hub.Fetch(c.Context, repo, rev, dir, hub.FetchOptions{Log: log})
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	fmt.Fprintf(w, "model: %s (revision %s from %s, verified)\n", path, rev, repo)
	return nil
}
