use psyche_coordinator_logic::machine::CommitArgs;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// commit { step, index, payload, state_before, state_after, fresh }: a
/// healthy member commits to its step of the current round while it trains
/// (RoundTrain): the hash of its payload and of its private replay state
/// before and after. Only while the run verifies training.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn commit(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let c = CommitArgs::decode(args)?;
    as_client(accounts, |s, signer, clock| s.commit(signer, &c, clock))
}
