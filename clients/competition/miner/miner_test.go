package miner

import (
	"context"
	"math"
	"testing"

	"github.com/psyche-go/psyche/clients/competition/comptest"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/trainer"
)

var tiny = trainer.Config{Name: "tiny", Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2, SeqLen: 32, MicroBatch: 4}

// markovData is a real byte-level dataset of Markov text.
func markovData(t *testing.T) provider.Provider {
	p, _ := comptest.Dataset(t, 4, 32)
	return p
}

func heldOut(t *testing.T, tr *trainer.Trainer, data provider.Provider) float32 {
	t.Helper()
	seqs, err := data.Sequences(context.Background(), []uint64{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	in, tg, err := provider.InputsAndTargets(data.Info(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tr.Eval(context.Background(), in, tg, int(data.Info().SeqLen))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Training lowers the loss, and the same session gives the same bits
// whether it runs at once or in two parts (a miner resuming).
func TestTrainLowersLossAndResumes(t *testing.T) {
	data := markovData(t)
	ctx := context.Background()
	o := Options{Batch: 4, LR: 3e-3, Warmup: 3, Offset: 5}
	a, err := trainer.New(tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	before := heldOut(t, a, data)
	var losses []float32
	if err := Train(ctx, a, data, o, 0, 30, func(s int, l float32) { losses = append(losses, l) }); err != nil {
		t.Fatal(err)
	}
	after := heldOut(t, a, data)
	if len(losses) != 30 || !(after < before*0.9) {
		t.Fatalf("30 steps: %d losses, held-out %v -> %v", len(losses), before, after)
	}
	b, err := trainer.New(tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := Train(ctx, b, data, o, 0, 12, nil); err != nil {
		t.Fatal(err)
	}
	if err := Train(ctx, b, data, o, 12, 18, nil); err != nil {
		t.Fatal(err)
	}
	pa, _ := a.Params()
	pb, _ := b.Params()
	for i := range pa {
		if math.Float32bits(pa[i]) != math.Float32bits(pb[i]) {
			t.Fatalf("parameter %d: %v at once, %v in two parts", i, pa[i], pb[i])
		}
	}
}

func TestTrainRefusesBadOptions(t *testing.T) {
	data := markovData(t)
	tr, err := trainer.New(tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p0, _ := tr.Params()
	for _, o := range []Options{{Batch: 0, LR: 1e-3}, {Batch: 2, LR: 0}, {Batch: 2, LR: float32(math.NaN())}, {Batch: 2, LR: 1e-3, Warmup: -1}} {
		if err := Train(context.Background(), tr, data, o, 0, 1, nil); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	short := tiny
	short.SeqLen = 16
	s, err := trainer.New(short, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := Train(context.Background(), s, data, Defaults, 0, 1, nil); err == nil {
		t.Error("a model whose context is shorter than the data's sequences trained")
	}
	p1, _ := tr.Params()
	for i := range p0 {
		if p0[i] != p1[i] {
			t.Fatal("a refused session changed the model")
		}
	}
}

func TestImprovedNeedsMoreThanEpsilon(t *testing.T) {
	for _, c := range []struct {
		loss, best float32
		eps        uint32
		want       bool
	}{
		{2.0, 2.0, 0, false},       // equal is no improvement
		{1.99, 2.0, 0, true},       // without epsilon any gain counts
		{1.98, 2.0, 10_000, false}, // exactly 1% better: 1.98 == 2·0.99
		{1.979, 2.0, 10_000, true},
		{1.5, 2.0, 1_000_000, false}, // a 100% epsilon can never be cleared
		{float32(math.NaN()), 2.0, 0, false},
		{1.0, float32(math.Inf(1)), 10_000, true}, // anything beats an invalid best
	} {
		if got := Improved(c.loss, c.best, c.eps); got != c.want {
			t.Errorf("Improved(%v, %v, %d) = %v, want %v", c.loss, c.best, c.eps, got, c.want)
		}
	}
	if MeanLoss([]float32{1, 2, 4}) != float32(7.0/3) || !math.IsNaN(float64(MeanLoss(nil))) {
		t.Error("MeanLoss")
	}
}
