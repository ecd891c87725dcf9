//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

const verifyRunID = "verify-run"

// verifyRunConfig is a light run that verifies every contribution
// (verification_percent 100), with rewards vesting two epochs after they
// are earned, so a member found at fault in epoch 1 has its epoch-0 reward
// burned. The run goes on for several rounds after epoch 0 (14 s of
// rounds), in which members cheat. Batches of 12 sequences take every
// member (init_min_clients: the test's whole roster) into an epoch; the
// witness window (4 s: at least 3 s by the chain clock) holds the replays.
const verifyRunConfig = `
[config]
waiting_for_members_extra_time = 2
warmup_time = 12
max_round_train_time = 10
round_witness_time = 4
cooldown_time = 2
epoch_time = 14
total_steps = %[4]d
init_min_clients = %[1]d
min_clients = 2
witness_nodes = 0
global_batch_size_start = 12
global_batch_size_end = 12
global_batch_size_warmup_tokens = 0
verification_percent = 100
forgive_per_epoch = 1
vesting_epochs = 2

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 2
n_head = 4
n_embd = 64
max_seq_len = 128
data_type = "pretraining"
cold_start_warmup_steps = 0

[model.checkpoint]
kind = "ephemeral"

[model.data]
kind = "http"
location = "%[2]s"
root = "%[3]s"

[model.lr]
schedule = "constant"
learning_rate = 0.003
final_learning_rate = 0.003
warmup_steps = 0
decay_steps = 0

[model.optimizer]
kind = "distro"
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.999
compression_topk = 32
compression_chunk = 64
quantize_1bit = true
`

// The adversaries of TestVerificationCatchesCheaters, one per cheat; each
// is honest in epoch 0 (and earns its share) and cheats from epoch 1. The
// false accuser has a run of its own (TestVerificationCatchesFalseAccuser):
// among these cheaters, the trainers it is drawn to check may all be
// cheaters too, and accusing them is no fault.
var verifyCheats = []string{"other-data", "random-payload", "copy-payload", "wrong-replay-data", "withhold-replay-data", "copy-answer"}

const (
	verifyEarning  = 900_000
	verifySlashing = 1_000
)

var cheatBuild struct {
	once sync.Once
	path string
	err  error
}

// builtCheatCLI builds psyche-client with the verificationtest tag: the
// binary that accepts --cheat.
func builtCheatCLI(t testing.TB) string {
	t.Helper()
	cheatBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "psyche-client-cheat")
		if err != nil {
			cheatBuild.err = err
			return
		}
		cheatBuild.path = filepath.Join(dir, "psyche-client")
		out, err := exec.Command("go", "build", "-tags", "verificationtest", "-o", cheatBuild.path, ".").CombinedOutput()
		if err != nil {
			cheatBuild.err = errors.New(string(out))
		}
	})
	if cheatBuild.err != nil {
		t.Fatalf("build psyche-client -tags verificationtest: %v", cheatBuild.err)
	}
	return cheatBuild.path
}

// TestVerificationCatchesCheaters runs 3 honest `psyche-client train`
// processes and 6 dishonest ones on localnet with every contribution
// verified. From epoch 1 on each dishonest member cheats one way: it trains
// on other sequences (a), sends a made-up payload (b), republishes another
// member's payload (c), commits to replay data it did not train from (d),
// withholds its replay data (e), or answers its dispute with the accuser's
// hashes (f). Each must be caught in the first round it cheats (a verdict
// other than MATCH: its update is left out), and a dispute must find it at
// fault: FAULTED, slashed, and its unvested epoch-0 reward burned. Honest
// members are never at fault, their replicas agree at every step, and the
// loss falls.
func TestVerificationCatchesCheaters(t *testing.T) {
	// Rounds of 9 members take about 1.2 s on 2 busy cores, 0.75 s on 2
	// idle ones: epoch 0 (14 s) ends between steps 12 and 19. The first
	// cheat of an epoch may be forgiven (TRANSIENT, forgive_per_epoch 1), so
	// every cheater needs two rounds of epoch 1 at least: 26 steps leave it
	// 7 or more.
	vr := runVerification(t, 3, verifyCheats, 26)
	honest := vr.honest

	// psyche-client verify replays a step offline from the files a client
	// keeps: the honest client's last step matches, the cheater's disputed
	// step does not.
	last := uint64(0)
	for step := range vr.procs[0].stepDigests(t) {
		last = max(last, step)
	}
	if out, code := vr.verify(t, 0, uint32(last)); code != 0 || !strings.Contains(out, "MATCH") {
		t.Errorf("verify of the honest client's step %d: exit %d, want MATCH and 0", last, code)
	}
	vr.w.mu.Lock()
	var disputed uint32
	cheaterSlot := slotOf(vr.final, vr.keys[honest].PublicKey())
	for _, d := range vr.w.disputes {
		if int(d.TrainerSlot) == cheaterSlot && d.Kind == coordinator.VerdictMismatch {
			disputed = d.Step
		}
	}
	vr.w.mu.Unlock()
	if disputed == 0 {
		t.Errorf("no MISMATCH dispute about %s", vr.procs[honest].name)
	} else if out, code := vr.verify(t, honest, disputed); code != 1 || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "first differing tensor") {
		t.Errorf("verify of %s's step %d: exit %d, want MISMATCH naming the first differing tensor, and 1", vr.procs[honest].name, disputed, code)
	}
}

