package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

type storedBlob struct {
	data []byte
	step uint64
}

// Publish stores payload, serves it to participants by hash, and gossips a
// signed announcement of it.
func (n *Node) Publish(ctx context.Context, step uint64, batch BatchID, payload []byte) (Announcement, error) {
	hash, err := n.Serve(step, payload)
	if err != nil {
		return Announcement{}, fmt.Errorf("publish: %w", err)
	}
	return n.Announce(ctx, Announcement{Step: step, Batch: batch, Hash: hash, Size: uint64(len(payload))})
}

// Serve stores data and serves it to participants by its hash without
// announcing it: for blobs a peer asks for by a hash it learnt elsewhere
// (a trainer's replay state, committed on chain). It is pruned with the
// payloads of step.
func (n *Node) Serve(step uint64, data []byte) (Hash, error) {
	if uint64(len(data)) > n.cfg.MaxBlobSize {
		return Hash{}, fmt.Errorf("serve: blob of %d bytes exceeds the %d-byte blob limit", len(data), n.cfg.MaxBlobSize)
	}
	hash := HashOf(data)
	n.mu.Lock()
	n.blobs[hash] = storedBlob{data: data, step: step}
	n.mu.Unlock()
	return hash, nil
}

// FetchFrom downloads the blob hashing to hash, at most max bytes (at most
// the node's blob limit), from p, trying FetchRounds times. A peer that
// serves other bytes is banned. The returned slice may be shared with the
// node's store and must not be modified.
func (n *Node) FetchFrom(ctx context.Context, p peer.ID, hash Hash, max uint64) ([]byte, error) {
	max = min(max, n.cfg.MaxBlobSize)
	n.mu.RLock()
	local, ok := n.blobs[hash]
	n.mu.RUnlock()
	if ok && p == n.host.ID() {
		return local.data, nil
	}
	var lastErr error
	for round := range n.cfg.FetchRounds {
		if round > 0 {
			if err := sleep(ctx, time.Duration(round)*250*time.Millisecond); err != nil {
				return nil, fmt.Errorf("fetch blob %s from %s: %w", hash, p, err)
			}
		}
		data, err := n.requestBlob(ctx, p, hash, 0, max)
		if err == nil {
			return data, nil
		}
		n.stats.fetchFailures.Add(1)
		lastErr = err
		if errors.Is(err, errBadData) {
			n.Ban(p, err.Error())
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("fetch blob %s from %s: %w", hash, p, lastErr)
}

// PruneBefore forgets stored blobs and announcements of steps before step, so
// memory stays bounded over a long run.
func (n *Node) PruneBefore(step uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for h, b := range n.blobs {
		if b.step < step {
			delete(n.blobs, h)
		}
	}
	for h, provs := range n.providers {
		for p, s := range provs {
			if s < step {
				delete(provs, p)
			}
		}
		if len(provs) == 0 {
			delete(n.providers, h)
		}
	}
}

// addProvider records that a's signer serves a.Hash.
func (n *Node) addProvider(a *Announcement) {
	n.mu.Lock()
	defer n.mu.Unlock()
	provs, ok := n.providers[a.Hash]
	if !ok {
		provs = map[peer.ID]uint64{}
		n.providers[a.Hash] = provs
	}
	provs[a.Signer] = a.Step
}

// providersFor orders the peers to ask for a's payload: its signer first, then
// every other participant that announced the same hash, in random order so
// that load spreads.
func (n *Node) providersFor(a *Announcement) []peer.ID {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var others []peer.ID
	for p := range n.providers[a.Hash] {
		if p != a.Signer {
			others = append(others, p)
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	all := append([]peer.ID{a.Signer}, others...)
	out := all[:0]
	for _, p := range all {
		_, part := n.participants[p]
		_, banned := n.bans[p]
		if part && !banned && p != n.host.ID() {
			out = append(out, p)
		}
	}
	return out
}

// FetchBlob returns the payload that a announces, downloaded from a peer that
// announced its hash and verified against the signed hash and size before it
// is returned. A peer that serves other bytes is banned and the next one is
// tried; the providers are walked up to FetchRounds times. The returned slice
// may be shared with the node's store and must not be modified.
func (n *Node) FetchBlob(ctx context.Context, a Announcement) ([]byte, error) {
	if err := a.Verify(n.runKey); err != nil {
		return nil, fmt.Errorf("fetch blob: %w", err)
	}
	if a.Size > n.cfg.MaxBlobSize {
		return nil, fmt.Errorf("fetch blob: announced size %d exceeds the %d-byte limit", a.Size, n.cfg.MaxBlobSize)
	}
	n.mu.RLock()
	local, ok := n.blobs[a.Hash]
	n.mu.RUnlock()
	if ok {
		return local.data, nil
	}
	lastErr := errors.New("no participant announced it")
	for round := range n.cfg.FetchRounds {
		if round > 0 {
			// Back off so that busy or reconnecting peers get a chance.
			if err := sleep(ctx, time.Duration(round)*250*time.Millisecond); err != nil {
				return nil, fmt.Errorf("fetch blob %s: %w", a.Hash, err)
			}
		}
		for _, p := range n.providersFor(&a) {
			data, err := n.fetchBlobFrom(ctx, p, &a)
			if err == nil {
				return data, nil
			}
			n.stats.fetchFailures.Add(1)
			lastErr = err
			if errors.Is(err, errBadData) {
				n.Ban(p, err.Error())
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("fetch blob %s: %w", a.Hash, ctx.Err())
			}
			n.log.Debug("blob fetch attempt failed", "hash", a.Hash, "peer", p, "err", err)
		}
	}
	return nil, fmt.Errorf("fetch blob %s of step %d: %w", a.Hash, a.Step, lastErr)
}

func (n *Node) fetchBlobFrom(ctx context.Context, p peer.ID, a *Announcement) ([]byte, error) {
	return n.requestBlob(ctx, p, a.Hash, a.Size, n.cfg.MaxBlobSize)
}

// requestBlob asks p for the blob hashing to hash: exactly want bytes, or
// when want is 0 at most max.
func (n *Node) requestBlob(ctx context.Context, p peer.ID, hash Hash, want, max uint64) ([]byte, error) {
	data, err := n.request(ctx, p, n.blobProtocol(), hash[:], want, max)
	if err != nil {
		return nil, err
	}
	if got := HashOf(data); got != hash {
		return nil, fmt.Errorf("%w: %s sent a blob hashing to %s, asked for %s", errBadData, p, got, hash)
	}
	n.stats.blobsFetched.Add(1)
	n.stats.blobBytesFetched.Add(uint64(len(data)))
	return data, nil
}

func (n *Node) serveBlob(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(n.cfg.RequestTimeout))
	release, ok := n.admit(s)
	if !ok {
		return
	}
	defer release()
	var h Hash
	if _, err := io.ReadFull(s, h[:]); err != nil {
		_ = writeResponse(s, statusBadReq, nil)
		return
	}
	n.mu.RLock()
	b, ok := n.blobs[h]
	n.mu.RUnlock()
	if !ok {
		_ = writeResponse(s, statusNotFound, nil)
		return
	}
	if err := writeResponse(s, statusOK, b.data); err != nil {
		n.log.Debug("serve blob", "peer", s.Conn().RemotePeer(), "err", err)
		return
	}
	n.stats.blobsServed.Add(1)
	n.stats.blobBytesServed.Add(uint64(len(b.data)))
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
