use psyche_coordinator_logic::machine::DisputeVote;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// judge_dispute { id, vote }: a member of an open dispute's committee votes
/// MATCH, MISMATCH or NO_DATA; a majority settles it (ACCUSER_FAULT or
/// TRAINER_FAULT).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn judge_dispute(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let v = DisputeVote::decode(args)?;
    as_client(accounts, |s, signer, clock| s.judge_dispute(signer, &v, clock))
}
