package p2p

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Response status of the blob and model protocols. Every response is one
// status byte, then for statusOK a big-endian u64 length and the payload.
// Each refusal has its own status so that the requester's error says why.
const (
	statusOK             = 0
	statusNotFound       = 1 // blob protocol: we do not store that payload
	statusNotParticipant = 2 // the requester is not in our participant set
	statusBusy           = 3 // the requester has too many requests in flight with us
	statusBadReq         = 4
	statusBanned         = 5 // we banned the requester
	statusUnknownRoot    = 6 // model protocol: we never shared that root
	statusNotShared      = 7 // model protocol: we shared that root but stopped
	statusReadFailed     = 8 // model protocol: we could not read what we share
)

var (
	// errBadData marks a peer that served bytes failing verification; such a
	// peer is banned.
	errBadData = errors.New("peer served bad data")
	// errUnavailable marks a peer that answered but cannot serve this now.
	errUnavailable = errors.New("peer cannot serve the request")
	// errGated ends a connection that the peer's gater refused or its Ban
	// closed: either way, the peer banned us.
	errGated = &network.ConnError{Remote: true, ErrorCode: network.ConnGated}
)

// Reasons a peer gives for refusing a request. Errors carrying them also
// match errUnavailable, so they are retried elsewhere like any refusal.
var (
	ErrNotParticipant = errors.New("not a participant of the run as that peer sees it (is our join registered on chain?)")
	ErrBanned         = errors.New("banned by that peer")
	ErrUnknownRoot    = errors.New("unknown model root (that peer never shared it)")
	ErrNotShared      = errors.New("model no longer shared by that peer")
)

func statusError(status byte) error {
	switch status {
	case statusNotFound:
		return fmt.Errorf("%w: payload not found (pruned or never published)", errUnavailable)
	case statusNotParticipant:
		return fmt.Errorf("%w: %w", errUnavailable, ErrNotParticipant)
	case statusBusy:
		return fmt.Errorf("%w: busy", errUnavailable)
	case statusBadReq:
		return fmt.Errorf("%w: it rejected our request as malformed", errUnavailable)
	case statusBanned:
		return fmt.Errorf("%w: %w", errUnavailable, ErrBanned)
	case statusUnknownRoot:
		return fmt.Errorf("%w: %w", errUnavailable, ErrUnknownRoot)
	case statusNotShared:
		return fmt.Errorf("%w: %w", errUnavailable, ErrNotShared)
	case statusReadFailed:
		return fmt.Errorf("%w: it failed to read the model it shares", errUnavailable)
	default:
		return fmt.Errorf("%w: unknown status %d", errBadData, status)
	}
}

// connFailure marks an error of a connection that the peer closed because it
// banned us, which ends our requests in flight before it can answer them.
func connFailure(err error) error {
	if errors.Is(err, errGated) {
		return fmt.Errorf("%w: %w: %w", errUnavailable, ErrBanned, err)
	}
	return err
}

// writeResponse writes a status and, for statusOK, the payload.
func writeResponse(w io.Writer, status byte, payload []byte) error {
	hdr := []byte{status}
	if status == statusOK {
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(payload)))
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if status != statusOK {
		return nil
	}
	_, err := w.Write(payload)
	return err
}

