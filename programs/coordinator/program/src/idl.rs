//! Generates idl/psyche_coordinator.json with the shared generator
//! (programs/idl) from the types here and the logic crate's layout, and fails
//! when the committed file differs (`UPDATE_IDL=1 cargo test -p
//! psyche-coordinator` rewrites it). Every field descriptor of a zero-copy
//! struct is checked against `offset_of!`/`size_of`, so a descriptor that
//! disagrees with the struct fails.

extern crate std;

use std::vec::Vec;
use std::vec;

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::state::*;
use psyche_idl::{
    account as acc, address, array, bytes, defined, fixed_account, json, option, seed_arg, seed_const, vec, with_pda,
    zero_copy as zc, Idl, Instruction, Types, Value, SYSTEM_PROGRAM,
};

use crate::events::EVENTS;
use crate::{COORDINATOR_ACCOUNT, COORDINATOR_INSTANCE, ID, INSTANCE_SEED, INSTRUCTIONS};

fn layout_types(t: &mut Types) {
    zc!(t, Bloom, "Bloom", bits: array(json!("u64"), 16), salt: bytes(8), num_bits: json!("u16"),
        num_hashes: json!("u8"), _padding: bytes(5));
    zc!(t, RunMetadata, "RunMetadata", name: bytes(NAME_LEN), description: bytes(DESCRIPTION_LEN),
        num_parameters: json!("u64"), vocab_size: json!("u64"));
    zc!(t, CoordinatorConfig, "CoordinatorConfig", warmup_time: json!("u64"), cooldown_time: json!("u64"),
        max_round_train_time: json!("u64"), round_witness_time: json!("u64"), epoch_time: json!("u64"),
        global_batch_size_warmup_tokens: json!("u64"), total_steps: json!("u32"), init_min_clients: json!("u16"),
        min_clients: json!("u16"), witness_nodes: json!("u16"), global_batch_size_start: json!("u16"),
        global_batch_size_end: json!("u16"), waiting_for_members_extra_time: json!("u16"),
        verification_percent: json!("u8"), forgive_per_epoch: json!("u8"), vesting_epochs: json!("u8"),
        overlap: json!("u8"), _padding: bytes(4));
    zc!(t, Model, "Model", architecture: json!("u8"), tokenizer: json!("u8"), data_type: json!("u8"),
        checkpoint_kind: json!("u8"), data_location_kind: json!("u8"), lr_schedule: json!("u8"),
        optimizer: json!("u8"), quantize_1bit: json!("u8"), max_seq_len: json!("u32"),
        cold_start_warmup_steps: json!("u32"), n_layer: json!("u16"), n_head: json!("u16"), n_embd: json!("u32"),
        vocab_size: json!("u32"), lr_warmup_steps: json!("u32"), lr_decay_steps: json!("u32"),
        // f32 values, stored as their bits (the program does no float arithmetic).
        learning_rate: json!("f32"), final_learning_rate: json!("f32"), weight_decay: json!("f32"),
        clip_grad_norm: json!("f32"), compression_decay: json!("f32"), compression_topk: json!("u32"),
        compression_chunk: json!("u32"), outer_learning_rate: json!("f32"), inner_steps: json!("u32"),
        value_bits: json!("u8"), untied: json!("u8"), n_kv_head: json!("u16"), intermediate_size: json!("u32"),
        rope_theta: json!("f32"), precision: json!("u8"), grad_shards_log2: json!("u8"), rope_scaling: json!("u8"),
        qkv_bias: json!("u8"), rms_norm_eps: json!("f32"), rope_factor: json!("f32"), rope_low_freq_factor: json!("f32"),
        rope_high_freq_factor: json!("f32"), rope_original_context: json!("u32"), _padding: bytes(4),
        checkpoint_repo: bytes(URL_LEN), checkpoint_revision: bytes(REVISION_LEN),
        data_location: bytes(URL_LEN), data_root: bytes(32), tokenizer_hash: bytes(32));
    zc!(t, Progress, "Progress", epoch: json!("u32"), step: json!("u32"), data_index: json!("u64"));
    zc!(t, EpochRates, "EpochRates", earning_rate_total_shared: json!("u64"), slashing_rate_per_client: json!("u64"));
    zc!(t, ClientSlot, "ClientSlot", signer: json!("pubkey"), p2p_identity: bytes(32), earned: json!("u64"),
        slashed: json!("u64"), last_finished_epoch: json!("u32"), occupied: json!("u8"), pending: json!("u8"),
        in_epoch: json!("u8"), has_finished: json!("u8"), state_after: bytes(32),
        unvested: array(json!("u64"), VESTING_BUCKETS), burned: json!("u64"), last_fault_epoch: json!("u32"),
        has_fault: json!("u8"), forgiven: json!("u8"), open_disputes: json!("u8"), checkpointer: json!("u8"));
    zc!(t, EpochClient, "EpochClient", slot: json!("u16"), state: json!("u8"), warmup_witnessed: json!("u8"));
    zc!(t, Witness, "Witness", index: json!("u16"), _padding: bytes(6), participant_bloom: defined("Bloom"),
        broadcast_bloom: defined("Bloom"), broadcast_merkle: bytes(32));
    zc!(t, Commit, "Commit", payload: bytes(32), state_before: bytes(32), state_after: bytes(32),
        verifier: json!("u16"), flags: json!("u8"), verdict: json!("u8"), _padding: bytes(4));
    zc!(t, Round, "Round", seed: bytes(32), data_index: json!("u64"), step: json!("u32"), height: json!("u32"),
        batch_size: json!("u16"), clients_len: json!("u16"), witness_count: json!("u16"),
        witnesses_len: json!("u16"), inner_steps: json!("u16"), unjudged: json!("u16"), _padding: bytes(4),
        verify_slot: json!("u64"), witnesses: array(defined("Witness"), 32), verify_seed: bytes(32),
        commits: array(defined("Commit"), MAX_CLIENTS));
    zc!(t, Dispute, "Dispute", state: json!("u8"), kind: json!("u8"), committee_len: json!("u8"),
        votes: bytes(COMMITTEE_SIZE), trainer_slot: json!("u16"), accuser_slot: json!("u16"),
        trainer_index: json!("u16"), committee: array(json!("u16"), COMMITTEE_SIZE), cold_start: json!("u8"),
        fresh: json!("u8"), answered: json!("u8"), _padding: bytes(7), step: json!("u32"), deadline_step: json!("u32"), epoch: json!("u32"),
        epoch_start_step: json!("u32"), batch_len: json!("u32"), id: json!("u64"), batch_start: json!("u64"),
        payload: bytes(32), state_before: bytes(32), state_after: bytes(32), claimed_payload: bytes(32),
        claimed_after: bytes(32));
    zc!(t, EpochState, "EpochState", start_timestamp: json!("i64"), start_step: json!("u32"),
        last_step: json!("u32"), clients_len: json!("u16"), warmup_witnesses: json!("u16"),
        rounds_head: json!("u8"), cold_start: json!("u8"), quorum_failed: json!("u8"), _padding: json!("u8"),
        rounds: array(defined("Round"), NUM_STORED_ROUNDS), clients: array(defined("EpochClient"), MAX_CLIENTS));
    // The account: its discriminator, then CoordinatorState's fields.
    zc!(t, CoordinatorState, "CoordinatorAccount", version: json!("u64"), nonce: json!("u64"),
        run_id: bytes(RUN_ID_LEN), client_version: bytes(CLIENT_VERSION_LEN), metadata: defined("RunMetadata"),
        config: defined("CoordinatorConfig"), model: defined("Model"), progress: defined("Progress"),
        current_rates: defined("EpochRates"), future_rates: defined("EpochRates"), seed: bytes(32),
        run_state_start: json!("i64"), run_state: json!("u8"), pending_pause: json!("u8"),
        cold_start_next: json!("u8"), _padding: bytes(5), epoch: defined("EpochState"),
        clients: array(defined("ClientSlot"), MAX_CLIENTS), disputes_opened: json!("u64"),
        disputes: array(defined("Dispute"), MAX_DISPUTES));
}

