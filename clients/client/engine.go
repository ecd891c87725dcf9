package client

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
)

// The round engine. decide reads one Coordinator view, the engine's own
// state and a snapshot of what the p2p layer delivered, and returns what
// to do, in order: it does no I/O, so every decision is tested without a
// chain, a network or a model (engine_test.go). The Client carries the
// actions out (client.go) and reports their outcomes back through the
// engine's methods (joined, applied, discarded, ...).

// modelState is where this client's model stands.
type modelState int

const (
	// modelNone: no trainer built yet (the run's model is not configured,
	// or the client has not got that far).
	modelNone modelState = iota
	// modelLoading: the trainer exists (it checks payloads) but its weights
	// are not the run's: a joiner's, or a replica that missed a round.
	modelLoading
	// modelReady: the weights are the run's model of lastStep.
	modelReady
)

// engine is the client's state as decisions need it; only the loop
// goroutine touches it.
type engine struct {
	me      solana.PublicKey
	self    peer.ID
	version string
	// salt keys the witness filters' salts (secret, so no peer can aim for
	// false positives).
	salt [32]byte
	rng  *rand.Rand
	// checkpoints, hubUpload and benchmarks are the Config's
	// CheckpointDir != "", HubUpload and (EvalTasks != nil or PromptTask).
	checkpoints, hubUpload, benchmarks bool
	// precisions are the numeric contracts the client accepts (nil: every
	// one it trains); precisionsGiven: the Config named them.
	precisions      []string
	precisionsGiven bool
	// devices is how many device groups share each step's shards (groups).
	devices int
	// fits says whether the run's model fits this client's memory (nil:
	// not checked).
	fits func(*coordinator.State) error
	// benchmarked is the last step whose model was benchmarked.
	benchmarked uint32

	model    modelState
	lastStep uint32 // the step of the model's weights
	dataOpen bool   // the run's data is open (the first join was simulated first)
	// followFrom is the first round this client saw whole; loadFrom the
	// oldest model step it may load (after a round it could not apply).
	followFrom, loadFrom uint32
	fetching             bool      // a model download runs
	retryLoad            time.Time // no new download before then
	recovery             recovery  // resuming from a checkpoint when no peer holds the model (lifecycle.go)

	joinedEpoch, warmedEpoch int64 // -1: none
	holdJoin                 bool  // left the epoch without the model; join again once it is here
	everMember               bool
	rounds                   map[uint32]*roundRecord
	witnessed                uint32
	accused                  map[[2]uint32]bool
	lastTick                 time.Time
	checkpoint, announced    uint32        // newest step written to CheckpointDir; tried on the hub
	uploaded                 uploadedModel // newest model put on the hub
	shared                   []*sharedModel
	// replaying and posted are the contributions this client started to
	// replay and whose verdict it posted, as a verifier.
	replaying, posted map[replayKey]bool
	// judging and judged are the disputes this client started to replay
	// and answered or voted on, and reruns the disputes whose trainer's rerun
	// it fetches; snapshots the steps whose starting weights the client
	// keeps for them.
	judging, judged, reruns map[uint64]bool
	snapshots               map[uint32]bool
}

func newEngine(me solana.PublicKey, self peer.ID, version string, salt [32]byte, rng *rand.Rand) *engine {
	return &engine{me: me, self: self, version: version, salt: salt, rng: rng,
		joinedEpoch: -1, warmedEpoch: -1, rounds: map[uint32]*roundRecord{}, accused: map[[2]uint32]bool{},
		replaying: map[replayKey]bool{}, posted: map[replayKey]bool{},
		judging: map[uint64]bool{}, judged: map[uint64]bool{}, reruns: map[uint64]bool{}, snapshots: map[uint32]bool{}}
}

// inputs is what the p2p layer and the background work delivered, as of
// one decision.
type inputs struct {
	// payloads: step -> announcer -> its payload's hash and whether the
	// validated payload is here, for the steps of the recorded rounds.
	payloads map[uint32]map[peer.ID]payloadState
	// roots: step -> announcer -> announced model root (only while the
	// client needs a model).
	roots map[uint32]map[peer.ID]p2p.Hash
	// loaded is a finished model download, if one finished.
	loaded *loadedModel
	// served is when each superseded shared model was last served.
	served map[p2p.Hash]time.Time
	// verdicts are the replays this client finished as a verifier, and
	// judgements those of disputed contributions, by dispute id.
	verdicts   map[replayKey]replayResult
	judgements map[uint64]replayResult
}

