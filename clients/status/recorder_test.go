package status

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func step(n uint64, loss float64) StepStat {
	return StepStat{Step: n, Loss: Float(loss), Tokens: 1000, Duration: 500 * time.Millisecond,
		BytesOut: 2048, BytesIn: 4096, Digest: fmt.Sprintf("%064x", n)}
}

func TestRecorderSnapshotIsACopy(t *testing.T) {
	r := NewRecorder("run-a", Options{})
	r.SetRunState("RoundTrain")
	r.SetProgress(2, 7, 31)
	if err := r.SetRole(RoleWitness); err != nil {
		t.Fatal(err)
	}
	if err := r.SetClients(3, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.SetParameters(1_000_000); err != nil {
		t.Fatal(err)
	}
	if err := r.SetPeers([]Peer{{ID: "b", BytesIn: 5}, {ID: "a", Address: "/ip4/127.0.0.1/tcp/1", Latency: 3 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordStep(step(31, 3.5)); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordEval(31, 3.75); err != nil {
		t.Fatal(err)
	}
	r.SetCheckpoint(Checkpoint{Step: 30, Location: "/ckpt/run-a-step30"})
	r.Warn("peer x slow")

	s := r.Snapshot()
	if s.RunID != "run-a" || s.RunState != "RoundTrain" || s.Epoch != 2 || s.Round != 7 || s.Step != 31 || s.Role != RoleWitness {
		t.Fatalf("scalars: %+v", s)
	}
	if s.ClientsInEpoch != 3 || s.ClientsHealthy != 2 || s.DenseBytes != 4_000_000 {
		t.Fatalf("counts: %+v", s)
	}
	if len(s.Peers) != 2 || s.Peers[0].ID != "a" || s.PeerCount != 2 {
		t.Fatalf("peers not sorted by id: %+v", s.Peers)
	}
	last, ok := s.LastStep()
	if !ok || last.Step != 31 || last.TokensPerSecond() != 2000 {
		t.Fatalf("last step %+v, %.1f tok/s", last, last.TokensPerSecond())
	}
	if h, ok := s.LastHeldOut(); !ok || h.Loss != 3.75 {
		t.Fatalf("held out %+v", h)
	}
	if s.Checkpoint == nil || s.Checkpoint.Time.IsZero() || s.LastWarning == nil || s.WarningsTotal != 1 {
		t.Fatalf("checkpoint/warning: %+v %+v", s.Checkpoint, s.LastWarning)
	}

	// Mutating the copy must not reach the recorder.
	s.Peers[0].ID = "zzz"
	s.Steps[0].Loss = 99
	s.Checkpoint.Step = 99
	s.LastWarning.Message = "changed"
	s2 := r.Snapshot()
	if s2.Peers[0].ID != "a" || s2.Steps[0].Loss != 3.5 || s2.Checkpoint.Step != 30 || s2.LastWarning.Message != "peer x slow" {
		t.Fatalf("snapshot shares memory with the recorder: %+v", s2)
	}
	if s2.Seq <= 1 {
		t.Fatalf("seq %d did not advance", s2.Seq)
	}
}

func TestRecorderRejectsBadInputAndChangesNothing(t *testing.T) {
	r := NewRecorder("run", Options{})
	if err := r.RecordStep(step(5, 2)); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordEval(5, 2); err != nil {
		t.Fatal(err)
	}
	before := r.Snapshot()
	bad := []struct {
		name string
		do   func() error
	}{
		{"step repeated", func() error { return r.RecordStep(step(5, 1)) }},
		{"step backwards", func() error { return r.RecordStep(step(4, 1)) }},
		{"digest not hex", func() error { s := step(6, 1); s.Digest = "xyz"; return r.RecordStep(s) }},
		{"negative duration", func() error { s := step(6, 1); s.Duration = -time.Second; return r.RecordStep(s) }},
		{"eval backwards", func() error { return r.RecordEval(4, 1) }},
		{"healthy above total", func() error { return r.SetClients(2, 3) }},
		{"negative clients", func() error { return r.SetClients(-1, 0) }},
		{"unknown role", func() error { return r.SetRole("leader") }},
		{"empty peer id", func() error { return r.SetPeers([]Peer{{ID: ""}}) }},
		{"duplicate peer", func() error { return r.SetPeers([]Peer{{ID: "a"}, {ID: "a"}}) }},
		{"absurd parameter count", func() error { return r.SetParameters(math.MaxUint64) }},
		{"absurd dense size", func() error { return r.SetDense(1<<62, 8) }},
		{"no optimizer steps", func() error { return r.SetDense(1000, 0) }},
		{"negative round time", func() error {
			return r.RecordStep(StepStat{Step: 1000, Digest: "aa", RoundTime: -time.Second})
		}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err == nil {
				t.Fatal("accepted")
			}
			after := r.Snapshot()
			if after.Seq != before.Seq {
				t.Fatalf("rejected input changed the state (seq %d -> %d)", before.Seq, after.Seq)
			}
		})
	}
}

func TestHistoriesStayBoundedAndSpanTheRun(t *testing.T) {
	r := NewRecorder("run", Options{LossPoints: 64, RecentSteps: 8, LogLines: 5})
	const n = 10_000
	for i := uint64(1); i <= n; i++ {
		if err := r.RecordStep(step(i, 10/float64(i))); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := r.RecordEval(i, 10/float64(i)); err != nil {
				t.Fatal(err)
			}
		}
		r.Log(slog.LevelInfo, time.Time{}, fmt.Sprint("line ", i))
	}
	s := r.Snapshot()
	if len(s.Steps) != 8 || s.Steps[0].Step != n-7 || s.Steps[7].Step != n {
		t.Fatalf("recent steps: %d, first %d", len(s.Steps), s.Steps[0].Step)
	}
	if len(s.Log) != 5 || s.Log[4].Message != fmt.Sprint("line ", n) {
		t.Fatalf("log ring: %+v", s.Log)
	}
	for _, h := range []struct {
		name       string
		pts        []LossPoint
		first, end uint64
	}{{"train", s.Train, 1, n}, {"held-out", s.HeldOut, 10, n}} {
		if len(h.pts) > 65 || len(h.pts) < 32 {
			t.Fatalf("%s: %d points, want 32..65", h.name, len(h.pts))
		}
		if h.pts[0].Step != h.first || h.pts[len(h.pts)-1].Step != h.end {
			t.Fatalf("%s spans steps %d..%d, want %d..%d", h.name, h.pts[0].Step, h.pts[len(h.pts)-1].Step, h.first, h.end)
		}
		// Evenly spaced apart from the appended latest point.
		gap := h.pts[1].Step - h.pts[0].Step
		for i := 2; i < len(h.pts)-1; i++ {
			if d := h.pts[i].Step - h.pts[i-1].Step; d != gap {
				t.Fatalf("%s: uneven spacing %d then %d at %d", h.name, gap, d, i)
			}
		}
	}
	if s.StepsTotal != n || s.TokensTotal != n*1000 || s.BytesOutTotal != n*2048 {
		t.Fatalf("totals: %+v", s)
	}
}

func TestMaxPeersKeepsBusiest(t *testing.T) {
	r := NewRecorder("run", Options{MaxPeers: 2})
	if err := r.SetPeers([]Peer{{ID: "quiet"}, {ID: "busy", BytesIn: 100}, {ID: "busier", BytesOut: 200}}); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if s.PeerCount != 3 || len(s.Peers) != 2 || s.Peers[0].ID != "busier" || s.Peers[1].ID != "busy" {
		t.Fatalf("peers %+v count %d", s.Peers, s.PeerCount)
	}
}

func TestLogLinesAreMadeSafe(t *testing.T) {
	r := NewRecorder("run", Options{MaxLineBytes: 11})
	r.Error("a\nb\x1b[2Jc")
	r.Log(slog.LevelInfo, time.Time{}, "éééééé") // 12 bytes, cut inside a rune
	s := r.Snapshot()
	if got := s.Log[0].Message; got != "a b\uFFFD[2Jc" {
		t.Fatalf("control characters survived: %q", got)
	}
	if got := s.Log[1].Message; got != "ééééé…" {
		t.Fatalf("cut: %q", got)
	}
	if s.LastError == nil || s.ErrorsTotal != 1 || s.LastError.Level != "ERROR" {
		t.Fatalf("last error: %+v", s.LastError)
	}
}

func TestSubscribeCoalescesAndCancels(t *testing.T) {
	r := NewRecorder("run", Options{})
	ch, cancel := r.Subscribe()
	for i := 0; i < 100; i++ {
		r.SetProgress(0, uint64(i), uint64(i))
	}
	select {
	case <-ch:
	default:
		t.Fatal("no wake-up after changes")
	}
	select {
	case <-ch:
		t.Fatal("bursts were not coalesced")
	default:
	}
	cancel()
	cancel()
	if _, open := <-ch; open {
		t.Fatal("channel open after cancel")
	}
	r.SetRunState("Finished") // must not panic or block on the closed channel
}

func TestConcurrentUse(t *testing.T) {
	r := NewRecorder("run", Options{LossPoints: 16, RecentSteps: 4})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= 2000; i++ {
			if err := r.RecordStep(step(i, 1)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			r.Warn("w")
			r.SetProgress(1, uint64(i), uint64(i))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			s := r.Snapshot()
			if len(s.Steps) > 0 && s.StepsTotal < s.Steps[len(s.Steps)-1].Step {
				t.Error("inconsistent snapshot: totals behind steps")
				return
			}
		}
	}()
	wg.Wait()
	if s := r.Snapshot(); s.StepsTotal != 2000 || s.WarningsTotal != 2000 {
		t.Fatalf("lost updates: %+v", s)
	}
}

func TestSnapshotJSONRoundTrip(t *testing.T) {
	r := NewRecorder("run", Options{})
	if err := r.RecordStep(step(1, math.NaN())); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordStep(step(2, 2.5)); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordEval(2, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetPeers([]Peer{{ID: "p", Latency: 1500 * time.Microsecond}, {ID: "q"}}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.Snapshot())
	if err != nil {
		t.Fatalf("a NaN loss must not break the JSON: %v", err)
	}
	for _, want := range []string{`"loss":"NaN"`, `"loss":"+Inf"`, `"loss":2.5`, `"latency_seconds":0.0015`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("JSON lacks %s: %s", want, b)
		}
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back.Steps[0].Loss)) || back.Steps[1].Loss != 2.5 || !math.IsInf(float64(back.HeldOut[0].Loss), 1) {
		t.Fatalf("losses after round trip: %+v %+v", back.Steps, back.HeldOut)
	}
	if back.Peers[0].Latency != 1500*time.Microsecond || back.Peers[1].Latency != 0 {
		t.Fatalf("latency after round trip: %+v", back.Peers)
	}
	var f Float
	if err := json.Unmarshal([]byte(`"oops"`), &f); err == nil {
		t.Fatal("accepted a string that is not a number")
	}
}

func TestCompressionRatio(t *testing.T) {
	for _, tc := range []struct {
		dense, sent uint64
		want        float64
	}{{4000, 40, 100}, {0, 40, 0}, {4000, 0, 0}} {
		if got := CompressionRatio(tc.dense, tc.sent); got != tc.want {
			t.Errorf("CompressionRatio(%d, %d) = %v, want %v", tc.dense, tc.sent, got, tc.want)
		}
	}
}

func TestVerification(t *testing.T) {
	r := NewRecorder("run", Options{})
	if s := r.Snapshot(); s.Verification != nil {
		t.Fatal("verification before any was set")
	}
	if b, _ := json.Marshal(r.Snapshot()); strings.Contains(string(b), `"verification"`) {
		t.Fatalf("JSON has verification before any was set: %s", b)
	}
	v := Verification{
		Commitments: VerifiedCommitments{Committed: 10, Match: 6, Mismatch: 1, NoData: 1, Unjudged: 2},
		Replays:     Replays{Run: 4, Match: 3, NoData: 1, Posted: 4},
		Disputes:    Disputes{Open: 1, Transient: 2, TrainerFault: 1, AccuserFault: 1, Unresolved: 1, Refuted: 1},
		Burned:      50, Unvested: []uint64{1, 2, 3, 4}, Slashed: 7, HasFault: true, FaultEpoch: 2,
	}
	if err := r.SetVerification(v); err != nil {
		t.Fatal(err)
	}
	v.Unvested[0] = 99 // the recorder keeps its own copy
	s := r.Snapshot()
	if s.Verification == nil || s.Verification.Commitments != v.Commitments || s.Verification.Replays != v.Replays ||
		s.Verification.Disputes != v.Disputes || s.Verification.Burned != 50 || !s.Verification.HasFault || s.Verification.Unvested[0] != 1 {
		t.Fatalf("verification %+v", s.Verification)
	}
	s.Verification.Unvested[1] = 99
	s.Verification.Burned = 0
	if s2 := r.Snapshot(); s2.Verification.Unvested[1] != 2 || s2.Verification.Burned != 50 {
		t.Fatalf("snapshot shares memory with the recorder: %+v", s2.Verification)
	}
	b, err := json.Marshal(r.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"verification":{"commitments":{"committed":10,"match":6,"mismatch":1,"no_data":1,"unjudged":2}`,
		`"replays":{"run":4,"match":3,"mismatch":0,"no_data":1,"verdicts_posted":4}`,
		`"disputes":{"open":1,"transient":2,"trainer_fault":1,"accuser_fault":1,"unresolved":1,"refuted":1}`,
		`"burned":50,"unvested":[1,2,3,4],"slashed":7,"has_fault":true,"fault_epoch":2}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil || back.Verification == nil || back.Verification.Disputes != v.Disputes || len(back.Verification.Unvested) != 4 {
		t.Fatalf("round trip: %+v, %v", back.Verification, err)
	}
	// No unvested buckets is an empty list, not null.
	if err := r.SetVerification(Verification{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(r.Snapshot()); !strings.Contains(string(b), `"unvested":[]`) {
		t.Errorf("JSON: %s", b)
	}

	// Verdicts outnumbering what they judge are refused and change nothing.
	before := r.Snapshot()
	for _, bad := range []Verification{
		{Commitments: VerifiedCommitments{Committed: 2, Match: 2, Unjudged: 1}},
		{Commitments: VerifiedCommitments{Committed: 1, Mismatch: 2}},
		{Commitments: VerifiedCommitments{Committed: 0, Unjudged: math.MaxUint64}},
		{Replays: Replays{Run: 1, Match: 1, NoData: 1}},
		{Replays: Replays{Run: 1, Posted: 2}},
	} {
		if err := r.SetVerification(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if after := r.Snapshot(); after.Seq != before.Seq {
		t.Fatalf("rejected input changed the state (seq %d -> %d)", before.Seq, after.Seq)
	}
}

func TestRecordBenchmark(t *testing.T) {
	r := NewRecorder("run", Options{Benchmarks: 3})
	for i, b := range []Benchmark{
		{Step: 10, Task: "a", Items: 5, Acc: 0.2, AccNorm: 0.4},
		{Step: 10, Task: "b", Items: 5, Acc: 0.6, AccNorm: 0.6},
		{Step: 20, Task: "a", Items: 5, Acc: 0.8, AccNorm: 1},
	} {
		if err := r.RecordBenchmark(b); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	for _, bad := range []Benchmark{{Task: "", Items: 1}, {Task: "a"}, {Task: "a", Items: 1, Acc: 1.5}, {Task: "a", Items: 1, AccNorm: math.NaN()}} {
		if err := r.RecordBenchmark(bad); err == nil {
			t.Errorf("%+v recorded", bad)
		}
	}
	s := r.Snapshot()
	if len(s.Benchmarks) != 3 {
		t.Fatalf("kept %d results, want 3", len(s.Benchmarks))
	}
	latest := s.LatestBenchmarks()
	if len(latest) != 2 || latest[0].Task != "a" || latest[0].Step != 20 || latest[1].Task != "b" {
		t.Fatalf("latest per task: %+v", latest)
	}
}

func TestRecordPrompt(t *testing.T) {
	r := NewRecorder("run", Options{Prompts: 2})
	tokens := []uint32{104, 105}
	for step := range uint64(3) {
		if err := r.RecordPrompt(Prompt{Step: step, Index: int(step), Prompt: "Once", Tokens: tokens, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	tokens[0] = 0 // the recorder keeps its own copy
	for _, bad := range []Prompt{{Prompt: "", Tokens: tokens}, {Prompt: "Once"}} {
		if err := r.RecordPrompt(bad); err == nil {
			t.Errorf("%+v recorded", bad)
		}
	}
	s := r.Snapshot()
	if len(s.Prompts) != 2 || s.Prompts[0].Step != 1 || s.Prompts[1].Index != 2 || s.Prompts[1].Tokens[0] != 104 {
		t.Fatalf("kept %+v, want the prompts of steps 1 and 2", s.Prompts)
	}
	s.Prompts[1].Tokens[1] = 0
	if r.Snapshot().Prompts[1].Tokens[1] != 105 {
		t.Error("a snapshot shares its tokens with the recorder")
	}
}
