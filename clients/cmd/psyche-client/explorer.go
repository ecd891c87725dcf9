package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/explorer"
	"github.com/psyche-go/psyche/clients/treasurer"
)

func explorerCommand() *cli.Command {
	return &cli.Command{
		Name: "explorer",
		Usage: "serve a web page showing the cluster's runs live: state, members, rounds, phase timeline, loss and evaluation curves, " +
			"verification, events and Treasurer balances; and its model competitions: entries, rounds, weights and payouts",
		Description: "Reads every run of the Coordinator program, the newest --history transactions of each (witness reports, events), " +
			"and then follows new ones: through the websocket endpoint when --ws-rpc is given, else (and while it is down) by polling --rpc " +
			"every --poll-interval. The page is at http://LISTEN/, a run's at /runs/RUN_ID; its data is at /api/runs and /api/runs/RUN_ID " +
			"(JSON), with server-sent events at /api/stream and /api/runs/RUN_ID/stream. The competitions of the Competition program " +
			"(--competition-program-id) are at /competitions and /competitions/ID, their data at /api/competitions and " +
			"/api/competitions/ID; new competition transactions are polled for every --poll-interval. Ctrl-C stops.",
		Flags: []cli.Flag{
			rpcFlag,
			&cli.StringFlag{Name: "ws-rpc", Usage: "PubSub (websocket) endpoint for live updates; without it the explorer polls --rpc", EnvVars: []string{"WS_RPC"}},
			&cli.StringFlag{Name: "listen", Usage: "address to serve the page on", Value: "127.0.0.1:9300"},
			coordinatorProgramFlag, treasurerProgramFlag, explorerCompetitionProgramFlag,
			&cli.DurationFlag{Name: "poll-interval", Usage: "how often to poll for new transactions without a websocket", Value: 2 * time.Second},
			&cli.IntFlag{Name: "history", Usage: "transactions of each run to read at start (curves, timeline, events)", Value: 1000},
		},
		Action: runExplorer,
	}
}

// explorerCompetitionProgramFlag is the Competition program the explorer
// shows the competitions of.
var explorerCompetitionProgramFlag = &cli.StringFlag{
	Name:    "competition-program-id",
	Usage:   "address of the Competition program (default: the id in idl/psyche_competition.json); a cluster without it shows no competitions",
	EnvVars: []string{"COMPETITION_PROGRAM_ID"},
}

func runExplorer(c *cli.Context) error {
	poll, history := c.Duration("poll-interval"), c.Int("history")
	if poll < 100*time.Millisecond || history < 1 {
		return badInputf("explorer: --poll-interval must be at least 100ms and --history at least 1")
	}
	tid := treasurer.Default().ID
	if s := c.String(treasurerProgramFlag.Name); s != "" {
		var err error
		if tid, err = parsePubkey("--"+treasurerProgramFlag.Name, s); err != nil {
			return err
		}
	}
	cid := competition.Default().ID
	if s := c.String(explorerCompetitionProgramFlag.Name); s != "" {
		var err error
		if cid, err = parsePubkey("--"+explorerCompetitionProgramFlag.Name, s); err != nil {
			return err
		}
	}
	a, err := newReadCtx(c)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return badInputf("explorer: --listen %s: %v", c.String("listen"), err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	x := explorer.New(explorer.Options{
		Chain: a.client, Coordinator: a.program, TreasurerID: tid, CompetitionID: cid, Live: c.IsSet("ws-rpc"),
		PollInterval: poll, History: history, Log: slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)),
	})
	fmt.Fprintf(c.App.Writer, "explorer: http://%s/ (Ctrl-C stops)\n", ln.Addr())
	return explorer.Serve(ctx, ln, x)
}
