use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, SetPausedParams};
use crate::sysvars::run_clock;

/// set_paused { paused }: the main authority pauses (immediately while
/// forming an epoch, at the epoch's end while rounds run) or resumes (after
/// config, model and progress validate).
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn set_paused(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let SetPausedParams { paused } = SetPausedParams::decode(args)?;
    // Pausing never draws a verify seed.
    let clock = run_clock(None)?;
    as_authority(accounts, |s| s.set_paused(paused, &clock))
}
