package client

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
	"github.com/psyche-go/psyche/clients/trainer"
)

func TestModelWanted(t *testing.T) {
	s := testState(t, 3)
	startRound(s, 5, 0)
	for i := range 3 {
		s.Epoch.Clients[i].WarmupWitnessed = 1
	}
	if modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
		t.Error("wanted while rounds run with every member ready and nobody pending")
	}
	s.Epoch.Clients[1].WarmupWitnessed = 0
	if !modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
		t.Error("not wanted with a member that never reported ready")
	}
	s.Epoch.Clients[1].WarmupWitnessed = 1
	s.Clients[7].Occupied, s.Clients[7].Pending = 1, 1
	if !modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
		t.Error("not wanted with a registered client pending")
	}
	s.Clients[7].Pending = 0
	s.Clients[0].Pending = 1 // a member joined for the next epoch holds the model
	if modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
		t.Error("wanted because a member joined for the next epoch")
	}
	for _, phase := range []coordinator.RunState{coordinator.WaitingForMembers, coordinator.Warmup, coordinator.Cooldown} {
		s.RunState = uint8(phase)
		if !modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
			t.Errorf("not wanted in %s", phase)
		}
	}
	s.RunState = uint8(coordinator.Finished)
	if modelWanted(coordinator.NewView(s, solana.PublicKey{}, time.Time{})) {
		t.Error("wanted once Finished")
	}
}

// Superseded models stay shared for shareLinger after they were last
// served; beyond maxShared files, those idle for shareEvery go first.
func TestShareRetention(t *testing.T) {
	e := testEngine()
	e.model = modelReady
	s := testState(t, 3)
	s.RunState = uint8(coordinator.Cooldown) // the model is wanted
	now := time.Unix(1000, 0)
	share := func() (gone []uint32) {
		var acts []action
		e.share(view(e, s), noInputs(), now, e.lastStep, func(a action) { acts = append(acts, a) })
		for _, a := range acts {
			switch a := a.(type) {
			case shareModelAction:
				// What the client does: the previous model is superseded now.
				if n := len(e.shared); n > 0 {
					e.shared[n-1].superseded = now
				}
				e.shared = append(e.shared, &sharedModel{step: a.step, root: p2p.Hash{byte(a.step)}, announce: now})
			case unshareAction:
				gone = append(gone, a.model.step)
			}
		}
		return gone
	}
	steps := func() []uint32 {
		var out []uint32
		for _, m := range e.shared {
			out = append(out, m.step)
		}
		return out
	}
	for step := uint32(1); step <= 6; step++ {
		e.lastStep = step
		share()
	}
	if got := steps(); !slices.Equal(got, []uint32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("shared %v right after each step; none may go before it was idle a while", got)
	}
	// 6 files, 2 over the bound: the two idle longest go, a third idle one stays.
	now = now.Add(3 * time.Second)
	for _, m := range e.shared[3:5] {
		m.superseded = now
	}
	if gone := share(); !slices.Equal(gone, []uint32{1, 2}) || !slices.Equal(steps(), []uint32{3, 4, 5, 6}) {
		t.Fatalf("stopped sharing %v, still shared %v; want [1 2] and [3 4 5 6]", gone, steps())
	}
	// Within the bound, only shareLinger of idleness ends a model; a model
	// served recently counts from then.
	now = now.Add(shareLinger)
	in := noInputs()
	in.served = map[p2p.Hash]time.Time{e.shared[1].root: now.Add(-time.Second)}
	var gone []uint32
	e.share(view(e, s), in, now, e.lastStep, func(a action) {
		if u, ok := a.(unshareAction); ok {
			gone = append(gone, u.model.step)
		}
	})
	if !slices.Equal(gone, []uint32{3}) || !slices.Equal(steps(), []uint32{4, 5, 6}) {
		t.Fatalf("stopped sharing %v, still shared %v; want [3] and [4 5 6]", gone, steps())
	}
}

