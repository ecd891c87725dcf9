//! Validation of what the run authority sets: config, model, progress, metadata.
//! Every rule of the reference's `check_error`, plus the ones marked "ours".

use crate::error::CoordinatorError as E;
use crate::selection::{MAX_WARMUP_TOKENS, MAX_WITNESSES};
use crate::state::*;

/// Longest accepted duration (one year, in seconds); keeps timestamp sums far
/// from i64 overflow (ours).
pub const MAX_DURATION: u64 = 365 * 24 * 3600;
/// Longest accepted sequence length.
pub const MAX_SEQ_LEN: u32 = 1 << 16;

impl CoordinatorConfig {
    pub fn validate(&self) -> Result<(), E> {
        if self.epoch_time == 0 || self.epoch_time > MAX_DURATION {
            return Err(E::ConfigEpochTime);
        }
        // Ours: warmup_time > 0 (clients need time to load the model).
        if self.warmup_time == 0 || self.warmup_time >= self.epoch_time {
            return Err(E::ConfigWarmupTime);
        }
        if self.max_round_train_time == 0 || self.max_round_train_time >= self.epoch_time {
            return Err(E::ConfigRoundTrainTime);
        }
        if self.round_witness_time == 0 || self.round_witness_time > MAX_DURATION {
            return Err(E::ConfigRoundWitnessTime);
        }
        if self.cooldown_time == 0 || self.cooldown_time > MAX_DURATION {
            return Err(E::ConfigCooldownTime);
        }
        if self.waiting_for_members_extra_time == 0 {
            return Err(E::ConfigWaitingTime);
        }
        if self.min_clients == 0 {
            return Err(E::ConfigMinClients);
        }
        if self.global_batch_size_start == 0 || self.global_batch_size_start > self.global_batch_size_end {
            return Err(E::ConfigBatchSize);
        }
        // Ours: init_min_clients <= global_batch_size_start, because an epoch never
        // admits more clients than sequences in its first batch (every member must
        // train something, or health checks could not tell idle from absent).
        if self.init_min_clients < self.min_clients
            || usize::from(self.init_min_clients) > MAX_CLIENTS
            || self.init_min_clients > self.global_batch_size_start
        {
            return Err(E::ConfigInitMinClients);
        }
        if self.global_batch_size_warmup_tokens > MAX_WARMUP_TOKENS {
            return Err(E::ConfigWarmupTokens);
        }
        // Ours: total_steps < u32::MAX so `step` (which ends at total_steps + 1) fits.
        if self.total_steps == 0 || self.total_steps == u32::MAX {
            return Err(E::ConfigTotalSteps);
        }
        if self.witness_nodes > self.min_clients || self.witness_nodes > MAX_WITNESSES {
            return Err(E::ConfigWitnessNodes);
        }
        if self.verification_percent > MAX_VERIFICATION_PERCENT {
            return Err(E::ConfigVerificationPercent);
        }
        // Ours: vesting_epochs <= 4, the buckets of ClientSlot::unvested.
        if usize::from(self.vesting_epochs) > VESTING_BUCKETS {
            return Err(E::ConfigVestingEpochs);
        }
        // Ours: overlapped rounds apply a round's payloads one round late, after
        // its witness window; verdicts are due in that window, before the
        // payloads they judge have arrived, so overlap excludes verification.
        if self.overlap > MAX_OVERLAP || (self.overlap == 1 && self.verification_percent != 0) {
            return Err(E::ConfigOverlap);
        }
        Ok(())
    }
}

const F32_SIGN: u32 = 0x8000_0000;
const F32_EXP: u32 = 0x7f80_0000;
pub(crate) const F32_ONE: u32 = 0x3f80_0000;

/// A finite, non-negative f32 given as bits (no float operations on-chain).
fn f32_nonneg_finite(bits: u32) -> bool {
    bits & F32_SIGN == 0 && bits & F32_EXP != F32_EXP
}

/// For non-negative finite f32 values, bit order equals numeric order.
fn f32_le(a: u32, b: u32) -> bool {
    a <= b
}

/// An f32 in [0, 1] given as bits: non-negative values order like their
/// bits, and every negative value (-0 too) and NaN has larger bits than 1.0.
pub(crate) fn f32_unit(bits: u32) -> bool {
    bits <= F32_ONE
}

