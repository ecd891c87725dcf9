package coordinator

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// The program's limits on what the run authority sets
// (programs/coordinator/logic/src/config.rs and state.rs).
const (
	// MaxDuration is the longest accepted duration: one year, in seconds.
	MaxDuration = 365 * 24 * 3600
	// MaxSeqLen bounds Model.MaxSeqLen.
	MaxSeqLen = 1 << 16
	// MaxWitnesses bounds Config.WitnessNodes.
	MaxWitnesses = 32
	// MaxWarmupTokens bounds Config.GlobalBatchSizeWarmupTokens.
	MaxWarmupTokens = 1 << 47
	// MaxVerificationPercent bounds Config.VerificationPercent.
	MaxVerificationPercent = 100
	// VestingBuckets bounds Config.VestingEpochs.
	VestingBuckets = 4
	// MaxIntermediateSize bounds a Llama model's IntermediateSize.
	MaxIntermediateSize = 1 << 20
	// maxRopeThetaBits is 1e12 as f32 bits, the largest RopeTheta.
	maxRopeThetaBits = 0x5368_d4a5
	// maxRMSNormEpsBits is 0.1 as f32 bits, the largest RmsNormEps.
	maxRMSNormEpsBits = 0x3dcc_cccd
	// maxRopeFactorBits is 1024 as f32 bits, the largest RopeFactor and
	// RopeHighFreqFactor.
	maxRopeFactorBits = 0x4480_0000
	// MaxRopeOriginalContext bounds a Llama's RopeOriginalContext.
	MaxRopeOriginalContext = 1 << 24
	// Tokenizer vocabularies: the least for byte and gpt2, the most for json.
	tokenizerByteVocab    = 256
	tokenizerGPT2Vocab    = 50257
	tokenizerJSONMaxVocab = 1 << 18
	// MaxDataIndex bounds Progress.DataIndex.
	MaxDataIndex = 1 << 62
)

// Tags the program accepts (Model fields), besides those named elsewhere.
const (
	checkpointEphemeral = 1
	checkpointHub       = 2
	checkpointP2P       = 3
	dataLocal           = 1
	dataHTTP            = 2
	lrConstant          = 1
	lrLinear            = 2
	lrCosine            = 3
	lrWSD               = 4
)

// RuleError is a value the program would refuse: the run config key it
// comes from, the rule, and the program error it would fail with.
type RuleError struct {
	Key  string // "config.verification_percent"
	Rule string // "= 150: must be 0 to 100"
	Code string // "ConfigVerificationPercent"
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s %s (the program refuses it: %s)", e.Key, e.Rule, e.Code)
}

func ruleErr(key, code, format string, args ...any) error {
	return &RuleError{Key: key, Rule: fmt.Sprintf(format, args...), Code: code}
}

// ValidateUpdate checks an update against the run's state s with every rule
// of the program's update instruction, in its order, so that an update it
// would refuse is caught before anything is sent. It is the one place these
// rules live on the client side.
func ValidateUpdate(s *State, p UpdateParams) error {
	phase := Phase(s)
	if phase == Finished {
		return &RuleError{Key: "the run", Rule: "is Finished: nothing can change", Code: "RunFinished"}
	}
	if (p.Config != nil || p.Model != nil || p.Progress != nil) && phase != Uninitialized && phase != Paused {
		return &RuleError{Key: "[config], [model] and [progress]",
			Rule: fmt.Sprintf("change only while the run is Uninitialized or Paused, and it is %s (pause it with set-paused first)", phase), Code: "RunNotHalted"}
	}
	if p.Metadata != nil {
		if err := ValidateMetadata(p.Metadata); err != nil {
			return err
		}
	}
	config := s.Config
	if p.Config != nil {
		if err := ValidateConfig(p.Config); err != nil {
			return err
		}
		config = *p.Config
	}
	configOK := ValidateConfig(&config) == nil
	if p.Model != nil {
		if err := ValidateModel(p.Model); err != nil {
			return err
		}
		if configOK {
			if err := ValidateModelWith(p.Model, &config); err != nil {
				return err
			}
		}
	}
	if g := p.Progress; g != nil {
		if g.Step == 0 {
			return ruleErr("progress.step", "InvalidProgress", "= 0: must be at least 1")
		}
		if configOK {
			return ValidateProgress(g, &config)
		}
	}
	return nil
}

