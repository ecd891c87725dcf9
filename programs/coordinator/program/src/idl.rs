//! Generates idl/psyche_coordinator.json (Anchor 0.30+ format) from the types
//! here and the logic crate's layout, and fails when the committed file
//! differs (`UPDATE_IDL=1 cargo test -p psyche-coordinator` rewrites
//! it). Every field descriptor of a zero-copy struct is checked against
//! `offset_of!`/`size_of`, so a descriptor that disagrees with the struct fails.

extern crate std;

use core::mem::{offset_of, size_of};
use std::collections::BTreeMap;
use std::string::{String, ToString};
use std::vec::Vec;
use std::vec;

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::state::*;
use serde_json::{json, Value};

use crate::events::EVENTS;
use crate::{COORDINATOR_ACCOUNT, COORDINATOR_INSTANCE, ID, INSTANCE_SEED, INSTRUCTIONS};

fn defined(name: &str) -> Value {
    json!({ "defined": { "name": name } })
}

fn array(t: Value, n: usize) -> Value {
    json!({ "array": [t, n] })
}

fn option(t: Value) -> Value {
    json!({ "option": t })
}

fn bytes(n: usize) -> Value {
    array(json!("u8"), n)
}

/// IDL types in declaration order, with the C size of the zero-copy ones.
#[derive(Default)]
struct Types {
    list: Vec<Value>,
    sizes: BTreeMap<String, usize>,
}

impl Types {
    /// Size in bytes of a fixed-size IDL type.
    fn size(&self, t: &Value) -> usize {
        match t {
            Value::String(s) => match s.as_str() {
                "u8" | "i8" | "bool" => 1,
                "u16" | "i16" => 2,
                "u32" | "i32" | "f32" => 4,
                "u64" | "i64" | "f64" => 8,
                "pubkey" => 32,
                other => panic!("{other} has no fixed size"),
            },
            Value::Object(o) if o.contains_key("array") => {
                let a = o["array"].as_array().unwrap();
                self.size(&a[0]) * a[1].as_u64().unwrap() as usize
            }
            Value::Object(o) if o.contains_key("defined") => {
                let name = o["defined"]["name"].as_str().unwrap();
                *self.sizes.get(name).unwrap_or_else(|| panic!("{name} is not a zero-copy type declared before its use"))
            }
            other => panic!("{other} has no fixed size"),
        }
    }

    /// A zero-copy struct: fields in order, each checked to start where the
    /// previous one ended, and the whole to tile the struct.
    fn zero_copy(&mut self, name: &str, size: usize, fields: Vec<(&str, usize, Value)>) {
        let mut next = 0;
        let mut out = Vec::new();
        for (field, offset, t) in fields {
            assert_eq!(offset, next, "{name}.{field}: descriptor offset disagrees with the struct");
            next += self.size(&t);
            out.push(json!({ "name": field, "type": t }));
        }
        assert_eq!(next, size, "{name}: descriptors do not tile the struct");
        self.sizes.insert(name.to_string(), size);
        self.list.push(json!({
            "name": name,
            "serialization": "bytemuck",
            "repr": { "kind": "c" },
            "type": { "kind": "struct", "fields": out },
        }));
    }

    /// A Borsh struct (parameters, events, the instance account).
    fn borsh(&mut self, name: &str, fields: &[(&str, Value)]) {
        let fields: Vec<Value> = fields.iter().map(|(n, t)| json!({ "name": n, "type": t })).collect();
        self.list.push(json!({ "name": name, "type": { "kind": "struct", "fields": fields } }));
    }
}

/// `zc!(Type, "IdlName", field: idl_type, ...)`: a zero-copy struct's descriptors.
macro_rules! zc {
    ($types:expr, $t:ty, $name:expr, $($f:ident: $ft:expr),+ $(,)?) => {
        $types.zero_copy($name, size_of::<$t>(), vec![$((stringify!($f), offset_of!($t, $f), $ft)),+])
    };
}

