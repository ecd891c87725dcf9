package trainer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// Hugging Face model files: a directory with config.json and
// model.safetensors, with transformers' tensor names and config keys for
// GPT2LMHeadModel, LlamaForCausalLM and Qwen2ForCausalLM (a Llama with
// q/k/v biases). Export writes fp32; import reads fp32, fp16 or bf16
// (widened exactly to fp32).

// HF file names inside a model directory.
const (
	HFConfigFile  = "config.json"
	HFWeightsFile = "model.safetensors"
)

// ErrHF marks a Hugging Face model directory that cannot be used.
var ErrHF = errors.New("unusable Hugging Face model")

// hfTensor maps one HF tensor to a slice of our parameters: rows x cols of
// tensor ours (or its layer's matrix) read with a transpose when trans
// (GPT-2's Conv1D stores (in, out)).
type hfTensor struct {
	name       string
	shape      []int // as HF stores it
	ours       string
	layer      int // -1: not a per-layer tensor
	rows, cols int // of our matrix (a vector: rows 1)
	trans      bool
}

// hfLayout lists cfg's HF tensors in the order they are written.
func hfLayout(cfg Config) []hfTensor {
	C, V, L, T := cfg.Channels, cfg.Vocab, cfg.Layers, cfg.SeqLen
	var out []hfTensor
	add := func(name, ours string, layer, rows, cols int, trans bool) {
		shape := []int{rows, cols}
		switch {
		case rows == 1:
			shape = []int{cols}
		case trans:
			shape = []int{cols, rows}
		}
		out = append(out, hfTensor{name: name, shape: shape, ours: ours, layer: layer, rows: rows, cols: cols, trans: trans})
	}
	if cfg.IsLlama() {
		KVD, H := cfg.KVHeads*(C/cfg.Heads), cfg.Hidden
		add("model.embed_tokens.weight", "wte", -1, V, C, false)
		for l := range L {
			p := fmt.Sprintf("model.layers.%d.", l)
			add(p+"input_layernorm.weight", "rms1w", l, 1, C, false)
			add(p+"self_attn.q_proj.weight", "wq", l, C, C, false)
			add(p+"self_attn.k_proj.weight", "wk", l, KVD, C, false)
			add(p+"self_attn.v_proj.weight", "wv", l, KVD, C, false)
			if cfg.QKVBias {
				add(p+"self_attn.q_proj.bias", "bq", l, 1, C, false)
				add(p+"self_attn.k_proj.bias", "bk", l, 1, KVD, false)
				add(p+"self_attn.v_proj.bias", "bv", l, 1, KVD, false)
			}
			add(p+"self_attn.o_proj.weight", "wo", l, C, C, false)
			add(p+"post_attention_layernorm.weight", "rms2w", l, 1, C, false)
			add(p+"mlp.gate_proj.weight", "wgate", l, H, C, false)
			add(p+"mlp.up_proj.weight", "wup", l, H, C, false)
			add(p+"mlp.down_proj.weight", "wdown", l, C, H, false)
		}
		add("model.norm.weight", "rmsfw", -1, 1, C, false)
		if cfg.Untied {
			add("lm_head.weight", "lmhead", -1, V, C, false)
		}
		return out
	}
	add("transformer.wte.weight", "wte", -1, V, C, false)
	add("transformer.wpe.weight", "wpe", -1, T, C, false)
	for l := range L {
		p := fmt.Sprintf("transformer.h.%d.", l)
		add(p+"ln_1.weight", "ln1w", l, 1, C, false)
		add(p+"ln_1.bias", "ln1b", l, 1, C, false)
		add(p+"attn.c_attn.weight", "qkvw", l, 3*C, C, true)
		add(p+"attn.c_attn.bias", "qkvb", l, 1, 3*C, false)
		add(p+"attn.c_proj.weight", "attprojw", l, C, C, true)
		add(p+"attn.c_proj.bias", "attprojb", l, 1, C, false)
		add(p+"ln_2.weight", "ln2w", l, 1, C, false)
		add(p+"ln_2.bias", "ln2b", l, 1, C, false)
		add(p+"mlp.c_fc.weight", "fcw", l, 4*C, C, true)
		add(p+"mlp.c_fc.bias", "fcb", l, 1, 4*C, false)
		add(p+"mlp.c_proj.weight", "fcprojw", l, C, 4*C, true)
		add(p+"mlp.c_proj.bias", "fcprojb", l, 1, C, false)
	}
	add("transformer.ln_f.weight", "lnfw", -1, 1, C, false)
	add("transformer.ln_f.bias", "lnfb", -1, 1, C, false)
	return out
}