// ValidateConfig is the program's CoordinatorConfig::validate.
func ValidateConfig(c *Config) error {
	switch {
	case c.EpochTime == 0 || c.EpochTime > MaxDuration:
		return ruleErr("config.epoch_time", "ConfigEpochTime", "= %d: must be 1 to %d (one year)", c.EpochTime, MaxDuration)
	case c.WarmupTime == 0 || c.WarmupTime >= c.EpochTime:
		return ruleErr("config.warmup_time", "ConfigWarmupTime", "= %d: must be 1 to epoch_time - 1 (%d)", c.WarmupTime, c.EpochTime-1)
	case c.MaxRoundTrainTime == 0 || c.MaxRoundTrainTime >= c.EpochTime:
		return ruleErr("config.max_round_train_time", "ConfigRoundTrainTime", "= %d: must be 1 to epoch_time - 1 (%d)", c.MaxRoundTrainTime, c.EpochTime-1)
	case c.RoundWitnessTime == 0 || c.RoundWitnessTime > MaxDuration:
		return ruleErr("config.round_witness_time", "ConfigRoundWitnessTime", "= %d: must be 1 to %d (one year)", c.RoundWitnessTime, MaxDuration)
	case c.CooldownTime == 0 || c.CooldownTime > MaxDuration:
		return ruleErr("config.cooldown_time", "ConfigCooldownTime", "= %d: must be 1 to %d (one year)", c.CooldownTime, MaxDuration)
	case c.WaitingForMembersExtraTime == 0:
		return ruleErr("config.waiting_for_members_extra_time", "ConfigWaitingTime", "= 0: must be at least 1")
	case c.MinClients == 0:
		return ruleErr("config.min_clients", "ConfigMinClients", "= 0: must be at least 1")
	case c.GlobalBatchSizeStart == 0 || c.GlobalBatchSizeStart > c.GlobalBatchSizeEnd:
		return ruleErr("config.global_batch_size_start", "ConfigBatchSize", "= %d: must be 1 to global_batch_size_end (%d)", c.GlobalBatchSizeStart, c.GlobalBatchSizeEnd)
	case c.InitMinClients < c.MinClients || int(c.InitMinClients) > MaxClients || c.InitMinClients > c.GlobalBatchSizeStart:
		return ruleErr("config.init_min_clients", "ConfigInitMinClients", "= %d: must be min_clients (%d) to %d and at most global_batch_size_start (%d)",
			c.InitMinClients, c.MinClients, MaxClients, c.GlobalBatchSizeStart)
	case c.GlobalBatchSizeWarmupTokens > MaxWarmupTokens:
		return ruleErr("config.global_batch_size_warmup_tokens", "ConfigWarmupTokens", "= %d: must be at most 2^47", c.GlobalBatchSizeWarmupTokens)
	case c.TotalSteps == 0 || c.TotalSteps == math.MaxUint32:
		return ruleErr("config.total_steps", "ConfigTotalSteps", "= %d: must be 1 to 2^32 - 2", c.TotalSteps)
	case c.WitnessNodes > c.MinClients || c.WitnessNodes > MaxWitnesses:
		return ruleErr("config.witness_nodes", "ConfigWitnessNodes", "= %d: must be at most min_clients (%d) and at most %d", c.WitnessNodes, c.MinClients, MaxWitnesses)
	case c.VerificationPercent > MaxVerificationPercent:
		return ruleErr("config.verification_percent", "ConfigVerificationPercent", "= %d: must be 0 to %d", c.VerificationPercent, MaxVerificationPercent)
	case int(c.VestingEpochs) > VestingBuckets:
		return ruleErr("config.vesting_epochs", "ConfigVestingEpochs", "= %d: must be 0 to %d", c.VestingEpochs, VestingBuckets)
	case c.Overlap > 1:
		return ruleErr("config.overlap", "ConfigOverlap", "= %d: must be false or true", c.Overlap)
	case c.Overlap == 1 && c.VerificationPercent != 0:
		return ruleErr("config.overlap", "ConfigOverlap", "= true: needs verification_percent = 0 (it is %d)", c.VerificationPercent)
	}
	return nil
}

// f32Bits mirrors the program's checks of f32 fields, which it does on the
// IEEE-754 bits (no float operations on chain).
const (
	f32Sign = 0x8000_0000
	f32Exp  = 0x7f80_0000
	f32One  = 0x3f80_0000
)

// nonnegFinite: a finite, non-negative f32 (-0 and NaN excluded, as on chain).
func nonnegFinite(v float32) bool {
	b := math.Float32bits(v)
	return b&f32Sign == 0 && b&f32Exp != f32Exp
}

// fixedStrOK is the program's fixed_str_len: UTF-8, then zero padding only.
func fixedStrOK(field []byte) (n int, ok bool) {
	n = len(field)
	for i, b := range field {
		if b == 0 {
			n = i
			break
		}
	}
	for _, b := range field[n:] {
		if b != 0 {
			return 0, false
		}
	}
	return n, utf8.Valid(field[:n])
}

// ValidateMetadata is the program's RunMetadata::validate.
func ValidateMetadata(m *RunMetadata) error {
	if _, ok := fixedStrOK(m.Name[:]); !ok {
		return ruleErr("metadata.name", "InvalidMetadata", "must be UTF-8 without NUL bytes")
	}
	if _, ok := fixedStrOK(m.Description[:]); !ok {
		return ruleErr("metadata.description", "InvalidMetadata", "must be UTF-8 without NUL bytes")
	}
	return nil
}

// ValidateModel is the program's Model::validate: the rules that need only
// the model.
func ValidateModel(m *Model) error {
	if m.Architecture != ArchGPT2 && m.Architecture != ArchLlama {
		return ruleErr("model.architecture", "ModelArchitecture", "= %d: unknown", m.Architecture)
	}
	if m.NLayer == 0 || m.NHead == 0 || m.NEmbd == 0 || m.NEmbd%uint32(m.NHead) != 0 {
		return ruleErr("model.n_embd", "ModelShape", "= %d with n_layer = %d, n_head = %d: all must be positive and n_embd divisible by n_head", m.NEmbd, m.NLayer, m.NHead)
	}
	if err := validateLlama(m); err != nil {
		return err
	}
	if m.MaxSeqLen == 0 || m.MaxSeqLen > MaxSeqLen {
		return ruleErr("model.max_seq_len", "ModelSeqLen", "= %d: must be 1 to %d", m.MaxSeqLen, MaxSeqLen)
	}
	if err := validateTokenizer(m); err != nil {
		return err
	}
	if m.DataType != DataPretraining && m.DataType != DataFinetuning {
		return ruleErr("model.data_type", "ModelDataType", "= %d: must be \"pretraining\" (1) or \"finetuning\" (2)", m.DataType)
	}
	repo, repoOK := fixedStrOK(m.CheckpointRepo[:])
	_, revOK := fixedStrOK(m.CheckpointRevision[:])
	switch {
	case !repoOK || !revOK:
		return ruleErr("model.checkpoint", "ModelCheckpoint", "repo and revision must be UTF-8 without NUL bytes")
	case m.CheckpointKind == checkpointEphemeral && repo != 0:
		return ruleErr("model.checkpoint.repo", "ModelCheckpoint", "must be empty for kind = \"ephemeral\"")
	case (m.CheckpointKind == checkpointHub || m.CheckpointKind == checkpointP2P) && repo == 0:
		return ruleErr("model.checkpoint.repo", "ModelCheckpoint", "is required for kind = %q", EnumName("checkpoint", m.CheckpointKind))
	case m.CheckpointKind != checkpointEphemeral && m.CheckpointKind != checkpointHub && m.CheckpointKind != checkpointP2P:
		return ruleErr("model.checkpoint.kind", "ModelCheckpoint", "= %d: unknown", m.CheckpointKind)
	}
	location, locOK := fixedStrOK(m.DataLocation[:])
	if !locOK || (m.DataLocationKind != dataLocal && m.DataLocationKind != dataHTTP) || location == 0 {
		return ruleErr("model.data.location", "ModelDataLocation", "is required (kind \"http\" or \"local\"), UTF-8 without NUL bytes")
	}
	if err := validateLR(m); err != nil {
		return err
	}
	if err := validateOptimizer(m); err != nil {
		return err
	}
	if m.Precision != PrecisionFP32 && m.Precision != PrecisionMX8 {
		return ruleErr("model.precision", "ModelPrecision", "= %d: must be \"fp32\" (0) or \"mx8\" (1)", m.Precision)
	}
	if m.GradShardsLog2 > MaxGradShardsLog2 {
		return ruleErr("model.grad_shards", "ModelGradShards", "= 2^%d: must be a power of two from 1 to %d",
			m.GradShardsLog2, MaxGradShards)
	}
	return nil
}

