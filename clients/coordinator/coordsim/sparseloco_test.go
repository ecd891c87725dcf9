package coordsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
)

// TestShippedConfigsPassTheProgram applies every config/*.toml to the real
// logic (update + resume validate everything), so a shipped file never fails
// on chain.
func TestShippedConfigsPassTheProgram(t *testing.T) {
	files, err := filepath.Glob("../../../config/*.toml")
	if err != nil || len(files) < 3 {
		t.Fatalf("config files %v: %v", files, err)
	}
	for i, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := coordinator.LoadParams(f)
			must(t, err)
			s := startSim(t, uint64(100+i))
			must(t, s.Create("run", "v1", p, t0))
			wantPhase(t, s, coordinator.WaitingForMembers)
		})
	}
}

// sparseLoCoConfig is testConfig trained with SparseLoCo: 3 inner steps.
func sparseLoCoConfig(overlap bool) string {
	doc := strings.Replace(testConfig, "[model.optimizer]\nkind = \"distro\"\n",
		"[model.optimizer]\nkind = \"sparseloco\"\ninner_steps = 3\nouter_learning_rate = 0.7\nvalue_bits = 2\n", 1)
	if overlap {
		doc = strings.Replace(doc, "[config]\n", "[config]\noverlap = true\n", 1)
	}
	return doc
}

func paramsOf(t *testing.T, doc string) coordinator.UpdateParams {
	t.Helper()
	rc, err := coordinator.ParseRunConfig("sparseloco.toml", []byte(doc))
	must(t, err)
	p, err := rc.Params()
	must(t, err)
	return p
}

// TestSparseLoCoRoundsAndOverlapRules runs SparseLoCo rounds with overlap on
// the real logic: the rounds carry the inner steps, the cursor moves by
// batch x H, the schedule's roles cover each round once, health checks wait a
// round longer; and the program refuses what the rules forbid.
func TestSparseLoCoRoundsAndOverlapRules(t *testing.T) {
	p := paramsOf(t, sparseLoCoConfig(true))
	if p.Config.Overlap != 1 || p.Model.Optimizer != coordinator.OptimizerSparseLoCo || p.Model.InnerSteps != 3 || p.Model.ValueBits != 2 {
		t.Fatalf("params: overlap %d optimizer %d inner %d bits %d", p.Config.Overlap, p.Model.Optimizer, p.Model.InnerSteps, p.Model.ValueBits)
	}
	s := startSim(t, 7)
	now := int64(t0)

	// Rejections first (each leaves the run as it was).
	bad := *p.Config
	bad.VerificationPercent = 10
	wantErr(t, s.Create("run", "v1", coordinator.UpdateParams{Config: &bad, Model: p.Model}, now), "ConfigOverlap")
	wantErr(t, s.SetPaused(false, now), "ConfigEpochTime") // nothing was stored
	distro := *p.Model
	distro.Optimizer = coordinator.OptimizerDistro
	wantErr(t, s.Update(coordinator.UpdateParams{Config: p.Config, Model: &distro}, now), "ModelOptimizer")
	tooMany := *p.Model
	tooMany.InnerSteps = coordinator.MaxInnerSteps + 1
	wantErr(t, s.Update(coordinator.UpdateParams{Model: &tooMany}, now), "ModelOptimizer")
	must(t, s.Update(coordinator.UpdateParams{Metadata: p.Metadata, Config: p.Config, Model: p.Model}, now))
	must(t, s.SetPaused(false, now))

	ms := members(3)
	for _, m := range ms {
		must(t, s.Join(m.key, m.p2p, now))
	}
	now++
	must(t, s.Tick(ms[0].key, now))
	must(t, s.WarmupWitness(ms[0].key, now))
	must(t, s.WarmupWitness(ms[1].key, now))
	wantPhase(t, s, coordinator.RoundTrain)
	if got := coordinator.FirstHealthCheckHeight(s.State()); got != 3 {
		t.Fatalf("first health check height %d, want 3", got)
	}
	cursor := uint64(0)
	for height := range uint32(4) {
		st := s.State()
		r := coordinator.CurrentRound(st)
		if r.Height != height || r.InnerSteps != 3 || r.DataIndex != cursor || st.Progress.DataIndex != cursor+24 {
			t.Fatalf("round %d: height %d inner %d data %d, progress %d; want cursor %d", height, r.Height, r.InnerSteps, r.DataIndex, st.Progress.DataIndex, cursor)
		}
		if want := schedule.DataIndexForStep(8, 8, 0, 32, 3, r.Step); want != r.DataIndex {
			t.Fatalf("step %d: DataIndexForStep %d, round %d", r.Step, want, r.DataIndex)
		}
		sched := coordinator.ScheduleRound(st, r)
		seen := map[uint64]int{}
		for i := range r.ClientsLen {
			role, err := sched.Role(i)
			must(t, err)
			if role.Batch.Len%3 != 0 {
				t.Fatalf("round %d member %d: %+v is not 3 inner steps", height, i, role.Batch)
			}
			for k := role.Batch.Start; k < role.Batch.Start+role.Batch.Len; k++ {
				seen[k]++
			}
		}
		for k := cursor; k < cursor+24; k++ {
			if seen[k] != 1 {
				t.Fatalf("round %d: sequence %d trained %d times", height, k, seen[k])
			}
		}
		if height < 3 {
			wantErr(t, s.HealthCheck(ms[0].key, r.Step, 1, coordinator.Members(st)[1].Signer, now), "HealthCheckTooEarly")
		} else {
			wantErr(t, s.HealthCheck(ms[0].key, r.Step, 1, coordinator.Members(st)[1].Signer, now), "ClientHealthy")
		}
		for _, w := range witnesses(st) {
			must(t, s.Witness(coordinator.Members(st)[w].Signer, report(t, st, w), now))
		}
		now++
		must(t, s.Tick(ms[0].key, now))
		cursor += 24
	}
}

