// Package explorer is the run explorer behind `psyche-client explorer`: an
// indexer that follows a cluster's Coordinator runs, and a web server that
// shows them (server.go): the list of runs and, per run, its members,
// recent rounds, phase timeline, loss and evaluation curves, verification,
// events and Treasurer balances, updated live in the browser.
//
// The indexer learns of transactions from a logsSubscribe on the
// Coordinator program when it has a websocket endpoint, and by polling
// getSignaturesForAddress on the program otherwise or while the websocket
// is down. Either way each transaction is read once (getTransaction): the
// witness reports in its instruction data and the events the Coordinator
// logged; the runs it touched are then re-read. A resync every
// Options.Resync re-reads every run, for what no Coordinator transaction
// announces (a token top-up) and anything missed.
//
// It shows the Competition program's competitions too (competitions.go,
// compview.go): each one's settings, pool, board and rounds, whose wins,
// weights and payouts it rebuilds from the votes and events of the
// competition's transactions.
package explorer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/ws"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// Options configures an Indexer.
type Options struct {
	Chain       *chain.Client
	Coordinator coordinator.Program
	// TreasurerID is the Treasurer program: a run whose main authority is
	// one of its Run accounts shows its balances and claims.
	TreasurerID solana.PublicKey
	// Live follows Chain.WSURL(); without it the indexer polls.
	Live bool
	// PollInterval is how often new transactions are polled for when not
	// live (default 2 s).
	PollInterval time.Duration
	// Resync is how often every run is re-read (default 30 s).
	Resync time.Duration
	// History is how many of each run's (and each competition's) newest
	// transactions are read at start (default 1000).
	History int
	Log     *slog.Logger
	// CompetitionID is the Competition program whose competitions are
	// shown (zero: the id the bindings were generated with). A cluster
	// without it shows none.
	CompetitionID solana.PublicKey
}

// Sources of updates, as the API reports them.
const (
	SourceWebsocket = "websocket"
	SourcePolling   = "polling"
)

// Indexer holds what the explorer knows of every run. Run is its only
// writer; the views (view.go) read it under mu.
type Indexer struct {
	opts Options
	tp   treasurer.Program
	cp   competition.Program
	log  *slog.Logger

	mu       sync.Mutex
	runs     map[string]*runData           // by run id
	byAcct   map[solana.PublicKey]*runData // by coordinator account
	source   string
	lastErr  string
	errSince time.Time     // when reads started failing; zero while they work
	version  uint64        // bumped at every change
	changed  chan struct{} // closed (and replaced) at every change
	ready    chan struct{} // closed once every run and its history was read
	list     cached

	comps      map[string]*compData           // by competition id (competitions.go)
	compByAddr map[solana.PublicKey]*compData // by competition account
	compList   cached

	// Only Run's goroutine touches these.
	seen       *sigSet
	newest     solana.Signature // the program's newest transaction read; polling resumes after it
	catchUp    chan struct{}    // the websocket (re)connected: poll once for what it missed
	compSeen   *sigSet
	compNewest solana.Signature // the Competition program's newest transaction read
}

// New returns an indexer; Run starts it.
func New(opts Options) *Indexer {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.Resync <= 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.History <= 0 {
		opts.History = 1000
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.CompetitionID.IsZero() {
		opts.CompetitionID = competition.Default().ID
	}
	return &Indexer{
		opts: opts, log: opts.Log,
		tp:     treasurer.Program{ID: opts.TreasurerID, Coordinator: opts.Coordinator},
		cp:     competition.Program{ID: opts.CompetitionID},
		runs:   map[string]*runData{},
		byAcct: map[solana.PublicKey]*runData{},
		comps:  map[string]*compData{}, compByAddr: map[solana.PublicKey]*compData{},
		source: SourcePolling, changed: make(chan struct{}), ready: make(chan struct{}),
		seen: newSigSet(1 << 14), catchUp: make(chan struct{}, 1), compSeen: newSigSet(1 << 14),
	}
}

// Ready is closed once the first full read of the chain is done.
func (x *Indexer) Ready() <-chan struct{} { return x.ready }

// Changed is closed at the next change of anything the views show.
func (x *Indexer) Changed() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.changed
}

