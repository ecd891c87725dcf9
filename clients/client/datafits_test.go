package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The data's untrained targets are the trainer's ignored ones.
func TestIgnoredTargetsAgree(t *testing.T) {
	if provider.Ignored != trainer.Ignore {
		t.Fatalf("provider.Ignored %d, trainer.Ignore %d", provider.Ignored, trainer.Ignore)
	}
}

// A fine-tuning run trains only on loss-masked data and a pretraining run
// only on data without a mask; shape and tokenizer must fit either way.
func TestDataFits(t *testing.T) {
	model := func(dataType uint8) *coordinator.Model {
		return &coordinator.Model{DataType: dataType, Tokenizer: coordinator.TokenizerByte, VocabSize: 256, MaxSeqLen: 128}
	}
	plain := provider.Info{Tokenizer: "byte", VocabSize: 256, SeqLen: 128, NumSequences: 10, Root: "ab"}
	masked := plain
	masked.LossMask = true
	wide := &coordinator.Model{DataType: coordinator.DataPretraining, Tokenizer: coordinator.TokenizerJSON, TokenizerHash: [32]byte{7}, VocabSize: 151936, MaxSeqLen: 128}
	wideData := provider.Info{Tokenizer: tokenizer.JSONName(wide.TokenizerHash), VocabSize: 151646, SeqLen: 128, NumSequences: 10, Root: "ab"}
	for _, tc := range []struct {
		name string
		m    *coordinator.Model
		info provider.Info
		want string // "" fits
	}{
		{"pretraining, plain data", model(coordinator.DataPretraining), plain, ""},
		{"fine-tuning, masked data", model(coordinator.DataFinetuning), masked, ""},
		{"fine-tuning, plain data", model(coordinator.DataFinetuning), plain, "has no loss mask"},
		{"pretraining, masked data", model(coordinator.DataPretraining), masked, "fine-tuning data with a loss mask"},
		{"another sequence length", model(coordinator.DataFinetuning), func() provider.Info { i := masked; i.SeqLen = 64; return i }(), "does not fit"},
		{"another tokenizer", model(coordinator.DataFinetuning), func() provider.Info { i := masked; i.Tokenizer = "gpt2"; return i }(), "tokenized by gpt2"},
		// Qwen2's tokenizer.json (151646 tokens) under its padded embedding.
		{"a wide tokenizer.json", wide, wideData, ""},
		{"a wider vocabulary than the model's", wide, func() provider.Info { i := wideData; i.VocabSize = 200000; return i }(), "vocabulary 200000"},
	} {
		err := client.DataFits(tc.m, tc.info)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, client.ErrData) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrData saying %q", tc.name, err, tc.want)
		}
	}
}
