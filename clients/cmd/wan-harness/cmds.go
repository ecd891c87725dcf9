package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func init() {
	register("selftest", "measure the shaper: RTT, loss, rate and TCP goodput between two namespaces", cmdSelftest)
	register("cleanup", "remove the namespaces and processes of killed harness instances (-all: of every instance)", cmdCleanup)
}

// newFlags makes a flag set whose -h prints the command's flags.
func newFlags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: wan-harness %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "wan-harness %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return errUsage
	}
	return nil
}

func cmdSelftest(ctx context.Context, args []string) error {
	fs := newFlags("selftest", "[-shapes S,S,...] [-duration 4s]")
	shapes := fs.String("shapes", "unshaped,10/10ms/0,100/50ms/0.5,1000/200ms/2", "shapes to measure, RATE_MBIT/RTT/LOSS_PERCENT, comma-separated")
	d := fs.Duration("duration", 4*time.Second, "length of each measurement")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var list []Shape
	for _, s := range strings.Split(*shapes, ",") {
		sh, err := parseShape(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		list = append(list, sh)
	}
	rows, err := runSelftest(ctx, list, *d, os.Stderr)
	if len(rows) > 0 {
		fmt.Println("\nshaper selftest (two clients with the same link shape; RTT and loss client to client):")
		printSelftest(os.Stdout, rows)
	}
	return err
}

func cmdCleanup(ctx context.Context, args []string) error {
	fs := newFlags("cleanup", "[-all]")
	all := fs.Bool("all", false, "also stop running harness instances and remove their namespaces")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("cleanup needs root")
	}
	var n int
	if *all {
		n = cleanupAll(os.Stderr)
	} else {
		n = cleanupStale(os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "wan-harness: cleanup removed %d namespaces\n", n)
	return nil
}
