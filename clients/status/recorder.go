package status

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Options bound the Recorder's memory. Zero fields take the defaults.
type Options struct {
	// LossPoints caps each loss history (train, held-out); default 2048.
	LossPoints int
	// RecentSteps is how many steps are kept in full; default 256.
	RecentSteps int
	// Benchmarks is how many benchmark results are kept; default 512.
	Benchmarks int
	// Prompts is how many prompt task continuations are kept; default 64.
	Prompts int
	// LogLines is how many log lines are kept; default 200.
	LogLines int
	// MaxPeers caps the per-peer list; default 256.
	MaxPeers int
	// MaxLineBytes truncates longer log lines; default 1024.
	MaxLineBytes int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.LossPoints, 2048)
	def(&o.RecentSteps, 256)
	def(&o.Benchmarks, 512)
	def(&o.Prompts, 64)
	def(&o.LogLines, 200)
	def(&o.MaxPeers, 256)
	def(&o.MaxLineBytes, 1024)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Recorder collects a training client's state. All methods are safe for
// concurrent use; memory is bounded by Options whatever the run's length.
type Recorder struct {
	opts Options

	mu      sync.Mutex
	s       Snapshot // scalar fields only; histories live below
	peers   []Peer
	train   thinned
	heldOut thinned
	steps   ring[StepStat]
	bench   ring[Benchmark]
	prompts ring[Prompt]
	log     ring[LogLine]
	subs    map[chan struct{}]struct{}
}

// NewRecorder returns an empty Recorder for the run runID.
func NewRecorder(runID string, opts Options) *Recorder {
	opts = opts.withDefaults()
	r := &Recorder{
		opts:    opts,
		train:   newThinned(opts.LossPoints),
		heldOut: newThinned(opts.LossPoints),
		steps:   newRing[StepStat](opts.RecentSteps),
		bench:   newRing[Benchmark](opts.Benchmarks),
		prompts: newRing[Prompt](opts.Prompts),
		log:     newRing[LogLine](opts.LogLines),
		subs:    map[chan struct{}]struct{}{},
	}
	r.s.RunID = runID
	r.s.Updated = opts.Now()
	return r
}

// changed marks a change and wakes subscribers; r.mu must be held.
func (r *Recorder) changed() {
	r.s.Seq++
	r.s.Updated = r.opts.Now()
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending; the reader will see this change too
		}
	}
}

// Subscribe returns a channel that receives a value after changes (bursts
// coalesce into one wake-up; read Snapshot for the state) and a cancel func
// that closes it.
func (r *Recorder) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.subs, ch)
			r.mu.Unlock()
			close(ch)
		})
	}
}

// Snapshot returns a consistent deep copy of the state.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	s.Peers = slices.Clone(r.peers)
	if s.Peers == nil {
		s.Peers = []Peer{}
	}
	s.Train = r.train.points()
	s.HeldOut = r.heldOut.points()
	s.Steps = r.steps.slice()
	s.Benchmarks = r.bench.slice()
	s.Prompts = r.prompts.slice()
	for i := range s.Prompts {
		s.Prompts[i].Tokens = slices.Clone(s.Prompts[i].Tokens)
	}
	s.Log = r.log.slice()
	if r.s.Checkpoint != nil {
		c := *r.s.Checkpoint
		s.Checkpoint = &c
	}
	if r.s.Verification != nil {
		v := *r.s.Verification
		v.Unvested = slices.Clone(v.Unvested)
		s.Verification = &v
	}
	if r.s.LastWarning != nil {
		l := *r.s.LastWarning
		s.LastWarning = &l
	}
	if r.s.LastError != nil {
		l := *r.s.LastError
		s.LastError = &l
	}
	return s
}

// SetRunState records the Coordinator's run state (e.g. "RoundTrain").
func (r *Recorder) SetRunState(state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.RunState = state
	r.changed()
}

// SetProgress records the Coordinator's epoch, round and step.
func (r *Recorder) SetProgress(epoch, round, step uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Epoch, r.s.Round, r.s.Step = epoch, round, step
	r.changed()
}

