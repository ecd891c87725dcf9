use psyche_coordinator_logic::machine::CheckpointRepo;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// checkpoint { repo, revision }: a healthy member records where it uploaded
/// the latest model (Hub or P2P runs).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn checkpoint(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let repo = CheckpointRepo::decode(args);
    // Borrowed from the Result: moving a value this large out of it would
    // cost one more sol_memcpy_.
    let repo = repo.as_ref().map_err(Clone::clone)?;
    as_client(accounts, |s, signer, clock| s.checkpoint(signer, repo, clock))
}
