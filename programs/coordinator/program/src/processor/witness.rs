use psyche_coordinator_logic::machine::WitnessReport;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::pod;

/// WitnessMetadata: loss (f32), tokens_per_sec (u64), bandwidth_per_sec (u64),
/// efficiency (f32).
const WITNESS_METADATA_LEN: usize = 4 + 8 + 8 + 4;

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
    r.bytes(WITNESS_METADATA_LEN)?;
    r.finish()?;
    let report = WitnessReport { step, index, participant_bloom, broadcast_bloom, broadcast_merkle };
    as_client(accounts, |s, signer, clock| s.witness(signer, &report, clock))
}
