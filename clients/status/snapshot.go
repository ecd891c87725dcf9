// Package status holds what a training client knows about its run at a
// moment: the Recorder that the client loop updates, and the Snapshot copies
// it hands to the terminal UI, the metrics endpoint and the progress printer.
package status

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Role is what this client does in the current round.
type Role string

const (
	RoleNone    Role = ""
	RoleTrainer Role = "trainer"
	RoleWitness Role = "witness"
)

// Snapshot is a consistent copy of a Recorder's state; it shares no memory
// with the Recorder, so callers may keep and modify it.
type Snapshot struct {
	// Seq increases with every change, so readers can tell snapshots apart.
	Seq     uint64    `json:"seq"`
	Updated time.Time `json:"updated"`

	RunID    string `json:"run_id"`
	RunState string `json:"run_state"`
	Epoch    uint64 `json:"epoch"`
	Round    uint64 `json:"round"`
	Step     uint64 `json:"step"`
	Role     Role   `json:"role"`

	ClientsInEpoch int `json:"clients_in_epoch"`
	ClientsHealthy int `json:"clients_healthy"`

	// PeerCount is the number of peers; Peers may list fewer (Options.MaxPeers).
	PeerCount int    `json:"peer_count"`
	Peers     []Peer `json:"peers"`

	// Train and HeldOut are whole-run loss histories, thinned evenly as they
	// grow so that memory stays bounded (see Options).
	Train   []LossPoint `json:"train_loss"`
	HeldOut []LossPoint `json:"held_out_loss"`
	// Steps holds the most recent steps in full, oldest first.
	Steps []StepStat `json:"steps"`

	// DenseBytes is what one step's update would weigh as dense fp32
	// gradients (4 bytes per parameter, for each optimizer step of the
	// step's round: several in the multi-step mode); 0 until the model is
	// known.
	DenseBytes uint64 `json:"dense_fp32_bytes"`

	StepsTotal    uint64 `json:"steps_total"`
	TokensTotal   uint64 `json:"tokens_total"`
	BytesOutTotal uint64 `json:"bytes_sent_total"`
	BytesInTotal  uint64 `json:"bytes_received_total"`

	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`

	// Benchmarks are the most recent benchmark task scores (train
	// --eval-tasks), oldest first.
	Benchmarks []Benchmark `json:"benchmarks"`
	// Prompts are the most recent prompt task continuations (train
	// --prompt-task), oldest first.
	Prompts []Prompt `json:"prompts"`

	// Verification is this client's part in the run's verification; nil
	// until the client sets it (a run that verifies training).
	Verification *Verification `json:"verification,omitempty"`

	// Log holds the most recent log lines, oldest first.
	Log []LogLine `json:"log"`
	// LastWarning and LastError are the latest lines at those levels; they
	// outlive the Log ring.
	LastWarning *LogLine `json:"last_warning,omitempty"`
	LastError   *LogLine `json:"last_error,omitempty"`
	// WarningsTotal and ErrorsTotal count every such line ever logged.
	WarningsTotal uint64 `json:"warnings_total"`
	ErrorsTotal   uint64 `json:"errors_total"`
}

// Peer is one p2p peer as this client sees it.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address,omitempty"`
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
	// Latency is 0 when unknown.
	Latency time.Duration `json:"-"`
}

type peerJSON struct {
	ID             string   `json:"id"`
	Address        string   `json:"address,omitempty"`
	BytesIn        uint64   `json:"bytes_in"`
	BytesOut       uint64   `json:"bytes_out"`
	LatencySeconds *float64 `json:"latency_seconds,omitempty"`
}

// MarshalJSON writes the latency in seconds, and leaves it out when unknown.
func (p Peer) MarshalJSON() ([]byte, error) {
	j := peerJSON{ID: p.ID, Address: p.Address, BytesIn: p.BytesIn, BytesOut: p.BytesOut}
	if p.Latency > 0 {
		s := p.Latency.Seconds()
		j.LatencySeconds = &s
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Peer) UnmarshalJSON(b []byte) error {
	var j peerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Peer{ID: j.ID, Address: j.Address, BytesIn: j.BytesIn, BytesOut: j.BytesOut}
	if j.LatencySeconds != nil {
		p.Latency = time.Duration(*j.LatencySeconds * float64(time.Second))
	}
	return nil
}

// Benchmark is a multiple-choice task's scores on the model of a step, as
// lm-evaluation-harness reports them.
type Benchmark struct {
	Step      uint64  `json:"step"`
	Epoch     uint64  `json:"epoch"`
	Task      string  `json:"task"`
	Items     int     `json:"items"`
	Acc       float64 `json:"acc"`
	AccNorm   float64 `json:"acc_norm"`
	Published bool    `json:"published"` // sent on chain (report_eval)
}

// Prompt is the text the model of a step generated after one of the
// prompt task's prompts (eval.Prompts), as published with report_prompt.
type Prompt struct {
	Step      uint64   `json:"step"`
	Epoch     uint64   `json:"epoch"`
	Index     int      `json:"index"` // in eval.Prompts
	Prompt    string   `json:"prompt"`
	Tokens    []uint32 `json:"tokens"`
	Text      string   `json:"text"`      // Tokens decoded
	Published bool     `json:"published"` // sent on chain (report_prompt)
}

// LatestBenchmarks is the newest result of each task, in the order the
// tasks first appear.
func (s Snapshot) LatestBenchmarks() []Benchmark {
	var out []Benchmark
	at := map[string]int{}
	for _, b := range s.Benchmarks {
		if i, ok := at[b.Task]; ok {
			out[i] = b
			continue
		}
		at[b.Task] = len(out)
		out = append(out, b)
	}
	return out
}

// LossPoint is a loss measured at a step.
type LossPoint struct {
	Step uint64 `json:"step"`
	Loss Float  `json:"loss"`
}

// StepStat is what one training step produced.
type StepStat struct {
	Step     uint64        `json:"step"`
	Loss     Float         `json:"loss"`
	Tokens   uint64        `json:"tokens"`
	Duration time.Duration `json:"duration_ns"`
	// BytesOut and BytesIn are the update bytes this client sent and
	// received for the step.
	BytesOut uint64 `json:"bytes_sent"`
	BytesIn  uint64 `json:"bytes_received"`
	// Digest is the hex digest of the trainer state after the step.
	Digest string `json:"digest"`
	// RoundTime is from the start of the step's round to the start of the
	// next one, as this client saw them; 0 when unknown (an epoch's last).
	RoundTime time.Duration `json:"round_ns,omitempty"`
}

// TokensPerSecond is the step's throughput, 0 when the duration is unknown.
func (s StepStat) TokensPerSecond() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Tokens) / s.Duration.Seconds()
}

