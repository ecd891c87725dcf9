//! The fixed layout of the CoordinatorAccount (zero-copy, `#[repr(C)]`).
//!
//! Rules that keep Borsh and the C layout identical (so anchor-go's Borsh
//! decoder reads the raw account bytes): every field naturally aligned, every
//! padding byte an explicit `_padding` field, bools and enum tags as `u8`, no
//! Rust enums or `bool` in the layout. Every bit pattern is a valid value of every
//! struct here; tags are checked when read.

use crate::bloom::Bloom;
use crate::selection::MAX_WITNESSES;

/// Layout version written by `init` (bump with a new program id on change).
pub const STATE_VERSION: u64 = 7;
/// Client slots: members, pending joiners and holders of unsettled points.
pub const MAX_CLIENTS: usize = 256;
/// Rounds kept in the ring buffer (current, previous, and two for lagging readers).
pub const NUM_STORED_ROUNDS: usize = 4;
pub const RUN_ID_LEN: usize = 32;
pub const CLIENT_VERSION_LEN: usize = 64;
pub const NAME_LEN: usize = 64;
pub const DESCRIPTION_LEN: usize = 280;
pub const URL_LEN: usize = 192;
pub const REVISION_LEN: usize = 64;
/// Longest benchmark task name in `report_eval` (and its event's zero-padded field).
pub const EVAL_TASK_LEN: usize = 32;
/// Most generated tokens in `report_prompt` (and its event's zero-padded field).
pub const PROMPT_TOKENS_LEN: usize = 32;
/// Dispute entries kept (open ones and the latest settled ones).
pub const MAX_DISPUTES: usize = 32;
/// Members on a dispute's committee (fewer when the round is smaller).
pub const COMMITTEE_SIZE: usize = 3;
/// Unvested reward buckets per client (`ClientSlot::unvested`, one per epoch
/// mod 4); `vesting_epochs` is at most this.
pub const VESTING_BUCKETS: usize = 4;
/// Largest `verification_percent` (every commitment verified).
pub const MAX_VERIFICATION_PERCENT: u8 = 100;

/// Phases of a run. Numbering matches the reference implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RunState {
    Uninitialized = 0,
    WaitingForMembers = 1,
    Warmup = 2,
    RoundTrain = 3,
    RoundWitness = 4,
    Cooldown = 5,
    Finished = 6,
    Paused = 7,
}

impl RunState {
    pub fn from_u8(v: u8) -> Option<RunState> {
        Some(match v {
            0 => RunState::Uninitialized,
            1 => RunState::WaitingForMembers,
            2 => RunState::Warmup,
            3 => RunState::RoundTrain,
            4 => RunState::RoundWitness,
            5 => RunState::Cooldown,
            6 => RunState::Finished,
            7 => RunState::Paused,
            _ => return None,
        })
    }

    /// No timers run and no tick advances the run.
    pub fn is_halted(self) -> bool {
        matches!(self, RunState::Uninitialized | RunState::Paused | RunState::Finished)
    }
}

/// State of a member within the current epoch (`EpochClient::state`).
pub mod client_state {
    /// Trains and is rewarded at epoch end.
    pub const HEALTHY: u8 = 1;
    /// Dropped by a health check (slashed).
    pub const DROPPED: u8 = 2;
    /// Left with `leave_run` (forfeits this epoch's reward).
    pub const LEFT: u8 = 3;
    /// Found at fault by a dispute (slashed, unvested points burned, no reward).
    pub const FAULTED: u8 = 4;
}

/// `Commit::flags` bits.
pub mod commit_flags {
    /// The member committed in this round.
    pub const COMMITTED: u8 = 1;
    /// `state_before` is a fresh, zero-momentum state (no linkage to the
    /// member's previous commitment).
    pub const FRESH: u8 = 2;
    /// The member was on probation when it committed (its first epoch in the
    /// run, or a fault this epoch or the previous one): the commitment must be
    /// verified whatever the sampling says. Fixed at commit time, so every
    /// reader of the round decides alike.
    pub const PROBATION: u8 = 4;
}

/// `Commit::verdict`, and a committee member's vote in `Dispute::votes`
/// (where 0 means not voted yet).
pub mod verdict {
    pub const NONE: u8 = 0;
    /// The verifier's replay reproduced the commitment.
    pub const MATCH: u8 = 1;
    /// The verifier's replay gave different hashes.
    pub const MISMATCH: u8 = 2;
    /// The verifier could not get the trainer's payload or its inputs.
    pub const NO_DATA: u8 = 3;
    /// A committee vote only, on an answered MISMATCH dispute: the voter's
    /// replay gave the accuser's bits and the trainer served its rerun's
    /// payload, whose hash is the accuser's claimed payload.
    pub const RERUN: u8 = 4;
}

