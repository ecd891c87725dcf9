package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/deploy"
)

// keysCommands manage the program ids of a checkout, like `anchor keys`.
func keysCommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "keys",
		Usage: "program ids: list them, or make every place that names them agree with programs/keys/",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "print each program's id (from its keypair in programs/keys/)",
				Action: func(c *cli.Context) error {
					repo, err := deploy.FindRepo(".")
					if err != nil {
						return badInput(err)
					}
					for _, name := range programNames() {
						key, err := repo.Keypair(name)
						if errors.Is(err, os.ErrNotExist) {
							fmt.Fprintf(c.App.Writer, "%s: no keypair\n", name)
							continue
						}
						if err != nil {
							return badInput(err)
						}
						fmt.Fprintf(c.App.Writer, "%s: %s\n", name, key.PublicKey())
					}
					return nil
				},
			},
			{
				Name: "sync",
				Usage: "write each program's id (its keypair's public key) into Anchor.toml, its IDL and its sources, " +
					"then regenerate the Go bindings; with --new, make fresh keypairs first (new ids, e.g. for devnet)",
				ArgsUsage: "[NAME...]",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "new", Usage: "replace the keypairs with fresh ones first"},
				},
				Action: func(c *cli.Context) error {
					repo, err := deploy.FindRepo(".")
					if err != nil {
						return badInput(err)
					}
					names := c.Args().Slice()
					if len(names) == 0 {
						for _, name := range programNames() {
							if _, err := os.Stat(filepath.Join(repo.Root, "idl", name+".json")); err == nil {
								names = append(names, name)
							}
						}
					}
					changed := false
					for _, name := range names {
						if _, err := os.Stat(filepath.Join(repo.Root, "idl", name+".json")); errors.Is(err, os.ErrNotExist) {
							return badInputf("no program %q (no idl/%s.json)", name, name)
						}
						if c.Bool("new") {
							if _, err := repo.NewKeypair(name); err != nil {
								return err
							}
						}
						ch, err := repo.SyncID(name)
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "%s: %s", name, ch.New)
						if len(ch.Files) > 0 {
							changed = true
							fmt.Fprintf(c.App.Writer, " (was %s; rewrote %v)", ch.Old, ch.Files)
						}
						fmt.Fprintln(c.App.Writer)
					}
					if !changed {
						return nil
					}
					gen := exec.CommandContext(c.Context, "bash", filepath.Join(repo.Root, "scripts", "gen-bindings.sh"))
					gen.Dir, gen.Stdout, gen.Stderr = repo.Root, c.App.Writer, c.App.ErrWriter
					if err := gen.Run(); err != nil {
						return fmt.Errorf("regenerate the Go bindings (scripts/gen-bindings.sh): %w", err)
					}
					fmt.Fprintln(c.App.Writer, "ids synced and bindings regenerated; rebuild with scripts/build-programs.sh and go build ./clients/cmd/psyche-client")
					return nil
				},
			},
		},
	}}
}

// programNames lists the programs whose ids a checkout manages.
func programNames() []string {
	return []string{deploy.Authorizer, deploy.Coordinator, deploy.Treasurer, deploy.Competition}
}
