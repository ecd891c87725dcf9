package trainer

import (
	"fmt"
	"sort"
)

// Config is a model shape. Two trainers can exchange DeMo payloads and
// states only when every field except Name, MicroBatch and Recompute
// matches.
type Config struct {
	Name string `json:"name"`
	// Arch is the architecture: "gpt2" (also when empty) or "llama" (RMSNorm,
	// rotary positions, grouped-query attention, SwiGLU, no biases but
	// Knobs.QKVBias's).
	Arch        string `json:"arch,omitempty"`
	Vocab       int    `json:"vocab"`        // real vocabulary size
	PaddedVocab int    `json:"padded_vocab"` // rows of the embedding, >= Vocab
	Layers      int    `json:"layers"`
	Channels    int    `json:"channels"`
	Heads       int    `json:"heads"`
	SeqLen      int    `json:"seq_len"` // maximum sequence length
	// MicroBatch is how many sequences one forward/backward pass holds in
	// memory; Step accumulates gradients over as many passes as needed.
	// Every gradient and the loss chain over the tokens in order across
	// passes, so it changes no bit of the result.
	MicroBatch int `json:"micro_batch"`
	// Llama only.
	KVHeads   int     `json:"kv_heads,omitempty"`   // key/value heads, dividing Heads
	Hidden    int     `json:"hidden,omitempty"`     // SwiGLU intermediate size
	Untied    bool    `json:"untied,omitempty"`     // a separate lm-head instead of wte
	RopeTheta float32 `json:"rope_theta,omitempty"` // rotary base, e.g. 10000
	Knobs
	// Arith is the numeric contract of the model's matrix products (README
	// "Numeric contract"): "fp32" (v2, also when empty) or "mx8" (v3,
	// block-scaled int8 operands). Replicas of one run must agree on it.
	Arith string `json:"arith,omitempty"`
	// GradShards is how many token shards a step's gradients and loss are
	// summed over (README "Shards"): each shard's sequences chain from zero,
	// the shards join by a fixed balanced tree. A power of two; 0 means 1.
	// Data parallelism over D devices needs D to divide it. Like Arith, it
	// is the run's, and replicas must agree on it.
	GradShards int `json:"grad_shards,omitempty"`
	// Recompute has the GPU keep only each layer's input (the residual
	// stream) and run each layer's forward again in backward: activation
	// memory of about one layer instead of L, for a third more compute.
	// Like MicroBatch it is the machine's choice and changes no bit.
	Recompute bool `json:"recompute,omitempty"`
}

// Knobs are a Llama's settings that the families people fine-tune vary
// (Llama 2 and 3, Mistral, Qwen2, SmolLM); zero is the default each names.
// They are part of the model: replicas must agree on them, and the state
// blob pins them (state.c, version 3).
type Knobs struct {
	// RMSNormEps is RMSNorm's epsilon, in (0, 0.1]; 0 means 1e-5.
	RMSNormEps float32 `json:"rms_norm_eps,omitempty"`
	// RopeScaling is "" (plain rotary frequencies) or "llama3": Llama 3.1's
	// scaling (transformers' rope_type "llama3"), which divides by
	// RopeFactor the frequencies whose wavelength is above RopeOrigCtx /
	// RopeLowFreq, keeps those below RopeOrigCtx / RopeHighFreq, and blends
	// the ones between.
	RopeScaling  string  `json:"rope_scaling,omitempty"`
	RopeFactor   float32 `json:"rope_factor,omitempty"`
	RopeLowFreq  float32 `json:"rope_low_freq_factor,omitempty"`
	RopeHighFreq float32 `json:"rope_high_freq_factor,omitempty"`
	RopeOrigCtx  int     `json:"rope_original_context,omitempty"`
	// QKVBias gives the q, k and v projections biases (Qwen2's attention;
	// tensors bq, bk and bv, which start at zero). The output projection
	// has none.
	QKVBias bool `json:"qkv_bias,omitempty"`
}

// RopeLlama3 names Llama 3.1's rotary scaling (Knobs.RopeScaling).
const RopeLlama3 = "llama3"

// DefaultRMSNormEps is RMSNorm's epsilon where Knobs.RMSNormEps is 0.
const DefaultRMSNormEps = 1e-5

// normalized is k with the defaults written out, for comparisons.
func (k Knobs) normalized() Knobs {
	if k.RMSNormEps == 0 {
		k.RMSNormEps = DefaultRMSNormEps
	}
	return k
}

