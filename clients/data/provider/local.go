package provider

import (
	"context"

	"github.com/psyche-go/psyche/clients/data/shard"
)

// Local serves sequences from a dataset directory on this machine.
type Local struct {
	d *shard.Dataset
}

// OpenLocal opens the dataset in dir; a non-empty pinnedRoot must match its root.
func OpenLocal(dir, pinnedRoot string) (*Local, error) {
	d, err := shard.Open(dir, pinnedRoot)
	if err != nil {
		return nil, err
	}
	return &Local{d: d}, nil
}

func (l *Local) Info() Info { return infoOf(l.d.Manifest) }

func (l *Local) Sequences(ctx context.Context, indices []uint64) ([][]uint32, error) {
	return gather(ctx, l.d.Manifest, indices, func(ctx context.Context, keys []chunkKey) (map[chunkKey][]byte, error) {
		chunks := make(map[chunkKey][]byte, len(keys))
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			data, err := l.d.ReadChunk(k.shard, k.chunk, nil)
			if err != nil {
				return nil, err
			}
			chunks[k] = data
		}
		return chunks, nil
	})
}

// Verify checks the whole dataset, every byte, against the manifest.
func (l *Local) Verify(ctx context.Context) error { return l.d.Verify(ctx) }

func (l *Local) Close() error { return l.d.Close() }
