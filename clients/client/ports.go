package client

// The narrow interfaces in front of the p2p node and the trainer (the
// chain's is in chain.go, the data provider's is provider.Provider).

import (
	"context"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/trainer"
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
	Serve(step uint64, data []byte) (p2p.Hash, error)
	FetchFrom(ctx context.Context, p peer.ID, hash p2p.Hash, max uint64) ([]byte, error)
	PruneBefore(step uint64)

	Finish(ctx context.Context, f p2p.Finished) (p2p.Finished, error)
	ShareModel(m *p2p.Manifest, src io.ReaderAt) p2p.Hash
	StopSharing(root p2p.Hash)
	ModelLastServed(root p2p.Hash) (last time.Time, shared bool)
	FetchModel(ctx context.Context, root p2p.Hash, dst string, opts p2p.FetchModelOptions) (*p2p.Manifest, error)
}

var _ network = (*p2p.Node)(nil)

// replica is what the client needs of its trainer (clients/trainer.Trainer):
// training, the payload exchange (DeMo or SparseLoCo), the weights, and
// checkpoints.
type replica interface {
	Trainer // computing contributions (train.go)
	ZeroStep() error
	Eval(ctx context.Context, tokens, targets []int32, seqLen int) (float32, error)
	ValidatePayload(hp trainer.DeMo, p []byte) error
	DeMoApply(hp trainer.DeMo, payloads [][]byte) error
	LoCoValidate(hp trainer.SparseLoCo, p []byte) error
	LoCoApply(hp trainer.SparseLoCo, payloads [][]byte) error
	Params() ([]float32, error)
	SetParams(p []float32) error
	NumParams() int
	SaveCheckpoint(path string, meta map[string]string) error
	LoadCheckpoint(path string) error
	SaveModel(path string, meta map[string]string) error
	LoadHF(path string) error
	Config() trainer.Config
	ReplayState() ([]byte, error)
	ResetOptimizer() error
	Backend() string
	Close() error
}

var _ replica = (*trainer.Trainer)(nil)