func validateLlama(m *Model) error {
	if m.Architecture == ArchGPT2 {
		if m.Untied != 0 || m.NKvHead != 0 || m.IntermediateSize != 0 || math.Float32bits(m.RopeTheta) != 0 {
			return ruleErr("model", "ModelLlama", "is gpt2: leave out n_kv_head, intermediate_size, rope_theta and tie_embeddings")
		}
		return validateKnobs(m)
	}
	head := m.NEmbd / uint32(m.NHead)
	theta := math.Float32bits(m.RopeTheta)
	switch {
	case m.Untied > 1:
		return ruleErr("model.tie_embeddings", "ModelLlama", "must be true or false")
	case m.NKvHead == 0 || m.NHead%m.NKvHead != 0:
		return ruleErr("model.n_kv_head", "ModelLlama", "= %d: must be positive and divide n_head (%d)", m.NKvHead, m.NHead)
	case head%2 != 0:
		return ruleErr("model.n_embd", "ModelLlama", "= %d: n_embd / n_head (%d) must be even for a llama model", m.NEmbd, head)
	case m.IntermediateSize == 0 || m.IntermediateSize > MaxIntermediateSize:
		return ruleErr("model.intermediate_size", "ModelLlama", "= %d: must be 1 to 2^20", m.IntermediateSize)
	case !nonnegFinite(m.RopeTheta) || theta < f32One || theta > maxRopeThetaBits:
		return ruleErr("model.rope_theta", "ModelLlama", "= %g: must be 1 to 1e12", m.RopeTheta)
	}
	return validateKnobs(m)
}

// knobKeys are a Llama's knobs, as run config keys, in the order of the
// Model fields; ropeKeys those that rope_scaling = "llama3" needs.
var (
	knobKeys = []string{"model.rms_norm_eps", "model.rope_scaling", "model.rope_factor", "model.rope_low_freq_factor",
		"model.rope_high_freq_factor", "model.rope_original_context", "model.qkv_bias"}
	ropeKeys = knobKeys[2:6]
)

// firstKnobSet is the first of keys whose knob is not zero in m, or "".
func firstKnobSet(m *Model, keys []string) string {
	set := map[string]bool{
		"model.rms_norm_eps": math.Float32bits(m.RmsNormEps) != 0, "model.rope_scaling": m.RopeScaling != RopeNone,
		"model.rope_factor": math.Float32bits(m.RopeFactor) != 0, "model.rope_low_freq_factor": math.Float32bits(m.RopeLowFreqFactor) != 0,
		"model.rope_high_freq_factor": math.Float32bits(m.RopeHighFreqFactor) != 0, "model.rope_original_context": m.RopeOriginalContext != 0,
		"model.qkv_bias": m.QkvBias != 0,
	}
	for _, k := range keys {
		if set[k] {
			return k
		}
	}
	return ""
}

