//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

const killRunID = "kill-restart"

// killRunConfig is a light run whose epochs hold only a few rounds
// (epoch_time 12 s from the start of Warmup, then two drain rounds: about 14
// steps when rounds take 1 s, 11 measured on 2 busy cores; the epoch with
// the kill about 4), so 24 steps span at least three epochs: the first
// trains with 3 clients, one is killed in the second, and it trains again
// from the third. A round whose member died lasts up to
// max_round_train_time + round_witness_time (the witnesses wait for the
// missing payload until 2 s before the deadline); a healthy one 1-3 s.
// cooldown_time 1 can make Cooldown last a few hundred milliseconds (the
// chain clock counts seconds): clients must checkpoint the epoch anyway.
const killRunConfig = `
[config]
waiting_for_members_extra_time = 2
warmup_time = 10
max_round_train_time = 10
round_witness_time = 1
cooldown_time = 1
epoch_time = 12
total_steps = 24
init_min_clients = 3
min_clients = 2
witness_nodes = 0
global_batch_size_start = 8
global_batch_size_end = 8
global_batch_size_warmup_tokens = 0

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 4
n_head = 4
n_embd = 128
max_seq_len = 128
data_type = "pretraining"
cold_start_warmup_steps = 0

[model.checkpoint]
kind = "ephemeral"

[model.data]
kind = "http"
location = "%s"
root = "%s"

[model.lr]
schedule = "cosine"
learning_rate = 0.003
final_learning_rate = 0.001
warmup_steps = 2
decay_steps = 24

[model.optimizer]
kind = "distro"
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.999
compression_topk = 32
compression_chunk = 64
quantize_1bit = true
`

// Timers of killRunConfig the assertions use.
const (
	killMaxRoundTrain = 10 * time.Second
	killRoundWitness  = 1 * time.Second
	// tickMargin covers the chain clock's one-second granularity and the
	// clients' tick latency (250 ms polls, ticks spread 2/n among n members)
	// on a busy machine.
	tickMargin = 4 * time.Second
)

