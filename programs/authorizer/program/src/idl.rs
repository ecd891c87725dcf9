//! Generates idl/psyche_authorizer.json with the shared generator
//! (programs/idl) from the program's constants and fails when the committed
//! file differs (`UPDATE_IDL=1 cargo test -p psyche-authorizer` rewrites it).

extern crate std;

use std::vec::Vec;
use std::vec;

use psyche_authorizer_interface::{AuthorizerError, AUTHORIZATION_ACCOUNT, AUTHORIZATION_SEED, ID};
use psyche_idl::{
    account as acc, address, fixed_account, json, seed_account, seed_arg, seed_const, vec as vec_of, with_pda, Idl,
    Instruction, Types, Value, SYSTEM_PROGRAM,
};

use crate::{EVENTS, INSTRUCTIONS};

/// The program's errors, in code order.
const ERRORS: [AuthorizerError; 6] = [
    AuthorizerError::ScopeTooLong,
    AuthorizerError::TooManyDelegates,
    AuthorizerError::AuthorizationStillActive,
    AuthorizerError::GrantorMismatch,
    AuthorizerError::GranteeMismatch,
    AuthorizerError::AuthorizationAlreadyExists,
];

fn types() -> Types {
    let mut t = Types::default();
    t.borsh("Authorization", &[
        ("bump", json!("u8")),
        ("grantor", json!("pubkey")),
        ("grantee", json!("pubkey")),
        ("scope", json!("bytes")),
        ("active", json!("bool")),
        ("delegates", vec_of(json!("pubkey"))),
        ("grantor_update_unix_timestamp", json!("i64")),
    ]);
    t.borsh("AuthorizationCreateParams", &[("grantee", json!("pubkey")), ("scope", json!("bytes"))]);
    t.borsh("AuthorizationGrantorUpdateParams", &[("active", json!("bool"))]);
    t.borsh("AuthorizationGranteeUpdateParams", &[
        ("delegates_clear", json!("bool")),
        ("delegates_added", vec_of(json!("pubkey"))),
    ]);
    t.borsh("AuthorizationCloseParams", &[]);
    // Events, in EVENTS order.
    t.borsh("AuthorizationCreated", &[
        ("authorization", json!("pubkey")),
        ("grantor", json!("pubkey")),
        ("grantee", json!("pubkey")),
        ("scope", json!("bytes")),
    ]);
    t.borsh("AuthorizationGrantorUpdated", &[
        ("authorization", json!("pubkey")),
        ("active", json!("bool")),
        ("unix_timestamp", json!("i64")),
    ]);
    t.borsh("AuthorizationGranteeUpdated", &[("authorization", json!("pubkey")), ("delegates_len", json!("u16"))]);
    t.borsh("AuthorizationClosed", &[("authorization", json!("pubkey")), ("spill", json!("pubkey"))]);
    t
}

/// Accounts and argument type of each instruction, in INSTRUCTIONS order.
fn instruction_shapes() -> Vec<Instruction> {
    let system = || fixed_account("system_program", SYSTEM_PROGRAM);
    let authorization = with_pda(
        acc("authorization", true, false),
        &[seed_const(AUTHORIZATION_SEED), seed_account("grantor"), seed_arg("params.grantee"), seed_arg("params.scope")],
    );
    let shapes: Vec<(Vec<Value>, &'static str)> = vec![
        (
            vec![acc("payer", true, true), acc("grantor", false, true), authorization, system()],
            "AuthorizationCreateParams",
        ),
        (vec![acc("grantor", false, true), acc("authorization", true, false)], "AuthorizationGrantorUpdateParams"),
        (
            vec![acc("payer", true, true), acc("grantee", false, true), acc("authorization", true, false), system()],
            "AuthorizationGranteeUpdateParams",
        ),
        (
            vec![acc("grantor", false, true), acc("spill", true, false), acc("authorization", true, false)],
            "AuthorizationCloseParams",
        ),
    ];
    shapes.into_iter().map(|(accounts, params)| Instruction { accounts, params }).collect()
}

fn render() -> std::string::String {
    Idl {
        name: "psyche_authorizer",
        description: "Who may do what: grants from a grantor to a grantee (or everyone) for a scope, with delegate keys",
        address: ID.to_bytes(),
        instructions: &INSTRUCTIONS,
        shapes: instruction_shapes(),
        accounts: &[("Authorization", AUTHORIZATION_ACCOUNT)],
        events: &EVENTS,
        errors: ERRORS.iter().map(|e| (e.code(), e.name(), e.message())).collect(),
        types: types(),
    }
    .render()
}

#[test]
fn committed_idl_is_generated() {
    psyche_idl::check_committed("psyche_authorizer", &render(), "psyche-authorizer");
}

#[test]
fn errors_are_listed_in_code_order() {
    for (i, e) in ERRORS.iter().enumerate() {
        assert_eq!(usize::try_from(e.code()).unwrap(), 6000 + i, "{}", e.name());
    }
}

#[test]
fn program_id_renders_as_declared() {
    assert_eq!(address(&ID.to_bytes()), "GtrhoCuywatUjtYA4AAtutfN4peC4PxaDorxqcuNMgYn");
}
