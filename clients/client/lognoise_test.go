package client

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/internal/syncbuf"
)

// logEntries is what a client logged, at every level, as JSON lines.
type logEntries struct{ buf syncbuf.Buffer }

// capture makes sc log into l at Debug and above, with --device auto.
func (l *logEntries) capture(sc *simClient) {
	sc.config = func(c *Config) {
		c.Log = slog.New(slog.NewJSONHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.Device = DeviceAuto
	}
}

func (l *logEntries) all(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// levels counts the entries with message msg by level.
func (l *logEntries) levels(t *testing.T, msg string) map[string]int {
	n := map[string]int{}
	for _, e := range l.all(t) {
		if e["msg"] == msg {
			n[e["level"].(string)]++
		}
	}
	return n
}

// A client logs what its user should act on, once (issue 40, item 12).
// Through a run with a late joiner, each client says at Info once that it
// shares the model with joiners (it shares it again at each step a joiner
// may want it: Debug), and with --device auto and no GPU it says at most
// one Info line about the device, without "GPU requested".
func TestSimLogNoise(t *testing.T) {
	r := newSimRun(t, 3)
	logs := map[string]*logEntries{}
	add := func(name string) {
		l := &logEntries{}
		logs[name] = l
		r.add(name, true, l.capture)
	}
	add("a")
	add("b")
	if !r.runUntil(simLimit, func() bool { return r.sim.State().Progress.Step >= 6 }) {
		r.stuck("the run did not reach step 6")
	}
	add("late")
	r.finish()

	sharedAgain := false
	for name, l := range logs {
		sharing := l.levels(t, "sharing the model with joiners")
		if sharing["INFO"] != 1 || len(sharing) > 2 {
			t.Errorf("%s: sharing the model with joiners logged %v; want INFO once, then DEBUG", name, sharing)
		}
		sharedAgain = sharedAgain || sharing["DEBUG"] > 0
		var device []map[string]any
		for _, e := range l.all(t) {
			line, _ := json.Marshal(e)
			if strings.Contains(string(line), "GPU requested") {
				t.Errorf("%s: %s", name, line)
			}
			if strings.Contains(string(line), "GPU") || strings.Contains(string(line), "CUDA") {
				device = append(device, e)
			}
		}
		if len(device) > 1 || len(device) == 1 && device[0]["level"] != "INFO" {
			t.Errorf("%s: about the device: %v; want at most one INFO line", name, device)
		}
	}
	if !sharedAgain {
		t.Error("no client shared the model twice: the test did not show the repeats")
	}
}

// A warmup_witness that lands after the Warmup ended (a late joiner's
// race) is refused with WrongPhase by the program: nothing to act on, so
// it is logged at Debug, not as a warning.
func TestSimLateWarmupWitnessIsQuiet(t *testing.T) {
	r := newSimRun(t, 3)
	var l logEntries
	r.add("a", true)
	r.add("b", true)
	c := r.add("c", true, l.capture)
	if !r.runUntil(simLimit, func() bool { return r.phase() == coordinator.RoundTrain }) {
		r.stuck("the run did not reach RoundTrain")
	}
	c.c.warmup(r.ctx, coordinator.NewView(r.sim.State(), c.wallet.PublicKey(), r.now))
	if n := l.levels(t, "warmup_witness failed"); n["DEBUG"] != 1 || len(n) != 1 {
		t.Errorf("warmup_witness in RoundTrain logged %v; want DEBUG once", n)
	}
}
