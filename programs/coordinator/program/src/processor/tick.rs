use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::{Decode, NoParams};

/// tick {}: anyone advances the run when a condition or timer allows
/// (TickTooEarly otherwise, so a useless tick changes nothing).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn tick(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    NoParams::decode(args)?;
    as_client(accounts, |s, _, clock| s.tick(clock))
}