// validateKnobs checks a Llama's knobs: gpt2 leaves them zero (the
// program's ModelLlama); a llama's are in the ranges of the trainer's
// Knobs.check (the program's Model::validate_knobs), compared as f32 bits:
// -0, negatives and NaN are above every bound.
func validateKnobs(m *Model) error {
	if m.Architecture != ArchLlama {
		if key := firstKnobSet(m, knobKeys); key != "" {
			return ruleErr(key, "ModelLlama", "is a llama knob: gpt2 leaves it out")
		}
		return nil
	}
	if math.Float32bits(m.RmsNormEps) > maxRMSNormEpsBits {
		return ruleErr("model.rms_norm_eps", "ModelRmsNormEps", "= %g: must be 0 (the default 1e-5) or in (0, 0.1]", m.RmsNormEps)
	}
	factor, low, high := math.Float32bits(m.RopeFactor), math.Float32bits(m.RopeLowFreqFactor), math.Float32bits(m.RopeHighFreqFactor)
	switch m.RopeScaling {
	case RopeNone:
		if key := firstKnobSet(m, ropeKeys); key != "" {
			return ruleErr(key, "ModelRopeScaling", "needs rope_scaling = \"llama3\"")
		}
	case RopeLlama3:
		switch {
		case factor < f32One || factor > maxRopeFactorBits:
			return ruleErr("model.rope_factor", "ModelRopeScaling", "= %g: must be 1 to 1024", m.RopeFactor)
		case low == 0 || low >= high || high > maxRopeFactorBits:
			return ruleErr("model.rope_low_freq_factor", "ModelRopeScaling", "= %g with rope_high_freq_factor = %g: want 0 < low < high <= 1024",
				m.RopeLowFreqFactor, m.RopeHighFreqFactor)
		case m.RopeOriginalContext == 0 || m.RopeOriginalContext > MaxRopeOriginalContext:
			return ruleErr("model.rope_original_context", "ModelRopeScaling", "= %d: must be 1 to 2^24", m.RopeOriginalContext)
		}
	default:
		return ruleErr("model.rope_scaling", "ModelRopeScaling", "= %d: unknown (0 none, 1 llama3)", m.RopeScaling)
	}
	if m.QkvBias > 1 {
		return ruleErr("model.qkv_bias", "ModelQkvBias", "= %d: must be true or false", m.QkvBias)
	}
	return nil
}

func validateTokenizer(m *Model) error {
	hashed := m.TokenizerHash != [32]byte{}
	var ok bool
	switch m.Tokenizer {
	case TokenizerByte:
		ok = !hashed && m.VocabSize >= tokenizerByteVocab
	case TokenizerGPT2:
		ok = !hashed && m.VocabSize >= tokenizerGPT2Vocab
	case TokenizerJSON:
		ok = hashed && m.VocabSize >= 1 && m.VocabSize <= tokenizerJSONMaxVocab
	}
	if !ok {
		return ruleErr("model.vocab_size", "ModelTokenizer", "= %d: must be at least 256 with \"byte\", at least 50257 with \"gpt2\", 1 to 262144 with \"json:...\"", m.VocabSize)
	}
	return nil
}

func validateLR(m *Model) error {
	lr, final := math.Float32bits(m.LearningRate), math.Float32bits(m.FinalLearningRate)
	if !nonnegFinite(m.LearningRate) || lr == 0 {
		return ruleErr("model.lr.learning_rate", "ModelLearningRate", "= %g: must be finite and positive", m.LearningRate)
	}
	if !nonnegFinite(m.FinalLearningRate) || final > lr {
		return ruleErr("model.lr.final_learning_rate", "ModelLearningRate", "= %g: must be 0 to learning_rate (%g)", m.FinalLearningRate, m.LearningRate)
	}
	switch m.LrSchedule {
	case lrConstant:
	case lrLinear, lrCosine, lrWSD:
		if m.LrDecaySteps == 0 {
			return ruleErr("model.lr.decay_steps", "ModelLearningRate", "= 0: must be positive for schedule = %q", EnumName("schedule", m.LrSchedule))
		}
	default:
		return ruleErr("model.lr.schedule", "ModelLearningRate", "= %d: unknown", m.LrSchedule)
	}
	return nil
}

