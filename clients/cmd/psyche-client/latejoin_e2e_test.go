//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
)

// TestLateJoiners runs the committed run configs on localnet with three
// `psyche-client train` processes and starts more while the run goes on:
// one in Cooldown, one at a random moment of RoundTrain, one in Warmup,
// each in a later epoch. Every joiner must train within one epoch of
// joining (in the epoch after the one it started in), its digests must
// equal everyone else's at every step it trained or applied, and nobody may
// be dropped by a health check.
//
// config/smoke.toml is the seed's localnet flow: Warmup ends as soon as the
// three witnesses are ready, so a joiner gets a fraction of a second of it.
// Its variants cap every client's model uploads: so that fetching the model
// outlasts a round, and so that it outlasts the grace a new member has (the
// Warmup and two rounds): that joiner must leave the epoch before a health
// check could drop it, and train in the next one. config/tiny.toml (the
// demo's) has epochs shortened to fit a test.
func TestLateJoiners(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs with real client processes")
	}
	jitter := time.Duration(rand.Int64N(int64(3 * time.Second)))
	t.Logf("the RoundTrain joiners start %v into an epoch's first round", jitter)
	every := []joinerPlan{
		{name: "joiner in Cooldown", phase: coordinator.Cooldown},
		{name: "joiner in RoundTrain", phase: coordinator.RoundTrain, minEpoch: 1, jitter: jitter},
		{name: "joiner in Warmup", phase: coordinator.Warmup, minEpoch: 2},
	}
	for _, tc := range []struct {
		name, config string
		edits        map[string]string
		uploadRate   string // --p2p-max-model-upload-rate of every client
		plans        []joinerPlan
	}{
		// 3.4 MB of model in four 1 MiB chunks from three peers at 768 KiB/s
		// each: 2.7 s (one peer serves two chunks), while a round takes 1-2 s.
		{name: "smoke.toml slow download", config: "smoke.toml", edits: map[string]string{"total_steps": "48"}, uploadRate: "786432", plans: every},
		// At 128 KiB/s each: 16 s, past Cooldown, WaitingForMembers, Warmup
		// and two rounds (5-7 s).
		{name: "smoke.toml download past the grace", config: "smoke.toml", edits: map[string]string{"total_steps": "40"}, uploadRate: "131072",
			plans: []joinerPlan{{name: "joiner in Cooldown", phase: coordinator.Cooldown, stepsAside: true}}},
		// Epochs of 12 s instead of 120 (the timers that must fit in an
		// epoch, and the cold-start ramp, shortened with it).
		{name: "tiny.toml", config: "tiny.toml", edits: map[string]string{"total_steps": "60", "epoch_time": "12", "warmup_time": "10", "max_round_train_time": "10", "cold_start_warmup_steps": "0"}, plans: every},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lateJoiners(t, tc.config, tc.edits, tc.uploadRate, tc.plans)
		})
	}
}

// joinerPlan is when a joiner is started: in the given phase of an epoch
// at least minEpoch (and after the previous joiner's), after a delay when
// jitter is set. It must train in the epoch after the one it started in;
// one that stepsAside must instead leave the epoch it was first a member of
// and train in the first epoch that forms after it joined again.
type joinerPlan struct {
	name       string
	phase      coordinator.RunState
	minEpoch   uint32
	jitter     time.Duration
	stepsAside bool
}