// hfGPT2Config and hfLlamaConfig are the config.json keys we write and read.
type hfGPT2Config struct {
	Architectures      []string `json:"architectures"`
	ModelType          string   `json:"model_type"`
	VocabSize          int      `json:"vocab_size"`
	NPositions         int      `json:"n_positions"`
	NCtx               int      `json:"n_ctx,omitempty"`
	NEmbd              int      `json:"n_embd"`
	NLayer             int      `json:"n_layer"`
	NHead              int      `json:"n_head"`
	NInner             *int     `json:"n_inner"`
	ActivationFunction string   `json:"activation_function"`
	LayerNormEpsilon   float64  `json:"layer_norm_epsilon"`
	TieWordEmbeddings  *bool    `json:"tie_word_embeddings,omitempty"`
	TorchDtype         string   `json:"torch_dtype,omitempty"`
	// Variants of attention we do not implement; read to refuse them.
	ScaleAttnWeights          *bool `json:"scale_attn_weights,omitempty"`
	ScaleAttnByInverseLayerID bool  `json:"scale_attn_by_inverse_layer_idx,omitempty"`
}

type hfLlamaConfig struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim,omitempty"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RopeTheta             float64  `json:"rope_theta,omitempty"`
	RopeScaling           *hfRope  `json:"rope_scaling,omitempty"`
	// transformers 5 writes the rotary settings here instead.
	RopeParameters *hfRope `json:"rope_parameters,omitempty"`
	// Mistral and Qwen2: attention within this many tokens (null: all); in
	// Qwen2 only with use_sliding_window, and only in the layers layer_types
	// names "sliding_attention" (by default those from max_window_layers on).
	SlidingWindow     *int     `json:"sliding_window,omitempty"`
	UseSlidingWindow  *bool    `json:"use_sliding_window,omitempty"`
	MaxWindowLayers   *int     `json:"max_window_layers,omitempty"`
	LayerTypes        []string `json:"layer_types,omitempty"`
	RMSNormEps        float64  `json:"rms_norm_eps"`
	TieWordEmbeddings bool     `json:"tie_word_embeddings"`
	HiddenAct         string   `json:"hidden_act"`
	// Llama's; Qwen2 has no such keys (its q, k and v have biases, o none).
	AttentionBias *bool  `json:"attention_bias,omitempty"`
	MLPBias       *bool  `json:"mlp_bias,omitempty"`
	TorchDtype    string `json:"torch_dtype,omitempty"`
}

// qwen2Window is the window within which a Qwen2 attends (0: everywhere),
// as transformers 5 reads its config: the window is sliding_window when
// use_sliding_window is true, else none; layer i slides when
// layer_types[i] is "sliding_attention", layer_types being by default, with
// a window, the layers from max_window_layers (28) on.
func (h *hfLlamaConfig) qwen2Window() (int, error) {
	window := 0
	if h.UseSlidingWindow != nil && *h.UseSlidingWindow && h.SlidingWindow != nil {
		if window = *h.SlidingWindow; window < 1 {
			return 0, fmt.Errorf("sliding_window %d: want a positive window or null", window)
		}
	}
	types := h.LayerTypes
	if types == nil {
		first := 28
		if h.MaxWindowLayers != nil {
			first = *h.MaxWindowLayers
		}
		for i := range h.NumHiddenLayers {
			typ := "full_attention"
			if window != 0 && i >= first {
				typ = "sliding_attention"
			}
			types = append(types, typ)
		}
	}
	if len(types) != h.NumHiddenLayers {
		return 0, fmt.Errorf("layer_types has %d entries for %d layers", len(types), h.NumHiddenLayers)
	}
	slides := false
	for i, typ := range types {
		switch typ {
		case "full_attention":
		case "sliding_attention":
			slides = true
		default:
			return 0, fmt.Errorf("layer_types[%d] %q: full_attention and sliding_attention are supported", i, typ)
		}
	}
	switch {
	case !slides:
		return 0, nil
	case window == 0:
		return 0, fmt.Errorf("layer_types: sliding_attention layers need use_sliding_window true and a sliding_window")
	}
	return window, nil
}

