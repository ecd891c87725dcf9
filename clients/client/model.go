package client

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Tags of the run's model description (config/README.md).
const (
	scheduleConstant = 1
	scheduleLinear   = 2
	scheduleCosine   = 3
	scheduleWSD      = 4
)

// TrainerConfig is the trainer shape the run's model describes.
func TrainerConfig(m *coordinator.Model, microBatch int) (trainer.Config, error) {
	if m.Architecture != coordinator.ArchGPT2 && m.Architecture != coordinator.ArchLlama {
		return trainer.Config{}, fmt.Errorf("the run's architecture tag %d is neither gpt2 nor llama, the ones this client trains", m.Architecture)
	}
	// The data type shapes the loss, not the model: coordinator.FineTuning
	// tells the run's data apart.
	if m.DataType != coordinator.DataPretraining && m.DataType != coordinator.DataFinetuning {
		return trainer.Config{}, fmt.Errorf("the run's data type tag %d is neither pretraining nor finetuning, the ones this client knows", m.DataType)
	}
	if m.Optimizer != coordinator.OptimizerDistro && m.Optimizer != coordinator.OptimizerSparseLoCo {
		return trainer.Config{}, fmt.Errorf("the run's optimizer tag %d is neither distro nor sparseloco, the ones this client knows", m.Optimizer)
	}
	vocab := int(m.VocabSize)
	cfg := trainer.Config{
		Name:        "run",
		Vocab:       vocab,
		PaddedVocab: (vocab + 63) / 64 * 64, // GEMM-friendly rows; the padded rows stay out of the softmax
		Layers:      int(m.NLayer),
		Channels:    int(m.NEmbd),
		Heads:       int(m.NHead),
		SeqLen:      int(m.MaxSeqLen),
		MicroBatch:  microBatch,
	}
	if m.Architecture == coordinator.ArchLlama {
		cfg.Arch, cfg.KVHeads, cfg.Hidden = trainer.ArchLlama, int(m.NKvHead), int(m.IntermediateSize)
		cfg.RopeTheta, cfg.Untied = m.RopeTheta, m.Untied == 1
		cfg.Knobs = knobsOf(m)
	}
	arith, ok := arithOf(m.Precision)
	if !ok {
		return trainer.Config{}, fmt.Errorf("the run's numeric contract tag %d is neither fp32 nor mx8, the ones this client trains", m.Precision)
	}
	cfg.Arith = arith
	// The run's gradient shard count (1 << grad_shards_log2): part of the
	// numeric contract, so the run's and not this machine's.
	if cfg.GradShards = coordinator.GradShards(m.GradShardsLog2); cfg.GradShards == 0 {
		return trainer.Config{}, fmt.Errorf("the run's gradient shard count 2^%d is past the %d this client trains", m.GradShardsLog2, trainer.MaxGradShards)
	}
	if err := cfg.Validate(); err != nil {
		return trainer.Config{}, fmt.Errorf("the run's model: %w", err)
	}
	return cfg, nil
}

// knobsOf is the trainer's Knobs of the run's Llama. An unknown
// rope_scaling tag becomes a name the trainer refuses.
func knobsOf(m *coordinator.Model) trainer.Knobs {
	k := trainer.Knobs{
		RMSNormEps: m.RmsNormEps, RopeFactor: m.RopeFactor, RopeLowFreq: m.RopeLowFreqFactor, RopeHighFreq: m.RopeHighFreqFactor,
		RopeOrigCtx: int(m.RopeOriginalContext), QKVBias: m.QkvBias != 0,
	}
	switch m.RopeScaling {
	case coordinator.RopeNone:
	case coordinator.RopeLlama3:
		k.RopeScaling = trainer.RopeLlama3
	default:
		k.RopeScaling = fmt.Sprintf("unknown(%d)", m.RopeScaling)
	}
	return k
}