// TestSparseLoCoConfigFile is config/sparseloco.toml as the trainer team ships it.
func TestSparseLoCoConfigFile(t *testing.T) {
	data, err := os.ReadFile("../../../config/sparseloco.toml")
	must(t, err)
	p := paramsOf(t, string(data))
	if p.Model.Optimizer != coordinator.OptimizerSparseLoCo || p.Model.InnerSteps < 1 || p.Config.Overlap > 1 {
		t.Fatalf("sparseloco.toml: optimizer %d inner %d overlap %d", p.Model.Optimizer, p.Model.InnerSteps, p.Config.Overlap)
	}
}

// TestPrecisionRoundTrips: the run's numeric contract (Model.precision, a
// former padding byte) goes through the program's decoder and the account
// as set, a run created without it reads fp32, and the program refuses a
// contract it does not know.
func TestPrecisionRoundTrips(t *testing.T) {
	s := startSim(t, 7)
	p := paramsOf(t, testConfig)
	must(t, s.Create("run", "v1", p, t0))
	if got := s.State().Model.Precision; got != coordinator.PrecisionFP32 {
		t.Fatalf("precision left out: tag %d, want fp32", got)
	}
	must(t, s.SetPaused(true, t0))
	mx8 := paramsOf(t, strings.Replace(testConfig, "[model]\n", "[model]\nprecision = \"mx8\"\n", 1))
	must(t, s.Update(coordinator.UpdateParams{Model: mx8.Model}, t0))
	if got := s.State().Model; got.Precision != coordinator.PrecisionMX8 || got.Padding != [4]uint8{} || got != *mx8.Model {
		t.Fatalf("mx8 model read back as precision %d, padding %v", got.Precision, got.Padding)
	}
	bad := *mx8.Model
	bad.Precision = 2
	wantErr(t, s.Update(coordinator.UpdateParams{Model: &bad}, t0), "ModelPrecision")
	must(t, s.SetPaused(false, t0))
	wantPhase(t, s, coordinator.WaitingForMembers)
	if got := s.State().Model.Precision; got != coordinator.PrecisionMX8 {
		t.Fatalf("after the refused update: precision %d", got)
	}
}

// TestGradShardsRoundTrips: the run's gradient shard count
// (Model.grad_shards_log2, the padding byte after precision) goes through
// the program's decoder and the account as set, a run created without it
// reads one shard, and the program refuses more than 64.
func TestGradShardsRoundTrips(t *testing.T) {
	s := startSim(t, 7)
	p := paramsOf(t, testConfig)
	must(t, s.Create("run", "v1", p, t0))
	if got := s.State().Model.GradShardsLog2; got != 0 {
		t.Fatalf("grad_shards left out: log2 %d, want 0 (one shard)", got)
	}
	must(t, s.SetPaused(true, t0))
	sharded := paramsOf(t, strings.Replace(testConfig, "[model]\n", "[model]\ngrad_shards = 64\nprecision = \"mx8\"\n", 1))
	must(t, s.Update(coordinator.UpdateParams{Model: sharded.Model}, t0))
	if got := s.State().Model; got.GradShardsLog2 != coordinator.MaxGradShardsLog2 || got.Precision != coordinator.PrecisionMX8 ||
		got.Padding != [4]uint8{} || got != *sharded.Model {
		t.Fatalf("64-shard model read back as grad_shards_log2 %d, precision %d, padding %v", got.GradShardsLog2, got.Precision, got.Padding)
	}
	bad := *sharded.Model
	bad.GradShardsLog2 = 7
	wantErr(t, s.Update(coordinator.UpdateParams{Model: &bad}, t0), "ModelGradShards")
	must(t, s.SetPaused(false, t0))
	wantPhase(t, s, coordinator.WaitingForMembers)
	if got := s.State().Model.GradShardsLog2; got != coordinator.MaxGradShardsLog2 {
		t.Fatalf("after the refused update: grad_shards_log2 %d", got)
	}
}
