use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::{Decode, NoParams};

/// warmup_witness {}: a member of the forming epoch reports it has the model.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn warmup_witness(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    NoParams::decode(args)?;
    as_client(accounts, |s, signer, clock| s.warmup_witness(signer, clock))
}