type payloadState struct {
	hash p2p.Hash
	have bool
}

// delivered is the hash of the payload member i of rec announced, and
// whether its validated payload is here.
func (in *inputs) delivered(rec *roundRecord, i int) (p2p.Hash, bool) {
	ps, ok := in.payloads[rec.step][rec.peers[i]]
	return ps.hash, ok && ps.have
}

// allAnnounced says whether every member of rec announced its payload.
func (in *inputs) allAnnounced(rec *roundRecord) bool {
	for i := range rec.members {
		if ps, ok := in.payloads[rec.step][rec.peers[i]]; !ok || ps.hash == (p2p.Hash{}) {
			return false
		}
	}
	return true
}

func (in *inputs) allDelivered(rec *roundRecord) bool {
	for i := range rec.members {
		if _, ok := in.delivered(rec, i); !ok {
			return false
		}
	}
	return true
}

// An action is one thing decide asks the client to do.
type action interface{ String() string }

// A replanning action changes the model, so decide runs again after it
// rather than the client carrying out a plan made before it.
type replanning interface{ replans() }

type (
	takeModelAction  struct{ loaded *loadedModel }
	buildModelAction struct{}
	discardAction    struct {
		from uint32
		why  error
	}
	applyAction struct {
		rec    *roundRecord
		accept []int // member indices whose payloads are applied, in order
	}
	checkpointAction         struct{ step uint32 }
	announceCheckpointAction struct {
		repo string
		rev  string // the revision already on chain
	}
	finishedAction  struct{}
	joinAction      struct{ first bool }
	stepAsideAction struct{}
	warmupAction    struct{}
	loadModelAction struct {
		step uint32
		root p2p.Hash
	}
	roleAction  struct{ witness bool }
	trainAction struct {
		rec   *roundRecord
		batch batchRange
		// commit: the run verifies, so the step is committed; index is
		// ours in the round, linked the replay state we committed last.
		commit bool
		index  uint16
		linked [32]byte
	}
	witnessAction struct {
		rec    *roundRecord
		report coordinator.WitnessReport
		all    bool
	}
	healthCheckAction struct {
		step    uint32
		index   uint16
		accused solana.PublicKey
	}
	tickAction          struct{ phase coordinator.RunState }
	shareModelAction    struct{ step uint32 }
	announceShareAction struct{ model *sharedModel }
	unshareAction       struct{ model *sharedModel }
)

// batchRange is a trainer's sequences of a round: [start, start+len).
type batchRange struct{ start, len uint64 }

func (takeModelAction) replans()  {}
func (buildModelAction) replans() {}
func (discardAction) replans()    {}

func (a takeModelAction) String() string {
	return fmt.Sprintf("take the downloaded model of step %d", a.loaded.step)
}
func (buildModelAction) String() string { return "build the model" }
func (a discardAction) String() string {
	return fmt.Sprintf("discard the replica (load step %d or later): %v", a.from, a.why)
}
func (a applyAction) String() string {
	return fmt.Sprintf("apply step %d (%d payloads)", a.rec.step, len(a.accept))
}
func (a checkpointAction) String() string { return fmt.Sprintf("checkpoint step %d", a.step) }
func (a announceCheckpointAction) String() string {
	return "upload and announce the checkpoint to " + a.repo
}
func (finishedAction) String() string    { return "finished" }
func (a joinAction) String() string      { return fmt.Sprintf("join (first: %v)", a.first) }
func (stepAsideAction) String() string   { return "leave the epoch until the model is loaded" }
func (warmupAction) String() string      { return "warmup_witness" }
func (a loadModelAction) String() string { return fmt.Sprintf("download the model of step %d", a.step) }
func (a roleAction) String() string      { return fmt.Sprintf("role (witness: %v)", a.witness) }
func (a trainAction) String() string {
	return fmt.Sprintf("train step %d on %d sequences", a.rec.step, a.batch.len)
}
func (a witnessAction) String() string { return fmt.Sprintf("witness step %d", a.report.Step) }
func (a healthCheckAction) String() string {
	return fmt.Sprintf("health-check member %d at step %d", a.index, a.step)
}
func (a tickAction) String() string       { return "tick " + a.phase.String() }
func (a shareModelAction) String() string { return fmt.Sprintf("share the model of step %d", a.step) }
func (a announceShareAction) String() string {
	return fmt.Sprintf("announce the shared model of step %d", a.model.step)
}
func (a unshareAction) String() string {
	return fmt.Sprintf("stop sharing the model of step %d", a.model.step)
}

