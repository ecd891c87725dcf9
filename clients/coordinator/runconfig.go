package coordinator

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// RunConfig is the TOML file an operator writes for update-config: run
// metadata, the Coordinator config (timers, membership, batch sizes), the
// model with its data location, learning-rate schedule and optimizer, and
// optionally the progress to resume from. config/README.md documents every key.
type RunConfig struct {
	Metadata *MetadataTOML `toml:"metadata"`
	Config   *ConfigTOML   `toml:"config"`
	Model    *ModelTOML    `toml:"model"`
	Progress *ProgressTOML `toml:"progress"`

	// configGiven holds the [config] keys the file sets: a section that
	// leaves out required ones is merged over the run's config (ParamsOver).
	configGiven map[string]bool
	// name and data are the file's, for the lines of errors found later.
	name string
	data []byte
}

type MetadataTOML struct {
	Name          string `toml:"name"`
	Description   string `toml:"description"`
	NumParameters uint64 `toml:"num_parameters"`
	VocabSize     uint64 `toml:"vocab_size"`
}

type ConfigTOML struct {
	WarmupTime                  uint64 `toml:"warmup_time"`
	CooldownTime                uint64 `toml:"cooldown_time"`
	MaxRoundTrainTime           uint64 `toml:"max_round_train_time"`
	RoundWitnessTime            uint64 `toml:"round_witness_time"`
	EpochTime                   uint64 `toml:"epoch_time"`
	WaitingForMembersExtraTime  uint16 `toml:"waiting_for_members_extra_time"`
	TotalSteps                  uint32 `toml:"total_steps"`
	InitMinClients              uint16 `toml:"init_min_clients"`
	MinClients                  uint16 `toml:"min_clients"`
	WitnessNodes                uint16 `toml:"witness_nodes"`
	GlobalBatchSizeStart        uint16 `toml:"global_batch_size_start"`
	GlobalBatchSizeEnd          uint16 `toml:"global_batch_size_end"`
	GlobalBatchSizeWarmupTokens uint64 `toml:"global_batch_size_warmup_tokens"`
	// VerificationPercent samples commitments for verification (0 = off).
	VerificationPercent uint8 `toml:"verification_percent"`
	// ForgivePerEpoch is the TRANSIENT dispute outcomes forgiven per member
	// per epoch; nil (the key left out) means DefaultForgivePerEpoch.
	ForgivePerEpoch *uint8 `toml:"forgive_per_epoch"`
	// VestingEpochs delays an epoch's reward by that many epoch ends (0..4).
	VestingEpochs uint8 `toml:"vesting_epochs"`
	// Overlap exchanges a round's payloads while the next round trains
	// (clients apply round r-1 one round late); needs verification off.
	Overlap bool `toml:"overlap"`
}

// DefaultForgivePerEpoch is forgive_per_epoch when a run config leaves it out.
const DefaultForgivePerEpoch = 1