// hfRope is rope_scaling (transformers 4) or rope_parameters (5): the type
// ("type" in older files) and Llama 3.1's scaling.
type hfRope struct {
	RopeTheta      float64 `json:"rope_theta,omitempty"`
	RopeType       string  `json:"rope_type,omitempty"`
	Type           string  `json:"type,omitempty"`
	Factor         float64 `json:"factor,omitempty"`
	LowFreqFactor  float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPos int     `json:"original_max_position_embeddings,omitempty"`
}

// knobs reads r's scaling into k: none ("default", or no type) or llama3.
func (r *hfRope) knobs(key string, k *Knobs) error {
	if r == nil {
		return nil
	}
	typ := r.RopeType
	if typ == "" {
		typ = r.Type
	}
	switch typ {
	case "", "default":
		return nil
	case RopeLlama3:
		k.RopeScaling, k.RopeFactor, k.RopeLowFreq, k.RopeHighFreq = RopeLlama3, float32(r.Factor), float32(r.LowFreqFactor), float32(r.HighFreqFactor)
		k.RopeOrigCtx = r.OriginalMaxPos
		return nil
	}
	return fmt.Errorf("%s.rope_type %q: plain rotary embeddings and %q are supported", key, typ, RopeLlama3)
}

// GPT-2's fixed LayerNorm epsilon (kernels.h), which an imported GPT-2 must use.
const hfNormEps = 1e-5

// A Llama exports as LlamaForCausalLM, with q/k/v biases as
// Qwen2ForCausalLM (without its sliding window).
func hfConfigJSON(cfg Config) ([]byte, error) {
	if cfg.IsLlama() {
		k := cfg.Knobs.normalized()
		h := hfLlamaConfig{
			Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama", VocabSize: cfg.Vocab, HiddenSize: cfg.Channels,
			IntermediateSize: cfg.Hidden, NumHiddenLayers: cfg.Layers, NumAttentionHeads: cfg.Heads, NumKeyValueHeads: cfg.KVHeads,
			HeadDim: cfg.Channels / cfg.Heads, MaxPositionEmbeddings: cfg.SeqLen, RopeTheta: float64(cfg.RopeTheta),
			RMSNormEps: float64(k.RMSNormEps), TieWordEmbeddings: !cfg.Untied, HiddenAct: "silu",
			AttentionBias: new(bool), MLPBias: new(bool), TorchDtype: "float32",
		}
		if k.QKVBias {
			h.Architectures, h.ModelType, h.HeadDim, h.AttentionBias, h.MLPBias = []string{"Qwen2ForCausalLM"}, "qwen2", 0, nil, nil
			h.UseSlidingWindow = new(bool)
		}
		if k.RopeScaling == RopeLlama3 {
			h.RopeScaling = &hfRope{RopeType: RopeLlama3, Factor: float64(k.RopeFactor), LowFreqFactor: float64(k.RopeLowFreq),
				HighFreqFactor: float64(k.RopeHighFreq), OriginalMaxPos: k.RopeOrigCtx}
		}
		return json.MarshalIndent(h, "", "  ")
	}
	tied := true
	return json.MarshalIndent(hfGPT2Config{
		Architectures: []string{"GPT2LMHeadModel"}, ModelType: "gpt2", VocabSize: cfg.Vocab, NPositions: cfg.SeqLen,
		NCtx: cfg.SeqLen, NEmbd: cfg.Channels, NLayer: cfg.Layers, NHead: cfg.Heads, ActivationFunction: "gelu_new",
		LayerNormEpsilon: hfNormEps, TieWordEmbeddings: &tied, TorchDtype: "float32",
	}, "", "  ")
}

