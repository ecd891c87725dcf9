//go:build cuda || cudaemu

package client

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Whole runs on the GPU (scripts/gpu-run.sh runs them on a GPU machine):
// several clients, each a real engine and executor (Client) with a real
// trainer, train a run to Finished against the real Coordinator logic
// (coordsim) in a live simRun: each client's own loop (Client.Run), real
// p2p nodes on loopback, the wall clock. (With PSYCHE_GPU_RUN_NET=memory,
// and always under the emulation, whose device is not thread-safe, in a
// simulated one: the clients in turn, the in-memory network, the simulated
// clock.) Most clients train on the GPU; one trains on
// the CPU (Config.Device = DeviceCPU: trainer.SetGPU(false)) and one
// spreads each step over logical devices on GPU 0: in the SparseLoCo run
// two (Config.Devices = [0 0]: trainer.SetDevices, train
// --data-parallelism 2; the runs have grad_shards = 2), in the DeMo run
// four, two groups of two (TensorParallelism 2: --data-parallelism 2
// --tensor-parallelism 2). They check:
//
//   - the run reaches Finished, no client stops on an error and none is
//     health-checked;
//   - every client applies every step, and all of them the same payloads
//     with the same replica digest at every step: the CPU client's and the
//     multi-device client's digests are the GPU clients', step by step;
//   - each client trained on the backend it was given (its trainer's
//     Backend) and trained steps of its own;
//   - in the DeMo run, which verifies (config/tiny.toml: every contribution
//     of a member's first epoch is replayed by another member, bit for
//     bit), no verdict is MISMATCH or NO_DATA, the CPU client's replays of
//     GPU clients' steps MATCH and a GPU client's replays of the CPU
//     client's steps MATCH: payloads, not only the applied weights, are
//     the same bits on either backend.
//
// The runs are config/tiny.toml (DeMo) and config/sparseloco.toml (10
// inner AdamW steps a round) with second-scale timers and 16 steps in 2-3
// epochs (max_round_train_time stays 5 s: the witness reports 2 s before
// it runs out, and phase start times are whole seconds, so 3 s leaves too
// little and honest members are health-checked). Built with -tags cudaemu
// (the kernels emulated on the host, thread by thread) they train the
// simulations' 1-layer model instead, and SparseLoCo 3 inner steps, so
// that they finish here in about 30 s; with -tags cuda and no GPU they
// skip.

// gpuRunEmulated: the GPU is the host emulation (-tags cudaemu).
var gpuRunEmulated bool

// gpuRunClient is one client of a GPU run: its name, device, devices and
// tensor parallelism.
type gpuRunClient struct {
	name    string
	device  Device
	devices []int
	tensor  int
}

var gpuRunClients = []gpuRunClient{
	{"gpu-a", DeviceCUDA, nil, 0},
	{"gpu-b", DeviceCUDA, nil, 0},
	{"cpu", DeviceCPU, nil, 0},
	{"dp", DeviceCUDA, []int{0, 0}, 0},
}

// TestGPURunDeMo: config/tiny.toml (DeMo, verification) with 4 clients,
// the multi-device one 2 x 2.
func TestGPURunDeMo(t *testing.T) {
	gpuRun(t, "tiny.toml", nil, append(gpuRunClients[:3:3], gpuRunClient{"dp-tp", DeviceCUDA, []int{0, 0, 0, 0}, 2}))
}

// TestGPURunSparseLoCo: config/sparseloco.toml with 3 clients (a GPU, the
// CPU, two devices).
func TestGPURunSparseLoCo(t *testing.T) {
	var emu map[string]string
	if gpuRunEmulated {
		emu = map[string]string{"inner_steps": "3"}
	}
	gpuRun(t, "sparseloco.toml", emu, []gpuRunClient{gpuRunClients[0], gpuRunClients[2], gpuRunClients[3]})
}

// gpuRunSteps is how many steps each run trains.
const gpuRunSteps = 16

