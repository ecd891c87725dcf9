use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::machine::CheckpointRepo;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::fixed;
use crate::run::fail;

/// checkpoint { repo, revision }: a healthy member records where it uploaded
/// the latest model (Hub or P2P runs).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn checkpoint(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let repo = r.string()?;
    let revision = r.string()?;
    r.finish()?;
    let (Some(repo), Some(revision)) = (fixed(repo.as_bytes()), fixed(revision.as_bytes())) else {
        return Err(fail(CoordinatorError::InvalidCheckpoint));
    };
    let repo = CheckpointRepo { repo, revision };
    as_client(accounts, |s, signer, clock| s.checkpoint(signer, &repo, clock))
}