// hfConfig reads config.json into a trainer config with the given micro-batch.
func hfConfig(data []byte, microBatch int) (Config, error) {
	var probe struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Config{}, fmt.Errorf("%s: %v", HFConfigFile, err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }
	var cfg Config
	switch probe.ModelType {
	case "gpt2":
		var h hfGPT2Config
		if err := json.Unmarshal(data, &h); err != nil {
			return Config{}, fmt.Errorf("%s: %v", HFConfigFile, err)
		}
		switch {
		case h.ActivationFunction != "gelu_new" && h.ActivationFunction != "gelu_pytorch_tanh":
			return Config{}, fmt.Errorf("activation_function %q: only the tanh GELU (gelu_new) is supported", h.ActivationFunction)
		case h.NInner != nil && *h.NInner != 4*h.NEmbd:
			return Config{}, fmt.Errorf("n_inner %d: only 4 * n_embd is supported", *h.NInner)
		case !near(h.LayerNormEpsilon, hfNormEps):
			return Config{}, fmt.Errorf("layer_norm_epsilon %g: only %g is supported", h.LayerNormEpsilon, hfNormEps)
		case h.TieWordEmbeddings != nil && !*h.TieWordEmbeddings:
			return Config{}, fmt.Errorf("tie_word_embeddings false: GPT-2's lm-head is the token embedding")
		case h.ScaleAttnWeights != nil && !*h.ScaleAttnWeights, h.ScaleAttnByInverseLayerID:
			return Config{}, fmt.Errorf("attention scaled otherwise than by 1/sqrt(head size) is not supported")
		}
		cfg = Config{Vocab: h.VocabSize, Layers: h.NLayer, Channels: h.NEmbd, Heads: h.NHead, SeqLen: h.NPositions}
	case "llama", "mistral", "qwen2":
		var h hfLlamaConfig
		if err := json.Unmarshal(data, &h); err != nil {
			return Config{}, fmt.Errorf("%s: %v", HFConfigFile, err)
		}
		qwen2 := probe.ModelType == "qwen2"
		switch {
		case h.HiddenAct != "silu":
			return Config{}, fmt.Errorf("hidden_act %q: only silu is supported", h.HiddenAct)
		case !qwen2 && h.AttentionBias != nil && *h.AttentionBias:
			return Config{}, fmt.Errorf("attention_bias true (biases on q, k, v and o): only Qwen2's, on q, k and v, are supported")
		case !qwen2 && h.MLPBias != nil && *h.MLPBias:
			return Config{}, fmt.Errorf("mlp_bias must be false")
		case !(h.RMSNormEps > 0 && h.RMSNormEps <= 0.1):
			return Config{}, fmt.Errorf("rms_norm_eps %g: out of range (0, 0.1]", h.RMSNormEps)
		case h.NumAttentionHeads > 0 && h.HeadDim != 0 && h.HeadDim*h.NumAttentionHeads != h.HiddenSize:
			return Config{}, fmt.Errorf("head_dim %d: only hidden_size / num_attention_heads is supported", h.HeadDim)
		case !qwen2 && h.SlidingWindow != nil && *h.SlidingWindow < 1:
			return Config{}, fmt.Errorf("sliding_window %d: want a positive window or null", *h.SlidingWindow)
		}
		var k Knobs
		if err := h.RopeScaling.knobs("rope_scaling", &k); err != nil {
			return Config{}, err
		}
		if err := h.RopeParameters.knobs("rope_parameters", &k); err != nil {
			return Config{}, err
		}
		if r := h.RopeParameters; r != nil && h.RopeTheta == 0 {
			h.RopeTheta = r.RopeTheta
		}
		if eps := float32(h.RMSNormEps); eps != DefaultRMSNormEps {
			k.RMSNormEps = eps
		}
		k.QKVBias = qwen2
		kv := h.NumKeyValueHeads
		if kv == 0 {
			kv = h.NumAttentionHeads
		}
		// Mistral (and a Qwen2's sliding layers) attend within sliding_window
		// tokens; below it that is full attention, so the model's context is
		// cut to the window.
		window := 0
		if w := h.SlidingWindow; w != nil && !qwen2 {
			window = *w
		}
		if qwen2 {
			var err error
			if window, err = h.qwen2Window(); err != nil {
				return Config{}, err
			}
		}
		seq := h.MaxPositionEmbeddings
		if window != 0 && window < seq {
			seq = window
		}
		cfg = Config{Arch: ArchLlama, Vocab: h.VocabSize, Layers: h.NumHiddenLayers, Channels: h.HiddenSize,
			Heads: h.NumAttentionHeads, KVHeads: kv, Hidden: h.IntermediateSize, RopeTheta: float32(h.RopeTheta),
			Untied: !h.TieWordEmbeddings, SeqLen: seq, Knobs: k}
	default:
		return Config{}, fmt.Errorf("model_type %q: gpt2, llama, mistral and qwen2 are supported", probe.ModelType)
	}
	cfg.Name = "hf-" + probe.ModelType
	cfg.PaddedVocab = (cfg.Vocab + 63) / 64 * 64
	cfg.MicroBatch = microBatch
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ExportHF writes this model to dir (created if missing) as config.json and
// model.safetensors in fp32, with transformers' names; files are replaced
// atomically.
func (t *Trainer) ExportHF(dir string) error {
	params, err := t.Params()
	if err != nil {
		return err
	}
	offsets, err := t.tensorOffsets()
	if err != nil {
		return err
	}
	cfgJSON, err := hfConfigJSON(t.cfg)
	if err != nil {
		return err
	}
	layout := hfLayout(t.cfg)
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, h := range layout {
		n := h.rows * h.cols
		header[h.name] = stEntry{DType: "F32", Shape: h.shape, Offsets: [2]int64{int64(len(data)), int64(len(data) + 4*n)}}
		base := offsets[h.ours] + max(h.layer, 0)*h.rows*h.cols
		for i := range n {
			r, c := i/h.cols, i%h.cols
			if h.trans { // HF (cols, rows) row-major: element i is ours (i % rows, i / rows)
				r, c = i%h.rows, i/h.rows
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(params[base+r*h.cols+c]))
		}
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	buf := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(hj)+len(data)), uint64(len(hj)))
	buf = append(append(buf, hj...), data...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, HFWeightsFile), buf, 0o644); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, HFConfigFile), append(cfgJSON, '\n'), 0o644)
}