// gpuRun trains file's run with clients to Finished and checks it.
func gpuRun(t *testing.T, file string, extra map[string]string, clients []gpuRunClient) {
	if err := trainer.GPUAvailable(); err != nil {
		t.Skip(err)
	}
	config := gpuRunConfig(t, file, len(clients), extra)
	start := time.Now()
	var r *simRun
	if gpuRunEmulated || os.Getenv("PSYCHE_GPU_RUN_NET") == "memory" {
		r = newSimRunWith(t, 35, config)
	} else {
		r = newLiveRun(t, 35, config)
	}
	for _, gc := range clients {
		r.add(gc.name, true, func(sc *simClient) {
			sc.config = func(cfg *Config) {
				cfg.Device, cfg.Devices, cfg.TensorParallelism = gc.device, gc.devices, gc.tensor
				cfg.MicroBatch = 8
				if gc.device == DeviceCPU && !gpuRunEmulated {
					// Its rounds (10 inner steps in SparseLoCo) well within
					// max_round_train_time; threads change no bit.
					cfg.Threads = 4
				}
				// Warnings only: the summary below says what the run did.
				cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("client", gc.name)
			}
		})
	}
	r.finish()
	elapsed := time.Since(start)

	s := r.sim.State()
	total := s.Config.TotalSteps
	if coordinator.Phase(s) != coordinator.Finished || total != gpuRunSteps {
		t.Fatalf("the run ended %s with %d steps, want Finished with %d", coordinator.Phase(s), total, gpuRunSteps)
	}
	// r.check compared every step's payloads and digest across clients; and
	// every client applied every step itself (none reloaded from a peer).
	equal := 0
	for step := uint32(1); step <= total; step++ {
		by, want, ok := r.applied[step], "", true
		for _, sc := range r.clients {
			got, has := by[sc.name]
			if want == "" {
				want = got
			}
			ok = ok && has && got == want
		}
		if ok {
			equal++
		}
	}
	verifies := s.Config.VerificationPercent > 0
	var cpuReplayed, cpuVerified bool
	for i, sc := range r.clients {
		r.allApplied(sc, 1)
		gc := clients[i]
		switch {
		case gc.device == DeviceCPU && sc.backend != "cpu",
			gc.device == DeviceCUDA && !strings.HasPrefix(sc.backend, "cuda:"),
			len(gc.devices) > 1 && !strings.Contains(sc.backend, fmt.Sprintf(" x%d", len(gc.devices))):
			t.Errorf("%s trained on %q, want device %v %v", sc.name, sc.backend, gc.device, gc.devices)
		}
		snap := sc.c.cfg.Recorder.Snapshot()
		var trained int
		var tokens uint64
		var took time.Duration
		for _, st := range snap.Steps {
			if st.Tokens > 0 {
				trained++
				tokens += st.Tokens
				took += st.Duration
			}
		}
		if trained == 0 {
			t.Errorf("%s trained no step", sc.name)
		}
		line := fmt.Sprintf("%-5s %-32s trained %2d of %d steps, %8.0f tok/s", sc.name, sc.backend, trained, total, float64(tokens)/max(took.Seconds(), 1e-9))
		if verifies {
			v := snap.Verification
			line += fmt.Sprintf(", replays %d (MATCH %d, MISMATCH %d), commitments %d (MATCH %d, MISMATCH %d, NO_DATA %d, unjudged %d)",
				v.Replays.Run, v.Replays.Match, v.Replays.Mismatch, v.Commitments.Committed, v.Commitments.Match, v.Commitments.Mismatch,
				v.Commitments.NoData, v.Commitments.Unjudged)
			if v.Replays.Mismatch > 0 || v.Commitments.Mismatch > 0 || v.Commitments.NoData > 0 {
				t.Errorf("%s: a verdict other than MATCH: %s", sc.name, line)
			}
			if gc.device == DeviceCPU {
				// Every other client trains on the GPU.
				cpuReplayed, cpuVerified = v.Replays.Match > 0, v.Commitments.Match > 0
			}
		}
		t.Log(line)
	}
	if verifies && !cpuReplayed {
		t.Error("the CPU client replayed no GPU client's step to a MATCH")
	}
	if verifies && !cpuVerified {
		t.Error("no GPU client replayed a step of the CPU client's to a MATCH")
	}
	names := make([]string, len(r.clients))
	for i, sc := range r.clients {
		names[i] = sc.name
	}
	network := "real p2p on loopback, wall clock"
	if !r.live {
		network = "in-memory network, simulated clock"
	}
	t.Logf("%s (%s): Finished, %d steps in %d epochs, %.1f s; digests of %s equal at %d of %d steps",
		file, network, total, s.Progress.Epoch, elapsed.Seconds(), strings.Join(names, ", "), equal, total)
	if equal != int(total) {
		t.Errorf("digests equal at %d of %d steps", equal, total)
	}
}

// gpuRunConfig is config/<file> set for a live run of members clients:
// second-scale timers, gpuRunSteps steps in 2-3 epochs, grad_shards = 2,
// then extra; under the emulation, the simulations' 1-layer model.
func gpuRunConfig(t *testing.T, file string, members int, extra map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", file))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{
		"waiting_for_members_extra_time": "1",
		"warmup_time":                    "2",
		"max_round_train_time":           "5",
		"cooldown_time":                  "1",
		"epoch_time":                     "8",
		"total_steps":                    fmt.Sprint(gpuRunSteps),
		"init_min_clients":               fmt.Sprint(members),
		"min_clients":                    "2",
		"cold_start_warmup_steps":        "1",
	}
	if gpuRunEmulated {
		for k, v := range map[string]string{"n_layer": "1", "n_head": "2", "n_embd": "32", "max_seq_len": "16",
			"num_parameters": "0"} {
			set[k] = v
		}
	}
	for k, v := range extra {
		set[k] = v
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	config := string(data)
	for _, k := range keys {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + `\s*=.*$`)
		if len(re.FindAllString(config, -1)) != 1 {
			t.Fatalf("config/%s: want one line setting %s", file, k)
		}
		config = re.ReplaceAllLiteralString(config, k+" = "+set[k])
	}
	if strings.Contains(config, "\ngrad_shards") {
		t.Fatalf("config/%s sets grad_shards already", file)
	}
	return strings.Replace(config, "\n[model]\n", "\n[model]\ngrad_shards = 2\n", 1)
}