type ModelTOML struct {
	Architecture         Enum           `toml:"architecture"`
	Tokenizer            Enum           `toml:"tokenizer"`
	VocabSize            uint32         `toml:"vocab_size"`
	NLayer               uint16         `toml:"n_layer"`
	NHead                uint16         `toml:"n_head"`
	NEmbd                uint32         `toml:"n_embd"`
	MaxSeqLen            uint32         `toml:"max_seq_len"`
	DataType             Enum           `toml:"data_type"`
	ColdStartWarmupSteps uint32         `toml:"cold_start_warmup_steps"`
	Checkpoint           CheckpointTOML `toml:"checkpoint"`
	Data                 DataTOML       `toml:"data"`
	LR                   LRTOML         `toml:"lr"`
	Optimizer            OptimizerTOML  `toml:"optimizer"`
	// Llama only (architecture = "llama"); gpt2 leaves them out.
	NKVHead          uint16  `toml:"n_kv_head"`
	IntermediateSize uint32  `toml:"intermediate_size"`
	RopeTheta        float32 `toml:"rope_theta"`
	// TieEmbeddings shares the token embedding with the lm-head; nil (the
	// key left out) means true.
	TieEmbeddings *bool `toml:"tie_embeddings"`
	// Precision is the run's numeric contract, "fp32" or "mx8"; nil (the key
	// left out) means "fp32".
	Precision *Enum `toml:"precision"`
	// GradShards is the number of token shards a step's gradients are summed
	// over, a power of two from 1 to 64 (stored as its log2 in
	// Model.grad_shards_log2); nil (the key left out) means 1.
	GradShards *GradShardCount `toml:"grad_shards"`
	// A Llama's knobs (trainer.Knobs; zero is the default each names), gpt2
	// leaves them out. RopeScaling is "llama3" or nil (the key left out: no
	// scaling, and no rope_factor ... rope_original_context).
	RMSNormEps          float32 `toml:"rms_norm_eps"`
	RopeScaling         *Enum   `toml:"rope_scaling"`
	RopeFactor          float32 `toml:"rope_factor"`
	RopeLowFreqFactor   float32 `toml:"rope_low_freq_factor"`
	RopeHighFreqFactor  float32 `toml:"rope_high_freq_factor"`
	RopeOriginalContext uint32  `toml:"rope_original_context"`
	QKVBias             bool    `toml:"qkv_bias"`
}

// GradShardCount is a run config's grad_shards: a power of two from 1 to
// MaxGradShards.
type GradShardCount int64

// gradShardsValues are the values a run config's grad_shards may take.
const gradShardsValues = "a power of two from 1 to 64: 1, 2, 4, 8, 16, 32 or 64"

// gradShardsRule is what a run config's grad_shards must be.
const gradShardsRule = "must be " + gradShardsValues

// gradShardsLog2 is the log2 of a valid grad_shards.
func gradShardsLog2(n GradShardCount) (uint8, bool) {
	if n < 1 || n > MaxGradShards || n&(n-1) != 0 {
		return 0, false
	}
	return uint8(bits.TrailingZeros64(uint64(n))), true
}

type CheckpointTOML struct {
	Kind     Enum   `toml:"kind"`
	Repo     string `toml:"repo"`
	Revision string `toml:"revision"`
}

type DataTOML struct {
	Kind     Enum   `toml:"kind"`
	Location string `toml:"location"`
	// Root is the hex SHA-256 Merkle root of the data manifest the run pins ("" = not pinned).
	Root string `toml:"root"`
}

type LRTOML struct {
	Schedule          Enum    `toml:"schedule"`
	LearningRate      float32 `toml:"learning_rate"`
	FinalLearningRate float32 `toml:"final_learning_rate"`
	WarmupSteps       uint32  `toml:"warmup_steps"`
	DecaySteps        uint32  `toml:"decay_steps"`
}

type OptimizerTOML struct {
	Kind             Enum    `toml:"kind"`
	WeightDecay      float32 `toml:"weight_decay"`
	ClipGradNorm     float32 `toml:"clip_grad_norm"`
	CompressionDecay float32 `toml:"compression_decay"`
	CompressionTopk  uint32  `toml:"compression_topk"`
	CompressionChunk uint32  `toml:"compression_chunk"`
	Quantize1Bit     bool    `toml:"quantize_1bit"`
	// InnerSteps is the local steps per round (SparseLoCo); nil (the key
	// left out) means DefaultInnerSteps.
	InnerSteps *uint32 `toml:"inner_steps"`
	// OuterLearningRate is SparseLoCo's outer rate summed over members (0
	// for DisTrO): a round that applies n payloads steps min(1, this/n)
	// times their scatter-mean. nil means DefaultOuterLearningRate with
	// SparseLoCo.
	OuterLearningRate *float32 `toml:"outer_learning_rate"`
	// ValueBits is SparseLoCo's bits per transmitted value (0 for DisTrO);
	// nil means DefaultValueBits with SparseLoCo.
	ValueBits *uint8 `toml:"value_bits"`
}

