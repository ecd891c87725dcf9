//! The Authorizer program: a grantor lets a grantee (one key, or everyone) act
//! within a scope, and the grantee may name delegate keys that act for it. The
//! Coordinator checks join_run against these authorizations
//! (`psyche_authorizer_interface::check_authorized`).
//!
//! Lifecycle: authorization_create (inactive) -> authorization_grantor_update
//! {active} -> authorization_grantee_update {delegates} -> deactivate ->
//! authorization_close. Wire format: Anchor's (discriminators, Borsh
//! arguments), described by idl/psyche_authorizer.json.
#![no_std]

mod processor;

use psyche_sdk::anchor::{self, split_instruction};
use psyche_sdk::{AccountView, Address, ErrorCode, ProgramResult};

pub use psyche_authorizer_interface as interface;

psyche_sdk::entrypoint!(process, 8);

pub const AUTHORIZATION_CREATE: [u8; 8] = anchor::instruction("authorization_create");
pub const AUTHORIZATION_GRANTOR_UPDATE: [u8; 8] = anchor::instruction("authorization_grantor_update");
pub const AUTHORIZATION_GRANTEE_UPDATE: [u8; 8] = anchor::instruction("authorization_grantee_update");
pub const AUTHORIZATION_CLOSE: [u8; 8] = anchor::instruction("authorization_close");

pub const AUTHORIZATION_CREATED: [u8; 8] = anchor::event("AuthorizationCreated");
pub const AUTHORIZATION_GRANTOR_UPDATED: [u8; 8] = anchor::event("AuthorizationGrantorUpdated");
pub const AUTHORIZATION_GRANTEE_UPDATED: [u8; 8] = anchor::event("AuthorizationGranteeUpdated");
pub const AUTHORIZATION_CLOSED: [u8; 8] = anchor::event("AuthorizationClosed");

/// Dispatches an instruction; public so host tests and the entrypoint share it.
pub fn process(program_id: &Address, accounts: &[AccountView], data: &[u8]) -> ProgramResult {
    if program_id != &interface::ID {
        return Err(ErrorCode::DeclaredProgramIdMismatch.fail());
    }
    let (disc, args) = split_instruction(data)?;
    match disc {
        AUTHORIZATION_CREATE => processor::create(accounts, args),
        AUTHORIZATION_GRANTOR_UPDATE => processor::grantor_update(accounts, args),
        AUTHORIZATION_GRANTEE_UPDATE => processor::grantee_update(accounts, args),
        AUTHORIZATION_CLOSE => processor::close(accounts, args),
        _ => Err(ErrorCode::InstructionFallbackNotFound.fail()),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn instruction_and_event_discriminators_match_idl() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../idl/psyche_authorizer.json");
        let idl: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let disc = |v: &serde_json::Value| -> Vec<u8> {
            v["discriminator"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect()
        };
        let ixs = idl["instructions"].as_array().unwrap();
        let ours = [
            ("authorization_create", AUTHORIZATION_CREATE),
            ("authorization_grantor_update", AUTHORIZATION_GRANTOR_UPDATE),
            ("authorization_grantee_update", AUTHORIZATION_GRANTEE_UPDATE),
            ("authorization_close", AUTHORIZATION_CLOSE),
        ];
        assert_eq!(ixs.len(), ours.len());
        for (ix, (name, d)) in ixs.iter().zip(ours) {
            assert_eq!(ix["name"], name);
            assert_eq!(disc(ix), d, "{name}");
        }
        let events = idl["events"].as_array().unwrap();
        let ours = [
            ("AuthorizationCreated", AUTHORIZATION_CREATED),
            ("AuthorizationGrantorUpdated", AUTHORIZATION_GRANTOR_UPDATED),
            ("AuthorizationGranteeUpdated", AUTHORIZATION_GRANTEE_UPDATED),
            ("AuthorizationClosed", AUTHORIZATION_CLOSED),
        ];
        assert_eq!(events.len(), ours.len());
        for (ev, (name, d)) in events.iter().zip(ours) {
            assert_eq!(ev["name"], name);
            assert_eq!(disc(ev), d, "{name}");
        }
    }
}
