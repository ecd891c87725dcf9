package coordinator_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
)

func TestShippedRunConfigs(t *testing.T) {
	rc, err := coordinator.LoadRunConfig("../../config/light.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	m := p.Model
	// The `light` trainer config: byte-level vocab 256, L=4, C=128, H=4, T=128.
	if m.VocabSize != 256 || m.Tokenizer != 1 || m.NLayer != 4 || m.NEmbd != 128 || m.NHead != 4 || m.MaxSeqLen != 128 {
		t.Errorf("light model %+v", m)
	}
	if math.Float32frombits(m.LearningRate) != 0.001 || m.CheckpointKind != 1 || m.DataLocationKind != 2 || p.Config.EpochTime > 600 {
		t.Errorf("light: lr %v checkpoint %d data %d epoch %ds", math.Float32frombits(m.LearningRate), m.CheckpointKind, m.DataLocationKind, p.Config.EpochTime)
	}
	if coordinator.FixedString(p.Metadata.Name[:]) != "light" || p.Progress != nil {
		t.Errorf("light metadata %q progress %v", p.Metadata.Name, p.Progress)
	}
	if _, err := coordinator.LoadRunConfig("../../config/test.toml"); err != nil {
		t.Fatal(err)
	}
	// Verification is off unless a config turns it on; one TRANSIENT outcome
	// per epoch is forgiven by default.
	if c := p.Config; c.VerificationPercent != 0 || c.ForgivePerEpoch != 1 || c.VestingEpochs != 0 {
		t.Errorf("light: verification %d forgive %d vesting %d", c.VerificationPercent, c.ForgivePerEpoch, c.VestingEpochs)
	}
}

func TestVerificationKeys(t *testing.T) {
	doc := "[config]\nepoch_time = 60\nverification_percent = 25\nforgive_per_epoch = 0\nvesting_epochs = 2\n"
	rc, err := coordinator.ParseRunConfig("v.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
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
