use psyche_coordinator_logic::machine::VerifyArgs;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// verify { step, verifier_index, index, verdict, claimed_payload,
/// claimed_after }: the verifier drawn for a trainer whose commitment must be
/// verified posts its verdict (MATCH, MISMATCH or NO_DATA) during the round's
/// RoundWitness phase, with its own replay hashes.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn verify(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let v = VerifyArgs::decode(args)?;
    as_client(accounts, |s, signer, clock| s.verify(signer, &v, clock))
}
