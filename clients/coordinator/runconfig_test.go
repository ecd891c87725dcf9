package coordinator_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
)

func TestShippedRunConfigs(t *testing.T) {
	p := loadParams(t, "../../config/tiny.toml")
	m := p.Model
	// The `light` trainer config: byte-level vocab 256, L=4, C=128, H=4, T=128.
	if m.VocabSize != 256 || m.Tokenizer != 1 || m.NLayer != 4 || m.NEmbd != 128 || m.NHead != 4 || m.MaxSeqLen != 128 {
		t.Errorf("light model %+v", m)
	}
	if m.LearningRate != 0.001 || m.CheckpointKind != 1 || m.DataLocationKind != 2 || p.Config.EpochTime > 600 {
		t.Errorf("light: lr %v checkpoint %d data %d epoch %ds", m.LearningRate, m.CheckpointKind, m.DataLocationKind, p.Config.EpochTime)
	}
	if coordinator.FixedString(p.Metadata.Name[:]) != "tiny" || p.Progress != nil {
		t.Errorf("tiny metadata %q progress %v", p.Metadata.Name, p.Progress)
	}
	// The demo's config verifies a quarter of the contributions, with a
	// witness window that holds a replay; one forgiven mistake per epoch.
	if c := p.Config; c.VerificationPercent != 25 || c.RoundWitnessTime != 5 || c.ForgivePerEpoch != 1 || c.VestingEpochs != 0 {
		t.Errorf("light: verification %d witness time %d forgive %d vesting %d", c.VerificationPercent, c.RoundWitnessTime, c.ForgivePerEpoch, c.VestingEpochs)
	}
	// Verification is off unless a config turns it on.
	test, err := coordinator.LoadRunConfig("../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	if tp, err := test.Params(); err != nil || tp.Config.VerificationPercent != 0 {
		t.Errorf("smoke.toml: verification on, or %v", err)
	}
	// Files without the SparseLoCo and overlap keys keep DisTrO's values.
	for _, f := range []string{"../../config/tiny.toml", "../../config/smoke.toml"} {
		p := loadParams(t, f)
		if m := p.Model; m.Optimizer != coordinator.OptimizerDistro || m.InnerSteps != 1 || m.OuterLearningRate != 0 || m.ValueBits != 0 || p.Config.Overlap != 0 {
			t.Errorf("%s: optimizer %d inner %d outer %#x bits %d overlap %d", f, m.Optimizer, m.InnerSteps, m.OuterLearningRate, m.ValueBits, p.Config.Overlap)
		}
	}
}

