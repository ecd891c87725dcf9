// Command psyche-client trains in, and administers, decentralized training runs
// coordinated by the Psyche programs on Solana.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// Exit codes. Bad input (flags, files, keys, URLs) is 2 so scripts can tell it
// from a failure of the run or the chain.
const (
	exitFailure  = 1
	exitBadInput = 2
)

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	app := newApp()
	var notFound error
	app.CommandNotFound = func(_ *cli.Context, name string) {
		notFound = badInputf("no command %q; see psyche-client --help", name)
	}
	err := app.Run(args)
	if err == nil {
		err = notFound
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "psyche-client: %v\n", err)
	var bad *badInputError
	if errors.As(err, &bad) {
		return exitBadInput
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) && coder.ExitCode() != 0 {
		return coder.ExitCode()
	}
	return exitFailure
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "psyche-client",
		Usage:                "train in, and administer, Psyche runs on Solana",
		EnableBashCompletion: true,
		Commands:             commands(),
		OnUsageError:         usageError,
		ExitErrHandler:       func(*cli.Context, error) {},
	}
	app.Commands = append(app.Commands, &cli.Command{
		Name:   "print-all-help",
		Usage:  "print the help of every command as Markdown (docs/cli.md is generated with it)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			md, err := newApp().ToMarkdown()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, md)
			return err
		},
	})
	setUsageErrors(app.Commands)
	return app
}

// usageError reports flag and argument mistakes, once, as bad input.
func usageError(_ *cli.Context, err error, _ bool) error { return badInput(err) }

func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = usageError
		}
		if c.Action != nil && !strings.HasPrefix(c.ArgsUsage, "-- ") { // "-- ARGS": passed on, flags included
			c.Action = rejectLateFlags(c.Action)
		}
		setUsageErrors(c.Subcommands)
	}
}

// rejectLateFlags fails a command given a flag after a positional argument:
// urfave/cli stops reading flags there, and would otherwise run with the
// flag's default (e.g. another cluster than the --rpc the user typed).
func rejectLateFlags(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		for _, a := range c.Args().Slice() {
			if len(a) > 1 && a[0] == '-' {
				return badInputf("%s comes after an argument; put flags before arguments (psyche-client %s --help)", a, commandName(c))
			}
		}
		return action(c)
	}
}

// commands lists every subcommand; each concern keeps its commands in its own file.
func commands() []*cli.Command {
	var all []*cli.Command
	for _, group := range [][]*cli.Command{
		walletCommands(),
		authorizerCommands(),
		dataCommands(),
		modelCommands(),
		hubCommands(),
		{logsCommand()},
		programCommands(),
		keysCommands(),
		identityCommands(),
		coordinatorCommands(),
		treasurerCommands(),
		{trainCommand(), predownloadCommand(), verifyCommand(), sampleCommand(), evalCommand()},
		{runManagerCommand(), explorerCommand()},
		devCommands(),
	} {
		all = append(all, group...)
	}
	return all
}

// badInputError marks an error caused by what the user gave us.
type badInputError struct{ err error }

func (e *badInputError) Error() string { return e.err.Error() }
func (e *badInputError) Unwrap() error { return e.err }

// badInput wraps err so the process exits with exitBadInput.
func badInput(err error) error { return &badInputError{err} }

// badInputf formats a bad-input error.
func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }
