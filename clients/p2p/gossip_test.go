package p2p

import (
	"context"
	"errors"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestEveryAnnouncementReachesEveryPeer(t *testing.T) {
	nodes := startRun(t, "gossip-run", 5)
	ctx := context.Background()
	sent := map[peer.ID]Announcement{}
	for i, n := range nodes {
		a, err := n.Announce(ctx, Announcement{Step: 7, Batch: BatchID{uint64(i * 10), uint64(i*10 + 9)}, Hash: HashOf([]byte{byte(i)}), Size: 1})
		if err != nil {
			t.Fatalf("announce: %v", err)
		}
		sent[n.ID()] = a
		if _, err := n.Finish(ctx, Finished{Step: 7, Digest: HashOf([]byte("seen"))}); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
	for _, n := range nodes {
		got := collect(t, n, 20*time.Second, func(ms []Message) bool { return len(ms) >= 2*len(nodes) })
		anns, fins := map[peer.ID]bool{}, map[peer.ID]bool{}
		for _, m := range got {
			switch {
			case m.Announcement != nil:
				want := sent[m.From]
				a := m.Announcement
				if a.Signer != m.From || a.Step != want.Step || a.Batch != want.Batch || a.Hash != want.Hash || a.Size != want.Size {
					t.Errorf("node %s got announcement %+v from %s, sent %+v", n.ID(), a, m.From, want)
				}
				anns[m.From] = true
			case m.Finished != nil:
				if m.Finished.Step != 7 || m.Finished.Signer != m.From {
					t.Errorf("node %s got finished %+v from %s", n.ID(), m.Finished, m.From)
				}
				fins[m.From] = true
			}
		}
		if len(anns) != len(nodes) || len(fins) != len(nodes) {
			t.Errorf("node %s heard announcements from %d and finished from %d of %d peers", n.ID(), len(anns), len(fins), len(nodes))
		}
	}
}

func TestNonParticipantIsIgnoredAndScoredDown(t *testing.T) {
	dir := t.TempDir()
	var participants []*Node
	for range 4 {
		participants = append(participants, startNode(t, testConfig(t, "closed-run", dir)))
	}
	outsider := startNode(t, testConfig(t, "closed-run", dir))
	setParticipants(participants, participants)
	// The outsider believes it belongs, so it dials the participants and gossips.
	setParticipants([]*Node{outsider}, append(participants[:4:4], outsider))
	waitMeshed(t, participants)
	waitFor(t, 20*time.Second, "outsider connected to every participant", func() bool {
		return len(outsider.ConnectedParticipants()) == len(participants)
	})
	ctx := context.Background()
	if _, err := outsider.Announce(ctx, Announcement{Step: 1, Hash: HashOf([]byte("forged")), Size: 6}); err != nil {
		t.Fatalf("outsider announce: %v", err)
	}
	if _, err := outsider.Publish(ctx, 1, BatchID{}, []byte("payload")); err != nil {
		t.Fatalf("outsider publish: %v", err)
	}
	// A participant's message sent afterwards marks how long to listen.
	marker, err := participants[0].Finish(ctx, Finished{Step: 1})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	for _, n := range participants {
		got := collect(t, n, 20*time.Second, func(ms []Message) bool {
			return len(ms) > 0 && ms[len(ms)-1].Finished != nil && ms[len(ms)-1].From == marker.Signer
		})
		time.Sleep(200 * time.Millisecond)
	drain:
		for {
			select {
			case m := <-n.Messages():
				got = append(got, m)
			default:
				break drain
			}
		}
		for _, m := range got {
			if m.From == outsider.ID() {
				t.Errorf("participant %s delivered a message from the outsider", n.ID())
			}
		}
	}
	// Participants score the outsider below zero and refuse to serve it.
	waitFor(t, 10*time.Second, "outsider scored down", func() bool {
		for _, n := range participants {
			if score := peerSnapshot(n, outsider.ID()).GossipScore; score >= 0 {
				return false
			}
		}
		return true
	})
	blob, err := participants[1].Publish(ctx, 2, BatchID{}, []byte("participants only"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	outsider.addProvider(&blob)
	if _, err := outsider.FetchBlob(ctx, blob); !errors.Is(err, ErrNotParticipant) {
		t.Fatalf("a non-participant's blob fetch got %v, want ErrNotParticipant", err)
	}
	if refused := participants[1].Snapshot().Refused; refused == 0 {
		t.Error("the participant did not count a refused request")
	}
}

func peerSnapshot(n *Node, id peer.ID) PeerSnapshot {
	for _, p := range n.Snapshot().Peers {
		if p.ID == id {
			return p
		}
	}
	return PeerSnapshot{}
}

// TestValidatorDecisions drives the gossip validator directly with messages
// as gossipsub would hand them over: author, forwarder and payload.
func TestValidatorDecisions(t *testing.T) {
	n := startNode(t, testConfig(t, "validator-run", ""))
	partKey, part := testKey(t)
	outKey, outsider := testKey(t)
	bannedKey, banned := testKey(t)
	n.SetParticipants([]peer.ID{part, banned})
	n.Ban(banned, "test")

	announce := func(key crypto.PrivKey, signer peer.ID, size uint64) []byte {
		a := Announcement{Step: 1, Hash: HashOf([]byte("p")), Size: size, Signer: signer}
		sig, err := sign(key, n.runKey, a.body())
		if err != nil {
			t.Fatal(err)
		}
		a.Signature = sig
		return encodeAnnouncement(&a)
	}
	tampered := announce(partKey, part, 1)
	tampered[5] ^= 1
	tests := []struct {
		name          string
		author, from  peer.ID
		data          []byte
		want          pubsub.ValidationResult
		wantDelivered bool
	}{
		{"participant's own message", part, part, announce(partKey, part, 1), pubsub.ValidationAccept, true},
		{"forwarded participant message", part, n.ID(), announce(partKey, part, 1), pubsub.ValidationAccept, true},
		{"malformed", part, part, []byte{1, 2, 3}, pubsub.ValidationReject, false},
		{"tampered", part, part, tampered, pubsub.ValidationReject, false},
		{"signer is not the author", outsider, outsider, announce(partKey, part, 1), pubsub.ValidationReject, false},
		{"oversized announcement", part, part, announce(partKey, part, DefaultMaxBlobSize+1), pubsub.ValidationReject, false},
		{"non-participant sends its own", outsider, outsider, announce(outKey, outsider, 1), pubsub.ValidationReject, false},
		{"participant forwards a non-participant's", outsider, part, announce(outKey, outsider, 1), pubsub.ValidationIgnore, false},
		{"banned participant", banned, banned, announce(bannedKey, banned, 1), pubsub.ValidationReject, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := &pubsub.Message{Message: &pb.Message{From: []byte(tc.author), Data: tc.data}}
			if got := n.validate(context.Background(), tc.from, msg); got != tc.want {
				t.Errorf("validate = %v, want %v", got, tc.want)
			}
			_, delivered := msg.ValidatorData.(Message)
			if delivered != tc.wantDelivered {
				t.Errorf("message prepared for delivery: %v, want %v", delivered, tc.wantDelivered)
			}
		})
	}
}