// TestVerificationCatchesFalseAccuser runs 3 honest clients and one that,
// from epoch 1 on, accuses every trainer it is drawn to verify. With 4
// members it checks some honest trainer in a round with probability
// 1-(2/3)^3 (0.70), so over the run's rounds after epoch 0 (about 15) it
// is all but certain to; a dispute must then find the accuser at fault, with
// its slash and burn, and no honest member at fault.
func TestVerificationCatchesFalseAccuser(t *testing.T) {
	// Rounds of 4 members take about 0.6 s on 2 cores: epoch 0 ends near
	// step 25, and 15 rounds follow it.
	runVerification(t, 3, []string{"false-accusation"}, 40)
}

// verificationRun is a finished localnet run of honest clients (the first
// honest of keys and procs) and cheaters, checked by checkVerification.
type verificationRun struct {
	net        []string
	w          *verificationWatch
	final      *coordinator.State
	honest     int
	keys       []solana.PrivateKey
	procs      []*trainProc
	replayDirs map[int]string
}

// runVerification runs honest clients and one cheater per name in cheats,
// until the run finishes after steps rounds, and checks what verification
// made of them.
func runVerification(t *testing.T, honest int, cheats []string, steps int) verificationRun {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end run with real client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	builtCLI(t)
	builtCheatCLI(t)
	dir := t.TempDir()
	n := honest + len(cheats)
	lr := startLocalRun(ctx, t, dir, verifyRunID, func(dataURL, root string) string {
		return fmt.Sprintf(verifyRunConfig, n, dataURL, root, steps)
	})
	v, c, run, net := lr.v, lr.c, lr.run, lr.net
	// Rewards, so that a fault has something to burn: they take effect
	// when epoch 0 forms.
	mustRunCLI(t, append([]string{"set-future-epoch-rates", "--earning-rate-total-shared", fmt.Sprint(verifyEarning),
		"--slashing-rate-per-client", fmt.Sprint(verifySlashing)}, lr.admin...)...)

	rendezvous := filepath.Join(dir, "p2p")
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	vr := verificationRun{net: net, honest: honest, keys: make([]solana.PrivateKey, n), procs: make([]*trainProc, n),
		// The first honest client and the first cheater keep their replay
		// files, for psyche-client verify.
		replayDirs: map[int]string{0: filepath.Join(dir, "replay-0"), honest: filepath.Join(dir, "replay-cheat")}}
	for i := range n {
		var wallet string
		wallet, vr.keys[i] = keyFile(t, v, 2*solana.LAMPORTS_PER_SOL)
		ident := filepath.Join(dir, fmt.Sprintf("p2p-%d.key", i))
		mustRunCLI(t, "create-static-p2p-identity", ident)
		args := append([]string{"train", "--run-id", verifyRunID, "-w", wallet, "-i", ident,
			"--logs", "json", "--metrics-local-port", "0", "--threads", "1", "--micro-batch-size", "2",
			"--bind-p2p-interface", "127.0.0.1", "--p2p-rendezvous-dir", rendezvous}, net...)
		bin, name := builtCLI(t), fmt.Sprintf("honest %d", i)
		if i >= honest {
			cheat := cheats[i-honest]
			bin, name = builtCheatCLI(t), "cheat "+cheat
			args = append(args, "--cheat", cheat, "--cheat-from-epoch", "1")
		}
		if d, ok := vr.replayDirs[i]; ok {
			// Every step: the disputed step replayed at the end may be older
			// than the newest few kept by default.
			args = append(args, "--write-gradients-dir", d, "--keep-gradients-steps", "20")
		}
		vr.procs[i] = startTrainWith(t, bin, name, filepath.Join(dir, fmt.Sprintf("client-%d.log", i)), tmp, args)
	}
	vr.w = watchVerification(ctx, t, run, c)
	defer vr.w.stop()
	waitFinished(ctx, t, vr.procs)
	vr.w.stop()
	var err error
	if vr.final, err = run.FetchState(ctx, c); err != nil {
		t.Fatal(err)
	}
	checkVerification(t, vr.w, vr.final, cheats, vr.keys[:honest], vr.keys[honest:], vr.procs[:honest])
	return vr
}