fn borsh_types(t: &mut Types) {
    t.borsh("CoordinatorInstance", &[
        ("bump", json!("u8")),
        ("main_authority", json!("pubkey")),
        ("join_authority", json!("pubkey")),
        ("coordinator_account", json!("pubkey")),
        ("run_id", json!("string")),
    ]);
    t.borsh("InitCoordinatorParams", &[
        ("main_authority", json!("pubkey")),
        ("join_authority", json!("pubkey")),
        ("run_id", json!("string")),
        ("client_version", json!("string")),
    ]);
    t.borsh("UpdateParams", &[
        ("metadata", option(defined("RunMetadata"))),
        ("config", option(defined("CoordinatorConfig"))),
        ("model", option(defined("Model"))),
        ("progress", option(defined("Progress"))),
    ]);
    t.borsh("UpdateClientVersionParams", &[("client_version", json!("string"))]);
    t.borsh("SetFutureEpochRatesParams", &[
        ("earning_rate_total_shared", option(json!("u64"))),
        ("slashing_rate_per_client", option(json!("u64"))),
    ]);
    t.borsh("SetPausedParams", &[("paused", json!("bool"))]);
    t.borsh("JoinRunParams", &[("signer", json!("pubkey")), ("p2p_identity", bytes(32))]);
    t.borsh("WitnessMetadata", &[
        ("loss", json!("f32")),
        ("tokens_per_sec", json!("u64")),
        ("bandwidth_per_sec", json!("u64")),
        ("efficiency", json!("f32")),
    ]);
    t.borsh("WitnessParams", &[
        ("step", json!("u32")),
        ("index", json!("u16")),
        ("participant_bloom", defined("Bloom")),
        ("broadcast_bloom", defined("Bloom")),
        ("broadcast_merkle", bytes(32)),
        ("metadata", defined("WitnessMetadata")),
    ]);
    t.borsh("HealthCheckParams", &[("step", json!("u32")), ("index", json!("u16")), ("accused", json!("pubkey"))]);
    t.borsh("CheckpointParams", &[("repo", json!("string")), ("revision", json!("string"))]);
    t.borsh("SettlePointsParams", &[("user", json!("pubkey"))]);
    t.borsh("TakeBurnedParams", &[("user", json!("pubkey"))]);
    t.borsh("CommitParams", &[
        ("step", json!("u32")),
        ("index", json!("u16")),
        ("payload", bytes(32)),
        ("state_before", bytes(32)),
        ("state_after", bytes(32)),
        ("fresh", json!("u8")),
    ]);
    t.borsh("AnswerDisputeParams", &[("id", json!("u64")), ("rerun_payload", bytes(32)), ("rerun_after", bytes(32))]);
    t.borsh("JudgeDisputeParams", &[("id", json!("u64")), ("vote", json!("u8"))]);
    t.borsh("VerifyParams", &[
        ("step", json!("u32")),
        ("verifier_index", json!("u16")),
        ("index", json!("u16")),
        ("verdict", json!("u8")),
        ("claimed_payload", bytes(32)),
        ("claimed_after", bytes(32)),
    ]);
    t.borsh("ReportEvalParams", &[
        ("step", json!("u32")),
        ("task", json!("string")),
        ("acc", json!("f32")),
        ("acc_norm", json!("f32")),
        ("count", json!("u32")),
    ]);
    t.borsh("ReportPromptParams", &[
        ("step", json!("u32")),
        ("prompt", json!("u16")),
        ("tokens", vec(json!("u32"))),
    ]);
    for empty in ["LeaveRunParams", "TickParams", "WarmupWitnessParams", "FreeCoordinatorParams"] {
        t.borsh(empty, &[]);
    }
    // Events, in EVENTS order (crate::events::encode writes these payloads).
    t.borsh("StateChanged", &[("from", json!("u8")), ("to", json!("u8")), ("epoch", json!("u32")), ("step", json!("u32"))]);
    t.borsh("RoundStarted", &[
        ("step", json!("u32")),
        ("height", json!("u32")),
        ("data_index", json!("u64")),
        ("batch_size", json!("u16")),
        ("inner_steps", json!("u16")),
        ("clients", json!("u16")),
        ("seed", bytes(32)),
    ]);
    t.borsh("EpochEnded", &[("epoch", json!("u32")), ("success", json!("bool")), ("rewarded", json!("u16"))]);
    t.borsh("PauseRequested", &[("step", json!("u32"))]);
    t.borsh("PauseCancelled", &[("step", json!("u32"))]);
    t.borsh("ClientJoined", &[("signer", json!("pubkey")), ("slot", json!("u16"))]);
    t.borsh("ClientLeft", &[("signer", json!("pubkey"))]);
    t.borsh("WarmupWitnessed", &[("signer", json!("pubkey"))]);
    t.borsh("WitnessReported", &[("signer", json!("pubkey")), ("step", json!("u32")), ("index", json!("u16"))]);
    t.borsh("ClientDropped", &[("client", json!("pubkey")), ("reporter", json!("pubkey")), ("step", json!("u32"))]);
    t.borsh("CheckpointUpdated", &[("signer", json!("pubkey"))]);
    t.borsh("Verified", &[("step", json!("u32")), ("trainer", json!("pubkey")), ("verifier", json!("pubkey")), ("verdict", json!("u8"))]);
    t.borsh("DisputeOpened", &[("id", json!("u64")), ("step", json!("u32")), ("trainer", json!("pubkey")), ("accuser", json!("pubkey"))]);
    t.borsh("DisputeSettled", &[("id", json!("u64")), ("outcome", json!("u8"))]);
    t.borsh("EvalReported", &[
        ("signer", json!("pubkey")),
        ("epoch", json!("u32")),
        ("step", json!("u32")),
        ("task", bytes(EVAL_TASK_LEN)),
        ("acc", json!("f32")),
        ("acc_norm", json!("f32")),
        ("count", json!("u32")),
    ]);
    t.borsh("PromptReported", &[
        ("signer", json!("pubkey")),
        ("epoch", json!("u32")),
        ("step", json!("u32")),
        ("prompt", json!("u16")),
        ("len", json!("u8")),
        ("tokens", array(json!("u32"), PROMPT_TOKENS_LEN)),
    ]);
}

