//! Generates idl/psyche_treasurer.json (Anchor 0.30+ format) from the
//! program's constants and fails when the committed file differs
//! (`UPDATE_IDL=1 cargo test -p psyche-treasurer` rewrites it). The Coordinator
//! layout types that run_update forwards (RunMetadata, CoordinatorConfig,
//! Model, Progress) are copied from idl/psyche_coordinator.json, which that
//! program's own test keeps in lockstep with its structs.

extern crate std;

use core::mem::size_of;
use std::string::String;
use std::vec::Vec;
use std::vec;

use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata};
use psyche_sdk::cpi::ata::ASSOCIATED_TOKEN_PROGRAM_ID;
use psyche_treasurer_interface::*;
use serde_json::{json, Value};

use crate::{EVENTS, INSTRUCTIONS};

const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";

fn defined(name: &str) -> Value {
    json!({ "defined": { "name": name } })
}

fn option(t: Value) -> Value {
    json!({ "option": t })
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

fn fixed(name: &str, address: String) -> Value {
    json!({ "name": name, "address": address })
}

fn struct_type(name: &str, fields: &[(&str, Value)]) -> Value {
    let fields: Vec<Value> = fields.iter().map(|(n, t)| json!({ "name": n, "type": t })).collect();
    json!({ "name": name, "type": { "kind": "struct", "fields": fields } })
}

/// The Coordinator's layout types, as its IDL declares them (with Bloom and
/// anything else they need left out: these four are self-contained).
fn coordinator_types() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../idl/psyche_coordinator.json");
    let idl: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sizes = [
        ("RunMetadata", size_of::<RunMetadata>()),
        ("CoordinatorConfig", size_of::<CoordinatorConfig>()),
        ("Model", size_of::<Model>()),
        ("Progress", size_of::<Progress>()),
    ];
    sizes
        .iter()
        .map(|(name, size)| {
            let t = idl["types"].as_array().unwrap().iter().find(|t| t["name"] == *name).unwrap().clone();
            let bytes: usize = t["type"]["fields"].as_array().unwrap().iter().map(|f| field_size(&f["type"])).sum();
            assert_eq!(bytes, *size, "{name} in the coordinator IDL does not match the struct");
            t
        })
        .collect()
}

fn field_size(t: &Value) -> usize {
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
            field_size(&a[0]) * a[1].as_u64().unwrap() as usize
        }
        other => panic!("{other} is not a self-contained field"),
    }
}

fn types() -> Vec<Value> {
    let mut t = coordinator_types();
    t.push(struct_type("Run", &[
        ("bump", json!("u8")),
        ("index", json!("u64")),
        ("main_authority", json!("pubkey")),
        ("join_authority", json!("pubkey")),
        ("coordinator_instance", json!("pubkey")),
        ("coordinator_account", json!("pubkey")),
        ("collateral_mint", json!("pubkey")),
        ("token_program", json!("pubkey")),
        ("total_claimed_points", json!("u64")),
        ("closed", json!("bool")),
    ]));
    t.push(struct_type("Participant", &[
        ("bump", json!("u8")),
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("earned_points", json!("u64")),
        ("slashed_points", json!("u64")),
        ("claimed_points", json!("u64")),
    ]));
    t.push(struct_type("RunCreateParams", &[
        ("index", json!("u64")),
        ("run_id", json!("string")),
        ("client_version", json!("string")),
        ("main_authority", json!("pubkey")),
        ("join_authority", json!("pubkey")),
    ]));
    t.push(struct_type("RunUpdateParams", &[
        ("metadata", option(defined("RunMetadata"))),
        ("config", option(defined("CoordinatorConfig"))),
        ("model", option(defined("Model"))),
        ("progress", option(defined("Progress"))),
        ("epoch_earning_rate_total_shared", option(json!("u64"))),
        ("epoch_slashing_rate_per_client", option(json!("u64"))),
        ("paused", option(json!("bool"))),
        ("client_version", option(json!("string"))),
    ]));
    t.push(struct_type("ParticipantCreateParams", &[]));
    t.push(struct_type("ParticipantClaimParams", &[]));
    t.push(struct_type("RunWithdrawParams", &[("amount", json!("u64"))]));
    t.push(struct_type("RunCloseParams", &[]));
    t.push(struct_type("RewardsClaimed", &[
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("amount", json!("u64")),
        ("settled_earned_points", json!("u64")),
        ("settled_slashed_points", json!("u64")),
    ]));
    t.push(struct_type("CollateralWithdrawn", &[
        ("run", json!("pubkey")),
        ("destination", json!("pubkey")),
        ("amount", json!("u64")),
    ]));
    t
}

