package client

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The shipped run configs describe the trainer's named configs: the model a
// run's clients build is the one the config's comment names.
func TestTrainerConfigFromRunConfig(t *testing.T) {
	for _, c := range []struct{ file, name, arith string }{
		{"../../config/tiny.toml", "light", trainer.ArithFP32},
		{"../../config/llama-tiny.toml", "llama-light", trainer.ArithFP32},
		{"../../config/llama-12m.toml", "llama-12m", trainer.ArithFP32},
		{"../../config/llama-1.1b.toml", "llama-1.1b", trainer.ArithMX8},
	} {
		p := loadParams(t, c.file)
		got, err := TrainerConfig(p.Model, 8)
		if err != nil {
			t.Fatal(err)
		}
		want, err := trainer.ConfigByName(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got.Name, got.MicroBatch = want.Name, want.MicroBatch
		// The named configs leave these out: the run's numeric contract and
		// its gradient shard count (1 when the run config leaves it out).
		want.Arith, want.GradShards = c.arith, 1<<p.Model.GradShardsLog2
		if got != want {
			t.Errorf("%s: trainer config %+v, want %+v", c.file, got, want)
		}
	}
	// Untied, and an architecture this client does not know.
	p := loadParams(t, "../../config/llama-tiny.toml")
	m := *p.Model
	m.Untied = 1
	if cfg, err := TrainerConfig(&m, 8); err != nil || !cfg.Untied {
		t.Errorf("untied: %+v, %v", cfg, err)
	}
	// Fine-tuning shapes the loss, not the model.
	m.DataType = coordinator.DataFinetuning
	if cfg, err := TrainerConfig(&m, 8); err != nil || !cfg.Untied {
		t.Errorf("fine-tuning: %+v, %v", cfg, err)
	}
	m.DataType = 3
	if _, err := TrainerConfig(&m, 8); err == nil || !strings.Contains(err.Error(), "data type tag 3") {
		t.Errorf("data type tag 3: %v", err)
	}
	m.DataType = coordinator.DataPretraining
	m.Architecture = 3
	if _, err := TrainerConfig(&m, 8); err == nil {
		t.Error("architecture tag 3 accepted")
	}
}

// A Llama's knobs go from a run config through the run's Model to the
// trainer's Knobs; without them the trainer's defaults hold.
func TestTrainerConfigKnobs(t *testing.T) {
	base, err := os.ReadFile("../../config/llama-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	knobs := "rms_norm_eps = 1e-6\nrope_scaling = \"llama3\"\nrope_factor = 8.0\nrope_low_freq_factor = 1.0\n" +
		"rope_high_freq_factor = 4.0\nrope_original_context = 8192\nqkv_bias = true\ntie_embeddings = true"
	doc := strings.Replace(string(base), "tie_embeddings = true", knobs, 1)
	rc, err := coordinator.ParseRunConfig("knobs.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TrainerConfig(p.Model, 8)
	want := trainer.Knobs{RMSNormEps: 1e-6, RopeScaling: trainer.RopeLlama3, RopeFactor: 8, RopeLowFreq: 1, RopeHighFreq: 4, RopeOrigCtx: 8192, QKVBias: true}
	if err != nil || cfg.Knobs != want {
		t.Errorf("knobs: %+v, %v; want %+v", cfg.Knobs, err, want)
	}
	plain, err := TrainerConfig(loadParams(t, "../../config/llama-tiny.toml").Model, 8)
	if err != nil || plain.Knobs != (trainer.Knobs{}) {
		t.Errorf("no knobs: %+v, %v", plain.Knobs, err)
	}
	// A rotary scaling tag this client does not know is refused, naming it.
	m := *p.Model
	m.RopeScaling = 2
	if _, err := TrainerConfig(&m, 8); err == nil || !strings.Contains(err.Error(), "unknown(2)") {
		t.Errorf("rope scaling tag 2: %v", err)
	}
}

// The run's numeric contract becomes the trainer's: tag 0 fp32, 1 mx8; a
// tag this client does not know is refused with one line that names it.
func TestTrainerConfigPrecision(t *testing.T) {
	p := loadParams(t, "../../config/llama-tiny.toml")
	m := *p.Model
	for tag, want := range map[uint8]string{coordinator.PrecisionFP32: trainer.ArithFP32, coordinator.PrecisionMX8: trainer.ArithMX8} {
		m.Precision = tag
		cfg, err := TrainerConfig(&m, 8)
		if err != nil || cfg.Arith != want {
			t.Errorf("precision tag %d: arith %q, %v; want %q", tag, cfg.Arith, err, want)
		}
	}
	m.Precision = 2
	_, err := TrainerConfig(&m, 8)
	if err == nil || !strings.Contains(err.Error(), "numeric contract tag 2") || strings.Contains(err.Error(), "\n") {
		t.Errorf("precision tag 2: %v, want one line naming the tag", err)
	}
}

// The run's gradient shard count becomes the trainer's: 1 << grad_shards_log2
// (1 for a run written before the field, which reads 0), whatever the
// machine; a count past 64 is refused with one line that names it.
func TestTrainerConfigGradShards(t *testing.T) {
	p := loadParams(t, "../../config/llama-tiny.toml")
	m := *p.Model
	for log2, want := range map[uint8]int{0: 1, 1: 2, 3: 8, coordinator.MaxGradShardsLog2: trainer.MaxGradShards} {
		m.GradShardsLog2 = log2
		cfg, err := TrainerConfig(&m, 8)
		if err != nil || cfg.GradShards != want || cfg.Shards() != want {
			t.Errorf("grad_shards_log2 %d: grad shards %d, %v; want %d", log2, cfg.GradShards, err, want)
		}
	}
	m.Precision, m.GradShardsLog2 = coordinator.PrecisionMX8, 2
	if cfg, err := TrainerConfig(&m, 8); err != nil || cfg.GradShards != 4 || cfg.Arith != trainer.ArithMX8 {
		t.Errorf("mx8, 4 shards: %+v, %v", cfg, err)
	}
	for _, log2 := range []uint8{7, 255} {
		m.GradShardsLog2 = log2
		_, err := TrainerConfig(&m, 8)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("gradient shard count 2^%d", log2)) || strings.Contains(err.Error(), "\n") {
			t.Errorf("grad_shards_log2 %d: %v, want one line naming the count", log2, err)
		}
	}
}

func TestParsePrecisions(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
		err  string
	}{
		{[]string{"fp32"}, []string{"fp32"}, ""},
		{[]string{"mx8", " fp32", "mx8"}, []string{"mx8", "fp32"}, ""},
		{[]string{"fp16"}, nil, `unknown numeric contract "fp16" (this client trains fp32, mx8)`},
		{[]string{}, nil, "no numeric contract given"},
		{[]string{""}, nil, `unknown numeric contract ""`},
	} {
		got, err := ParsePrecisions(c.in)
		switch {
		case c.err == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
		}
	}
}

// A client refuses, before anything else, a configured run whose numeric
// contract it does not accept, with one line that says which and why; an
// unconfigured run is not judged.
func TestAcceptsPrecision(t *testing.T) {
	view := func(phase coordinator.RunState, tag uint8) *coordinator.View {
		s := &coordinator.State{}
		s.RunState, s.Model.Precision = uint8(phase), tag
		return coordinator.NewView(s, solana.PublicKey{}, time.Unix(1000, 0))
	}
	for _, c := range []struct {
		phase    coordinator.RunState
		tag      uint8
		accepted []string
		explicit bool
		want     string // "" accepted
	}{
		{coordinator.WaitingForMembers, coordinator.PrecisionFP32, Precisions, false, ""},
		{coordinator.WaitingForMembers, coordinator.PrecisionMX8, Precisions, false, ""},
		{coordinator.RoundTrain, coordinator.PrecisionMX8, []string{"mx8"}, true, ""},
		{coordinator.Uninitialized, coordinator.PrecisionMX8, []string{"fp32"}, true, ""},
		{coordinator.WaitingForMembers, coordinator.PrecisionMX8, []string{"fp32"}, true,
			"the run trains with numeric contract mx8, and this client was started with --precision fp32 (accepts: fp32)"},
		{coordinator.Paused, coordinator.PrecisionFP32, []string{"mx8"}, true,
			"the run trains with numeric contract fp32, and this client was started with --precision mx8 (accepts: mx8)"},
		{coordinator.WaitingForMembers, coordinator.PrecisionFP32, []string{"mx8"}, false,
			"the run trains with numeric contract fp32, which this client does not accept (accepts: mx8)"},
		{coordinator.WaitingForMembers, 7, Precisions, false,
			"the run trains with numeric contract unknown(7) (tag 7), which this client does not know (it trains fp32, mx8): update the client"},
	} {
		err := acceptsPrecision(view(c.phase, c.tag), c.accepted, c.explicit)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v, tag %d, accepting %v: refused: %v", c.phase, c.tag, c.accepted, err)
		case c.want != "" && (!errors.Is(err, ErrPrecision) || err.Error() != c.want):
			t.Errorf("%v, tag %d, accepting %v: %v; want %q", c.phase, c.tag, c.accepted, err, c.want)
		}
	}
	// The engine says so before it would join, and does not join.
	s := &coordinator.State{}
	s.RunState, s.Model.Precision = uint8(coordinator.WaitingForMembers), coordinator.PrecisionMX8
	copy(s.ClientVersion[:], "test")
	e := testEngine()
	e.precisions, e.precisionsGiven = []string{"fp32"}, true
	if acts, err := e.decide(at(e, s, time.Unix(1000, 0)), &inputs{}, time.Unix(1000, 0)); !errors.Is(err, ErrPrecision) || len(acts) != 0 {
		t.Errorf("fp32-only engine on an mx8 run: %v, %v; want ErrPrecision and nothing done", kinds(acts), err)
	}
	e = testEngine()
	acts, err := e.decide(at(e, s, time.Unix(1000, 0)), &inputs{}, time.Unix(1000, 0))
	if err != nil || len(acts) == 0 || acts[0].String() != (joinAction{first: true}).String() {
		t.Errorf("engine accepting every contract on an mx8 run: %v, %v; want to join", kinds(acts), err)
	}
}

