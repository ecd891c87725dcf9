use psyche_coordinator_logic::event::Events;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, SetFutureEpochRatesParams};

/// set_future_epoch_rates { earning_rate_total_shared?, slashing_rate_per_client? }:
/// the rates the next epoch to form will use.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn set_future_epoch_rates(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let SetFutureEpochRatesParams { earning_rate_total_shared: earning, slashing_rate_per_client: slashing } =
        SetFutureEpochRatesParams::decode(args)?;
    as_authority(accounts, |s| s.set_future_epoch_rates(earning, slashing).map(|()| Events::default()))
}
