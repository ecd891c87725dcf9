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
	architectureGPT2 = 1
	optimizerDistro  = 1
	scheduleConstant = 1
	scheduleLinear   = 2
	scheduleCosine   = 3
)

// TrainerConfig is the trainer shape the run's model describes.
func TrainerConfig(m *coordinator.Model, microBatch int) (trainer.Config, error) {
	if m.Architecture != architectureGPT2 {
		return trainer.Config{}, fmt.Errorf("the run's architecture tag %d is not gpt2, the only one this client trains", m.Architecture)
	}
	if m.Optimizer != optimizerDistro {
		return trainer.Config{}, fmt.Errorf("the run's optimizer tag %d is not distro, the only one a decentralized run can use", m.Optimizer)
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

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// LearningRate is the run's schedule at step (from 1): linear warmup from zero
// over lr_warmup_steps, then constant, linear or cosine decay to the final
// rate over lr_decay_steps. In a cold-start epoch (after a pause) the rate is
// also ramped from zero over cold_start_warmup_steps from the epoch's first step.
func LearningRate(m *coordinator.Model, step, epochStartStep uint32, coldStart bool) float32 {
	peak, final := float64(f32(m.LearningRate)), float64(f32(m.FinalLearningRate))
	s := float64(step)
	var lr float64
	switch warm := float64(m.LrWarmupSteps); {
	case s <= warm:
		lr = peak * s / warm
	default:
		frac := 1.0
		if m.LrDecaySteps > 0 {
			frac = math.Min(1, (s-warm)/float64(m.LrDecaySteps))
		}
		switch m.LrSchedule {
		case scheduleLinear:
			lr = peak + (final-peak)*frac
		case scheduleCosine:
			lr = final + (peak-final)*0.5*(1+math.Cos(math.Pi*frac))
		default:
			lr = peak
		}
	}
	if coldStart && m.ColdStartWarmupSteps > 0 && step >= epochStartStep {
		lr *= math.Min(1, float64(step-epochStartStep+1)/float64(m.ColdStartWarmupSteps))
	}
	return float32(lr)
}

// DeMo is the optimizer's hyperparameters at a learning rate.
func DeMo(m *coordinator.Model, lr float32) trainer.DeMo {
	return trainer.DeMo{
		LR:          lr,
		Decay:       f32(m.CompressionDecay),
		WeightDecay: f32(m.WeightDecay),
		ClipNorm:    f32(m.ClipGradNorm),
		Chunk:       int(m.CompressionChunk),
		TopK:        int(m.CompressionTopk),
		OneBit:      m.Quantize1bit != 0,
	}
}

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
