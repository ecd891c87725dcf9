package client

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Tags of the run's model description (config/README.md).
const (
	dataPretraining  = 1
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
	if m.DataType != dataPretraining {
		return trainer.Config{}, fmt.Errorf("the run's data type tag %d is not pretraining, the only one this client trains", m.DataType)
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
	}
	if err := cfg.Validate(); err != nil {
		return trainer.Config{}, fmt.Errorf("the run's model: %w", err)
	}
	return cfg, nil
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