// SparseLoCo's defaults for keys a run config leaves out.
const (
	DefaultOuterLearningRate = 8.0
	DefaultValueBits         = 2
)

// MaxOverlapOuterLearningRate bounds SparseLoCo's outer rate with overlap:
// above it, rounds of more members than the rate step every entry by the
// whole mean of its senders one round late, which the light model's
// overlapped runs measured at 16 members did not tolerate (clients/trainer
// README.md, "A stable outer step").
const MaxOverlapOuterLearningRate = 8.0

// DefaultInnerSteps is model.optimizer.inner_steps when a run config leaves it out.
const DefaultInnerSteps = 1

type ProgressTOML struct {
	Epoch     uint32 `toml:"epoch"`
	Step      uint32 `toml:"step"`
	DataIndex uint64 `toml:"data_index"`
}

// Enum is a TOML string naming one of the program's tags; unknown names are
// decode errors, so they carry the key and line.
type Enum struct {
	Name string
	Tag  uint8
}

// enums lists the accepted names per key (the program's tag values).
var enums = map[string]map[string]uint8{
	"architecture": {"gpt2": ArchGPT2, "llama": ArchLlama},
	"data_type":    {"pretraining": DataPretraining, "finetuning": DataFinetuning},
	"checkpoint":   {"ephemeral": 1, "hub": 2, "p2p": 3},
	"data":         {"local": 1, "http": 2},
	"schedule":     {"constant": 1, "linear": 2, "cosine": 3, "wsd": 4},
	"optimizer":    {"distro": OptimizerDistro, "sparseloco": OptimizerSparseLoCo},
	"precision":    {"fp32": PrecisionFP32, "mx8": PrecisionMX8},
	"rope_scaling": {"llama3": RopeLlama3},
}

// tokenizerJSONPrefix starts the name of a tokenizer.json tokenizer: then
// the file's SHA-256 in lowercase hex.
const tokenizerJSONPrefix = "json:"

// tokenizerTag resolves model.tokenizer: "byte", "gpt2", or "json:<sha256>"
// (TokenizerJSON, with the hash for Model.TokenizerHash).
func tokenizerTag(name string) (uint8, [32]byte, error) {
	var hash [32]byte
	switch name {
	case "byte":
		return TokenizerByte, hash, nil
	case "gpt2":
		return TokenizerGPT2, hash, nil
	}
	digits, ok := strings.CutPrefix(name, tokenizerJSONPrefix)
	if !ok {
		return 0, hash, errors.New(`want "byte", "gpt2" or "json:" followed by the SHA-256 of a tokenizer.json file`)
	}
	b, err := hex.DecodeString(digits)
	if err != nil || len(b) != len(hash) || hex.EncodeToString(b) != digits {
		return 0, hash, fmt.Errorf("the SHA-256 after %q must be 64 lowercase hex digits (got %d characters)", tokenizerJSONPrefix, len(digits))
	}
	copy(hash[:], b)
	return TokenizerJSON, hash, nil
}

// UnmarshalText keeps the name; LoadRunConfig resolves it against its key.
func (e *Enum) UnmarshalText(b []byte) error {
	e.Name = string(b)
	return nil
}

// ErrRunConfig marks a run config file that cannot be used.
var ErrRunConfig = errors.New("invalid run config")

// LoadRunConfig reads and checks a run config file. Syntax errors, unknown
// keys, values out of a field's range and unknown names report the key and
// line; the program validates the rest (its errors are named).
func LoadRunConfig(path string) (*RunConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRunConfig, err)
	}
	return ParseRunConfig(path, data)
}

// LoadParams is the parameters of the run config file path
// (LoadRunConfig, then Params).
func LoadParams(path string) (UpdateParams, error) {
	rc, err := LoadRunConfig(path)
	if err != nil {
		return UpdateParams{}, err
	}
	return rc.Params()
}