/// `Dispute::state`: free, open, or how it was settled.
pub mod dispute_state {
    /// Never used.
    pub const FREE: u8 = 0;
    /// Waiting for the trainer's answer or the committee's majority.
    pub const OPEN: u8 = 1;
    /// A committee majority fetched the trainer's rerun, which reproduced
    /// the verifier's bits: nondeterminism, forgiven up to
    /// `forgive_per_epoch` times per epoch.
    pub const TRANSIENT: u8 = 2;
    /// The trainer is at fault.
    pub const TRAINER_FAULT: u8 = 3;
    /// The accusing verifier is at fault.
    pub const ACCUSER_FAULT: u8 = 4;
    /// The deadline passed (or the run finished) without a decision; nobody is penalized.
    pub const UNRESOLVED: u8 = 5;
    /// A committee majority got the data of a NO_DATA accusation and it
    /// replays: the accuser is charged one forgiven mistake (a fault past
    /// `forgive_per_epoch` in an epoch).
    pub const REFUTED: u8 = 6;
}

/// `Model::architecture`: GPT-2, or Llama (RMSNorm, rotary positions,
/// grouped-query attention, SwiGLU; the Llama fields of `Model`).
pub const ARCH_GPT2: u8 = 1;
pub const ARCH_LLAMA: u8 = 2;
/// Llama limits: the SwiGLU width and the rotary base (f32 bits of 1e12).
pub const MAX_INTERMEDIATE_SIZE: u32 = 1 << 20;
pub const MAX_ROPE_THETA: u32 = 0x5368_d4a5;
/// A Llama's knobs (f32 bits where a value): RMSNorm's epsilon is 0 (the
/// default 1e-5) or in (0, 0.1].
pub const MAX_RMS_NORM_EPS: u32 = 0x3dcc_cccd;
/// `Model::rope_scaling`: plain rotary frequencies, or Llama 3.1's scaling
/// (transformers' rope_type "llama3") with `rope_factor` in [1, 1024],
/// 0 < `rope_low_freq_factor` < `rope_high_freq_factor` <= 1024 and
/// `rope_original_context` in [1, 2^24].
pub const ROPE_NONE: u8 = 0;
pub const ROPE_LLAMA3: u8 = 1;
/// 1024 as f32 bits: the largest rope factor and high-frequency factor.
pub const MAX_ROPE_FACTOR: u32 = 0x4480_0000;
pub const MAX_ROPE_ORIGINAL_CONTEXT: u32 = 1 << 24;
/// `Model::tokenizer`: byte-level (vocab 256), GPT-2 BPE (vocab 50257), or a
/// Hugging Face tokenizer.json file, named by the SHA-256 in
/// `Model::tokenizer_hash` (its vocabulary is in the file, so only the data
/// format's limit bounds `vocab_size`).
pub const TOKENIZER_BYTE: u8 = 1;
pub const TOKENIZER_GPT2: u8 = 2;
pub const TOKENIZER_JSON: u8 = 3;
pub const TOKENIZER_BYTE_VOCAB: u32 = 256;
pub const TOKENIZER_GPT2_VOCAB: u32 = 50257;
/// Largest `vocab_size` with a tokenizer.json, the most the clients' data
/// format takes (4-byte tokens above 65536; Gemma's 256,000 fits).
pub const TOKENIZER_JSON_MAX_VOCAB: u32 = 1 << 18;
/// `Model::data_type`.
pub const DATA_PRETRAINING: u8 = 1;
/// Fine-tuning: loss-masked data (chat conversations or prompt/completion
/// pairs), the loss on the answers only; clients refuse data without a mask.
pub const DATA_FINETUNING: u8 = 2;
/// `Model::checkpoint_kind`. Hub: joiners load `checkpoint_repo`. P2P: joiners
/// load from peers that finished the previous epoch (the repo stays the fallback).
pub const CHECKPOINT_EPHEMERAL: u8 = 1;
pub const CHECKPOINT_HUB: u8 = 2;
pub const CHECKPOINT_P2P: u8 = 3;
/// `Model::data_location_kind`: a local directory or our HTTP data server.
pub const DATA_LOCAL: u8 = 1;
pub const DATA_HTTP: u8 = 2;
/// `Model::lr_schedule`.
pub const LR_CONSTANT: u8 = 1;
pub const LR_LINEAR: u8 = 2;
pub const LR_COSINE: u8 = 3;
/// Warmup-stable-decay: the peak rate after the warmup until the last
/// `lr_decay_steps` (inner) steps of the run, then linear to the final rate.
pub const LR_WSD: u8 = 4;
/// `Model::optimizer`: DisTrO (one optimizer step per round, DCT-compressed
/// momentum) or SparseLoCo (`inner_steps` local AdamW steps per round, then a
/// top-k, quantized pseudo-gradient with error feedback and an outer step).
pub const OPTIMIZER_DISTRO: u8 = 1;
pub const OPTIMIZER_SPARSELOCO: u8 = 2;
/// `Model::precision`: the numeric contract of the model's arithmetic.
/// fp32 (contract v2): every operation in fp32. mx8 (contract v3): each
/// matrix product's operands quantized along K in blocks of 32 to int8 with a
/// power-of-two scale, exact int32 block dot products, fp32 accumulation
/// across blocks in order; everything else as in v2.
pub const PRECISION_FP32: u8 = 0;
pub const PRECISION_MX8: u8 = 1;
/// Largest `Model::grad_shards_log2`: at most 1 << 6 = 64 gradient shards.
pub const MAX_GRAD_SHARDS_LOG2: u8 = 6;
/// Largest `Model::inner_steps` (local steps per round with SparseLoCo).
pub const MAX_INNER_STEPS: u32 = 1000;
/// `CoordinatorConfig::overlap`: 0 (a round's payloads are applied in the
/// next round) or 1 (exchanged while the next round trains, applied one round
/// later).
pub const MAX_OVERLAP: u8 = 1;

