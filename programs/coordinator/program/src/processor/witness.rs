use psyche_coordinator_logic::machine::WitnessReport;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::pod;

/// witness { step, index, participant_bloom, broadcast_bloom, broadcast_merkle,
/// metadata }: an elected witness reports the round. The metadata (loss,
/// throughput) is for indexers reading the transaction; it is not stored.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn witness(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let step = r.u32()?;
    let index = r.u16()?;
    let participant_bloom = pod(&mut r)?;
    let broadcast_bloom = pod(&mut r)?;
    let broadcast_merkle = r.array::<32>()?;
    // WitnessMetadata: loss (f32 bits), tokens_per_sec, bandwidth_per_sec, efficiency (f32 bits).
    r.bytes(4 + 8 + 8 + 4)?;
    r.finish()?;
    let report = WitnessReport { step, index, participant_bloom, broadcast_bloom, broadcast_merkle };
    as_client(accounts, |s, signer, clock| s.witness(signer, &report, clock))
}
