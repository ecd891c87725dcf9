package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/wallet"
)

// programCommands replace `solana program ...` for deploying our programs
// through the BPF upgradeable loader.
func programCommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "program",
		Usage: "deploy, upgrade, inspect and close programs (BPF upgradeable loader)",
		Subcommands: []*cli.Command{
			programDeployCommand(),
			programUpgradeCommand(),
			programSetAuthorityCommand(),
			programShowCommand(),
			programCloseCommand(),
		},
	}}
}

func programDeployCommand() *cli.Command {
	return &cli.Command{
		Name: "deploy",
		Usage: "deploy or upgrade programs: the repo's built programs by name (default: all of them), " +
			"or one --so file at the id of --program-keypair; the wallet pays and holds the upgrade authority",
		ArgsUsage: "[NAME...]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "so", Usage: "an SBPF .so file to deploy instead of the repo's programs"},
			&cli.StringFlag{Name: "program-keypair", Usage: "keypair whose public key is the program id (with --so)"},
		}, signerFlags()...),
		Action: programDeploy,
	}
}

func programDeploy(c *cli.Context) error {
	d, err := newDeployer(c)
	if err != nil {
		return err
	}
	type target struct {
		name string
		elf  []byte
		key  solana.PrivateKey
	}
	var targets []target
	if so := c.String("so"); so != "" {
		if c.NArg() > 0 {
			return badInputf("give program names or --so, not both")
		}
		elf, err := readELF(so)
		if err != nil {
			return err
		}
		kp := c.String("program-keypair")
		if kp == "" {
			return badInputf("--so needs --program-keypair (the program's id)")
		}
		key, err := wallet.Load(kp)
		if err != nil {
			return badInput(err)
		}
		targets = append(targets, target{strings.TrimSuffix(filepath.Base(so), ".so"), elf, key})
	} else {
		repo, err := deploy.FindRepo(".")
		if err != nil {
			return badInput(err)
		}
		names := c.Args().Slice()
		if len(names) == 0 {
			names = []string{deploy.Authorizer, deploy.Coordinator, deploy.Treasurer, deploy.Competition}
		}
		for _, name := range names {
			elf, err := repo.ELF(name)
			if err != nil {
				if c.NArg() == 0 && errors.Is(err, os.ErrNotExist) {
					continue // deploy what is built when no name was asked for
				}
				return badInput(err)
			}
			key, err := repo.Keypair(name)
			if err != nil {
				return badInput(err)
			}
			targets = append(targets, target{name, elf, key})
		}
		if len(targets) == 0 {
			return badInputf("no built programs in %s; run scripts/build-programs.sh", filepath.Join(repo.Root, "programs", "target", "deploy"))
		}
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\tid\tbytes\taction")
	for _, t := range targets {
		action, err := d.Ensure(c.Context, t.key, d.Payer, t.elf, deploy.DeployOptions{})
		if err != nil {
			tw.Flush()
			return fmt.Errorf("%s: %w", t.name, err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.name, t.key.PublicKey(), len(t.elf), action)
	}
	return tw.Flush()
}

func programUpgradeCommand() *cli.Command {
	return &cli.Command{
		Name:  "upgrade",
		Usage: "replace a program's code; the wallet must be its upgrade authority",
		Flags: append([]cli.Flag{programIDFlag,
			&cli.StringFlag{Name: "so", Usage: "the new SBPF .so file (required)"},
		}, signerFlags()...),
		Action: programUpgrade,
	}
}

func programUpgrade(c *cli.Context) error {
	if err := requireFlags(c, programIDFlag.Name, "so"); err != nil {
		return err
	}
	d, id, err := programDeployer(c)
	if err != nil {
		return err
	}
	elf, err := readELF(c.String("so"))
	if err != nil {
		return err
	}
	if err := d.Upgrade(c.Context, id, d.Payer, elf); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "upgraded %s (%d bytes)\n", id, len(elf))
	return nil
}

func programSetAuthorityCommand() *cli.Command {
	return &cli.Command{
		Name:  "set-authority",
		Usage: "hand a program's upgrade authority to another key, or make it immutable with --final",
		Flags: append([]cli.Flag{programIDFlag,
			&cli.StringFlag{Name: "new-authority", Usage: "the new upgrade authority"},
			&cli.BoolFlag{Name: "final", Usage: "make the program immutable (irreversible)"},
		}, signerFlags()...),
		Action: programSetAuthority,
	}
}

func programSetAuthority(c *cli.Context) error {
	if err := requireFlags(c, programIDFlag.Name); err != nil {
		return err
	}
	d, id, err := programDeployer(c)
	if err != nil {
		return err
	}
	var next *solana.PublicKey
	switch s := c.String("new-authority"); {
	case c.Bool("final") == (s != ""):
		return badInputf("give exactly one of --new-authority and --final")
	case s != "":
		k, err := parsePubkey("--new-authority", s)
		if err != nil {
			return err
		}
		next = &k
	}
	if err := d.SetAuthority(c.Context, id, d.Payer, next); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "authority of %s: %s\n", id, authorityString(next))
	return nil
}