// check says what is wrong with a Llama's knobs.
func (k Knobs) check() error {
	if !(k.RMSNormEps >= 0 && k.RMSNormEps <= 0.1) {
		return fmt.Errorf("model config: rms_norm_eps %v out of range (0, 0.1]", k.RMSNormEps)
	}
	switch k.RopeScaling {
	case "":
		if k.RopeFactor != 0 || k.RopeLowFreq != 0 || k.RopeHighFreq != 0 || k.RopeOrigCtx != 0 {
			return fmt.Errorf("model config: rope_factor, rope_low_freq_factor, rope_high_freq_factor and rope_original_context need rope_scaling = %q", RopeLlama3)
		}
	case RopeLlama3:
		switch {
		case !(k.RopeFactor >= 1 && k.RopeFactor <= 1024):
			return fmt.Errorf("model config: rope_factor %v out of range [1, 1024]", k.RopeFactor)
		case !(k.RopeLowFreq > 0 && k.RopeHighFreq > k.RopeLowFreq && k.RopeHighFreq <= 1024):
			return fmt.Errorf("model config: rope_low_freq_factor %v and rope_high_freq_factor %v: want 0 < low < high <= 1024", k.RopeLowFreq, k.RopeHighFreq)
		case k.RopeOrigCtx < 1 || k.RopeOrigCtx > 1<<24:
			return fmt.Errorf("model config: rope_original_context %d out of range [1, 2^24]", k.RopeOrigCtx)
		}
	default:
		return fmt.Errorf("model config: unknown rope_scaling %q (known: %q, or none)", k.RopeScaling, RopeLlama3)
	}
	return nil
}

// MaxGradShards bounds Config.GradShards.
const MaxGradShards = 64

// MaxTensorParallelism is the most devices a tensor-parallel group has
// (SetDevices; TRG_MAX_TP in cuda/model.cu).
const MaxTensorParallelism = 8

// Shards is c's gradient shard count, at least 1.
func (c Config) Shards() int { return max(c.GradShards, 1) }

// Numeric contracts (Config.Arith).
const (
	ArithFP32 = "fp32"
	ArithMX8  = "mx8"
)

// IsMX8 reports whether c's matrix products follow contract v3 (mx8).
func (c Config) IsMX8() bool { return c.Arith == ArithMX8 }

// Architectures.
const (
	ArchGPT2  = "gpt2"
	ArchLlama = "llama"
)

// IsLlama reports whether c is a Llama model.
func (c Config) IsLlama() bool { return c.Arch == ArchLlama }

var namedConfigs = map[string]Config{
	"light":          {Name: "light", Vocab: 256, PaddedVocab: 256, Layers: 4, Channels: 128, Heads: 4, SeqLen: 128, MicroBatch: 8},
	"small":          {Name: "small", Vocab: 256, PaddedVocab: 256, Layers: 6, Channels: 384, Heads: 6, SeqLen: 256, MicroBatch: 8},
	"gpt2-bpe-small": {Name: "gpt2-bpe-small", Vocab: 50257, PaddedVocab: 50304, Layers: 6, Channels: 384, Heads: 6, SeqLen: 256, MicroBatch: 4},
	"gpt2-124m":      {Name: "gpt2-124m", Vocab: 50257, PaddedVocab: 50304, Layers: 12, Channels: 768, Heads: 12, SeqLen: 1024, MicroBatch: 1},
	"llama-light": {Name: "llama-light", Arch: ArchLlama, Vocab: 256, PaddedVocab: 256, Layers: 4, Channels: 128, Heads: 4, KVHeads: 2,
		Hidden: 384, RopeTheta: 10000, SeqLen: 128, MicroBatch: 8},
	"llama-small": {Name: "llama-small", Arch: ArchLlama, Vocab: 256, PaddedVocab: 256, Layers: 6, Channels: 384, Heads: 6, KVHeads: 2,
		Hidden: 1152, RopeTheta: 10000, SeqLen: 256, MicroBatch: 8},
	"llama-125m": {Name: "llama-125m", Arch: ArchLlama, Vocab: 50257, PaddedVocab: 50304, Layers: 12, Channels: 768, Heads: 12,
		KVHeads: 4, Hidden: 2304, RopeTheta: 10000, SeqLen: 1024, MicroBatch: 1},
	// The seed's runs: config/llama-12m.toml (the -light recipes) and
	// config/llama-1.1b.toml (TinyLlama's shape with GPT-2's tokenizer).
	"llama-12m": {Name: "llama-12m", Arch: ArchLlama, Vocab: 256, PaddedVocab: 256, Layers: 8, Channels: 384, Heads: 6, KVHeads: 2,
		Hidden: 1024, RopeTheta: 10000, SeqLen: 512, MicroBatch: 4},
	"llama-1.1b": {Name: "llama-1.1b", Arch: ArchLlama, Vocab: 50257, PaddedVocab: 50304, Layers: 22, Channels: 2048, Heads: 32,
		KVHeads: 4, Hidden: 5632, RopeTheta: 10000, SeqLen: 2048, MicroBatch: 1},
}

