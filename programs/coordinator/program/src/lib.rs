//! The Coordinator program: the on-chain glue around the run state machine of
//! `psyche-coordinator-logic` (lib `psyche_coordinator_logic`). Each instruction
//! checks its accounts (signer, owner, PDA, discriminator, writability), decodes
//! its Borsh arguments, runs one method of the logic on the account data in
//! place, and logs the logic's events Anchor-style.
//!
//! Accounts:
//! - `CoordinatorInstance`, PDA ["coordinator", run_id]: bump, main authority,
//!   join authority, the coordinator account's address, run id (Borsh).
//! - `CoordinatorAccount`: the 201,088-byte fixed layout of
//!   `psyche_coordinator_logic::state` (zero-copy), allocated by the client with
//!   the system program and assigned to this program, then `init_coordinator`.
//!
//! Wire format: Anchor's, described by idl/psyche_coordinator.json (which a host
//! test generates from the types here and the logic's layout).
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

/// Instruction decoding, one decoder per instruction; public so the host
/// simulator (programs/coordinator/sim) decodes exactly as the program does.
pub mod args;
mod events;
pub mod instruction;
pub mod join_proof;
mod processor;
mod run;
mod sysvars;

#[cfg(test)]
mod idl;

use psyche_sdk::anchor;
use psyche_sdk::{base58, AccountView, Address, ErrorCode, ProgramResult};

use instruction::Kind;

pub use psyche_coordinator_logic as logic;
/// Event names in IDL order, with their discriminators.
pub use events::EVENTS;

psyche_sdk::entrypoint!(process, 8);

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");

/// Seed prefix of the CoordinatorInstance PDA.
pub const INSTANCE_SEED: &[u8] = b"coordinator";
/// The Authorizer scope join_run checks.
pub const JOIN_RUN_SCOPE: &[u8] = b"CoordinatorJoinRun";

pub const COORDINATOR_INSTANCE: [u8; 8] = anchor::account("CoordinatorInstance");
pub const COORDINATOR_ACCOUNT: [u8; 8] = anchor::account("CoordinatorAccount");

/// Instruction discriminators (Anchor's: the first 8 bytes of
/// sha256("global:<name>")); the IDL test keeps them equal to
/// idl/psyche_coordinator.json's.
pub const INIT_COORDINATOR: [u8; 8] = anchor::instruction("init_coordinator");
pub const UPDATE: [u8; 8] = anchor::instruction("update");
pub const UPDATE_CLIENT_VERSION: [u8; 8] = anchor::instruction("update_client_version");
pub const SET_FUTURE_EPOCH_RATES: [u8; 8] = anchor::instruction("set_future_epoch_rates");
pub const SET_PAUSED: [u8; 8] = anchor::instruction("set_paused");
pub const JOIN_RUN: [u8; 8] = anchor::instruction("join_run");
pub const LEAVE_RUN: [u8; 8] = anchor::instruction("leave_run");
pub const TICK: [u8; 8] = anchor::instruction("tick");
pub const WITNESS: [u8; 8] = anchor::instruction("witness");
pub const WARMUP_WITNESS: [u8; 8] = anchor::instruction("warmup_witness");
pub const HEALTH_CHECK: [u8; 8] = anchor::instruction("health_check");
pub const CHECKPOINT: [u8; 8] = anchor::instruction("checkpoint");
pub const FREE_COORDINATOR: [u8; 8] = anchor::instruction("free_coordinator");
pub const SETTLE_POINTS: [u8; 8] = anchor::instruction("settle_points");
pub const COMMIT: [u8; 8] = anchor::instruction("commit");
pub const VERIFY: [u8; 8] = anchor::instruction("verify");
pub const ANSWER_DISPUTE: [u8; 8] = anchor::instruction("answer_dispute");
pub const JUDGE_DISPUTE: [u8; 8] = anchor::instruction("judge_dispute");
pub const TAKE_BURNED: [u8; 8] = anchor::instruction("take_burned");
pub const REPORT_EVAL: [u8; 8] = anchor::instruction("report_eval");
pub const REPORT_PROMPT: [u8; 8] = anchor::instruction("report_prompt");

/// Instruction names in IDL order, with their discriminators.
pub const INSTRUCTIONS: [(&str, [u8; 8]); 21] = [
    ("init_coordinator", INIT_COORDINATOR),
    ("update", UPDATE),
    ("update_client_version", UPDATE_CLIENT_VERSION),
    ("set_future_epoch_rates", SET_FUTURE_EPOCH_RATES),
    ("set_paused", SET_PAUSED),
    ("join_run", JOIN_RUN),
    ("leave_run", LEAVE_RUN),
    ("tick", TICK),
    ("witness", WITNESS),
    ("warmup_witness", WARMUP_WITNESS),
    ("health_check", HEALTH_CHECK),
    ("checkpoint", CHECKPOINT),
    ("free_coordinator", FREE_COORDINATOR),
    ("settle_points", SETTLE_POINTS),
    ("commit", COMMIT),
    ("verify", VERIFY),
    ("answer_dispute", ANSWER_DISPUTE),
    ("judge_dispute", JUDGE_DISPUTE),
    ("take_burned", TAKE_BURNED),
    ("report_eval", REPORT_EVAL),
    ("report_prompt", REPORT_PROMPT),
];

/// Dispatches an instruction; public so host tests and the entrypoint share it.
pub fn process(program_id: &Address, accounts: &[AccountView], data: &[u8]) -> ProgramResult {
    if program_id != &ID {
        return Err(ErrorCode::DeclaredProgramIdMismatch.fail());
    }
    let (kind, args) = Kind::split(data)?;
    match kind {
        Kind::InitCoordinator => processor::init_coordinator(accounts, args),
        Kind::Update => processor::update(accounts, args),
        Kind::UpdateClientVersion => processor::update_client_version(accounts, args),
        Kind::SetFutureEpochRates => processor::set_future_epoch_rates(accounts, args),
        Kind::SetPaused => processor::set_paused(accounts, args),
        Kind::JoinRun => processor::join_run(accounts, args),
        Kind::LeaveRun => processor::leave_run(accounts, args),
        Kind::Tick => processor::tick(accounts, args),
        Kind::Witness => processor::witness(accounts, args),
        Kind::WarmupWitness => processor::warmup_witness(accounts, args),
        Kind::HealthCheck => processor::health_check(accounts, args),
        Kind::Checkpoint => processor::checkpoint(accounts, args),
        Kind::FreeCoordinator => processor::free_coordinator(accounts, args),
        Kind::SettlePoints => processor::settle_points(accounts, args),
        Kind::Commit => processor::commit(accounts, args),
        Kind::Verify => processor::verify(accounts, args),
        Kind::AnswerDispute => processor::answer_dispute(accounts, args),
        Kind::JudgeDispute => processor::judge_dispute(accounts, args),
        Kind::TakeBurned => processor::take_burned(accounts, args),
        Kind::ReportEval => processor::report_eval(accounts, args),
        Kind::ReportPrompt => processor::report_prompt(accounts, args),
    }
}
