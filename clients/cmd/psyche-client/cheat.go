//go:build verificationtest

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/client"
)

// A binary built with -tags verificationtest can cheat, for the end-to-end
// verification tests (TestVerification*): release builds have no such flags.
func cheatFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cheat", Usage: "cheat this way (verification tests only): other-data, random-payload, copy-payload, wrong-replay-data, withhold-replay-data, false-accusation, copy-answer, false-no-data"},
		&cli.UintFlag{Name: "cheat-from-epoch", Usage: "start cheating in this epoch"},
	}
}

func applyCheat(c *cli.Context, cfg *client.Config) error {
	if c.String("cheat") == "" {
		return nil
	}
	cheat, err := client.ParseCheat(c.String("cheat"))
	if err != nil {
		return badInputf("--cheat: %w", err)
	}
	cfg.Cheat, cfg.CheatFrom = cheat, uint32(c.Uint("cheat-from-epoch"))
	return nil
}