func lateJoiners(t *testing.T, config string, edits map[string]string, uploadRate string, plans []joinerPlan) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	builtCLI(t)
	dir := t.TempDir()
	runID := "late-" + strings.TrimSuffix(config, ".toml")

	lr := startLocalRun(ctx, t, dir, runID, func(dataURL, root string) string {
		return runConfigFrom(t, config, dataURL, root, edits)
	})
	v, c, run, net := lr.v, lr.c, lr.run, lr.net

	rendezvous := filepath.Join(dir, "p2p")
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *trainProc {
		wallet, _ := keyFile(t, v, 2*solana.LAMPORTS_PER_SOL)
		args := append([]string{"train", "--run-id", runID, "-w", wallet, "--logs", "json", "--metrics-local-port", "0",
			"--threads", "1", "--micro-batch-size", "2",
			"--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", rendezvous}, net...)
		if uploadRate != "" {
			args = append(args, "--p2p-max-model-upload-rate", uploadRate)
		}
		return startTrain(t, name, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log"), tmp, args)
	}
	watch := watchRun(ctx, t, run, c, solana.PublicKey{})
	var procs []*trainProc
	for i := range 3 {
		procs = append(procs, start(fmt.Sprintf("client %d", i)))
	}

	type joiner struct {
		p       *trainProc
		started time.Time
		epoch   uint32 // the epoch it was started in
		plan    joinerPlan
	}
	var joiners []joiner
	for _, jp := range plans {
		after := jp.minEpoch
		if n := len(joiners); n > 0 {
			after = max(after, joiners[n-1].epoch+1)
		}
		at := watch.next(ctx, t, jp.name, func(o observation) bool { return o.phase == jp.phase && o.epoch >= after })
		if jp.jitter > 0 {
			time.Sleep(jp.jitter)
			at, _ = watch.latest()
		}
		p := start(jp.name)
		joiners = append(joiners, joiner{p: p, started: time.Now(), epoch: at.epoch, plan: jp})
		procs = append(procs, p)
		t.Logf("%s started in epoch %d, %s, step %d (round height %d)", jp.name, at.epoch, at.phase, at.step, at.height)
	}
	waitFinished(ctx, t, procs)
	end, err := run.FetchState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	watch.stop()
	obs := watch.all()
	starts := epochStartSteps(obs)

	// One replica: every step anyone trained or applied has one digest, and
	// every step of the run was trained by someone.
	digests := map[uint64]string{}
	for _, p := range procs {
		for step, d := range p.replicaDigests(t) {
			if other, ok := digests[step]; ok && other != d {
				t.Errorf("step %d: %s has digest %s, another client %s", step, p.name, d, other)
			}
			digests[step] = d
		}
		if n := len(p.linesWith("health check dropped")); n > 0 {
			t.Errorf("%s dropped %d members by health check; no honest joiner may be dropped", p.name, n)
		}
	}
	for step := uint64(1); step <= uint64(end.Config.TotalSteps); step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client logged step %d", step)
		}
	}

	shortest := time.Duration(0)
	for _, r := range roundDurations(obs) {
		if shortest == 0 || r.duration < shortest {
			shortest = r.duration
		}
	}
	for _, j := range joiners {
		trained := j.p.stepDigests(t)
		var own []uint64
		for step := range trained {
			own = append(own, step)
		}
		slices.Sort(own)
		want := j.p.trainsFor(t)
		if !j.plan.stepsAside && want != j.epoch+1 {
			t.Errorf("%s started in epoch %d joined for epoch %d", j.p.name, j.epoch, want)
		}
		next, ok := starts[want]
		if !ok || len(own) == 0 {
			t.Errorf("%s (started in epoch %d) trained no step (epoch start steps %v)", j.p.name, j.epoch, starts)
			continue
		}
		if after, ok := starts[want+1]; uint32(own[0]) < next || (ok && uint32(own[0]) >= after) {
			t.Errorf("%s started in epoch %d first trained step %d, not in epoch %d (epoch start steps %v)", j.p.name, j.epoch, own[0], want, starts)
		}
		left := len(j.p.linesWith("left the epoch"))
		if j.plan.stepsAside != (left > 0) {
			t.Errorf("%s left an epoch without the model %d times; want it to %v", j.p.name, left, j.plan.stepsAside)
		}
		first := j.p.firstLogTime(t, "step")
		fetch := j.p.fetchSeconds()
		t.Logf("%s: first trained step %d (epoch %d), %.1f s after start; model fetched from peers in %.1f s; steps applied before training: %d; left an epoch: %d",
			j.p.name, own[0], want, first.Sub(j.started).Seconds(), fetch, len(j.p.linesWith("applied")), left)
		if uploadRate != "" && time.Duration(fetch*float64(time.Second)) <= shortest {
			t.Errorf("%s fetched the model in %.1f s, not longer than a round (%v): the slow-download case was not exercised", j.p.name, fetch, shortest)
		}
	}
	t.Logf("run finished at step %d after %d epochs; shortest round %v; test took %.0f s", end.Progress.Step-1, end.Progress.Epoch, shortest, time.Since(began).Seconds())
}