// TestTrainKillAndRestart runs three `psyche-client train` processes on
// localnet, SIGKILLs one in the middle of the second epoch (no leave_run) and
// restarts it with the same wallet and checkpoint directory.
// The survivors must drop it by health check within 2 rounds, no round may
// outlast max_round_train_time + round_witness_time (+ tick margin), the
// restarted client must train again from the next epoch and match everyone's
// replica digest at every step it trains, the checkpoints it wrote before
// the kill must survive intact and loadable, and every process must see the
// run finish and exit 0.
func TestTrainKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	builtCLI(t)
	dir := t.TempDir()

	lr := startLocalRun(ctx, t, dir, killRunID, func(dataURL, root string) string { return fmt.Sprintf(killRunConfig, dataURL, root) })
	v, c, run, net := lr.v, lr.c, lr.run, lr.net

	const n = 3
	rendezvous := filepath.Join(dir, "p2p")
	wallets, keys, idents, ckDirs := make([]string, n), make([]solana.PrivateKey, n), make([]string, n), make([]string, n)
	for i := range n {
		wallets[i], keys[i] = keyFile(t, v, 2*solana.LAMPORTS_PER_SOL)
		idents[i] = filepath.Join(dir, fmt.Sprintf("p2p-%d.key", i))
		mustRunCLI(t, "create-static-p2p-identity", idents[i])
		ckDirs[i] = filepath.Join(dir, fmt.Sprintf("checkpoints-%d", i))
	}
	// The client's work files go to a temporary directory of the test: a
	// SIGKILLed process cannot remove its own.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	trainArgs := func(i int) []string {
		return append([]string{"train", "--run-id", killRunID, "-w", wallets[i], "-i", idents[i],
			"--logs", "json", "--metrics-local-port", "0", "--checkpoint-dir", ckDirs[i], "--keep-steps", "20",
			"--threads", "1", "--micro-batch-size", "2",
			"--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", rendezvous}, net...)
	}
	procs := make([]*trainProc, n)
	for i := range n {
		procs[i] = startTrain(t, fmt.Sprintf("client %d", i), filepath.Join(dir, fmt.Sprintf("client-%d.log", i)), tmp, trainArgs(i))
	}
	const victim = n - 1
	watch := watchRun(ctx, t, run, c, keys[victim].PublicKey())

	// Epoch 0: all three train (their own /status says so).
	waitFor(t, ctx, "all 3 clients training in epoch 0", procs, func() bool {
		for _, p := range procs {
			s, ok := p.status()
			if !ok || s.Epoch != 0 || (s.RunState != "RoundTrain" && s.RunState != "RoundWitness") || s.ClientsInEpoch != n || s.Role == "" {
				return false
			}
		}
		return true
	})

	// Kill the victim in the second round (or later) of epoch 1, after it
	// wrote its end-of-epoch-0 checkpoint.
	waitFor(t, ctx, "epoch 1 past its first round", procs, func() bool {
		o, ok := watch.latest()
		return ok && o.epoch >= 1 && o.inRound() && o.height >= 1
	})
	before, err := run.FetchState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	killEpoch, killHeight := before.Progress.Epoch, coordinator.CurrentRound(before).Height
	if killEpoch != 1 || watchedState(before, keys[victim].PublicKey()) != "healthy" {
		t.Fatalf("at the kill: epoch %d, victim %s; want epoch 1 with the victim a healthy member (the epochs are longer than configured?)",
			killEpoch, watchedState(before, keys[victim].PublicKey()))
	}
	if err := procs[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	<-procs[victim].done
	t.Logf("killed client %d (SIGKILL) in epoch %d, round height %d, step %d, %s", victim, killEpoch, killHeight,
		coordinator.CurrentRound(before).Step, coordinator.Phase(before))
	preKill := checkpointFiles(t, ckDirs[victim])
	if len(preKill) == 0 {
		t.Fatalf("client %d wrote no checkpoint in epoch 0 (expected one at its Cooldown)", victim)
	}

	// The survivors drop it by health check within 2 rounds.
	survivors := procs[:victim]
	var dropped observation
	waitFor(t, ctx, "the killed client to be dropped", survivors, func() bool {
		o, ok := watch.latest()
		if ok && o.epoch == killEpoch && o.victim != "healthy" {
			dropped = o
			return true
		}
		if ok && o.epoch > killEpoch {
			t.Fatalf("epoch %d ended with the killed client still healthy", killEpoch)
		}
		return false
	})
	t.Logf("dropped: round height %d (%d rounds after the kill at height %d), %.1f s after the kill, state %s",
		dropped.height, dropped.height-killHeight, killHeight, dropped.seen.Sub(killedAt).Seconds(), dropped.victim)
	if dropped.victim == "left" {
		t.Error("the killed client left the run; a SIGKILLed process cannot send leave_run")
	}
	if dropped.height-killHeight > 2 {
		t.Errorf("the killed client was dropped in round %d, more than 2 rounds after the kill (round %d)", dropped.height, killHeight)
	}

	// Restart it with the same wallet, p2p identity and checkpoint directory.
	restarted := startTrain(t, fmt.Sprintf("client %d (restarted)", victim), filepath.Join(dir, fmt.Sprintf("client-%d-restarted.log", victim)), tmp, trainArgs(victim))
	waitFinished(ctx, t, append(slices.Clone(survivors), restarted))
	end, err := run.FetchState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if coordinator.Phase(end) != coordinator.Finished {
		t.Fatalf("the run ended %v, want Finished", coordinator.Phase(end))
	}
	watch.stop()
	obs := watch.all()

	// Every step's digest agrees among all clients that logged it, and every
	// step of the run was logged by someone.
	digests := map[uint64]string{}
	perClient := map[*trainProc]map[uint64]string{}
	for _, p := range append(slices.Clone(procs), restarted) {
		steps := p.stepDigests(t)
		perClient[p] = steps
		for step, d := range steps {
			if other, ok := digests[step]; ok && other != d {
				t.Errorf("step %d: %s has digest %s, another client %s", step, p.name, d, other)
			}
			digests[step] = d
		}
	}
	total := uint64(end.Config.TotalSteps)
	for step := uint64(1); step <= total; step++ {
		if _, ok := digests[step]; !ok {
			t.Errorf("no client logged step %d", step)
		}
	}

	// The restarted client rejoined at the next epoch and trained its rounds.
	starts := epochStartSteps(obs)
	next, ok := starts[killEpoch+1]
	if !ok {
		t.Fatalf("no epoch after the kill was observed (epoch start steps %v)", starts)
	}
	var own []uint64
	for step := range perClient[restarted] {
		own = append(own, step)
	}
	slices.Sort(own)
	if len(own) == 0 {
		t.Fatal("the restarted client trained no step")
	}
	if uint32(own[0]) != next {
		t.Errorf("the restarted client's first step is %d; epoch %d started at step %d", own[0], killEpoch+1, next)
	}
	// It registers at once (during the kill epoch, to follow the run and
	// fetch the model) or, restarted between epochs, for the next one.
	joined := restarted.joinedEpochs(t)
	if len(joined) == 0 || joined[0] > uint64(killEpoch+1) {
		t.Errorf("the restarted client joined epochs %v, want %d or %d first", joined, killEpoch, killEpoch+1)
	}
	t.Logf("restarted client: joined epoch %v, trained steps %d..%d (%d), every digest equal to the survivors'",
		joined, own[0], own[len(own)-1], len(own))

	// No round stalled: each ended within max_round_train_time +
	// round_witness_time + tick margin (chain timestamps, 1 s resolution).
	limit := killMaxRoundTrain + killRoundWitness + tickMargin
	rounds := roundDurations(obs)
	var worst roundSpan
	var killRounds []string
	for _, r := range rounds {
		if r.duration > worst.duration {
			worst = r
		}
		if r.epoch == killEpoch {
			killRounds = append(killRounds, fmt.Sprintf("h%d:%ds", r.height, int(r.duration.Seconds())))
		}
		if r.duration > limit {
			t.Errorf("epoch %d round %d (step %d) lasted %v, over %v", r.epoch, r.height, r.step, r.duration, limit)
		}
	}
	missing := 0
	for _, o := range obs {
		if o.phase == coordinator.RoundTrain && !slices.ContainsFunc(rounds, func(r roundSpan) bool { return r.epoch == o.epoch && r.height == o.height }) {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d observations of rounds whose end the chain watcher missed", missing)
	}
	t.Logf("rounds: %d measured, longest %v (epoch %d, height %d), limit %v; epoch %d rounds: %s",
		len(rounds), worst.duration, worst.epoch, worst.height, limit, killEpoch, strings.Join(killRounds, " "))

	// The checkpoints written before the kill are still there, unchanged,
	// and hold the replica of their step; nothing else is left in the
	// directory than complete checkpoints.
	after := checkpointFiles(t, ckDirs[victim])
	for name, sum := range preKill {
		if after[name] != sum {
			t.Errorf("checkpoint %s changed or vanished after the restart", name)
		}
	}
	for i, d := range ckDirs {
		for name := range checkpointFiles(t, d) {
			checkCheckpoint(t, filepath.Join(d, name), digests)
		}
		if i == victim {
			t.Logf("client %d checkpoints: %d before the kill, %d at the end", i, len(preKill), len(after))
		}
	}
	t.Logf("run finished at step %d after %d epochs; test took %.0f s", end.Progress.Step-1, end.Progress.Epoch, time.Since(began).Seconds())
}

// localRun is a permissionless run on a fresh localnet with the Authorizer
// and the Coordinator deployed, its config applied and resumed, training
// from a `data serve` process.
type localRun struct {
	v   *localnet.Validator
	c   *chain.Client
	run coordinator.Run
	net []string // the CLI's --rpc and --ws-rpc flags
	// admin is the run authority's wallet, run id and network flags.
	admin []string
}

// startLocalRun creates runID with the config config(dataURL, dataRoot)
// returns for the data it serves.
func startLocalRun(ctx context.Context, t *testing.T, dir, runID string, config func(dataURL, root string) string) localRun {
	t.Helper()
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL}
	dataURL, root := serveTrainSplit(t, dir)
	cfgPath := filepath.Join(dir, "run.toml")
	if err := os.WriteFile(cfgPath, []byte(config(dataURL, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	adminPath, _ := keyFile(t, v, 10*solana.LAMPORTS_PER_SOL)
	admin := append([]string{"-w", adminPath, "--run-id", runID}, net...)
	mustRunCLI(t, append([]string{"create-run", "--permissionless"}, admin...)...)
	mustRunCLI(t, append([]string{"update-config", "--config-path", cfgPath}, admin...)...)
	mustRunCLI(t, append([]string{"set-paused", "--resume"}, admin...)...)
	c := programtest.Chain(t, v)
	run, _, err := coordinator.Default().Open(ctx, c, runID)
	if err != nil {
		t.Fatal(err)
	}
	return localRun{v: v, c: c, run: run, net: net, admin: admin}
}

// waitFinished waits for every process to exit, and fails unless each
// exited 0 (they do when the run is Finished).
func waitFinished(ctx context.Context, t *testing.T, procs []*trainProc) {
	t.Helper()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			t.Fatalf("%s did not see the run finish: %v", p.name, ctx.Err())
		}
		if p.err != nil {
			t.Fatalf("%s: %v", p.name, p.err)
		}
	}
}

// mustRunCLI runs the built psyche-client and fails the test on a non-zero exit.
func mustRunCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, nil, args...)
	if code != 0 {
		t.Fatalf("psyche-client %s: exit %d: %s", args[0], code, errOut)
	}
	return out
}

