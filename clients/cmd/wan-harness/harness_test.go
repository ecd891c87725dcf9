package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests need neither root nor namespaces; the harness itself is
// exercised by `wan-harness ci` (scripts/wan.sh ci).

func TestParseShape(t *testing.T) {
	s, err := parseShape("100/50ms/0.5")
	if err != nil || s.RateMbit != 100 || s.RTT != 50*time.Millisecond || s.Loss != 0.005 {
		t.Fatalf("parseShape: %+v, %v", s, err)
	}
	if s.String() != "100Mbit/50ms/0.5%" {
		t.Errorf("String %q", s.String())
	}
	if s, err := parseShape("unshaped"); err != nil || s != Unshaped {
		t.Errorf("unshaped: %+v %v", s, err)
	}
	for _, bad := range []string{"100", "x/50ms/0", "100/50/0", "100/50ms/101", "-1/1ms/0"} {
		if _, err := parseShape(bad); err == nil {
			t.Errorf("parseShape(%q) accepted", bad)
		}
	}
}

func TestTBFArgs(t *testing.T) {
	got := strings.Join(tbfArgs(Shape{RateMbit: 100, RTT: 50 * time.Millisecond}), " ")
	// 100 Mbit/s = 12.5 MB/s: burst 4 ms = 50,000 B, queue 50 ms = 625,000 B.
	if got != "tbf rate 100000kbit burst 50000 limit 625000" {
		t.Errorf("tbf %q", got)
	}
	got = strings.Join(tbfArgs(Shape{RateMbit: 10, RTT: 10 * time.Millisecond}), " ")
	if got != "tbf rate 10000kbit burst 15000 limit 65536" {
		t.Errorf("tbf %q", got)
	}
}

func TestApplyOverrides(t *testing.T) {
	src := "# c\n[config]\nepoch_time = 120 # s\ntotal_steps = 200\n\n[model.data]\nkind = \"http\"\nlocation = \"x\"\n\n[model.lr]   # comment\nschedule = \"cosine\"\n"
	out, err := applyOverrides(src, map[string]string{
		"config.total_steps":  "20",
		"model.data.location": `"http://10.99.0.2:9000/"`,
		"model.data.root":     `"ab"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "# c\n[config]\nepoch_time = 120 # s\ntotal_steps = 20\n\n[model.data]\nkind = \"http\"\nlocation = \"http://10.99.0.2:9000/\"\nroot = \"ab\"\n\n[model.lr]   # comment\nschedule = \"cosine\"\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := applyOverrides(src, map[string]string{"nosuch.key": "1"}); err == nil {
		t.Error("an override without its section was accepted")
	}
}

// Every config in config/ takes the overrides the scenarios apply.
func TestOverridesFitTheConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../../config/*.toml")
	if len(files) == 0 {
		t.Fatal("no run configs in config/")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		over := map[string]string{"model.data.location": `"u"`, "model.data.root": `"r"`, "config.total_steps": "5", "config.init_min_clients": "4"}
		for k, v := range smallOverrides {
			over[k] = v
		}
		maps.Copy(over, unverified)
		out, err := applyOverrides(string(src), over)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !strings.Contains(out, "\nroot = \"r\"\n") || strings.Count(out, "total_steps = 5") != 1 || strings.Count(out, "verification_percent = 0") != 1 {
			t.Errorf("%s: overrides not applied:\n%s", f, out)
		}
	}
}

func TestClientAddr(t *testing.T) {
	for i, want := range map[int]string{1: "10.99.1.1", 250: "10.99.1.250", 251: "10.99.2.1", 256: "10.99.2.6"} {
		if got := clientAddr(i); got != want {
			t.Errorf("clientAddr(%d) = %s, want %s", i, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tb := newTable("a", "bb")
	tb.Row("xyz", 1)
	tb.Print(&b)
	want := "| a   | bb |\n| --- | -- |\n| xyz | 1  |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestNamespacePattern(t *testing.T) {
	for _, ok := range []string{"pw1a2b-hub", "pw0000-c001", "pw00ff-nat1-gw"} {
		if !nsPattern.MatchString(ok) {
			t.Errorf("%s not matched", ok)
		}
	}
	for _, no := range []string{"pw1a2-hub", "xpw1a2b-hub", "pwzzzz-hub", "other"} {
		if nsPattern.MatchString(no) {
			t.Errorf("%s matched", no)
		}
	}
}

func TestLogParse(t *testing.T) {
	l := &clientLog{logData: logData{steps: map[uint64]stepEvent{}}}
	l.parse([]byte(`{"time":"2026-12-04T12:51:28.193611473Z","level":"INFO","msg":"step","step":3,"loss":5.5,"applied":3,"of":4,"digest":"ab","train_seconds":0.5,"round_seconds":2.1,"round_overhead_seconds":1.4}`))
	l.parse([]byte(`{"time":"2026-12-04T12:51:29Z","level":"WARN","msg":"witness failed","err":"x"}`))
	l.parse([]byte(`{"time":"2026-12-04T12:51:30Z","level":"INFO","msg":"the run is finished","step":3}`))
	d := l.snapshot()
	e := d.steps[3]
	if !e.Trained || e.Applied != 3 || e.Of != 4 || e.Digest != "ab" || e.Round != 2.1 || d.warnings != 1 || d.finished.IsZero() {
		t.Errorf("parsed %+v %+v", e, d)
	}
}

func TestProcessStart(t *testing.T) {
	start, ok := processStart(os.Getpid())
	if !ok || start.After(time.Now().Add(time.Second)) || time.Since(start) > time.Hour {
		t.Fatalf("processStart(self) = %v, %v", start, ok)
	}
	f := filepath.Join(t.TempDir(), "x.pid")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !isHarness(os.Getpid(), f) {
		t.Error("this process started before its state file, but is not recognised")
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	if isHarness(os.Getpid(), f) {
		t.Error("a process younger than the state file is taken for its writer")
	}
}