// Precisions are the numeric contracts this build trains, by their run
// config names (the trainer's Config.Arith): what a client accepts when its
// Config.Precisions is nil.
var Precisions = []string{trainer.ArithFP32, trainer.ArithMX8}

// arithOf is the trainer's numeric contract for the run's Model.precision.
func arithOf(tag uint8) (string, bool) {
	switch tag {
	case coordinator.PrecisionFP32:
		return trainer.ArithFP32, true
	case coordinator.PrecisionMX8:
		return trainer.ArithMX8, true
	}
	return "", false
}

// ErrPrecision means the run trains under a numeric contract this client
// does not accept (Config.Precisions, train --precision), or does not know;
// the client refuses it before joining.
var ErrPrecision = errors.New("the run's numeric contract is not one this client accepts")

// precisionError is ErrPrecision with its one line.
type precisionError struct{ msg string }

func (e *precisionError) Error() string        { return e.msg }
func (e *precisionError) Is(target error) bool { return target == ErrPrecision }

// ErrParallelism means the run's grad_shards cannot be spread over this
// client's device groups (Config.Devices, train --data-parallelism); the
// client refuses the run before joining.
var ErrParallelism = errors.New("the run's gradient shards do not divide among this client's devices")

type parallelismError struct{ msg string }

func (e *parallelismError) Error() string        { return e.msg }
func (e *parallelismError) Is(target error) bool { return target == ErrParallelism }

// groups is how many device groups share each step's shards: data
// parallelism, each group cfg.TensorParallelism devices.
func groups(cfg Config) int {
	return max(len(cfg.Devices)/max(cfg.TensorParallelism, 1), 1)
}

// acceptsParallelism refuses a run whose gradient shard count the client's
// devices device groups do not divide: each must step a whole subtree of
// the shard tree, or the bits would depend on the hardware.
func acceptsParallelism(v *coordinator.View, devices int) error {
	if v.Phase == coordinator.Uninitialized || devices <= 1 {
		return nil
	}
	shards := coordinator.GradShards(v.State.Model.GradShardsLog2)
	if shards%devices == 0 {
		return nil
	}
	return &parallelismError{fmt.Sprintf("the run sums each step's gradients over grad_shards = %d token shards, which --data-parallelism %d cannot share: "+
		"restart train with --data-parallelism dividing %d (1 always works; --tensor-parallelism spreads each share over more GPUs)", shards, devices, shards)}
}