// notifyLocked publishes a change (x.mu held).
func (x *Indexer) notifyLocked() {
	x.version++
	close(x.changed)
	x.changed = make(chan struct{})
}

func (x *Indexer) setSource(s string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.source != s {
		x.source = s
		x.notifyLocked()
	}
}

// setErr records the outcome of a read of the chain: the last failure and
// since when reads fail, cleared once one works again. The log says when
// reads start failing and when they work again, not every retry.
func (x *Indexer) setErr(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err != nil && x.errSince.IsZero():
		x.errSince = time.Now()
		x.log.Warn("reading the chain failed; retrying with backoff until it works", "err", err,
			"first_retry_in", retryPause(x.opts.PollInterval, 1), "max_retry_pause", maxRetryPause)
	case err == nil && !x.errSince.IsZero():
		x.log.Info("reading the chain works again", "failing_for", time.Since(x.errSince).Round(time.Second))
		x.errSince = time.Time{}
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if x.lastErr != msg {
		x.lastErr = msg
		x.notifyLocked()
	}
}

// maxRetryPause caps the pause between reads while the chain cannot be read.
const maxRetryPause = 30 * time.Second

// retryPause is the pause before the next read after failures reads in a
// row failed: base (the poll interval), doubling at every failure, capped
// at maxRetryPause (or base, if longer).
func retryPause(base time.Duration, failures int) time.Duration {
	pause := base
	for i := 1; i < failures && pause < maxRetryPause; i++ {
		pause *= 2
	}
	return max(base, min(pause, maxRetryPause))
}

// Run reads every run and its recent history, then follows the chain until
// ctx ends. Failures to read the chain are logged, shown by the API, and
// retried; Run returns nil when ctx ends.
func (x *Indexer) Run(ctx context.Context) error {
	sigs := make(chan solana.Signature, 4096)
	if x.opts.Live {
		// Subscribed before the first read, so nothing lands unseen in between.
		go x.follow(ctx, sigs)
	} else {
		x.log.Info("no websocket endpoint: polling for new transactions", "rpc", x.opts.Chain.RPCURL(), "every", x.opts.PollInterval)
	}
	for failures := 1; ; failures++ {
		err := x.sync(ctx, true)
		x.setErr(err)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryPause(x.opts.PollInterval, failures)):
		}
	}
	close(x.ready)
	poll, resync := time.NewTicker(x.opts.PollInterval), time.NewTicker(x.opts.Resync)
	defer poll.Stop()
	defer resync.Stop()
	// behind: transactions the subscription announced may be unread (a
	// read failed), so polling goes on until a poll succeeds. resyncDue: a
	// resync failed, so the next poll tick resyncs first.
	behind, resyncDue := false, false
	// While reads fail, the poll ticker (the retry) slows down: failures
	// reads failed in a row.
	failures := 0
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case sig := <-sigs:
			batch := []solana.Signature{sig}
			for len(batch) < cap(sigs) && len(sigs) > 0 {
				batch = append(batch, <-sigs)
			}
			if err = x.ingest(ctx, batch); err == nil && !behind {
				x.newest = batch[len(batch)-1]
			}
			behind = behind || err != nil
		case <-x.catchUp:
			err = x.poll(ctx)
			behind = err != nil
		case <-poll.C:
			if resyncDue {
				err = x.sync(ctx, false)
				resyncDue = err != nil
			}
			if err == nil && (behind || x.sourceIs(SourcePolling)) {
				err = x.poll(ctx)
				behind = err != nil && x.sourceIs(SourceWebsocket)
			}
			if err == nil {
				// Competitions are polled for, websocket or not.
				err = x.pollCompetitions(ctx)
			}
		case <-resync.C:
			err = x.sync(ctx, false)
			resyncDue = err != nil
		}
		if ctx.Err() != nil {
			return nil
		}
		x.setErr(err)
		was := failures
		if failures = 0; err != nil {
			failures = was + 1
		}
		if failures != was {
			poll.Reset(retryPause(x.opts.PollInterval, failures))
		}
	}
}

