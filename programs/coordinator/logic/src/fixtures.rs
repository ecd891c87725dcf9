//! Test fixtures shared by this crate's tests and psyche-fuzz (feature
//! `fixtures`): a valid configuration and models. Not part of the program.

use crate::config::F32_ONE;
use crate::state::*;

/// A valid configuration: 600 s epochs of 100 steps, 3 clients to start,
/// 2 witnesses, batch 8, no verification.
pub fn valid_config() -> CoordinatorConfig {
    CoordinatorConfig {
        warmup_time: 30,
        cooldown_time: 10,
        max_round_train_time: 20,
        round_witness_time: 5,
        epoch_time: 600,
        global_batch_size_warmup_tokens: 0,
        total_steps: 100,
        init_min_clients: 3,
        min_clients: 2,
        witness_nodes: 2,
        global_batch_size_start: 8,
        global_batch_size_end: 8,
        waiting_for_members_extra_time: 3,
        verification_percent: 0,
        forgive_per_epoch: 1,
        vesting_epochs: 0,
        overlap: 0,
        _padding: [0; 4],
    }
}

/// A fixed string field holding `s` (which must fit).
pub fn text<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s.as_bytes());
    out
}

/// A valid DisTrO GPT-2 model (one inner step) on local HTTP data and hub
/// checkpoints.
pub fn valid_model() -> Model {
    Model {
        architecture: ARCH_GPT2,
        tokenizer: TOKENIZER_BYTE,
        data_type: DATA_PRETRAINING,
        checkpoint_kind: CHECKPOINT_HUB,
        data_location_kind: DATA_HTTP,
        lr_schedule: LR_COSINE,
        optimizer: OPTIMIZER_DISTRO,
        quantize_1bit: 1,
        max_seq_len: 256,
        cold_start_warmup_steps: 10,
        n_layer: 4,
        n_head: 4,
        n_embd: 128,
        vocab_size: 256,
        lr_warmup_steps: 10,
        lr_decay_steps: 1000,
        learning_rate: 0x3a83126f,       // 0.001
        final_learning_rate: 0x38d1b717, // 0.0001
        weight_decay: 0x3dcccccd,        // 0.1
        clip_grad_norm: 0x3f800000,      // 1.0
        compression_decay: 0x3f7a5e35,   // 0.999
        compression_topk: 32,
        compression_chunk: 64,
        outer_learning_rate: 0,
        inner_steps: 1,
        value_bits: 0,
        untied: 0,
        n_kv_head: 0,
        intermediate_size: 0,
        rope_theta: 0,
        precision: PRECISION_FP32,
        grad_shards_log2: 0,
        rope_scaling: ROPE_NONE,
        qkv_bias: 0,
        rms_norm_eps: 0,
        rope_factor: 0,
        rope_low_freq_factor: 0,
        rope_high_freq_factor: 0,
        rope_original_context: 0,
        _padding: [0; 4],
        checkpoint_repo: text("http://127.0.0.1:9000/ckpt/run"),
        checkpoint_revision: [0; REVISION_LEN],
        data_location: text("http://127.0.0.1:9000/data"),
        data_root: [0; 32],
        tokenizer_hash: [0; 32],
    }
}

/// `valid_model()` with SparseLoCo: 10 inner steps.
pub fn valid_sparseloco() -> Model {
    Model {
        optimizer: OPTIMIZER_SPARSELOCO,
        quantize_1bit: 0,
        inner_steps: 10,
        outer_learning_rate: F32_ONE, // 1.0
        value_bits: 2,
        compression_decay: 0x3f733333, // 0.95 (error feedback)
        weight_decay: 0,
        ..valid_model()
    }
}