// request sends req on a new stream to p and reads a payload of exactly want
// bytes (or, when want is 0, at most max bytes). The caller verifies content.
func (n *Node) request(ctx context.Context, p peer.ID, proto protocol.ID, req []byte, want, max uint64) ([]byte, error) {
	release, err := n.downloadSlot(ctx, p)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	// Limited (relayed) connections are not used: relays cap the bytes they
	// carry, so data waits for the direct connection hole punching makes.
	// Dialling apart from opening the stream tells an unreachable peer from
	// one that drops the connection as soon as it is made, which is how a
	// peer's gater treats a peer it banned: that peer never hears why.
	if err := n.host.Connect(ctx, peer.AddrInfo{ID: p}); err != nil {
		n.countFailure(p)
		return nil, fmt.Errorf("open stream to %s: %w", p, err)
	}
	s, err := n.host.NewStream(ctx, p, proto)
	if err != nil {
		n.countFailure(p)
		// The peer's close code says it too, when the close is not yet
		// seen here (a loaded machine).
		gated := errors.Is(err, &network.ConnError{Remote: true, ErrorCode: network.ConnGated})
		if ctx.Err() == nil && (gated || n.host.Network().Connectedness(p) != network.Connected) {
			err = fmt.Errorf("%w (it dropped the connection as soon as we made it: has it banned us?)", err)
		}
		return nil, fmt.Errorf("open stream to %s: %w", p, err)
	}
	defer s.Close()
	// The deadline, not just ctx, bounds reads from a peer that stalls.
	if deadline, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	// A peer that answers before reading all of the request (a refusal) and
	// closes its stream stops our sending side, so the write or CloseWrite
	// fails although the answer is there to read: the answer decides.
	_, sendErr := s.Write(req)
	if sendErr == nil {
		sendErr = s.CloseWrite()
	}
	var hdr [9]byte
	if _, err := io.ReadFull(s, hdr[:1]); err != nil {
		n.countFailure(p)
		if sendErr != nil {
			return nil, fmt.Errorf("send request to %s: %w", p, connFailure(sendErr))
		}
		return nil, fmt.Errorf("read response from %s: %w", p, connFailure(err))
	}
	if hdr[0] != statusOK {
		return nil, fmt.Errorf("%s: %w", p, statusError(hdr[0]))
	}
	if _, err := io.ReadFull(s, hdr[1:]); err != nil {
		n.countFailure(p)
		return nil, fmt.Errorf("read response from %s: %w", p, connFailure(err))
	}
	size := binary.BigEndian.Uint64(hdr[1:])
	if (want != 0 && size != want) || size > max {
		return nil, fmt.Errorf("%w: %s sent %d bytes, expected %d (limit %d)", errBadData, p, size, want, max)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(s, buf); err != nil {
		n.countFailure(p)
		return nil, fmt.Errorf("read %d-byte payload from %s: %w", size, p, connFailure(err))
	}
	return buf, nil
}

// downloadSlot waits for one of the MaxConcurrentDownloads slots for peer p.
func (n *Node) downloadSlot(ctx context.Context, p peer.ID) (func(), error) {
	n.mu.Lock()
	sem, ok := n.downloads[p]
	if !ok {
		sem = make(chan struct{}, n.cfg.MaxConcurrentDownloads)
		n.downloads[p] = sem
	}
	n.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a download slot to %s: %w", p, ctx.Err())
	}
}

// uploadSlot takes one of the MaxUploadsPerPeer slots for p without waiting.
func (n *Node) uploadSlot(p peer.ID) (func(), bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.uploads[p] >= n.cfg.MaxUploadsPerPeer {
		return nil, false
	}
	n.uploads[p]++
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.uploads[p]--; n.uploads[p] == 0 {
			delete(n.uploads, p)
		}
	}, true
}

// admit checks that the requester of s may be served now; if not it answers
// and returns false. release must be called when the request is done.
func (n *Node) admit(s network.Stream) (release func(), ok bool) {
	remote := s.Conn().RemotePeer()
	if status := n.refusal(remote); status != statusOK {
		n.stats.refused.Add(1)
		_ = writeResponse(s, status, nil)
		return nil, false
	}
	release, ok = n.uploadSlot(remote)
	if !ok {
		n.stats.busy.Add(1)
		_ = writeResponse(s, statusBusy, nil)
		return nil, false
	}
	return release, true
}

// refusal is the status answering a request from id that may not be served,
// or statusOK when it may: the one check of bans and participants, which
// allowed and the gossip score use too.
func (n *Node) refusal(id peer.ID) byte {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if _, banned := n.bans[id]; banned {
		return statusBanned
	}
	if _, ok := n.participants[id]; !ok {
		return statusNotParticipant
	}
	return statusOK
}
