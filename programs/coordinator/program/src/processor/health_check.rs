use psyche_coordinator_logic::machine::HealthCheck;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// health_check { step, index, accused }: a healthy member accuses the client
/// at `index` of not delivering in the previous round; it is dropped (and
/// slashed) unless a quorum of that round's witnesses saw it.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn health_check(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let check = HealthCheck::decode(args)?;
    as_client(accounts, |s, signer, clock| s.health_check(signer, &check, clock))
}
