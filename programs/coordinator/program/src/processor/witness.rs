use psyche_coordinator_logic::machine::WitnessReport;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// witness { step, index, participant_bloom, broadcast_bloom, broadcast_merkle,
/// metadata }: an elected witness reports the round. The metadata (loss,
/// throughput) is for indexers reading the transaction; it is not stored.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn witness(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let report = WitnessReport::decode(args);
    // Borrowed from the Result: moving a value this large out of it would
    // cost one more sol_memcpy_.
    let report = report.as_ref().map_err(Clone::clone)?;
    as_client(accounts, |s, signer, clock| s.witness(signer, report, clock))
}
