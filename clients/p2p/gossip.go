package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Message is one validated gossip message: exactly one of Announcement and
// Finished is set, and its signer is a participant and the message's author.
type Message struct {
	From         peer.ID
	Announcement *Announcement
	Finished     *Finished
	Received     time.Time
}

// Gossip scoring. Non-participants get an application score below the
// graylist threshold, so gossipsub ignores everything they send once they are
// known; each rejected message costs its forwarder a further penalty.
const (
	scoreNonParticipant  = -100
	scoreBanned          = -1000
	scoreGossipThreshold = -10
	scorePublish         = -20
	scoreGraylist        = -50
	scoreInvalidMessage  = -20
	scoreInspectPeriod   = time.Second
)

// Topic is the gossip topic of a run: derived from the run ID so that clients
// agree on it without configuration.
func Topic(runID string) string { return "/psyche/run/" + runTag(runID) + "/gossip/1" }

func (n *Node) startGossip() error {
	topic := Topic(n.cfg.RunID)
	params := &pubsub.PeerScoreParams{
		SkipAtomicValidation: true,
		Topics: map[string]*pubsub.TopicScoreParams{topic: {
			SkipAtomicValidation: true,
			TopicWeight:          1,
			// Time in the mesh earns a little, capped well below the penalties;
			// the quantum must be set for the score to be computable at all.
			TimeInMeshWeight:               0.01,
			TimeInMeshQuantum:              time.Second,
			TimeInMeshCap:                  100,
			InvalidMessageDeliveriesWeight: scoreInvalidMessage,
			InvalidMessageDeliveriesDecay:  0.9,
		}},
		AppSpecificScore:  n.gossipScore,
		AppSpecificWeight: 1,
		DecayInterval:     time.Second,
		DecayToZero:       0.01,
		// Keep a disconnected peer's penalties so reconnecting does not clear them.
		RetainScore: time.Hour,
	}
	thresholds := &pubsub.PeerScoreThresholds{
		SkipAtomicValidation: true,
		GossipThreshold:      scoreGossipThreshold,
		PublishThreshold:     scorePublish,
		GraylistThreshold:    scoreGraylist,
	}
	ps, err := pubsub.NewGossipSub(n.ctx, n.host,
		pubsub.WithPeerScore(params, thresholds),
		pubsub.WithPeerScoreInspect(n.recordScores, scoreInspectPeriod),
		// The publisher sends each message straight to every participant it is
		// connected to, not only to its mesh: announcements gate the next step,
		// so latency matters more than duplicate copies, and a fresh node's mesh
		// is empty until its first heartbeat.
		pubsub.WithFloodPublish(true),
		// Ours are tiny; the bound leaves room for batched control messages.
		pubsub.WithMaxMessageSize(64<<10),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithLogger(n.log.With("component", "gossipsub")),
	)
	if err != nil {
		return fmt.Errorf("start gossipsub: %w", err)
	}
	if err := ps.RegisterTopicValidator(topic, pubsub.ValidatorEx(n.validate)); err != nil {
		return fmt.Errorf("register gossip validator: %w", err)
	}
	t, err := ps.Join(topic)
	if err != nil {
		return fmt.Errorf("join gossip topic: %w", err)
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(messageBuffer))
	if err != nil {
		return fmt.Errorf("subscribe to gossip topic: %w", err)
	}
	n.topic, n.sub = t, sub
	n.wg.Add(1)
	go n.receive()
	return nil
}

func (n *Node) gossipScore(p peer.ID) float64 {
	switch n.refusal(p) {
	case statusBanned:
		return scoreBanned
	case statusNotParticipant:
		return scoreNonParticipant
	}
	return 0
}

func (n *Node) recordScores(scores map[peer.ID]float64) {
	n.mu.Lock()
	n.stats.scores = scores
	n.mu.Unlock()
}

