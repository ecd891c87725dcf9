package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/data/corpus"
)

// table runs the command on synthetic text and returns its output and the
// held-out loss column by "method clients", followed by " model" for other
// models than light and " mx8" for mx8 runs.
func table(t *testing.T, args ...string) (string, map[string]string) {
	t.Helper()
	var out, progress bytes.Buffer
	args = append([]string{"-data", "markov", "-eval-seqs", "4", "-threads", "2"}, args...)
	if err := run(context.Background(), args, &out, &progress); err != nil {
		t.Fatalf("run %q: %v\nprogress:\n%s", args, err, progress.String())
	}
	loss := map[string]string{}
	for _, f := range rows(out.String()) {
		key := f[colMethod] + " " + f[colClients]
		if f[colModel] != "light" {
			key += " " + f[colModel]
		}
		if f[colArith] != "fp32" {
			key += " " + f[colArith]
		}
		loss[key] = f[colLoss]
	}
	return out.String(), loss
}

// Columns of a row of the table as split by rows.
const (
	colMethod  = 0
	colModel   = 1
	colClients = 2
	colArith   = 3
	colOuter   = 6
	colLoss    = 7
	colRatio   = 10
)

// rows returns the table's rows, each split into fields ("12 s", the wall
// time, is two).
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 13 && strings.HasSuffix(f[colRatio], "x") {
			rs = append(rs, f)
		}
	}
	return rs
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
	for _, want := range []string{"fp32 ddp / this", "staleness", "loco5, 2 clients, fp32:", "demo top-8, 2 clients, fp32:", "targets", "SparseLoCo, 2 clients, fp32, >= 10,000x",
		"overlap target (with delay within +2.0% of without)", "stability (diverged: held-out loss above the untrained model's, or not finite), 14 runs at 1, 2 clients: none diverged"} {
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
		{"-arith", "bf16"},
		{"-configs", "huge"},
	} {
		var out, progress bytes.Buffer
		if err := run(context.Background(), append([]string{"-data", "markov"}, args...), &out, &progress); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// The table shows the outer lr as given.
func TestOuterLRAsGiven(t *testing.T) {
	out, _ := table(t, "-steps", "2", "-clients", "3", "-methods", "loco2", "-adam-lr", "", "-loco-outer-lr", "0.5")
	var got string
	for _, f := range rows(out) {
		if f[colMethod] == "loco2" {
			got = f[colOuter]
		}
	}
	if got != "0.5" {
		t.Errorf("outer lr %q, want 0.5 in:\n%s", got, out)
	}
}

// -arith runs every method once per numeric contract, names the contract in
// every row and compares each mx8 run with the same run in fp32; the default
// is fp32 alone. Bad lists fail with a line naming the flag and the value.
func TestArithFlag(t *testing.T) {
	common := []string{"-steps", "6", "-every", "3", "-clients", "2", "-methods", "ddp,demo,loco3", "-topk", "8", "-adam-lr", "2e-3"}
	out, loss := table(t, common...)
	for _, f := range rows(out) {
		if f[colArith] != "fp32" || f[colModel] != "light" {
			t.Errorf("default run: row %q, want model light and contract fp32", f)
		}
	}
	if strings.Contains(out, "mx8") {
		t.Errorf("default run mentions mx8:\n%s", out)
	}
	plot := filepath.Join(t.TempDir(), "steps.png")
	both, bothLoss := table(t, append(common, "-arith", "fp32,mx8", "-configs", "light,llama-light", "-plot-steps", plot)...)
	if n := len(rows(both)); n != 12 {
		t.Errorf("-arith fp32,mx8 with 2 configs and 3 methods: %d rows, want 12:\n%s", n, both)
	}
	for _, m := range []string{"ddp 2", "demo 2", "loco3 2", "ddp 2 llama-light", "demo 2 llama-light", "loco3 2 llama-light"} {
		if bothLoss[m] == "" || bothLoss[m+" mx8"] == "" {
			t.Errorf("no fp32 or mx8 row for %s in:\n%s", m, both)
		} else if bothLoss[m] == bothLoss[m+" mx8"] {
			t.Errorf("%s: mx8 and fp32 both %s: the contract had no effect", m, bothLoss[m])
		}
	}
	// The light fp32 rows are the default run's, bit for bit.
	for _, m := range []string{"ddp 2", "demo 2", "loco3 2"} {
		if bothLoss[m] != loss[m] {
			t.Errorf("%s: %s with -arith fp32,mx8, %s by default", m, bothLoss[m], loss[m])
		}
	}
	for _, want := range []string{"mx8 against fp32", "largest gap", "DeMo, llama-light, 2 clients, mx8, >= 1,000x"} {
		if !strings.Contains(both, want) {
			t.Errorf("output lacks %q:\n%s", want, both)
		}
	}
	if img, err := os.ReadFile(plot); err != nil || !bytes.HasPrefix(img, []byte("\x89PNG")) {
		t.Errorf("steps plot: %v, %d bytes", err, len(img))
	}

	for _, c := range []struct{ arith, want string }{
		{"bf16", `-arith: unknown numeric contract "bf16" (want fp32, mx8 or both, separated by commas)`},
		{"fp32,", `-arith: unknown numeric contract ""`},
		{"mx8,mx8", `-arith: "mx8" given twice`},
	} {
		var o, progress bytes.Buffer
		err := run(context.Background(), []string{"-data", "markov", "-arith", c.arith}, &o, &progress)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-arith %q: error %v, want one containing %q", c.arith, err, c.want)
		}
		if o.Len() > 0 {
			t.Errorf("-arith %q: printed %q before failing", c.arith, o.String())
		}
	}
}

// A run that ends above the untrained model's loss, or at NaN, is reported
// as diverged; one below is not.
func TestStabilityReportsDivergence(t *testing.T) {
	run := func(clients int, loss float64) result {
		return result{config: config{model: "light", arith: "fp32", m: method{kind: kindLoCo, h: 10, delay: true}, clients: clients, topk: 6},
			loss: loss, untrained: 5.5}
	}
	var b bytes.Buffer
	writeStability(&b, []result{run(2, 2.5), run(8, 12.1), run(16, math.NaN())}, 1)
	want := "3 runs at 2, 8, 16 clients: 2 diverged: loco10+delay, 8 clients, fp32 (12.1000, untrained 5.5000); " +
		"loco10+delay, 16 clients, fp32 (NaN, untrained 5.5000)\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("got %q, want it to end in %q", b.String(), want)
	}
	b.Reset()
	writeStability(&b, []result{run(2, 2.5)}, 1)
	if !strings.HasSuffix(b.String(), "1 runs at 2 clients: none diverged\n") {
		t.Errorf("got %q", b.String())
	}
}

// needCorpus prepares a convergence run on the State of the Union corpus:
// it fails, never skips, when the corpus that scripts/setup.sh installs is
// missing (a run that silently did not happen proves nothing), and runs
// under -short too.
func needCorpus(t *testing.T) {
	t.Helper()
	if _, err := corpus.SOTUDir(); err != nil {
		t.Fatalf("the State of the Union corpus is missing (run scripts/setup.sh): %v", err)
	}
}