// tensorOffsets maps our tensor names to their offsets in the flat parameters.
func (t *Trainer) tensorOffsets() (map[string]int, error) {
	ts, err := t.Tensors()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, x := range ts {
		out[x.Name] = x.Offset
	}
	return out, nil
}

// ImportHF reads a Hugging Face model directory (config.json and
// model.safetensors, fp32, fp16 or bf16) into a new trainer whose forward
// and backward passes use microBatch sequences per pass. Every tensor the
// architecture needs must be there with its shape; a tied lm_head.weight
// that transformers keeps is allowed when it equals the embedding.
func ImportHF(dir string, microBatch int) (*Trainer, error) {
	cfg, err := ReadHFConfig(dir, microBatch)
	if err != nil {
		return nil, err
	}
	t, err := New(cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := t.LoadHF(filepath.Join(dir, HFWeightsFile)); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// ReadHFConfig reads the config.json of a Hugging Face model directory into
// a trainer config with the given micro-batch.
func ReadHFConfig(dir string, microBatch int) (Config, error) {
	cj, err := os.ReadFile(filepath.Join(dir, HFConfigFile))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %v: %w", dir, err, ErrHF)
	}
	cfg, err := hfConfig(cj, microBatch)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %v: %w", dir, err, ErrHF)
	}
	return cfg, nil
}

// HFConfigFits checks that a Hugging Face model of config hf can start a
// model of config want: the same architecture and shapes, except that a
// GPT-2 may have more positions than want's sequence length (the first ones
// are kept) and a Llama any (it has no position table).
func HFConfigFits(hf, want Config) error {
	a, b := hf, want
	a.Name, a.MicroBatch, a.SeqLen, b.Name, b.MicroBatch, b.SeqLen = "", 0, 0, "", 0, 0
	if !a.sameModel(b) {
		return fmt.Errorf("the Hugging Face model (%s) is not the run's (%s): %w", hf.Description(), want.Description(), ErrHF)
	}
	if !hf.IsLlama() && hf.SeqLen < want.SeqLen {
		return fmt.Errorf("the Hugging Face model has %d positions, fewer than the run's sequence length %d: %w", hf.SeqLen, want.SeqLen, ErrHF)
	}
	return nil
}

// IsHFWeights reports whether the safetensors file at path holds a Hugging
// Face model (transformers' tensor names) rather than one of ours.
func IsHFWeights(path string) bool {
	hdr, err := readSafetensorsHeader(path)
	if err != nil {
		return false
	}
	_, gpt2 := hdr["transformer.wte.weight"]
	_, llama := hdr["model.embed_tokens.weight"]
	return gpt2 || llama
}

// readSafetensorsHeader reads only the header of a safetensors file.
func readSafetensorsHeader(path string) (stHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > maxHeaderLen {
		return nil, fmt.Errorf("%s: header of %d bytes", path, size)
	}
	raw := make([]byte, size)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, err
	}
	var hdr stHeader
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return nil, fmt.Errorf("%s: header: %v", path, err)
	}
	return hdr, nil
}

