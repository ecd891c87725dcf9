//! Program errors. Codes are explicit and stable (Anchor's custom-error range
//! starts at 6000); the IDL lists them with these names and messages.

macro_rules! errors {
    ($($name:ident = $code:literal: $msg:literal,)*) => {
        /// Every way an instruction of the Coordinator can be rejected.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u32)]
        pub enum CoordinatorError {
            $($name = $code,)*
        }

        impl CoordinatorError {
            /// All errors, in code order (for the IDL and tests).
            pub const ALL: &'static [CoordinatorError] = &[$(CoordinatorError::$name,)*];

            /// The custom error code returned to the runtime.
            pub fn code(self) -> u32 {
                self as u32
            }

            /// The variant's name, as the IDL spells it.
            pub fn name(self) -> &'static str {
                match self {
                    $(CoordinatorError::$name => stringify!($name),)*
                }
            }

            /// A message for users.
            pub fn message(self) -> &'static str {
                match self {
                    $(CoordinatorError::$name => $msg,)*
                }
            }
        }
    };
}

errors! {
    AlreadyInitialized = 6000: "the coordinator account is already initialized",
    InvalidRunId = 6001: "the run id must be 1 to 32 bytes of UTF-8 without NUL bytes",
    RunUninitialized = 6002: "the run has not been configured and started yet",
    RunFinished = 6003: "the run has finished",
    RunHalted = 6004: "the run is paused, uninitialized or finished",
    RunNotHalted = 6005: "config, model, progress and client version can only change while the run is paused or uninitialized",
    AlreadyPaused = 6006: "the run is already paused or a pause is already pending",
    NotPaused = 6007: "the run is not paused",
    TickTooEarly = 6008: "nothing to advance yet: the current phase's condition or timer has not been met",
    WrongPhase = 6009: "this instruction is not accepted in the run's current phase",
    InvalidMetadata = 6010: "run metadata strings must be UTF-8, zero-padded, without NUL bytes inside",
    InvalidClientVersion = 6011: "the client version must be 1 to 64 bytes of UTF-8",
    ConfigEpochTime = 6012: "config: epoch_time must be positive and at most one year",
    ConfigWarmupTime = 6013: "config: warmup_time must be positive and less than epoch_time",
    ConfigRoundTrainTime = 6014: "config: max_round_train_time must be positive and less than epoch_time",
    ConfigRoundWitnessTime = 6015: "config: round_witness_time must be positive and at most one year",
    ConfigCooldownTime = 6016: "config: cooldown_time must be positive and at most one year",
    ConfigWaitingTime = 6017: "config: waiting_for_members_extra_time must be positive",
    ConfigMinClients = 6018: "config: min_clients must be positive",
    ConfigInitMinClients = 6019: "config: init_min_clients must be at least min_clients, at most 256 and at most global_batch_size_start",
    ConfigBatchSize = 6020: "config: global batch sizes must satisfy 0 < global_batch_size_start <= global_batch_size_end",
    ConfigWarmupTokens = 6021: "config: global_batch_size_warmup_tokens must be at most 2^47",
    ConfigTotalSteps = 6022: "config: total_steps must be positive and less than 2^32 - 1",
    ConfigWitnessNodes = 6023: "config: witness_nodes must be at most min_clients and at most 32",
    ModelArchitecture = 6024: "model: unknown architecture",
    ModelShape = 6025: "model: n_layer, n_head and n_embd must be positive and n_embd divisible by n_head",
    ModelSeqLen = 6026: "model: max_seq_len must be 1 to 65536",
    ModelTokenizer = 6027: "model: unknown tokenizer; byte and gpt2 need vocab_size at least their vocabulary and a zero tokenizer_hash, a tokenizer.json (3) its SHA-256 in tokenizer_hash and vocab_size 1 to 262144",
    ModelDataType = 6028: "model: data_type must be pretraining (1) or fine-tuning (2)",
    ModelCheckpoint = 6029: "model: checkpoint must be Ephemeral (no repo) or Hub/P2P with a repo",
    ModelDataLocation = 6030: "model: data location kind unknown or location string missing",
    ModelLearningRate = 6031: "model: learning rates must be finite, the peak positive, the final at most the peak, and decaying schedules need decay steps (WSD's warmup and decay must fit in the run's total_steps times inner_steps)",
    ModelOptimizer = 6032: "model: optimizer must be DisTrO (1 inner step, no outer learning rate or value bits) or SparseLoCo (1 to 1000 inner steps, a finite positive outer learning rate, value bits 1/2/4/8/32, no 1-bit flag), with 0 < topk <= chunk, chunk a power of two, decay in [0, 1], finite non-negative weight decay and clipping",
    ModelColdStartSteps = 6033: "model: cold_start_warmup_steps exceeds the rounds that fit in an epoch",
    InvalidProgress = 6034: "progress: step must be 1 to total_steps, and data_index at most 2^62",
    ClientsFull = 6035: "no free client slot: all 256 hold members, pending joiners or unsettled reward points",
    AlreadyJoined = 6036: "this signer has already joined the next epoch",
    P2pIdentityTaken = 6037: "this p2p identity is registered by another signer",
    P2pIdentityLocked = 6038: "the p2p identity cannot change while the client is in the current epoch",
    NotAClient = 6039: "the signer has neither joined nor is in the current epoch",
    NotInEpoch = 6040: "the signer is not a healthy member of the current epoch",
    ClientIndexMismatch = 6041: "the client index does not name that client in the current epoch",
    WrongRound = 6042: "the report is for a different step than the current round",
    NotAWitness = 6043: "the client is not an elected witness of this round",
    AlreadyWitnessed = 6044: "this client has already reported for this round",
    InvalidBloom = 6045: "bloom filter must have 64..=1024 bits (a multiple of 64), 1..=16 hashes and no bits past its size",
    HealthCheckTooEarly = 6046: "health checks start in the third round of an epoch (the fourth with overlapped rounds)",
    ClientNotHealthy = 6047: "the accused client is no longer healthy",
    ClientHealthy = 6048: "the accused client was seen by a quorum of witnesses",
    CheckpointNotConfigured = 6049: "the run's checkpoint is ephemeral: there is no repo to update",
    InvalidCheckpoint = 6050: "checkpoint repo must be non-empty UTF-8 (revision optional)",
    CorruptState = 6051: "the coordinator account holds an invalid state",
    ArithmeticOverflow = 6052: "arithmetic overflow",
    // Checked by the instruction glue (programs/coordinator/program), not the logic.
    Unauthorized = 6053: "the signer is not this run's main authority",
    SignerMismatch = 6054: "the signer does not match the client identity in the instruction",
    JoinNotAuthorized = 6055: "the run's join authority has not authorized this signer (scope CoordinatorJoinRun)",
    InvalidParameters = 6056: "the instruction's parameters are malformed or out of range",
    // Verification (commit, verify).
    ConfigVerificationPercent = 6057: "config: verification_percent must be at most 100",
    ConfigVestingEpochs = 6058: "config: vesting_epochs must be at most 4",
    VerificationOff = 6059: "the run does not verify training (verification_percent is 0)",
    AlreadyCommitted = 6060: "this member has already committed in this round",
    StateNotLinked = 6061: "state_before must equal the state_after of the member's previous commitment (or be fresh)",
    NotCommitted = 6062: "the trainer has not committed in this round",
    NotSampled = 6063: "the trainer's commitment is not to be verified in this round",
    NotTheVerifier = 6064: "the client is not the verifier drawn for this trainer",
    InvalidVerdict = 6065: "the verdict must be MATCH (1), MISMATCH (2) or NO_DATA (3)",
    AlreadyJudged = 6066: "the trainer's commitment already has a verdict",
    // Disputes (verify with MISMATCH or NO_DATA, answer_dispute, judge_dispute).
    DisputesFull = 6067: "all 32 dispute entries are open: the verdict must wait until one is settled",
    DisputeNotFound = 6068: "no dispute has this id (or it was overwritten by a newer one)",
    DisputeNotOpen = 6069: "the dispute is already settled",
    NotAnswerable = 6070: "only a MISMATCH dispute can be answered with a rerun",
    NotTheTrainer = 6071: "the signer is not the disputed trainer",
    RerunDiffers = 6072: "the rerun's hashes differ from the accuser's: the committee decides",
    NotOnCommittee = 6073: "the signer is not on the dispute's committee",
    AlreadyVoted = 6074: "this committee member has already voted on the dispute",
    InvalidVote = 6075: "the vote must be MATCH (1), MISMATCH (2), NO_DATA (3), or RERUN (4) on an answered MISMATCH dispute",
    // Overlapped rounds (issue 17).
    ConfigOverlap = 6076: "config: overlap must be 0 or 1, and overlapped rounds (1) need verification_percent 0",
    // The Llama architecture (issue 19).
    ModelLlama = 6077: "model: a llama model needs n_kv_head dividing n_head, an even head size, intermediate_size 1 to 2^20, rope_theta 1 to 1e12 and untied 0 or 1; gpt2 leaves these and the llama knobs (rms_norm_eps, rope scaling, qkv_bias) 0",
    // Benchmark reports (report_eval).
    EvalReport = 6078: "report_eval: step not yet trained, task not 1..=32 bytes of UTF-8, a score outside [0, 1] or count 0",
    // Hardening (issue 20).
    P2pKeyNotProven = 6079: "join_run needs an Ed25519 instruction in the same transaction: the p2p key signing the join message for this signer and run",
    NotCheckpointer = 6080: "checkpoint: only the epoch's checkpointers (the members that reported as witnesses of its current or last round) may announce",
    // Verification hardening (issue 38).
    VerifySeedPending = 6081: "the round's verify seed is not drawn yet: it comes from the first slot after RoundTrain ended (a tick draws it)",
    AccuserDisputesFull = 6082: "this verifier already holds 4 open disputes as the accuser: the verdict must wait until one is settled",
    AlreadyAnswered = 6083: "the trainer has already answered this dispute",
    // Numeric contracts (issue 34).
    ModelPrecision = 6084: "model: precision must be fp32 (0) or mx8 (1)",
    ModelGradShards = 6085: "model: grad_shards_log2 must be at most 6 (1 to 64 gradient shards, a power of two)",
    // A Llama's knobs (issue 37).
    ModelRmsNormEps = 6086: "model: rms_norm_eps must be 0 (the default 1e-5) or in (0, 0.1]",
    ModelRopeScaling = 6087: "model: rope_scaling must be none (0) with every rope_* knob 0, or llama3 (1) with rope_factor 1 to 1024, 0 < rope_low_freq_factor < rope_high_freq_factor <= 1024 and rope_original_context 1 to 2^24",
    ModelQkvBias = 6088: "model: qkv_bias must be 0 or 1",
    // Prompt reports (report_prompt, issue 37).
    PromptReport = 6089: "report_prompt: step not yet trained, or tokens not 1..=32 ids each below the model's vocab_size",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_consecutive_from_6000_with_unique_names() {
        for (i, e) in CoordinatorError::ALL.iter().enumerate() {
            assert_eq!(e.code(), 6000 + i as u32, "{}", e.name());
            assert!(!e.message().is_empty());
        }
        let mut names: Vec<_> = CoordinatorError::ALL.iter().map(|e| e.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CoordinatorError::ALL.len());
    }
}