func TestSparseLoCoRunConfig(t *testing.T) {
	p := loadParams(t, "../../config/sparseloco.toml")
	m, c := p.Model, p.Config
	if m.Optimizer != coordinator.OptimizerSparseLoCo || m.InnerSteps != 10 || m.OuterLearningRate != 8.0 || m.ValueBits != 2 ||
		m.CompressionChunk != 64 || m.CompressionTopk != 6 || m.CompressionDecay != 0.9 || m.Quantize1bit != 0 ||
		m.WeightDecay != 0 || m.ClipGradNorm != 1.0 {
		t.Errorf("sparseloco optimizer %+v", m)
	}
	if m.LearningRate != 0.003 || m.FinalLearningRate != 0.0003 || m.LrWarmupSteps != 20 || m.LrDecaySteps != 2000 || m.LrSchedule != 3 {
		t.Errorf("sparseloco lr %+v", m)
	}
	if c.TotalSteps != 40 || c.MaxRoundTrainTime != 30 || c.Overlap != 0 || m.NLayer != 4 || m.NEmbd != 128 || m.MaxSeqLen != 128 {
		t.Errorf("sparseloco config %+v model shape %d/%d/%d", c, m.NLayer, m.NEmbd, m.MaxSeqLen)
	}

	// A minimal model (17 lines, [model.optimizer] last) with SparseLoCo keys appended.
	const base = "[config]\nepoch_time = 60\n\n[model]\narchitecture = \"gpt2\"\ntokenizer = \"byte\"\ndata_type = \"pretraining\"\n" +
		"[model.checkpoint]\nkind = \"ephemeral\"\n[model.data]\nkind = \"local\"\nlocation = \"/data\"\n" +
		"[model.lr]\nschedule = \"constant\"\nlearning_rate = 0.001\n[model.optimizer]\nkind = \"sparseloco\"\n"
	doc := strings.Replace(base, "[config]\n", "[config]\noverlap = true\n", 1) + "inner_steps = 1000\nouter_learning_rate = 0.7\nvalue_bits = 32\n"
	rc, err := coordinator.ParseRunConfig("s.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	current := testConfig(t)
	p, _, err = rc.ParamsOver(&current)
	if err != nil {
		t.Fatal(err)
	}
	if p.Config.Overlap != 1 || p.Model.Optimizer != coordinator.OptimizerSparseLoCo || p.Model.InnerSteps != 1000 ||
		p.Model.OuterLearningRate != 0.7 || p.Model.ValueBits != 32 {
		t.Errorf("overlap %d inner %d outer %v bits %d", p.Config.Overlap, p.Model.InnerSteps, p.Model.OuterLearningRate, p.Model.ValueBits)
	}
	// Left out: SparseLoCo's outer rate and value bits take their defaults,
	// DisTrO's stay 0.
	for _, c := range []struct {
		doc   string
		outer float32
		bits  uint8
	}{
		{base, coordinator.DefaultOuterLearningRate, coordinator.DefaultValueBits},
		{strings.Replace(base, `"sparseloco"`, `"distro"`, 1), 0, 0},
	} {
		rc, err := coordinator.ParseRunConfig("s.toml", []byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := rc.ParamsOver(&current)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Model.OuterLearningRate; got != c.outer || p.Model.ValueBits != c.bits || p.Model.InnerSteps != 1 {
			t.Errorf("optimizer %d defaults: outer %v bits %d inner %d, want %v, %d, 1", p.Model.Optimizer, got, p.Model.ValueBits, p.Model.InnerSteps, c.outer, c.bits)
		}
	}
	rc, err = coordinator.ParseRunConfig("s.toml", []byte("[config]\noverlap = false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _, err := rc.ParamsOver(&current); err != nil || p.Config.Overlap != 0 {
		t.Errorf("overlap = false gave %d", p.Config.Overlap)
	}
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{"[config]\noverlap = 1\n", []string{"s.toml:2", "config.overlap", "true or false"}},
		{strings.Replace(base, `"sparseloco"`, `"adam"`, 1), []string{"s.toml:17", "model.optimizer.kind", `"distro", "sparseloco"`}},
		{base + "value_bits = 300\n", []string{"s.toml:18", "model.optimizer.value_bits", "0..255"}},
		{base + "inner_steps = -1\n", []string{"s.toml:18", "model.optimizer.inner_steps"}},
		{base + "inner_steps = 1.5\n", []string{"s.toml:18", "model.optimizer.inner_steps", "integer"}},
		{base + "outer_learning_rate = -0.5\n", []string{"s.toml:18", "model.optimizer.outer_learning_rate", "finite"}},
		{base + "outer_learning_rate = nan\n", []string{"s.toml:18", "model.optimizer.outer_learning_rate", "finite"}},
		{base + "inner_step = 3\n", []string{"s.toml:18", "unknown key", "model.optimizer.inner_step"}},
		{strings.Replace(base, "[config]\n", "[config]\noverlap = true\n", 1) + "outer_learning_rate = 8.5\n",
			[]string{"s.toml:19", "model.optimizer.outer_learning_rate = 8.5 with config.overlap = true", "at most 8"}},
	} {
		_, err := coordinator.ParseRunConfig("s.toml", []byte(c.doc))
		if !errors.Is(err, coordinator.ErrRunConfig) {
			t.Fatalf("%q: got %v, want ErrRunConfig", c.doc, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q lacks %q", c.doc, err, w)
			}
		}
	}
}

func TestVerificationKeys(t *testing.T) {
	doc := "[config]\nepoch_time = 60\nverification_percent = 25\nforgive_per_epoch = 0\nvesting_epochs = 2\n"
	rc, err := coordinator.ParseRunConfig("v.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	current := testConfig(t)
	p, _, err := rc.ParamsOver(&current)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config; c.VerificationPercent != 25 || c.ForgivePerEpoch != 0 || c.VestingEpochs != 2 {
		t.Errorf("verification %d forgive %d vesting %d", c.VerificationPercent, c.ForgivePerEpoch, c.VestingEpochs)
	}
	_, err = coordinator.ParseRunConfig("v.toml", []byte("[config]\nverification_percent = 300\n"))
	if err == nil || !strings.Contains(err.Error(), "v.toml:2") || !strings.Contains(err.Error(), "config.verification_percent") {
		t.Errorf("out of range: %v", err)
	}
}

func TestBadRunConfigNamesKeyAndLine(t *testing.T) {
	const good = "[config]\nepoch_time = 60\n\n[model]\narchitecture = \"gpt2\"\ntokenizer = \"byte\"\ndata_type = \"pretraining\"\n" +
		"[model.checkpoint]\nkind = \"ephemeral\"\n[model.data]\nkind = \"local\"\nlocation = \"/data\"\n" +
		"[model.lr]\nschedule = \"constant\"\nlearning_rate = 0.001\n[model.optimizer]\nkind = \"distro\"\n"
	if _, err := coordinator.ParseRunConfig("good.toml", []byte(good)); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"syntax", "[config]\nepoch_time = = 3\n", []string{"bad.toml:2"}},
		{"unknown key", "[config]\nepoch_time = 3\nepoch_tmie = 4\n", []string{"bad.toml:3", "config.epoch_tmie"}},
		{"unknown table", "[confg]\nepoch_time = 3\n", []string{"bad.toml:1", "confg"}},
		{"out of range", "[model]\nn_layer = 70000\n", []string{"bad.toml:2", "model.n_layer", "0..65535"}},
		{"negative", "[config]\ntotal_steps = -1\n", []string{"bad.toml:2", "total_steps"}},
		{"wrong type", "[config]\nwarmup_time = \"30s\"\n", []string{"bad.toml:2", "warmup_time"}},
		{"unknown name", strings.Replace(good, `schedule = "constant"`, `schedule = "step"`, 1), []string{"bad.toml:14", "model.lr.schedule", `"cosine"`}},
		{"bad root", good + "", nil},
		{"negative lr", strings.Replace(good, "learning_rate = 0.001", "learning_rate = -0.1", 1), []string{"bad.toml:15", "model.lr.learning_rate"}},
		{"nan", strings.Replace(good, "learning_rate = 0.001", "learning_rate = nan", 1), []string{"bad.toml:15", "finite"}},
		{"too long", "[metadata]\nname = \"" + strings.Repeat("x", 65) + "\"\n", []string{"metadata.name", "at most 64"}},
		{"empty", "# nothing\n", []string{"sets none of"}},
	}
	cases[7].doc = strings.Replace(good, "location = \"/data\"\n", "location = \"/data\"\nroot = \"abc\"\n", 1)
	cases[7].want = []string{"bad.toml:13", "model.data.root"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := coordinator.ParseRunConfig("bad.toml", []byte(c.doc))
			if !errors.Is(err, coordinator.ErrRunConfig) {
				t.Fatalf("got %v, want ErrRunConfig", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// architecture = "llama" with its keys; tie_embeddings defaults to true.
func TestLlamaRunConfig(t *testing.T) {
	p := loadParams(t, "../../config/llama-tiny.toml")
	m := p.Model
	if m.Architecture != coordinator.ArchLlama || m.NKvHead != 2 || m.IntermediateSize != 384 || m.RopeTheta != 10000 || m.Untied != 0 {
		t.Errorf("llama model %+v", m)
	}
	base, err := os.ReadFile("../../config/llama-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to string
		untied   uint8
	}{
		{"tie_embeddings = true", "tie_embeddings = false", 1},
		{"tie_embeddings = true", "", 0},
	} {
		p := parseParams(t, "l.toml", []byte(strings.Replace(string(base), c.from, c.to, 1)))
		if p.Model.Untied != c.untied {
			t.Errorf("%q: untied %d, want %d", c.to, p.Model.Untied, c.untied)
		}
	}
	bad := strings.Replace(string(base), `architecture = "llama"`, `architecture = "mamba"`, 1)
	if _, err := coordinator.ParseRunConfig("l.toml", []byte(bad)); err == nil || !strings.Contains(err.Error(), `want one of`) {
		t.Errorf("unknown architecture: %v", err)
	}
}

// data_type = "finetuning" is the program's fine-tuning tag, which clients
// read (FineTuning); other names are refused with the key's line.
func TestFinetuningRunConfig(t *testing.T) {
	base, err := os.ReadFile("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := parseParams(t, "f.toml", []byte(strings.Replace(string(base), `data_type = "pretraining"`, `data_type = "finetuning"`, 1)))
	if p.Model.DataType != coordinator.DataFinetuning || !coordinator.FineTuning(p.Model) {
		t.Errorf("finetuning: data type tag %d", p.Model.DataType)
	}
	if p := parseParams(t, "f.toml", base); p.Model.DataType != coordinator.DataPretraining || coordinator.FineTuning(p.Model) {
		t.Errorf("pretraining: data type tag %d", p.Model.DataType)
	}
	doc := strings.Replace(string(base), `data_type = "pretraining"`, `data_type = "sft"`, 1)
	_, err = coordinator.ParseRunConfig("f.toml", []byte(doc))
	if err == nil || !errors.Is(err, coordinator.ErrRunConfig) || !strings.Contains(err.Error(), `f.toml:42: model.data_type = "sft"; want one of "finetuning", "pretraining"`) {
		t.Errorf("sft: %v", err)
	}
}

// llama3Knobs are the [model] lines of a Llama 3.1 model with every knob set.
const llama3Knobs = "rms_norm_eps = 1e-6\nrope_scaling = \"llama3\"\nrope_factor = 8.0\nrope_low_freq_factor = 1.0\n" +
	"rope_high_freq_factor = 4.0\nrope_original_context = 8192\nqkv_bias = true\n"

// withLines is the run config file path with lines added after the line
// that starts with after.
func withLines(t *testing.T, path, after, lines string) []byte {
	t.Helper()
	base, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(base)
	at := strings.Index(doc, "\n"+after) + 1
	if at == 0 {
		t.Fatalf("%s has no line starting with %q", path, after)
	}
	at += strings.IndexByte(doc[at:], '\n') + 1
	return []byte(doc[:at] + lines + doc[at:])
}

// lineOf is the number of the first line of doc that starts with prefix.
func lineOf(doc []byte, prefix string) int {
	for i, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	return 0
}

// A Llama's knobs go to the Model's fields; left out, they are all zero.
// Bad values, and any knob of a gpt2 model, are refused naming the file,
// the line and the key, with the program's error.
func TestLlamaKnobsRunConfig(t *testing.T) {
	const llama = "../../config/llama-tiny.toml"
	m := parseParams(t, "k.toml", withLines(t, llama, "rope_theta", llama3Knobs)).Model
	if m.RmsNormEps != 1e-6 || m.RopeScaling != coordinator.RopeLlama3 || m.RopeFactor != 8 || m.RopeLowFreqFactor != 1 ||
		m.RopeHighFreqFactor != 4 || m.RopeOriginalContext != 8192 || m.QkvBias != 1 {
		t.Errorf("knobs: %+v", m)
	}
	plain := parseParams(t, "k.toml", withLines(t, llama, "rope_theta", "")).Model
	if plain.RmsNormEps != 0 || plain.RopeScaling != coordinator.RopeNone || plain.RopeFactor != 0 || plain.RopeLowFreqFactor != 0 ||
		plain.RopeHighFreqFactor != 0 || plain.RopeOriginalContext != 0 || plain.QkvBias != 0 {
		t.Errorf("no knobs: %+v", plain)
	}
	llama3 := func(factor, low, high, ctx string) string {
		return "rope_scaling = \"llama3\"\nrope_factor = " + factor + "\nrope_low_freq_factor = " + low +
			"\nrope_high_freq_factor = " + high + "\nrope_original_context = " + ctx + "\n"
	}
	for _, c := range []struct {
		path, lines, at, want string
	}{
		{llama, "rms_norm_eps = 0.2\n", "rms_norm_eps", "model.rms_norm_eps = 0.2: must be 0 (the default 1e-5) or in (0, 0.1] (the program refuses it: ModelRmsNormEps)"},
		{llama, "rms_norm_eps = -0.0\n", "rms_norm_eps", "ModelRmsNormEps"},
		{llama, "rms_norm_eps = nan\n", "rms_norm_eps", "model.rms_norm_eps must be a finite, non-negative number"},
		{llama, "rms_norm_eps = \"small\"\n", "rms_norm_eps", "model.rms_norm_eps must be a number"},
		{llama, "rope_scaling = \"yarn\"\n", "rope_scaling", `model.rope_scaling = "yarn"; want one of "llama3"`},
		{llama, llama3("0.5", "1.0", "4.0", "8192"), "rope_factor", "model.rope_factor = 0.5: must be 1 to 1024 (the program refuses it: ModelRopeScaling)"},
		{llama, llama3("1025.0", "1.0", "4.0", "8192"), "rope_factor", "model.rope_factor = 1025: must be 1 to 1024"},
		{llama, llama3("8.0", "4.0", "4.0", "8192"), "rope_low_freq_factor", "want 0 < low < high <= 1024 (the program refuses it: ModelRopeScaling)"},
		{llama, llama3("8.0", "1.0", "2048.0", "8192"), "rope_low_freq_factor", "want 0 < low < high <= 1024"},
		{llama, llama3("8.0", "1.0", "4.0", "16777217"), "rope_original_context", "model.rope_original_context = 16777217: must be 1 to 2^24"},
		{llama, llama3("8.0", "1.0", "4.0", "-1"), "rope_original_context", "model.rope_original_context = -1 is out of range 0..4294967295"},
		// A knob left out is named on rope_scaling's line.
		{llama, "rope_scaling = \"llama3\"\n", "rope_scaling", "model.rope_factor = 0: must be 1 to 1024"},
		{llama, "rope_original_context = 8192\n", "rope_original_context", `model.rope_original_context needs rope_scaling = "llama3" (the program refuses it: ModelRopeScaling)`},
		{llama, "qkv_bias = 1\n", "qkv_bias", "model.qkv_bias must be true or false"},
		{"../../config/tiny.toml", "qkv_bias = true\n", "qkv_bias", "model.qkv_bias is a llama knob: gpt2 leaves it out (the program refuses it: ModelLlama)"},
		{"../../config/tiny.toml", "rms_norm_eps = 1e-6\n", "rms_norm_eps", "ModelLlama"},
		{"../../config/tiny.toml", llama3("8.0", "1.0", "4.0", "8192"), "rope_scaling", "model.rope_scaling is a llama knob"},
	} {
		after := "rope_theta"
		if strings.HasSuffix(c.path, "/tiny.toml") {
			after = "data_type"
		}
		doc := withLines(t, c.path, after, c.lines)
		_, err := coordinator.ParseRunConfig("k.toml", doc)
		want := fmt.Sprintf("k.toml:%d: ", lineOf(doc, c.at))
		if err == nil || !errors.Is(err, coordinator.ErrRunConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want one line with %q and %q", c.lines, err, want, c.want)
		}
	}
}

// schedule = "wsd" is the program's warmup-stable-decay tag.
func TestWSDRunConfig(t *testing.T) {
	base, err := os.ReadFile("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := parseParams(t, "w.toml", []byte(strings.Replace(string(base), `schedule = "cosine"`, `schedule = "wsd"`, 1)))
	if p.Model.LrSchedule != 4 {
		t.Errorf("wsd: schedule tag %d, want 4", p.Model.LrSchedule)
	}
}

// precision names the run's numeric contract: "fp32" (tag 0, also when
// the key is left out) or "mx8" (tag 1); other names are refused with the
// key and line, and the names print back as they are read.
func TestPrecisionRunConfig(t *testing.T) {
	base, err := os.ReadFile("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(base), "precision") {
		t.Fatal("tiny.toml sets precision; this test adds it")
	}
	withPrecision := func(v string) string {
		return strings.Replace(string(base), "[model]\n", "[model]\nprecision = "+v+"\n", 1)
	}
	for _, c := range []struct {
		doc  string
		want uint8
	}{
		{string(base), coordinator.PrecisionFP32},
		{withPrecision(`"fp32"`), coordinator.PrecisionFP32},
		{withPrecision(`"mx8"`), coordinator.PrecisionMX8},
	} {
		p := parseParams(t, "p.toml", []byte(c.doc))
		if p.Model.Precision != c.want || coordinator.ValidateModel(p.Model) != nil {
			t.Errorf("precision tag %d (%v), want %d", p.Model.Precision, coordinator.ValidateModel(p.Model), c.want)
		}
	}
	line := strings.Count(string(base[:strings.Index(string(base), "[model]\n")]), "\n") + 2
	for _, v := range []string{`"fp16"`, `""`, `"MX8"`, "8"} {
		_, err := coordinator.ParseRunConfig("p.toml", []byte(withPrecision(v)))
		if !errors.Is(err, coordinator.ErrRunConfig) || !strings.Contains(err.Error(), fmt.Sprintf("p.toml:%d: model.precision", line)) ||
			!strings.Contains(err.Error(), `"fp32", "mx8"`) {
			t.Errorf("precision = %s: %v", v, err)
		}
	}
	for tag, name := range map[uint8]string{coordinator.PrecisionFP32: "fp32", coordinator.PrecisionMX8: "mx8", 2: "unknown(2)"} {
		if got := coordinator.PrecisionName(tag); got != name {
			t.Errorf("PrecisionName(%d) = %q, want %q", tag, got, name)
		}
	}
	// The program's rule, as update-config checks it before sending.
	p := parseParams(t, "p.toml", []byte(withPrecision(`"mx8"`)))
	m := *p.Model
	m.Precision = 2
	var rule *coordinator.RuleError
	if err := coordinator.ValidateModel(&m); !errors.As(err, &rule) || rule.Code != "ModelPrecision" || rule.Key != "model.precision" {
		t.Errorf("precision tag 2: %v, want ModelPrecision on model.precision", err)
	}
}

// grad_shards is the run's gradient shard count: a power of two from 1 to
// 64 (1 also when the key is left out), stored as its log2; anything else is
// refused with the key, its line and the values it may take.
func TestGradShardsRunConfig(t *testing.T) {
	shipped, err := os.ReadFile("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The test sets the key itself: drop the shipped file's, if any.
	var base []byte
	for _, l := range strings.SplitAfter(string(shipped), "\n") {
		if k, _, _ := strings.Cut(l, "="); strings.TrimSpace(k) != "grad_shards" {
			base = append(base, l...)
		}
	}
	withShards := func(v string) string {
		return strings.Replace(string(base), "[model]\n", "[model]\ngrad_shards = "+v+"\n", 1)
	}
	for _, c := range []struct {
		doc  string
		want uint8 // log2
	}{
		{string(base), 0},
		{withShards("1"), 0},
		{withShards("2"), 1},
		{withShards("4"), 2},
		{withShards("64"), 6},
	} {
		p := parseParams(t, "g.toml", []byte(c.doc))
		if p.Model.GradShardsLog2 != c.want || coordinator.ValidateModel(p.Model) != nil {
			t.Errorf("grad_shards_log2 %d (%v), want %d", p.Model.GradShardsLog2, coordinator.ValidateModel(p.Model), c.want)
		}
		if got := coordinator.GradShards(p.Model.GradShardsLog2); got != 1<<c.want {
			t.Errorf("GradShards(%d) = %d, want %d", p.Model.GradShardsLog2, got, 1<<c.want)
		}
	}
	line := strings.Count(string(base[:strings.Index(string(base), "[model]\n")]), "\n") + 2
	for _, v := range []string{"0", "3", "6", "128", "-1", "-64", `"4"`, `""`, "4.0", "true"} {
		_, err := coordinator.ParseRunConfig("g.toml", []byte(withShards(v)))
		if !errors.Is(err, coordinator.ErrRunConfig) || !strings.Contains(err.Error(), fmt.Sprintf("g.toml:%d: model.grad_shards", line)) ||
			!strings.Contains(err.Error(), "a power of two from 1 to 64: 1, 2, 4, 8, 16, 32 or 64") || strings.Contains(err.Error(), "\n") {
			t.Errorf("grad_shards = %s: %v", v, err)
		}
	}
	for log2, want := range map[uint8]int{0: 1, 1: 2, 6: 64, 7: 0, 255: 0} {
		if got := coordinator.GradShards(log2); got != want {
			t.Errorf("GradShards(%d) = %d, want %d", log2, got, want)
		}
	}
	// The program's rule, as update-config checks it before sending.
	p := parseParams(t, "g.toml", []byte(withShards("64")))
	m := *p.Model
	m.GradShardsLog2 = 7
	var rule *coordinator.RuleError
	if err := coordinator.ValidateModel(&m); !errors.As(err, &rule) || rule.Code != "ModelGradShards" || rule.Key != "model.grad_shards" {
		t.Errorf("grad_shards_log2 7: %v, want ModelGradShards on model.grad_shards", err)
	}
}

// tokenizer = "json:<sha256>" pins a tokenizer.json file by its hash; the
// names print back as a run config spells them.
func TestTokenizerJSONRunConfig(t *testing.T) {
	base, err := os.ReadFile("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	doc := strings.Replace(string(base), `tokenizer = "byte"`, `tokenizer = "json:`+hash+`"`, 1)
	p := parseParams(t, "j.toml", []byte(doc))
	m := p.Model
	if m.Tokenizer != coordinator.TokenizerJSON || hex.EncodeToString(m.TokenizerHash[:]) != hash {
		t.Errorf("json tokenizer: tag %d hash %x", m.Tokenizer, m.TokenizerHash)
	}
	if got := coordinator.TokenizerName(m); got != "json:"+hash {
		t.Errorf("TokenizerName = %q", got)
	}
	for name, tag := range map[string]uint8{"byte": coordinator.TokenizerByte, "gpt2": coordinator.TokenizerGPT2} {
		m := coordinator.Model{Tokenizer: tag}
		if got := coordinator.TokenizerName(&m); got != name {
			t.Errorf("TokenizerName(%d) = %q", tag, got)
		}
	}
	// The line of the key, and what is wrong with the hash.
	line := fmt.Sprintf("j.toml:%d", 1+strings.Count(doc[:strings.Index(doc, "tokenizer =")], "\n"))
	for _, c := range []struct{ value, want string }{
		{"json:" + hash[:63], "64 lowercase hex digits (got 63 characters)"},
		{"json:" + hash + "0", "64 lowercase hex digits (got 65 characters)"},
		{"json:" + strings.ToUpper(hash), "64 lowercase hex digits"},
		{"json:" + hash[:62] + "zz", "64 lowercase hex digits"},
		{"json:", "64 lowercase hex digits (got 0 characters)"},
		{"json" + hash, `want "byte", "gpt2" or "json:"`},
		{"sentencepiece", `want "byte", "gpt2" or "json:"`},
	} {
		bad := strings.Replace(string(base), `tokenizer = "byte"`, `tokenizer = "`+c.value+`"`, 1)
		_, err := coordinator.ParseRunConfig("j.toml", []byte(bad))
		if !errors.Is(err, coordinator.ErrRunConfig) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), line+": model.tokenizer") {
			t.Errorf("%q: %v", c.value, err)
		}
	}
}

// testConfig is config/smoke.toml's [config]: a run's valid current config.
func testConfig(t *testing.T) coordinator.Config {
	t.Helper()
	p := loadParams(t, "../../config/smoke.toml")
	return *p.Config
}

// A [config] section that leaves out required keys keeps them from the
// run's current config, and says which; with no config on chain yet, or
// through Params (no run to keep them from), it names the missing keys
// instead of zeroing them (the program then refused the zero epoch_time
// with a misleading ConfigEpochTime).
func TestPartialConfigMerges(t *testing.T) {
	rc, err := coordinator.ParseRunConfig("p.toml", []byte("[config]\nverification_percent = 50\nepoch_time = 40\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rc.MissingConfigKeys(), ","); !strings.HasPrefix(got, "warmup_time,cooldown_time,") || strings.Contains(got, "epoch_time,") {
		t.Fatalf("missing keys %q", got)
	}
	current := testConfig(t)
	current.VestingEpochs = 3
	p, kept, err := rc.ParamsOver(&current)
	if err != nil {
		t.Fatal(err)
	}
	want := current
	want.VerificationPercent, want.EpochTime = 50, 40
	if *p.Config != want {
		t.Fatalf("merged %+v, want %+v", *p.Config, want)
	}
	if k := strings.Join(kept, ","); strings.Contains(k, "verification_percent") || strings.Contains(k, ",epoch_time") ||
		!strings.Contains(k, "vesting_epochs") || !strings.Contains(k, "warmup_time") {
		t.Fatalf("kept %q", k)
	}
	if _, _, err := rc.ParamsOver(&coordinator.Config{}); err == nil || !strings.Contains(err.Error(), "leaves out warmup_time, cooldown_time") ||
		!strings.Contains(err.Error(), "no config yet") {
		t.Errorf("over a run never configured: %v, want the missing keys named", err)
	}
	if _, err := rc.Params(); err == nil || !strings.Contains(err.Error(), "leaves out warmup_time, cooldown_time") {
		t.Errorf("Params of a partial [config]: %v, want the missing keys named", err)
	}
	// A complete section replaces: left-out optional keys take their defaults.
	full, err := coordinator.LoadRunConfig("../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, kept, err = full.ParamsOver(&current)
	if err != nil || len(kept) != 0 || p.Config.VestingEpochs != 0 || *p.Config != testConfig(t) {
		t.Errorf("complete [config] over a run's: %+v kept %v err %v", p.Config, kept, err)
	}
}

// Every [config] key of the file format is one ParamsOver can keep.
func TestEveryConfigKeyMerges(t *testing.T) {
	base := testConfig(t)
	for _, key := range configTOMLKeys() {
		rc, err := coordinator.ParseRunConfig("k.toml", []byte("[config]\n"+key+" = "+map[bool]string{true: "true", false: "1"}[key == "overlap"]+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, kept, err := rc.ParamsOver(&base)
		if err != nil || len(kept) != len(configTOMLKeys())-1 || slices.Contains(kept, key) {
			t.Errorf("%s: kept %v, err %v", key, kept, err)
		}
	}
}

func configTOMLKeys() []string {
	var keys []string
	t := reflect.TypeFor[coordinator.ConfigTOML]()
	for i := range t.NumField() {
		keys = append(keys, t.Field(i).Tag.Get("toml"))
	}
	return keys
}

// Every run config in config/ passes every rule of the program, as
// update-config would check it before sending anything.
func TestEveryShippedRunConfigValid(t *testing.T) {
	files, err := filepath.Glob("../../config/*.toml")
	if err != nil || len(files) < 6 {
		t.Fatalf("config/*.toml: %v, %v", files, err)
	}
	for _, f := range files {
		rc, err := coordinator.LoadRunConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := rc.Params()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if p.Metadata != nil {
			if err := coordinator.ValidateMetadata(p.Metadata); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		if p.Config == nil || p.Model == nil {
			t.Fatalf("%s: no [config] or [model]", f)
		}
		if err := coordinator.ValidateConfig(p.Config); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if err := coordinator.ValidateModelWith(p.Model, p.Config); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// loadParams is the run config file path's parameters.
func loadParams(t *testing.T, path string) coordinator.UpdateParams {
	t.Helper()
	p, err := coordinator.LoadParams(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// parseParams is the parameters of run config doc, named name.
func parseParams(t *testing.T, name string, doc []byte) coordinator.UpdateParams {
	t.Helper()
	rc, err := coordinator.ParseRunConfig(name, doc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
