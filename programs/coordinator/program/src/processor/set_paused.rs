use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::sysvars::run_clock;

/// set_paused { paused }: the main authority pauses (immediately while
/// forming an epoch, at the epoch's end while rounds run) or resumes (after
/// config, model and progress validate).
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn set_paused(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let paused = r.bool()?;
    r.finish()?;
    let clock = run_clock()?;
    as_authority(accounts, |s| s.set_paused(paused, &clock))
}
