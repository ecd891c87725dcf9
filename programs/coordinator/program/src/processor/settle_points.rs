use psyche_coordinator_logic::event::Events;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, SettlePointsParams};

/// settle_points { user }: the main authority takes a client's earned and
/// slashed points (zeroing them here) so that the slot of a client that left
/// can be reused without losing its points. The Treasurer calls it by CPI,
/// signed by its Run PDA, when it pays a claim; it reads the points from the
/// account just before.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn settle_points(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let SettlePointsParams { user } = SettlePointsParams::decode(args)?;
    as_authority(accounts, |s| s.settle_points(&user).map(|_| Events::default()))
}