// LoadHF sets this trainer's parameters from a Hugging Face weights file
// (model.safetensors) of its architecture and shapes; see ImportHF. A
// GPT-2's position table may be longer than the sequence length: its first
// rows are used. The optimizer state is untouched, so this is for a trainer
// that has not trained yet. A bad file is rejected and changes nothing.
func (t *Trainer) LoadHF(path string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %w", path, fmt.Sprintf(format, args...), ErrHF)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return bad("%v", err)
	}
	hdr, body, err := parseSafetensors(raw)
	if err != nil {
		return bad("%v", err)
	}
	cfg := t.cfg
	params := make([]float32, t.NumParams()) // padded vocabulary rows stay 0
	offsets, err := t.tensorOffsets()
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, h := range hfLayout(cfg) {
		shape := h.shape
		if h.ours == "wpe" {
			if rows := hdr.rows(h.name); rows > shape[0] {
				shape = []int{rows, shape[1]}
			}
		}
		vals, err := hdr.floats(body, h.name, shape)
		if err != nil {
			return bad("%v", err)
		}
		used[h.name] = true
		base := offsets[h.ours] + max(h.layer, 0)*h.rows*h.cols
		for i, v := range vals[:h.rows*h.cols] {
			r, c := i/h.cols, i%h.cols
			if h.trans {
				r, c = i%h.rows, i/h.rows
			}
			params[base+r*h.cols+c] = v
		}
	}
	for name := range hdr {
		if used[name] || name == "__metadata__" || strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias") ||
			strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue // GPT-2's causal-mask buffers and Llama's rotary table: derived, not parameters
		}
		if name == "lm_head.weight" && !cfg.Untied {
			emb := "transformer.wte.weight"
			if cfg.IsLlama() {
				emb = "model.embed_tokens.weight"
			}
			a, err1 := hdr.floats(body, name, []int{cfg.Vocab, cfg.Channels})
			b, err2 := hdr.floats(body, emb, []int{cfg.Vocab, cfg.Channels})
			if err1 == nil && err2 == nil && slices.Equal(a, b) {
				continue
			}
			return bad("lm_head.weight differs from the token embedding, but the config ties them")
		}
		return bad("unexpected tensor %s", name)
	}
	if err := t.SetParams(params); err != nil {
		return bad("%v", err)
	}
	return nil
}

// safetensors header entries by name.
type stHeader map[string]json.RawMessage

func parseSafetensors(raw []byte) (stHeader, []byte, error) {
	if len(raw) < 8 {
		return nil, nil, fmt.Errorf("%d bytes: no header", len(raw))
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > uint64(len(raw)-8) || n > maxHeaderLen {
		return nil, nil, fmt.Errorf("header of %d bytes in a file of %d", n, len(raw))
	}
	var hdr stHeader
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		return nil, nil, fmt.Errorf("header: %v", err)
	}
	return hdr, raw[8+n:], nil
}

// rows is the first dimension of tensor name (0 when missing or unreadable).
func (h stHeader) rows(name string) int {
	var e stEntry
	if json.Unmarshal(h[name], &e) != nil || len(e.Shape) == 0 {
		return 0
	}
	return e.Shape[0]
}

// floats returns tensor name of the given shape, widened to fp32.
func (h stHeader) floats(body []byte, name string, shape []int) ([]float32, error) {
	raw, ok := h[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s missing", name)
	}
	var e stEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("tensor %s: %v", name, err)
	}
	if !slices.Equal(e.Shape, shape) {
		return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, e.Shape, shape)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	width := map[string]int{"F32": 4, "F16": 2, "BF16": 2}[e.DType]
	if width == 0 {
		return nil, fmt.Errorf("tensor %s: dtype %s (want F32, F16 or BF16)", name, e.DType)
	}
	if e.Offsets[0] < 0 || e.Offsets[1] > int64(len(body)) || e.Offsets[1]-e.Offsets[0] != int64(width*n) {
		return nil, fmt.Errorf("tensor %s: offsets %v do not hold %d %s values in %d bytes", name, e.Offsets, n, e.DType, len(body))
	}
	b := body[e.Offsets[0]:e.Offsets[1]]
	out := make([]float32, n)
	for i := range out {
		switch e.DType {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "BF16":
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		case "F16":
			out[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		}
		if f := out[i]; f-f != 0 {
			return nil, fmt.Errorf("tensor %s: value %d is %v", name, i, f)
		}
	}
	return out, nil
}

// halfToFloat widens an IEEE binary16 value exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp, frac := uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: normalise
	e := uint32(113)
	for frac&0x400 == 0 {
		frac <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (frac&0x3ff)<<13)
}
