package coordinator_test

import (
	"errors"
	"math"
	"testing"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// ValidateUpdate mirrors the program's update rules: for every case (the
// program's own rule tests, config.rs, replayed on config/smoke.toml), the
// program refuses exactly what Go refuses, with the error Go names.
func TestValidateUpdateMatchesProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("sends an update per case to a local validator")
	}
	e := setup(t, "validate")
	baseConfig, baseModel := testRun(t)
	type edit func(c *coordinator.Config, m *coordinator.Model, p *coordinator.Progress)
	llama := func(m *coordinator.Model) {
		m.Architecture, m.NKvHead, m.IntermediateSize, m.RopeTheta = coordinator.ArchLlama, 2, 384, 10000
	}
	llama3 := func(m *coordinator.Model) {
		llama(m)
		m.RopeScaling, m.RopeFactor, m.RopeLowFreqFactor, m.RopeHighFreqFactor, m.RopeOriginalContext = coordinator.RopeLlama3, 8, 1, 4, 8192
	}
	sparse := func(m *coordinator.Model) {
		m.Optimizer, m.Quantize1bit, m.InnerSteps, m.OuterLearningRate, m.ValueBits = coordinator.OptimizerSparseLoCo, 0, 3, 1, 2
	}
	cases := []struct {
		name string
		// sections sent: c config, m model, p progress, d metadata
		sections string
		edit     edit
		want     string // the program error, "" = accepted
	}{
		// The run has no config yet: a model alone meets only the model's own
		// rules, a progress alone only step > 0.
		{"model over no config", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.ColdStartWarmupSteps = 99
		}, ""},
		{"progress over no config", "p", func(_ *coordinator.Config, _ *coordinator.Model, p *coordinator.Progress) { p.Step = 5000 }, ""},
		{"progress step 0", "p", func(_ *coordinator.Config, _ *coordinator.Model, p *coordinator.Progress) { p.Step = 0 }, "InvalidProgress"},
		{"valid", "cmp", func(*coordinator.Config, *coordinator.Model, *coordinator.Progress) {}, ""},
		{"epoch_time 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.EpochTime = 0 }, "ConfigEpochTime"},
		{"epoch_time > 1y", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.EpochTime = coordinator.MaxDuration + 1
		}, "ConfigEpochTime"},
		{"warmup 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.WarmupTime = 0 }, "ConfigWarmupTime"},
		{"warmup == epoch", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.WarmupTime = 10 }, "ConfigWarmupTime"},
		{"warmup just below epoch", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.WarmupTime = 9 }, ""},
		{"train 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.MaxRoundTrainTime = 0 }, "ConfigRoundTrainTime"},
		{"train == epoch", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.MaxRoundTrainTime = 10 }, "ConfigRoundTrainTime"},
		{"witness time 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.RoundWitnessTime = 0 }, "ConfigRoundWitnessTime"},
		{"cooldown huge", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.CooldownTime = math.MaxUint64
		}, "ConfigCooldownTime"},
		{"waiting extra 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.WaitingForMembersExtraTime = 0
		}, "ConfigWaitingTime"},
		{"min_clients 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.MinClients = 0 }, "ConfigMinClients"},
		{"init < min", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.InitMinClients = 2 }, "ConfigInitMinClients"},
		{"init > batch start", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.GlobalBatchSizeStart = 2 }, "ConfigInitMinClients"},
		{"init > 256", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.InitMinClients, c.GlobalBatchSizeStart, c.GlobalBatchSizeEnd = 257, 300, 300
		}, "ConfigInitMinClients"},
		{"init == 256", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.InitMinClients, c.GlobalBatchSizeStart, c.GlobalBatchSizeEnd = 256, 300, 300
		}, ""},
		{"batch start 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.GlobalBatchSizeStart = 0 }, "ConfigBatchSize"},
		{"batch start > end", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.GlobalBatchSizeStart = 9 }, "ConfigBatchSize"},
		{"warmup tokens max", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.GlobalBatchSizeWarmupTokens = coordinator.MaxWarmupTokens
		}, ""},
		{"warmup tokens too many", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.GlobalBatchSizeWarmupTokens = coordinator.MaxWarmupTokens + 1
		}, "ConfigWarmupTokens"},
		{"total_steps 0", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.TotalSteps = 0 }, "ConfigTotalSteps"},
		{"total_steps max", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.TotalSteps = math.MaxUint32
		}, "ConfigTotalSteps"},
		{"witness > min", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.WitnessNodes = 4 }, "ConfigWitnessNodes"},
		{"witness > 32", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.MinClients, c.InitMinClients, c.GlobalBatchSizeStart, c.GlobalBatchSizeEnd, c.WitnessNodes = 40, 40, 40, 40, 33
		}, "ConfigWitnessNodes"},
		{"verification 100", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.VerificationPercent = 100
		}, ""},
		{"verification 101", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.VerificationPercent = 101
		}, "ConfigVerificationPercent"},
		{"verification 255", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.VerificationPercent = 255
		}, "ConfigVerificationPercent"},
		{"vesting 4", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.VestingEpochs = 4 }, ""},
		{"vesting 5", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.VestingEpochs = 5 }, "ConfigVestingEpochs"},
		{"overlap 1", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.Overlap = 1 }, ""},
		{"overlap 2", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) { c.Overlap = 2 }, "ConfigOverlap"},
		{"overlap with verification", "c", func(c *coordinator.Config, _ *coordinator.Model, _ *coordinator.Progress) {
			c.Overlap, c.VerificationPercent = 1, 1
		}, "ConfigOverlap"},
		// A bad config is refused before the model is looked at.
		{"bad config, bad model", "cm", func(c *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			c.EpochTime, m.NHead = 0, 0
		}, "ConfigEpochTime"},
		{"cold start fits", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.ColdStartWarmupSteps = 1 }, ""},
		{"cold start too long", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.ColdStartWarmupSteps = 2 }, "ModelColdStartSteps"},
		{"architecture 3", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.Architecture = 3 }, "ModelArchitecture"},
		{"n_head 0", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.NHead = 0 }, "ModelShape"},
		{"embd not divisible", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.NEmbd = 130 }, "ModelShape"},
		{"gpt2 with kv heads", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.NKvHead = 2 }, "ModelLlama"},
		{"gpt2 with -0 theta", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.RopeTheta = float32(math.Copysign(0, -1))
		}, "ModelLlama"},
		{"llama", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { llama(m) }, ""},
		{"llama kv not dividing", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { llama(m); m.NKvHead = 3 }, "ModelLlama"},
		{"llama theta 0.5", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RopeTheta = 0.5
		}, "ModelLlama"},
		{"llama theta 1e12", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RopeTheta = 1e12
		}, ""},
		{"llama theta inf", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RopeTheta = float32(math.Inf(1))
		}, "ModelLlama"},
		{"seq too long", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.MaxSeqLen = coordinator.MaxSeqLen + 1
		}, "ModelSeqLen"},
		{"byte vocab too small", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.VocabSize = 255 }, "ModelTokenizer"},
		{"byte with a hash", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.TokenizerHash[0] = 1 }, "ModelTokenizer"},
		{"json vocab 262144", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Tokenizer, m.TokenizerHash[0], m.VocabSize = coordinator.TokenizerJSON, 1, 1<<18
		}, ""},
		{"json vocab 262145", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Tokenizer, m.TokenizerHash[0], m.VocabSize = coordinator.TokenizerJSON, 1, 1<<18+1
		}, "ModelTokenizer"},
		{"data type 0", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.DataType = 0 }, "ModelDataType"},
		{"fine-tuning", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.DataType = coordinator.DataFinetuning
		}, ""},
		{"data type 3", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.DataType = 3 }, "ModelDataType"},
		{"gpt2 with rms_norm_eps", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.RmsNormEps = 1e-6 }, "ModelLlama"},
		{"gpt2 with qkv bias", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.QkvBias = 1 }, "ModelLlama"},
		{"gpt2 with rope scaling", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.RopeScaling = coordinator.RopeLlama3
		}, "ModelLlama"},
		{"llama, every knob", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RmsNormEps, m.QkvBias = 1e-6, 1
		}, ""},
		{"llama eps 0.1", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RmsNormEps = 0.1
		}, ""},
		{"llama eps above 0.1", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RmsNormEps = math.Nextafter32(0.1, 1)
		}, "ModelRmsNormEps"},
		{"llama eps -0", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RmsNormEps = float32(math.Copysign(0, -1))
		}, "ModelRmsNormEps"},
		{"llama3 factor 1024", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeFactor = 1024
		}, ""},
		{"llama3 factor below 1", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeFactor = math.Nextafter32(1, 0)
		}, "ModelRopeScaling"},
		{"llama3 low == high", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeLowFreqFactor = 4
		}, "ModelRopeScaling"},
		{"llama3 low negative", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeLowFreqFactor = -1
		}, "ModelRopeScaling"},
		{"llama3 high above 1024", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeHighFreqFactor = math.Nextafter32(1024, 2048)
		}, "ModelRopeScaling"},
		{"llama3 context 2^24", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeOriginalContext = coordinator.MaxRopeOriginalContext
		}, ""},
		{"llama3 context above 2^24", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeOriginalContext = coordinator.MaxRopeOriginalContext + 1
		}, "ModelRopeScaling"},
		{"llama3 context 0", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeOriginalContext = 0
		}, "ModelRopeScaling"},
		{"no scaling with a factor", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { llama(m); m.RopeFactor = 8 }, "ModelRopeScaling"},
		{"rope scaling 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama3(m)
			m.RopeScaling = 2
		}, "ModelRopeScaling"},
		{"qkv bias 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { llama(m); m.QkvBias = 2 }, "ModelQkvBias"},
		// In order: epsilon, rotary scaling, qkv bias.
		{"bad eps, scaling and qkv bias", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.RmsNormEps, m.RopeScaling, m.QkvBias = 1, 2, 2
		}, "ModelRmsNormEps"},
		{"hub without repo", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.CheckpointRepo = [192]byte{}
		}, "ModelCheckpoint"},
		{"ephemeral with repo", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.CheckpointKind = 1 }, "ModelCheckpoint"},
		{"bad revision utf8", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.CheckpointRevision[0] = 0xff
		}, "ModelCheckpoint"},
		{"data location empty", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.DataLocation = [192]byte{}
		}, "ModelDataLocation"},
		{"lr zero", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.LearningRate = 0 }, "ModelLearningRate"},
		{"lr inf", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.LearningRate = float32(math.Inf(1))
		}, "ModelLearningRate"},
		{"final above peak", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.FinalLearningRate = 0.01 }, "ModelLearningRate"},
		{"cosine without decay steps", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.LrDecaySteps = 0 }, "ModelLearningRate"},
		{"wsd longer than the run", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.LrSchedule = 4 }, "ModelLearningRate"},
		{"wsd fits exactly", "cm", func(c *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.LrSchedule, m.LrDecaySteps = 4, c.TotalSteps-m.LrWarmupSteps
		}, ""},
		{"wsd one step too long", "cm", func(c *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.LrSchedule, m.LrDecaySteps = 4, c.TotalSteps-m.LrWarmupSteps+1
		}, "ModelLearningRate"},
		{"chunk not pow2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.CompressionChunk = 48 }, "ModelOptimizer"},
		{"topk > chunk", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.CompressionTopk = 65 }, "ModelOptimizer"},
		{"decay > 1", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.CompressionDecay = math.Float32frombits(0x3f800001)
		}, "ModelOptimizer"},
		{"weight decay negative", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.WeightDecay = -0.1 }, "ModelOptimizer"},
		{"distro inner steps 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.InnerSteps = 2 }, "ModelOptimizer"},
		{"sparseloco", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { sparse(m) }, ""},
		{"sparseloco quantize_1bit", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			sparse(m)
			m.Quantize1bit = 1
		}, "ModelOptimizer"},
		{"sparseloco value bits 3", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { sparse(m); m.ValueBits = 3 }, "ModelOptimizer"},
		{"sparseloco outer lr 0", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			sparse(m)
			m.OuterLearningRate = 0
		}, "ModelOptimizer"},
		{"optimizer 3", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.Optimizer = 3 }, "ModelOptimizer"},
		{"precision mx8", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Precision = coordinator.PrecisionMX8
		}, ""},
		{"llama mx8", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			llama(m)
			m.Precision = coordinator.PrecisionMX8
		}, ""},
		{"precision 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.Precision = 2 }, "ModelPrecision"},
		{"precision 255", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.Precision = 255 }, "ModelPrecision"},
		// The optimizer's rules come first.
		{"optimizer 3, precision 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Optimizer, m.Precision = 3, 2
		}, "ModelOptimizer"},
		{"grad shards 2", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.GradShardsLog2 = 1 }, ""},
		{"grad shards 64", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.GradShardsLog2 = coordinator.MaxGradShardsLog2
		}, ""},
		{"mx8, 8 grad shards", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Precision, m.GradShardsLog2 = coordinator.PrecisionMX8, 3
		}, ""},
		{"grad shards 128", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.GradShardsLog2 = 7 }, "ModelGradShards"},
		{"grad shards log2 255", "cm", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) { m.GradShardsLog2 = 255 }, "ModelGradShards"},
		// The precision rule comes first.
		{"precision 2, grad shards 128", "m", func(_ *coordinator.Config, m *coordinator.Model, _ *coordinator.Progress) {
			m.Precision, m.GradShardsLog2 = 2, 7
		}, "ModelPrecision"},
		{"progress last step", "cp", func(_ *coordinator.Config, _ *coordinator.Model, p *coordinator.Progress) { p.Step = 100 }, ""},
		{"progress past the run", "cp", func(_ *coordinator.Config, _ *coordinator.Model, p *coordinator.Progress) { p.Step = 101 }, "InvalidProgress"},
		{"progress data index", "p", func(_ *coordinator.Config, _ *coordinator.Model, p *coordinator.Progress) {
			p.DataIndex = coordinator.MaxDataIndex + 1
		}, "InvalidProgress"},
		{"metadata NUL inside", "d", nil, "InvalidMetadata"},
		{"metadata", "d", func(*coordinator.Config, *coordinator.Model, *coordinator.Progress) {}, ""},
	}
	for _, tc := range cases {
		c, m, p := baseConfig, baseModel, coordinator.Progress{Step: 1}
		meta := coordinator.RunMetadata{}
		copy(meta.Name[:], "validate")
		if tc.edit != nil {
			tc.edit(&c, &m, &p)
		} else {
			meta.Name[9] = 'x' // after the NUL that ends "validate"
		}
		var u coordinator.UpdateParams
		for _, s := range tc.sections {
			switch s {
			case 'c':
				u.Config = &c
			case 'm':
				u.Model = &m
			case 'p':
				u.Progress = &p
			case 'd':
				u.Metadata = &meta
			}
		}
		e.checkVerdict(tc.name, u, tc.want)
	}

	// Running: only the metadata may change.
	e.mustSend(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Config: &baseConfig, Model: &baseModel})))
	e.mustSend(e.authority, e.ix(e.run.SetPaused(e.authority.PublicKey(), false)))
	e.checkVerdict("config while running", coordinator.UpdateParams{Config: &baseConfig}, "RunNotHalted")
	meta := coordinator.RunMetadata{}
	copy(meta.Name[:], "running")
	e.checkVerdict("metadata while running", coordinator.UpdateParams{Metadata: &meta}, "")
}

// checkVerdict compares ValidateUpdate's verdict on u with the program's.
func (e *env) checkVerdict(name string, u coordinator.UpdateParams, want string) {
	e.t.Helper()
	goErr := coordinator.ValidateUpdate(e.state(), u)
	var rule *coordinator.RuleError
	switch {
	case want == "" && goErr != nil:
		e.t.Errorf("%s: Go refuses (%v), the program's rules accept", name, goErr)
	case want != "" && (!errors.As(goErr, &rule) || rule.Code != want):
		e.t.Errorf("%s: Go says %v, want %s", name, goErr, want)
	}
	_, err := e.send(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), u)))
	var te *chain.TxError
	switch {
	case want == "" && err != nil:
		e.t.Errorf("%s: the program refused: %v", name, err)
	case want != "" && (!errors.As(err, &te) || te.Name != want):
		e.t.Errorf("%s: the program says %v, want %s", name, err, want)
	}
}
