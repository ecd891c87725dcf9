use psyche_coordinator_logic::event::Events;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::{Decode, UpdateParams};

/// update { metadata?, config?, model?, progress? }: the main authority
/// replaces what it passes. Metadata changes at any time; config, model and
/// progress only while the run is halted. Everything is validated first.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let params = UpdateParams::decode(args);
    // Borrowed from the Result: moving a value this large out of it would
    // cost one more sol_memcpy_.
    let params = params.as_ref().map_err(Clone::clone)?;
    let u = params.update();
    as_authority(accounts, |s| s.update(&u).map(|()| Events::default()))
}
