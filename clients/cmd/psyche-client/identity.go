package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/mr-tron/base58"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/p2p/identity"
)

func identityCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:      "create-static-p2p-identity",
			Usage:     "write a new p2p identity (32 random bytes, an ed25519 seed) to SAVE_PATH",
			ArgsUsage: "SAVE_PATH",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return badInputf("create-static-p2p-identity takes exactly one argument, SAVE_PATH")
				}
				path := c.Args().First()
				key, err := identity.Create(path)
				if err != nil {
					return identityError(err)
				}
				fmt.Fprintf(c.App.Writer, "Wrote p2p identity to %s\n", path)
				return printIdentity(c.App.Writer, key)
			},
		},
		{
			Name:  "show-static-p2p-identity",
			Usage: "print the peer ID and public key of a p2p identity file (or of $" + identity.EnvSecretKey + ", hex)",
			Description: "The public key is what a client registers on-chain when it joins a run;\n" +
				"other clients derive its libp2p peer ID from it.",
			ArgsUsage: "[IDENTITY_SECRET_KEY_PATH]",
			Action: func(c *cli.Context) error {
				if c.NArg() > 1 {
					return badInputf("show-static-p2p-identity takes at most one argument, IDENTITY_SECRET_KEY_PATH")
				}
				var key crypto.PrivKey
				if path := c.Args().First(); path != "" {
					k, err := identity.Load(path)
					if err != nil {
						return identityError(err)
					}
					key = k
				} else {
					k, ok, err := identity.FromEnv()
					if err != nil {
						return identityError(err)
					}
					if !ok {
						return badInputf("give IDENTITY_SECRET_KEY_PATH or set %s", identity.EnvSecretKey)
					}
					key = k
				}
				return printIdentity(c.App.Writer, key)
			},
		},
	}
}

// identityError marks malformed identity input as bad input (exit code 2).
func identityError(err error) error {
	if errors.Is(err, identity.ErrBadIdentity) {
		return badInput(err)
	}
	return err
}

func printIdentity(w io.Writer, key crypto.PrivKey) error {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return fmt.Errorf("derive peer id: %w", err)
	}
	pub, err := identity.PublicKey(key)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "peer id:        %s\npublic key:     %s\npublic key hex: %s\n", id, base58.Encode(pub), hex.EncodeToString(pub))
	return err
}
