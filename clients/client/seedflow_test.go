package client

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The smoke run (config/smoke.toml, run id "test", three clients; the
// `just dev` flow's until the seed's 1.1B and 12M configs replaced it, which
// warm up as long) trains without a loss spike. Under the old schedule (warmup over
// 10 steps to the 1e-3 peak) the sign steps of DeMo overshot as the model
// left the unigram plateau (loss ~4.0): the train loss jumped from 3.96 to
// 7.20 at step 17 and was back the next step (clients/trainer/README.md,
// "One-step loss spikes"). The held-out loss shows the overshoot without the
// batches' own ups and downs, so the test asserts on it: after every step it
// stays within spikeMargin of its lowest so far (old schedule: +2.77 after
// step 16; warmup over 50 steps: at most +0.03 over 14 run ids and round
// seeds, config/README.md). The train loss must never exceed the first
// step's (the curve the explorer shows), and the run must be past the
// plateau at the end, so a schedule that only moves the spike beyond the
// steps trained here fails.
func TestSeedFlowTrainsWithoutLossSpike(t *testing.T) {
	const (
		steps       = 45
		spikeMargin = 0.1 // nats
		pastPlateau = 3.6 // held-out loss after the last step
	)
	c := runLocally(t, "../../config/smoke.toml", "test", steps)
	t.Logf("config/smoke.toml, run id %q, %d clients, %d steps:\n%s", "test", c.clients, steps, c)
	lowest := c.heldOut[0]
	for i, l := range c.heldOut {
		if l > lowest+spikeMargin {
			t.Errorf("step %d: held-out loss %.3f, %.3f above the lowest before it (a spike)", i+1, l, l-lowest)
		}
		lowest = min(lowest, l)
	}
	for i, l := range c.train {
		if l > c.train[0] {
			t.Errorf("step %d: train loss %.3f above step 1's %.3f", i+1, l, c.train[0])
		}
	}
	if last := c.heldOut[steps-1]; last > pastPlateau {
		t.Errorf("held-out loss %.3f after step %d: not past the plateau (%.1f)", last, steps, pastPlateau)
	}
}

// curve is a local run's loss per step: the train loss (the members' losses
// weighted by their tokens, as the run reports it) and the held-out loss
// after the step's apply.
type curve struct {
	clients        int
	lr             []float32
	train, heldOut []float64
}

func (c curve) String() string {
	var b strings.Builder
	for i := range c.train {
		fmt.Fprintf(&b, "step %3d  lr %.6f  train %.3f  held-out %.3f\n", i+1, c.lr[i], c.train[i], c.heldOut[i])
	}
	return b.String()
}

// runLocally trains steps of a run config as its clients would, without a
// chain: init_min_clients members, each a trainer from the run id's initial
// weights, train their share of every step's batch (schedule.Assignments, in
// the order a fixed chain of round seeds gives) on the byte-level dataset
// of sequences of 128, and every member applies all payloads in member
// order. The rounds' seeds on chain differ from run to run, so which member
// trains which sequences does too; the weights' path otherwise is the run's.
func runLocally(t *testing.T, configPath, runID string, steps int) curve {
	t.Helper()
	p, err := coordinator.LoadParams(configPath)
	if err != nil {
		t.Fatal(err)
	}
	m, cfg := p.Model, p.Config
	train, held := devDataset(t, m.MaxSeqLen)
	ctx := context.Background()
	evIn, evTg, evLen, err := BatchSequences(ctx, held, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	shape, err := TrainerConfig(m, 8)
	if err != nil {
		t.Fatal(err)
	}
	members := make([]*trainer.Trainer, cfg.InitMinClients)
	for i := range members {
		if members[i], err = trainer.New(shape, InitSeed(runID)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { members[i].Close() })
		members[i].SetThreads(1) // the members share the cores; the bits do not depend on it
	}
	fetch := func(ctx context.Context, start, n uint64) ([]int32, []int32, int, error) {
		return BatchSequences(ctx, train, start, n)
	}
	c := curve{clients: len(members)}
	seed := schedule.GenesisSeed([]byte(runID))
	payloads, losses, tokens := make([][]byte, len(members)), make([]float32, len(members)), make([]uint64, len(members))
	for step := uint32(1); step <= uint32(steps); step++ {
		seed = schedule.RoundSeed(seed, uint64(step), [32]byte{}, step)
		u := NewUpdate(m, cfg.TotalSteps, step, 1, 0, 1, false, false)
		at := schedule.DataIndexForStep(cfg.GlobalBatchSizeStart, cfg.GlobalBatchSizeEnd, cfg.GlobalBatchSizeWarmupTokens, m.MaxSeqLen, 1, step)
		batches := schedule.Assignments(uint16(len(members)), schedule.BatchSize(cfg.GlobalBatchSizeStart, cfg.GlobalBatchSizeEnd, cfg.GlobalBatchSizeWarmupTokens, schedule.TokensBefore(at, m.MaxSeqLen)), 1, at, seed)
		err := eachMember(members, func(i int, tr *trainer.Trainer) (err error) {
			payloads[i], losses[i], tokens[i], err = u.Run(ctx, tr, fetch, batches[i])
			return err
		})
		if err == nil {
			err = eachMember(members, func(_ int, tr *trainer.Trainer) error { return applyPayloads(tr, &u, payloads) })
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		var sum, n float64
		for i := range losses {
			sum += float64(losses[i]) * float64(tokens[i])
			n += float64(tokens[i])
		}
		held, err := members[0].Eval(ctx, evIn, evTg, evLen)
		if err != nil {
			t.Fatal(err)
		}
		c.lr = append(c.lr, u.LR())
		c.train = append(c.train, sum/n)
		c.heldOut = append(c.heldOut, float64(held))
	}
	return c
}

// eachMember runs f for every member at once and returns the first error.
func eachMember(members []*trainer.Trainer, f func(i int, tr *trainer.Trainer) error) error {
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, tr := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i, tr)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// devDataset prepares what scripts/dev/train.sh and scripts/demo.sh train
// and evaluate on: the default corpus's train split (addresses up to 2000)
// and its validation split, byte-level, in sequences of seqLen tokens.
func devDataset(t *testing.T, seqLen uint32) (train, held provider.Provider) {
	t.Helper()
	src, err := corpus.SOTUDir()
	if err != nil {
		t.Skipf("corpus missing (run scripts/setup.sh): %v", err)
	}
	open := func(name string) provider.Provider {
		split, err := corpus.NewSplit(name, corpus.DefaultLastTrainYear)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), name)
		if _, err := prepare.Run(context.Background(), prepare.Options{Input: src, Split: split, Tokenizer: tokenizer.ByteName, SeqLen: seqLen, Out: out}); err != nil {
			t.Fatal(err)
		}
		p, err := provider.OpenLocal(out, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	return open("train"), open("validation")
}
