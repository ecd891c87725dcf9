package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// coordinatorChain is what the engine needs of the chain: the run's states,
// each with the chain's clock, and sending (or only simulating) one
// Coordinator instruction signed by this client.
type coordinatorChain interface {
	// Follow sends the run's states to out as they change, newest first
	// (an undelivered older one is replaced), until ctx ends.
	Follow(ctx context.Context, out chan observed)
	// Read reads the run's state now; a transient failure is (nil, nil).
	Read(ctx context.Context) (*observed, error)
	// Submit sends o, or only simulates it; the program's refusal is a *chain.TxError.
	Submit(ctx context.Context, o op, simulate bool) error
}

// observed is a Coordinator state and the chain's clock when it was read.
type observed struct {
	state *coordinator.State
	chain time.Time
}

// opKind names the Coordinator instructions a client sends.
type opKind int

const (
	opJoin opKind = iota
	opLeave
	opTick
	opWarmup
	opWitness
	opHealthCheck
	opCheckpoint
	opCommit
	opVerify
	opJudge
	opAnswer
	opReportEval
	opReportPrompt
)

var opNames = [...]string{"join_run", "leave_run", "tick", "warmup_witness", "witness", "health_check", "checkpoint", "commit", "verify",
	"judge_dispute", "answer_dispute", "report_eval", "report_prompt"}

func (k opKind) String() string { return opNames[k] }

// op is one Coordinator instruction with its arguments.
type op struct {
	kind    opKind
	report  coordinator.WitnessReport // opWitness
	step    uint32                    // opHealthCheck
	index   uint16                    // opHealthCheck
	accused solana.PublicKey          // opHealthCheck
	repo    string                    // opCheckpoint
	rev     string                    // opCheckpoint
	commit  coordinator.CommitArgs    // opCommit
	verify  coordinator.VerifyArgs    // opVerify
	dispute uint64                    // opJudge, opAnswer
	vote    uint8                     // opJudge
	claim   [2][32]byte               // opAnswer: the rerun's payload and state-after hashes
	eval    coordinator.EvalReport    // opReportEval
	prompt  coordinator.PromptReport  // opReportPrompt
}

// rpcChain is the Coordinator over JSON-RPC and websockets, with failover
// between endpoints (primary first).
type rpcChain struct {
	run     coordinator.Run
	wallet  solana.PrivateKey
	me      solana.PublicKey
	auth    solana.PublicKey
	p2pKey  [32]byte
	sign    func([]byte) ([]byte, error) // with the p2p key
	log     *slog.Logger
	mu      sync.Mutex
	chains  []*chain.Client // guarded by mu; the one in use first
	offset  time.Duration   // chain clock minus local clock, guarded by mu
	clockAt time.Time       // when offset was last measured
}

// openChain finds the run on the first endpoint that answers.
func openChain(ctx context.Context, cfg *Config, p2pKey [32]byte, log *slog.Logger) (*rpcChain, error) {
	rc := &rpcChain{wallet: cfg.Wallet, me: cfg.Wallet.PublicKey(), auth: cfg.Authorization, p2pKey: p2pKey, sign: cfg.Node.Sign, log: log,
		chains: append([]*chain.Client(nil), cfg.Chains...)}
	var last error
	for range rc.chains {
		run, _, err := cfg.Program.Open(ctx, rc.client(), cfg.RunID)
		if err == nil || errors.Is(err, chain.ErrAccountNotFound) || errors.Is(err, coordinator.ErrNotCoordinator) {
			rc.run = run
			return rc, err
		}
		last = err
		rc.failed(rc.client(), err)
	}
	return nil, last
}

// client is the endpoint in use.
func (rc *rpcChain) client() *chain.Client {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.chains[0]
}

// failed moves past cl when it is the endpoint in use; the subscription
// reports its failures here too, so sends leave a dead node as well.
func (rc *rpcChain) failed(cl *chain.Client, err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.chains) > 1 && rc.chains[0] == cl {
		rc.log.Warn("RPC endpoint failed; switching to the next", "rpc", cl.RPCURL(), "ws", cl.WSURL(), "next", rc.chains[1].RPCURL(), "err", err)
		rc.chains = append(rc.chains[1:], rc.chains[0])
	}
}

// now is the chain's clock by the latest measured offset from ours.
func (rc *rpcChain) now() time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return time.Now().Add(rc.offset)
}

// clockEvery is how often the offset between the chain's clock and ours is
// measured again.
const clockEvery = 5 * time.Second

// measureClock reads the Clock sysvar when the offset is due (a read of
// the account comes with one unless a recent one is at hand).
func (rc *rpcChain) measureClock(ctx context.Context) {
	rc.mu.Lock()
	due := time.Since(rc.clockAt) >= clockEvery
	rc.mu.Unlock()
	if due {
		rc.sampleClock(ctx)
	}
}

// sampleClock measures the offset of the chain's clock from ours. The
// sysvar counts whole seconds, so the chain's time is taken at the middle
// of its second.
func (rc *rpcChain) sampleClock(ctx context.Context) {
	t, err := rc.client().Clock(ctx)
	if err != nil {
		rc.log.Debug("reading the chain's clock failed", "err", err)
		return
	}
	rc.mu.Lock()
	rc.offset, rc.clockAt = time.Until(t.Add(500*time.Millisecond)), time.Now()
	rc.mu.Unlock()
}