// CompressionRatio is dense fp32 bytes over the bytes actually sent, 0 when
// either is unknown.
func CompressionRatio(dense, sent uint64) float64 {
	if dense == 0 || sent == 0 {
		return 0
	}
	return float64(dense) / float64(sent)
}

// Checkpoint describes the latest checkpoint this client wrote or loaded.
type Checkpoint struct {
	Step     uint64    `json:"step"`
	Location string    `json:"location"`
	Hash     string    `json:"hash,omitempty"`
	Time     time.Time `json:"time"`
}

// Verification is this client's part in a run that verifies training
// (programs/coordinator/README.md): what became of its commitments, the
// replays it ran as a verifier, the disputes involving it, and its slot's
// stakes. Counts cover this client's run so far.
type Verification struct {
	Commitments VerifiedCommitments `json:"commitments"`
	Replays     Replays             `json:"replays"`
	Disputes    Disputes            `json:"disputes"`
	// Burned, Unvested, Slashed, HasFault and FaultEpoch are this client's
	// slot on chain: rewards burned by faults, rewards still vesting (per
	// bucket), points slashed, whether it was ever found at fault, and the
	// epoch of its latest fault.
	Burned     uint64   `json:"burned"`
	Unvested   []uint64 `json:"unvested"`
	Slashed    uint64   `json:"slashed"`
	HasFault   bool     `json:"has_fault"`
	FaultEpoch uint32   `json:"fault_epoch"`
}

// VerifiedCommitments counts this client's commitments by the verdict the
// chain holds; Unjudged have none (not sampled, or not judged yet).
type VerifiedCommitments struct {
	Committed uint64 `json:"committed"`
	Match     uint64 `json:"match"`
	Mismatch  uint64 `json:"mismatch"`
	NoData    uint64 `json:"no_data"`
	Unjudged  uint64 `json:"unjudged"`
}

// Replays counts the contributions this client replayed as a verifier, by
// its verdict, and the verdicts it posted on chain.
type Replays struct {
	Run      uint64 `json:"run"`
	Match    uint64 `json:"match"`
	Mismatch uint64 `json:"mismatch"`
	NoData   uint64 `json:"no_data"`
	Posted   uint64 `json:"verdicts_posted"`
}

// Disputes counts the disputes involving this client (as the trainer, the
// accuser or on the committee): open now, and settled by outcome.
type Disputes struct {
	Open         uint64 `json:"open"`
	Transient    uint64 `json:"transient"`
	TrainerFault uint64 `json:"trainer_fault"`
	AccuserFault uint64 `json:"accuser_fault"`
	Unresolved   uint64 `json:"unresolved"`
	Refuted      uint64 `json:"refuted"`
}

// LogLine is one log record as shown in the UI.
type LogLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// Float is a float64 whose JSON form survives NaN and infinities (a diverged
// loss is worth reporting): those are written as strings.
type Float float64

// MarshalJSON writes finite values as numbers and others as "NaN", "+Inf" or "-Inf".
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte(strconv.Quote(strconv.FormatFloat(v, 'g', -1, 64))), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Float) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		var err error
		if s, err = strconv.Unquote(s); err != nil {
			return err
		}
		switch s {
		case "NaN", "+Inf", "-Inf":
		default:
			return fmt.Errorf("%q is not a number", s)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// LastStep returns the most recent recorded step.
func (s Snapshot) LastStep() (StepStat, bool) {
	if len(s.Steps) == 0 {
		return StepStat{}, false
	}
	return s.Steps[len(s.Steps)-1], true
}

// LastHeldOut returns the most recent held-out loss.
func (s Snapshot) LastHeldOut() (LossPoint, bool) {
	if len(s.HeldOut) == 0 {
		return LossPoint{}, false
	}
	return s.HeldOut[len(s.HeldOut)-1], true
}