// ParseRunConfig is LoadRunConfig on bytes; name labels errors.
func ParseRunConfig(name string, data []byte) (*RunConfig, error) {
	var rc RunConfig
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&rc); err != nil {
		return nil, describe(name, data, err)
	}
	rc.name, rc.data = name, data
	if rc.Config != nil {
		var doc struct {
			Config map[string]any `toml:"config"`
		}
		if err := toml.Unmarshal(data, &doc); err != nil {
			return nil, describe(name, data, err)
		}
		rc.configGiven = map[string]bool{}
		for k := range doc.Config {
			rc.configGiven[k] = true
		}
	}
	if rc.Metadata == nil && rc.Config == nil && rc.Model == nil && rc.Progress == nil {
		return nil, fmt.Errorf("%w: %s sets none of [metadata], [config], [model], [progress]", ErrRunConfig, name)
	}
	if m := rc.Model; m != nil {
		precision := &Enum{Name: "fp32"} // the key left out
		if m.Precision != nil {
			precision = m.Precision
		}
		type enumKey struct {
			key, kind string
			e         *Enum
		}
		keys := []enumKey{
			{"model.architecture", "architecture", &m.Architecture},
			{"model.data_type", "data_type", &m.DataType},
			{"model.checkpoint.kind", "checkpoint", &m.Checkpoint.Kind},
			{"model.data.kind", "data", &m.Data.Kind},
			{"model.lr.schedule", "schedule", &m.LR.Schedule},
			{"model.optimizer.kind", "optimizer", &m.Optimizer.Kind},
			{"model.precision", "precision", precision},
		}
		if m.RopeScaling != nil {
			keys = append(keys, enumKey{"model.rope_scaling", "rope_scaling", m.RopeScaling})
		}
		for _, f := range keys {
			tag, ok := enums[f.kind][f.e.Name]
			if !ok {
				return nil, fmt.Errorf("%w: %s:%d: %s = %q; want one of %s", ErrRunConfig, name, keyLine(data, f.key), f.key, f.e.Name, names(enums[f.kind]))
			}
			f.e.Tag = tag
		}
		if g := m.GradShards; g != nil {
			if _, ok := gradShardsLog2(*g); !ok {
				return nil, fmt.Errorf("%w: %s:%d: model.grad_shards = %d; %s", ErrRunConfig, name, keyLine(data, "model.grad_shards"), *g, gradShardsRule)
			}
		}
		tag, _, err := tokenizerTag(m.Tokenizer.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: model.tokenizer = %q; %v", ErrRunConfig, name, keyLine(data, "model.tokenizer"), m.Tokenizer.Name, err)
		}
		m.Tokenizer.Tag = tag
		if m.Data.Root != "" {
			if b, err := hex.DecodeString(m.Data.Root); err != nil || len(b) != 32 {
				return nil, fmt.Errorf("%w: %s:%d: model.data.root must be 64 hex digits (a SHA-256 root)", ErrRunConfig, name, keyLine(data, "model.data.root"))
			}
		}
		for key, v := range map[string]float32{
			"model.lr.learning_rate": m.LR.LearningRate, "model.lr.final_learning_rate": m.LR.FinalLearningRate,
			"model.optimizer.weight_decay": m.Optimizer.WeightDecay, "model.optimizer.clip_grad_norm": m.Optimizer.ClipGradNorm,
			"model.optimizer.compression_decay": m.Optimizer.CompressionDecay,
			"model.optimizer.outer_learning_rate": func() float32 {
				if o := m.Optimizer.OuterLearningRate; o != nil {
					return *o
				}
				return 0
			}(),
			"model.rms_norm_eps": m.RMSNormEps, "model.rope_factor": m.RopeFactor,
			"model.rope_low_freq_factor": m.RopeLowFreqFactor, "model.rope_high_freq_factor": m.RopeHighFreqFactor,
		} {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
				return nil, fmt.Errorf("%w: %s:%d: %s must be a finite, non-negative number", ErrRunConfig, name, keyLine(data, key), key)
			}
		}
		if o := m.Optimizer.OuterLearningRate; o != nil && *o > MaxOverlapOuterLearningRate && rc.Config != nil && rc.Config.Overlap {
			return nil, fmt.Errorf("%w: %s:%d: model.optimizer.outer_learning_rate = %g with config.overlap = true: must be at most %g "+
				"(the outer rate summed over members; a higher one takes whole steps one round late in rounds of up to that many members, "+
				"which overlapped runs did not tolerate: clients/trainer/README.md, \"A stable outer step\")",
				ErrRunConfig, name, keyLine(data, "model.optimizer.outer_learning_rate"), *o, float32(MaxOverlapOuterLearningRate))
		}
	}
	p, err := rc.params()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrRunConfig, name, err)
	}
	if p.Model != nil {
		if err := rc.checkKnobs(p.Model); err != nil {
			return nil, err
		}
	}
	return &rc, nil
}

