package evaluate

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Model is one eligible entry of a round, in entry order: its submission,
// the checkpoint Fetch put at Path, and Invalid when Fetch or Check found
// the model invalid (then Path is not read and the entry has +Inf on every
// page).
type Model struct {
	Submission Submission
	Path       string
	Invalid    *Invalid
}

// TableOptions are the validator's choices; none changes a bit of the table.
type TableOptions struct {
	// Threads the trainer's kernels run on; 0: runtime.NumCPU().
	Threads int
	// MicroBatch is how many sequences one forward pass holds (memory); 0:
	// DefaultMicroBatch.
	MicroBatch int
}

// activationBudget bounds the activations DefaultMicroBatch lets a model
// allocate.
const activationBudget = 2 << 30

// DefaultMicroBatch is the micro-batch LossTable uses when
// TableOptions.MicroBatch is 0: the largest of 8, 4, 2, 1 (at most a page)
// whose activations for a model of cfg (at the competition's context) stay
// within 2 GiB.
func DefaultMicroBatch(cfg trainer.Config, sequencesPerPage uint32) int {
	mb := int(min(sequencesPerPage, 8))
	for ; mb > 1; mb /= 2 {
		c := cfg
		c.MicroBatch = mb
		fp, err := trainer.Footprint(c, trainer.FootprintOptions{Optimizer: "adamw", Threads: 1})
		if err == nil && fp.OnHost.Activations <= activationBudget {
			break
		}
	}
	return max(mb, 1)
}

// LossTable is the round's loss table (programs/competition/README.md, "Off-chain"): for each
// model in entry order, for each page, the trainer's Eval mean loss over
// the page's sequencesPerPage sequences at c.SeqLen tokens and c's
// precision, model-major; +Inf on every page of an invalid model. It
// fetches each page's sequences from data once, then loads one model at a
// time (as Check loads it; a model Check would refuse is an error here:
// check every model first), evaluates it and frees it. The hash is
// TableHash(losses). An error leaves no table: cancellation, the data, or
// the validator's memory.
func LossTable(ctx context.Context, models []Model, data provider.Provider, pages []uint64, sequencesPerPage uint32, c Constraints,
	opts TableOptions) (losses []float32, tableHash [32]byte, err error) {
	if err := c.Validate(); err != nil {
		return nil, tableHash, err
	}
	info := data.Info()
	if err := DataFits(info, c); err != nil {
		return nil, tableHash, err
	}
	if sequencesPerPage == 0 {
		return nil, tableHash, fmt.Errorf("pages of 0 sequences")
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}

	// Every page's batch, once for all models.
	batches := make([]pageBatch, len(pages))
	spp := uint64(sequencesPerPage)
	for i, p := range pages {
		if p >= info.NumSequences/spp {
			return nil, tableHash, fmt.Errorf("page %d is past the dataset's %d whole pages of %d sequences", p, info.NumSequences/spp, spp)
		}
		idx := make([]uint64, spp)
		for k := range idx {
			idx[k] = p*spp + uint64(k)
		}
		seqs, err := data.Sequences(ctx, idx)
		if err != nil {
			return nil, tableHash, fmt.Errorf("page %d: %w", p, err)
		}
		in, tg, err := provider.InputsAndTargets(info, seqs)
		if err != nil {
			return nil, tableHash, fmt.Errorf("page %d: %w", p, err)
		}
		batches[i] = pageBatch{in, tg}
	}

	losses = make([]float32, len(models)*len(pages))
	for m, model := range models {
		row := losses[m*len(pages) : (m+1)*len(pages)]
		if model.Invalid != nil {
			for p := range row {
				row[p] = float32(math.Inf(1))
			}
			continue
		}
		if err := evalModel(ctx, model, c, spp, opts.MicroBatch, threads, batches, row); err != nil {
			return nil, tableHash, fmt.Errorf("entry %d (model %d of the table): %w", model.Submission.Index, m, err)
		}
	}
	return losses, TableHash(losses), nil
}

// pageBatch is a page's sequences as one trainer batch.
type pageBatch struct{ inputs, targets []int32 }

// evalModel fills row with one model's loss on each page's batch.
func evalModel(ctx context.Context, model Model, c Constraints, spp uint64, microBatch, threads int, batches []pageBatch, row []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mb := microBatch
	if mb <= 0 {
		mb = 1
		if h, err := peekConfig(model.Path); err == nil {
			mb = DefaultMicroBatch(evalConfig(h, c, 1), uint32(spp))
		}
	}
	tr, err := load(model.Path, model.Submission, c, mb, threads)
	if err != nil {
		if inv, ok := AsInvalid(err); ok {
			// Not an *Invalid to the caller: the table needs every model Check
			// accepted to load.
			return fmt.Errorf("%v (LossTable takes models Check accepted; did the file change?)", inv)
		}
		return err
	}
	defer tr.Close()
	for p, b := range batches {
		loss, err := tr.Eval(ctx, b.inputs, b.targets, int(c.SeqLen))
		if err != nil {
			return err
		}
		row[p] = loss
	}
	return nil
}