func validateOptimizer(m *Model) error {
	chunk := m.CompressionChunk
	switch {
	case chunk == 0 || chunk&(chunk-1) != 0:
		return ruleErr("model.optimizer.compression_chunk", "ModelOptimizer", "= %d: must be a power of two", chunk)
	case m.CompressionTopk == 0 || m.CompressionTopk > chunk:
		return ruleErr("model.optimizer.compression_topk", "ModelOptimizer", "= %d: must be 1 to compression_chunk (%d)", m.CompressionTopk, chunk)
	case !nonnegFinite(m.CompressionDecay) || math.Float32bits(m.CompressionDecay) > f32One:
		return ruleErr("model.optimizer.compression_decay", "ModelOptimizer", "= %g: must be 0 to 1", m.CompressionDecay)
	case !nonnegFinite(m.WeightDecay):
		return ruleErr("model.optimizer.weight_decay", "ModelOptimizer", "= %g: must be finite and non-negative", m.WeightDecay)
	case !nonnegFinite(m.ClipGradNorm):
		return ruleErr("model.optimizer.clip_grad_norm", "ModelOptimizer", "= %g: must be finite and non-negative", m.ClipGradNorm)
	}
	switch m.Optimizer {
	case OptimizerDistro:
		switch {
		case m.Quantize1bit > 1:
			return ruleErr("model.optimizer.quantize_1bit", "ModelOptimizer", "must be true or false")
		case m.InnerSteps != 1:
			return ruleErr("model.optimizer.inner_steps", "ModelOptimizer", "= %d: must be 1 with kind = \"distro\"", m.InnerSteps)
		case math.Float32bits(m.OuterLearningRate) != 0:
			return ruleErr("model.optimizer.outer_learning_rate", "ModelOptimizer", "= %g: must be 0 with kind = \"distro\"", m.OuterLearningRate)
		case m.ValueBits != 0:
			return ruleErr("model.optimizer.value_bits", "ModelOptimizer", "= %d: must be 0 with kind = \"distro\"", m.ValueBits)
		}
	case OptimizerSparseLoCo:
		switch {
		case m.Quantize1bit != 0:
			return ruleErr("model.optimizer.quantize_1bit", "ModelOptimizer", "must be false with kind = \"sparseloco\" (use value_bits)")
		case m.InnerSteps == 0 || m.InnerSteps > MaxInnerSteps:
			return ruleErr("model.optimizer.inner_steps", "ModelOptimizer", "= %d: must be 1 to %d", m.InnerSteps, MaxInnerSteps)
		case !nonnegFinite(m.OuterLearningRate) || math.Float32bits(m.OuterLearningRate) == 0:
			return ruleErr("model.optimizer.outer_learning_rate", "ModelOptimizer", "= %g: must be finite and positive", m.OuterLearningRate)
		case m.ValueBits != 1 && m.ValueBits != 2 && m.ValueBits != 4 && m.ValueBits != 8 && m.ValueBits != 32:
			return ruleErr("model.optimizer.value_bits", "ModelOptimizer", "= %d: must be 1, 2, 4, 8 or 32", m.ValueBits)
		}
	default:
		return ruleErr("model.optimizer.kind", "ModelOptimizer", "= %d: unknown", m.Optimizer)
	}
	return nil
}

// ValidateModelWith is the program's Model::validate_with: the rules that
// relate the model to the config.
func ValidateModelWith(m *Model, c *Config) error {
	if err := ValidateModel(m); err != nil {
		return err
	}
	var rounds uint64
	if c.EpochTime >= c.WarmupTime && c.MaxRoundTrainTime != 0 {
		rounds = (c.EpochTime - c.WarmupTime) / c.MaxRoundTrainTime
	}
	if uint64(m.ColdStartWarmupSteps) > rounds {
		return ruleErr("model.cold_start_warmup_steps", "ModelColdStartSteps", "= %d: must be at most (epoch_time - warmup_time) / max_round_train_time = %d",
			m.ColdStartWarmupSteps, rounds)
	}
	innerTotal := uint64(c.TotalSteps) * uint64(max(m.InnerSteps, 1))
	if m.LrSchedule == lrWSD && uint64(m.LrWarmupSteps)+uint64(m.LrDecaySteps) > innerTotal {
		return ruleErr("model.lr.decay_steps", "ModelLearningRate", "= %d: with schedule = \"wsd\", warmup_steps + decay_steps (%d) must fit in the run's %d (inner) steps",
			m.LrDecaySteps, uint64(m.LrWarmupSteps)+uint64(m.LrDecaySteps), innerTotal)
	}
	return nil
}

// ValidateProgress is the program's Progress::validate.
func ValidateProgress(p *Progress, c *Config) error {
	if p.Step == 0 || p.Step > c.TotalSteps {
		return ruleErr("progress.step", "InvalidProgress", "= %d: must be 1 to total_steps (%d)", p.Step, c.TotalSteps)
	}
	if p.DataIndex > MaxDataIndex {
		return ruleErr("progress.data_index", "InvalidProgress", "= %d: must be at most 2^62", p.DataIndex)
	}
	return nil
}