// checkKnobs refuses knobs the program would (validateKnobs) with the line
// of the key at fault: rope_scaling's, or the model's architecture's, when
// that key is left out.
func (rc *RunConfig) checkKnobs(m *Model) error {
	err := validateKnobs(m)
	var rule *RuleError
	if !errors.As(err, &rule) {
		return err
	}
	line := keyLine(rc.data, rule.Key)
	for _, k := range []string{"model.rope_scaling", "model.architecture"} {
		if line == 0 {
			line = keyLine(rc.data, k)
		}
	}
	return fmt.Errorf("%w: %s:%d: %v", ErrRunConfig, rc.name, line, err)
}

func names(m map[string]uint8) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, strconv.Quote(k))
	}
	return strings.Join(out, ", ")
}

// describe turns the decoder's errors into one line naming the key and line.
func describe(name string, data []byte, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		e := sm.Errors[0]
		row, _ := e.Position()
		return fmt.Errorf("%w: %s:%d: unknown key %s", ErrRunConfig, name, row, strings.Join(e.Key(), "."))
	}
	// Range and type errors come without a key: find the offending value.
	var doc map[string]any
	if toml.Unmarshal(data, &doc) == nil {
		if key, why := badValue(doc, reflect.TypeFor[RunConfig](), ""); key != "" {
			return fmt.Errorf("%w: %s:%d: %s %s", ErrRunConfig, name, keyLine(data, key), key, why)
		}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		if key := strings.Join(de.Key(), "."); key != "" {
			return fmt.Errorf("%w: %s:%d: %s: %v", ErrRunConfig, name, row, key, de)
		}
		return fmt.Errorf("%w: %s:%d: %v", ErrRunConfig, name, row, de)
	}
	return fmt.Errorf("%w: %s: %v", ErrRunConfig, name, err)
}

// badValue walks a decoded document along the RunConfig type and returns the
// first key whose value the type cannot hold, and why.
func badValue(doc map[string]any, t reflect.Type, prefix string) (key, why string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		v, ok := doc[name]
		if !ok {
			continue
		}
		key := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[Enum]() || ft.Kind() == reflect.String:
			if _, ok := v.(string); !ok {
				return key, "must be a string"
			}
		case ft.Kind() == reflect.Struct:
			sub, ok := v.(map[string]any)
			if !ok {
				return key, "must be a table"
			}
			if k, why := badValue(sub, ft, key+"."); k != "" {
				return k, why
			}
		case ft == reflect.TypeFor[GradShardCount]():
			n, ok := v.(int64)
			if !ok {
				return key, "must be an integer, " + gradShardsValues
			}
			if _, ok := gradShardsLog2(GradShardCount(n)); !ok {
				return key, fmt.Sprintf("= %d; %s", n, gradShardsRule)
			}
		case ft.Kind() == reflect.Bool:
			if _, ok := v.(bool); !ok {
				return key, "must be true or false"
			}
		case ft.Kind() == reflect.Float32:
			switch v.(type) {
			case float64, int64:
			default:
				return key, "must be a number"
			}
		default: // unsigned integers
			n, ok := v.(int64)
			if !ok {
				return key, "must be an integer"
			}
			limit := uint64(1)<<(ft.Bits()) - 1
			if ft.Bits() == 64 {
				limit = math.MaxUint64
			}
			if n < 0 || uint64(n) > limit {
				return key, fmt.Sprintf("= %d is out of range 0..%d", n, limit)
			}
		}
	}
	return "", ""
}