/// Free-text description of the run (changeable at any time).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunMetadata {
    pub name: [u8; NAME_LEN],
    pub description: [u8; DESCRIPTION_LEN],
    pub num_parameters: u64,
    pub vocab_size: u64,
}

/// Timers (seconds), membership and batch-size schedule of a run.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CoordinatorConfig {
    pub warmup_time: u64,
    pub cooldown_time: u64,
    pub max_round_train_time: u64,
    pub round_witness_time: u64,
    pub epoch_time: u64,
    pub global_batch_size_warmup_tokens: u64,
    pub total_steps: u32,
    pub init_min_clients: u16,
    pub min_clients: u16,
    /// Witnesses elected per round; 0 means min(clients, 32).
    pub witness_nodes: u16,
    /// Global batch size in sequences, ramped from start to end.
    pub global_batch_size_start: u16,
    pub global_batch_size_end: u16,
    pub waiting_for_members_extra_time: u16,
    /// Percent (0..=100) of commitments sampled for verification per round;
    /// 0 turns verification off (no commitments, nothing sampled).
    pub verification_percent: u8,
    /// TRANSIENT dispute outcomes forgiven per member per epoch.
    pub forgive_per_epoch: u8,
    /// Epoch ends (0..=4) before an epoch's reward becomes claimable.
    pub vesting_epochs: u8,
    /// 1: a round's payloads are exchanged while the next round trains (round
    /// r's witness reports attest round r-1's payloads; clients apply round
    /// r-1 one round late); 0: not overlapped.
    pub overlap: u8,
    pub _padding: [u8; 4],
}

