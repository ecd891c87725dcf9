package runmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestBackoffDoublesToMaxAndResets(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 5 * time.Second, Healthy: time.Minute}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next(time.Second))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	if d := b.Next(time.Minute); d != time.Second {
		t.Fatalf("after a healthy run: %v, want the initial delay", d)
	}
	if d := b.Next(0); d != 2*time.Second {
		t.Fatalf("then %v, want 2s", d)
	}
	if d := DefaultBackoff(); d.Initial != time.Second || d.Max != 5*time.Minute {
		t.Fatalf("default %+v", d)
	}
}

func TestDecide(t *testing.T) {
	for code, want := range map[int]Action{0: Finish, 1: Restart, -1: Restart, 2: GiveUp, 10: Update, 137: Restart} {
		if got := Decide(code); got != want {
			t.Errorf("Decide(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestRequiredVersion(t *testing.T) {
	out := "some log\npsyche-client: the run requires another client version: the run wants \"v2 \\\"x\\\"\", this is \"v1\"\n"
	if v := RequiredVersion(out); v != `v2 "x"` {
		t.Fatalf("RequiredVersion = %q", v)
	}
	if v := RequiredVersion("psyche-client: something else\n"); v != "" {
		t.Fatalf("RequiredVersion without the message = %q", v)
	}
}

func TestParseEnv(t *testing.T) {
	in := "# a comment\n\nexport A=1\nB = two words \nC=\"quoted # not a comment\"\nD='single'\nE=x # comment\nF=\n  G=\"\"  # c\n"
	got, err := ParseEnv(strings.NewReader(in), "f.env")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "B=two words", "C=quoted # not a comment", "D=single", "E=x", "F=", "G="}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, tc := range []struct {
		in   string
		line int
		msg  string
	}{
		{"A=1\nnovalue\n", 2, "not KEY=VALUE"},
		{"# x\n1A=2\n", 2, "not a variable name"},
		{"A=\"open\n", 1, "unterminated"},
		{"\n\nA='x' y\n", 3, "after the closing quote"},
		{"export =3\n", 1, "not a variable name"},
	} {
		_, err := ParseEnv(strings.NewReader(tc.in), "f.env")
		var e *EnvError
		if !errors.As(err, &e) || e.Line != tc.line || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), fmt.Sprintf("f.env:%d: ", tc.line)) {
			t.Errorf("%q: %v; want line %d, %q", tc.in, err, tc.line, tc.msg)
		}
	}
}

// fakeChild exits when told to, with the given exit.
type fakeChild struct {
	exit        chan Exit
	interrupted chan struct{}
	killed      chan struct{}
	once        sync.Once
}

func newFakeChild() *fakeChild {
	return &fakeChild{exit: make(chan Exit, 1), interrupted: make(chan struct{}, 1), killed: make(chan struct{}, 1)}
}
func (f *fakeChild) Wait() Exit { return <-f.exit }
func (f *fakeChild) Interrupt() error {
	f.interrupted <- struct{}{}
	return nil
}
func (f *fakeChild) Kill() error {
	f.once.Do(func() { f.killed <- struct{}{}; f.exit <- Exit{Code: -1, Status: "signal: killed"} })
	return nil
}

// harness runs the supervisor over scripted children with a fake clock.
type harness struct {
	cfg      Config
	children chan *fakeChild
	delays   chan time.Duration
	sigs     chan os.Signal
	mu       sync.Mutex
	log      []string
}

func newHarness() *harness {
	h := &harness{children: make(chan *fakeChild, 10), delays: make(chan time.Duration, 10), sigs: make(chan os.Signal, 2)}
	clock := time.Unix(0, 0)
	h.cfg = Config{
		Start: func(int) (Child, error) {
			c := newFakeChild()
			h.children <- c
			return c, nil
		},
		Backoff: Backoff{Initial: time.Second, Max: 4 * time.Second, Healthy: time.Minute},
		Signals: h.sigs,
		Logf: func(f string, a ...any) {
			h.mu.Lock()
			h.log = append(h.log, fmt.Sprintf(f, a...))
			h.mu.Unlock()
		},
		Now: func() time.Time { clock = clock.Add(time.Second); return clock },
		After: func(d time.Duration) <-chan time.Time {
			h.delays <- d
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		},
	}
	return h
}

func (h *harness) run() <-chan Result {
	out := make(chan Result, 1)
	go func() { out <- Run(h.cfg) }()
	return out
}

