package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/runmanager"
)

// childCommandFlag replaces `psyche-client train` as the supervised client.
// It is for tests only (a script that crashes on cue), hence hidden.
const childCommandFlag = "child-command"

func runManagerCommand() *cli.Command {
	d := runmanager.DefaultBackoff()
	return &cli.Command{
		Name: "run-manager",
		Usage: "run `psyche-client train` with the flags after -- and keep it running: restart it after a crash " +
			"(exponential backoff), update it when the run wants another client version (exit code 10), Ctrl-C makes it leave the run",
		ArgsUsage: "-- TRAIN_FLAGS...",
		Description: "The run is --run-id, else $RUN_ID (the env file may set it), else the first run (by id) that is configured, not Finished, and that " +
			"list-runs finds and can-join allows the wallet to join, read with the --rpc, -w and --authorizer among TRAIN_FLAGS. " +
			"The client's exit code 2 (bad input) is not retried: run-manager exits 2. On exit code 10 it runs --update-command " +
			"through sh -c with $PSYCHE_REQUIRED_VERSION set, then restarts the client; without one it exits 10. The env file is " +
			"read again before every restart, so an update command may change it (e.g. CLIENT_VERSION). Ctrl-C or SIGTERM: " +
			"the client is sent SIGINT and leaves the run, then run-manager exits 0; a second one kills the client.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run-id", Usage: "the run to train in (default: $RUN_ID, else the first run the wallet may join)"},
			&cli.StringFlag{Name: "update-command", Usage: "shell command (sh -c) that installs the client version in $PSYCHE_REQUIRED_VERSION when the run wants another one"},
			&cli.StringFlag{Name: "env-file", Usage: "KEY=VALUE lines (# comments, optional export prefix and quotes) added to the client's environment"},
			&cli.DurationFlag{Name: "restart-delay", Usage: "delay before the first restart; it doubles with each crash", Value: d.Initial},
			&cli.DurationFlag{Name: "max-restart-delay", Usage: "longest delay between restarts", Value: d.Max},
			&cli.DurationFlag{Name: "healthy-after", Usage: "a client that ran this long before crashing restarts after --restart-delay again", Value: d.Healthy},
			&cli.StringFlag{Name: childCommandFlag, Hidden: true, Usage: "tests only: the program to run instead of psyche-client train"},
		},
		Action: runManager,
	}
}

func runManager(c *cli.Context) error {
	childArgs := c.Args().Slice()
	for _, a := range childArgs {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); a != "--" && strings.HasPrefix(a, "-") && name == "run-id" {
			return badInputf("run-manager: give --run-id before --, not among train's flags")
		}
	}
	backoff := runmanager.Backoff{Initial: c.Duration("restart-delay"), Max: c.Duration("max-restart-delay"), Healthy: c.Duration("healthy-after")}
	if backoff.Initial <= 0 || backoff.Max < backoff.Initial || backoff.Healthy <= 0 {
		return badInputf("run-manager: --restart-delay and --healthy-after must be positive, --max-restart-delay at least --restart-delay")
	}
	readEnv := func() ([]string, error) {
		if c.String("env-file") == "" {
			return nil, nil
		}
		env, err := runmanager.ReadEnvFile(c.String("env-file"))
		if err != nil {
			return nil, badInputf("--env-file %w", err)
		}
		return env, nil
	}
	env, err := readEnv()
	if err != nil {
		return err
	}
	// The env file counts for choosing the run too (RUN_ID, RPC, WALLET_FILE...).
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(c.App.ErrWriter, "%s run-manager: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	runID := c.String("run-id")
	if runID == "" {
		runID = os.Getenv("RUN_ID")
	}
	if runID == "" {
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		err := withTrainFlags(ctx, childArgs, func(tc *cli.Context) (err error) {
			runID, err = pickRun(tc, logf)
			return err
		})
		interrupted := ctx.Err() != nil // before stop, which cancels ctx too
		stop()
		if interrupted {
			logf("stopped before the client started")
			return nil
		}
		if err != nil {
			return err
		}
	}

	path, args := c.String(childCommandFlag), []string{}
	if path == "" {
		if path, err = os.Executable(); err != nil {
			return err
		}
		args = []string{"train"}
	}
	args = append(append(args, "--run-id", runID), childArgs...)
	var startErr error
	cfg := runmanager.Config{
		Start: func(n int) (runmanager.Child, error) {
			env := env
			if n > 1 {
				if env, startErr = readEnv(); startErr != nil {
					return nil, startErr
				}
			}
			logf("start %d: %s %s", n, path, strings.Join(args, " "))
			return runmanager.Start(runmanager.Command{Path: path, Args: args, Env: env, Stdin: os.Stdin, Stdout: c.App.Writer, Stderr: c.App.ErrWriter})
		},
		Backoff: backoff, Signals: sigs, Logf: logf,
	}
	if script := c.String("update-command"); script != "" {
		cfg.Update = func(ctx context.Context, version string) error {
			return runmanager.Shell(ctx, script, []string{"PSYCHE_REQUIRED_VERSION=" + version}, c.App.Writer, c.App.ErrWriter)
		}
	}
	res := runmanager.Run(cfg)
	var bad *badInputError
	switch {
	case errors.As(startErr, &bad):
		return startErr
	case res.Code == 0:
		return nil
	case res.Code == exitBadInput:
		return badInputf("%s", res.Msg)
	}
	return cli.Exit(res.Msg, res.Code)
}

