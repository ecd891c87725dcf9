//! The arguments of each instruction and their one decoder: the program's
//! processors decode with it and so does the host simulator
//! (programs/coordinator/sim), through [`crate::instruction::Instruction`].
//! A Borsh failure is Anchor's InstructionDidNotDeserialize.
//!
//! The layout structs of the logic crate travel in their C layout, which is
//! also their Borsh encoding (no implicit padding, little-endian integers), so
//! they are read with one copy. Processors decode where their checks always
//! did (init_coordinator, join_run and free_coordinator after the account
//! count, the others first), so errors come in the same order.

use core::mem::{size_of, MaybeUninit};

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::machine::{
    CheckpointRepo, CommitArgs, DisputeAnswer, DisputeVote, EvalReport, HealthCheck, PromptReport, Update, VerifyArgs,
    WitnessReport,
};
use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata, REVISION_LEN, URL_LEN};
use psyche_sdk::borsh::{BorshError, Reader};
use psyche_sdk::{Address, ProgramError};

use crate::run::fail;

/// Instruction arguments (the Borsh bytes after the discriminator) decoded,
/// all of them: trailing bytes are an error.
pub trait Decode<'a>: Sized {
    fn decode(args: &'a [u8]) -> Result<Self, ProgramError>;
}

/// `InitCoordinatorParams`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitCoordinatorParams<'a> {
    pub main_authority: Address,
    pub join_authority: Address,
    /// UTF-8; its length (1..=32) is checked after the accounts (InvalidRunId).
    pub run_id: &'a [u8],
    /// UTF-8; the logic checks its length.
    pub client_version: &'a [u8],
}

impl<'a> Decode<'a> for InitCoordinatorParams<'a> {
    fn decode(args: &'a [u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let main_authority = Address::new_from_array(bytes32(&mut r)?);
        let join_authority = Address::new_from_array(bytes32(&mut r)?);
        let run_id = r.string()?.as_bytes();
        let client_version = r.string()?.as_bytes();
        r.finish()?;
        Ok(Self { main_authority, join_authority, run_id, client_version })
    }
}

/// `UpdateParams`: what the authority replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateParams {
    pub metadata: Option<RunMetadata>,
    pub config: Option<CoordinatorConfig>,
    pub model: Option<Model>,
    pub progress: Option<Progress>,
}

impl UpdateParams {
    /// The logic's view of these arguments.
    pub fn update(&self) -> Update<'_> {
        Update {
            metadata: self.metadata.as_ref(),
            config: self.config.as_ref(),
            model: self.model.as_ref(),
            progress: self.progress.as_ref(),
        }
    }
}

impl Decode<'_> for UpdateParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let metadata = option_pod(&mut r)?;
        let config = option_pod(&mut r)?;
        let model = option_pod(&mut r)?;
        let progress = option_pod(&mut r)?;
        r.finish()?;
        Ok(Self { metadata, config, model, progress })
    }
}

/// `UpdateClientVersionParams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateClientVersionParams<'a> {
    /// UTF-8; the logic checks its length.
    pub client_version: &'a [u8],
}

impl<'a> Decode<'a> for UpdateClientVersionParams<'a> {
    fn decode(args: &'a [u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let client_version = r.string()?.as_bytes();
        r.finish()?;
        Ok(Self { client_version })
    }
}

/// `SetFutureEpochRatesParams`: None keeps a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetFutureEpochRatesParams {
    pub earning_rate_total_shared: Option<u64>,
    pub slashing_rate_per_client: Option<u64>,
}

impl Decode<'_> for SetFutureEpochRatesParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let earning_rate_total_shared = option_u64(&mut r)?;
        let slashing_rate_per_client = option_u64(&mut r)?;
        r.finish()?;
        Ok(Self { earning_rate_total_shared, slashing_rate_per_client })
    }
}

/// `SetPausedParams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetPausedParams {
    pub paused: bool,
}

impl Decode<'_> for SetPausedParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let paused = r.bool()?;
        r.finish()?;
        Ok(Self { paused })
    }
}

/// `JoinRunParams`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRunParams {
    /// Must be the signing user (SignerMismatch, checked after the accounts).
    pub signer: Address,
    pub p2p_identity: [u8; 32],
}

impl Decode<'_> for JoinRunParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let signer = Address::new_from_array(bytes32(&mut r)?);
        let p2p_identity = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { signer, p2p_identity })
    }
}

/// `SettlePointsParams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettlePointsParams {
    pub user: [u8; 32],
}

impl Decode<'_> for SettlePointsParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let user = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { user })
    }
}

/// `TakeBurnedParams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakeBurnedParams {
    pub user: [u8; 32],
}

impl Decode<'_> for TakeBurnedParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let user = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { user })
    }
}

/// WitnessMetadata: loss (f32), tokens_per_sec (u64), bandwidth_per_sec (u64),
/// efficiency (f32).
const WITNESS_METADATA_LEN: usize = 4 + 8 + 8 + 4;

/// `WitnessParams`; the metadata (loss, throughput) is for indexers reading
/// the transaction and is skipped.
impl Decode<'_> for WitnessReport {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let index = r.u16()?;
        let participant_bloom = pod(&mut r)?;
        let broadcast_bloom = pod(&mut r)?;
        let broadcast_merkle = bytes32(&mut r)?;
        r.bytes(WITNESS_METADATA_LEN)?;
        r.finish()?;
        Ok(Self { step, index, participant_bloom, broadcast_bloom, broadcast_merkle })
    }
}

/// `HealthCheckParams`.
impl Decode<'_> for HealthCheck {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let index = r.u16()?;
        let accused = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { step, index, accused })
    }
}

/// `CommitParams`. `fresh` is a u8 (the logic refuses values above 1).
impl Decode<'_> for CommitArgs {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let index = r.u16()?;
        let payload = bytes32(&mut r)?;
        let state_before = bytes32(&mut r)?;
        let state_after = bytes32(&mut r)?;
        let fresh = r.u8()?;
        r.finish()?;
        Ok(Self { step, index, payload, state_before, state_after, fresh })
    }
}

/// `VerifyParams`.
impl Decode<'_> for VerifyArgs {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let verifier_index = r.u16()?;
        let index = r.u16()?;
        let verdict = r.u8()?;
        let claimed_payload = bytes32(&mut r)?;
        let claimed_after = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { step, verifier_index, index, verdict, claimed_payload, claimed_after })
    }
}

/// `AnswerDisputeParams`.
impl Decode<'_> for DisputeAnswer {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let id = r.u64()?;
        let rerun_payload = bytes32(&mut r)?;
        let rerun_after = bytes32(&mut r)?;
        r.finish()?;
        Ok(Self { id, rerun_payload, rerun_after })
    }
}

/// `JudgeDisputeParams`.
impl Decode<'_> for DisputeVote {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let id = r.u64()?;
        let vote = r.u8()?;
        r.finish()?;
        Ok(Self { id, vote })
    }
}

/// `CheckpointParams`: a repo or revision longer than its field is
/// InvalidCheckpoint.
impl Decode<'_> for CheckpointRepo {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let repo = r.string()?;
        let revision = r.string()?;
        r.finish()?;
        let mut out = Self { repo: [0; URL_LEN], revision: [0; REVISION_LEN] };
        if !fill(&mut out.repo, repo.as_bytes()) || !fill(&mut out.revision, revision.as_bytes()) {
            return Err(fail(CoordinatorError::InvalidCheckpoint));
        }
        Ok(out)
    }
}

/// `ReportEvalParams`: the scores are f32 in the IDL, read as their bits.
/// The task string is read as bytes, so that its one rule (the logic's
/// EvalReport) also covers bad UTF-8.
impl<'a> Decode<'a> for EvalReport<'a> {
    fn decode(args: &'a [u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let task = r.byte_vec()?;
        let acc = r.u32()?;
        let acc_norm = r.u32()?;
        let count = r.u32()?;
        r.finish()?;
        Ok(Self { step, task, acc, acc_norm, count })
    }
}

/// `ReportPromptParams`: the token ids (a Vec<u32>) are borrowed as their
/// little-endian bytes; the logic's PromptReport checks their count and range.
impl<'a> Decode<'a> for PromptReport<'a> {
    fn decode(args: &'a [u8]) -> Result<Self, ProgramError> {
        let mut r = Reader::new(args);
        let step = r.u32()?;
        let prompt = r.u16()?;
        let n = r.vec_len(4)?;
        // Note: vec_len checked that n * 4 bytes follow, so it does not overflow.
        #[allow(clippy::arithmetic_side_effects)]
        let (tokens, _) = r.bytes(n * 4)?.as_chunks::<4>();
        r.finish()?;
        Ok(Self { step, prompt, tokens })
    }
}

/// The arguments of leave_run, tick, warmup_witness and free_coordinator: none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoParams;

impl Decode<'_> for NoParams {
    fn decode(args: &[u8]) -> Result<Self, ProgramError> {
        Reader::new(args).finish()?;
        Ok(Self)
    }
}

/// # Safety
/// Implementors are `#[repr(C)]` structs of integers and byte arrays without
/// implicit padding (the logic crate tests this), so every bit pattern of
/// `size_of::<Self>()` bytes is a valid value.
unsafe trait Pod: Copy {}

// SAFETY: see the trait; layouts checked by psyche-coordinator-logic's state tests.
unsafe impl Pod for RunMetadata {}
// SAFETY: as above.
unsafe impl Pod for CoordinatorConfig {}
// SAFETY: as above.
unsafe impl Pod for Model {}
// SAFETY: as above.
unsafe impl Pod for Progress {}
// SAFETY: as above.
unsafe impl Pod for Bloom {}

