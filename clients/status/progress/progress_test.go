package progress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

func TestLine(t *testing.T) {
	st := status.StepStat{Step: 42, Loss: 3.21401, Tokens: 2469, Duration: 2 * time.Second, BytesOut: 12595, Digest: "ab"}
	for _, tc := range []struct {
		name  string
		held  *status.LossPoint
		dense uint64
		st    status.StepStat
		want  string
	}{
		{"full", &status.LossPoint{Step: 40, Loss: 3.301}, 1_250_000, st,
			"step 42  loss 3.2140  held-out 3.3010@40  tok/s 1234.5  sent 12.3 KiB/step  dense fp32 1.2 MiB  ratio 99.2x"},
		{"no held-out, no model size", nil, 0, st,
			"step 42  loss 3.2140  tok/s 1234.5  sent 12.3 KiB/step"},
		{"diverged, nothing sent, no duration", nil, 4096, status.StepStat{Step: 1, Loss: status.Float(math.NaN())},
			"step 1  loss NaN  sent 0 B/step  dense fp32 4.0 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.st, tc.held, tc.dense); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {math.MaxUint64, "16.0 EiB"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestPrinterPrintsEachStepOnce(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	var buf bytes.Buffer
	p := NewPrinter(&buf, "[client-1] ")
	record := func(step uint64) {
		t.Helper()
		if err := rec.RecordStep(status.StepStat{Step: step, Loss: 2, Tokens: 10, Duration: time.Second, BytesOut: 100, Digest: "00"}); err != nil {
			t.Fatal(err)
		}
	}
	record(1)
	record(2)
	if err := p.Print(rec.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := p.Print(rec.Snapshot()); err != nil { // nothing new
		t.Fatal(err)
	}
	if err := rec.RecordEval(2, 2.5); err != nil {
		t.Fatal(err)
	}
	record(3)
	if err := p.Print(rec.Snapshot()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "[client-1] step ") {
			t.Errorf("line %d lacks prefix: %q", i, l)
		}
	}
	if strings.Contains(lines[1], "held-out") || !strings.Contains(lines[2], "held-out 2.5000@2") {
		t.Errorf("held-out attached to the wrong steps: %q", lines)
	}
}

func TestPrinterNotes(t *testing.T) {
	var buf bytes.Buffer
	p := NewPrinter(&buf, "[c] ").WithNote(func(step uint64) string {
		if step == 2 {
			return "  <<< MISMATCH"
		}
		return ""
	})
	if err := p.Print(status.Snapshot{Steps: []status.StepStat{{Step: 1}, {Step: 2}}}); err != nil {
		t.Fatal(err)
	}
	want := "[c] step 1  loss 0.0000  sent 0 B/step\n[c] step 2  loss 0.0000  sent 0 B/step  <<< MISMATCH\n"
	if buf.String() != want {
		t.Errorf("got  %q\nwant %q", buf.String(), want)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestPrinterReportsWriteErrors(t *testing.T) {
	s := status.Snapshot{Steps: []status.StepStat{{Step: 1}}}
	if err := NewPrinter(failWriter{}, "").Print(s); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v", err)
	}
}

func TestSummary(t *testing.T) {
	rec := status.NewRecorder("demo", status.Options{})
	rec.SetRunState("Finished")
	rec.SetProgress(2, 0, 20)
	if err := rec.SetDense(1<<20, 10); err != nil { // 10 optimizer steps a round
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		round := time.Duration(i) * 100 * time.Millisecond // 0.1 .. 2.0 s
		if err := rec.RecordStep(status.StepStat{Step: i, Loss: status.Float(6 - 0.1*float64(i)), Tokens: 500, Duration: time.Second,
			BytesOut: 4096, BytesIn: 8192, Digest: "01", RoundTime: round}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []uint64{1, 20} {
		if err := rec.RecordEval(i, 7-0.1*float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []status.Benchmark{{Step: 10, Task: "builtin:sotu", Items: 100, Acc: 0.25, AccNorm: 0.2}, {Step: 20, Task: "builtin:sotu", Items: 100, Acc: 0.43, AccNorm: 0.41}} {
		if err := rec.RecordBenchmark(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []status.Prompt{{Step: 10, Prompt: "Once", Tokens: []uint32{1}, Text: " a"}, {Step: 20, Prompt: "Once", Tokens: []uint32{2}, Text: " upon"}} {
		if err := rec.RecordPrompt(p); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(Summary(rec.Snapshot()), "commitments") {
		t.Error("verification lines without verification")
	}
	if err := rec.SetVerification(status.Verification{
		Commitments: status.VerifiedCommitments{Committed: 20, Match: 14, Mismatch: 1, NoData: 1, Unjudged: 2},
		Replays:     status.Replays{Run: 9, Match: 7, Mismatch: 1, NoData: 1, Posted: 8},
		Disputes:    status.Disputes{Open: 1, Transient: 2, TrainerFault: 3, AccuserFault: 4, Unresolved: 5},
		Burned:      120, Unvested: []uint64{10, 0, 5, 0}, HasFault: true,
	}); err != nil {
		t.Fatal(err)
	}
	got := Summary(rec.Snapshot())
	for _, want := range []string{
		"commitments    20 made; of those to verify: 14 MATCH, 1 MISMATCH, 1 NO_DATA, 2 unjudged\n",
		"replayed       9 as verifier: 7 MATCH, 1 MISMATCH, 1 NO_DATA; 8 verdicts posted\n",
		"disputes       1 open, 3 TRAINER_FAULT, 4 ACCUSER_FAULT, 2 TRANSIENT, 5 UNRESOLVED (as trainer, accuser or committee)\n",
		"standing       FAULTED, 120 points burned, 15 unvested\n",
		"benchmark      builtin:sotu acc 0.250 (step 10) -> 0.430 (step 20), acc_norm 0.410, 100 items",
		"prompt         (step 10) \"Once a\"\nprompt         (step 20) \"Once upon\"\n",
		"run demo: Finished after 20 steps (epoch 2)",
		"train loss     5.9000 (step 1) -> 4.0000 (step 20)",
		"held-out loss  6.9000 (step 1) -> 5.0000 (step 20)",
		"throughput     500.0 tok/s over the last 20 steps",
		"sent per step  4.0 KiB (received 8.0 KiB), dense fp32 40.0 MiB, ratio 10240.0x",
		"sent per token 8.192 B",
		"round time     median 1.10 s (min 0.10, max 2.00) over 20 rounds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if empty := Summary(status.Snapshot{RunID: "x"}); empty != "run x: unknown state after 0 steps (epoch 0)\n" {
		t.Errorf("empty summary %q", empty)
	}
}

func TestFollow(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	record := func(step uint64) {
		t.Helper()
		if err := rec.RecordStep(status.StepStat{Step: step, Loss: 1, Digest: "aa"}); err != nil {
			t.Fatal(err)
		}
	}
	record(1) // before Follow starts
	out := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, rec, out, "") }()
	for s := uint64(2); s <= 50; s++ {
		record(s)
		rec.Warn("noise that is not a step")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "step 50 ") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("step %d ", i+1)) {
			t.Fatalf("line %d = %q", i, l)
		}
	}
}