// A root counts once a quorum of the model holders announced it; announcers
// that hold no model, and minorities, do not make one.
func TestQuorumRoot(t *testing.T) {
	ids := make([]peer.ID, 5)
	for i := range ids {
		ids[i] = peer.ID(fmt.Sprintf("peer-%d", i))
	}
	holders := map[peer.ID]bool{ids[0]: true, ids[1]: true, ids[2]: true}
	good, bad := p2p.Hash{1}, p2p.Hash{2}
	for _, c := range []struct {
		name  string
		roots map[peer.ID]p2p.Hash
		want  p2p.Hash
		ok    bool
	}{
		{"none", nil, p2p.Hash{}, false},
		{"two of three holders", map[peer.ID]p2p.Hash{ids[0]: good, ids[1]: good, ids[2]: bad}, good, true},
		{"split", map[peer.ID]p2p.Hash{ids[0]: good, ids[1]: bad}, p2p.Hash{}, false},
		{"outsiders do not count", map[peer.ID]p2p.Hash{ids[0]: bad, ids[3]: bad, ids[4]: bad}, p2p.Hash{}, false},
	} {
		if got, ok := quorumRoot(holders, c.roots); got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// peerOf is the p2p identity of client slot i of s.
func peerOf(t *testing.T, s *coordinator.State, i int) peer.ID {
	t.Helper()
	id, err := identity.PeerIDFromPublicKey(s.Clients[i].P2PIdentity[:])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The only member of a run, restarted mid-epoch without the model: the
// chain names no other holder, so nobody can send it. It resumes from a
// checkpoint at once (as the model of the step before the current one),
// looks again only after restoreRetry, and does not step aside (which
// would end the epoch for nothing). At step 1 the seed weights are the model.
func TestRestoreWhenNoPeerHoldsTheModel(t *testing.T) {
	s := testState(t, 1)
	startRound(s, 13, 2)
	e := memberEngine(s, 0)
	e.self, e.model = peerOf(t, s, 0), modelLoading
	now := time.Unix(1000, 0)
	v := at(e, s, now)
	if a, ok := e.membership(v, false); ok {
		t.Errorf("the only member stepped aside or joined: %v", a)
	}
	a, ok := e.startLoad(v, noInputs(), now)
	if r, _ := a.(restoreAction); !ok || r.step != 12 || r.holders != 0 {
		t.Fatalf("%v %v, want to resume from a checkpoint as the model of step 12", a, ok)
	}
	if a, ok := e.startLoad(v, noInputs(), now.Add(restoreRetry/2)); ok {
		t.Errorf("looked for a checkpoint again at once: %v", a)
	}
	if _, ok := e.startLoad(v, noInputs(), now.Add(restoreRetry)); !ok {
		t.Error("did not look again after restoreRetry")
	}
	e.loadedFrom(12)
	if a, ok := e.startLoad(v, noInputs(), now.Add(2*restoreRetry)); ok {
		t.Errorf("resumed again with the model loaded: %v", a)
	}

	e.model, e.recovery = modelLoading, recovery{}
	startRound(s, 1, 0)
	if a, ok := e.startLoad(at(e, s, now), noInputs(), now); ok {
		t.Errorf("resumed from a checkpoint at step 1: %v", a)
	}
}

// Every member of the last epoch crashed and restarted: the chain still
// names the others as holders, but none announces a root. After
// holderSilence of silence while holders would share the model, the client
// resumes from a checkpoint; a root from any holder restarts the wait, and
// while holders do not share (rounds run, every member ready, nobody
// pending) silence means nothing.
func TestRestoreAfterHoldersStaySilent(t *testing.T) {
	s := testState(t, 3)
	s.RunState = uint8(coordinator.WaitingForMembers)
	s.Progress.Epoch, s.Progress.Step = 2, 13
	for i := range 3 {
		s.Clients[i].InEpoch, s.Clients[i].HasFinished, s.Clients[i].LastFinishedEpoch = 0, 1, 1
	}
	s.Epoch.ClientsLen = 0
	e := memberEngine(s, 0)
	e.self, e.model = peerOf(t, s, 0), modelLoading
	now := time.Unix(1000, 0)
	v := at(e, s, now)
	in := noInputs()
	for _, d := range []time.Duration{0, holderSilence / 2} {
		if a, ok := e.startLoad(v, in, now.Add(d)); ok {
			t.Fatalf("after %v of silence: %v", d, a)
		}
	}
	in.roots = map[uint32]map[peer.ID]p2p.Hash{5: {peerOf(t, s, 1): {1}}} // a holder of an older model speaks
	if a, ok := e.startLoad(v, in, now.Add(holderSilence)); ok {
		t.Fatalf("resumed while a holder announces a model: %v", a)
	}
	in.roots = nil
	later := now.Add(holderSilence + time.Second)
	if a, ok := e.startLoad(v, in, later); ok {
		t.Fatalf("resumed before holderSilence since the last root: %v", a)
	}
	a, ok := e.startLoad(v, in, later.Add(holderSilence))
	if r, _ := a.(restoreAction); !ok || r.step != 12 || r.holders != 2 {
		t.Fatalf("%v %v, want to resume as the model of step 12 with 2 silent holders", a, ok)
	}

	// Rounds run with every member ready: holders do not share, so their
	// silence says nothing.
	s = testState(t, 3)
	startRound(s, 9, 3)
	for i := range 3 {
		s.Epoch.Clients[i].WarmupWitnessed = 1
	}
	e = memberEngine(s, 0)
	e.self, e.model = peerOf(t, s, 0), modelLoading
	for _, d := range []time.Duration{0, 10 * holderSilence} {
		if a, ok := e.startLoad(at(e, s, now.Add(d)), noInputs(), now.Add(d)); ok {
			t.Fatalf("resumed while holders train: %v", a)
		}
	}
}

// When no peer holds the model, the run's hub checkpoint is resumed from
// if it is this run's model of a step at or before the one wanted (an
// older one than a joiner takes); otherwise the reason ends the WARN line.
// A real file:// hub repo.
func TestHubFallback(t *testing.T) {
	ctx := context.Background()
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	repo := "file://" + t.TempDir()
	upload := func(md map[string]string) string {
		path := filepath.Join(t.TempDir(), "model.safetensors")
		if err := tr.SaveModel(path, md); err != nil {
			t.Fatal(err)
		}
		rev, err := hub.Upload(ctx, repo, path, hub.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	ours := upload(map[string]string{"run_id": "r", "step": "10"})
	theirs := upload(map[string]string{"run_id": "other", "step": "10"})
	c := &Client{cfg: Config{RunID: "r", CheckpointDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
	s := testState(t, 1)
	at := func(rev string) *coordinator.View {
		s.Model.CheckpointKind = coordinator.CheckpointHub
		copy(s.Model.CheckpointRepo[:], repo)
		s.Model.CheckpointRevision = [len(s.Model.CheckpointRevision)]byte{}
		copy(s.Model.CheckpointRevision[:], rev)
		return coordinator.NewView(s, solana.PublicKey{}, time.Time{})
	}
	if ck, why := c.hubFallback(ctx, at(ours), 12); why != "" || ck.step != 10 || ck.path == "" {
		t.Errorf("this run's step-10 checkpoint for step 12: %+v %q", ck, why)
	}
	for _, tc := range []struct {
		rev  string
		step uint32
		want string
	}{
		{ours, 9, `is of run "r", step "10"`},
		{theirs, 12, `is of run "other"`},
		{"", 12, "the run has no hub checkpoint"},
		{"00" + ours[2:], 12, "could not be fetched"},
	} {
		if ck, why := c.hubFallback(ctx, at(tc.rev), tc.step); !strings.Contains(why, tc.want) || ck.path != "" {
			t.Errorf("revision %.8s for step %d: %+v %q, want a reason with %q", tc.rev, tc.step, ck, why, tc.want)
		}
	}
}