/// What is trained and how. Floating-point hyperparameters are stored as IEEE-754
/// f32 bit patterns (u32): the program validates them with integer operations
/// only, since the BPF target has no floating point.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    pub architecture: u8,
    pub tokenizer: u8,
    pub data_type: u8,
    pub checkpoint_kind: u8,
    pub data_location_kind: u8,
    pub lr_schedule: u8,
    pub optimizer: u8,
    pub quantize_1bit: u8,
    pub max_seq_len: u32,
    pub cold_start_warmup_steps: u32,
    pub n_layer: u16,
    pub n_head: u16,
    pub n_embd: u32,
    pub vocab_size: u32,
    pub lr_warmup_steps: u32,
    pub lr_decay_steps: u32,
    pub learning_rate: u32,
    pub final_learning_rate: u32,
    pub weight_decay: u32,
    pub clip_grad_norm: u32,
    pub compression_decay: u32,
    pub compression_topk: u32,
    pub compression_chunk: u32,
    /// SparseLoCo's outer learning rate (f32 bits; constant); 0 for DisTrO.
    pub outer_learning_rate: u32,
    /// Local optimizer steps per round: 1 for DisTrO, 1..=MAX_INNER_STEPS for
    /// SparseLoCo (each round's batch is trained in this many inner steps).
    pub inner_steps: u32,
    /// Bits per transmitted value with SparseLoCo (1, 2, 4, 8 or 32); 0 for DisTrO.
    pub value_bits: u8,
    /// Llama: 1 for a separate lm-head, 0 to share the token embedding. 0 for GPT-2.
    pub untied: u8,
    /// Llama: key/value heads (grouped-query attention), dividing n_head. 0 for GPT-2.
    pub n_kv_head: u16,
    /// Llama: the SwiGLU intermediate size. 0 for GPT-2.
    pub intermediate_size: u32,
    /// Llama: the rotary embedding's base (f32 bits), in [1, 1e12]. 0 for GPT-2.
    pub rope_theta: u32,
    /// The numeric contract every replica trains under: PRECISION_FP32 (0,
    /// contract v2) or PRECISION_MX8 (1, contract v3). A former padding byte,
    /// so accounts written before it read fp32.
    pub precision: u8,
    /// The run's gradient shard count is `1 << grad_shards_log2` (at most
    /// MAX_GRAD_SHARDS_LOG2, 64 shards): a step's weight gradients and loss
    /// are summed over that many token shards, each an in-order chain joined
    /// by a fixed balanced binary tree, so that a client spreading its share
    /// over devices dividing the count computes the same bits as one device.
    /// A former padding byte, so accounts written before it read one shard.
    pub grad_shards_log2: u8,
    /// Llama: ROPE_NONE or ROPE_LLAMA3 (with the `rope_*` fields below). 0 for GPT-2.
    pub rope_scaling: u8,
    /// Llama: 1 adds biases to the q, k and v projections (Qwen2). 0 for GPT-2.
    pub qkv_bias: u8,
    /// Llama: RMSNorm's epsilon (f32 bits), 0 for the default 1e-5. 0 for GPT-2.
    pub rms_norm_eps: u32,
    /// Llama with ROPE_LLAMA3: the scaling factor and the low and high
    /// frequency factors (f32 bits), and the context the model was
    /// pretrained with. All 0 otherwise.
    pub rope_factor: u32,
    pub rope_low_freq_factor: u32,
    pub rope_high_freq_factor: u32,
    pub rope_original_context: u32,
    pub _padding: [u8; 4],
    pub checkpoint_repo: [u8; URL_LEN],
    pub checkpoint_revision: [u8; REVISION_LEN],
    pub data_location: [u8; URL_LEN],
    /// Merkle root of the data manifest the run pins (all zero: not pinned).
    pub data_root: [u8; 32],
    /// SHA-256 of the tokenizer.json file when `tokenizer` is TOKENIZER_JSON;
    /// all zero otherwise.
    pub tokenizer_hash: [u8; 32],
}

/// Where the run is: the epoch, the next step to train and the data cursor
/// (global index of the next round's first sequence).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Progress {
    pub epoch: u32,
    pub step: u32,
    pub data_index: u64,
}

/// Reward points shared by an epoch's finishers, and the slash per dropped client.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EpochRates {
    pub earning_rate_total_shared: u64,
    pub slashing_rate_per_client: u64,
}

/// A registered client. A slot is free when unoccupied, or when its client is
/// neither pending nor in the current epoch and holds no unsettled points.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSlot {
    pub signer: [u8; 32],
    pub p2p_identity: [u8; 32],
    pub earned: u64,
    pub slashed: u64,
    /// Epoch this client last finished healthy (valid when `has_finished`).
    pub last_finished_epoch: u32,
    pub occupied: u8,
    /// Joined for the next epoch that forms.
    pub pending: u8,
    /// Listed in the current epoch's clients.
    pub in_epoch: u8,
    pub has_finished: u8,
    /// Private replay-state hash of this client's latest commitment (the
    /// next non-fresh commitment must start from it).
    pub state_after: [u8; 32],
    /// Points earned per epoch (bucket = epoch % 4), not yet claimable.
    pub unvested: [u64; VESTING_BUCKETS],
    /// Points burned by faults (never paid to anyone).
    pub burned: u64,
    /// Epoch of the latest fault (valid when `has_fault`).
    pub last_fault_epoch: u32,
    pub has_fault: u8,
    /// Mistakes forgiven this epoch (reset when an epoch forms): TRANSIENT
    /// outcomes as the trainer, REFUTED ones as the accuser. Past
    /// `forgive_per_epoch` a mistake is a fault.
    pub forgiven: u8,
    /// OPEN disputes naming this slot (trainer, accuser or committee): the
    /// slot is not reused while any is open.
    pub open_disputes: u8,
    /// 1 when the client was a checkpointer of the epoch it last finished
    /// (it reported as a witness of its last round): it may announce the
    /// final checkpoint once the run is Finished.
    pub checkpointer: u8,
}