/// Accounts and argument type of each instruction (an empty struct where there
/// are no arguments: anchor-go v1.0.0 omits the discriminator of an
/// instruction without arguments), in INSTRUCTIONS order.
fn instruction_shapes() -> Vec<Instruction> {
    let authority = || vec![acc("authority", false, true), acc("coordinator_instance", false, false), acc("coordinator_account", true, false)];
    let client = || vec![acc("user", false, true), acc("coordinator_instance", false, false), acc("coordinator_account", true, false)];
    let instance = with_pda(acc("coordinator_instance", true, false), &[seed_const(INSTANCE_SEED), seed_arg("params.run_id")]);
    let shapes: Vec<(Vec<Value>, &'static str)> = vec![
        (
            vec![acc("payer", true, true), instance, acc("coordinator_account", true, false),
                 fixed_account("system_program", SYSTEM_PROGRAM)],
            "InitCoordinatorParams",
        ),
        (authority(), "UpdateParams"),
        (authority(), "UpdateClientVersionParams"),
        (authority(), "SetFutureEpochRatesParams"),
        (authority(), "SetPausedParams"),
        (
            vec![acc("user", false, true), acc("authorization", false, false), acc("coordinator_instance", false, false),
                 acc("coordinator_account", true, false), fixed_account("instructions", "Sysvar1nstructions1111111111111111111111111")],
            "JoinRunParams",
        ),
        (client(), "LeaveRunParams"),
        (client(), "TickParams"),
        (client(), "WitnessParams"),
        (client(), "WarmupWitnessParams"),
        (client(), "HealthCheckParams"),
        (client(), "CheckpointParams"),
        (
            vec![acc("authority", false, true), acc("spill", true, false), acc("coordinator_instance", true, false),
                 acc("coordinator_account", true, false)],
            "FreeCoordinatorParams",
        ),
        (authority(), "SettlePointsParams"),
        (client(), "CommitParams"),
        (client(), "VerifyParams"),
        (client(), "AnswerDisputeParams"),
        (client(), "JudgeDisputeParams"),
        (authority(), "TakeBurnedParams"),
        (client(), "ReportEvalParams"),
        (client(), "ReportPromptParams"),
    ];
    shapes.into_iter().map(|(accounts, params)| Instruction { accounts, params }).collect()
}