// runConfigFrom is the committed config/<name> with the data served by the
// test and the given [config] keys replaced.
func runConfigFrom(t *testing.T, name, dataURL, dataRoot string, edits map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for key, val := range edits {
		re := regexp.MustCompile(`(?m)^` + key + `\s*=.*$`)
		if !re.MatchString(s) {
			t.Fatalf("config/%s has no %s", name, key)
		}
		s = re.ReplaceAllString(s, key+" = "+val)
	}
	loc := regexp.MustCompile(`(?m)^location\s*=.*$`)
	if len(loc.FindAllString(s, -1)) != 1 {
		t.Fatalf("config/%s: want exactly one data location", name)
	}
	return loc.ReplaceAllString(s, "location = "+strconv.Quote(dataURL)+"\nroot = "+strconv.Quote(dataRoot))
}

// replicaDigests is the digest the client logged for every step it trained
// ("step") or applied without training ("applied").
func (p *trainProc) replicaDigests(t *testing.T) map[uint64]string {
	t.Helper()
	out := p.stepDigests(t)
	for _, e := range p.linesWith("applied") {
		step, _ := e["step"].(float64)
		d, _ := e["digest"].(string)
		if prev, ok := out[uint64(step)]; ok && prev != d {
			t.Errorf("%s logged step %d with two digests", p.name, uint64(step))
		}
		out[uint64(step)] = d
	}
	return out
}

// trainsFor is the epoch the client's join made it a member of: the one
// that formed next (the current one, when it joined in WaitingForMembers).
// Its first join counts, or the first after it left an epoch without the
// model.
func (p *trainProc) trainsFor(t *testing.T) uint32 {
	t.Helper()
	var join map[string]any
	for _, e := range p.entries() {
		switch msg, _ := e["msg"].(string); {
		case strings.Contains(msg, "left the epoch"):
			join = nil
		case msg == "joined the run" && join == nil:
			join = e
		}
	}
	if join == nil {
		t.Fatalf("%s did not join (again)", p.name)
	}
	epoch, _ := join["epoch"].(float64)
	if join["phase"] == coordinator.WaitingForMembers.String() {
		return uint32(epoch)
	}
	return uint32(epoch) + 1
}

// linesWith lists the log entries whose message is msg.
func (p *trainProc) linesWith(msg string) []map[string]any {
	var out []map[string]any
	for _, e := range p.entries() {
		if m, _ := e["msg"].(string); m == msg || (msg != "step" && msg != "applied" && strings.Contains(m, msg)) {
			out = append(out, e)
		}
	}
	return out
}

// firstLogTime is the time of the first entry with message msg.
func (p *trainProc) firstLogTime(t *testing.T, msg string) time.Time {
	t.Helper()
	for _, e := range p.linesWith(msg) {
		if s, ok := e["time"].(string); ok {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err == nil {
				return ts
			}
		}
	}
	t.Errorf("%s logged no %q line with a time", p.name, msg)
	return time.Time{}
}

// fetchSeconds is how long the client's last model download from peers took.
func (p *trainProc) fetchSeconds() float64 {
	var s float64
	for _, e := range p.linesWith("fetched the model from peers") {
		s, _ = e["seconds"].(float64)
	}
	return s
}