// ParsePrecisions checks a list of numeric contract names (train
// --precision): each must be one this build trains; duplicates are dropped.
func ParsePrecisions(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !slices.Contains(Precisions, n) {
			return nil, fmt.Errorf("unknown numeric contract %q (this client trains %s)", n, strings.Join(Precisions, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no numeric contract given (this client trains %s)", strings.Join(Precisions, ", "))
	}
	return out, nil
}

// acceptsPrecision refuses a run whose numeric contract (Model.precision)
// is not in accepted (nil: Precisions); explicit says the list was given
// (train --precision). A run still Uninitialized has no model yet.
func acceptsPrecision(v *coordinator.View, accepted []string, explicit bool) error {
	if v.Phase == coordinator.Uninitialized {
		return nil
	}
	tag := v.State.Model.Precision
	if arith, ok := arithOf(tag); ok && slices.Contains(accepted, arith) {
		return nil
	}
	name, list := coordinator.PrecisionName(tag), strings.Join(accepted, ",")
	if _, known := arithOf(tag); !known {
		return &precisionError{fmt.Sprintf("the run trains with numeric contract %s (tag %d), which this client does not know (it trains %s): update the client",
			name, tag, strings.Join(Precisions, ", "))}
	}
	if explicit {
		return &precisionError{fmt.Sprintf("the run trains with numeric contract %s, and this client was started with --precision %s (accepts: %s)", name, list, list)}
	}
	return &precisionError{fmt.Sprintf("the run trains with numeric contract %s, which this client does not accept (accepts: %s)", name, list)}
}

// InitSeed is the seed of the initial weights: every client derives the same
// one from the run id, so all replicas start bit-identical.
func InitSeed(runID string) uint64 {
	h := sha256.Sum256([]byte("psyche:init-weights:v1:" + runID))
	return binary.LittleEndian.Uint64(h[:8])
}

// LearningRate is the run's schedule at step (from 1) of a run of total
// steps: linear warmup from zero over lr_warmup_steps, then constant, linear
// or cosine decay to the final rate over lr_decay_steps, or warmup-stable-
// decay (WSD): the peak rate until the last lr_decay_steps of the run, then a
// linear decay to the final rate at its end. In a cold-start epoch (after a
// pause) the rate is also ramped from zero over cold_start_warmup_steps from
// the epoch's first step. With SparseLoCo the schedule is the inner AdamW's
// and counts inner steps (the run has total * H of them): this is its rate at
// the round's first inner step (InnerLearningRate).
func LearningRate(m *coordinator.Model, total, step, epochStartStep uint32, coldStart bool) float32 {
	return InnerLearningRate(m, total, step, 0, epochStartStep, coldStart)
}

// InnerLearningRate is the rate of inner step j (from 0) of the round that
// trains step: the schedule at inner step (step-1)*inner_steps + j + 1 (for
// DeMo, one inner step per round: the schedule at step), times the
// cold-start ramp, which counts rounds.
func InnerLearningRate(m *coordinator.Model, total, step uint32, j int, epochStartStep uint32, coldStart bool) float32 {
	h := uint64(max(m.InnerSteps, 1))
	lr := scheduledRate(m, float64(uint64(total)*h), float64((uint64(step)-1)*h+uint64(j)+1))
	if coldStart && m.ColdStartWarmupSteps > 0 && step >= epochStartStep {
		lr *= math.Min(1, float64(step-epochStartStep+1)/float64(m.ColdStartWarmupSteps))
	}
	return float32(lr)
}

// scheduledRate is the schedule at step s (from 1).
func scheduledRate(m *coordinator.Model, total, s float64) float64 {
	peak, final := float64(m.LearningRate), float64(m.FinalLearningRate)
	warm := float64(m.LrWarmupSteps)
	if s <= warm {
		return peak * s / warm
	}
	if m.LrSchedule == scheduleWSD {
		start := total - float64(m.LrDecaySteps) // the program keeps it at or after the warmup
		if s <= start {
			return peak
		}
		return peak + (final-peak)*math.Min(1, (s-start)/float64(m.LrDecaySteps))
	}
	frac := 1.0
	if m.LrDecaySteps > 0 {
		frac = math.Min(1, (s-warm)/float64(m.LrDecaySteps))
	}
	switch m.LrSchedule {
	case scheduleLinear:
		return peak + (final-peak)*frac
	case scheduleCosine:
		return final + (peak-final)*0.5*(1+math.Cos(math.Pi*frac))
	default:
		return peak
	}
}

// DeMo is the optimizer's hyperparameters at a learning rate.
func DeMo(m *coordinator.Model, lr float32) trainer.DeMo {
	return trainer.DeMo{
		LR:          lr,
		Decay:       m.CompressionDecay,
		WeightDecay: m.WeightDecay,
		ClipNorm:    m.ClipGradNorm,
		Chunk:       int(m.CompressionChunk),
		TopK:        int(m.CompressionTopk),
		OneBit:      m.Quantize1bit != 0,
	}
}

// SparseLoCo says whether the run trains in the multi-step mode (inner
// AdamW steps, then a compressed pseudo-gradient) rather than DeMo.
func SparseLoCo(m *coordinator.Model) bool { return m.Optimizer == coordinator.OptimizerSparseLoCo }

// LoCo is the multi-step mode's hyperparameters.
func LoCo(m *coordinator.Model) trainer.SparseLoCo {
	return trainer.SparseLoCo{
		OuterLR:   m.OuterLearningRate,
		Decay:     m.CompressionDecay,
		Chunk:     int(m.CompressionChunk),
		TopK:      int(m.CompressionTopk),
		ValueBits: int(m.ValueBits),
	}
}

// InnerAdamW is the multi-step mode's inner optimizer at a rate.
func InnerAdamW(m *coordinator.Model, lr float32) trainer.AdamW {
	return trainer.AdamW{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: m.WeightDecay, ClipNorm: m.ClipGradNorm}
}

// InnerSteps is how many optimizer steps a member trains per round: the
// round's own count (1 for DeMo, and for rounds recorded before it existed).
func InnerSteps(r *coordinator.Round) int { return int(max(r.InnerSteps, 1)) }

// ReplicaDigest is sha256 over the step and the parameters (little-endian
// fp32): the part of the trainer state every honest replica shares. The
// trainer's own Digest also covers this client's momentum, which differs per
// client by design.
func ReplicaDigest(tr interface{ Params() ([]float32, error) }, step uint32) ([32]byte, error) {
	params, err := tr.Params()
	if err != nil {
		return [32]byte{}, err
	}
	buf := make([]byte, 0, 32+4*len(params))
	buf = append(buf, "psyche:replica:v1"...)
	buf = binary.LittleEndian.AppendUint32(buf, step)
	for _, p := range params {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(p))
	}
	return sha256.Sum256(buf), nil
}

// ErrMemory means the run's model does not fit this client's GPU or host
// memory at its micro-batch; the client refuses the run before joining.
var ErrMemory = errors.New("the run's model does not fit this client's memory")

type memoryError struct{ msg string }

func (e *memoryError) Error() string        { return e.msg }
func (e *memoryError) Is(target error) bool { return target == ErrMemory }

// Memory is what a client has to train in: the smallest of its GPUs and
// the host. A size of 0 is unknown, and not checked.
type Memory struct {
	OnGPU    bool
	GPU      string // the smallest GPU, e.g. "cuda:0 (NVIDIA H100 80GB HBM3)"
	GPUBytes int64
	Devices  int // device groups sharing each step's shards (groups)
	Host     int64
}

// FootprintOptions are the trainer.Footprint options of a client of a run
// of model m: its optimizer, overlap, chunks and top-k, applying members'
// payloads a step.
func FootprintOptions(m *coordinator.Model, overlap bool, members, threads int) trainer.FootprintOptions {
	opt := trainer.FootprintOptions{Optimizer: "demo", Overlap: overlap, Threads: threads, Payloads: max(members, 1),
		Chunk: int(m.CompressionChunk), TopK: int(m.CompressionTopk)}
	if SparseLoCo(m) {
		opt.Optimizer = "sparseloco"
	}
	return opt
}

// fits says whether the run's model fits mem at micro-batch microBatch: the
// trainer's footprint with the run's init_min_clients payloads an apply on
// the first (largest) device, twice when the run verifies (a verifier's
// replays run on a trainer of their own, on the same device), against the
// GPU's memory and the host's; with activation recompute on the GPU when
// recompute is set (trainer.Config.Recompute).
func fits(s *coordinator.State, mem Memory, microBatch, threads int, recompute bool) error {
	cfg, err := TrainerConfig(&s.Model, microBatch)
	if err != nil {
		return nil // refused elsewhere, with its own line
	}
	cfg.Recompute = recompute && mem.OnGPU
	if mem.Devices > 1 { // the first group's part of the shard tree: its subtree's and the join's buffers (a tensor-parallel rank holds its leader's)
		cfg.GradShards = max(cfg.Shards()/mem.Devices, 2)
	}
	opt := FootprintOptions(&s.Model, s.Config.Overlap != 0, int(s.Config.InitMinClients), max(threads, 1))
	trainers, why := int64(1), ""
	if cfg.Recompute {
		why = " with activation recompute"
	}
	if s.Config.VerificationPercent > 0 {
		trainers, why = 2, why+" (two trainers: the run verifies, and replays have their own)"
	}
	need := func(mb int) (gpu, host int64) {
		c := cfg
		c.MicroBatch = mb
		o := opt
		o.GPU = mem.OnGPU
		f, err := trainer.Footprint(c, o)
		if err != nil {
			return 0, 0
		}
		return trainers * f.Device(), trainers * f.Host()
	}
	gib := func(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
	gpu, host := need(microBatch)
	gpu1, host1 := need(1)
	advice := func(at1, have int64) string {
		if at1 > have {
			return "it does not fit at any micro-batch"
		}
		return fmt.Sprintf("lower --micro-batch-size (1 needs %s)", gib(at1))
	}
	switch {
	case mem.OnGPU && mem.GPUBytes > 0 && gpu > mem.GPUBytes:
		return &memoryError{fmt.Sprintf("the run's model needs %s of GPU memory at --micro-batch-size %d%s and %s has %s: %s",
			gib(gpu), microBatch, why, mem.GPU, gib(mem.GPUBytes), advice(gpu1, mem.GPUBytes))}
	case mem.Host > 0 && host > mem.Host:
		return &memoryError{fmt.Sprintf("the run's model needs %s of host memory at --micro-batch-size %d%s and this machine has %s: %s",
			gib(host), microBatch, why, gib(mem.Host), advice(host1, mem.Host))}
	}
	return nil
}

// clientMemory is the memory cfg's client trains in: its GPUs' (the
// smallest) when it trains on them, and the host's (MemTotal).
func clientMemory(cfg Config) Memory {
	mem := Memory{Devices: groups(cfg), Host: hostMemory()}
	if cfg.Device != DeviceCUDA && (cfg.Device != DeviceAuto || trainer.GPUAvailable() != nil) {
		return mem
	}
	mem.OnGPU = true
	ids := cfg.Devices
	if len(ids) == 0 {
		ids = []int{0}
	}
	for _, id := range ids {
		if total, name, err := trainer.GPUMemory(id); err == nil && (mem.GPUBytes == 0 || total < mem.GPUBytes) {
			mem.GPU, mem.GPUBytes = fmt.Sprintf("cuda:%d (%s)", id, name), total
		}
	}
	return mem
}

// hostMemory is /proc/meminfo's MemTotal in bytes, 0 where unknown.
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// ErrNeedsGPU means a CPU client could not train its share of a step
// within the run's max_round_train_time even at its CPU's matrix product
// rate; the client refuses the run before joining.
var ErrNeedsGPU = errors.New("the run's steps are too large for this CPU")

type needsGPUError struct{ msg string }

func (e *needsGPUError) Error() string        { return e.msg }
func (e *needsGPUError) Is(target error) bool { return target == ErrNeedsGPU }

// stepFLOPs is the most a member computes in one round of the run: its
// share of the largest batch with init_min_clients members, at 6 FLOPs a
// parameter and token and attention's 12 L C T a token (forward and
// backward).
func stepFLOPs(s *coordinator.State, cfg trainer.Config) float64 {
	members := max(float64(s.Config.InitMinClients), 1)
	tokens := float64(max(s.Config.GlobalBatchSizeStart, s.Config.GlobalBatchSizeEnd)) * float64(cfg.SeqLen) / members
	return tokens * (6*float64(cfg.Params()) + 12*float64(cfg.Layers)*float64(cfg.Channels)*float64(cfg.SeqLen))
}

// cpuMargin: a run is refused on the CPU only when its round would take
// more than this many times max_round_train_time at the measured rate. The
// 0.3 s probe reads a fraction of the CPU on a busy machine (two clients
// starting together each see about half), and a client wrongly refused
// costs more than one that joins and turns out slow; the runs it is for
// (the 1.1B on a CPU) miss by hundreds of times.
const cpuMargin = 4

// fastEnough refuses a run a CPU client cannot train: its round's FLOPs at
// rate (the CPU's measured matrix product FLOP/s, an upper bound on its
// training rate) past cpuMargin times max_round_train_time. rate is asked
// only for runs that would need more than 10 GFLOP/s, which any CPU has.
func fastEnough(s *coordinator.State, rate func(arith string) float64) error {
	cfg, err := TrainerConfig(&s.Model, 1)
	if err != nil {
		return nil // refused elsewhere, with its own line
	}
	budget := float64(s.Config.MaxRoundTrainTime)
	flops := stepFLOPs(s, cfg)
	if budget <= 0 || flops < 1e10*budget {
		return nil
	}
	r := rate(cfg.Arith)
	if r <= 0 || flops/r <= cpuMargin*budget {
		return nil
	}
	return &needsGPUError{fmt.Sprintf("a member's share of the run's rounds is %.1f TFLOP (the batch over init_min_clients = %d), about %.0f s on this CPU "+
		"(%.0f GFLOP/s, its measured %s matrix product rate), more than %d times the %.0f s max_round_train_time allows: train it on a GPU (--device cuda), or choose a smaller run",
		flops/1e12, max(s.Config.InitMinClients, 1), flops/r, r/1e9, cfg.Arith, cpuMargin, budget)}
}

// cpuRate measures this machine's matrix product rate in FLOP/s under
// arith on threads threads (0: all): 512-square products for 0.3 s.
func cpuRate(arith string, threads int) float64 {
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		return 0
	}
	cfg.Arith = arith
	tr, err := trainer.New(cfg, 1)
	if err != nil {
		return 0
	}
	defer tr.Close()
	if tr.SetGPU(false) != nil || (threads > 0 && tr.SetThreads(threads) != nil) {
		return 0
	}
	const n = 512
	a, b, out := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7)-3, float32(i%5)-2
	}
	if tr.GEMM(arith, 0, n, n, n, a, b, out) != nil {
		return 0
	}
	start, products := time.Now(), 0
	for time.Since(start) < 300*time.Millisecond {
		if tr.GEMM(arith, 0, n, n, n, a, b, out) != nil {
			return 0
		}
		products++
	}
	return 2 * n * n * n * float64(products) / time.Since(start).Seconds()
}

