package client_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The instruction set, tokenizer and chat template the repo ships for
// fine-tuning (config/finetune, written by its gen.py).
var finetuneDir = filepath.Join("..", "..", "config", "finetune")

// finetuneData prepares config/finetune's conversations as loss-masked
// datasets: the training set, and the held-out one the clients evaluate.
func finetuneData(t *testing.T) (train, heldout string) {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"train", "heldout"} {
		_, err := prepare.RunChat(context.Background(), prepare.ChatOptions{
			Input: filepath.Join(finetuneDir, name+".jsonl"), Tokenizer: filepath.Join(finetuneDir, "tokenizer.json"),
			Template: filepath.Join(finetuneDir, "tokenizer_config.json"), SeqLen: 128, Out: filepath.Join(out, name)})
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(out, "train"), filepath.Join(out, "heldout")
}

// Three clients fine-tune a Hugging Face Llama on the shipped instruction
// set, a fine-tuning run (data_type "finetuning") whose data carries loss
// masks: they start from the model's weights (the held-out masked loss at
// step 0 is the base model's, bit for bit), every step's replica digest is
// the same on all of them, every contribution is replayed on its masked
// batch and matches, and the held-out masked loss falls well below the
// base model's.
func TestFineTuneTrainsToFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	tokFile, err := os.ReadFile(filepath.Join(finetuneDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Vocab, cfg.PaddedVocab = 512, 512
	base, err := trainer.New(cfg, 777)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	hfDir := t.TempDir()
	if err := base.ExportHF(hfDir); err != nil {
		t.Fatal(err)
	}
	rev, err := hub.HashFile(filepath.Join(hfDir, trainer.HFWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	config := strings.NewReplacer(
		`kind = "ephemeral"`, fmt.Sprintf("kind = \"hub\"\nrepo = %q\nrevision = %q", "file://"+hfDir, rev),
		`tokenizer = "byte"`, fmt.Sprintf(`tokenizer = "json:%x"`, sha256.Sum256(tokFile)),
		"vocab_size = 256", "vocab_size = 512",
		`data_type = "pretraining"`, `data_type = "finetuning"`,
		"round_witness_time = 1", "round_witness_time = 3",
		"witness_nodes = 0", "witness_nodes = 0\nverification_percent = 100",
	).Replace(llamaConfig)
	var valDir string
	data := func(t *testing.T) (string, string) {
		train, val := finetuneData(t)
		valDir = val
		return train, val
	}
	clients, s, _ := threeToFinishedWith(t, "e2e-finetune", config, data, func(i int, c *client.Config) { c.EvalSequences = 64 })
	if s.Model.DataType != 2 {
		t.Errorf("the run's data type is %d, want 2 (finetuning)", s.Model.DataType)
	}
	digests := map[uint64]string{}
	for i, tc := range clients {
		for _, st := range tc.rec.Snapshot().Steps {
			sameDigest(t, digests, i, st)
		}
		v := tc.rec.Snapshot().Verification
		if v == nil || v.Replays.Posted == 0 || v.Replays.Mismatch+v.Replays.NoData > 0 || v.Commitments.Committed == 0 {
			t.Errorf("client %d: verification %+v, want replays posted, commitments made and all MATCH", i, v)
		}
	}
	for step := uint64(1); step <= 12; step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client recorded step %d", step)
		}
	}
	baseLoss := maskedEvalLoss(t, base, valDir)
	first, last := heldOutSpan(clients)
	t.Logf("held-out masked loss %.4f at step %d (base model %.4f) -> %.4f at step %d", first.Loss, first.Step, baseLoss, last.Loss, last.Step)
	if first.Step != 0 || float32(first.Loss) != baseLoss {
		t.Errorf("held-out loss at the start %.6f at step %d, want the base model's %.6f at step 0", first.Loss, first.Step, baseLoss)
	}
	if last.Step < 12 || last.Loss > first.Loss-1.0 {
		t.Errorf("held-out masked loss %.4f at step %d -> %.4f at step %d: want a drop of at least 1.0 by step 12", first.Loss, first.Step, last.Loss, last.Step)
	}
}

// maskedEvalLoss is tr's mean loss over every trained target of the
// held-out set, as the clients' held-out evaluation computes it.
func maskedEvalLoss(t *testing.T, tr *trainer.Trainer, dir string) float32 {
	t.Helper()
	p, err := provider.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	idx := make([]uint64, p.Info().NumSequences)
	for i := range idx {
		idx[i] = uint64(i)
	}
	seqs, err := p.Sequences(context.Background(), idx)
	if err != nil {
		t.Fatal(err)
	}
	in, tg, err := provider.InputsAndTargets(p.Info(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := tr.Eval(context.Background(), in, tg, int(p.Info().SeqLen))
	if err != nil {
		t.Fatal(err)
	}
	return loss
}
