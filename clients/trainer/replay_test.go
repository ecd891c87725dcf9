package trainer

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
)

// A step replays bit for bit on another trainer that holds the same
// parameters and loads the first one's replay state: same payload, same
// replay state after. Another batch, or another history, does not.
func TestReplayStateReplaysAStep(t *testing.T) {
	cfg := tinyConfig
	text := textFor(cfg, 5, 4096)
	a, b := newTrainer(t, cfg, 1), newTrainer(t, cfg, 2)
	// Some history: a few DeMo steps on a, each applied (as a replica would).
	for i := range 3 {
		step(t, a, text, 64*i, 4, cfg.SeqLen)
		p, err := a.DeMoGenerate(testDeMo)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.DeMoApply(testDeMo, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	params, err := a.Params()
	if err != nil {
		t.Fatal(err)
	}
	before, err := a.ReplayState()
	if err != nil {
		t.Fatal(err)
	}
	if FreshReplayState(before) {
		t.Fatal("a trainer with momentum has a fresh replay state")
	}
	step(t, a, text, 500, 4, cfg.SeqLen)
	payload, err := a.DeMoGenerate(testDeMo)
	if err != nil {
		t.Fatal(err)
	}
	after, err := a.ReplayState()
	if err != nil {
		t.Fatal(err)
	}

	replay := func(rs []byte, start int) ([]byte, []byte) {
		t.Helper()
		if err := b.LoadReplayState(rs, params); err != nil {
			t.Fatalf("LoadReplayState: %v", err)
		}
		step(t, b, text, start, 4, cfg.SeqLen)
		p, err := b.DeMoGenerate(testDeMo)
		if err != nil {
			t.Fatal(err)
		}
		rs2, err := b.ReplayState()
		if err != nil {
			t.Fatal(err)
		}
		return p, rs2
	}
	p, rs := replay(before, 500)
	if !bytes.Equal(p, payload) || !bytes.Equal(rs, after) {
		t.Fatalf("replay differs: payload equal %v, state after equal %v", bytes.Equal(p, payload), bytes.Equal(rs, after))
	}
	if p, _ := replay(before, 900); bytes.Equal(p, payload) {
		t.Error("a replay on other sequences gave the same payload")
	}
	fresh := FreshCopy(before)
	if !FreshReplayState(fresh) || FreshReplayState(before) {
		t.Fatal("a zeroed replay state is not fresh")
	}
	if p, _ := replay(fresh, 500); bytes.Equal(p, payload) {
		t.Error("a replay from another momentum gave the same payload")
	}

	// Applying the round changes the header as AfterApply says.
	want, err := AfterApply(after, testDeMo)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeMoApply(testDeMo, [][]byte{payload}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReplayState(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the replay state after the apply is not AfterApply's (err %v)", err)
	}
	if _, err := AfterApply(after[:10], testDeMo); !errors.Is(err, ErrState) {
		t.Errorf("AfterApply of a short state: %v", err)
	}

	// Malformed replay states change nothing.
	sum := sha256.Sum256(mustState(t, b))
	for _, bad := range [][]byte{nil, before[:10], append(bytes.Clone(before), 0, 0, 0, 0), before[:len(before)-4]} {
		if err := b.LoadReplayState(bad, params); !errors.Is(err, ErrState) {
			t.Errorf("a %d-byte replay state: %v, want ErrState", len(bad), err)
		}
	}
	if err := b.LoadReplayState(before, params[1:]); !errors.Is(err, ErrInvalid) {
		t.Errorf("short parameters: %v, want ErrInvalid", err)
	}
	if sha256.Sum256(mustState(t, b)) != sum {
		t.Error("a rejected replay state changed the trainer")
	}

	// ResetOptimizer makes the state fresh and keeps the parameters.
	if params, err = a.Params(); err != nil {
		t.Fatal(err)
	}
	if err := a.ResetOptimizer(); err != nil {
		t.Fatal(err)
	}
	rs, err = a.ReplayState()
	if err != nil || !FreshReplayState(rs) {
		t.Fatalf("after ResetOptimizer: fresh %v, err %v", FreshReplayState(rs), err)
	}
	if got, _ := a.Params(); !slices.Equal(got, params) {
		t.Error("ResetOptimizer changed the parameters")
	}
}

func mustState(t *testing.T, tr *Trainer) []byte {
	t.Helper()
	s, err := tr.ExportState()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
