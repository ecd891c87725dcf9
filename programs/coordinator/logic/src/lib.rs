//! Pure logic of the Coordinator program: the run state machine, validation,
//! deterministic selection and batch assignment. No syscalls (except SHA-256,
//! `psyche_sdk::hash::hashv`: the `sol_sha256` syscall on-chain, software on the
//! host), so `cargo test` runs it natively; the instruction
//! glue (entrypoint, account checks, CPI, event logging) stays thin around it.
//! See README.md for the protocol.
#![cfg_attr(not(test), no_std)]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

pub mod bloom;
pub mod config;
pub mod error;
pub mod event;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod invariants;
pub mod machine;
pub mod selection;
pub mod state;

#[cfg(test)]
mod machine_tests;
