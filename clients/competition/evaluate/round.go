package evaluate

import (
	"context"
	"fmt"
	"time"

	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/hub"
)

// Options are a validator's settings for Evaluate; none changes the result
// (but a hub's retries: see Fetch).
type Options struct {
	Fetch hub.FetchOptions // retries, HTTP client, logs; MaxSize is Fetch's own
	Table TableOptions
}

// Round is a validator's evaluation of one round.
type Round struct {
	Pages      []uint64   // the pages drawn from the seed
	Losses     []float32  // the loss table: model-major, len(subs) x len(Pages)
	TableHash  [32]byte   // TableHash(Losses), what the validator votes
	Invalid    []*Invalid // by model: why it is invalid, nil when valid
	Downloaded int64      // bytes fetched from hubs (0 for cached files)
	// Wall-clock time of each stage, for logs and benchmarks.
	FetchTime, CheckTime, TableTime time.Duration
}

// Evaluate is a validator's off-chain work for a round: the pages of seed,
// then for each eligible entry's submission (subs, in entry order) Fetch
// into dir and Check, then LossTable. The invalid set and the table are
// what the vote carries (wins come from clients/competition/rules). An
// error (cancellation, the data, the validator's disk or memory) leaves no
// result: the validator does not vote.
func Evaluate(ctx context.Context, subs []Submission, dir string, data provider.Provider, seed [32]byte, pagesPerRound int,
	sequencesPerPage uint32, c Constraints, opts Options) (*Round, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := DataFits(data.Info(), c); err != nil {
		return nil, err
	}
	pages, err := Pages(seed, data.Info().NumSequences, sequencesPerPage, pagesPerRound)
	if err != nil {
		return nil, err
	}
	r := &Round{Pages: pages, Invalid: make([]*Invalid, len(subs))}
	models := make([]Model, len(subs))

	start := time.Now()
	for i, sub := range subs {
		models[i].Submission = sub
		path, n, err := Fetch(ctx, sub, dir, c, opts.Fetch)
		r.Downloaded += n
		if inv, ok := AsInvalid(err); ok {
			models[i].Invalid = inv
			continue
		} else if err != nil {
			return nil, fmt.Errorf("entry %d: %w", sub.Index, err)
		}
		models[i].Path = path
	}
	r.FetchTime = time.Since(start)

	start = time.Now()
	for i := range models {
		if models[i].Invalid != nil {
			continue
		}
		err := Check(models[i].Path, models[i].Submission, c)
		if inv, ok := AsInvalid(err); ok {
			models[i].Invalid = inv
		} else if err != nil {
			return nil, fmt.Errorf("entry %d: %w", models[i].Submission.Index, err)
		}
	}
	r.CheckTime = time.Since(start)
	for i := range models {
		r.Invalid[i] = models[i].Invalid
	}

	start = time.Now()
	r.Losses, r.TableHash, err = LossTable(ctx, models, data, pages, sequencesPerPage, c, opts.Table)
	if err != nil {
		return nil, err
	}
	r.TableTime = time.Since(start)
	return r, nil
}
