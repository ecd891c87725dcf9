package tui

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/psyche-go/psyche/clients/status"
)

// filled returns a recorder in the middle of a run.
func filled(t *testing.T) *status.Recorder {
	t.Helper()
	rec := status.NewRecorder("demo-run", status.Options{})
	rec.SetRunState("RoundTrain")
	rec.SetProgress(2, 5, 47)
	check(t, rec.SetRole(status.RoleTrainer))
	check(t, rec.SetClients(3, 2))
	check(t, rec.SetParameters(1_000_000))
	check(t, rec.SetPeers([]status.Peer{
		{ID: "12D3KooWPeerAAAAAAAAAAAAAAAAAAAAA", Address: "/ip4/127.0.0.1/udp/4001/quic-v1", BytesIn: 3 << 20, BytesOut: 1 << 20, Latency: 1500 * time.Microsecond},
		{ID: "12D3KooWPeerB", BytesIn: 10},
	}))
	for i := uint64(1); i <= 47; i++ {
		check(t, rec.RecordStep(status.StepStat{Step: i, Loss: status.Float(4 * math.Exp(-float64(i)/20)), Tokens: 8192,
			Duration: 4 * time.Second, BytesOut: 40_000, BytesIn: 80_000, Digest: fmt.Sprintf("%064x", i)}))
		if i%10 == 0 {
			check(t, rec.RecordEval(i, 4.2*math.Exp(-float64(i)/20)))
		}
	}
	rec.SetCheckpoint(status.Checkpoint{Step: 40, Location: "/ckpt/demo-run-step40"})
	check(t, rec.RecordBenchmark(status.Benchmark{Step: 20, Epoch: 1, Task: "builtin:sotu", Items: 200, Acc: 0.3, AccNorm: 0.28}))
	check(t, rec.RecordBenchmark(status.Benchmark{Step: 40, Epoch: 2, Task: "builtin:sotu", Items: 200, Acc: 0.43, AccNorm: 0.415, Published: true}))
	check(t, rec.RecordPrompt(status.Prompt{Step: 40, Epoch: 2, Index: 3, Prompt: "Once upon a time", Tokens: []uint32{44, 32}, Text: ", the\nking", Published: true}))
	check(t, rec.SetVerification(status.Verification{
		Commitments: status.VerifiedCommitments{Committed: 12, Match: 9, Mismatch: 1, Unjudged: 2},
		Replays:     status.Replays{Run: 5, Match: 5, Posted: 4},
		Disputes:    status.Disputes{Open: 1, TrainerFault: 1},
		Burned:      7, Unvested: []uint64{100, 200}, HasFault: true,
	}))
	rec.Warn("peer 12D3KooWPeerB delivered nothing")
	rec.Error("witness transaction failed: blockhash expired")
	return rec
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// show drives the model as bubbletea would: a window size, then a snapshot.
func show(t *testing.T, snap status.Snapshot, w, h int) string {
	t.Helper()
	m := newModel(nil, nil, func() {}, lipgloss.NewRenderer(io.Discard))
	next, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	next, cmd := next.Update(snapshotMsg(snap))
	if cmd == nil {
		t.Fatal("no command to wait for the next snapshot")
	}
	v := next.View()
	lines := strings.Split(v, "\n")
	if len(lines) > max(h, 1) {
		t.Fatalf("%dx%d: %d lines rendered", w, h, len(lines))
	}
	for i, l := range lines {
		if cw := ansi.StringWidth(l); cw > w {
			t.Fatalf("%dx%d: line %d is %d cells wide: %q", w, h, i, cw, l)
		}
	}
	return v
}

func TestViewShowsTheFigures(t *testing.T) {
	v := show(t, filled(t).Snapshot(), 120, 50)
	for _, want := range []string{
		"run demo-run", "state RoundTrain",
		"epoch 2", "round 5", "step 47", "role trainer",
		"3 in epoch, 2 healthy", "peers 2",
		"train 0.3815@47",    // 4*exp(-47/20)
		"held-out 0.5684@40", // 4.2*exp(-2)
		"tok/s 2048.0",
		"sent 39.1 KiB/step", "recv 78.1 KiB/step", "dense fp32 3.8 MiB", "ratio 100.0x",
		fmt.Sprintf("digest %064x@47", 47),
		"checkpoint step 40  /ckpt/demo-run-step40",
		"verify commits 12: 9 MATCH 1 MISMATCH 0 NO_DATA 2 unjudged · replays 5, 4 posted · disputes 1 open, 1 settled",
		"evals builtin:sotu acc 0.430 acc_norm 0.415@40",
		"prompt @40 Once upon a time, the\uFFFDking",
		"last error: witness transaction failed",
		"12D3KooWPeerAAAAAAA…", "/ip4/127.0.0.1/udp/4001/quic-v1", "3.0 MiB", "1.5ms",
		"WARN  peer 12D3KooWPeerB delivered nothing",
		"step 1", // chart x axis
		"q: leave the run and quit",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if !strings.ContainsAny(v, "⠁⠂⠄⡀⠈⠐⠠⢀") || !strings.Contains(v, "●") {
		t.Errorf("no loss curve drawn:\n%s", v)
	}
	if testing.Verbose() {
		t.Logf("\n%s", v)
	}
}

func TestVerificationLine(t *testing.T) {
	v := &status.Verification{Commitments: status.VerifiedCommitments{Committed: 3, Match: 3}, Unvested: []uint64{10, 20, 0, 5}, Burned: 2}
	want := "commits 3: 3 MATCH 0 MISMATCH 0 NO_DATA 0 unjudged · replays 0, 0 posted · disputes 0 open, 0 settled · burned 2, unvested 35"
	if got := verificationLine(v); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	v.HasFault, v.FaultEpoch, v.Slashed = true, 3, 1000
	if got := verificationLine(v); !strings.HasSuffix(got, " · AT FAULT") {
		t.Errorf("a client at fault: %q", got)
	}
	if got := faultLine(v); !strings.HasPrefix(got, "FAULT in epoch 3:") || !strings.Contains(got, "slashed (1000 in all)") {
		t.Errorf("fault line: %q", got)
	}
	// Without verification there is no such line.
	if v := show(t, status.NewRecorder("r", status.Options{}).Snapshot(), 200, 40); strings.Contains(v, "verify") {
		t.Errorf("a verify line without verification:\n%s", v)
	}
}

func TestViewSizes(t *testing.T) {
	full := filled(t).Snapshot()
	empty := status.NewRecorder("", status.Options{}).Snapshot()
	for _, size := range [][2]int{{0, 0}, {1, 1}, {20, 5}, {40, 12}, {80, 24}, {500, 300}, {2000, 1000}} {
		for name, snap := range map[string]status.Snapshot{"full": full, "empty": empty} {
			t.Run(fmt.Sprintf("%s %dx%d", name, size[0], size[1]), func(t *testing.T) {
				v := show(t, snap, size[0], size[1])
				if size[1] >= 5 && size[0] >= 20 && !strings.Contains(v, "psyche") {
					t.Errorf("header missing:\n%s", v)
				}
			})
		}
	}
	if v := show(t, empty, 80, 24); !strings.Contains(v, "no step trained yet") || !strings.Contains(v, "state unknown") {
		t.Errorf("empty view:\n%s", v)
	}
}

func TestViewNeutralisesHostileText(t *testing.T) {
	rec := status.NewRecorder("run\x1b[2J", status.Options{})
	rec.SetRunState("Round\nTrain")
	check(t, rec.SetPeers([]status.Peer{{ID: "evil\x1b]0;title\x07", Address: "\x1b[31mred"}}))
	v := show(t, rec.Snapshot(), 100, 30)
	if strings.ContainsAny(v, "\x1b\x07") {
		t.Fatalf("escape sequences reached the terminal: %q", v)
	}
}

func TestChart(t *testing.T) {
	train := []status.LossPoint{{Step: 1, Loss: 4}, {Step: 2, Loss: status.Float(math.NaN())}, {Step: 3, Loss: 3}, {Step: 10, Loss: 1}}
	held := []status.LossPoint{{Step: 10, Loss: 1.5}}
	st := lipgloss.NewStyle()
	lines := chart(train, held, 40, 6, st, st)
	if len(lines) != 7 {
		t.Fatalf("%d lines", len(lines))
	}
	if !strings.HasPrefix(lines[0], "  4.000┤") || !strings.HasPrefix(lines[5], "  1.000┤") {
		t.Errorf("y labels: %q / %q", lines[0], lines[5])
	}
	if !strings.Contains(lines[6], "step 1") || !strings.HasSuffix(lines[6], "10") {
		t.Errorf("x axis %q", lines[6])
	}
	// The first point is top-left, the last bottom-right.
	if r := []rune(lines[0])[labelWidth]; r < 0x2800 || r > 0x28FF {
		t.Errorf("top-left cell %q is not braille", r)
	}
	if r := []rune(lines[5])[len([]rune(lines[5]))-1]; r < 0x2800 || r > 0x28FF {
		t.Errorf("bottom-right cell %q is not braille", r)
	}
	for _, tc := range []struct {
		name         string
		train        []status.LossPoint
		width, hight int
	}{
		{"no data", nil, 40, 6},
		{"only NaN", []status.LossPoint{{Step: 1, Loss: status.Float(math.NaN())}}, 40, 6},
		{"too narrow", train, 10, 6},
		{"too low", train, 40, 1},
	} {
		if got := chart(tc.train, nil, tc.width, tc.hight, st, st); got != nil {
			t.Errorf("%s: drew %q", tc.name, got)
		}
	}
	// A single point or a flat curve still draws.
	if got := chart([]status.LossPoint{{Step: 5, Loss: 2}}, nil, 30, 4, st, st); len(got) != 5 {
		t.Errorf("single point: %q", got)
	}
}

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		in    []float64
		width int
		want  string
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8}, 10, "▁▂▃▄▅▆▇█"},
		{[]float64{5, 5}, 10, "██"},
		{[]float64{1, 2, 3}, 2, "▁█"},
		{nil, 10, ""},
	} {
		if got := sparkline(tc.in, tc.width); got != tc.want {
			t.Errorf("sparkline(%v, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

func TestQuitKeysCancel(t *testing.T) {
	for _, key := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("q")}, {Type: tea.KeyCtrlC}} {
		cancelled := false
		m := newModel(nil, nil, func() { cancelled = true }, lipgloss.NewRenderer(io.Discard))
		_, cmd := m.Update(key)
		if !cancelled || cmd == nil {
			t.Fatalf("%s: cancelled=%v", key, cancelled)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Fatalf("%s did not quit", key)
		}
	}
	cancelled := false
	m := newModel(nil, nil, func() { cancelled = true }, lipgloss.NewRenderer(io.Discard))
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")}); cancelled || cmd != nil {
		t.Fatal("another key quit")
	}
}