impl Model {
    /// Rules that need only the model.
    pub fn validate(&self) -> Result<(), E> {
        if !matches!(self.architecture, ARCH_GPT2 | ARCH_LLAMA) {
            return Err(E::ModelArchitecture);
        }
        if self.n_layer == 0 || self.n_head == 0 || self.n_embd == 0 || !self.n_embd.is_multiple_of(u32::from(self.n_head)) {
            return Err(E::ModelShape);
        }
        let llama_ok = if self.architecture == ARCH_GPT2 {
            self.untied == 0 && self.n_kv_head == 0 && self.intermediate_size == 0 && self.rope_theta == 0 && self.knobs_zero()
        } else {
            // Note: n_head > 0 (ModelShape above).
            #[allow(clippy::arithmetic_side_effects)]
            let head = self.n_embd / u32::from(self.n_head);
            self.untied <= 1
                && self.n_kv_head > 0
                && self.n_head.is_multiple_of(self.n_kv_head)
                && head.is_multiple_of(2)
                && (1..=MAX_INTERMEDIATE_SIZE).contains(&self.intermediate_size)
                && f32_nonneg_finite(self.rope_theta)
                && (F32_ONE..=MAX_ROPE_THETA).contains(&self.rope_theta)
        };
        if !llama_ok {
            return Err(E::ModelLlama);
        }
        self.validate_knobs()?;
        if self.max_seq_len == 0 || self.max_seq_len > MAX_SEQ_LEN {
            return Err(E::ModelSeqLen);
        }
        let hashed = self.tokenizer_hash != [0; 32];
        let tokenizer_ok = match self.tokenizer {
            TOKENIZER_BYTE => !hashed && self.vocab_size >= TOKENIZER_BYTE_VOCAB,
            TOKENIZER_GPT2 => !hashed && self.vocab_size >= TOKENIZER_GPT2_VOCAB,
            // The file's vocabulary is unknown here; token ids must fit the
            // data shards' u16.
            TOKENIZER_JSON => hashed && (1..=TOKENIZER_JSON_MAX_VOCAB).contains(&self.vocab_size),
            _ => false,
        };
        if !tokenizer_ok {
            return Err(E::ModelTokenizer);
        }
        if !matches!(self.data_type, DATA_PRETRAINING | DATA_FINETUNING) {
            return Err(E::ModelDataType);
        }
        let repo = fixed_str_len(&self.checkpoint_repo).ok_or(E::ModelCheckpoint)?;
        fixed_str_len(&self.checkpoint_revision).ok_or(E::ModelCheckpoint)?;
        match self.checkpoint_kind {
            CHECKPOINT_EPHEMERAL if repo == 0 => {}
            CHECKPOINT_HUB | CHECKPOINT_P2P if repo > 0 => {}
            _ => return Err(E::ModelCheckpoint),
        }
        let location = fixed_str_len(&self.data_location).ok_or(E::ModelDataLocation)?;
        if !matches!(self.data_location_kind, DATA_LOCAL | DATA_HTTP) || location == 0 {
            return Err(E::ModelDataLocation);
        }
        let lr_ok = f32_nonneg_finite(self.learning_rate)
            && self.learning_rate != 0
            && f32_nonneg_finite(self.final_learning_rate)
            && f32_le(self.final_learning_rate, self.learning_rate);
        let schedule_ok = match self.lr_schedule {
            LR_CONSTANT => true,
            LR_LINEAR | LR_COSINE | LR_WSD => self.lr_decay_steps > 0,
            _ => false,
        };
        if !lr_ok || !schedule_ok {
            return Err(E::ModelLearningRate);
        }
        let chunk = self.compression_chunk;
        // Shared by both optimizers: the top-k compression of chunks, the
        // decay (DisTrO's momentum decay, SparseLoCo's error-feedback decay),
        // weight decay and clipping.
        let common_ok = chunk.is_power_of_two()
            && self.compression_topk > 0
            && self.compression_topk <= chunk
            && f32_nonneg_finite(self.compression_decay)
            && f32_le(self.compression_decay, F32_ONE)
            && f32_nonneg_finite(self.weight_decay)
            && f32_nonneg_finite(self.clip_grad_norm);
        let optimizer_ok = match self.optimizer {
            OPTIMIZER_DISTRO => {
                self.quantize_1bit <= 1 && self.inner_steps == 1 && self.outer_learning_rate == 0 && self.value_bits == 0
            }
            OPTIMIZER_SPARSELOCO => {
                self.quantize_1bit == 0
                    && (1..=MAX_INNER_STEPS).contains(&self.inner_steps)
                    && f32_nonneg_finite(self.outer_learning_rate)
                    && self.outer_learning_rate != 0
                    && matches!(self.value_bits, 1 | 2 | 4 | 8 | 32)
            }
            _ => false,
        };
        if !common_ok || !optimizer_ok {
            return Err(E::ModelOptimizer);
        }
        if self.precision > PRECISION_MX8 {
            return Err(E::ModelPrecision);
        }
        if self.grad_shards_log2 > MAX_GRAD_SHARDS_LOG2 {
            return Err(E::ModelGradShards);
        }
        Ok(())
    }

    /// Whether every knob of a Llama is zero, as GPT-2 leaves them.
    fn knobs_zero(&self) -> bool {
        self.rms_norm_eps == 0
            && self.rope_scaling == ROPE_NONE
            && self.rope_factor == 0
            && self.rope_low_freq_factor == 0
            && self.rope_high_freq_factor == 0
            && self.rope_original_context == 0
            && self.qkv_bias == 0
    }

    /// A Llama's knobs, the ranges of the trainer's `Knobs.check`
    /// (clients/trainer/config.go). The f32 bounds are positive, so comparing
    /// bits compares values, and -0, negatives and NaN (whose bits are
    /// larger) fall outside.
    fn validate_knobs(&self) -> Result<(), E> {
        if self.rms_norm_eps > MAX_RMS_NORM_EPS {
            return Err(E::ModelRmsNormEps);
        }
        let rope_ok = match self.rope_scaling {
            ROPE_NONE => {
                self.rope_factor == 0
                    && self.rope_low_freq_factor == 0
                    && self.rope_high_freq_factor == 0
                    && self.rope_original_context == 0
            }
            ROPE_LLAMA3 => {
                (F32_ONE..=MAX_ROPE_FACTOR).contains(&self.rope_factor)
                    && self.rope_low_freq_factor > 0
                    && self.rope_low_freq_factor < self.rope_high_freq_factor
                    && self.rope_high_freq_factor <= MAX_ROPE_FACTOR
                    && (1..=MAX_ROPE_ORIGINAL_CONTEXT).contains(&self.rope_original_context)
            }
            _ => false,
        };
        if !rope_ok {
            return Err(E::ModelRopeScaling);
        }
        if self.qkv_bias > 1 {
            return Err(E::ModelQkvBias);
        }
        Ok(())
    }