// keyLine finds the line of a dotted key ("model.lr.schedule") in a TOML
// document: the last key segment inside its table's header, or 0 if not found.
func keyLine(data []byte, dotted string) int {
	parts := strings.Split(dotted, ".")
	table, leaf := strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]
	current := ""
	for i, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "[") {
			current = strings.TrimSpace(strings.Trim(l, "[]"))
			continue
		}
		if k, _, ok := strings.Cut(l, "="); ok && current == table && strings.TrimSpace(k) == leaf {
			return i + 1
		}
	}
	return 0
}

// configKeys are the [config] keys, each with the Config field it sets.
// Optional ones have a documented default (config/README.md); the others are
// required in a section that replaces a run's config.
var configKeys = []struct {
	key      string
	optional bool
	keep     func(dst, src *Config)
}{
	{"warmup_time", false, func(d, s *Config) { d.WarmupTime = s.WarmupTime }},
	{"cooldown_time", false, func(d, s *Config) { d.CooldownTime = s.CooldownTime }},
	{"max_round_train_time", false, func(d, s *Config) { d.MaxRoundTrainTime = s.MaxRoundTrainTime }},
	{"round_witness_time", false, func(d, s *Config) { d.RoundWitnessTime = s.RoundWitnessTime }},
	{"epoch_time", false, func(d, s *Config) { d.EpochTime = s.EpochTime }},
	{"waiting_for_members_extra_time", false, func(d, s *Config) { d.WaitingForMembersExtraTime = s.WaitingForMembersExtraTime }},
	{"total_steps", false, func(d, s *Config) { d.TotalSteps = s.TotalSteps }},
	{"init_min_clients", false, func(d, s *Config) { d.InitMinClients = s.InitMinClients }},
	{"min_clients", false, func(d, s *Config) { d.MinClients = s.MinClients }},
	{"witness_nodes", false, func(d, s *Config) { d.WitnessNodes = s.WitnessNodes }},
	{"global_batch_size_start", false, func(d, s *Config) { d.GlobalBatchSizeStart = s.GlobalBatchSizeStart }},
	{"global_batch_size_end", false, func(d, s *Config) { d.GlobalBatchSizeEnd = s.GlobalBatchSizeEnd }},
	{"global_batch_size_warmup_tokens", false, func(d, s *Config) { d.GlobalBatchSizeWarmupTokens = s.GlobalBatchSizeWarmupTokens }},
	{"verification_percent", true, func(d, s *Config) { d.VerificationPercent = s.VerificationPercent }},
	{"forgive_per_epoch", true, func(d, s *Config) { d.ForgivePerEpoch = s.ForgivePerEpoch }},
	{"vesting_epochs", true, func(d, s *Config) { d.VestingEpochs = s.VestingEpochs }},
	{"overlap", true, func(d, s *Config) { d.Overlap = s.Overlap }},
}

// MissingConfigKeys lists the required [config] keys the file leaves out
// (none when it has no [config] section).
func (rc *RunConfig) MissingConfigKeys() []string {
	if rc.Config == nil {
		return nil
	}
	var missing []string
	for _, k := range configKeys {
		if !k.optional && !rc.configGiven[k.key] {
			missing = append(missing, k.key)
		}
	}
	return missing
}

// Params converts the file into update parameters (absent sections stay
// nil). A [config] section must then be complete: one that leaves out
// required keys is only meaningful over a run's config (ParamsOver).
func (rc *RunConfig) Params() (UpdateParams, error) {
	p, _, err := rc.ParamsOver(nil)
	return p, err
}

