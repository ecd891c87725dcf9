package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// table runs the command on synthetic text and returns its output and the
// held-out loss column by "method clients".
func table(t *testing.T, args ...string) (string, map[string]string) {
	t.Helper()
	var out, progress bytes.Buffer
	args = append([]string{"-data", "markov", "-eval-seqs", "4", "-threads", "2"}, args...)
	if err := run(context.Background(), args, &out, &progress); err != nil {
		t.Fatalf("run %q: %v\nprogress:\n%s", args, err, progress.String())
	}
	loss := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 11 && strings.HasSuffix(f[8], "x") {
			loss[f[0]+" "+f[1]] = f[5]
		}
	}
	return out.String(), loss
}

// Every method runs for every client count, the table and the plot come out,
// and a delayed run reports its staleness.
func TestEveryMethodRuns(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "loss.png")
	out, loss := table(t, "-steps", "10", "-every", "5", "-clients", "1,2",
		"-methods", "ddp,demo,demo+delay,loco5,loco5+delay,loco10", "-topk", "8", "-plot", plot)
	for _, n := range []string{"1", "2"} {
		for _, m := range []string{"ddp", "demo", "demo+delay", "loco5", "loco5+delay", "loco10"} {
			if loss[m+" "+n] == "" {
				t.Errorf("no row for %s with %s clients in:\n%s", m, n, out)
			}
		}
	}
	for _, want := range []string{"fp32 ddp / this", "staleness", "loco5, 2 clients:", "demo top-8, 2 clients:", "targets", "SparseLoCo, 2 clients, >= 10,000x"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	img, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(img, []byte("\x89PNG")) {
		t.Errorf("plot: %v, %d bytes", err, len(img))
	}
}

// With a single round nothing is stale: the delayed run applies its pending
// round at the end and must end where the undelayed one does, bit for bit
// (the table's four decimals); with two rounds the delay shows.
func TestDelayAppliesPendingRound(t *testing.T) {
	_, one := table(t, "-steps", "4", "-clients", "2", "-methods", "demo,demo+delay,loco4,loco4+delay", "-warmup", "0", "-adam-lr", "")
	_, two := table(t, "-steps", "1", "-clients", "2", "-methods", "demo,demo+delay", "-warmup", "0", "-adam-lr", "")
	if one["loco4 2"] == "" || one["loco4 2"] != one["loco4+delay 2"] {
		t.Errorf("one round: loco4 %q, loco4+delay %q: want equal", one["loco4 2"], one["loco4+delay 2"])
	}
	if two["demo 2"] == "" || two["demo 2"] != two["demo+delay 2"] {
		t.Errorf("one step: demo %q, demo+delay %q: want equal", two["demo 2"], two["demo+delay 2"])
	}
	if one["demo 2"] == one["demo+delay 2"] {
		t.Errorf("four steps: demo and demo+delay both %q: the delay had no effect", one["demo 2"])
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-methods", "ddp+delay"},
		{"-methods", "loco0"},
		{"-methods", "sgd"},
		{"-methods", "loco7", "-steps", "10"},
		{"-clients", "0"},
		{"-topk", "0", "-methods", "demo"},
		{"-topk", "99999", "-methods", "demo"},
		{"-loco-bits", "3", "-methods", "loco5", "-steps", "10"},
	} {
		var out, progress bytes.Buffer
		if err := run(context.Background(), append([]string{"-data", "markov"}, args...), &out, &progress); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// -loco-outer-lr is per client unless -loco-outer-absolute; the table shows
// the outer lr applied.
func TestOuterLRPerClient(t *testing.T) {
	for _, c := range []struct {
		extra []string
		want  string
	}{{nil, "1.5"}, {[]string{"-loco-outer-absolute"}, "0.5"}} {
		args := append([]string{"-steps", "2", "-clients", "3", "-methods", "loco2", "-adam-lr", "", "-loco-outer-lr", "0.5"}, c.extra...)
		out, _ := table(t, args...)
		var got string
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 11 && f[0] == "loco2" {
				got = f[4]
			}
		}
		if got != c.want {
			t.Errorf("%q: outer lr %q, want %s in:\n%s", c.extra, got, c.want, out)
		}
	}
}