// memoryPlan says whether a client of mem trains the run's model with
// activation recompute, and why the model does not fit (nil: it does). On
// a GPU, recompute is on when forced (train --recompute-activations) or
// when the model fits only so: it changes no bit, and costs a forward.
func memoryPlan(s *coordinator.State, mem Memory, microBatch, threads int, forced bool) (bool, error) {
	if !mem.OnGPU {
		return false, fits(s, mem, microBatch, threads, false)
	}
	if !forced && fits(s, mem, microBatch, threads, false) == nil {
		return false, nil
	}
	return true, fits(s, mem, microBatch, threads, true)
}

// fitsMemory is memoryPlan's answer (and, on the CPU, fastEnough) for one
// client, kept for the run's model and config as last seen (they change
// only while a run is paused).
func fitsMemory(mem Memory, microBatch, threads int, recompute bool) func(*coordinator.State) error {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if microBatch <= 0 {
		microBatch = DefaultMicroBatch
	}
	var seen struct {
		model  coordinator.Model
		config coordinator.Config
		valid  bool
	}
	var last error
	rates := map[string]float64{}
	rate := func(arith string) float64 {
		if _, ok := rates[arith]; !ok {
			rates[arith] = cpuRate(arith, threads)
		}
		return rates[arith]
	}
	return func(s *coordinator.State) error {
		if seen.valid && seen.model == s.Model && seen.config == s.Config {
			return last
		}
		seen.model, seen.config, seen.valid = s.Model, s.Config, true
		_, last = memoryPlan(s, mem, microBatch, threads, recompute)
		if last == nil && !mem.OnGPU {
			last = fastEnough(s, rate)
		}
		return last
	}
}