// TestRunQuitsOnKey runs the real program on a pipe: pressing q cancels
// the caller's context and Run returns nil.
func TestRunQuitsOnKey(t *testing.T) {
	rec := filled(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, inW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, rec, cancel, Options{Input: in, Output: io.Discard, Extra: []tea.ProgramOption{tea.WithoutSignalHandler()}})
	}()
	rec.SetProgress(2, 6, 48) // an update while running
	if _, err := inW.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not end the UI")
	}
	if ctx.Err() == nil {
		t.Fatal("q did not cancel the caller's context")
	}
	inW.Close()
}

// TestRunEndsWithContext: the client finishing (its context ending) closes the UI.
func TestRunEndsWithContext(t *testing.T) {
	rec := filled(t)
	ctx, cancel := context.WithCancel(context.Background())
	in, inW := io.Pipe()
	defer inW.Close()
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, rec, cancel, Options{Input: in, Output: &lockedWriter{w: &out}, Extra: []tea.ProgramOption{tea.WithoutSignalHandler()}})
	}()
	time.Sleep(200 * time.Millisecond)
	rec.SetRunState("Finished")
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("UI outlived its context")
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRenderMatchesView(t *testing.T) {
	s := filled(t).Snapshot()
	if got, want := Render(s, 100, 40), show(t, s, 100, 40); got != want {
		t.Fatalf("Render differs from the model's view:\n%s\n----\n%s", got, want)
	}
}
