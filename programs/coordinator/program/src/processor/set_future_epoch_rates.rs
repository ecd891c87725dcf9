use psyche_coordinator_logic::event::Events;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::option_u64;

/// set_future_epoch_rates { earning_rate_total_shared?, slashing_rate_per_client? }:
/// the rates the next epoch to form will use.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn set_future_epoch_rates(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let earning = option_u64(&mut r)?;
    let slashing = option_u64(&mut r)?;
    r.finish()?;
    as_authority(accounts, |s| s.set_future_epoch_rates(earning, slashing).map(|()| Events::default()))
}