/// Reads a layout struct.
fn pod<T: Pod>(r: &mut Reader<'_>) -> Result<T, BorshError> {
    let b = r.bytes(size_of::<T>())?;
    let mut out = MaybeUninit::<T>::uninit();
    if size_of::<T>() <= 128 && size_of::<T>().is_multiple_of(8) {
        // Small structs (config, progress) word by word: llc expands a small
        // unaligned copy byte by byte, while the toolchain marks integer loads
        // aligned (programs/README.md). Larger ones go to sol_memcpy_.
        let dst = out.as_mut_ptr() as *mut u64;
        for (i, w) in b.chunks_exact(8).enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            // SAFETY: i < size_of::<T>() / 8 (b holds size_of::<T>() bytes),
            // so the write stays inside `out`; it needs no alignment.
            unsafe { dst.add(i).write_unaligned(u64::from_ne_bytes(word)) };
        }
    } else {
        // SAFETY: `b` holds size_of::<T>() bytes; instruction data has no
        // alignment, hence an untyped copy.
        unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), out.as_mut_ptr() as *mut u8, size_of::<T>()) };
    }
    // SAFETY: every byte of `out` was written, and any bit pattern is a valid T (Pod).
    Ok(unsafe { out.assume_init() })
}

/// Reads an Option of a layout struct.
fn option_pod<T: Pod>(r: &mut Reader<'_>) -> Result<Option<T>, BorshError> {
    if r.option_tag()? {
        Ok(Some(pod(r)?))
    } else {
        Ok(None)
    }
}

/// Reads a 32-byte array (key, hash) as four 8-byte words: the toolchain
/// marks integer loads aligned (programs/README.md), so these are four loads
/// and stores, where a byte-array copy from unaligned instruction data
/// compiles to 32 byte loads and stores.
fn bytes32(r: &mut Reader<'_>) -> Result<[u8; 32], BorshError> {
    let mut out = [0u8; 32];
    for word in out.chunks_exact_mut(8) {
        word.copy_from_slice(&r.u64()?.to_le_bytes());
    }
    Ok(out)
}

/// Reads an Option<u64>.
fn option_u64(r: &mut Reader<'_>) -> Result<Option<u64>, BorshError> {
    if r.option_tag()? {
        Ok(Some(r.u64()?))
    } else {
        Ok(None)
    }
}

/// Copies a string into the start of a zero-filled field; false if it does
/// not fit.
fn fill(field: &mut [u8], s: &[u8]) -> bool {
    match field.get_mut(..s.len()) {
        Some(head) => {
            head.copy_from_slice(s);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn pods_read_their_borsh_encoding() {
        let mut data = [0u8; 1 + 16];
        data[0] = 1;
        data[1..5].copy_from_slice(&7u32.to_le_bytes());
        data[5..9].copy_from_slice(&9u32.to_le_bytes());
        data[9..17].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        let mut r = Reader::new(&data);
        let p: Option<Progress> = option_pod(&mut r).unwrap();
        assert_eq!(p, Some(Progress { epoch: 7, step: 9, data_index: u64::MAX - 1 }));
        assert!(r.finish().is_ok());
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&[0])).unwrap(), None);
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&[2])), Err(BorshError::InvalidTag));
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&data[..16])), Err(BorshError::UnexpectedEnd));
    }

    #[test]
    fn strings_fill_their_field_or_fail() {
        let mut field = [0u8; 4];
        assert!(fill(&mut field, b"ab"));
        assert_eq!(field, *b"ab\0\0");
        let mut field = [0u8; 2];
        assert!(fill(&mut field, b"ab"));
        assert_eq!(field, *b"ab");
        assert!(!fill(&mut field, b"abc"));
        assert_eq!(option_u64(&mut Reader::new(&[1, 5, 0, 0, 0, 0, 0, 0, 0])), Ok(Some(5)));
    }

    /// Both copy paths of `pod` (word by word up to 128 bytes, sol_memcpy_
    /// above) and `bytes32` reproduce their input bytes.
    #[test]
    fn pods_and_keys_copy_every_byte() {
        fn check<T: Pod>() {
            let data: std::vec::Vec<u8> = (0..size_of::<T>()).map(|i| (i * 7 + 3) as u8).collect();
            let mut r = Reader::new(&data);
            let v: T = pod(&mut r).unwrap();
            assert!(r.finish().is_ok());
            // SAFETY: viewing a Pod (no padding) as its bytes.
            let bytes = unsafe { core::slice::from_raw_parts(&v as *const T as *const u8, size_of::<T>()) };
            assert_eq!(bytes, &data[..]);
            assert_eq!(pod::<T>(&mut Reader::new(&data[1..])).err(), Some(BorshError::UnexpectedEnd));
        }
        check::<Progress>();
        check::<CoordinatorConfig>();
        check::<Bloom>();
        check::<RunMetadata>();
        check::<Model>();
        let key: std::vec::Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37)).collect();
        assert_eq!(bytes32(&mut Reader::new(&key)).unwrap()[..], key[..]);
        for n in 0..32 {
            assert_eq!(bytes32(&mut Reader::new(&key[..n])), Err(BorshError::UnexpectedEnd));
        }
    }
}