fn types() -> Types {
    let mut types = Types::default();
    layout_types(&mut types);
    borsh_types(&mut types);
    types
}

fn render() -> std::string::String {
    let errors = CoordinatorError::ALL.iter().map(|e| (e.code(), e.name(), e.message())).collect();
    Idl {
        name: "psyche_coordinator",
        description: "The training run's state machine: membership, rounds, witnesses, health checks, verification, disputes and rewards",
        address: ID.to_bytes(),
        instructions: &INSTRUCTIONS,
        shapes: instruction_shapes(),
        accounts: &[("CoordinatorInstance", COORDINATOR_INSTANCE), ("CoordinatorAccount", COORDINATOR_ACCOUNT)],
        events: &EVENTS,
        errors,
        types: types(),
    }
    .render()
}

#[test]
fn committed_idl_is_generated() {
    psyche_idl::check_committed("psyche_coordinator", &render(), "psyche-coordinator");
}

/// Every event's payload, as `crate::events` writes it, has the size of its
/// IDL type, so clients decode exactly what the program logs.
#[test]
fn event_payloads_match_their_idl_types() {
    use psyche_coordinator_logic::event::Event;
    use psyche_coordinator_logic::state::RunState;
    let k = [7u8; 32];
    let samples = [
        Event::StateChanged { from: RunState::Warmup, to: RunState::RoundTrain, epoch: 1, step: 2 },
        Event::RoundStarted { step: 1, height: 2, data_index: 3, batch_size: 4, inner_steps: 6, clients: 5, seed: k },
        Event::EpochEnded { epoch: 1, success: true, rewarded: 3 },
        Event::PauseRequested { step: 1 },
        Event::PauseCancelled { step: 1 },
        Event::ClientJoined { signer: k, slot: 9 },
        Event::ClientLeft { signer: k },
        Event::WarmupWitnessed { signer: k },
        Event::WitnessReported { signer: k, step: 1, index: 2 },
        Event::ClientDropped { client: k, reporter: k, step: 1 },
        Event::CheckpointUpdated { signer: k },
        Event::Verified { step: 1, trainer: k, verifier: k, verdict: 2 },
        Event::DisputeOpened { id: 1, step: 2, trainer: k, accuser: k },
        Event::DisputeSettled { id: 1, outcome: 3 },
        Event::EvalReported { signer: k, epoch: 1, step: 2, task: k, acc: 3, acc_norm: 4, count: 5 },
        Event::PromptReported { signer: k, epoch: 1, step: 2, prompt: 3, len: 4, tokens: [5; PROMPT_TOKENS_LEN] },
    ];
    let types = types();
    for (e, (name, disc)) in samples.iter().zip(EVENTS) {
        let want = types.fields_size(name);
        let mut buf = [0u8; crate::events::MAX_PAYLOAD];
        let mut w = psyche_sdk::borsh::Writer::new(&mut buf);
        assert_eq!(crate::events::encode(e, &mut w).unwrap(), &disc, "{name}: discriminator (event order)");
        assert_eq!(w.len(), want, "{name} payload");
    }
}