// A run whose grad_shards the client's devices do not divide is refused
// before joining, in one line naming the fix; one device takes any run.
func TestAcceptsParallelism(t *testing.T) {
	view := func(phase coordinator.RunState, log2 uint8) *coordinator.View {
		s := &coordinator.State{}
		s.RunState, s.Model.GradShardsLog2 = uint8(phase), log2
		return coordinator.NewView(s, solana.PublicKey{}, time.Unix(1000, 0))
	}
	for _, c := range []struct {
		phase   coordinator.RunState
		log2    uint8
		devices int
		want    string // "" accepted
	}{
		{coordinator.WaitingForMembers, 0, 1, ""},
		{coordinator.WaitingForMembers, 2, 4, ""},
		{coordinator.RoundTrain, 3, 2, ""},
		{coordinator.Uninitialized, 0, 4, ""},
		{coordinator.WaitingForMembers, 0, 2,
			"the run sums each step's gradients over grad_shards = 1 token shards, which --data-parallelism 2 cannot share: restart train with --data-parallelism dividing 1 (1 always works; --tensor-parallelism spreads each share over more GPUs)"},
		{coordinator.Paused, 1, 4,
			"the run sums each step's gradients over grad_shards = 2 token shards, which --data-parallelism 4 cannot share: restart train with --data-parallelism dividing 2 (1 always works; --tensor-parallelism spreads each share over more GPUs)"},
	} {
		err := acceptsParallelism(view(c.phase, c.log2), c.devices)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v, %d shards, %d devices: refused: %v", c.phase, 1<<c.log2, c.devices, err)
		case c.want != "" && (!errors.Is(err, ErrParallelism) || err.Error() != c.want):
			t.Errorf("%v, %d shards, %d devices: %v; want %q", c.phase, 1<<c.log2, c.devices, err, c.want)
		}
	}
	s := &coordinator.State{}
	s.RunState, s.Model.GradShardsLog2 = uint8(coordinator.WaitingForMembers), 1
	copy(s.ClientVersion[:], "test")
	e := testEngine()
	e.devices = 4
	if acts, err := e.decide(at(e, s, time.Unix(1000, 0)), &inputs{}, time.Unix(1000, 0)); !errors.Is(err, ErrParallelism) || len(acts) != 0 {
		t.Errorf("4 devices on a 2-shard run: %v, %v; want ErrParallelism and nothing done", kinds(acts), err)
	}
	e = testEngine()
	e.devices = 2
	acts, err := e.decide(at(e, s, time.Unix(1000, 0)), &inputs{}, time.Unix(1000, 0))
	if err != nil || len(acts) == 0 || acts[0].String() != (joinAction{first: true}).String() {
		t.Errorf("2 devices on a 2-shard run: %v, %v; want to join", kinds(acts), err)
	}
}

