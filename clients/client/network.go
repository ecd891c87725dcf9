package client

import (
	"context"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/p2p"
)

// network is what the engine needs of the p2p node (clients/p2p.Node):
// payload gossip and blobs, the run's participant set and bans, and model
// sharing for clients that join late.
type network interface {
	ID() peer.ID
	Messages() <-chan p2p.Message
	SetParticipants(ids []peer.ID)
	Ban(id peer.ID, reason string)
	Snapshot() p2p.Snapshot

	Publish(ctx context.Context, step uint64, batch p2p.BatchID, payload []byte) (p2p.Announcement, error)
	FetchBlob(ctx context.Context, a p2p.Announcement) ([]byte, error)
	PruneBefore(step uint64)

	Finish(ctx context.Context, f p2p.Finished) (p2p.Finished, error)
	ShareModel(m *p2p.Manifest, src io.ReaderAt) p2p.Hash
	StopSharing(root p2p.Hash)
	ModelLastServed(root p2p.Hash) (last time.Time, shared bool)
	FetchModel(ctx context.Context, root p2p.Hash, dst string, opts p2p.FetchModelOptions) (*p2p.Manifest, error)
}

var _ network = (*p2p.Node)(nil)