// SetRole records what this client does in the current round.
func (r *Recorder) SetRole(role Role) error {
	switch role {
	case RoleNone, RoleTrainer, RoleWitness:
	default:
		return fmt.Errorf("unknown role %q (want %q, %q or empty)", role, RoleTrainer, RoleWitness)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Role = role
	r.changed()
	return nil
}

// SetClients records how many clients are in the epoch and how many of them
// are healthy.
func (r *Recorder) SetClients(inEpoch, healthy int) error {
	if inEpoch < 0 || healthy < 0 || healthy > inEpoch {
		return fmt.Errorf("client counts must satisfy 0 <= healthy <= in epoch, got %d healthy of %d", healthy, inEpoch)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.ClientsInEpoch, r.s.ClientsHealthy = inEpoch, healthy
	r.changed()
	return nil
}

// SetParameters records the model's parameter count, from which the dense
// fp32 size of one step's update follows (one optimizer step per step).
func (r *Recorder) SetParameters(n uint64) error { return r.SetDense(n, 1) }

// SetDense records the model's parameter count and the optimizer steps
// each step (round) trains: dense fp32 training sends a gradient per
// optimizer step, so a step's dense size is 4*n*steps bytes.
func (r *Recorder) SetDense(n, steps uint64) error {
	if steps == 0 || n > math.MaxUint64/4/steps {
		return fmt.Errorf("parameter count %d times %d optimizer steps is too large", n, steps)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.DenseBytes = 4 * n * steps
	r.changed()
	return nil
}

// SetPeers replaces the peer list. Peers are kept sorted by ID; beyond
// Options.MaxPeers, those with the least traffic are left out.
func (r *Recorder) SetPeers(peers []Peer) error {
	seen := make(map[string]struct{}, len(peers))
	for _, p := range peers {
		if p.ID == "" {
			return errors.New("peer with an empty ID")
		}
		if _, dup := seen[p.ID]; dup {
			return fmt.Errorf("peer %s listed twice", p.ID)
		}
		seen[p.ID] = struct{}{}
	}
	ps := slices.Clone(peers)
	if len(ps) > r.opts.MaxPeers {
		slices.SortFunc(ps, func(a, b Peer) int {
			return cmp.Compare(b.BytesIn+b.BytesOut, a.BytesIn+a.BytesOut)
		})
		ps = ps[:r.opts.MaxPeers]
	}
	slices.SortFunc(ps, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peers = ps
	r.s.PeerCount = len(peers)
	r.changed()
	return nil
}

// RecordStep records a finished training step. Steps must increase; the
// digest must be hex. A non-finite loss is recorded (and reported as such).
func (r *Recorder) RecordStep(st StepStat) error {
	if st.Duration < 0 || st.RoundTime < 0 {
		return fmt.Errorf("step %d: negative duration %v or round time %v", st.Step, st.Duration, st.RoundTime)
	}
	if !isHex(st.Digest) {
		return fmt.Errorf("step %d: digest %q is not an even number of hex digits", st.Step, st.Digest)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.steps.last(); ok && st.Step <= last.Step {
		return fmt.Errorf("step %d recorded after step %d: steps must increase", st.Step, last.Step)
	}
	r.steps.push(st)
	r.train.add(LossPoint{Step: st.Step, Loss: st.Loss})
	r.s.StepsTotal++
	r.s.TokensTotal += st.Tokens
	r.s.BytesOutTotal += st.BytesOut
	r.s.BytesInTotal += st.BytesIn
	r.changed()
	return nil
}

// RecordEval records a held-out loss measured at step. Steps must increase.
func (r *Recorder) RecordEval(step uint64, loss float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldOut.hasLatest && step <= r.heldOut.latest.Step {
		return fmt.Errorf("held-out loss for step %d recorded after step %d: steps must increase", step, r.heldOut.latest.Step)
	}
	r.heldOut.add(LossPoint{Step: step, Loss: Float(loss)})
	r.changed()
	return nil
}

// RecordBenchmark records a benchmark task's scores on the model of a step.
func (r *Recorder) RecordBenchmark(b Benchmark) error {
	if b.Task == "" || b.Items <= 0 || !(b.Acc >= 0 && b.Acc <= 1) || !(b.AccNorm >= 0 && b.AccNorm <= 1) {
		return fmt.Errorf("benchmark %q: %d items, acc %v, acc_norm %v: want a task, items and scores in [0, 1]", b.Task, b.Items, b.Acc, b.AccNorm)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bench.push(b)
	r.changed()
	return nil
}

// RecordPrompt records a prompt task's continuation by the model of a step.
func (r *Recorder) RecordPrompt(p Prompt) error {
	if p.Prompt == "" || len(p.Tokens) == 0 {
		return fmt.Errorf("prompt %d: %d tokens after %q: want a prompt and tokens", p.Index, len(p.Tokens), p.Prompt)
	}
	p.Tokens = slices.Clone(p.Tokens)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prompts.push(p)
	r.changed()
	return nil
}

// SetCheckpoint records the latest checkpoint.
func (r *Recorder) SetCheckpoint(c Checkpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Time.IsZero() {
		c.Time = r.opts.Now()
	}
	r.s.Checkpoint = &c
	r.changed()
}

// SetVerification records this client's part in the run's verification.
// Verdicts cannot outnumber what they judge: judged and unjudged
// commitments add up to at most those committed, replay verdicts to at
// most the replays run, and posted verdicts to at most the replays run.
func (r *Recorder) SetVerification(v Verification) error {
	c, p := v.Commitments, v.Replays
	if c.Match > c.Committed || c.Mismatch > c.Committed || c.NoData > c.Committed || c.Unjudged > c.Committed ||
		c.Match+c.Mismatch+c.NoData+c.Unjudged > c.Committed {
		return fmt.Errorf("commitments: %d MATCH, %d MISMATCH, %d NO_DATA and %d unjudged exceed the %d committed",
			c.Match, c.Mismatch, c.NoData, c.Unjudged, c.Committed)
	}
	if p.Match > p.Run || p.Mismatch > p.Run || p.NoData > p.Run || p.Match+p.Mismatch+p.NoData > p.Run || p.Posted > p.Run {
		return fmt.Errorf("replays: %d MATCH, %d MISMATCH, %d NO_DATA (%d posted) exceed the %d run",
			p.Match, p.Mismatch, p.NoData, p.Posted, p.Run)
	}
	v.Unvested = slices.Clone(v.Unvested)
	if v.Unvested == nil {
		v.Unvested = []uint64{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Verification = &v
	r.changed()
	return nil
}

// Log appends a line to the log panel; a zero t means now.
func (r *Recorder) Log(level slog.Level, t time.Time, msg string) {
	msg = oneLine(msg, r.opts.MaxLineBytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.IsZero() {
		t = r.opts.Now()
	}
	l := LogLine{Time: t, Level: level.String(), Message: msg}
	r.log.push(l)
	switch {
	case level >= slog.LevelError:
		r.s.LastError = &l
		r.s.ErrorsTotal++
	case level >= slog.LevelWarn:
		r.s.LastWarning = &l
		r.s.WarningsTotal++
	}
	r.changed()
}

// Warn logs a warning line.
func (r *Recorder) Warn(msg string) { r.Log(slog.LevelWarn, time.Time{}, msg) }

// Error logs an error line.
func (r *Recorder) Error(msg string) { r.Log(slog.LevelError, time.Time{}, msg) }

// oneLine makes msg safe for a one-line panel: control characters (newlines,
// terminal escapes) become spaces or U+FFFD, invalid UTF-8 is replaced, and
// it is cut at a rune boundary after max bytes.
func oneLine(msg string, max int) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.Map(func(c rune) rune {
		switch {
		case c == '\n' || c == '\r' || c == '\t':
			return ' '
		case unicode.IsControl(c):
			return '\uFFFD'
		}
		return c
	}, msg)
	if len(msg) <= max {
		return msg
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// isHex checks without allocating: RecordStep is on the training loop's path.
func isHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