// verify runs psyche-client verify on member who's files of step, and
// returns its output and exit code.
func (vr verificationRun) verify(t *testing.T, who int, step uint32) (string, int) {
	t.Helper()
	payload, state := trainer.ReplayFileNames(verifyRunID, step)
	d := vr.replayDirs[who]
	out, errOut, code := runCLI(t, nil, append([]string{"verify", "--run-id", verifyRunID, "--step", fmt.Sprint(step),
		// Another micro-batch than the clients' 2: the bits do not depend on it.
		"--client", vr.keys[who].PublicKey().String(), "--threads", "1", "--micro-batch-size", "5",
		"--model", filepath.Join(d, trainer.ReplayModelName(verifyRunID, step)),
		"--state", filepath.Join(d, state), "--payload", filepath.Join(d, payload)}, vr.net...)...)
	t.Logf("verify step %d of %s: exit %d\n%s%s", step, vr.procs[who].name, code, out, errOut)
	return out, code
}

// seenCommit is a member's commitment in a round, as last seen on chain.
type seenCommit struct {
	epoch     uint32
	committed bool
	verdict   uint8
}

// verificationWatch polls the Coordinator account and keeps every round's
// commitments and verdicts (by step and signer) and every dispute (by id).
type verificationWatch struct {
	mu       sync.Mutex
	commits  map[uint32]map[solana.PublicKey]seenCommit
	disputes map[uint64]coordinator.Dispute
	cancel   context.CancelFunc
	done     chan struct{}
}

