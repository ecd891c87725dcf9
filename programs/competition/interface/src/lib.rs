//! The Competition program's interface: its id, the `Competition`,
//! `Submission` and `Board` layouts, its errors, and every decision it makes
//! (parameter rules, the model a round evaluates, eligibility, the vote
//! checks, finalization: weights, payouts, faults, the reserve) as pure code,
//! so host tests cover them and the program crate only moves accounts and
//! tokens. See ../../README.md.
//!
//! `Competition` (Borsh, after the 8-byte discriminator), PDA ["Competition", id]:
//! ```text
//! bump u8 | id string (1..=32) | authority [32] | board [32]
//! | architecture u8 | max_params u64 | tokenizer_hash [32] | seq_len u32 | precision u8
//! | data_root [32] | data_location string (1..=192) | sequences_per_page u32
//! | epsilon_start_ppm u32 | epsilon_end_ppm u32 | epsilon_decay_slots u64
//! | pages_per_round u16 | temperature_ppm u32 | round_slots u64
//! | reward_mint [32] | token_program [32] | pool [32] | reward_per_round u64
//! | validator_stake u64 | permissioned u8 | quorum u8
//! | created_slot u64 | paused u8 | closed u8
//! | unclaimed u64 | stakes u64 | forfeited u64 | total_paid u64 | total_burned u64
//! ```
//! `Submission`, PDA ["Submission", competition, miner] (sized for the
//! longest repos; zeros after the encoding):
//! ```text
//! bump u8 | competition [32] | miner [32] | index u16
//! | current: commitment [32] | revision [32] | params u64 | slot u64 | repo string (1..=192)
//! | prev: the same (zero, empty repo, until a commit moves current there)
//! ```
//! `Board`: one per competition, a fixed little-endian layout read and
//! written in place (board.rs).
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

pub mod board;
pub mod competition;
pub mod rules;
pub mod submission;

pub use board::*;
pub use competition::*;
pub use submission::*;

use psyche_sdk::token::TokenErrors;
use psyche_sdk::{anchor, base58, define_errors, Address, ProgramError};

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("7AKGYWqtB5jAEBjU17KLdk4djKnYutkz1kmLdkyUvcTP");
/// The Authorizer, whose authorizations admit validators to a permissioned
/// competition (read in place, no CPI).
pub const AUTHORIZER_ID: Address = psyche_authorizer_interface::ID;
/// The Authorizer scope of a validator's admission; the grantor is the
/// competition's authority.
pub const VALIDATE_SCOPE: &[u8] = b"CompetitionValidate";

pub const COMPETITION_SEED: &[u8] = b"Competition";
pub const SUBMISSION_SEED: &[u8] = b"Submission";

pub const COMPETITION_ACCOUNT: [u8; 8] = anchor::account("Competition");
pub const SUBMISSION_ACCOUNT: [u8; 8] = anchor::account("Submission");
pub const BOARD_ACCOUNT: [u8; 8] = anchor::account("Board");

/// A competition's id is its PDA seed: at most 32 bytes.
pub const MAX_ID_LEN: usize = 32;
/// The dataset's location and a model's repo: at most 192 bytes each.
pub const MAX_LOCATION_LEN: usize = 192;
pub const MAX_REPO_LEN: usize = 192;
/// Entries (one per miner) and validators a board holds.
pub const MAX_SUBMISSIONS: usize = 256;
pub const MAX_VALIDATORS: usize = 32;
/// A round's wins fit a u16: an entry wins at most pages_per_round pages
/// against each of the 255 others.
#[allow(clippy::arithmetic_side_effects)] // Note: constants, 65535 / 255.
pub const MAX_PAGES_PER_ROUND: u16 = u16::MAX / (MAX_SUBMISSIONS as u16 - 1);
/// Epsilon is in parts per million of a loss.
pub const PPM: u32 = 1_000_000;
pub const MAX_SEQ_LEN: u32 = 65_536;
/// Softmax temperature bounds, in ppm (0.001 to 100).
pub const MIN_TEMPERATURE_PPM: u32 = 1_000;
pub const MAX_TEMPERATURE_PPM: u32 = 100_000_000;

/// Model architectures (`architecture`).
pub const ARCHITECTURE_GPT2: u8 = 0;
pub const ARCHITECTURE_LLAMA: u8 = 1;
/// Checkpoint precisions (`precision`).
pub const PRECISION_FP32: u8 = 0;
pub const PRECISION_MX8: u8 = 1;