func (x *Indexer) sourceIs(s string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.source == s
}

// follow sends the signature of every successful transaction that mentions
// the Coordinator program, reconnecting with a growing pause; while it is
// disconnected the indexer polls. The log says when updates stop (once
// until they resume) and when they resume.
func (x *Indexer) follow(ctx context.Context, out chan<- solana.Signature) {
	pause := time.Second
	for first := true; ; first = false {
		start := time.Now()
		err := x.followOnce(ctx, out)
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelDebug
		if first || x.sourceIs(SourceWebsocket) {
			level = slog.LevelWarn
		}
		x.setSource(SourcePolling)
		x.log.Log(ctx, level, "websocket updates stopped; polling until they resume", "ws", x.opts.Chain.WSURL(),
			"err", err, "poll_every", x.opts.PollInterval, "retry_in", pause)
		if time.Since(start) > time.Minute {
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func (x *Indexer) followOnce(ctx context.Context, out chan<- solana.Signature) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := ws.Connect(ctx, x.opts.Chain.WSURL())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	// Closing the connection ends the subscription: sub.Unsubscribe races
	// with the reader in solana-go v1.14 (clients/chain/account.go).
	defer conn.Close()
	sub, err := conn.LogsSubscribeMentions(x.opts.Coordinator.ID, rpc.CommitmentConfirmed)
	if err != nil {
		return fmt.Errorf("logsSubscribe: %w", err)
	}
	x.setSource(SourceWebsocket)
	x.log.Info("following the Coordinator's transactions live", "ws", x.opts.Chain.WSURL())
	select {
	case x.catchUp <- struct{}{}:
	default:
	}
	for {
		r, err := sub.Recv(ctx)
		if err != nil {
			return err
		}
		if r.Value.Err != nil {
			continue // failed: it changed nothing
		}
		select {
		case out <- r.Value.Signature:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pollLimit bounds the transactions one poll reads: more means the newest
// one read is no longer in the node's history, or the indexer was away
// long; the resync re-reads the runs' states either way.
const pollLimit = 5000

// poll reads the program's transactions newer than the newest one read.
func (x *Indexer) poll(ctx context.Context) error {
	sigs, err := x.signatures(ctx, x.opts.Coordinator.ID, x.newest, pollLimit)
	if err != nil || len(sigs) == 0 {
		return err
	}
	x.newest = sigs[0].Signature
	return x.ingest(ctx, chronological(sigs))
}

// sync lists the runs and re-reads every run's state and Treasurer run;
// first, it also reads each run's newest History transactions. Then the
// same for the competitions (syncCompetitions).
func (x *Indexer) sync(ctx context.Context, first bool) error {
	if err := x.syncRuns(ctx, first); err != nil {
		return err
	}
	return x.syncCompetitions(ctx, first)
}

func (x *Indexer) syncRuns(ctx context.Context, first bool) error {
	if first {
		newest, err := x.signatures(ctx, x.opts.Coordinator.ID, solana.Signature{}, 1)
		if err != nil {
			return err
		}
		if len(newest) > 0 {
			x.newest = newest[0].Signature
		}
	}
	runs, err := x.relist(ctx)
	if err != nil {
		return err
	}
	if first {
		for _, rd := range runs {
			if err := x.backfill(ctx, rd); err != nil {
				return err
			}
		}
	}
	return x.refresh(ctx, runs)
}

// backfill reads a run's newest transactions, oldest first.
func (x *Indexer) backfill(ctx context.Context, rd *runData) error {
	sigs, err := x.signatures(ctx, rd.run.Account, solana.Signature{}, x.opts.History)
	if err != nil {
		return err
	}
	return x.ingest(ctx, chronological(sigs))
}

// errNoRun is returned by the views for a run id the indexer does not know.
var errNoRun = errors.New("no such run")