func TestRunRestartsWithBackoffUntilFinished(t *testing.T) {
	h := newHarness()
	res := h.run()
	for _, code := range []int{1, -1, 1, 0} {
		(<-h.children).exit <- Exit{Code: code, Status: fmt.Sprintf("code %d", code)}
	}
	if r := <-res; r.Code != 0 {
		t.Fatalf("result %+v", r)
	}
	close(h.delays)
	var delays []time.Duration
	for d := range h.delays {
		delays = append(delays, d)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	if !strings.Contains(strings.Join(h.log, "\n"), "the client exited (code -1)") {
		t.Fatalf("log %q", h.log)
	}
}

func TestRunBadInputIsNotRetried(t *testing.T) {
	h := newHarness()
	res := h.run()
	(<-h.children).exit <- Exit{Code: 2, Output: "x\npsyche-client: --device must be auto\n"}
	r := <-res
	if r.Code != ExitBadInput || !strings.HasSuffix(r.Msg, ": --device must be auto") || len(h.children) != 0 {
		t.Fatalf("result %+v, %d more starts", r, len(h.children))
	}
}

func TestRunVersionMismatch(t *testing.T) {
	msg := "psyche-client: the run requires another client version: the run wants \"v2\", this is \"v1\"\n"
	h := newHarness()
	res := h.run()
	(<-h.children).exit <- Exit{Code: 10, Output: msg}
	if r := <-res; r.Code != ExitVersionMismatch || !strings.Contains(r.Msg, `version "v2"`) || !strings.Contains(r.Msg, "--update-command") {
		t.Fatalf("without an update command: %+v", r)
	}

	h = newHarness()
	var updated []string
	h.cfg.Update = func(_ context.Context, v string) error { updated = append(updated, v); return nil }
	res = h.run()
	(<-h.children).exit <- Exit{Code: 10, Output: msg}
	(<-h.children).exit <- Exit{Code: 0}
	if r := <-res; r.Code != 0 || !reflect.DeepEqual(updated, []string{"v2"}) {
		t.Fatalf("result %+v, updates %q", r, updated)
	}

	h = newHarness()
	h.cfg.Update = func(context.Context, string) error { return errors.New("exit status 3") }
	res = h.run()
	(<-h.children).exit <- Exit{Code: 10, Output: msg}
	if r := <-res; r.Code != 1 || !strings.Contains(r.Msg, "update command failed: exit status 3") {
		t.Fatalf("failed update: %+v", r)
	}
}

func TestRunSignals(t *testing.T) {
	// One signal: the client is interrupted and leaves; exit 0.
	h := newHarness()
	res := h.run()
	c := <-h.children
	h.sigs <- syscall.SIGTERM
	<-c.interrupted
	c.exit <- Exit{Code: 0, Status: "exit status 0"}
	if r := <-res; r.Code != 0 {
		t.Fatalf("after one signal: %+v", r)
	}
	// Two: the client is killed.
	h = newHarness()
	res = h.run()
	c = <-h.children
	h.sigs <- os.Interrupt
	<-c.interrupted
	h.sigs <- os.Interrupt
	<-c.killed
	if r := <-res; r.Code != 1 || !strings.Contains(r.Msg, "killed") {
		t.Fatalf("after two signals: %+v", r)
	}
	// During an update: it is cancelled, and nothing restarts.
	h = newHarness()
	h.cfg.Update = func(ctx context.Context, _ string) error {
		h.sigs <- os.Interrupt
		<-ctx.Done()
		return ctx.Err()
	}
	res = h.run()
	(<-h.children).exit <- Exit{Code: 10}
	if r := <-res; r.Code != 0 || len(h.children) != 0 {
		t.Fatalf("signal during the update: %+v", r)
	}
}

func TestStartAndShell(t *testing.T) {
	var errOut strings.Builder
	c, err := Start(Command{Path: "sh", Args: []string{"-c", `echo "psyche-client: $X" >&2; exit 3`}, Env: []string{"X=from env"}, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	ex := c.Wait()
	if ex.Code != 3 || ex.Message() != "from env" || errOut.String() != "psyche-client: from env\n" {
		t.Fatalf("exit %+v, stderr %q", ex, errOut.String())
	}
	var out strings.Builder
	if err := Shell(context.Background(), `echo "$V"`, []string{"V=v9"}, &out, nil); err != nil || out.String() != "v9\n" {
		t.Fatalf("Shell: %v, %q", err, out.String())
	}
}