/// An entry of the current epoch's ordered client list.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochClient {
    /// Index into `CoordinatorState::clients`.
    pub slot: u16,
    /// One of `client_state`.
    pub state: u8,
    pub warmup_witnessed: u8,
}

/// One witness report of a round.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Witness {
    /// The witness's index in the round's client list.
    pub index: u16,
    pub _padding: [u8; 6],
    /// Signers whose payload the witness downloaded and verified.
    pub participant_bloom: Bloom,
    /// Commitment hashes of the first valid payload per batch.
    pub broadcast_bloom: Bloom,
    /// Merkle root over all broadcast commitment hashes the witness saw.
    pub broadcast_merkle: [u8; 32],
}

/// A member's commitment to its step in a round, and the verdict on it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// SHA-256 of the payload bytes the member published.
    pub payload: [u8; 32],
    /// SHA-256 of the member's private replay state before and after the step
    /// (opaque to the program).
    pub state_before: [u8; 32],
    pub state_after: [u8; 32],
    /// Round index of the member that posted the verdict.
    pub verifier: u16,
    /// `commit_flags` bits.
    pub flags: u8,
    /// A `verdict` tag.
    pub verdict: u8,
    pub _padding: [u8; 4],
}

/// A challenged commitment, settled by the trainer's rerun or a committee.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispute {
    /// A `dispute_state` tag.
    pub state: u8,
    /// The verdict that opened it: `verdict::MISMATCH` or `verdict::NO_DATA`.
    pub kind: u8,
    /// Valid entries of `committee` and `votes`.
    pub committee_len: u8,
    /// Each committee member's vote (`verdict` tags; 0 = not voted).
    pub votes: [u8; COMMITTEE_SIZE],
    /// Client slots of the trainer and of the accusing verifier.
    pub trainer_slot: u16,
    pub accuser_slot: u16,
    /// The trainer's index in the disputed round.
    pub trainer_index: u16,
    /// Client slots of the committee members.
    pub committee: [u16; COMMITTEE_SIZE],
    /// The disputed round's epoch was a cold start.
    pub cold_start: u8,
    /// The commitment's `commit_flags::FRESH` bit, as 0/1.
    pub fresh: u8,
    /// 1 once the trainer answered (a MISMATCH dispute) that its rerun gives
    /// the accuser's bits; the committee then fetches the rerun's payload.
    pub answered: u8,
    pub _padding: [u8; 7],
    /// The disputed round's step.
    pub step: u32,
    /// Open until the run's step passes this (= step + 2).
    pub deadline_step: u32,
    pub epoch: u32,
    /// First step of the disputed round's epoch.
    pub epoch_start_step: u32,
    /// Sequences the trainer was assigned: `[batch_start, batch_start + batch_len)`.
    pub batch_len: u32,
    /// Unique per run, from 1 (`CoordinatorState::disputes_opened`).
    pub id: u64,
    pub batch_start: u64,
    /// The commitment (copied from the round).
    pub payload: [u8; 32],
    pub state_before: [u8; 32],
    pub state_after: [u8; 32],
    /// The verifier's own replay hashes.
    pub claimed_payload: [u8; 32],
    pub claimed_after: [u8; 32],
}

