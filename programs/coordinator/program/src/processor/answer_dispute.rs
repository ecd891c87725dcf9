use psyche_coordinator_logic::machine::DisputeAnswer;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// answer_dispute { id, rerun_payload, rerun_after }: the accused trainer of
/// an open MISMATCH dispute answers with its own rerun of the step; a rerun
/// that reproduces the accuser's hashes settles it TRANSIENT (or, past
/// forgive_per_epoch, TRAINER_FAULT).
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn answer_dispute(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let a = DisputeAnswer::decode(args)?;
    as_client(accounts, |s, signer, clock| s.answer_dispute(signer, &a, clock))
}