// ParamsOver is Params for a run whose config is current. A [config]
// section with every required key replaces the run's config, its left-out
// optional keys taking their defaults. One that leaves out required keys
// edits it: every key it leaves out keeps its value in current, and kept
// names them. That needs a valid current config (a run configured before);
// without one (nil, or a run never configured) the missing keys are an error.
func (rc *RunConfig) ParamsOver(current *Config) (p UpdateParams, kept []string, err error) {
	if p, err = rc.params(); err != nil {
		return p, nil, err
	}
	missing := rc.MissingConfigKeys()
	if len(missing) == 0 {
		return p, nil, nil
	}
	switch {
	case current == nil:
		return p, nil, fmt.Errorf("[config] leaves out %s: give every key (config/README.md), or apply the file with update-config, which keeps them from the run's config",
			strings.Join(missing, ", "))
	case ValidateConfig(current) != nil:
		return p, nil, fmt.Errorf("[config] leaves out %s, and the run has no config yet to keep them from: give every key (config/README.md)",
			strings.Join(missing, ", "))
	}
	for _, k := range configKeys {
		if !rc.configGiven[k.key] {
			k.keep(p.Config, current)
			kept = append(kept, k.key)
		}
	}
	return p, kept, nil
}

// CheckUpdate is ValidateUpdate of p, the file's parameters, against the
// run's state s; an error names the file and the line of the offending key.
func (rc *RunConfig) CheckUpdate(s *State, p UpdateParams) error {
	err := ValidateUpdate(s, p)
	var rule *RuleError
	if !errors.As(err, &rule) {
		return err
	}
	if line := keyLine(rc.data, rule.Key); line > 0 {
		return fmt.Errorf("%w: %s:%d: %v", ErrRunConfig, rc.name, line, err)
	}
	if strings.HasPrefix(rule.Key, "config.") {
		return fmt.Errorf("%w: %s: %v, as the run's current config has it", ErrRunConfig, rc.name, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrRunConfig, rc.name, err)
}

// params converts the file's values, with the defaults of left-out keys.
func (rc *RunConfig) params() (UpdateParams, error) {
	var p UpdateParams
	if m := rc.Metadata; m != nil {
		var meta RunMetadata
		if err := fixedInto(meta.Name[:], "metadata.name", m.Name); err != nil {
			return p, err
		}
		if err := fixedInto(meta.Description[:], "metadata.description", m.Description); err != nil {
			return p, err
		}
		meta.NumParameters, meta.VocabSize = m.NumParameters, m.VocabSize
		p.Metadata = &meta
	}
	if c := rc.Config; c != nil {
		p.Config = &Config{
			WarmupTime: c.WarmupTime, CooldownTime: c.CooldownTime, MaxRoundTrainTime: c.MaxRoundTrainTime,
			RoundWitnessTime: c.RoundWitnessTime, EpochTime: c.EpochTime,
			GlobalBatchSizeWarmupTokens: c.GlobalBatchSizeWarmupTokens, TotalSteps: c.TotalSteps,
			InitMinClients: c.InitMinClients, MinClients: c.MinClients, WitnessNodes: c.WitnessNodes,
			GlobalBatchSizeStart: c.GlobalBatchSizeStart, GlobalBatchSizeEnd: c.GlobalBatchSizeEnd,
			WaitingForMembersExtraTime: c.WaitingForMembersExtraTime,
			VerificationPercent:        c.VerificationPercent, ForgivePerEpoch: DefaultForgivePerEpoch,
			VestingEpochs: c.VestingEpochs,
		}
		if c.ForgivePerEpoch != nil {
			p.Config.ForgivePerEpoch = *c.ForgivePerEpoch
		}
		if c.Overlap {
			p.Config.Overlap = 1
		}
	}
	if m := rc.Model; m != nil {
		tokenizer, tokenizerHash, err := tokenizerTag(m.Tokenizer.Name)
		if err != nil {
			return p, fmt.Errorf("model.tokenizer: %v", err)
		}
		model := Model{
			Architecture: m.Architecture.Tag, Tokenizer: tokenizer, TokenizerHash: tokenizerHash, DataType: m.DataType.Tag,
			CheckpointKind: m.Checkpoint.Kind.Tag, DataLocationKind: m.Data.Kind.Tag, LrSchedule: m.LR.Schedule.Tag,
			Optimizer: m.Optimizer.Kind.Tag, MaxSeqLen: m.MaxSeqLen, ColdStartWarmupSteps: m.ColdStartWarmupSteps,
			NLayer: m.NLayer, NHead: m.NHead, NEmbd: m.NEmbd, VocabSize: m.VocabSize,
			LrWarmupSteps: m.LR.WarmupSteps, LrDecaySteps: m.LR.DecaySteps,
			LearningRate:      m.LR.LearningRate,
			FinalLearningRate: m.LR.FinalLearningRate,
			WeightDecay:       m.Optimizer.WeightDecay,
			ClipGradNorm:      m.Optimizer.ClipGradNorm,
			CompressionDecay:  m.Optimizer.CompressionDecay,
			CompressionTopk:   m.Optimizer.CompressionTopk, CompressionChunk: m.Optimizer.CompressionChunk,
			InnerSteps: DefaultInnerSteps,
			NKvHead:    m.NKVHead, IntermediateSize: m.IntermediateSize, RopeTheta: m.RopeTheta,
		}
		if m.TieEmbeddings != nil && !*m.TieEmbeddings {
			model.Untied = 1
		}
		model.RmsNormEps, model.RopeFactor, model.RopeLowFreqFactor = m.RMSNormEps, m.RopeFactor, m.RopeLowFreqFactor
		model.RopeHighFreqFactor, model.RopeOriginalContext = m.RopeHighFreqFactor, m.RopeOriginalContext
		if m.RopeScaling != nil {
			model.RopeScaling = m.RopeScaling.Tag
		}
		if m.QKVBias {
			model.QkvBias = 1
		}
		if m.Precision != nil {
			model.Precision = m.Precision.Tag
		}
		if m.GradShards != nil {
			log2, ok := gradShardsLog2(*m.GradShards)
			if !ok {
				return p, fmt.Errorf("model.grad_shards = %d; %s", *m.GradShards, gradShardsRule)
			}
			model.GradShardsLog2 = log2
		}
		if m.Optimizer.InnerSteps != nil {
			model.InnerSteps = *m.Optimizer.InnerSteps
		}
		if model.Optimizer == OptimizerSparseLoCo {
			model.OuterLearningRate, model.ValueBits = DefaultOuterLearningRate, DefaultValueBits
		}
		if o := m.Optimizer.OuterLearningRate; o != nil {
			model.OuterLearningRate = *o
		}
		if b := m.Optimizer.ValueBits; b != nil {
			model.ValueBits = *b
		}
		if m.Optimizer.Quantize1Bit {
			model.Quantize1bit = 1
		}
		for _, f := range []struct {
			dst       []byte
			key, text string
		}{
			{model.CheckpointRepo[:], "model.checkpoint.repo", m.Checkpoint.Repo},
			{model.CheckpointRevision[:], "model.checkpoint.revision", m.Checkpoint.Revision},
			{model.DataLocation[:], "model.data.location", m.Data.Location},
		} {
			if err := fixedInto(f.dst, f.key, f.text); err != nil {
				return p, err
			}
		}
		if m.Data.Root != "" {
			root, err := hex.DecodeString(m.Data.Root)
			if err != nil || len(root) != 32 {
				return p, fmt.Errorf("model.data.root must be 64 hex digits")
			}
			copy(model.DataRoot[:], root)
		}
		p.Model = &model
	}
	if g := rc.Progress; g != nil {
		p.Progress = &Progress{Epoch: g.Epoch, Step: g.Step, DataIndex: g.DataIndex}
	}
	return p, nil
}

func fixedInto(dst []byte, key, s string) error {
	if len(s) > len(dst) {
		return fmt.Errorf("%s is %d bytes; at most %d", key, len(s), len(dst))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte", key)
	}
	copy(dst, s)
	return nil
}
