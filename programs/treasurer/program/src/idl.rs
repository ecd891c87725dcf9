//! Generates idl/psyche_treasurer.json with the shared generator
//! (programs/idl) from the program's constants and fails when the committed
//! file differs (`UPDATE_IDL=1 cargo test -p psyche-treasurer` rewrites it).
//! The Coordinator layout types that run_update forwards (RunMetadata,
//! CoordinatorConfig, Model, Progress) are copied from
//! idl/psyche_coordinator.json, which that program's own test keeps in
//! lockstep with its structs, and checked against the logic crate's sizes.

extern crate std;

use core::mem::size_of;
use std::vec::Vec;
use std::vec;

use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata};
use psyche_idl::{
    account as acc, address, defined, fixed_account, json, option, seed_account, seed_arg, seed_const, with_pda, Idl,
    Instruction, Types, Value, SYSTEM_PROGRAM,
};
use psyche_sdk::cpi::ata::ASSOCIATED_TOKEN_PROGRAM_ID;
use psyche_treasurer_interface::*;

use crate::{EVENTS, INSTRUCTIONS};

fn types() -> Types {
    let mut t = Types::default();
    // The Coordinator's layout types, as its IDL declares them (these four
    // are self-contained: no Bloom or other type of theirs is needed).
    let coordinator = psyche_idl::committed("psyche_coordinator");
    t.copy_from(&coordinator, "RunMetadata", size_of::<RunMetadata>());
    t.copy_from(&coordinator, "CoordinatorConfig", size_of::<CoordinatorConfig>());
    t.copy_from(&coordinator, "Model", size_of::<Model>());
    t.copy_from(&coordinator, "Progress", size_of::<Progress>());
    t.borsh("Run", &[
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
        ("join_deposit", json!("u64")),
        ("total_deposits", json!("u64")),
        ("total_burned", json!("u64")),
        ("unclaimed_settled_points", json!("u64")),
    ]);
    t.borsh("Participant", &[
        ("bump", json!("u8")),
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("earned_points", json!("u64")),
        ("slashed_points", json!("u64")),
        ("claimed_points", json!("u64")),
        ("deposit", json!("u64")),
        ("deposit_epoch", json!("u32")),
        ("deposited", json!("bool")),
        ("has_fault", json!("bool")),
        ("last_fault_epoch", json!("u32")),
        ("burned_points", json!("u64")),
        ("burned_deposit", json!("u64")),
    ]);
    t.borsh("RunCreateParams", &[
        ("index", json!("u64")),
        ("run_id", json!("string")),
        ("client_version", json!("string")),
        ("main_authority", json!("pubkey")),
        ("join_authority", json!("pubkey")),
        ("join_deposit", json!("u64")),
    ]);
    t.borsh("RunUpdateParams", &[
        ("metadata", option(defined("RunMetadata"))),
        ("config", option(defined("CoordinatorConfig"))),
        ("model", option(defined("Model"))),
        ("progress", option(defined("Progress"))),
        ("epoch_earning_rate_total_shared", option(json!("u64"))),
        ("epoch_slashing_rate_per_client", option(json!("u64"))),
        ("paused", option(json!("bool"))),
        ("client_version", option(json!("string"))),
        ("join_deposit", option(json!("u64"))),
    ]);
    t.borsh("ParticipantCreateParams", &[]);
    t.borsh("ParticipantClaimParams", &[]);
    t.borsh("RunWithdrawParams", &[("amount", json!("u64"))]);
    t.borsh("RunCloseParams", &[]);
    t.borsh("ParticipantDepositParams", &[("amount", json!("u64"))]);
    t.borsh("ParticipantWithdrawDepositParams", &[]);
    t.borsh("BurnForfeitedParams", &[]);
    t.borsh("ParticipantSettleParams", &[]);
    t.borsh("RewardsClaimed", &[
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("amount", json!("u64")),
        ("settled_earned_points", json!("u64")),
        ("settled_slashed_points", json!("u64")),
    ]);
    t.borsh("CollateralWithdrawn", &[
        ("run", json!("pubkey")),
        ("destination", json!("pubkey")),
        ("amount", json!("u64")),
    ]);
    t.borsh("DepositMade", &[
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("amount", json!("u64")),
        ("epoch", json!("u32")),
    ]);
    t.borsh("DepositReturned", &[("run", json!("pubkey")), ("user", json!("pubkey")), ("amount", json!("u64"))]);
    t.borsh("ForfeitsBurned", &[
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("points", json!("u64")),
        ("deposit", json!("u64")),
    ]);
    t.borsh("PointsSettled", &[
        ("run", json!("pubkey")),
        ("user", json!("pubkey")),
        ("settled_earned_points", json!("u64")),
        ("settled_slashed_points", json!("u64")),
        ("claimable", json!("u64")),
    ]);
    t
}

