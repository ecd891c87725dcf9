use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;

/// leave_run {}: the signer withdraws its pending join and leaves the current
/// epoch (forfeiting the epoch's reward).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn leave_run(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    Reader::new(args).finish()?;
    as_client(accounts, |s, signer, clock| s.leave(signer, clock))
}