// validate decides on every gossip message before it is delivered or
// forwarded. from is the peer that handed it to us, not necessarily its author.
func (n *Node) validate(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	n.stats.gossipIn.Add(1)
	author := msg.GetFrom()
	ann, fin, err := decodeMessage(msg.GetData())
	if err != nil {
		n.stats.gossipRejected.Add(1)
		n.log.Debug("dropped malformed gossip", "from", from, "err", err)
		return pubsub.ValidationReject
	}
	var signer peer.ID
	if ann != nil {
		signer, err = ann.Signer, ann.Verify(n.runKey)
		if err == nil && ann.Size > n.cfg.MaxBlobSize {
			err = fmt.Errorf("announced size %d exceeds the %d limit", ann.Size, n.cfg.MaxBlobSize)
		}
	} else {
		signer, err = fin.Signer, fin.Verify(n.runKey)
	}
	if err == nil && signer != author {
		err = fmt.Errorf("signer %s is not the author %s", signer, author)
	}
	if err != nil {
		n.stats.gossipRejected.Add(1)
		n.log.Debug("dropped invalid gossip", "from", from, "err", err)
		return pubsub.ValidationReject
	}
	if !n.allowed(author) {
		n.stats.gossipRejected.Add(1)
		// A participant may forward a message whose author it still counts
		// while our participant list has already moved on: ignore without
		// penalising it. The author sending it itself is penalised.
		if from != author && n.allowed(from) {
			return pubsub.ValidationIgnore
		}
		return pubsub.ValidationReject
	}
	msg.ValidatorData = Message{From: author, Announcement: ann, Finished: fin}
	return pubsub.ValidationAccept
}

func (n *Node) receive() {
	defer n.wg.Done()
	for {
		msg, err := n.sub.Next(n.ctx)
		if err != nil {
			return
		}
		m, ok := msg.ValidatorData.(Message)
		if !ok {
			continue
		}
		m.Received = time.Now()
		if m.Announcement != nil {
			n.addProvider(m.Announcement)
		}
		n.stats.gossipDelivered.Add(1)
		select {
		case n.msgs <- m:
		case <-n.ctx.Done():
			return
		}
	}
}

// Messages delivers validated gossip, this node's own messages included, in
// arrival order. It is closed when the node closes. A caller that stops
// reading makes gossipsub drop messages for it once its buffers fill.
func (n *Node) Messages() <-chan Message { return n.msgs }

// TopicPeers lists the peers we exchange gossip with on the run's topic.
func (n *Node) TopicPeers() []peer.ID { return n.topic.ListPeers() }

// Announce signs and gossips an announcement of a payload this node serves;
// Step, Batch, Hash and Size must be set.
func (n *Node) Announce(ctx context.Context, a Announcement) (Announcement, error) {
	if a.Batch.End < a.Batch.Start {
		return a, fmt.Errorf("announce: batch %d..%d is inverted", a.Batch.Start, a.Batch.End)
	}
	if a.Size > n.cfg.MaxBlobSize {
		return a, fmt.Errorf("announce: size %d exceeds the %d-byte blob limit", a.Size, n.cfg.MaxBlobSize)
	}
	a.Signer = n.host.ID()
	sig, err := sign(n.key, n.runKey, a.body())
	if err != nil {
		return a, err
	}
	a.Signature = sig
	if err := n.publish(ctx, encodeAnnouncement(&a)); err != nil {
		return a, err
	}
	return a, nil
}

// Finish signs and gossips a Finished message for a step.
func (n *Node) Finish(ctx context.Context, f Finished) (Finished, error) {
	f.Signer = n.host.ID()
	sig, err := sign(n.key, n.runKey, f.body())
	if err != nil {
		return f, err
	}
	f.Signature = sig
	if err := n.publish(ctx, encodeFinished(&f)); err != nil {
		return f, err
	}
	return f, nil
}

func (n *Node) publish(ctx context.Context, data []byte) error {
	if n.closed.Load() {
		return errors.New("publish: p2p node is closed")
	}
	if err := n.topic.Publish(ctx, data); err != nil {
		return fmt.Errorf("publish gossip: %w", err)
	}
	n.stats.gossipPublished.Add(1)
	return nil
}
