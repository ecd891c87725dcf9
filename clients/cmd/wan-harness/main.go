// Command wan-harness runs Psyche training runs and the p2p layer over
// simulated wide-area links on one Linux machine: every client in its own
// network namespace behind an access link with its own bandwidth, RTT and
// loss. See README.md in this directory.
//
//	wan-harness selftest [-shapes ...]     measure the shaper between two namespaces
//	wan-harness rounds   [...]             scenario 1: round time, overhead, bytes, digests
//	wan-harness latejoin [...]             scenario 2: a joiner downloads a model from 4 peers
//	wan-harness churn    [...]             scenario 3: a third of the clients leave/die each epoch
//	wan-harness nat      [...]             scenario 4: two clients behind NAT
//	wan-harness modes    [...]             scenario 5: DeMo vs SparseLoCo at 10 Mbit/s
//	wan-harness scale    [...]             how many clients one machine sustains
//	wan-harness ci                         a short shaped run for CI
//	wan-harness bench                      every scenario, one after another
//	wan-harness cleanup [-all]             remove leftovers of killed instances
//	wan-harness peer ...                   (internal) a p2p node inside a namespace
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: wan-harness COMMAND [flags]   (COMMAND -h for its flags)")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if commands[n].summary != "" {
			fmt.Fprintf(os.Stderr, "  %-9s %s\n", n, commands[n].summary)
		}
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "wan-harness: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal while cleaning up: tear down at once.
		<-ctx.Done()
		stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		fmt.Fprintln(os.Stderr, "wan-harness: second signal: removing everything now")
		emergencyClose()
		os.Exit(130)
	}()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				emergencyClose()
				panic(r)
			}
		}()
		return cmd.run(ctx, os.Args[2:])
	}()
	stop()
	emergencyClose()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "wan-harness: interrupted; everything removed")
		os.Exit(130)
	default:
		fmt.Fprintln(os.Stderr, "wan-harness:", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// Every topology that is open, for the panic and second-signal paths.
var openTopos struct {
	sync.Mutex
	list []*Topo
}

func trackTopo(t *Topo) {
	openTopos.Lock()
	defer openTopos.Unlock()
	openTopos.list = append(openTopos.list, t)
}

func emergencyClose() {
	openTopos.Lock()
	list := slices.Clone(openTopos.list)
	openTopos.Unlock()
	for _, t := range list {
		t.Close()
	}
}
