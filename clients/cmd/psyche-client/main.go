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
		OnUsageError:         usageErrorFor(nil),
		ExitErrHandler:       func(*cli.Context, error) {},
	}
	app.Commands = append(app.Commands, &cli.Command{
		Name:   "print-all-help",
		Usage:  "print the help of every command as Markdown (docs/cli.md is generated with it)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			doc := newApp()
			documentEnvVars(doc.Commands)
			md, err := doc.ToMarkdown()
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

// documentEnvVars makes the Markdown reference name each flag's environment
// variables, as --help does (urfave/cli's Markdown leaves them out).
func documentEnvVars(cmds []*cli.Command) {
	for _, c := range cmds {
		for i, f := range c.Flags {
			if d, ok := f.(cli.DocGenerationFlag); ok && len(d.GetEnvVars()) > 0 {
				c.Flags[i] = envDocFlag{d}
			}
		}
		documentEnvVars(c.Subcommands)
	}
}

// envDocFlag is a flag whose documented usage names its environment variables.
type envDocFlag struct{ cli.DocGenerationFlag }

func (f envDocFlag) GetUsage() string {
	return f.DocGenerationFlag.GetUsage() + " (environment: $" + strings.Join(f.GetEnvVars(), ", $") + ")"
}

func (f envDocFlag) IsVisible() bool {
	v, ok := f.DocGenerationFlag.(cli.VisibleFlag)
	return !ok || v.IsVisible()
}

// usageErrorFor reports the flag and argument mistakes of a command (nil:
// the app), once, as bad input. Go's flag package spells flags with one dash
// (-run-idd); the message spells them as they are typed and suggests the
// command's nearest flag for an unknown one.
func usageErrorFor(cmd *cli.Command) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		var flags []cli.Flag
		if cmd != nil {
			flags = cmd.Flags
		}
		return badInput(errors.New(usageMessage(err.Error(), flags)))
	}
}

// usageMessage rewrites the flag package's messages about a flag.
func usageMessage(msg string, flags []cli.Flag) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		out := "unknown flag " + dashed(name)
		if s := nearestFlag(name, flags); s != "" {
			out += "; did you mean " + dashed(s) + "?"
		}
		return out
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag " + dashed(name) + " needs a value"
	}
	// invalid value "x" for flag -name: why
	if before, after, ok := strings.Cut(msg, " for flag -"); ok {
		name, why, _ := strings.Cut(after, ": ")
		return before + " for flag " + dashed(name) + ": " + why
	}
	return msg
}

// dashed spells a flag name as typed: -w, --run-id.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// nearestFlag is the name of flags closest to name (urfave/cli's
// suggestion), when it is close enough to be a typo: at most a third of the
// name's letters (and at least 2) edited.
func nearestFlag(name string, flags []cli.Flag) string {
	if cli.SuggestFlag == nil || len(flags) == 0 {
		return ""
	}
	s := strings.TrimLeft(cli.SuggestFlag(flags, name, true), "-")
	if s == "" || editDistance(name, s) > max(2, len(name)/3) {
		return ""
	}
	return s
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = usageErrorFor(c)
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
		competitionCommands(),
		{trainCommand(), predownloadCommand(), verifyCommand(), sampleCommand(), evalCommand(), evalConvertCommand()},
		{runManagerCommand(), explorerCommand()},
		runConfigCommands(),
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