/// One training round.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    pub seed: [u8; 32],
    /// Global index of the round's first sequence.
    pub data_index: u64,
    /// The optimizer step this round trains.
    pub step: u32,
    /// Round number within the epoch (0 = first).
    pub height: u32,
    /// Sequences per inner step (the global batch size).
    pub batch_size: u16,
    /// Clients in the round (the first `clients_len` epoch entries).
    pub clients_len: u16,
    /// Witnesses elected.
    pub witness_count: u16,
    /// Witness reports received (valid entries of `witnesses`).
    pub witnesses_len: u16,
    /// Inner steps each member trains this round (`Model::inner_steps` when
    /// the round started; 1 for DisTrO): the round covers
    /// `batch_size * inner_steps` sequences from `data_index`.
    pub inner_steps: u16,
    /// Commitments that must be verified and have no verdict yet (counted
    /// when the verify seed is drawn): RoundWitness ends early at 0.
    pub unjudged: u16,
    pub _padding: [u8; 4],
    /// The slot in which RoundTrain ended: the verify seed comes from the
    /// SlotHashes entry of the first slot after it, unknown until then.
    pub verify_slot: u64,
    pub witnesses: [Witness; MAX_WITNESSES as usize],
    /// Seed of the verification sampling, drawn in RoundWitness from the
    /// first slot after `verify_slot` (unknown while members commit and
    /// while anyone decides when RoundTrain ends); zero before.
    pub verify_seed: [u8; 32],
    /// Commitments by round index (the first `clients_len` are this round's).
    pub commits: [Commit; MAX_CLIENTS],
}

/// The current epoch. Reset when an epoch forms.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochState {
    pub start_timestamp: i64,
    pub start_step: u32,
    /// Step at which the epoch ends after its time ran out (0: not yet decided).
    pub last_step: u32,
    pub clients_len: u16,
    pub warmup_witnesses: u16,
    /// Ring index of the current round in `rounds`.
    pub rounds_head: u8,
    /// First epoch after a pause: clients ramp the learning rate from zero.
    pub cold_start: u8,
    /// A round ended without a witness quorum: the epoch ends without rewards.
    pub quorum_failed: u8,
    pub _padding: u8,
    pub rounds: [Round; NUM_STORED_ROUNDS],
    pub clients: [EpochClient; MAX_CLIENTS],
}

/// The CoordinatorAccount's data after its 8-byte Anchor discriminator.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoordinatorState {
    pub version: u64,
    /// Bumped by every successful instruction that changes the account (all
    /// but report_eval); clients drop stale notifications.
    pub nonce: u64,
    pub run_id: [u8; RUN_ID_LEN],
    pub client_version: [u8; CLIENT_VERSION_LEN],
    pub metadata: RunMetadata,
    pub config: CoordinatorConfig,
    pub model: Model,
    pub progress: Progress,
    pub current_rates: EpochRates,
    pub future_rates: EpochRates,
    /// Seed of the latest round (the chain every next seed extends).
    pub seed: [u8; 32],
    pub run_state_start: i64,
    /// A `RunState` tag.
    pub run_state: u8,
    /// A pause was requested while active; it takes effect at epoch end.
    pub pending_pause: u8,
    /// The next epoch to form is a cold start (set by pausing).
    pub cold_start_next: u8,
    pub _padding: [u8; 5],
    pub epoch: EpochState,
    pub clients: [ClientSlot; MAX_CLIENTS],
    /// Disputes opened so far (the latest dispute's id).
    pub disputes_opened: u64,
    pub disputes: [Dispute; MAX_DISPUTES],
}

/// Account data size including the 8-byte discriminator.
pub const ACCOUNT_SIZE: usize = 8 + core::mem::size_of::<CoordinatorState>();

impl CoordinatorState {
    /// Views account data (after the discriminator) as the state. Fails unless the
    /// buffer has exactly the state's size and is 8-byte aligned.
    pub fn from_bytes_mut(data: &mut [u8]) -> Option<&mut CoordinatorState> {
        if data.len() != core::mem::size_of::<CoordinatorState>()
            || !(data.as_ptr() as usize).is_multiple_of(core::mem::align_of::<CoordinatorState>())
        {
            return None;
        }
        // SAFETY: size and alignment were checked above; the struct is repr(C)
        // made only of integers and byte arrays, so every bit pattern is a valid
        // value; the returned borrow keeps `data` exclusively borrowed.
        Some(unsafe { &mut *(data.as_mut_ptr() as *mut CoordinatorState) })
    }

    /// Read-only view, same rules as `from_bytes_mut`.
    pub fn from_bytes(data: &[u8]) -> Option<&CoordinatorState> {
        if data.len() != core::mem::size_of::<CoordinatorState>()
            || !(data.as_ptr() as usize).is_multiple_of(core::mem::align_of::<CoordinatorState>())
        {
            return None;
        }
        // SAFETY: as in `from_bytes_mut`, with a shared borrow.
        Some(unsafe { &*(data.as_ptr() as *const CoordinatorState) })
    }