func watchVerification(ctx context.Context, t *testing.T, run coordinator.Run, c *chain.Client) *verificationWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &verificationWatch{commits: map[uint32]map[solana.PublicKey]seenCommit{}, disputes: map[uint64]coordinator.Dispute{},
		cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if s, err := run.FetchState(ctx, c); err == nil {
				w.record(s)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *verificationWatch) record(s *coordinator.State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ph := coordinator.Phase(s)
	if ph == coordinator.RoundTrain || ph == coordinator.RoundWitness {
		r := coordinator.CurrentRound(s)
		members := coordinator.Members(s)
		by := w.commits[r.Step]
		if by == nil {
			by = map[solana.PublicKey]seenCommit{}
			w.commits[r.Step] = by
		}
		for i := range min(int(r.ClientsLen), len(members)) {
			cm := r.Commits[i]
			by[members[i].Signer] = seenCommit{epoch: s.Progress.Epoch, committed: cm.Flags&coordinator.CommitCommitted != 0, verdict: cm.Verdict}
		}
	}
	for _, d := range s.Disputes {
		if d.State != 0 {
			w.disputes[d.Id] = d
		}
	}
}

// disputed says whether a dispute about the trainer in slot at step was seen.
func disputed(w *verificationWatch, step uint32, slot int) bool {
	for _, d := range w.disputes {
		if d.Step == step && int(d.TrainerSlot) == slot {
			return true
		}
	}
	return false
}

func (w *verificationWatch) stop() {
	w.cancel()
	<-w.done
}

func slotOf(s *coordinator.State, signer solana.PublicKey) int {
	for i, cl := range s.Clients {
		if cl.Occupied != 0 && cl.Signer.Equals(signer) {
			return i
		}
	}
	return -1
}

func checkVerification(t *testing.T, w *verificationWatch, final *coordinator.State, names []string, honest, cheats []solana.PrivateKey, honestProcs []*trainProc) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	rounds := map[uint32]int{} // rounds seen, by epoch
	for _, by := range w.commits {
		for _, c := range by {
			rounds[c.epoch]++
			break
		}
	}
	t.Logf("rounds seen, by epoch: %v", rounds)
	for i, d := range w.disputes {
		t.Logf("dispute %d: step %d, trainer slot %d, accuser slot %d, kind %d, votes %v, outcome %d", i, d.Step, d.TrainerSlot, d.AccuserSlot, d.Kind, d.Votes[:d.CommitteeLen], d.State)
	}
	outcomes := func(slot int, accuser bool) map[uint8]int {
		out := map[uint8]int{}
		for _, d := range w.disputes {
			if (!accuser && int(d.TrainerSlot) == slot) || (accuser && int(d.AccuserSlot) == slot) {
				out[d.State]++
			}
		}
		return out
	}
	for j, key := range cheats {
		cheat, me := names[j], key.PublicKey()
		slot := slotOf(final, me)
		if slot < 0 {
			t.Errorf("%s holds no slot at the end", cheat)
			continue
		}
		if cheat == "false-accusation" {
			if outcomes(slot, true)[coordinator.DisputeAccuserFault] == 0 {
				t.Errorf("%s: no dispute found the false accuser at fault: %v", cheat, outcomes(slot, true))
			}
		} else {
			// Caught in the first round it cheats, and never applied.
			first, caught := uint32(0), false
			for step, by := range w.commits {
				c, ok := by[me]
				if !ok || c.epoch < 1 {
					continue
				}
				if c.verdict == coordinator.VerdictMatch {
					t.Errorf("%s: its step %d was judged MATCH (and applied)", cheat, step)
				}
				if first == 0 || step < first {
					// A round's last verdict ends it at once, so the watch may
					// not see that verdict; the dispute it opened says it too.
					first, caught = step, c.committed && (c.verdict != 0 || disputed(w, step, slot))
				}
			}
			if first == 0 {
				t.Errorf("%s never trained in epoch 1 or later", cheat)
			} else if !caught {
				t.Errorf("%s: its first cheating step %d was not judged", cheat, first)
			}
			if outcomes(slot, false)[coordinator.DisputeTrainerFault] == 0 {
				t.Errorf("%s: no dispute found it at fault: %v", cheat, outcomes(slot, false))
			}
			// An answer that copies the accuser's hashes proves no rerun
			// (the other cheaters rerun honestly when accused, and may be
			// forgiven once).
			if n := outcomes(slot, false)[coordinator.DisputeTransient]; cheat == "copy-answer" && n != 0 {
				t.Errorf("%s: %d disputes forgiven as TRANSIENT", cheat, n)
			}
		}
		cl := final.Clients[slot]
		if cl.HasFault == 0 || cl.Burned == 0 || cl.Slashed < verifySlashing {
			t.Errorf("%s: has_fault %d, burned %d, slashed %d: want a fault, its unvested reward burned and a slash", cheat, cl.HasFault, cl.Burned, cl.Slashed)
		}
	}
	for i, key := range honest {
		slot := slotOf(final, key.PublicKey())
		if slot < 0 {
			t.Errorf("honest %d holds no slot at the end", i)
			continue
		}
		cl := final.Clients[slot]
		if cl.HasFault != 0 || cl.Burned != 0 || outcomes(slot, false)[coordinator.DisputeTrainerFault] != 0 || outcomes(slot, true)[coordinator.DisputeAccuserFault] != 0 {
			t.Errorf("honest %d was found at fault: has_fault %d, burned %d, as trainer %v, as accuser %v", i, cl.HasFault, cl.Burned,
				outcomes(slot, false), outcomes(slot, true))
		}
	}
	// Honest replicas agree at every step, and the loss falls.
	digests := map[uint64]string{}
	for _, p := range honestProcs {
		for step, d := range p.stepDigests(t) {
			if prev, ok := digests[step]; ok && prev != d {
				t.Errorf("step %d: honest replicas differ", step)
			}
			digests[step] = d
		}
	}
	if len(digests) < 10 {
		t.Errorf("the honest clients logged %d steps, want most of the 20", len(digests))
	}
	losses := honestProcs[0].stepLosses(t)
	if len(losses) < 6 {
		t.Fatalf("%d step losses logged", len(losses))
	}
	head, tail := mean(losses[:3]), mean(losses[len(losses)-3:])
	t.Logf("train loss: first 3 steps %.3f, last 3 %.3f", head, tail)
	if tail >= head {
		t.Errorf("the loss did not fall: %.3f -> %.3f", head, tail)
	}
}

// stepLosses are the train losses the client logged, in step order.
func (p *trainProc) stepLosses(t *testing.T) []float64 {
	t.Helper()
	byStep := map[uint64]float64{}
	var steps []uint64
	for _, e := range p.entries() {
		step, ok1 := e["step"].(float64)
		loss, ok2 := e["loss"].(float64)
		if e["msg"] != "step" || !ok1 || !ok2 {
			continue
		}
		if _, dup := byStep[uint64(step)]; !dup {
			steps = append(steps, uint64(step))
		}
		byStep[uint64(step)] = loss
	}
	slices.Sort(steps)
	out := make([]float64, len(steps))
	for i, s := range steps {
		out[i] = byStep[s]
	}
	return out
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
