use psyche_coordinator_logic::event::Events;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, UpdateClientVersionParams};

/// update_client_version { client_version }: while the run is halted.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn update_client_version(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let UpdateClientVersionParams { client_version } = UpdateClientVersionParams::decode(args)?;
    as_authority(accounts, |s| s.update_client_version(client_version).map(|()| Events::default()))
}
