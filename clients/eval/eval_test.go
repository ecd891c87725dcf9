package eval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/trainer"
)

func TestLoadRejectsBadTasks(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"not json", "{", "bad.jsonl:1"},
		{"one choice", `{"context":"a","choices":["b"],"gold":0}`, "at least 2 choices"},
		{"gold out of range", `{"context":"a","choices":["b","c"],"gold":2}`, "gold"},
		{"empty choice", `{"context":"a","choices":["b",""],"gold":0}`, "choice 1 is empty"},
		{"no items", "\n", "no items"},
	} {
		p := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); !errors.Is(err, ErrTask) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrTask with %q", c.name, err, c.want)
		}
	}
	p := filepath.Join(dir, "ok.jsonl")
	if err := os.WriteFile(p, []byte(`{"context":"a","choices":["b","c"],"gold":1}`+"\n\n"+`{"context":"d","choices":["e","f","g"],"gold":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	task, err := Load(p)
	if err != nil || len(task.Items) != 2 || task.Items[1].Choices[2] != "g" {
		t.Fatalf("%+v, %v", task, err)
	}
}

// A light model trained for 200 steps on the corpus's training years picks
// the true continuation of held-out passages far more often than chance
// (25%), and more often than the same model untrained. Measured (bit-exact,
// so on every machine): untrained 0.225, trained 0.430; the test wants at
// least chance + 0.15. (With 32-byte choices the trained model reached only
// 0.265, with 16 bytes 0.375: the longer the choice, the more its own
// predictability drowns the context's evidence.)
func TestTrainedModelBeatsChance(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model for 200 steps")
	}
	dir, err := corpus.SOTUDir()
	if err != nil {
		t.Skipf("corpus missing (run scripts/setup.sh): %v", err)
	}
	ctx := context.Background()
	task, err := BuiltinSOTU(ctx, 200, BuiltinContextBytes, BuiltinChoiceBytes)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tok := tokenizer.Byte{}
	before, err := Run(ctx, tr, tok, task)
	if err != nil {
		t.Fatal(err)
	}
	split, _ := corpus.NewSplit("train", corpus.DefaultLastTrainYear)
	var text []byte
	if err := corpus.Walk(ctx, dir, split, func(d corpus.Document) error {
		text = append(append(text, d.Text...), "\n\n"...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const steps, batch, seq = 200, 8, 128
	for s := range steps {
		var in, tgt []int32
		for b := range batch {
			off := ((s*batch + b) * 2654435761) % (len(text) - seq - 1) // spread over the text
			for i := range seq {
				in, tgt = append(in, int32(text[off+i])), append(tgt, int32(text[off+i+1]))
			}
		}
		if _, err := tr.Step(ctx, in, tgt, seq); err != nil {
			t.Fatal(err)
		}
		lr := float32(2e-3)
		if s < 10 {
			lr *= float32(s+1) / 10
		}
		if err := tr.AdamWStep(trainer.AdamW{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, ClipNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := Run(ctx, tr, tok, task)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: untrained acc %.3f acc_norm %.3f; after %d steps acc %.3f acc_norm %.3f; chance %.3f",
		task.Name, before.Acc, before.AccNorm, steps, after.Acc, after.AccNorm, after.Chance)
	if after.Acc < after.Chance+0.15 || after.Acc <= before.Acc {
		t.Errorf("trained acc %.3f (untrained %.3f): want at least chance %.2f + 0.15", after.Acc, before.Acc, after.Chance)
	}
}
