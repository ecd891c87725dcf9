package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/wallet"
	"github.com/psyche-go/psyche/idl"
)

func walletCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:      "keygen",
			Usage:     "create a keypair file in the solana-keygen JSON format",
			ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "outfile", Aliases: []string{"o"}, Usage: "where to write it (default: the default wallet path)"},
				&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "overwrite an existing file"},
			},
			Action: func(c *cli.Context) error {
				path := c.String("outfile")
				if path == "" {
					p, err := wallet.DefaultPath()
					if err != nil {
						return err
					}
					path = p
				}
				key := solana.NewWallet().PrivateKey
				if err := wallet.Save(path, key, c.Bool("force")); err != nil {
					return badInput(err)
				}
				fmt.Fprintf(c.App.Writer, "Wrote new keypair to %s\npubkey: %s\n", path, key.PublicKey())
				return nil
			},
		},
		{
			Name:      "pubkey",
			Usage:     "print the public key of a keypair file",
			ArgsUsage: "[KEYPAIR_PATH]",
			Action: func(c *cli.Context) error {
				key, err := loadWallet(c.Args().First())
				if err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, key.PublicKey())
				return nil
			},
		},
		{
			Name:      "airdrop",
			Usage:     "request SOL from the cluster's faucet (localnet, devnet)",
			ArgsUsage: "SOL [PUBKEY]",
			Flags:     signerFlags(),
			Action: func(c *cli.Context) error {
				lamports, err := parseSOL(c.Args().First())
				if err != nil {
					return err
				}
				to, err := targetKey(c, c.Args().Get(1))
				if err != nil {
					return err
				}
				client, err := newChainClient(c)
				if err != nil {
					return err
				}
				sig, err := client.Airdrop(c.Context, to, lamports)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "Signature: %s\n", sig)
				return printBalance(c, client, to)
			},
		},
		{
			Name:      "balance",
			Usage:     "print the SOL balance of an account",
			ArgsUsage: "[PUBKEY]",
			Flags:     signerFlags(),
			Action: func(c *cli.Context) error {
				key, err := targetKey(c, c.Args().First())
				if err != nil {
					return err
				}
				client, err := newChainClient(c)
				if err != nil {
					return err
				}
				return printBalance(c, client, key)
			},
		},
	}
}

// loadWallet resolves (flag, $WALLET_FILE, default) and loads a keypair; any
// failure is bad input.
func loadWallet(flagPath string) (solana.PrivateKey, error) {
	path, err := wallet.Resolve(flagPath)
	if err != nil {
		return nil, badInput(err)
	}
	key, err := wallet.Load(path)
	if err != nil {
		return nil, badInput(err)
	}
	return key, nil
}

// loadSigner is loadWallet for a key that will sign: a keypair file that
// group or others may access is refused unless --allow-insecure-keyfile.
func loadSigner(c *cli.Context) (solana.PrivateKey, error) {
	path, err := wallet.Resolve(c.String(walletFlag.Name))
	if err != nil {
		return nil, badInput(err)
	}
	if !c.Bool(insecureKeyfileFlag.Name) {
		if err := wallet.CheckPrivate(path); err != nil {
			return nil, badInput(err)
		}
	}
	return loadWallet(path)
}

// targetKey is the account a command is about: the given pubkey, else the wallet's.
func targetKey(c *cli.Context, arg string) (solana.PublicKey, error) {
	if arg != "" {
		return parsePubkey("PUBKEY", arg)
	}
	key, err := loadWallet(c.String(walletFlag.Name))
	if err != nil {
		return solana.PublicKey{}, err
	}
	return key.PublicKey(), nil
}

// pubkeyOrWallet is the pubkey in flag name, else the wallet's.
func pubkeyOrWallet(c *cli.Context, name string, wallet solana.PrivateKey) (solana.PublicKey, error) {
	if s := c.String(name); s != "" {
		return parsePubkey("--"+name, s)
	}
	return wallet.PublicKey(), nil
}

func parsePubkey(what, s string) (solana.PublicKey, error) {
	pk, err := solana.PublicKeyFromBase58(strings.TrimSpace(s))
	if err != nil {
		return solana.PublicKey{}, badInputf("%s %q is not a base58 public key", what, s)
	}
	return pk, nil
}

// parseSOL converts a decimal SOL amount into lamports without float rounding.
func parseSOL(s string) (uint64, error) {
	if s == "" {
		return 0, badInputf("missing the amount of SOL")
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 {
		return 0, badInputf("amount %q has more than 9 decimals (1 lamport = 0.000000001 SOL)", s)
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil && whole != "" {
		return 0, badInputf("amount %q is not a number of SOL", s)
	}
	f := uint64(0)
	if frac != "" {
		if f, err = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64); err != nil {
			return 0, badInputf("amount %q is not a number of SOL", s)
		}
	}
	if w > (math.MaxUint64-f)/solana.LAMPORTS_PER_SOL {
		return 0, badInputf("amount %q is too large", s)
	}
	lamports := w*solana.LAMPORTS_PER_SOL + f
	if lamports == 0 {
		return 0, badInputf("amount must be more than 0")
	}
	return lamports, nil
}

func newChainClient(c *cli.Context) (*chain.Client, error) {
	client, err := chain.New(c.String(rpcFlag.Name), c.String(wsRPCFlag.Name))
	if err != nil {
		return nil, badInput(err)
	}
	if err := client.Ping(c.Context); err != nil {
		return nil, badInput(err)
	}
	tables, err := idl.ErrorTables()
	if err != nil {
		return nil, err
	}
	client.Errors = tables
	return client, nil
}

func printBalance(c *cli.Context, client *chain.Client, key solana.PublicKey) error {
	lamports, err := client.Balance(c.Context, key)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s SOL\n", formatSOL(lamports))
	return nil
}

func formatSOL(lamports uint64) string {
	s := fmt.Sprintf("%d.%09d", lamports/solana.LAMPORTS_PER_SOL, lamports%solana.LAMPORTS_PER_SOL)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
