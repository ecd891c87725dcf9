use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::{Decode, NoParams};

/// leave_run {}: the signer withdraws its pending join and leaves the current
/// epoch (forfeiting the epoch's reward).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn leave_run(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    NoParams::decode(args)?;
    as_client(accounts, |s, signer, clock| s.leave(signer, clock))
}
