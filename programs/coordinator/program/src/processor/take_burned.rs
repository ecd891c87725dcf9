use psyche_coordinator_logic::event::Events;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, TakeBurnedParams};

/// take_burned { user }: the main authority takes a client's burned points
/// (its unvested rewards taken by faults), zeroing them here. The Treasurer
/// calls it by CPI, signed by its Run PDA, from burn_forfeited, which reads
/// the points from the account just before and burns as many tokens; the
/// slot is kept until then.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn take_burned(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let TakeBurnedParams { user } = TakeBurnedParams::decode(args)?;
    as_authority(accounts, |s| s.take_burned(&user).map(|_| Events::default()))
}