    /// The state's bytes (for hashing, comparison and writing back).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the struct has no implicit padding (tested), so all its bytes
        // are initialized; the slice borrows `self`.
        unsafe { core::slice::from_raw_parts(self as *const Self as *const u8, core::mem::size_of::<Self>()) }
    }
}

/// Length of the string in a zero-padded fixed field, if it is valid UTF-8 with
/// nothing but zeros after its end.
pub fn fixed_str_len(field: &[u8]) -> Option<usize> {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    if field[len..].iter().any(|&b| b != 0) || core::str::from_utf8(&field[..len]).is_err() {
        return None;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// Asserts that the listed fields tile the struct with no gaps, i.e. no
    /// implicit padding, so Borsh and the C layout coincide.
    macro_rules! assert_tiled {
        ($t:ty, $($f:ident: $ft:ty),+ $(,)?) => {{
            let mut next = 0usize;
            $(
                assert_eq!(offset_of!($t, $f), next, "{}::{} offset", stringify!($t), stringify!($f));
                next += size_of::<$ft>();
            )+
            assert_eq!(size_of::<$t>(), next, "{} has trailing padding", stringify!($t));
        }};
    }

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_tiled!(Bloom, bits: [u64; 16], salt: [u8; 8], num_bits: u16, num_hashes: u8, _padding: [u8; 5]);
        assert_tiled!(RunMetadata, name: [u8; NAME_LEN], description: [u8; DESCRIPTION_LEN], num_parameters: u64, vocab_size: u64);
        assert_tiled!(CoordinatorConfig, warmup_time: u64, cooldown_time: u64, max_round_train_time: u64,
            round_witness_time: u64, epoch_time: u64, global_batch_size_warmup_tokens: u64, total_steps: u32,
            init_min_clients: u16, min_clients: u16, witness_nodes: u16, global_batch_size_start: u16,
            global_batch_size_end: u16, waiting_for_members_extra_time: u16, verification_percent: u8,
            forgive_per_epoch: u8, vesting_epochs: u8, overlap: u8, _padding: [u8; 4]);
        assert_tiled!(Model, architecture: u8, tokenizer: u8, data_type: u8, checkpoint_kind: u8,
            data_location_kind: u8, lr_schedule: u8, optimizer: u8, quantize_1bit: u8, max_seq_len: u32,
            cold_start_warmup_steps: u32, n_layer: u16, n_head: u16, n_embd: u32, vocab_size: u32,
            lr_warmup_steps: u32, lr_decay_steps: u32, learning_rate: u32, final_learning_rate: u32,
            weight_decay: u32, clip_grad_norm: u32, compression_decay: u32, compression_topk: u32,
            compression_chunk: u32, outer_learning_rate: u32, inner_steps: u32, value_bits: u8, untied: u8,
            n_kv_head: u16, intermediate_size: u32, rope_theta: u32, precision: u8, grad_shards_log2: u8, rope_scaling: u8,
            qkv_bias: u8, rms_norm_eps: u32, rope_factor: u32, rope_low_freq_factor: u32, rope_high_freq_factor: u32,
            rope_original_context: u32, _padding: [u8; 4],
            checkpoint_repo: [u8; URL_LEN], checkpoint_revision: [u8; REVISION_LEN],
            data_location: [u8; URL_LEN], data_root: [u8; 32], tokenizer_hash: [u8; 32]);
        assert_tiled!(Progress, epoch: u32, step: u32, data_index: u64);
        assert_tiled!(EpochRates, earning_rate_total_shared: u64, slashing_rate_per_client: u64);
        assert_tiled!(ClientSlot, signer: [u8; 32], p2p_identity: [u8; 32], earned: u64, slashed: u64,
            last_finished_epoch: u32, occupied: u8, pending: u8, in_epoch: u8, has_finished: u8, state_after: [u8; 32],
            unvested: [u64; VESTING_BUCKETS], burned: u64, last_fault_epoch: u32, has_fault: u8, forgiven: u8,
            open_disputes: u8, checkpointer: u8);
        assert_tiled!(EpochClient, slot: u16, state: u8, warmup_witnessed: u8);
        assert_tiled!(Witness, index: u16, _padding: [u8; 6], participant_bloom: Bloom, broadcast_bloom: Bloom,
            broadcast_merkle: [u8; 32]);
        assert_tiled!(Round, seed: [u8; 32], data_index: u64, step: u32, height: u32, batch_size: u16,
            clients_len: u16, witness_count: u16, witnesses_len: u16, inner_steps: u16, unjudged: u16,
            _padding: [u8; 4], verify_slot: u64, witnesses: [Witness; 32], verify_seed: [u8; 32],
            commits: [Commit; MAX_CLIENTS]);
        assert_tiled!(Commit, payload: [u8; 32], state_before: [u8; 32], state_after: [u8; 32], verifier: u16, flags: u8,
            verdict: u8, _padding: [u8; 4]);
        assert_eq!(size_of::<Commit>(), 104);
        assert_tiled!(Dispute, state: u8, kind: u8, committee_len: u8, votes: [u8; COMMITTEE_SIZE], trainer_slot: u16,
            accuser_slot: u16, trainer_index: u16, committee: [u16; COMMITTEE_SIZE], cold_start: u8, fresh: u8, answered: u8,
            _padding: [u8; 7], step: u32,
            deadline_step: u32, epoch: u32, epoch_start_step: u32, batch_len: u32, id: u64, batch_start: u64,
            payload: [u8; 32], state_before: [u8; 32], state_after: [u8; 32], claimed_payload: [u8; 32],
            claimed_after: [u8; 32]);
        assert_tiled!(EpochState, start_timestamp: i64, start_step: u32, last_step: u32, clients_len: u16,
            warmup_witnesses: u16, rounds_head: u8, cold_start: u8, quorum_failed: u8, _padding: u8,
            rounds: [Round; NUM_STORED_ROUNDS], clients: [EpochClient; MAX_CLIENTS]);
        assert_tiled!(CoordinatorState, version: u64, nonce: u64, run_id: [u8; RUN_ID_LEN],
            client_version: [u8; CLIENT_VERSION_LEN], metadata: RunMetadata, config: CoordinatorConfig,
            model: Model, progress: Progress, current_rates: EpochRates, future_rates: EpochRates,
            seed: [u8; 32], run_state_start: i64, run_state: u8, pending_pause: u8, cold_start_next: u8,
            _padding: [u8; 5], epoch: EpochState, clients: [ClientSlot; MAX_CLIENTS], disputes_opened: u64,
            disputes: [Dispute; MAX_DISPUTES]);
        assert_eq!(core::mem::align_of::<CoordinatorState>(), 8);
        // The account size is part of the wire contract (clients allocate it).
        assert_eq!(ACCOUNT_SIZE, 201_400);
        assert_eq!(size_of::<Model>(), 624);
        assert_eq!(size_of::<Round>(), 37_224);
        assert_eq!(size_of::<CoordinatorConfig>(), 72);
    }

    #[test]
    fn from_bytes_checks_size_and_alignment() {
        let words = vec![0u64; size_of::<CoordinatorState>() / 8 + 1];
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let n = size_of::<CoordinatorState>();
        // A Vec<u8> is not guaranteed 8-aligned; find an aligned window in it.
        let off = (8 - bytes.as_ptr() as usize % 8) % 8;
        assert!(CoordinatorState::from_bytes_mut(&mut bytes[off..off + n]).is_some());
        assert!(CoordinatorState::from_bytes_mut(&mut bytes[off..off + n - 1]).is_none());
        if off + n < bytes.len() {
            assert!(CoordinatorState::from_bytes(&bytes[off + 1..off + n + 1]).is_none());
        }
        let state = CoordinatorState::from_bytes(&bytes[off..off + n]).unwrap();
        assert_eq!(state.as_bytes().len(), n);
        assert_eq!(RunState::from_u8(state.run_state), Some(RunState::Uninitialized));
    }

    #[test]
    fn fixed_strings() {
        let cases: [(&[u8], Option<usize>); 6] = [
            (b"abc\0\0", Some(3)),
            (b"abcde", Some(5)),
            (b"\0\0\0", Some(0)),
            (b"ab\0c\0", None),
            (b"\xff\xfe\0\0", None),
            ("é\0".as_bytes(), Some(2)),
        ];
        for (field, want) in cases {
            assert_eq!(fixed_str_len(field), want, "{field:?}");
        }
    }

    #[test]
    fn run_state_tags_round_trip() {
        for v in 0..=255u8 {
            match RunState::from_u8(v) {
                Some(s) => assert_eq!(s as u8, v),
                None => assert!(v > 7),
            }
        }
    }
}