// ConfigNames lists the named configurations.
func ConfigNames() []string {
	names := make([]string, 0, len(namedConfigs))
	for n := range namedConfigs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ConfigByName returns a named configuration (ConfigNames lists them).
func ConfigByName(name string) (Config, error) {
	c, ok := namedConfigs[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown model config %q (known: %v)", name, ConfigNames())
	}
	return c, nil
}

// Validate reports the first field that makes c unusable.
func (c Config) Validate() error {
	switch {
	case c.Vocab < 2 || c.Vocab > 1<<24:
		return fmt.Errorf("model config: vocab %d out of range [2, 2^24]", c.Vocab)
	case c.PaddedVocab < c.Vocab || c.PaddedVocab > 1<<24:
		return fmt.Errorf("model config: padded vocab %d must be in [vocab=%d, 2^24]", c.PaddedVocab, c.Vocab)
	case c.Layers < 1 || c.Layers > 1024:
		return fmt.Errorf("model config: layers %d out of range [1, 1024]", c.Layers)
	case c.Channels < 8 || c.Channels > 65536:
		return fmt.Errorf("model config: channels %d out of range [8, 65536]", c.Channels)
	case c.Heads < 1 || c.Channels%c.Heads != 0:
		return fmt.Errorf("model config: heads %d must divide channels %d", c.Heads, c.Channels)
	case c.SeqLen < 1 || c.SeqLen > 65536:
		return fmt.Errorf("model config: seq_len %d out of range [1, 65536]", c.SeqLen)
	case c.MicroBatch < 1 || c.MicroBatch > 65536:
		return fmt.Errorf("model config: micro_batch %d out of range [1, 65536]", c.MicroBatch)
	}
	if g := c.GradShards; g < 0 || g > MaxGradShards || g&(g-1) != 0 {
		return fmt.Errorf("model config: grad_shards %d must be a power of two in [1, %d]", g, MaxGradShards)
	}
	switch c.Arith {
	case "", ArithFP32, ArithMX8:
	default:
		return fmt.Errorf("model config: unknown numeric contract %q (known: fp32, mx8)", c.Arith)
	}
	switch c.Arch {
	case "", ArchGPT2:
		if c.KVHeads != 0 || c.Hidden != 0 || c.Untied || c.RopeTheta != 0 || c.Knobs != (Knobs{}) {
			return fmt.Errorf("model config: kv_heads, hidden, untied, rope_theta, rms_norm_eps, rope scaling and qkv_bias are Llama settings, not gpt2's")
		}
	case ArchLlama:
		switch {
		case c.KVHeads < 1 || c.Heads%c.KVHeads != 0:
			return fmt.Errorf("model config: kv_heads %d must divide heads %d", c.KVHeads, c.Heads)
		case (c.Channels/c.Heads)%2 != 0:
			return fmt.Errorf("model config: the head size %d must be even for rotary embeddings", c.Channels/c.Heads)
		case c.Hidden < 1 || c.Hidden > 1<<20:
			return fmt.Errorf("model config: hidden %d out of range [1, 2^20]", c.Hidden)
		case !(c.RopeTheta >= 1 && c.RopeTheta <= 1e12):
			return fmt.Errorf("model config: rope_theta %v out of range [1, 1e12]", c.RopeTheta)
		}
		return c.Knobs.check()
	default:
		return fmt.Errorf("model config: unknown architecture %q (known: gpt2, llama)", c.Arch)
	}
	return nil
}

// sameModel reports whether c and o describe the same parameters.
func (c Config) sameModel(o Config) bool {
	return c.IsLlama() == o.IsLlama() && c.Vocab == o.Vocab && c.PaddedVocab == o.PaddedVocab && c.Layers == o.Layers &&
		c.Channels == o.Channels && c.Heads == o.Heads && c.SeqLen == o.SeqLen && c.KVHeads == o.KVHeads &&
		c.Hidden == o.Hidden && c.Untied == o.Untied && c.RopeTheta == o.RopeTheta && c.Knobs.normalized() == o.Knobs.normalized()
}

// Description names the model's architecture and shapes, for error messages.
func (c Config) Description() string {
	if c.IsLlama() {
		d := fmt.Sprintf("llama: %d layers, width %d, %d heads, %d key/value heads, SwiGLU %d, rope theta %g, vocabulary %d, untied %v",
			c.Layers, c.Channels, c.Heads, c.KVHeads, c.Hidden, c.RopeTheta, c.Vocab, c.Untied)
		if k := c.Knobs.normalized(); k.RMSNormEps != DefaultRMSNormEps {
			d += fmt.Sprintf(", rms_norm_eps %g", k.RMSNormEps)
		}
		if c.RopeScaling != "" {
			d += fmt.Sprintf(", rope scaling %s (factor %g, low %g, high %g, original context %d)", c.RopeScaling, c.RopeFactor, c.RopeLowFreq,
				c.RopeHighFreq, c.RopeOrigCtx)
		}
		if c.QKVBias {
			d += ", q/k/v biases"
		}
		return d
	}
	return fmt.Sprintf("gpt2: %d layers, width %d, %d heads, vocabulary %d", c.Layers, c.Channels, c.Heads, c.Vocab)
}