// The schedules at chosen steps: warmup, then each kind's decay; WSD holds
// the peak until the run's last decay_steps (inner) steps.
func TestLearningRateSchedules(t *testing.T) {
	m := coordinator.Model{LearningRate: 1, FinalLearningRate: 0.1, LrWarmupSteps: 10, LrDecaySteps: 40, InnerSteps: 1}
	const total = 100
	for _, c := range []struct {
		schedule uint8
		step     uint32
		want     float32
	}{
		{scheduleConstant, 5, 0.5}, {scheduleConstant, 70, 1},
		{scheduleLinear, 30, 0.55}, {scheduleLinear, 80, 0.1},
		{scheduleCosine, 30, 0.55}, {scheduleCosine, 50, 0.1},
		{scheduleWSD, 5, 0.5}, {scheduleWSD, 60, 1}, {scheduleWSD, 80, 0.55}, {scheduleWSD, 100, 0.1},
	} {
		m.LrSchedule = c.schedule
		if got := LearningRate(&m, total, c.step, 1, false); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("schedule %d step %d: %v, want %v", c.schedule, c.step, got, c.want)
		}
	}
	// SparseLoCo: the run has total * H = 300 inner steps and WSD decays over
	// the last 40 (from inner step 260); step 30's first inner step is 88.
	m.LrSchedule, m.InnerSteps = scheduleWSD, 3
	if got := InnerLearningRate(&m, total, 30, 0, 1, false); got != 1 {
		t.Errorf("inner step 88 of 300: %v, want the peak", got)
	}
	if got := InnerLearningRate(&m, total, 100, 2, 1, false); math.Abs(float64(got)-0.1) > 1e-6 {
		t.Errorf("the last inner step: %v, want the final rate", got)
	}
}

