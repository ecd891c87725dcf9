use psyche_coordinator_logic::event::Events;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;

/// update_client_version { client_version }: while the run is halted.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn update_client_version(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let version = r.string()?;
    r.finish()?;
    as_authority(accounts, |s| s.update_client_version(version.as_bytes()).map(|()| Events::default()))
}