// serveTrainSplit prepares the byte-level train split of the 1990s addresses
// with `data prepare` and serves it with a `data serve` process; it returns
// the server's URL and the dataset root.
func serveTrainSplit(t *testing.T, dir string) (url, root string) {
	t.Helper()
	src, err := corpus.SOTUDir()
	if err != nil {
		t.Skipf("corpus missing (run scripts/setup.sh): %v", err)
	}
	in := filepath.Join(dir, "corpus")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(src, "199*.txt"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no 1990s addresses in %s: %v", src, err)
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, filepath.Base(name)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "train")
	printed := mustRunCLI(t, "data", "prepare", "--input", in, "--split", "train", "--tokenizer", "byte", "--seq-len", "128", "--out", out)
	m := regexp.MustCompile(`(?m)^root\s+([0-9a-f]{64})$`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("data prepare printed no root:\n%s", printed)
	}
	srv := exec.Command(builtCLI(t), "data", "serve", "--dir", out, "--port", "0")
	pipe, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		t.Fatalf("data serve printed nothing: %v", err)
	}
	url = regexp.MustCompile(`http://\S+/`).FindString(line)
	if url == "" {
		t.Fatalf("data serve did not print its URL: %q", line)
	}
	return url, m[1]
}

// trainProc is one `psyche-client train` process logging JSON to a file.
type trainProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error

	mu        sync.Mutex
	statusURL string
}

