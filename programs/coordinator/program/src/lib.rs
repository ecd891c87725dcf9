//! The Coordinator program: the on-chain glue around the run state machine of
//! `psyche-coordinator-logic` (lib `psyche_coordinator_logic`). Each instruction
//! checks its accounts (signer, owner, PDA, discriminator, writability), decodes
//! its Borsh arguments, runs one method of the logic on the account data in
//! place, and logs the logic's events Anchor-style.
//!
//! Accounts:
//! - `CoordinatorInstance`, PDA ["coordinator", run_id]: bump, main authority,
//!   join authority, the coordinator account's address, run id (Borsh).
//! - `CoordinatorAccount`: the 66,968-byte fixed layout of
//!   `psyche_coordinator_logic::state` (zero-copy), allocated by the client with
//!   the system program and assigned to this program, then `init_coordinator`.
//!
//! Wire format: Anchor's, described by idl/psyche_coordinator.json (which a host
//! test generates from the types here and the logic's layout).
#![no_std]

mod args;
mod events;
mod processor;
mod run;
mod sysvars;

#[cfg(test)]
mod idl;

use psyche_sdk::anchor::{self, split_instruction};
use psyche_sdk::{base58, AccountView, Address, ErrorCode, ProgramResult};

pub use psyche_coordinator_logic as logic;

psyche_sdk::entrypoint!(process, 8);

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");

/// Seed prefix of the CoordinatorInstance PDA.
pub const INSTANCE_SEED: &[u8] = b"coordinator";
/// The Authorizer scope join_run checks.
pub const JOIN_RUN_SCOPE: &[u8] = b"CoordinatorJoinRun";

pub const COORDINATOR_INSTANCE: [u8; 8] = anchor::account("CoordinatorInstance");
pub const COORDINATOR_ACCOUNT: [u8; 8] = anchor::account("CoordinatorAccount");

/// Instruction names in IDL order, with their discriminators.
pub const INSTRUCTIONS: [(&str, [u8; 8]); 14] = [
    ("init_coordinator", anchor::instruction("init_coordinator")),
    ("update", anchor::instruction("update")),
    ("update_client_version", anchor::instruction("update_client_version")),
    ("set_future_epoch_rates", anchor::instruction("set_future_epoch_rates")),
    ("set_paused", anchor::instruction("set_paused")),
    ("join_run", anchor::instruction("join_run")),
    ("leave_run", anchor::instruction("leave_run")),
    ("tick", anchor::instruction("tick")),
    ("witness", anchor::instruction("witness")),
    ("warmup_witness", anchor::instruction("warmup_witness")),
    ("health_check", anchor::instruction("health_check")),
    ("checkpoint", anchor::instruction("checkpoint")),
    ("free_coordinator", anchor::instruction("free_coordinator")),
    ("settle_points", anchor::instruction("settle_points")),
];

const fn ix(i: usize) -> [u8; 8] {
    INSTRUCTIONS[i].1
}

/// Dispatches an instruction; public so host tests and the entrypoint share it.
pub fn process(program_id: &Address, accounts: &[AccountView], data: &[u8]) -> ProgramResult {
    if program_id != &ID {
        return Err(ErrorCode::DeclaredProgramIdMismatch.fail());
    }
    let (disc, args) = split_instruction(data)?;
    match disc {
        d if d == ix(0) => processor::init_coordinator(accounts, args),
        d if d == ix(1) => processor::update(accounts, args),
        d if d == ix(2) => processor::update_client_version(accounts, args),
        d if d == ix(3) => processor::set_future_epoch_rates(accounts, args),
        d if d == ix(4) => processor::set_paused(accounts, args),
        d if d == ix(5) => processor::join_run(accounts, args),
        d if d == ix(6) => processor::leave_run(accounts, args),
        d if d == ix(7) => processor::tick(accounts, args),
        d if d == ix(8) => processor::witness(accounts, args),
        d if d == ix(9) => processor::warmup_witness(accounts, args),
        d if d == ix(10) => processor::health_check(accounts, args),
        d if d == ix(11) => processor::checkpoint(accounts, args),
        d if d == ix(12) => processor::free_coordinator(accounts, args),
        d if d == ix(13) => processor::settle_points(accounts, args),
        _ => Err(ErrorCode::InstructionFallbackNotFound.fail()),
    }
}