// decide is the engine: from the view, the engine state, the inputs and
// the local time, the actions to take now, in order. Actions after an
// apply assume it succeeded; the client stops at the first that fails.
func (e *engine) decide(v *coordinator.View, in *inputs, now time.Time) ([]action, error) {
	if ver := coordinator.FixedString(v.State.ClientVersion[:]); ver != e.version && ver != "test" {
		return nil, fmt.Errorf("%w: the run wants %q, this is %q", ErrVersionMismatch, ver, e.version)
	}
	// Before joining, and before the model is built: a run under a numeric
	// contract this client does not accept is refused.
	accepted := e.precisions
	if accepted == nil {
		accepted = Precisions
	}
	if err := acceptsPrecision(v, accepted, e.precisionsGiven); err != nil {
		return nil, err
	}
	if err := acceptsParallelism(v, e.devices); err != nil {
		return nil, err
	}
	if e.fits != nil && v.Phase != coordinator.Uninitialized {
		if err := e.fits(v.State); err != nil {
			return nil, err
		}
	}
	if v.Me >= 0 {
		e.everMember = true
	}
	var acts []action
	add := func(a action) { acts = append(acts, a) }

	// Follow the run: record its rounds, take a model fetched in the
	// background, and apply every round whose witness reports are final.
	e.captureRounds(v)
	if rec := e.rounds[v.Round.Step]; rec != nil && v.Running() && rec.seen.IsZero() {
		rec.seen = now
	}
	if l := in.loaded; l != nil {
		e.fetching = false
		if l.err != nil {
			e.retryLoad = now.Add(loadRetry)
		}
		if l.err != nil || e.model == modelLoading {
			return append(acts, takeModelAction{l}), nil // a failure is logged
		}
	}
	step, stop := e.planApply(v, in, add)
	if stop {
		return acts, nil
	}
	current := e.model == modelReady && step+lag(v) >= v.Step

	// The epoch's model is checkpointed in Cooldown, or in any phase after
	// it: a short Cooldown can pass between two states we act on.
	if !v.Running() && v.Phase != coordinator.Warmup && e.checkpoints && current && step > 0 && e.checkpoint != step {
		e.checkpoint = step
		add(checkpointAction{step})
	}
	if v.Phase == coordinator.Finished {
		if a, ok := e.announceCheckpoint(v, current, step); ok {
			add(a) // the final model, if Cooldown passed unseen
		}
		if a, ok := e.benchmark(v, current, step); ok {
			add(a)
		}
		return append(acts, finishedAction{}), nil
	}
	// Joining comes first: a run that refuses this client says so before
	// the model is built and the data opened.
	if a, ok := e.membership(v, current); ok {
		add(a)
	}
	if e.model == modelNone && v.Phase != coordinator.Uninitialized { // configured by then
		return append(acts, buildModelAction{}), nil
	}
	if a, ok := e.startLoad(v, in, now); ok {
		add(a)
	}
	e.disputes(v, in, add)
	switch {
	case v.Phase == coordinator.Warmup && v.Member():
		if current && e.warmedEpoch != int64(v.Epoch) {
			add(warmupAction{})
		}
	case v.Running() && v.Member():
		if err := e.round(v, in, now, current, step, add); err != nil {
			return nil, err
		}
	case v.Phase == coordinator.Cooldown:
		if a, ok := e.announceCheckpoint(v, current, step); ok {
			add(a)
		}
		if a, ok := e.benchmark(v, current, step); ok {
			add(a)
		}
	}
	e.share(v, in, now, step, add)
	if a, ok := e.tick(v, now); ok {
		add(a)
	}
	return acts, nil
}