func startTrain(t *testing.T, name, logPath, tmp string, args []string) *trainProc {
	t.Helper()
	return startTrainWith(t, builtCLI(t), name, logPath, tmp, args)
}

// startTrainWith is startTrain with another psyche-client binary.
func startTrainWith(t *testing.T, bin, name, logPath, tmp string, args []string) *trainProc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &trainProc{name: name, log: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s: last lines of %s:\n%s", p.name, p.log, tailLines(p.log, 30))
		}
	})
	return p
}

// entries parses the JSON log lines written so far (other lines are skipped).
func (p *trainProc) entries() []map[string]any {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return nil
	}
	var out []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// stepDigests is the replica digest the client logged for each step it applied.
func (p *trainProc) stepDigests(t *testing.T) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, e := range p.entries() {
		if e["msg"] != "step" {
			continue
		}
		step, ok1 := e["step"].(float64)
		d, ok2 := e["digest"].(string)
		if !ok1 || !ok2 || len(d) != 64 {
			t.Errorf("%s: malformed step line %v", p.name, e)
			continue
		}
		if prev, ok := out[uint64(step)]; ok && prev != d {
			t.Errorf("%s logged step %d twice with different digests", p.name, uint64(step))
		}
		out[uint64(step)] = d
	}
	return out
}

// joinedEpochs lists the epochs the client logged joining.
func (p *trainProc) joinedEpochs(t *testing.T) []uint64 {
	t.Helper()
	var out []uint64
	for _, e := range p.entries() {
		if e["msg"] == "joined the run" {
			if ep, ok := e["epoch"].(float64); ok {
				out = append(out, uint64(ep))
			}
		}
	}
	return out
}