/// Accounts and argument type of each instruction, in INSTRUCTIONS order
/// (an empty params struct where there are no arguments: anchor-go v1.0.0
/// omits the discriminator of an instruction without arguments).
fn instruction_shapes() -> Vec<(Vec<Value>, &'static str)> {
    // Not pinned: the Coordinator's id changes with a devnet deployment
    // (psyche-client keys sync), and clients pass the one they use.
    let coordinator = || acc("coordinator_program", false, false);
    let system = || fixed("system_program", SYSTEM_PROGRAM.into());
    let mut run = acc("run", true, false);
    run["pda"] = json!({ "seeds": [
        { "kind": "const", "value": RUN_SEED },
        { "kind": "arg", "path": "params.index" },
    ]});
    let mut participant = acc("participant", true, false);
    participant["pda"] = json!({ "seeds": [
        { "kind": "const", "value": PARTICIPANT_SEED },
        { "kind": "account", "path": "run" },
        { "kind": "account", "path": "user" },
    ]});
    vec![
        (
            vec![acc("payer", true, true), run, acc("run_collateral", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_instance", true, false), acc("coordinator_account", true, false), coordinator(),
                 acc("token_program", false, false),
                 fixed("associated_token_program", bs58(&ASSOCIATED_TOKEN_PROGRAM_ID.to_bytes())), system()],
            "RunCreateParams",
        ),
        (
            vec![acc("authority", false, true), acc("run", false, false), acc("coordinator_instance", false, false),
                 acc("coordinator_account", true, false), coordinator()],
            "RunUpdateParams",
        ),
        (
            vec![acc("payer", true, true), acc("user", false, true), acc("run", false, false), participant, system()],
            "ParticipantCreateParams",
        ),
        (
            vec![acc("user", false, true), acc("run", true, false), acc("participant", true, false),
                 acc("run_collateral", true, false), acc("user_collateral", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_instance", false, false), acc("coordinator_account", true, false), coordinator(),
                 acc("token_program", false, false)],
            "ParticipantClaimParams",
        ),
        (
            vec![acc("authority", false, true), acc("run", false, false), acc("run_collateral", true, false),
                 acc("destination", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_account", false, false), acc("token_program", false, false)],
            "RunWithdrawParams",
        ),
        (
            vec![acc("authority", false, true), acc("spill", true, false), acc("run", true, false),
                 acc("coordinator_instance", true, false), acc("coordinator_account", true, false), coordinator()],
            "RunCloseParams",
        ),
    ]
}

fn render() -> String {
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
    let errors: Vec<Value> = ERRORS.iter().map(|e| json!({ "code": e.code(), "name": e.name(), "msg": e.message() })).collect();
    let idl = json!({
        "address": bs58(&ID.to_bytes()),
        "metadata": {
            "name": "psyche_treasurer",
            "version": "0.1.0",
            "spec": "0.1.0",
            "description": "Token rewards for Coordinator runs: claims of earned points, collateral top-up and withdrawal",
        },
        "instructions": instructions,
        "accounts": [
            { "name": "Run", "discriminator": RUN_ACCOUNT },
            { "name": "Participant", "discriminator": PARTICIPANT_ACCOUNT },
        ],
        "events": events,
        "errors": errors,
        "types": types(),
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
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../idl/psyche_treasurer.json");
    let fresh = render();
    if std::env::var_os("UPDATE_IDL").is_some() {
        std::fs::write(path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(committed == fresh, "{path} is stale: run UPDATE_IDL=1 cargo test -p psyche-treasurer and commit it");
}

#[test]
fn program_ids_render_as_declared() {
    assert_eq!(bs58(&ID.to_bytes()), "GRMnhStRdTw6M1634WCGVgovRDrRsQFAsVHkuxhceYRB");
    assert_eq!(bs58(&COORDINATOR_ID.to_bytes()), "35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
    assert_eq!(bs58(&[0; 32]), SYSTEM_PROGRAM);
}

#[test]
fn coordinator_discriminators_match_its_idl() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../idl/psyche_coordinator.json");
    let idl: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let disc = |list: &str, name: &str| -> Vec<u8> {
        let item = idl[list].as_array().unwrap().iter().find(|i| i["name"] == name).unwrap_or_else(|| panic!("{name} not in the coordinator IDL"));
        item["discriminator"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect()
    };
    use crate::coordinator::*;
    for (name, d) in [
        ("init_coordinator", INIT_COORDINATOR),
        ("update", UPDATE),
        ("update_client_version", UPDATE_CLIENT_VERSION),
        ("set_future_epoch_rates", SET_FUTURE_EPOCH_RATES),
        ("set_paused", SET_PAUSED),
        ("settle_points", SETTLE_POINTS),
        ("free_coordinator", FREE_COORDINATOR),
    ] {
        assert_eq!(disc("instructions", name), d, "{name}");
    }
    assert_eq!(disc("accounts", "CoordinatorAccount"), COORDINATOR_ACCOUNT);
    assert_eq!(disc("accounts", "CoordinatorInstance"), COORDINATOR_INSTANCE);
}