// A run's tokenizer: byte and gpt2 by name, a tokenizer.json only from the
// file whose hash the run pins; data shards must record its name.
func TestRunTokenizer(t *testing.T) {
	path := filepath.Join("..", "data", "tokenizer", "testdata", "hfjson", "legacy.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &coordinator.Model{Tokenizer: coordinator.TokenizerJSON, TokenizerHash: sha256.Sum256(raw)}
	tok, err := RunTokenizer(m, path)
	if err != nil || tok.Name() != runTokenizerName(m) || !strings.HasPrefix(tok.Name(), "json:") {
		t.Fatalf("RunTokenizer = %v, %v; want the file's tokenizer named %s", tok, err, runTokenizerName(m))
	}
	if _, err := RunTokenizer(m, ""); err == nil || !strings.Contains(err.Error(), "--tokenizer-file") {
		t.Errorf("no file: %v", err)
	}
	other := *m
	other.TokenizerHash[0] ^= 1
	if _, err := RunTokenizer(&other, path); err == nil || !strings.Contains(err.Error(), "the run pins") {
		t.Errorf("another file's hash: %v", err)
	}
	for tag, name := range map[uint8]string{coordinator.TokenizerByte: "byte", coordinator.TokenizerGPT2: "gpt2"} {
		m := &coordinator.Model{Tokenizer: tag}
		if tok, err := RunTokenizer(m, ""); err != nil || tok.Name() != name || runTokenizerName(m) != name {
			t.Errorf("tag %d: %v %v", tag, tok, err)
		}
	}
	if _, err := RunTokenizer(&coordinator.Model{Tokenizer: 9}, ""); err == nil {
		t.Error("tag 9 accepted")
	}
}

// The 1.1B run (which verifies: two trainers) on GPUs of 24, 68 and 80 GiB
// and hosts of 16 GiB and 1 TiB, and without verification: refused before
// joining, in one line naming the need, the memory and the fix, where it
// does not fit even with activation recompute; recompute is on where the
// model fits only so, or where it is forced; two devices need less each
// than one. The README's 24 GB setting (grad_shards = 1, no verification,
// micro-batch 1) fits a 24 GiB GPU with recompute.
func TestFits(t *testing.T) {
	s := runState(t, "../../config/llama-1.1b.toml")
	unverified := *s
	unverified.Config.VerificationPercent = 0
	small := unverified
	small.Model.GradShardsLog2 = 0
	const gib = int64(1) << 30
	const two = " (two trainers: the run verifies, and replays have their own)"
	const re = " with activation recompute"
	gpu := func(bytes int64, devices int) Memory {
		return Memory{OnGPU: true, GPU: "cuda:0 (test)", GPUBytes: bytes, Devices: devices, Host: 1 << 40}
	}
	for _, c := range []struct {
		s         *coordinator.State
		mem       Memory
		mb        int
		forced    bool
		recompute bool
		want      string // "" fits
	}{
		{s, gpu(80*gib, 1), 1, false, false, ""},
		{s, gpu(80*gib, 1), 1, true, true, ""},
		{s, gpu(80*gib, 1), 8, false, true, "the run's model needs 107.6 GiB of GPU memory at --micro-batch-size 8" + re + two + " and cuda:0 (test) has 80.0 GiB: lower --micro-batch-size (1 needs 63.2 GiB)"},
		{s, gpu(24*gib, 1), 1, false, true, "the run's model needs 63.2 GiB of GPU memory at --micro-batch-size 1" + re + two + " and cuda:0 (test) has 24.0 GiB: it does not fit at any micro-batch"},
		{s, gpu(68*gib, 2), 1, false, false, ""},           // 64.0 GiB on the first of two
		{s, gpu(68*gib, 1), 1, false, true, ""},            // 63.2 GiB: only with recompute
		{&unverified, gpu(40*gib, 1), 1, false, false, ""}, // 36.0 GiB: one trainer
		{&small, gpu(24*gib, 1), 1, false, true, ""},
		{s, gpu(0, 1), 64, false, false, ""}, // the GPU's memory unknown: not checked
		{s, Memory{Devices: 1, Host: 16 * gib}, 1, false, false, "the run's model needs 92.0 GiB of host memory at --micro-batch-size 1" + two + " and this machine has 16.0 GiB: it does not fit at any micro-batch"},
		{s, Memory{Devices: 1, Host: 1 << 40}, 1, true, false, ""},
	} {
		recompute, err := memoryPlan(c.s, c.mem, c.mb, 2, c.forced)
		switch {
		case recompute != c.recompute:
			t.Errorf("%+v, micro-batch %d, forced %v: recompute %v, want %v", c.mem, c.mb, c.forced, recompute, c.recompute)
		case c.want == "" && err != nil:
			t.Errorf("%+v, micro-batch %d: refused: %v", c.mem, c.mb, err)
		case c.want != "" && (!errors.Is(err, ErrMemory) || err.Error() != c.want):
			t.Errorf("%+v, micro-batch %d: %v; want %q", c.mem, c.mb, err, c.want)
		}
	}
	// The engine says so before it would join, and does not join.
	copy(s.ClientVersion[:], "test")
	s.RunState = uint8(coordinator.WaitingForMembers)
	e := testEngine()
	e.fits = fitsMemory(gpu(24*gib, 1), 1, 2, false)
	if acts, err := e.decide(at(e, s, time.Unix(1000, 0)), &inputs{}, time.Unix(1000, 0)); !errors.Is(err, ErrMemory) || len(acts) != 0 {
		t.Errorf("a 24 GiB GPU on the 1.1B run: %v, %v; want ErrMemory and nothing done", kinds(acts), err)
	}
}

// A CPU client refuses the 1.1B run where its measured matrix product rate
// cannot train a round's share in max_round_train_time, in one line; a
// fast enough rate, and the tiny run (which never asks for a rate), pass.
func TestFastEnough(t *testing.T) {
	big := runState(t, "../../config/llama-1.1b.toml")
	at := func(r float64) func(string) float64 { return func(string) float64 { return r } }
	err := fastEnough(big, at(100e9))
	if !errors.Is(err, ErrNeedsGPU) || !strings.Contains(err.Error(), "train it on a GPU (--device cuda)") || strings.Contains(err.Error(), "\n") {
		t.Errorf("the 1.1B run at 100 GFLOP/s: %v; want ErrNeedsGPU in one line", err)
	} else {
		t.Logf("the 1.1B run at 100 GFLOP/s: %v", err)
	}
	if err := fastEnough(big, at(1e16)); err != nil {
		t.Errorf("the 1.1B run at 10 PFLOP/s: %v", err)
	}
	// The light run on a loaded 2-core machine (the rate a busy probe
	// read): slower than its budget, but within the margin.
	light := runState(t, "../../config/llama-12m.toml")
	if err := fastEnough(light, at(12e9)); err != nil {
		t.Errorf("the 12M run at 12 GFLOP/s: %v", err)
	}
	if err := fastEnough(light, at(1e9)); !errors.Is(err, ErrNeedsGPU) {
		t.Errorf("the 12M run at 1 GFLOP/s: %v; want ErrNeedsGPU", err)
	}
	if err := fastEnough(runState(t, "../../config/tiny.toml"), func(string) float64 { t.Error("the tiny run asked for a rate"); return 0 }); err != nil {
		t.Errorf("the tiny run: %v", err)
	}
	if r := cpuRate(trainer.ArithFP32, 1); !(r > 0) {
		t.Errorf("cpuRate measured %v FLOP/s", r)
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

// runState is a state holding the run config file path's model and config.
func runState(t *testing.T, path string) *coordinator.State {
	t.Helper()
	p := loadParams(t, path)
	s := &coordinator.State{}
	s.Model, s.Config = *p.Model, *p.Config
	return s
}