/// The argument decoders (crate::args) read exactly the IDL's fixed-size
/// params: that many bytes decode, one fewer or one more do not.
#[test]
fn decoders_read_the_idl_params() {
    fn size(types: &Types, t: &Value) -> usize {
        match t["defined"]["name"].as_str() {
            // A Borsh struct (WitnessMetadata): the sum of its fields.
            Some(name) if types.get(name).is_some_and(|d| d.get("serialization").is_none()) => {
                types.get(name).unwrap()["type"]["fields"].as_array().unwrap().iter().map(|f| size(types, &f["type"])).sum()
            }
            _ => types.size(t),
        }
    }
    let fixed = [
        "SetPausedParams", "JoinRunParams", "LeaveRunParams", "TickParams", "WitnessParams", "WarmupWitnessParams",
        "HealthCheckParams", "FreeCoordinatorParams", "SettlePointsParams", "CommitParams", "VerifyParams",
        "AnswerDisputeParams", "JudgeDisputeParams", "TakeBurnedParams",
    ];
    let types = types();
    let mut checked = 0;
    for ((name, disc), shape) in INSTRUCTIONS.iter().zip(instruction_shapes()) {
        if !fixed.contains(&shape.params) {
            continue;
        }
        let fields = types.get(shape.params).unwrap()["type"]["fields"].as_array().unwrap().clone();
        let n: usize = fields.iter().map(|f| size(&types, &f["type"])).sum();
        let data = |len: usize| [&disc[..], &vec![0u8; len]].concat();
        assert!(crate::instruction::Instruction::decode(&data(n)).is_ok(), "{name}: {n} bytes");
        assert!(crate::instruction::Instruction::decode(&data(n + 1)).is_err(), "{name}: {} bytes", n + 1);
        if n > 0 {
            assert!(crate::instruction::Instruction::decode(&data(n - 1)).is_err(), "{name}: {} bytes", n - 1);
        }
        checked += 1;
    }
    assert_eq!(checked, fixed.len());
}

#[test]
fn program_id_renders_as_declared() {
    assert_eq!(address(&ID.to_bytes()), "35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
}
