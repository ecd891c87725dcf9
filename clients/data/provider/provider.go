// Package provider serves training sequences, by global index, from a local
// dataset directory, from a data server over HTTP, or from a weighted mix of
// several datasets. Every sequence returned has been verified against the
// dataset's manifest, whose Merkle root the run pins; data that fails
// verification is reported as a *shard.IntegrityError naming the shard and is
// never returned.
package provider

import (
	"context"
	"fmt"
	"sort"

	"github.com/psyche-go/psyche/clients/data/shard"
)

// Info describes the sequences a provider serves.
type Info struct {
	Tokenizer    string
	VocabSize    uint32
	EOT          uint32
	SeqLen       uint32 // each sequence has SeqLen+1 tokens: inputs [0,SeqLen), targets [1,SeqLen]
	NumSequences uint64 // valid indices are [0, NumSequences)
	Root         string // hex commitment to the data, to pin in a run config
	// LossMask marks fine-tuning data: each sequence's seq_len+1 tokens are
	// followed by shard.MaskWords(SeqLen) words of its loss mask, each
	// holding 16 mask bits (bit j%16 of word j/16: target j is trained).
	LossMask     bool
	ChatTemplate string // hex SHA-256 of the chat template, if one shaped the data
}

// Provider returns training sequences by global index.
type Provider interface {
	Info() Info
	// Sequences returns the sequences with the given indices, in that order.
	// Which indices a client trains on is decided elsewhere (the batch
	// assignment); a provider only fetches and verifies them.
	Sequences(ctx context.Context, indices []uint64) ([][]uint32, error)
	Close() error
}

func infoOf(m *shard.Manifest) Info {
	return Info{
		Tokenizer: m.Tokenizer, VocabSize: m.VocabSize, EOT: m.EOT, SeqLen: m.SeqLen,
		NumSequences: m.NumSequences, Root: m.Root, LossMask: m.LossMask, ChatTemplate: m.ChatTemplate,
	}
}

// chunkKey names one chunk of one shard.
type chunkKey struct{ shard, chunk int }

// gather locates indices, has fetch produce the verified bytes of every chunk
// they touch (each chunk once), and cuts the sequences out.
func gather(ctx context.Context, m *shard.Manifest, indices []uint64,
	fetch func(ctx context.Context, keys []chunkKey) (map[chunkKey][]byte, error)) ([][]uint32, error) {
	locs := make([]shard.Location, len(indices))
	seen := make(map[chunkKey]bool)
	var keys []chunkKey
	for i, idx := range indices {
		loc, err := m.Locate(idx)
		if err != nil {
			return nil, err
		}
		locs[i] = loc
		k := chunkKey{loc.Shard, loc.Chunk}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].shard != keys[b].shard {
			return keys[a].shard < keys[b].shard
		}
		return keys[a].chunk < keys[b].chunk
	})
	chunks, err := fetch(ctx, keys)
	if err != nil {
		return nil, err
	}
	n := m.SequenceWords()
	flat := make([]uint32, len(indices)*n)
	out := make([][]uint32, len(indices))
	for i, loc := range locs {
		data := chunks[chunkKey{loc.Shard, loc.Chunk}]
		end := loc.Skip + m.SequenceBytes()
		if int64(len(data)) < end {
			return nil, fmt.Errorf("internal error: chunk %d of %s has %d bytes, sequence ends at %d", loc.Chunk, m.Shards[loc.Shard].Name, len(data), end)
		}
		out[i] = flat[i*n : (i+1)*n : (i+1)*n]
		if err := shard.DecodeSequence(out[i], data[loc.Skip:end], m.VocabSize, m.SeqLen); err != nil {
			return nil, &shard.IntegrityError{Shard: m.Shards[loc.Shard].Name, Chunk: loc.Chunk, Reason: err.Error()}
		}
	}
	return out, nil
}

// Ignored is the target of a position the loss skips (the trainer's
// TR_IGNORE): fine-tuning data trains only the targets its mask marks.
const Ignored = -1

// InputsAndTargets lays sequences out as one flat trainer batch: for each
// sequence of seq_len+1 tokens, inputs get tokens [0, seq_len) and targets
// tokens [1, seq_len], so targets[i] is the token after inputs[i]. With a
// loss mask (info.LossMask), a target its mask leaves out is Ignored.
func InputsAndTargets(info Info, seqs [][]uint32) (inputs, targets []int32, err error) {
	if len(seqs) == 0 {
		return nil, nil, fmt.Errorf("no sequences")
	}
	n := int(info.SeqLen)
	if n < 1 {
		return nil, nil, fmt.Errorf("sequences of %d tokens leave nothing to predict", n+1)
	}
	words := shard.SequenceWords(info.SeqLen, info.LossMask)
	inputs = make([]int32, 0, len(seqs)*n)
	targets = make([]int32, 0, len(seqs)*n)
	for i, s := range seqs {
		if len(s) != words {
			return nil, nil, fmt.Errorf("sequence %d has %d words, want %d (seq_len %d, loss mask %v)", i, len(s), words, n, info.LossMask)
		}
		mask := s[n+1:]
		for k := range n {
			inputs = append(inputs, int32(s[k]))
			if info.LossMask && !shard.Trained(mask, k) {
				targets = append(targets, Ignored)
			} else {
				targets = append(targets, int32(s[k+1]))
			}
		}
	}
	return inputs, targets, nil
}