    /// Rules that relate the model to the config: the cold-start warmup must fit
    /// in the rounds one epoch can hold (reference `check_cold_start_warmup_steps`).
    pub fn validate_with(&self, config: &CoordinatorConfig) -> Result<(), E> {
        self.validate()?;
        // A config that passed validate() has warmup_time < epoch_time and a
        // nonzero max_round_train_time; one that did not holds no rounds.
        let rounds = config
            .epoch_time
            .checked_sub(config.warmup_time)
            .and_then(|t| t.checked_div(config.max_round_train_time))
            .unwrap_or(0);
        if u64::from(self.cold_start_warmup_steps) > rounds {
            return Err(E::ModelColdStartSteps);
        }
        // WSD decays over the run's last steps: warmup and decay must fit in it.
        // Note: the product and the sum of two u32 fit in a u64.
        #[allow(clippy::arithmetic_side_effects)]
        let (inner_total, wsd_steps) = (
            u64::from(config.total_steps) * u64::from(self.inner_steps.max(1)),
            u64::from(self.lr_warmup_steps) + u64::from(self.lr_decay_steps),
        );
        if self.lr_schedule == LR_WSD && wsd_steps > inner_total {
            return Err(E::ModelLearningRate);
        }
        Ok(())
    }
}

/// Largest `Progress::data_index` the authority may set: a run's rounds
/// add at most 2^32 steps x 2^16 sequences x MAX_INNER_STEPS < 2^58 to it,
/// so the cursor can never overflow (a cursor near u64::MAX wedged the run
/// in Warmup, every tick failing).
pub const MAX_DATA_INDEX: u64 = 1 << 62;

impl Progress {
    pub fn validate(&self, config: &CoordinatorConfig) -> Result<(), E> {
        if self.step == 0 || self.step > config.total_steps || self.data_index > MAX_DATA_INDEX {
            return Err(E::InvalidProgress);
        }
        Ok(())
    }
}

impl RunMetadata {
    pub fn validate(&self) -> Result<(), E> {
        fixed_str_len(&self.name).ok_or(E::InvalidMetadata)?;
        fixed_str_len(&self.description).ok_or(E::InvalidMetadata)?;
        Ok(())
    }
}