define_errors! {
    pub enum CompetitionError {
        CompetitionAlreadyExists = "A competition with this id already exists",
        InvalidId = "The id must hold 1 to 32 bytes",
        InvalidArchitecture = "Unknown architecture (0 gpt2, 1 llama)",
        InvalidPrecision = "Unknown precision (0 fp32, 1 mx8)",
        InvalidMaxParams = "max_params must be at least 1",
        InvalidSeqLen = "seq_len must be 1 to 65536",
        InvalidSequencesPerPage = "sequences_per_page must be at least 1",
        InvalidDataLocation = "The data location must hold 1 to 192 bytes",
        InvalidEpsilon = "epsilon_start_ppm must be at most 1000000 and epsilon_end_ppm at most epsilon_start_ppm",
        InvalidPagesPerRound = "pages_per_round must be 1 to 257 (a round's wins fit a u16)",
        InvalidTemperature = "temperature_ppm must be 1000 to 100000000",
        InvalidRoundSlots = "round_slots must be at least 1",
        InvalidQuorum = "quorum must be 1 to 32",
        RewardsWithoutPool = "A competition without a reward pool pays nothing and takes no stakes",
        InvalidMint = "The reward mint is not an initialized SPL Token or Token-2022 mint",
        MintNotAllowed = "The reward mint could freeze, move, hook or tax the pool's tokens: a freeze authority or a Token-2022 extension outside the allowed list",
        MintMismatch = "The token account or mint is not the competition's reward mint",
        TokenAccountOwnerMismatch = "The token account is not owned by the expected wallet",
        PoolMismatch = "The pool is not the competition's reward pool",
        AuthorityMismatch = "The signer is not the competition's authority",
        BoardMismatch = "The board is not the competition's",
        EmptyUpdate = "competition_update was given nothing to change",
        CompetitionPaused = "The competition is paused",
        CompetitionClosed = "The competition was closed",
        ModelTooLarge = "The model has more parameters than the competition allows",
        InvalidParams = "A model has at least one parameter",
        InvalidRepo = "The repo must hold 1 to 192 bytes",
        CompetitionFull = "The board holds 256 entries already",
        SubmissionMismatch = "The submission belongs to another competition or miner",
        NothingToTick = "Nothing to do: no eligible entry, no newer slot hash yet, or the round is still within its deadline",
        RoundNotOpen = "The round is not being evaluated (it is seeding, expired or over)",
        WrongRound = "The vote is for another round",
        RoundDeadlinePassed = "The round's deadline has passed: it can only expire",
        NotValidator = "The signer is not an active validator of the competition",
        AlreadyVoted = "The validator already voted in this round",
        BadVote = "The vote does not fit the round: entry count, invalid entries outside the eligible ones, or wins where none can be",
        ValidatorActive = "The validator is active already",
        ValidatorFaulted = "The validator voted against the final result: it can never validate this competition again",
        ValidatorsFull = "The board holds 32 validators already",
        ValidatorLocked = "The validator's vote is in the round being evaluated: leave once it is final or expired",
        NotAuthorized = "The competition is permissioned and the signer holds no authorization to validate it",
        NothingToClaim = "Nothing earned since the last claim",
        NothingToBurn = "No forfeited stake to burn",
        WithdrawExceedsUnallocated = "The amount exceeds the pool's tokens not owed to miners or validators",
        UnclaimedRewardsRemain = "Miners still have rewards to claim",
        StakesRemain = "Validators still hold stakes",
        BurnPending = "Forfeited stakes are still to be burned (stake_burn)",
        MathOverflow = "Arithmetic overflow",
    }
}

/// Every error, in code order (the IDL lists them so).
pub const ERRORS: [CompetitionError; 48] = {
    use CompetitionError::*;
    [
        CompetitionAlreadyExists, InvalidId, InvalidArchitecture, InvalidPrecision, InvalidMaxParams, InvalidSeqLen,
        InvalidSequencesPerPage, InvalidDataLocation, InvalidEpsilon, InvalidPagesPerRound, InvalidTemperature,
        InvalidRoundSlots, InvalidQuorum, RewardsWithoutPool, InvalidMint, MintNotAllowed, MintMismatch,
        TokenAccountOwnerMismatch, PoolMismatch, AuthorityMismatch, BoardMismatch, EmptyUpdate, CompetitionPaused,
        CompetitionClosed, ModelTooLarge, InvalidParams, InvalidRepo, CompetitionFull, SubmissionMismatch, NothingToTick,
        RoundNotOpen, WrongRound, RoundDeadlinePassed, NotValidator, AlreadyVoted, BadVote, ValidatorActive,
        ValidatorFaulted, ValidatorsFull, ValidatorLocked, NotAuthorized, NothingToClaim, NothingToBurn,
        WithdrawExceedsUnallocated, UnclaimedRewardsRemain, StakesRemain, BurnPending, MathOverflow,
    ]
};

/// The token checks fail with the Competition's own errors.
impl TokenErrors for CompetitionError {
    const INVALID_MINT: Self = CompetitionError::InvalidMint;
    const MINT_NOT_ALLOWED: Self = CompetitionError::MintNotAllowed;
    const MINT_MISMATCH: Self = CompetitionError::MintMismatch;
    const OWNER_MISMATCH: Self = CompetitionError::TokenAccountOwnerMismatch;
    fn fail(self) -> ProgramError {
        CompetitionError::fail(self)
    }
}

/// Checked addition for the accounts' sums.
fn add(a: u64, b: u64) -> Result<u64, CompetitionError> {
    a.checked_add(b).ok_or(CompetitionError::MathOverflow)
}

/// Checked subtraction for the accounts' sums.
fn sub(a: u64, b: u64) -> Result<u64, CompetitionError> {
    a.checked_sub(b).ok_or(CompetitionError::MathOverflow)
}

#[cfg(test)]
mod tests;