// clientStatus is the part of GET /status the test reads.
type clientStatus struct {
	RunState       string `json:"run_state"`
	Epoch          uint64 `json:"epoch"`
	ClientsInEpoch int    `json:"clients_in_epoch"`
	Role           string `json:"role"`
}

// status reads the client's /status, once its log named the metrics endpoint.
func (p *trainProc) status() (clientStatus, bool) {
	p.mu.Lock()
	url := p.statusURL
	p.mu.Unlock()
	if url == "" {
		for _, e := range p.entries() {
			if e["msg"] == "metrics endpoint listening" {
				if u, ok := e["url"].(string); ok {
					url = strings.TrimSuffix(u, "/metrics") + "/status"
				}
			}
		}
		if url == "" {
			return clientStatus{}, false
		}
		p.mu.Lock()
		p.statusURL = url
		p.mu.Unlock()
	}
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return clientStatus{}, false
	}
	defer resp.Body.Close()
	var s clientStatus
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		return clientStatus{}, false
	}
	return s, true
}

func tailLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitFor polls cond until it holds; it fails if ctx ends or one of procs exits first.
func waitFor(t *testing.T, ctx context.Context, what string, procs []*trainProc, cond func() bool) {
	t.Helper()
	for !cond() {
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("%s exited (%v) while waiting for %s", p.name, p.err, what)
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// observation is the run's state when the chain watcher saw it change.
type observation struct {
	seen   time.Time
	epoch  uint32
	height uint32
	step   uint32
	phase  coordinator.RunState
	start  int64  // the chain's unix time at which the phase began
	victim string // the watched member: healthy, dropped, left or absent
	// epochStart is the epoch's first step.
	epochStart uint32
}

// watchedState is key's state in the current epoch: healthy, dropped, left,
// or absent (never in it, or removed when the next round started).
func watchedState(s *coordinator.State, key solana.PublicKey) string {
	i := coordinator.MemberIndex(s, key)
	if i < 0 {
		return "absent"
	}
	return coordinator.MemberStateName(coordinator.Members(s)[i].State)
}

// runWatch follows the coordinator account with accountSubscribe (every
// change, so a Warmup of a fraction of a second is seen) and, in case the
// subscription drops, reads it every 200 ms; it keeps each distinct state,
// in nonce order.
type runWatch struct {
	mu      sync.Mutex
	obs     []observation
	nonce   uint64
	waiters []waiter
	cancel  context.CancelFunc
	done    chan struct{}
}

// waiter is a wait for the first new observation that satisfies cond.
type waiter struct {
	cond func(observation) bool
	ch   chan observation
}

func watchRun(ctx context.Context, t *testing.T, run coordinator.Run, c *chain.Client, victim solana.PublicKey) *runWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &runWatch{cancel: cancel, done: make(chan struct{})}
	record := func(s *coordinator.State) {
		r := coordinator.CurrentRound(s)
		o := observation{seen: time.Now(), epoch: s.Progress.Epoch, height: r.Height, step: s.Progress.Step,
			phase: coordinator.Phase(s), start: s.RunStateStart, victim: watchedState(s, victim), epochStart: s.Epoch.StartStep}
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := len(w.obs); s.Nonce >= w.nonce && (n == 0 || !sameObservation(w.obs[n-1], o)) {
			w.obs = append(w.obs, o)
			w.waiters = slices.DeleteFunc(w.waiters, func(wt waiter) bool {
				if wt.cond(o) {
					wt.ch <- o
					return true
				}
				return false
			})
		}
		w.nonce = max(w.nonce, s.Nonce)
	}
	subscribed := make(chan struct{})
	go func() {
		defer close(subscribed)
		for ctx.Err() == nil {
			_ = c.SubscribeAccount(ctx, run.Account, func(u chain.AccountUpdate) {
				if s, err := coordinator.DecodeState(u.Data); err == nil {
					record(s)
				}
			})
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	go func() {
		defer close(w.done)
		defer func() { <-subscribed }()
		for ctx.Err() == nil {
			if s, err := run.FetchState(ctx, c); err == nil {
				record(s)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// inRound says whether o is in either phase of a round. A waitFor on
// latest samples every 200 ms and a RoundTrain can end within 25 ms of its
// start (waiting for one missed two whole epochs on a loaded 2-core CI
// machine); a RoundWitness lasts the witness time.
func (o observation) inRound() bool {
	return o.phase == coordinator.RoundTrain || o.phase == coordinator.RoundWitness
}

func sameObservation(a, b observation) bool {
	return a.epoch == b.epoch && a.height == b.height && a.step == b.step && a.phase == b.phase && a.start == b.start && a.victim == b.victim
}

func (w *runWatch) stop() {
	w.cancel()
	<-w.done
}

// next waits for the first state from now on that satisfies cond, and
// returns as soon as the watcher sees it.
func (w *runWatch) next(ctx context.Context, t *testing.T, what string, cond func(observation) bool) observation {
	t.Helper()
	ch := make(chan observation, 1)
	w.mu.Lock()
	w.waiters = append(w.waiters, waiter{cond: cond, ch: ch})
	w.mu.Unlock()
	select {
	case o := <-ch:
		return o
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		return observation{}
	}
}

func (w *runWatch) latest() (observation, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.obs) == 0 {
		return observation{}, false
	}
	return w.obs[len(w.obs)-1], true
}

func (w *runWatch) all() []observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.obs)
}

// epochStartSteps maps each epoch seen training to its first step.
func epochStartSteps(obs []observation) map[uint32]uint32 {
	out := map[uint32]uint32{}
	for _, o := range obs {
		if o.phase == coordinator.RoundTrain {
			out[o.epoch] = o.epochStart
		}
	}
	return out
}

// roundSpan is one round from its RoundTrain start to the next round's
// start (or Cooldown), by the chain's clock.
type roundSpan struct {
	epoch, height, step uint32
	duration            time.Duration
}

// roundDurations measures every round whose start and end the watcher saw:
// the end is the start of the next phase that is not this round's witness
// phase (the next round's RoundTrain, or Cooldown).
func roundDurations(obs []observation) []roundSpan {
	var out []roundSpan
	for i, o := range obs {
		if o.phase != coordinator.RoundTrain || (i > 0 && obs[i-1].phase == coordinator.RoundTrain && obs[i-1].start == o.start) {
			continue // not a round's first sighting
		}
		for _, next := range obs[i+1:] {
			if next.start == o.start || (next.phase == coordinator.RoundWitness && next.height == o.height && next.epoch == o.epoch) {
				continue
			}
			if next.phase == coordinator.Cooldown || (next.phase == coordinator.RoundTrain && next.epoch == o.epoch) {
				out = append(out, roundSpan{epoch: o.epoch, height: o.height, step: o.step, duration: time.Duration(next.start-o.start) * time.Second})
			}
			break
		}
	}
	return out
}

// checkpointFiles lists a checkpoint directory by name and content hash;
// every entry must be a complete checkpoint's final name (no temporary or
// partial files).
func checkpointFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("checkpoint directory: %v", err)
	}
	name := regexp.MustCompile(`^` + regexp.QuoteMeta(killRunID) + `-step[0-9]+\.safetensors$`)
	out := map[string]string{}
	for _, e := range entries {
		if !name.MatchString(e.Name()) || !e.Type().IsRegular() {
			t.Errorf("%s: unexpected entry %s (a temporary or partial file?)", dir, e.Name())
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		out[e.Name()] = hex.EncodeToString(sum[:])
	}
	return out
}

// checkCheckpoint loads a checkpoint and checks that its parameters are the
// replica every client logged for its step.
func checkCheckpoint(t *testing.T, path string, digests map[uint64]string) {
	t.Helper()
	m := regexp.MustCompile(`-step([0-9]+)\.safetensors$`).FindStringSubmatch(path)
	step, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.LoadCheckpoint(path)
	if err != nil {
		t.Errorf("checkpoint %s does not load: %v", path, err)
		return
	}
	defer tr.Close()
	d, err := client.ReplicaDigest(tr, uint32(step))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(d[:]); got != digests[step] {
		t.Errorf("checkpoint %s holds replica %s; the clients logged %s for step %d", path, got, digests[step], step)
	}
}