/// Valid contents of a fixed string field that must not be empty.
pub(crate) fn nonempty_str(field: &[u8]) -> bool {
    matches!(fixed_str_len(field), Some(n) if n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{text, valid_config, valid_model, valid_sparseloco};

    #[test]
    fn config_rules() {
        type Edit = fn(&mut CoordinatorConfig);
        let cases: &[(&str, Edit, Result<(), E>)] = &[
            ("valid", |_| {}, Ok(())),
            ("epoch_time 0", |c| c.epoch_time = 0, Err(E::ConfigEpochTime)),
            ("epoch_time > 1y", |c| c.epoch_time = MAX_DURATION + 1, Err(E::ConfigEpochTime)),
            ("warmup 0", |c| c.warmup_time = 0, Err(E::ConfigWarmupTime)),
            ("warmup == epoch", |c| c.warmup_time = 600, Err(E::ConfigWarmupTime)),
            ("warmup just below epoch", |c| c.warmup_time = 599, Ok(())),
            ("train 0", |c| c.max_round_train_time = 0, Err(E::ConfigRoundTrainTime)),
            ("train == epoch", |c| c.max_round_train_time = 600, Err(E::ConfigRoundTrainTime)),
            ("witness time 0", |c| c.round_witness_time = 0, Err(E::ConfigRoundWitnessTime)),
            ("cooldown 0", |c| c.cooldown_time = 0, Err(E::ConfigCooldownTime)),
            ("cooldown huge", |c| c.cooldown_time = u64::MAX, Err(E::ConfigCooldownTime)),
            ("waiting extra 0", |c| c.waiting_for_members_extra_time = 0, Err(E::ConfigWaitingTime)),
            ("min_clients 0", |c| c.min_clients = 0, Err(E::ConfigMinClients)),
            ("init < min", |c| c.init_min_clients = 1, Err(E::ConfigInitMinClients)),
            ("init > batch start", |c| c.init_min_clients = 9, Err(E::ConfigInitMinClients)),
            ("init > 256", |c| {
                c.init_min_clients = 257;
                c.global_batch_size_start = 300;
                c.global_batch_size_end = 300;
            }, Err(E::ConfigInitMinClients)),
            ("init == 256", |c| {
                c.init_min_clients = 256;
                c.global_batch_size_start = 300;
                c.global_batch_size_end = 300;
            }, Ok(())),
            ("batch start 0", |c| c.global_batch_size_start = 0, Err(E::ConfigBatchSize)),
            ("batch start > end", |c| c.global_batch_size_start = 9, Err(E::ConfigBatchSize)),
            ("warmup tokens max", |c| c.global_batch_size_warmup_tokens = MAX_WARMUP_TOKENS, Ok(())),
            ("warmup tokens too many", |c| c.global_batch_size_warmup_tokens = MAX_WARMUP_TOKENS + 1, Err(E::ConfigWarmupTokens)),
            ("total_steps 0", |c| c.total_steps = 0, Err(E::ConfigTotalSteps)),
            ("total_steps max", |c| c.total_steps = u32::MAX, Err(E::ConfigTotalSteps)),
            ("witness > min", |c| c.witness_nodes = 3, Err(E::ConfigWitnessNodes)),
            ("witness > 32", |c| {
                c.min_clients = 40;
                c.init_min_clients = 40;
                c.global_batch_size_start = 40;
                c.global_batch_size_end = 40;
                c.witness_nodes = 33;
            }, Err(E::ConfigWitnessNodes)),
            ("witness 0", |c| c.witness_nodes = 0, Ok(())),
            ("verification 100", |c| c.verification_percent = 100, Ok(())),
            ("verification 101", |c| c.verification_percent = 101, Err(E::ConfigVerificationPercent)),
            ("verification 255", |c| c.verification_percent = 255, Err(E::ConfigVerificationPercent)),
            ("forgive any", |c| c.forgive_per_epoch = 255, Ok(())),
            ("vesting 4", |c| c.vesting_epochs = 4, Ok(())),
            ("vesting 5", |c| c.vesting_epochs = 5, Err(E::ConfigVestingEpochs)),
            ("overlap 1", |c| c.overlap = 1, Ok(())),
            ("overlap 2", |c| c.overlap = 2, Err(E::ConfigOverlap)),
            ("overlap 255", |c| c.overlap = 255, Err(E::ConfigOverlap)),
            ("overlap with verification", |c| {
                c.overlap = 1;
                c.verification_percent = 1;
            }, Err(E::ConfigOverlap)),
            ("no overlap with verification", |c| {
                c.overlap = 0;
                c.verification_percent = 100;
            }, Ok(())),
        ];
        for (name, edit, want) in cases {
            let mut c = valid_config();
            edit(&mut c);
            assert_eq!(c.validate(), *want, "{name}");
        }
    }

    /// valid_model() made a Llama: 4 heads on 2 key heads, SwiGLU 384, theta 10000.
    fn llama(m: &mut Model) {
        m.architecture = ARCH_LLAMA;
        m.n_kv_head = 2;
        m.intermediate_size = 384;
        m.rope_theta = 0x461c4000;
    }

    /// valid_model() with a tokenizer.json of 32000 tokens.
    fn json_tokenizer(m: &mut Model) {
        m.tokenizer = TOKENIZER_JSON;
        m.vocab_size = 32000;
        m.tokenizer_hash = [0xab; 32];
    }

    #[test]
    fn model_rules() {
        type Edit = fn(&mut Model);
        let cases: &[(&str, Edit, Result<(), E>)] = &[
            ("valid", |_| {}, Ok(())),
            ("zeroed architecture", |m| m.architecture = 0, Err(E::ModelArchitecture)),
            ("architecture 3", |m| m.architecture = 3, Err(E::ModelArchitecture)),
            ("gpt2 with kv heads", |m| m.n_kv_head = 2, Err(E::ModelLlama)),
            ("gpt2 with rope", |m| m.rope_theta = 0x461c4000, Err(E::ModelLlama)),
            ("gpt2 untied", |m| m.untied = 1, Err(E::ModelLlama)),
            ("gpt2 with intermediate", |m| m.intermediate_size = 384, Err(E::ModelLlama)),
            ("llama", llama, Ok(())),
            ("llama untied", |m| {
                llama(m);
                m.untied = 1;
            }, Ok(())),
            ("llama untied 2", |m| {
                llama(m);
                m.untied = 2;
            }, Err(E::ModelLlama)),
            ("llama kv 0", |m| {
                llama(m);
                m.n_kv_head = 0;
            }, Err(E::ModelLlama)),
            ("llama kv not dividing", |m| {
                llama(m);
                m.n_kv_head = 3;
            }, Err(E::ModelLlama)),
            ("llama odd head size", |m| {
                llama(m);
                m.n_embd = 4 * 33;
            }, Err(E::ModelLlama)),
            ("llama intermediate 0", |m| {
                llama(m);
                m.intermediate_size = 0;
            }, Err(E::ModelLlama)),
            ("llama intermediate too big", |m| {
                llama(m);
                m.intermediate_size = MAX_INTERMEDIATE_SIZE + 1;
            }, Err(E::ModelLlama)),
            ("llama theta below 1", |m| {
                llama(m);
                m.rope_theta = 0x3f000000; // 0.5
            }, Err(E::ModelLlama)),
            ("llama theta 1e12", |m| {
                llama(m);
                m.rope_theta = MAX_ROPE_THETA;
            }, Ok(())),
            ("llama theta above 1e12", |m| {
                llama(m);
                m.rope_theta = MAX_ROPE_THETA + 1;
            }, Err(E::ModelLlama)),
            ("llama theta inf", |m| {
                llama(m);
                m.rope_theta = F32_EXP;
            }, Err(E::ModelLlama)),
            ("llama theta negative", |m| {
                llama(m);
                m.rope_theta = 0xc61c4000;
            }, Err(E::ModelLlama)),
            ("n_head 0", |m| m.n_head = 0, Err(E::ModelShape)),
            ("n_layer 0", |m| m.n_layer = 0, Err(E::ModelShape)),
            ("embd not divisible", |m| m.n_embd = 130, Err(E::ModelShape)),
            ("seq 0", |m| m.max_seq_len = 0, Err(E::ModelSeqLen)),
            ("seq too long", |m| m.max_seq_len = MAX_SEQ_LEN + 1, Err(E::ModelSeqLen)),
            ("tokenizer unknown", |m| m.tokenizer = 9, Err(E::ModelTokenizer)),
            ("gpt2 vocab too small", |m| m.tokenizer = TOKENIZER_GPT2, Err(E::ModelTokenizer)),
            ("gpt2 padded vocab", |m| {
                m.tokenizer = TOKENIZER_GPT2;
                m.vocab_size = 50304;
            }, Ok(())),
            ("byte with a hash", |m| m.tokenizer_hash = [1; 32], Err(E::ModelTokenizer)),
            ("gpt2 with a hash", |m| {
                m.tokenizer = TOKENIZER_GPT2;
                m.vocab_size = 50304;
                m.tokenizer_hash[31] = 1;
            }, Err(E::ModelTokenizer)),
            ("json", json_tokenizer, Ok(())),
            ("json without a hash", |m| {
                json_tokenizer(m);
                m.tokenizer_hash = [0; 32];
            }, Err(E::ModelTokenizer)),
            ("json vocab 262144", |m| {
                json_tokenizer(m);
                m.vocab_size = 1 << 18;
            }, Ok(())),
            ("json vocab 262145", |m| {
                json_tokenizer(m);
                m.vocab_size = (1 << 18) + 1;
            }, Err(E::ModelTokenizer)),
            ("json vocab 0", |m| {
                json_tokenizer(m);
                m.vocab_size = 0;
            }, Err(E::ModelTokenizer)),
            ("json tokenizer 4", |m| {
                json_tokenizer(m);
                m.tokenizer = 4;
            }, Err(E::ModelTokenizer)),
            ("data type", |m| m.data_type = 0, Err(E::ModelDataType)),
            ("fine-tuning", |m| m.data_type = DATA_FINETUNING, Ok(())),
            ("llama fine-tuning", |m| {
                llama(m);
                m.data_type = DATA_FINETUNING;
            }, Ok(())),
            ("data type 3", |m| m.data_type = 3, Err(E::ModelDataType)),
            ("data type 255", |m| m.data_type = 255, Err(E::ModelDataType)),
            ("hub without repo", |m| m.checkpoint_repo = [0; URL_LEN], Err(E::ModelCheckpoint)),
            ("ephemeral with repo", |m| m.checkpoint_kind = CHECKPOINT_EPHEMERAL, Err(E::ModelCheckpoint)),
            ("ephemeral", |m| {
                m.checkpoint_kind = CHECKPOINT_EPHEMERAL;
                m.checkpoint_repo = [0; URL_LEN];
            }, Ok(())),
            ("checkpoint kind unknown", |m| m.checkpoint_kind = 7, Err(E::ModelCheckpoint)),
            ("bad revision utf8", |m| m.checkpoint_revision[0] = 0xff, Err(E::ModelCheckpoint)),
            ("data location empty", |m| m.data_location = [0; URL_LEN], Err(E::ModelDataLocation)),
            ("data location kind", |m| m.data_location_kind = 0, Err(E::ModelDataLocation)),
            ("lr zero", |m| m.learning_rate = 0, Err(E::ModelLearningRate)),
            ("lr negative", |m| m.learning_rate = 0xba83126f, Err(E::ModelLearningRate)),
            ("lr nan", |m| m.learning_rate = 0x7fc00000, Err(E::ModelLearningRate)),
            ("lr inf", |m| m.learning_rate = 0x7f800000, Err(E::ModelLearningRate)),
            ("final above peak", |m| m.final_learning_rate = 0x3c23d70a, Err(E::ModelLearningRate)),
            ("cosine without decay steps", |m| m.lr_decay_steps = 0, Err(E::ModelLearningRate)),
            ("constant without decay steps", |m| {
                m.lr_schedule = LR_CONSTANT;
                m.lr_decay_steps = 0;
            }, Ok(())),
            ("schedule unknown", |m| m.lr_schedule = 0, Err(E::ModelLearningRate)),
            ("schedule 5", |m| m.lr_schedule = 5, Err(E::ModelLearningRate)),
            ("wsd", |m| m.lr_schedule = LR_WSD, Ok(())),
            ("wsd without decay steps", |m| {
                m.lr_schedule = LR_WSD;
                m.lr_decay_steps = 0;
            }, Err(E::ModelLearningRate)),
            ("optimizer unknown", |m| m.optimizer = 3, Err(E::ModelOptimizer)),
            ("optimizer zero", |m| m.optimizer = 0, Err(E::ModelOptimizer)),
            ("distro inner steps 0", |m| m.inner_steps = 0, Err(E::ModelOptimizer)),
            ("distro inner steps 2", |m| m.inner_steps = 2, Err(E::ModelOptimizer)),
            ("distro outer lr", |m| m.outer_learning_rate = F32_ONE, Err(E::ModelOptimizer)),
            ("distro value bits", |m| m.value_bits = 2, Err(E::ModelOptimizer)),
            ("distro padding ignored", |m| m._padding = [0xff; 4], Ok(())),
            ("chunk not pow2", |m| m.compression_chunk = 48, Err(E::ModelOptimizer)),
            ("topk 0", |m| m.compression_topk = 0, Err(E::ModelOptimizer)),
            ("topk > chunk", |m| m.compression_topk = 65, Err(E::ModelOptimizer)),
            ("decay > 1", |m| m.compression_decay = 0x3f800001, Err(E::ModelOptimizer)),
            ("decay == 1", |m| m.compression_decay = F32_ONE, Ok(())),
            ("weight decay negative", |m| m.weight_decay = 0xbdcccccd, Err(E::ModelOptimizer)),
            ("clip nan", |m| m.clip_grad_norm = 0x7fc00000, Err(E::ModelOptimizer)),
            ("quantize flag 2", |m| m.quantize_1bit = 2, Err(E::ModelOptimizer)),
            ("precision fp32", |m| m.precision = PRECISION_FP32, Ok(())),
            ("precision mx8", |m| m.precision = PRECISION_MX8, Ok(())),
            ("llama mx8", |m| {
                llama(m);
                m.precision = PRECISION_MX8;
            }, Ok(())),
            ("precision 2", |m| m.precision = 2, Err(E::ModelPrecision)),
            ("precision 255", |m| m.precision = 255, Err(E::ModelPrecision)),
            // The optimizer's rules come first.
            ("bad optimizer and precision", |m| {
                m.optimizer = 3;
                m.precision = 2;
            }, Err(E::ModelOptimizer)),
            ("one grad shard", |m| m.grad_shards_log2 = 0, Ok(())),
            ("2 grad shards", |m| m.grad_shards_log2 = 1, Ok(())),
            ("64 grad shards", |m| m.grad_shards_log2 = MAX_GRAD_SHARDS_LOG2, Ok(())),
            ("mx8, 8 grad shards", |m| {
                m.precision = PRECISION_MX8;
                m.grad_shards_log2 = 3;
            }, Ok(())),
            ("128 grad shards", |m| m.grad_shards_log2 = 7, Err(E::ModelGradShards)),
            ("grad shards log2 255", |m| m.grad_shards_log2 = 255, Err(E::ModelGradShards)),
            // The precision rule comes first.
            ("bad precision and grad shards", |m| {
                m.precision = 2;
                m.grad_shards_log2 = 7;
            }, Err(E::ModelPrecision)),
        ];
        for (name, edit, want) in cases {
            let mut m = valid_model();
            edit(&mut m);
            assert_eq!(m.validate(), *want, "{name}");
        }
    }

    /// llama() with Llama 3.1's rotary scaling: factor 8, low 1, high 4, 8192 tokens.
    fn llama3(m: &mut Model) {
        llama(m);
        m.rope_scaling = ROPE_LLAMA3;
        m.rope_factor = 0x41000000;
        m.rope_low_freq_factor = F32_ONE;
        m.rope_high_freq_factor = 0x40800000;
        m.rope_original_context = 8192;
    }

    #[test]
    fn knob_rules() {
        type Edit = fn(&mut Model);
        let cases: &[(&str, Edit, Result<(), E>)] = &[
            ("gpt2 without knobs", |_| {}, Ok(())),
            ("gpt2 with rms_norm_eps", |m| m.rms_norm_eps = 0x358637bd, Err(E::ModelLlama)),
            ("gpt2 with rope scaling", |m| m.rope_scaling = ROPE_LLAMA3, Err(E::ModelLlama)),
            ("gpt2 with rope factor", |m| m.rope_factor = F32_ONE, Err(E::ModelLlama)),
            ("gpt2 with low freq", |m| m.rope_low_freq_factor = F32_ONE, Err(E::ModelLlama)),
            ("gpt2 with high freq", |m| m.rope_high_freq_factor = F32_ONE, Err(E::ModelLlama)),
            ("gpt2 with original context", |m| m.rope_original_context = 8192, Err(E::ModelLlama)),
            ("gpt2 with qkv bias", |m| m.qkv_bias = 1, Err(E::ModelLlama)),
            ("llama without knobs", llama, Ok(())),
            ("eps 1e-6", |m| {
                llama(m);
                m.rms_norm_eps = 0x358637bd;
            }, Ok(())),
            ("eps 0.1", |m| {
                llama(m);
                m.rms_norm_eps = MAX_RMS_NORM_EPS;
            }, Ok(())),
            ("eps smallest subnormal", |m| {
                llama(m);
                m.rms_norm_eps = 1;
            }, Ok(())),
            ("eps above 0.1", |m| {
                llama(m);
                m.rms_norm_eps = MAX_RMS_NORM_EPS + 1;
            }, Err(E::ModelRmsNormEps)),
            ("eps -0", |m| {
                llama(m);
                m.rms_norm_eps = F32_SIGN;
            }, Err(E::ModelRmsNormEps)),
            ("eps negative", |m| {
                llama(m);
                m.rms_norm_eps = 0xb727c5ac; // -1e-5
            }, Err(E::ModelRmsNormEps)),
            ("eps nan", |m| {
                llama(m);
                m.rms_norm_eps = 0x7fc00000;
            }, Err(E::ModelRmsNormEps)),
            ("eps inf", |m| {
                llama(m);
                m.rms_norm_eps = F32_EXP;
            }, Err(E::ModelRmsNormEps)),
            ("llama3", llama3, Ok(())),
            ("llama3 factor 1", |m| {
                llama3(m);
                m.rope_factor = F32_ONE;
            }, Ok(())),
            ("llama3 factor 1024", |m| {
                llama3(m);
                m.rope_factor = MAX_ROPE_FACTOR;
            }, Ok(())),
            ("llama3 factor below 1", |m| {
                llama3(m);
                m.rope_factor = F32_ONE - 1;
            }, Err(E::ModelRopeScaling)),
            ("llama3 factor above 1024", |m| {
                llama3(m);
                m.rope_factor = MAX_ROPE_FACTOR + 1;
            }, Err(E::ModelRopeScaling)),
            ("llama3 factor 0", |m| {
                llama3(m);
                m.rope_factor = 0;
            }, Err(E::ModelRopeScaling)),
            ("llama3 factor -8", |m| {
                llama3(m);
                m.rope_factor = 0xc1000000;
            }, Err(E::ModelRopeScaling)),
            ("llama3 factor nan", |m| {
                llama3(m);
                m.rope_factor = 0x7fc00000;
            }, Err(E::ModelRopeScaling)),
            ("llama3 low 0", |m| {
                llama3(m);
                m.rope_low_freq_factor = 0;
            }, Err(E::ModelRopeScaling)),
            ("llama3 low -1", |m| {
                llama3(m);
                m.rope_low_freq_factor = 0xbf800000;
            }, Err(E::ModelRopeScaling)),
            ("llama3 low tiny", |m| {
                llama3(m);
                m.rope_low_freq_factor = 1;
            }, Ok(())),
            ("llama3 low == high", |m| {
                llama3(m);
                m.rope_low_freq_factor = m.rope_high_freq_factor;
            }, Err(E::ModelRopeScaling)),
            ("llama3 low > high", |m| {
                llama3(m);
                m.rope_low_freq_factor = 0x41000000;
            }, Err(E::ModelRopeScaling)),
            ("llama3 high 1024", |m| {
                llama3(m);
                m.rope_high_freq_factor = MAX_ROPE_FACTOR;
            }, Ok(())),
            ("llama3 high above 1024", |m| {
                llama3(m);
                m.rope_high_freq_factor = MAX_ROPE_FACTOR + 1;
            }, Err(E::ModelRopeScaling)),
            ("llama3 high inf", |m| {
                llama3(m);
                m.rope_high_freq_factor = F32_EXP;
            }, Err(E::ModelRopeScaling)),
            ("llama3 original context 1", |m| {
                llama3(m);
                m.rope_original_context = 1;
            }, Ok(())),
            ("llama3 original context 2^24", |m| {
                llama3(m);
                m.rope_original_context = MAX_ROPE_ORIGINAL_CONTEXT;
            }, Ok(())),
            ("llama3 original context 0", |m| {
                llama3(m);
                m.rope_original_context = 0;
            }, Err(E::ModelRopeScaling)),
            ("llama3 original context above 2^24", |m| {
                llama3(m);
                m.rope_original_context = MAX_ROPE_ORIGINAL_CONTEXT + 1;
            }, Err(E::ModelRopeScaling)),
            ("no scaling with a factor", |m| {
                llama(m);
                m.rope_factor = 0x41000000;
            }, Err(E::ModelRopeScaling)),
            ("no scaling with low freq", |m| {
                llama(m);
                m.rope_low_freq_factor = F32_ONE;
            }, Err(E::ModelRopeScaling)),
            ("no scaling with high freq", |m| {
                llama(m);
                m.rope_high_freq_factor = F32_ONE;
            }, Err(E::ModelRopeScaling)),
            ("no scaling with original context", |m| {
                llama(m);
                m.rope_original_context = 8192;
            }, Err(E::ModelRopeScaling)),
            ("rope scaling 2", |m| {
                llama3(m);
                m.rope_scaling = 2;
            }, Err(E::ModelRopeScaling)),
            ("rope scaling 255", |m| {
                llama(m);
                m.rope_scaling = 255;
            }, Err(E::ModelRopeScaling)),
            ("qkv bias", |m| {
                llama(m);
                m.qkv_bias = 1;
            }, Ok(())),
            ("qkv bias 2", |m| {
                llama(m);
                m.qkv_bias = 2;
            }, Err(E::ModelQkvBias)),
            ("qkv bias 255", |m| {
                llama3(m);
                m.qkv_bias = 255;
            }, Err(E::ModelQkvBias)),
            ("every knob", |m| {
                llama3(m);
                m.rms_norm_eps = 0x358637bd;
                m.qkv_bias = 1;
            }, Ok(())),
            // In order: epsilon, rotary scaling, qkv bias.
            ("bad eps and scaling", |m| {
                llama(m);
                m.rms_norm_eps = F32_SIGN;
                m.rope_scaling = 2;
            }, Err(E::ModelRmsNormEps)),
            ("bad scaling and qkv bias", |m| {
                llama(m);
                m.rope_scaling = 2;
                m.qkv_bias = 2;
            }, Err(E::ModelRopeScaling)),
        ];
        for (name, edit, want) in cases {
            let mut m = valid_model();
            edit(&mut m);
            assert_eq!(m.validate(), *want, "{name}");
        }
    }

    #[test]
    fn sparseloco_rules() {
        type Edit = fn(&mut Model);
        let cases: &[(&str, Edit, Result<(), E>)] = &[
            ("valid", |_| {}, Ok(())),
            ("one inner step", |m| m.inner_steps = 1, Ok(())),
            ("max inner steps", |m| m.inner_steps = MAX_INNER_STEPS, Ok(())),
            ("inner steps 0", |m| m.inner_steps = 0, Err(E::ModelOptimizer)),
            ("inner steps above max", |m| m.inner_steps = MAX_INNER_STEPS + 1, Err(E::ModelOptimizer)),
            ("inner steps huge", |m| m.inner_steps = u32::MAX, Err(E::ModelOptimizer)),
            ("outer lr 0", |m| m.outer_learning_rate = 0, Err(E::ModelOptimizer)),
            ("outer lr -0", |m| m.outer_learning_rate = F32_SIGN, Err(E::ModelOptimizer)),
            ("outer lr negative", |m| m.outer_learning_rate = 0xbf800000, Err(E::ModelOptimizer)),
            ("outer lr nan", |m| m.outer_learning_rate = 0x7fc00000, Err(E::ModelOptimizer)),
            ("outer lr inf", |m| m.outer_learning_rate = 0x7f800000, Err(E::ModelOptimizer)),
            ("outer lr tiny", |m| m.outer_learning_rate = 1, Ok(())),
            ("outer lr 0.7", |m| m.outer_learning_rate = 0x3f333333, Ok(())),
            ("value bits 1", |m| m.value_bits = 1, Ok(())),
            ("value bits 4", |m| m.value_bits = 4, Ok(())),
            ("value bits 8", |m| m.value_bits = 8, Ok(())),
            ("value bits 32", |m| m.value_bits = 32, Ok(())),
            ("value bits 0", |m| m.value_bits = 0, Err(E::ModelOptimizer)),
            ("value bits 3", |m| m.value_bits = 3, Err(E::ModelOptimizer)),
            ("value bits 16", |m| m.value_bits = 16, Err(E::ModelOptimizer)),
            ("value bits 64", |m| m.value_bits = 64, Err(E::ModelOptimizer)),
            ("quantize_1bit set", |m| m.quantize_1bit = 1, Err(E::ModelOptimizer)),
            ("chunk not pow2", |m| m.compression_chunk = 48, Err(E::ModelOptimizer)),
            ("chunk 0", |m| m.compression_chunk = 0, Err(E::ModelOptimizer)),
            ("topk 0", |m| m.compression_topk = 0, Err(E::ModelOptimizer)),
            ("topk == chunk", |m| m.compression_topk = 64, Ok(())),
            ("topk > chunk", |m| m.compression_topk = 65, Err(E::ModelOptimizer)),
            ("error feedback off", |m| m.compression_decay = 0, Ok(())),
            ("error feedback 1", |m| m.compression_decay = F32_ONE, Ok(())),
            ("error feedback > 1", |m| m.compression_decay = 0x3f800001, Err(E::ModelOptimizer)),
            ("error feedback negative", |m| m.compression_decay = 0xbf000000, Err(E::ModelOptimizer)),
            ("weight decay 0.1", |m| m.weight_decay = 0x3dcccccd, Ok(())),
            ("weight decay negative", |m| m.weight_decay = 0xbdcccccd, Err(E::ModelOptimizer)),
            ("weight decay inf", |m| m.weight_decay = 0x7f800000, Err(E::ModelOptimizer)),
            ("clip 0", |m| m.clip_grad_norm = 0, Ok(())),
            ("clip nan", |m| m.clip_grad_norm = 0x7fc00000, Err(E::ModelOptimizer)),
            ("clip negative", |m| m.clip_grad_norm = 0xbf800000, Err(E::ModelOptimizer)),
        ];
        for (name, edit, want) in cases {
            let mut m = valid_sparseloco();
            edit(&mut m);
            assert_eq!(m.validate(), *want, "{name}");
        }
    }

    #[test]
    fn cold_start_steps_must_fit_an_epoch() {
        let c = valid_config(); // (600 - 30) / 20 = 28 rounds
        let mut m = valid_model();
        m.cold_start_warmup_steps = 28;
        assert_eq!(m.validate_with(&c), Ok(()));
        m.cold_start_warmup_steps = 29;
        assert_eq!(m.validate_with(&c), Err(E::ModelColdStartSteps));
    }

    #[test]
    fn wsd_warmup_and_decay_must_fit_the_run() {
        let mut c = valid_config();
        let mut m = valid_model();
        m.lr_schedule = LR_WSD;
        m.lr_warmup_steps = 10;
        m.lr_decay_steps = 90;
        c.total_steps = 100;
        assert_eq!(m.validate_with(&c), Ok(()));
        c.total_steps = 99;
        assert_eq!(m.validate_with(&c), Err(E::ModelLearningRate));
        // SparseLoCo counts inner steps: 34 rounds of 3 hold 102.
        m.optimizer = OPTIMIZER_SPARSELOCO;
        m.inner_steps = 3;
        m.outer_learning_rate = 0x3f800000;
        m.value_bits = 2;
        m.quantize_1bit = 0;
        c.total_steps = 34;
        assert_eq!(m.validate_with(&c), Ok(()));
        c.total_steps = 33;
        assert_eq!(m.validate_with(&c), Err(E::ModelLearningRate));
    }

    #[test]
    fn progress_and_metadata_rules() {
        let c = valid_config();
        let p = |step| Progress { epoch: 0, step, data_index: 0 };
        assert_eq!(p(0).validate(&c), Err(E::InvalidProgress));
        assert_eq!(p(1).validate(&c), Ok(()));
        assert_eq!(p(100).validate(&c), Ok(()));
        assert_eq!(p(101).validate(&c), Err(E::InvalidProgress));
        // A cursor near u64::MAX would wedge the run in Warmup.
        let at = |data_index| Progress { epoch: 0, step: 1, data_index };
        assert_eq!(at(MAX_DATA_INDEX).validate(&c), Ok(()));
        assert_eq!(at(MAX_DATA_INDEX + 1).validate(&c), Err(E::InvalidProgress));
        assert_eq!(at(u64::MAX - 3).validate(&c), Err(E::InvalidProgress));
        let mut md = RunMetadata { name: text("run"), description: [0; DESCRIPTION_LEN], num_parameters: 1, vocab_size: 256 };
        assert_eq!(md.validate(), Ok(()));
        md.description[5] = b'x';
        assert_eq!(md.validate(), Err(E::InvalidMetadata));
    }
}