func programShowCommand() *cli.Command {
	return &cli.Command{
		Name:   "show",
		Usage:  "print a program's loader state as JSON",
		Flags:  append([]cli.Flag{programIDFlag}, clusterFlags()...),
		Action: programShow,
	}
}

func programShow(c *cli.Context) error {
	if err := requireFlags(c, programIDFlag.Name); err != nil {
		return err
	}
	client, err := newChainClient(c)
	if err != nil {
		return err
	}
	id, err := parsePubkey("--program-id", c.String(programIDFlag.Name))
	if err != nil {
		return err
	}
	info, err := deploy.New(client.RPCURL(), nil).Info(c.Context, id)
	if err != nil {
		return err
	}
	return printJSON(c, map[string]any{
		"program_id":       id.String(),
		"programdata":      deploy.ProgramDataAddress(id).String(),
		"authority":        authorityString(info.Authority),
		"last_deploy_slot": info.Slot,
		"data_len":         len(info.Code),
	})
}

func programCloseCommand() *cli.Command {
	return &cli.Command{
		Name:  "close",
		Usage: "close a program for good and return its lamports (its id can never be used again)",
		Flags: append([]cli.Flag{programIDFlag,
			&cli.StringFlag{Name: "recipient", Usage: "who receives the lamports (default: the wallet)"},
		}, signerFlags()...),
		Action: programClose,
	}
}

func programClose(c *cli.Context) error {
	if err := requireFlags(c, programIDFlag.Name); err != nil {
		return err
	}
	d, id, err := programDeployer(c)
	if err != nil {
		return err
	}
	to, err := pubkeyOrWallet(c, "recipient", d.Payer)
	if err != nil {
		return err
	}
	lamports, err := d.Close(c.Context, id, d.Payer, to)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "closed %s: %s SOL to %s\n", id, formatSOL(lamports), to)
	return nil
}

func authorityString(k *solana.PublicKey) string {
	if k == nil {
		return "none (immutable)"
	}
	return k.String()
}

// newDeployer checks the endpoint and loads the wallet that pays and signs.
func newDeployer(c *cli.Context) (*deploy.Client, error) {
	client, err := newChainClient(c)
	if err != nil {
		return nil, err
	}
	key, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	return deploy.New(client.RPCURL(), key), nil
}

// programDeployer is newDeployer and the program of --program-id.
func programDeployer(c *cli.Context) (*deploy.Client, solana.PublicKey, error) {
	d, err := newDeployer(c)
	if err != nil {
		return nil, solana.PublicKey{}, err
	}
	id, err := parsePubkey("--program-id", c.String(programIDFlag.Name))
	return d, id, err
}

func readELF(path string) ([]byte, error) {
	elf, err := os.ReadFile(path)
	if err != nil {
		return nil, badInputf("read program: %v", err)
	}
	if len(elf) < 4 || string(elf[:4]) != "\x7fELF" {
		return nil, badInputf("%s is not an ELF file", path)
	}
	return elf, nil
}
