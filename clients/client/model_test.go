package client

import (
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
