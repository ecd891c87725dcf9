package provider

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
)

// Weighted is one dataset of a mix with its integer weight.
type Weighted struct {
	Provider Provider
	Weight   uint32
}

// maxTotalWeight bounds the schedule table (one entry per unit of weight).
const maxTotalWeight = 1 << 16

// Mix interleaves several datasets by weight, deterministically: every client
// maps a mix index to the same dataset and sequence. The weights define a
// period of W = sum(weights) slots, filled by smooth weighted round-robin
// (each slot goes to the dataset with the largest running credit, ties to the
// earlier dataset), so a dataset of weight w gets w slots per period, spread
// out. Mix index i is slot i mod W of period p = i / W; if that slot is the
// r-th (from 0) of dataset d in the period, it maps to sequence
// (p*w_d + r) mod N_d of dataset d. Smaller datasets thus repeat (epochs)
// while larger ones are still being read.
type Mix struct {
	parts []Weighted
	slots []int    // dataset of each slot in a period
	ranks []uint64 // slot's rank among its dataset's slots in the period
	total uint64
	info  Info
}

// NewMix combines datasets that share tokenizer and sequence length.
func NewMix(parts []Weighted) (*Mix, error) {
	if len(parts) == 0 {
		return nil, errors.New("a data mix needs at least one dataset")
	}
	first := parts[0].Provider.Info()
	var total uint64
	for i, p := range parts {
		in := p.Provider.Info()
		if p.Weight == 0 {
			return nil, fmt.Errorf("data mix: dataset %d (root %s) has weight 0", i, in.Root)
		}
		if in.Tokenizer != first.Tokenizer || in.VocabSize != first.VocabSize || in.EOT != first.EOT || in.SeqLen != first.SeqLen {
			return nil, fmt.Errorf("data mix: dataset %d (%s, seq_len %d) does not match dataset 0 (%s, seq_len %d)",
				i, in.Tokenizer, in.SeqLen, first.Tokenizer, first.SeqLen)
		}
		if in.LossMask != first.LossMask || in.ChatTemplate != first.ChatTemplate {
			return nil, fmt.Errorf("data mix: dataset %d (loss mask %v, chat template %q) does not match dataset 0 (loss mask %v, chat template %q): fine-tuning data mixes only with data of the same template", i, in.LossMask, in.ChatTemplate, first.LossMask, first.ChatTemplate)
		}
		total += uint64(p.Weight)
	}
	if total > maxTotalWeight {
		return nil, fmt.Errorf("data mix: weights add up to %d; keep the sum at most %d (use smaller integers)", total, maxTotalWeight)
	}
	m := &Mix{parts: parts, total: total}
	credit := make([]int64, len(parts))
	taken := make([]uint64, len(parts))
	for range total {
		best := 0
		for d, p := range parts {
			credit[d] += int64(p.Weight)
			if credit[d] > credit[best] {
				best = d
			}
		}
		credit[best] -= int64(total)
		m.slots = append(m.slots, best)
		m.ranks = append(m.ranks, taken[best])
		taken[best]++
	}
	// One "epoch" of the mix: long enough that every dataset is read whole.
	var periods uint64
	h := sha256.New()
	h.Write([]byte("psyche-data-mix/1"))
	for _, p := range parts {
		in := p.Provider.Info()
		periods = max(periods, (in.NumSequences+uint64(p.Weight)-1)/uint64(p.Weight))
		root, err := hex.DecodeString(in.Root)
		if err != nil || len(root) != sha256.Size {
			return nil, fmt.Errorf("data mix: dataset root %q is not a SHA-256 hex digest", in.Root)
		}
		h.Write(binary.LittleEndian.AppendUint32(nil, p.Weight))
		h.Write(root)
	}
	m.info = first
	m.info.NumSequences = periods * total
	// The mix root commits to every dataset root and weight, in order.
	m.info.Root = hex.EncodeToString(h.Sum(nil))
	return m, nil
}

func (m *Mix) Info() Info { return m.info }

// Source maps mix index i to a dataset and a sequence index within it.
func (m *Mix) Source(i uint64) (dataset int, index uint64, err error) {
	if i >= m.info.NumSequences {
		return 0, 0, fmt.Errorf("sequence %d is out of range: the mix has %d", i, m.info.NumSequences)
	}
	period, slot := i/m.total, i%m.total
	d := m.slots[slot]
	n := m.parts[d].Provider.Info().NumSequences
	return d, (period*uint64(m.parts[d].Weight) + m.ranks[slot]) % n, nil
}

func (m *Mix) Sequences(ctx context.Context, indices []uint64) ([][]uint32, error) {
	perPart := make([][]uint64, len(m.parts))
	where := make([][2]int, len(indices)) // dataset, position in its request
	for i, idx := range indices {
		d, j, err := m.Source(idx)
		if err != nil {
			return nil, err
		}
		where[i] = [2]int{d, len(perPart[d])}
		perPart[d] = append(perPart[d], j)
	}
	results := make([][][]uint32, len(m.parts))
	errs := make([]error, len(m.parts))
	var wg sync.WaitGroup
	for d, idxs := range perPart {
		if len(idxs) == 0 {
			continue
		}
		wg.Go(func() { results[d], errs[d] = m.parts[d].Provider.Sequences(ctx, idxs) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([][]uint32, len(indices))
	for i, w := range where {
		out[i] = results[w[0]][w[1]]
	}
	return out, nil
}

// Close closes every dataset of the mix.
func (m *Mix) Close() error {
	var errs []error
	for _, p := range m.parts {
		errs = append(errs, p.Provider.Close())
	}
	return errors.Join(errs...)
}
