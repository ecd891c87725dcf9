package client

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
)

func TestModelWanted(t *testing.T) {
	s := testState(t, 3)
	startRound(s, 5, 0)
	for i := range 3 {
		s.Epoch.Clients[i].WarmupWitnessed = 1
	}
	if modelWanted(s) {
		t.Error("wanted while rounds run with every member ready and nobody pending")
	}
	s.Epoch.Clients[1].WarmupWitnessed = 0
	if !modelWanted(s) {
		t.Error("not wanted with a member that never reported ready")
	}
	s.Epoch.Clients[1].WarmupWitnessed = 1
	s.Clients[7].Occupied, s.Clients[7].Pending = 1, 1
	if !modelWanted(s) {
		t.Error("not wanted with a registered client pending")
	}
	s.Clients[7].Pending = 0
	s.Clients[0].Pending = 1 // a member joined for the next epoch holds the model
	if modelWanted(s) {
		t.Error("wanted because a member joined for the next epoch")
	}
	for _, phase := range []coordinator.RunState{coordinator.WaitingForMembers, coordinator.Warmup, coordinator.Cooldown} {
		s.RunState = uint8(phase)
		if !modelWanted(s) {
			t.Errorf("not wanted in %s", phase)
		}
	}
	s.RunState = uint8(coordinator.Finished)
	if modelWanted(s) {
		t.Error("wanted once Finished")
	}
}

// Superseded models stay shared for shareLinger after they were last
// served; beyond maxShared files, those idle for shareEvery go first.
func TestShareRetention(t *testing.T) {
	ctx := context.Background()
	node, err := p2p.New(ctx, p2p.Config{RunID: "retention", ListenInterface: "127.0.0.1", DisableRunDHT: true})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	c := testClient()
	c.cfg.Node, c.tr, c.workDir = node, testTrainer(t), t.TempDir()
	s := testState(t, 3)
	s.RunState = uint8(coordinator.Cooldown) // the model is wanted
	steps := func() []uint32 {
		var out []uint32
		for _, m := range c.shared {
			out = append(out, m.step)
		}
		return out
	}
	for step := uint32(1); step <= 6; step++ {
		c.lastStep = step
		c.share(ctx, s)
	}
	if got := steps(); !slices.Equal(got, []uint32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("shared %v right after each step; none may go before it was idle a while", got)
	}
	// 6 files, 2 over the bound: the two idle longest go, a third idle one stays.
	for _, m := range c.shared[:3] {
		m.superseded = time.Now().Add(-3 * time.Second)
	}
	c.share(ctx, s)
	if got := steps(); !slices.Equal(got, []uint32{3, 4, 5, 6}) {
		t.Fatalf("shared %v, want [3 4 5 6]", got)
	}
	if _, shared := node.ModelLastServed(c.shared[0].root); !shared {
		t.Fatal("the p2p node no longer shares a kept model")
	}
	// Within the bound, only shareLinger of idleness ends a model.
	c.shared[0].superseded = time.Now().Add(-shareLinger - time.Second)
	c.shared[1].superseded = time.Now().Add(-3 * time.Second)
	c.share(ctx, s)
	if got := steps(); !slices.Equal(got, []uint32{4, 5, 6}) {
		t.Fatalf("shared %v, want [4 5 6]", got)
	}
	c.stopSharing()
	if entries, _ := os.ReadDir(c.workDir); len(entries) != 0 {
		t.Errorf("%d files left after stopSharing", len(entries))
	}
}
