package client

import (
	"crypto/sha256"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The shipped run configs describe the trainer's named configs: the model a
// run's clients build is the one the config's comment names.
func TestTrainerConfigFromRunConfig(t *testing.T) {
	for _, c := range []struct{ file, name string }{
		{"../../config/light.toml", "light"},
		{"../../config/llama-light.toml", "llama-light"},
	} {
		rc, err := coordinator.LoadRunConfig(c.file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := rc.Params()
		if err != nil {
			t.Fatal(err)
		}
		got, err := TrainerConfig(p.Model, 8)
		if err != nil {
			t.Fatal(err)
		}
		want, err := trainer.ConfigByName(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got.Name = want.Name
		if got != want {
			t.Errorf("%s: trainer config %+v, want %+v", c.file, got, want)
		}
	}
	// Untied, and an architecture this client does not know.
	rc, err := coordinator.LoadRunConfig("../../config/llama-light.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	m := *p.Model
	m.Untied = 1
	if cfg, err := TrainerConfig(&m, 8); err != nil || !cfg.Untied {
		t.Errorf("untied: %+v, %v", cfg, err)
	}
	m.DataType = 2
	if _, err := TrainerConfig(&m, 8); err == nil {
		t.Error("fine-tuning data accepted")
	}
	m.DataType = 1
	m.Architecture = 3
	if _, err := TrainerConfig(&m, 8); err == nil {
		t.Error("architecture tag 3 accepted")
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