// keepClock measures the chain's clock every clockEvery until ctx ends.
func (rc *rpcChain) keepClock(ctx context.Context) {
	t := time.NewTicker(clockEvery)
	defer t.Stop()
	for {
		rc.sampleClock(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Read reads the account over JSON-RPC (and the chain's clock when due).
func (rc *rpcChain) Read(ctx context.Context) (*observed, error) {
	rc.measureClock(ctx)
	s, err := rc.run.FetchState(ctx, rc.client())
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, coordinator.ErrNotCoordinator) {
			return nil, err
		}
		rc.failed(rc.client(), err)
		rc.log.Warn("reading the coordinator account failed", "err", err)
		return nil, nil
	}
	return &observed{state: s, chain: rc.now()}, nil
}

// Follow subscribes to the account. When a subscription fails it
// reconnects after a growing pause, each time on the next endpoint, so a
// dead RPC node is left for a backup and retried later. Notifications are
// decoded newest first: one that arrives while the last is being decoded
// or acted on replaces any still waiting (a round of a large run lands
// dozens of transactions at once, each a notification).
func (rc *rpcChain) Follow(ctx context.Context, out chan observed) {
	go rc.keepClock(ctx)
	latest := make(chan chain.AccountUpdate, 1)
	go rc.decode(ctx, latest, out)
	rc.mu.Lock()
	chains := append([]*chain.Client(nil), rc.chains...)
	rc.mu.Unlock()
	pause := watchPause
	for i := 0; ; i++ {
		cl := chains[i%len(chains)]
		heard := false
		err := cl.SubscribeAccount(ctx, rc.run.Account, func(u chain.AccountUpdate) {
			heard = true
			select {
			case <-latest:
			default:
			}
			latest <- u
		})
		if ctx.Err() != nil {
			return
		}
		if heard {
			pause = watchPause
		}
		rc.failed(cl, err)
		next := chains[(i+1)%len(chains)]
		rc.log.Warn("coordinator subscription dropped; reconnecting", "ws", cl.WSURL(), "err", err, "next", next.WSURL(), "in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, watchPauseMax)
	}
}

// decode turns the newest notification into an observation on out, where
// too only the newest waits.
func (rc *rpcChain) decode(ctx context.Context, latest <-chan chain.AccountUpdate, out chan observed) {
	for {
		var u chain.AccountUpdate
		select {
		case <-ctx.Done():
			return
		case u = <-latest:
		}
		if !u.Owner.Equals(rc.run.Program.ID) {
			rc.log.Warn("the run account is not owned by the coordinator program", "account", rc.run.Account, "owner", u.Owner)
			continue
		}
		s, err := coordinator.DecodeState(u.Data)
		if err != nil {
			rc.log.Warn("undecodable coordinator notification", "err", err)
			continue
		}
		select {
		case <-out:
		default:
		}
		out <- observed{state: s, chain: rc.now()}
	}
}

// watchPause and watchPauseMax bound the wait between reconnects.
const (
	watchPause    = 250 * time.Millisecond
	watchPauseMax = 5 * time.Second
)

// Submit builds o's instruction and sends (or simulates) it on the endpoint
// in use; a failure that is not the program's refusal fails over.
func (rc *rpcChain) Submit(ctx context.Context, o op, simulate bool) error {
	ixs, err := rc.instructions(o)
	if err != nil {
		return err
	}
	cl := rc.client()
	if simulate {
		_, err = cl.Simulate(ctx, rc.wallet, ixs)
	} else {
		_, err = cl.Send(ctx, rc.wallet, ixs)
	}
	var te *chain.TxError
	if err != nil && ctx.Err() == nil && !errors.As(err, &te) {
		rc.failed(cl, err)
	}
	return err
}

// instructions are o's instructions: one, or for a join its p2p key proof
// and the join.
func (rc *rpcChain) instructions(o op) ([]solana.Instruction, error) {
	if o.kind == opJoin {
		return rc.run.JoinRunSigned(rc.me, rc.auth, rc.p2pKey, rc.sign)
	}
	ix, err := rc.instruction(o)
	if err != nil {
		return nil, err
	}
	return []solana.Instruction{ix}, nil
}

func (rc *rpcChain) instruction(o op) (solana.Instruction, error) {
	r, me := rc.run, rc.me
	switch o.kind {
	case opLeave:
		return r.LeaveRun(me)
	case opTick:
		return r.Tick(me)
	case opWarmup:
		return r.WarmupWitness(me)
	case opWitness:
		return r.Witness(me, o.report)
	case opHealthCheck:
		return r.HealthCheck(me, o.step, o.index, o.accused)
	case opCheckpoint:
		return r.Checkpoint(me, o.repo, o.rev)
	case opCommit:
		return r.Commit(me, o.commit)
	case opVerify:
		return r.Verify(me, o.verify)
	case opJudge:
		return r.JudgeDispute(me, o.dispute, o.vote)
	case opAnswer:
		return r.AnswerDispute(me, o.dispute, o.claim[0], o.claim[1])
	case opReportEval:
		return r.ReportEval(me, o.eval)
	case opReportPrompt:
		return r.ReportPrompt(me, o.prompt)
	}
	return nil, fmt.Errorf("no instruction %d", o.kind)
}
