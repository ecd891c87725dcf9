//go:build !verificationtest

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/client"
)

// Release builds cannot cheat (cheat.go, built for the verification tests).
func cheatFlags() []cli.Flag { return nil }

func applyCheat(*cli.Context, *client.Config) error { return nil }