fn layout_types(t: &mut Types) {
    zc!(t, Bloom, "Bloom", bits: array(json!("u64"), 16), salt: bytes(8), num_bits: json!("u16"),
        num_hashes: json!("u8"), _padding: bytes(5));
    zc!(t, RunMetadata, "RunMetadata", name: bytes(NAME_LEN), description: bytes(DESCRIPTION_LEN),
        num_parameters: json!("u64"), vocab_size: json!("u64"));
    zc!(t, CoordinatorConfig, "CoordinatorConfig", warmup_time: json!("u64"), cooldown_time: json!("u64"),
        max_round_train_time: json!("u64"), round_witness_time: json!("u64"), epoch_time: json!("u64"),
        global_batch_size_warmup_tokens: json!("u64"), total_steps: json!("u32"), init_min_clients: json!("u16"),
        min_clients: json!("u16"), witness_nodes: json!("u16"), global_batch_size_start: json!("u16"),
        global_batch_size_end: json!("u16"), waiting_for_members_extra_time: json!("u16"));
    zc!(t, Model, "Model", architecture: json!("u8"), tokenizer: json!("u8"), data_type: json!("u8"),
        checkpoint_kind: json!("u8"), data_location_kind: json!("u8"), lr_schedule: json!("u8"),
        optimizer: json!("u8"), quantize_1bit: json!("u8"), max_seq_len: json!("u32"),
        cold_start_warmup_steps: json!("u32"), n_layer: json!("u16"), n_head: json!("u16"), n_embd: json!("u32"),
        vocab_size: json!("u32"), lr_warmup_steps: json!("u32"), lr_decay_steps: json!("u32"),
        learning_rate: json!("u32"), final_learning_rate: json!("u32"), weight_decay: json!("u32"),
        clip_grad_norm: json!("u32"), compression_decay: json!("u32"), compression_topk: json!("u32"),
        compression_chunk: json!("u32"), checkpoint_repo: bytes(URL_LEN), checkpoint_revision: bytes(REVISION_LEN),
        data_location: bytes(URL_LEN), data_root: bytes(32));
    zc!(t, Progress, "Progress", epoch: json!("u32"), step: json!("u32"), data_index: json!("u64"));
    zc!(t, EpochRates, "EpochRates", earning_rate_total_shared: json!("u64"), slashing_rate_per_client: json!("u64"));
    zc!(t, ClientSlot, "ClientSlot", signer: json!("pubkey"), p2p_identity: bytes(32), earned: json!("u64"),
        slashed: json!("u64"), last_finished_epoch: json!("u32"), occupied: json!("u8"), pending: json!("u8"),
        in_epoch: json!("u8"), has_finished: json!("u8"));
    zc!(t, EpochClient, "EpochClient", slot: json!("u16"), state: json!("u8"), warmup_witnessed: json!("u8"));
    zc!(t, Witness, "Witness", index: json!("u16"), _padding: bytes(6), participant_bloom: defined("Bloom"),
        broadcast_bloom: defined("Bloom"), broadcast_merkle: bytes(32));
    zc!(t, Round, "Round", seed: bytes(32), data_index: json!("u64"), step: json!("u32"), height: json!("u32"),
        batch_size: json!("u16"), clients_len: json!("u16"), witness_count: json!("u16"),
        witnesses_len: json!("u16"), witnesses: array(defined("Witness"), 32));
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
        clients: array(defined("ClientSlot"), MAX_CLIENTS));
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
}

fn acc(name: &str, writable: bool, signer: bool) -> Value {
    let mut a = json!({ "name": name });
    if writable {
        a["writable"] = json!(true);
    }
    if signer {
        a["signer"] = json!(true);
    }
    a
}

const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";

