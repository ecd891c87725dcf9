package p2p

import (
	"bytes"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func testKey(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, id
}

func signedAnnouncement(t *testing.T, key crypto.PrivKey, id peer.ID, run Hash) Announcement {
	t.Helper()
	a := Announcement{Step: 42, Batch: BatchID{100, 131}, Hash: HashOf([]byte("payload")), Size: 7, Signer: id}
	sig, err := sign(key, run, a.body())
	if err != nil {
		t.Fatal(err)
	}
	a.Signature = sig
	return a
}

func TestMessagesRoundTripAndVerify(t *testing.T) {
	key, id := testKey(t)
	run := RunKey("wire")
	a := signedAnnouncement(t, key, id, run)
	gotA, gotF, err := decodeMessage(encodeAnnouncement(&a))
	if err != nil || gotF != nil {
		t.Fatalf("decode announcement: %v", err)
	}
	if gotA.Step != a.Step || gotA.Batch != a.Batch || gotA.Hash != a.Hash || gotA.Size != a.Size || gotA.Signer != id {
		t.Fatalf("round trip changed the announcement: %+v", gotA)
	}
	if err := gotA.Verify(run); err != nil {
		t.Fatalf("verify: %v", err)
	}

	f := Finished{Step: 9, Warmup: true, Digest: HashOf([]byte("seen")), Signer: id}
	if f.Signature, err = sign(key, run, f.body()); err != nil {
		t.Fatal(err)
	}
	gotA, gotF, err = decodeMessage(encodeFinished(&f))
	if err != nil || gotA != nil {
		t.Fatalf("decode finished: %v", err)
	}
	if gotF.Step != f.Step || gotF.Warmup != f.Warmup || gotF.Digest != f.Digest || gotF.Signer != f.Signer {
		t.Fatalf("round trip changed the finished message: %+v", gotF)
	}
	if err := gotF.Verify(run); err != nil {
		t.Fatalf("verify finished: %v", err)
	}
}

func TestTamperedOrReplayedMessagesFailVerification(t *testing.T) {
	key, id := testKey(t)
	_, other := testKey(t)
	run := RunKey("wire")
	tests := []struct {
		name   string
		mutate func(a *Announcement) Hash
	}{
		{"other run", func(a *Announcement) Hash { return RunKey("another run") }},
		{"step", func(a *Announcement) Hash { a.Step++; return run }},
		{"batch", func(a *Announcement) Hash { a.Batch.End++; return run }},
		{"hash", func(a *Announcement) Hash { a.Hash[0] ^= 1; return run }},
		{"size", func(a *Announcement) Hash { a.Size++; return run }},
		{"signer", func(a *Announcement) Hash { a.Signer = other; return run }},
		{"signature", func(a *Announcement) Hash { a.Signature[0] ^= 1; return run }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := signedAnnouncement(t, key, id, run)
			verifyWith := tc.mutate(&a)
			if err := a.Verify(verifyWith); err == nil {
				t.Error("verified a tampered announcement")
			}
		})
	}
}

func TestMalformedMessagesAreRejected(t *testing.T) {
	key, id := testKey(t)
	good := encodeAnnouncement(new(signedAnnouncement(t, key, id, RunKey("wire"))))
	inverted := Announcement{Batch: BatchID{5, 4}, Signer: id}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{wireVersion}},
		{"unknown version", append([]byte{7}, good[1:]...)},
		{"unknown kind", append([]byte{wireVersion, 9}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(bytes.Clone(good), 0)},
		{"oversized", make([]byte, MaxGossipMessageSize+1)},
		{"inverted batch", encodeAnnouncement(&inverted)},
		{"bad warmup flag", append([]byte{wireVersion, kindFinished, 0, 0, 0, 0, 0, 0, 0, 1, 2}, make([]byte, 34)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeMessage(tc.data); err == nil {
				t.Error("decoded a malformed message")
			}
		})
	}
}

// FuzzDecodeMessage checks that no input makes the decoder panic, and that
// whatever decodes re-encodes to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	key, _, _ := crypto.GenerateEd25519Key(nil)
	id, _ := peer.IDFromPrivateKey(key)
	a := Announcement{Step: 1, Batch: BatchID{1, 2}, Size: 3, Signer: id, Signature: make([]byte, 64)}
	fin := Finished{Step: 2, Signer: id, Signature: make([]byte, 64)}
	f.Add(encodeAnnouncement(&a))
	f.Add(encodeFinished(&fin))
	f.Add([]byte{wireVersion, kindAnnouncement, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, fin, err := decodeMessage(data)
		if err != nil {
			return
		}
		var again []byte
		if a != nil {
			again = encodeAnnouncement(a)
		} else {
			again = encodeFinished(fin)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decode/encode changed %x to %x", data, again)
		}
	})
}

// FuzzUnmarshalManifest checks that no input makes the manifest decoder panic.
func FuzzUnmarshalManifest(f *testing.F) {
	m, _ := BuildManifest(bytes.NewReader(make([]byte, 100)), 100, 30)
	f.Add(m.Marshal())
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := UnmarshalManifest(data)
		if err == nil && !bytes.Equal(m.Marshal(), data) {
			t.Fatalf("manifest changed on re-encoding")
		}
	})
}