// withTrainFlags parses args as psyche-client train's flags (and their
// environment variables), as train will, and calls fn with them.
func withTrainFlags(ctx context.Context, args []string, fn cli.ActionFunc) error {
	app := &cli.App{
		Name: "psyche-client train", Flags: trainCommand().Flags, Action: fn,
		HideHelp: true, HideVersion: true, OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return badInputf("the flags for train: %w", err)
		},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	return app.RunContext(ctx, append([]string{"train"}, args...))
}

// pickRun is the first run, by id, that is configured (not Uninitialized)
// and not Finished, and that the wallet may join under its authorization (train's --authorizer): what
// list-runs lists and can-join allows.
func pickRun(c *cli.Context, logf func(string, ...any)) (string, error) {
	a, err := newReadCtx(c)
	if err != nil {
		return "", err
	}
	key, err := loadSigner(c)
	if err != nil {
		return "", err
	}
	auth, err := authorizerProgram(c)
	if err != nil {
		return "", err
	}
	grantee := authorizer.Everyone
	if s := c.String("authorizer"); s != "" {
		if grantee, err = parsePubkey("--authorizer", s); err != nil {
			return "", err
		}
	}
	accepted := client.Precisions // what train accepts: --precision, else every contract it trains
	if c.IsSet("precision") {
		if accepted, err = client.ParsePrecisions(c.StringSlice("precision")); err != nil {
			return "", badInputf("--precision: %w", err)
		}
	}
	runs, err := fetchRuns(c, a)
	if err != nil {
		return "", err
	}
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		switch id, _ := r["run_id"].(string); r["run_state"] {
		case nil, coordinator.Uninitialized.String(), coordinator.Finished.String():
			// unreadable, never configured, or over
		default:
			if p, _ := r["precision"].(string); !slices.Contains(accepted, p) {
				logf("run %q: trains with numeric contract %s; the client accepts %s (--precision)", id, p, strings.Join(accepted, ","))
				continue
			}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		v, err := checkJoin(c.Context, a, auth, id, grantee, key.PublicKey(), authorizer.JoinRunScope)
		switch {
		case err != nil:
			logf("run %q: %v", id, err)
		case v.ok:
			logf("chose run %q (the first of %d configured runs, not Finished, that %s may join)", id, len(ids), key.PublicKey())
			return id, nil
		default:
			logf("run %q: %s", id, v.reason)
		}
	}
	return "", cli.Exit(fmt.Sprintf("run-manager: %s may join none of the %d configured runs of %s that are not Finished; give --run-id", key.PublicKey(), len(ids), a.program.ID), exitFailure)
}