/// Accounts and argument type of each instruction (an empty struct where there
/// are no arguments: anchor-go v1.0.0 omits the discriminator of an
/// instruction without arguments), in INSTRUCTIONS order.
fn instruction_shapes() -> Vec<(Vec<Value>, &'static str)> {
    let authority = || vec![acc("authority", false, true), acc("coordinator_instance", false, false), acc("coordinator_account", true, false)];
    let client = || vec![acc("user", false, true), acc("coordinator_instance", false, false), acc("coordinator_account", true, false)];
    let mut instance = acc("coordinator_instance", true, false);
    instance["pda"] = json!({ "seeds": [
        { "kind": "const", "value": INSTANCE_SEED },
        { "kind": "arg", "path": "params.run_id" },
    ]});
    vec![
        (
            vec![acc("payer", true, true), instance, acc("coordinator_account", true, false),
                 json!({ "name": "system_program", "address": SYSTEM_PROGRAM })],
            "InitCoordinatorParams",
        ),
        (authority(), "UpdateParams"),
        (authority(), "UpdateClientVersionParams"),
        (authority(), "SetFutureEpochRatesParams"),
        (authority(), "SetPausedParams"),
        (
            vec![acc("user", false, true), acc("authorization", false, false), acc("coordinator_instance", false, false),
                 acc("coordinator_account", true, false)],
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
    ]
}

fn render() -> String {
    let mut types = Types::default();
    layout_types(&mut types);
    borsh_types(&mut types);
    let shapes = instruction_shapes();
    assert_eq!(shapes.len(), INSTRUCTIONS.len());
    let instructions: Vec<Value> = INSTRUCTIONS
        .iter()
        .zip(shapes)
        .map(|((name, disc), (accounts, params))| {
            json!({ "name": name, "discriminator": disc, "accounts": accounts,
                    "args": [{ "name": "params", "type": defined(params) }] })
        })
        .collect();
    let events: Vec<Value> = EVENTS.iter().map(|(name, disc)| json!({ "name": name, "discriminator": disc })).collect();
    let errors: Vec<Value> = CoordinatorError::ALL
        .iter()
        .map(|e| json!({ "code": e.code(), "name": e.name(), "msg": e.message() }))
        .collect();
    let idl = json!({
        "address": bs58(&ID.to_bytes()),
        "metadata": {
            "name": "psyche_coordinator",
            "version": "0.1.0",
            "spec": "0.1.0",
            "description": "The training run's state machine: membership, rounds, witnesses, health checks and rewards",
        },
        "instructions": instructions,
        "accounts": [
            { "name": "CoordinatorInstance", "discriminator": COORDINATOR_INSTANCE },
            { "name": "CoordinatorAccount", "discriminator": COORDINATOR_ACCOUNT },
        ],
        "events": events,
        "errors": errors,
        "types": types.list,
    });
    let mut s = serde_json::to_string_pretty(&idl).unwrap();
    s.push('\n');
    s
}

/// Base58 form of an address, for the IDL.
fn bs58(b: &[u8; 32]) -> String {
    let mut buf = [0u8; psyche_sdk::base58::MAX_ENCODED_32];
    psyche_sdk::base58::encode_32(b, &mut buf).into()
}

#[test]
fn committed_idl_is_generated() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../idl/psyche_coordinator.json");
    let fresh = render();
    if std::env::var_os("UPDATE_IDL").is_some() {
        std::fs::write(path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(committed == fresh, "{path} is stale: run UPDATE_IDL=1 cargo test -p psyche-coordinator and commit it");
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
        Event::RoundStarted { step: 1, height: 2, data_index: 3, batch_size: 4, clients: 5, seed: k },
        Event::EpochEnded { epoch: 1, success: true, rewarded: 3 },
        Event::PauseRequested { step: 1 },
        Event::PauseCancelled { step: 1 },
        Event::ClientJoined { signer: k, slot: 9 },
        Event::ClientLeft { signer: k },
        Event::WarmupWitnessed { signer: k },
        Event::WitnessReported { signer: k, step: 1, index: 2 },
        Event::ClientDropped { client: k, reporter: k, step: 1 },
        Event::CheckpointUpdated { signer: k },
    ];
    let mut types = Types::default();
    layout_types(&mut types);
    borsh_types(&mut types);
    for (e, (name, disc)) in samples.iter().zip(EVENTS) {
        let ty = types.list.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} has no IDL type"));
        let want: usize = ty["type"]["fields"].as_array().unwrap().iter().map(|f| types.size(&f["type"])).sum();
        let mut buf = [0u8; 96];
        let mut w = psyche_sdk::borsh::Writer::new(&mut buf);
        assert_eq!(crate::events::encode(e, &mut w).unwrap(), &disc, "{name}: discriminator (event order)");
        assert_eq!(w.len(), want, "{name} payload");
    }
}

#[test]
fn program_id_renders_as_declared() {
    assert_eq!(bs58(&ID.to_bytes()), "35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
    assert_eq!(bs58(&[0; 32]), SYSTEM_PROGRAM);
}

#[test]
fn a_wrong_descriptor_fails() {
    let r = std::panic::catch_unwind(|| {
        let mut t = Types::default();
        zc!(t, Progress, "Progress", epoch: json!("u32"), step: json!("u64"), data_index: json!("u64"));
    });
    assert!(r.is_err(), "a u64 descriptor for a u32 field must fail");
}