/// Accounts and argument type of each instruction, in INSTRUCTIONS order
/// (an empty params struct where there are no arguments: anchor-go v1.0.0
/// omits the discriminator of an instruction without arguments).
fn instruction_shapes() -> Vec<Instruction> {
    // Not pinned: the Coordinator's id changes with a devnet deployment
    // (psyche-client keys sync), and clients pass the one they use.
    let coordinator = || acc("coordinator_program", false, false);
    // Not pinned either: it follows the Authorizer's deployment.
    let authorizer = || acc("authorizer_program", false, false);
    let system = || fixed_account("system_program", SYSTEM_PROGRAM);
    let run = with_pda(acc("run", true, false), &[seed_const(RUN_SEED), seed_arg("params.index")]);
    let participant = || {
        with_pda(acc("participant", true, false), &[seed_const(PARTICIPANT_SEED), seed_account("run"), seed_account("user")])
    };
    let shapes: Vec<(Vec<Value>, &'static str)> = vec![
        (
            vec![acc("payer", true, true), run, acc("run_collateral", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_instance", true, false), acc("coordinator_account", true, false), coordinator(),
                 acc("token_program", false, false),
                 fixed_account("associated_token_program", &address(&ASSOCIATED_TOKEN_PROGRAM_ID.to_bytes())), system()],
            "RunCreateParams",
        ),
        (
            vec![acc("authority", false, true), acc("run", true, false), acc("coordinator_instance", false, false),
                 acc("coordinator_account", true, false), coordinator(), acc("collateral_mint", false, false)],
            "RunUpdateParams",
        ),
        (
            vec![acc("payer", true, true), acc("user", false, true), acc("run", false, false), participant(), system()],
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
        (
            vec![acc("user", true, true), acc("run", true, false), participant(), acc("user_collateral", true, false),
                 acc("run_collateral", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_account", false, false), acc("authorization", true, false), authorizer(),
                 acc("token_program", false, false), system()],
            "ParticipantDepositParams",
        ),
        (
            vec![acc("signer", false, true), acc("user", true, false), acc("run", true, false), participant(),
                 acc("run_collateral", true, false), acc("user_collateral", true, false), acc("collateral_mint", false, false),
                 acc("coordinator_account", false, false), acc("authorization", true, false), authorizer(),
                 acc("token_program", false, false)],
            "ParticipantWithdrawDepositParams",
        ),
        (
            vec![acc("user", true, false), acc("run", true, false), participant(), acc("run_collateral", true, false), acc("collateral_mint", true, false),
                 acc("coordinator_instance", false, false), acc("coordinator_account", true, false), coordinator(),
                 acc("authorization", true, false), authorizer(), acc("token_program", false, false)],
            "BurnForfeitedParams",
        ),
        (
            vec![acc("payer", true, true), acc("user", false, false), acc("run", true, false), participant(),
                 acc("coordinator_instance", false, false), acc("coordinator_account", true, false), coordinator(), system()],
            "ParticipantSettleParams",
        ),
    ];
    shapes.into_iter().map(|(accounts, params)| Instruction { accounts, params }).collect()
}

fn render() -> std::string::String {
    Idl {
        name: "psyche_treasurer",
        description: "Token rewards for Coordinator runs: claims of earned points, permissionless settles that free client slots, join deposits, burns of forfeited points and deposits, collateral top-up and withdrawal",
        address: ID.to_bytes(),
        instructions: &INSTRUCTIONS,
        shapes: instruction_shapes(),
        accounts: &[("Run", RUN_ACCOUNT), ("Participant", PARTICIPANT_ACCOUNT)],
        events: &EVENTS,
        errors: ERRORS.iter().map(|e| (e.code(), e.name(), e.message())).collect(),
        types: types(),
    }
    .render()
}

#[test]
fn committed_idl_is_generated() {
    psyche_idl::check_committed("psyche_treasurer", &render(), "psyche-treasurer");
}

#[test]
fn program_ids_render_as_declared() {
    assert_eq!(address(&ID.to_bytes()), "GRMnhStRdTw6M1634WCGVgovRDrRsQFAsVHkuxhceYRB");
    assert_eq!(address(&COORDINATOR_ID.to_bytes()), "35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
}

#[test]
fn coordinator_discriminators_match_its_idl() {
    let idl = psyche_idl::committed("psyche_coordinator");
    let disc = |list: &str, name: &str| psyche_idl::discriminator(&idl, list, name);
    use crate::coordinator::*;
    for (name, d) in [
        ("init_coordinator", INIT_COORDINATOR),
        ("update", UPDATE),
        ("update_client_version", UPDATE_CLIENT_VERSION),
        ("set_future_epoch_rates", SET_FUTURE_EPOCH_RATES),
        ("set_paused", SET_PAUSED),
        ("settle_points", SETTLE_POINTS),
        ("take_burned", TAKE_BURNED),
        ("free_coordinator", FREE_COORDINATOR),
    ] {
        assert_eq!(disc("instructions", name), d, "{name}");
    }
    assert_eq!(disc("accounts", "CoordinatorAccount"), COORDINATOR_ACCOUNT);
    assert_eq!(disc("accounts", "CoordinatorInstance"), COORDINATOR_INSTANCE);
}

/// The Authorizer instructions a deposit calls, and its program id, are the
/// ones its IDL declares.
#[test]
fn authorizer_discriminators_match_its_idl() {
    let idl = psyche_idl::committed("psyche_authorizer");
    assert_eq!(idl["address"].as_str(), Some(address(&AUTHORIZER_ID.to_bytes()).as_str()));
    use crate::authorizer::*;
    for (name, d) in [
        ("authorization_create", AUTHORIZATION_CREATE),
        ("authorization_grantor_update", AUTHORIZATION_GRANTOR_UPDATE),
        ("authorization_grantee_update", AUTHORIZATION_GRANTEE_UPDATE),
        ("authorization_close", AUTHORIZATION_CLOSE),
    ] {
        assert_eq!(psyche_idl::discriminator(&idl, "instructions", name), d, "{name}");
    }
    assert_eq!(PARTICIPANT_SPACE, 131);
    assert_eq!(RUN_SPACE, 250);
}
