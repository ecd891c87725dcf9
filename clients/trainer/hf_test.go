package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type hfGolden struct {
	Transformers string    `json:"transformers"`
	Tokens       [][]int32 `json:"tokens"`
	Logits       []float64 `json:"logits"`
	Loss         float64   `json:"loss"`
	Tensors      []string  `json:"tensors"`
	// The argmax continuation of a prompt (the newer goldens).
	Greedy *struct {
		Prompt []int32 `json:"prompt"`
		Tokens []int32 `json:"tokens"`
	} `json:"greedy"`
}

func loadGolden(t *testing.T, dir string) hfGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g hfGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// Our forward pass against transformers' (testdata/hf, written by
// scripts/torch/hf_goldens.py): a tiny random GPT2LMHeadModel, an untied
// LlamaForCausalLM with grouped-query attention, a tied one with Llama
// 3.1's rotary scaling and RMSNorm epsilon 1e-6, a MistralForCausalLM below
// its sliding window, and Qwen2ForCausalLM, tied and untied (with a sliding
// layer, below its window), imported from their save_pretrained files, give
// the reference's logits and loss within 1e-5 (relative to the largest
// logit) and its greedy continuation, and export back to the same tensor
// names and values, and the same architecture.
func TestHFGoldens(t *testing.T) {
	for _, name := range []string{"gpt2", "llama", "llama3", "mistral", "qwen2", "qwen2-untied"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "hf", name)
			g := loadGolden(t, dir)
			tr, err := ImportHF(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if (name == "mistral" || name == "qwen2-untied") && tr.Config().SeqLen != 16 {
				t.Errorf("%s: context %d, want its sliding window, 16", name, tr.Config().SeqLen)
			}
			seq := len(g.Tokens[0])
			var tok []int32
			for _, row := range g.Tokens {
				tok = append(tok, row...)
			}
			logits, err := tr.Logits(context.Background(), tok, seq)
			if err != nil {
				t.Fatal(err)
			}
			if len(logits) != len(g.Logits) {
				t.Fatalf("%d logits, golden %d", len(logits), len(g.Logits))
			}
			var maxDiff, maxRef float64
			for i, want := range g.Logits {
				maxDiff = max(maxDiff, math.Abs(float64(logits[i])-want))
				maxRef = max(maxRef, math.Abs(want))
			}
			// The loss over next-token targets, as the golden computes it.
			var inputs, targets []int32
			for _, row := range g.Tokens {
				inputs, targets = append(inputs, row[:seq-1]...), append(targets, row[1:]...)
			}
			loss, err := tr.Eval(context.Background(), inputs, targets, seq-1)
			if err != nil {
				t.Fatal(err)
			}
			lossErr := math.Abs(float64(loss)-g.Loss) / g.Loss
			t.Logf("transformers %s: logits max relative error %.3g over %d values, loss %.6f against %.6f (%.2g)",
				g.Transformers, maxDiff/maxRef, len(logits), loss, g.Loss, lossErr)
			if maxDiff/maxRef > 1e-5 || lossErr > 1e-5 {
				t.Errorf("logits off by %.3g, loss by %.3g: want at most 1e-5", maxDiff/maxRef, lossErr)
			}
			if g.Greedy != nil {
				if got := greedyTokens(t, tr, g.Greedy.Prompt, len(g.Greedy.Tokens)); !slices.Equal(got, g.Greedy.Tokens) {
					t.Errorf("greedy continuation %v, transformers %v", got, g.Greedy.Tokens)
				}
			}

			out := t.TempDir()
			if err := tr.ExportHF(out); err != nil {
				t.Fatal(err)
			}
			want, _, err := readHFTensors(filepath.Join(dir, HFWeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := readHFTensors(filepath.Join(out, HFWeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, g.Tensors) && !slices.Equal(names, withoutTied(g.Tensors)) {
				t.Errorf("exported tensors %v, transformers has %v", names, g.Tensors)
			}
			for n, w := range want {
				if gv, ok := got[n]; ok && !slices.Equal(gv, w) {
					t.Errorf("tensor %s changed in the round trip", n)
				}
			}
			back, err := ImportHF(out, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			p1, _ := tr.Params()
			p2, _ := back.Params()
			if !slices.Equal(p1, p2) {
				t.Error("export then import changed the parameters")
			}
			if arch, want := hfArchitecture(t, out), hfArchitecture(t, dir); arch != want && !(name == "mistral" && arch == "LlamaForCausalLM/llama") {
				t.Errorf("exported as %s, transformers saved %s", arch, want)
			}
		})
	}
}

// greedyTokens decodes prompt, then n tokens each the argmax of the last logits.
func greedyTokens(t *testing.T, tr *Trainer, prompt []int32, n int) []int32 {
	t.Helper()
	if err := tr.DecodeReset(); err != nil {
		t.Fatal(err)
	}
	var out []int32
	next := prompt[0]
	for i := 1; len(out) < n; i++ {
		logits, err := tr.DecodeNext(next)
		if err != nil {
			t.Fatal(err)
		}
		if i < len(prompt) {
			next = prompt[i]
			continue
		}
		next = int32(0)
		for j, v := range logits {
			if v > logits[next] {
				next = int32(j)
			}
		}
		out = append(out, next)
	}
	return out
}

// hfArchitecture is the model class and type a config.json names.
func hfArchitecture(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, HFConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Architectures []string `json:"architectures"`
		ModelType     string   `json:"model_type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Architectures) != 1 {
		t.Fatalf("%s: %v, architectures %v", dir, err, c.Architectures)
	}
	return c.Architectures[0] + "/" + c.ModelType
}

// GPT-2 models from transformers name the tied lm-head too; files leave it out.
func withoutTied(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "lm_head.weight" })
}

// readHFTensors reads every tensor of a safetensors file as fp32.
func readHFTensors(path string) (map[string][]float32, stHeader, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	hdr, body, err := parseSafetensors(raw)
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]float32{}
	for name, e := range hdr {
		if name == "__metadata__" {
			continue
		}
		var st stEntry
		if err := json.Unmarshal(e, &st); err != nil {
			return nil, nil, err
		}
		v, err := hdr.floats(body, name, st.Shape)
		if err != nil {
			return nil, nil, err
		}
		out[name] = v
	}
	return out, hdr, nil
}

// fp16 and bf16 files widen exactly; a config or tensor we cannot run is
// refused with a clear error.
func TestHFImportRejectsAndWidens(t *testing.T) {
	src := filepath.Join("testdata", "hf", "llama")
	cfgRaw, err := os.ReadFile(filepath.Join(src, HFConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	tensors, hdr, err := readHFTensors(filepath.Join(src, HFWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir, cfg string, dtype string, drop string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, HFConfigFile), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, HFWeightsFile), encodeHF(t, hdr, tensors, dtype, drop), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := ImportHF(src, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want, _ := ref.Params()
	for _, dtype := range []string{"BF16", "F16"} {
		dir := filepath.Join(t.TempDir(), dtype)
		write(dir, string(cfgRaw), dtype, "")
		tr, err := ImportHF(dir, 1)
		if err != nil {
			t.Fatalf("%s: %v", dtype, err)
		}
		got, _ := tr.Params()
		tr.Close()
		var worst float64
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		// Rounding the fp32 values to 8 (bf16) or 11 (fp16) significant bits.
		if limit := map[string]float64{"BF16": 1.0 / 64, "F16": 1.0 / 512}[dtype]; worst > limit || worst == 0 {
			t.Errorf("%s: largest change %.3g, want in (0, %g]", dtype, worst, limit)
		}
	}
	qwenRaw, err := os.ReadFile(filepath.Join("testdata", "hf", "qwen2", HFConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	qwen := func(old, new string) string {
		if !strings.Contains(string(qwenRaw), old) {
			t.Fatalf("qwen2's config.json has no %s", old)
		}
		return strings.Replace(string(qwenRaw), old, new, 1)
	}
	for _, c := range []struct{ name, cfg, drop, want string }{
		{"attention bias", strings.Replace(string(cfgRaw), `"attention_bias": false`, `"attention_bias": true`, 1), "", "attention_bias true"},
		{"qwen2 sliding layer without a window", qwen(`"full_attention"`, `"sliding_attention"`), "", "layer_types: sliding_attention"},
		{"qwen2 unknown layer type", qwen(`"full_attention"`, `"chunked_attention"`), "", "layer_types[0]"},
		{"qwen2 layer types short", qwen(`"full_attention",`, ``), "", "layer_types has 1 entries"},
		{"qwen2 window 0", qwen(`"use_sliding_window": false`, `"use_sliding_window": true, "sliding_window": 0`), "", "sliding_window 0"},
		{"scaled rope", strings.Replace(string(cfgRaw), `"rope_type": "default"`, `"rope_type": "yarn"`, 1), "", "rope_type"},
		{"gelu MLP", strings.Replace(string(cfgRaw), `"hidden_act": "silu"`, `"hidden_act": "gelu"`, 1), "", "hidden_act"},
		{"eps 0", strings.Replace(string(cfgRaw), `"rms_norm_eps": 1e-05`, `"rms_norm_eps": 0`, 1), "", "rms_norm_eps 0: out of range"},
		{"eps 0.5", strings.Replace(string(cfgRaw), `"rms_norm_eps": 1e-05`, `"rms_norm_eps": 0.5`, 1), "", "rms_norm_eps 0.5: out of range"},
		{"sliding window 0", strings.Replace(string(cfgRaw), `"model_type": "llama"`, `"model_type": "mistral", "sliding_window": 0`, 1), "", "sliding_window 0"},
		{"llama3 without a factor", strings.Replace(string(cfgRaw), `"rope_type": "default"`, `"rope_type": "llama3"`, 1), "", "rope_factor 0 out of range"},
		{"unknown model", strings.Replace(string(cfgRaw), `"model_type": "llama"`, `"model_type": "mamba"`, 1), "", "model_type"},
		{"missing tensor", string(cfgRaw), "model.norm.weight", "model.norm.weight missing"},
		{"not json", "{", "", "config.json"},
	} {
		dir := filepath.Join(t.TempDir(), "bad")
		write(dir, c.cfg, "F32", c.drop)
		if _, err := ImportHF(dir, 1); !errors.Is(err, ErrHF) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrHF naming %q", c.name, err, c.want)
		}
	}
}

// encodeHF writes tensors (all of hdr's but drop) as a safetensors file of dtype.
func encodeHF(t *testing.T, hdr stHeader, tensors map[string][]float32, dtype, drop string) []byte {
	t.Helper()
	names := slices.Sorted(maps.Keys(tensors))
	header := map[string]any{}
	var data []byte
	for _, n := range names {
		if n == drop {
			continue
		}
		var e stEntry
		if err := json.Unmarshal(hdr[n], &e); err != nil {
			t.Fatal(err)
		}
		start := len(data)
		for _, v := range tensors[n] {
			bits := math.Float32bits(v)
			switch dtype {
			case "F32":
				data = append(data, byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24))
			case "BF16":
				h := uint16((bits + 0x7fff + (bits>>16)&1) >> 16) // round to nearest even
				data = append(data, byte(h), byte(h>>8))
			case "F16":
				h := floatToHalf(v)
				data = append(data, byte(h), byte(h>>8))
			}
		}
		header[n] = stEntry{DType: dtype, Shape: e.Shape, Offsets: [2]int64{int64(start), int64(len(data))}}
	}
	hj, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 8, 8+len(hj)+len(data))
	for i := range 8 {
		out[i] = byte(uint64(len(hj)) >> (8 * i))
	}
	return append(append(out, hj...), data...)
}

// floatToHalf rounds a normal-range float32 to binary16 (test data only).
func floatToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23&0xff) - 127 + 15
	mant := bits & 0x7fffff
	if exp <= 0 {
		return sign
	}
	h := uint32(exp)<<10 | mant>>13
	if rest := mant & 0x1fff; rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// A run starts from a Hugging Face weights file with its own (on-chain)
// config: a GPT-2 with a shorter context keeps the first rows of the
// position table, and a config that differs in any shape is refused.
func TestLoadHFIntoRunConfig(t *testing.T) {
	src := filepath.Join("testdata", "hf", "gpt2")
	weights := filepath.Join(src, HFWeightsFile)
	if !IsHFWeights(weights) {
		t.Fatal("IsHFWeights: the golden's weights are not recognized")
	}
	full, err := ImportHF(src, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	hf := full.Config()
	short := hf
	short.SeqLen = hf.SeqLen / 2
	if err := HFConfigFits(hf, short); err != nil {
		t.Fatal(err)
	}
	tr, err := New(short, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.LoadHF(weights); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.safetensors")
	if err := tr.SaveModel(model, nil); err != nil {
		t.Fatal(err)
	}
	if IsHFWeights(model) {
		t.Fatal("IsHFWeights: our own model file taken for a Hugging Face one")
	}
	want, _ := full.Params()
	got, _ := tr.Params()
	offs, _ := tr.tensorOffsets()
	wantOffs, _ := full.tensorOffsets()
	ts, _ := tr.Tensors()
	for _, x := range ts {
		n := x.Size // wpe: the first SeqLen rows of the full table
		if !slices.Equal(got[offs[x.Name]:offs[x.Name]+n], want[wantOffs[x.Name]:wantOffs[x.Name]+n]) {
			t.Errorf("tensor %s differs from the full import", x.Name)
		}
	}

	long := hf
	long.SeqLen = 2 * hf.SeqLen
	for name, c := range map[string]Config{"longer context": long, "other width": func() Config { c := short; c.Channels *= 2; return c }(),
		"other heads": func() Config { c := short; c.Heads /= 2; return c }(), "llama": func() Config { c := short; c.Arch = ArchLlama; return c }()} {
		if err := HFConfigFits(hf, c); !errors.Is(err, ErrHF) {
			t.Errorf("%s: HFConfigFits = %v, want ErrHF", name, err)
		}
	}
	wide := short
	wide.Channels *= 2
	wide.PaddedVocab = short.PaddedVocab
	tw, err := New(wide, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	before, _ := tw.Params()
	if err := tw.LoadHF(weights); !errors.Is(err, ErrHF) || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("weights of another width: %v", err)
	}
	if after, _ := tw.Params(); !slices.Equal(before, after) {
		t.Fatal("a refused file changed the parameters")
	}
}
