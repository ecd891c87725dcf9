//! The Treasurer's interface: its id, the `Run` and `Participant` account
//! layouts, its errors, and the reward arithmetic (what a claim pays, what the
//! run must keep for claims still to come). Pure code: `cargo test` runs it on
//! the host, and the program crate links it for everything it stores.
//!
//! `Run` (Borsh, after the 8-byte discriminator), PDA ["Run", index u64 LE]:
//! ```text
//! bump u8 | index u64 | main_authority [32] | join_authority [32]
//! | coordinator_instance [32] | coordinator_account [32] | collateral_mint [32]
//! | token_program [32] | total_claimed_points u64 | closed u8
//! ```
//! `Participant`, PDA ["Participant", run, user]:
//! ```text
//! bump u8 | run [32] | user [32] | earned_points u64 | slashed_points u64 | claimed_points u64
//! ```
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

use psyche_coordinator_logic::state::{CoordinatorState, RunState};
use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::{anchor, base58, define_errors, Address};

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("GRMnhStRdTw6M1634WCGVgovRDrRsQFAsVHkuxhceYRB");
/// The Coordinator program the Treasurer drives (checked against its IDL by a host test).
pub const COORDINATOR_ID: Address = base58::address("35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
pub const COORDINATOR_ACCOUNT: [u8; 8] = anchor::account("CoordinatorAccount");
pub const COORDINATOR_INSTANCE: [u8; 8] = anchor::account("CoordinatorInstance");

pub const RUN_SEED: &[u8] = b"Run";
pub const PARTICIPANT_SEED: &[u8] = b"Participant";

pub const RUN_ACCOUNT: [u8; 8] = anchor::account("Run");
pub const PARTICIPANT_ACCOUNT: [u8; 8] = anchor::account("Participant");

pub const RUN_SPACE: usize = 8 + 1 + 8 + 32 * 6 + 8 + 1;
pub const PARTICIPANT_SPACE: usize = 8 + 1 + 32 + 32 + 8 * 3;

define_errors! {
    pub enum TreasurerError {
        RunAlreadyExists = "A run already exists at this index",
        RunAuthorityMismatch = "The signer is not this run's main authority",
        CoordinatorMismatch = "The coordinator accounts are not this run's",
        CoordinatorAccountInvalid = "The coordinator account is not a Coordinator run account",
        ParticipantAlreadyExists = "This user already has a participant account for the run",
        ParticipantMismatch = "The participant account belongs to another user or run",
        UserNotInRun = "The user never joined this run",
        MintMismatch = "The token account or mint is not the run's collateral mint",
        InvalidMint = "The collateral mint is not an initialized SPL Token or Token-2022 mint",
        TokenAccountOwnerMismatch = "The token account is not owned by the expected wallet",
        InsufficientCollateral = "The run's token account holds less than the claim",
        RunNotFinished = "The run must be Finished or closed before tokens are withdrawn",
        WithdrawExceedsUnallocated = "The amount exceeds the tokens not owed to participants",
        UnclaimedPointsRemain = "Participants still have points to claim",
        RunClosed = "The run was closed",
        EmptyUpdate = "run_update was given nothing to change",
        MathOverflow = "Arithmetic overflow",
    }
}

/// Every error, in code order (the IDL lists them so).
pub const ERRORS: [TreasurerError; 17] = [
    TreasurerError::RunAlreadyExists,
    TreasurerError::RunAuthorityMismatch,
    TreasurerError::CoordinatorMismatch,
    TreasurerError::CoordinatorAccountInvalid,
    TreasurerError::ParticipantAlreadyExists,
    TreasurerError::ParticipantMismatch,
    TreasurerError::UserNotInRun,
    TreasurerError::MintMismatch,
    TreasurerError::InvalidMint,
    TreasurerError::TokenAccountOwnerMismatch,
    TreasurerError::InsufficientCollateral,
    TreasurerError::RunNotFinished,
    TreasurerError::WithdrawExceedsUnallocated,
    TreasurerError::UnclaimedPointsRemain,
    TreasurerError::RunClosed,
    TreasurerError::EmptyUpdate,
    TreasurerError::MathOverflow,
];

/// A decoded `Run` account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub bump: u8,
    pub index: u64,
    pub main_authority: Address,
    pub join_authority: Address,
    pub coordinator_instance: Address,
    pub coordinator_account: Address,
    pub collateral_mint: Address,
    pub token_program: Address,
    pub total_claimed_points: u64,
    pub closed: bool,
}

impl Run {
    /// Decodes account data, discriminator included.
    pub fn decode(data: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != RUN_ACCOUNT {
            return Err(BorshError::InvalidTag);
        }
        let run = Run {
            bump: r.u8()?,
            index: r.u64()?,
            main_authority: r.address()?,
            join_authority: r.address()?,
            coordinator_instance: r.address()?,
            coordinator_account: r.address()?,
            collateral_mint: r.address()?,
            token_program: r.address()?,
            total_claimed_points: r.u64()?,
            closed: r.bool()?,
        };
        r.finish()?;
        Ok(run)
    }

    /// Writes the account data, discriminator included.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), BorshError> {
        Writer::new(out)
            .bytes(&RUN_ACCOUNT)?
            .u8(self.bump)?
            .u64(self.index)?
            .address(&self.main_authority)?
            .address(&self.join_authority)?
            .address(&self.coordinator_instance)?
            .address(&self.coordinator_account)?
            .address(&self.collateral_mint)?
            .address(&self.token_program)?
            .u64(self.total_claimed_points)?
            .bool(self.closed)?;
        Ok(())
    }
}

/// A decoded `Participant` account. Points move here from the Coordinator at
/// each claim (settle_points), so the coordinator slot can be reused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    pub bump: u8,
    pub run: Address,
    pub user: Address,
    pub earned_points: u64,
    pub slashed_points: u64,
    pub claimed_points: u64,
}

impl Participant {
    pub fn decode(data: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != PARTICIPANT_ACCOUNT {
            return Err(BorshError::InvalidTag);
        }
        let p = Participant {
            bump: r.u8()?,
            run: r.address()?,
            user: r.address()?,
            earned_points: r.u64()?,
            slashed_points: r.u64()?,
            claimed_points: r.u64()?,
        };
        r.finish()?;
        Ok(p)
    }

    pub fn encode(&self, out: &mut [u8]) -> Result<(), BorshError> {
        Writer::new(out)
            .bytes(&PARTICIPANT_ACCOUNT)?
            .u8(self.bump)?
            .address(&self.run)?
            .address(&self.user)?
            .u64(self.earned_points)?
            .u64(self.slashed_points)?
            .u64(self.claimed_points)?;
        Ok(())
    }

    /// Adds points settled from the Coordinator and returns what the claim
    /// pays: earned - slashed - claimed, or nothing when slashes exceed the
    /// rest (the debt stays against future points). `claimed_points` grows by
    /// the payment, so a second claim pays nothing and the total paid never
    /// exceeds earned - slashed.
    pub fn settle_and_claim(&mut self, earned: u64, slashed: u64) -> Result<u64, TreasurerError> {
        self.earned_points = self.earned_points.checked_add(earned).ok_or(TreasurerError::MathOverflow)?;
        self.slashed_points = self.slashed_points.checked_add(slashed).ok_or(TreasurerError::MathOverflow)?;
        let owed = self
            .earned_points
            .checked_sub(self.slashed_points)
            .and_then(|net| net.checked_sub(self.claimed_points))
            .unwrap_or(0);
        self.claimed_points = self.claimed_points.checked_add(owed).ok_or(TreasurerError::MathOverflow)?;
        Ok(owed)
    }
}

/// The points of `user` still held by the Coordinator: (earned, slashed), or
/// None when the user never joined.
pub fn client_points(state: &CoordinatorState, user: &Address) -> Option<(u64, u64)> {
    state
        .clients
        .iter()
        .find(|c| c.occupied != 0 && &c.signer == user.as_array())
        .map(|c| (c.earned, c.slashed))
}

/// Tokens the run must keep for claims still to come: every client's
/// unsettled earned - slashed. Settled points were paid in full when settled
/// (a claim pays everything owed), and a participant's leftover slash debt can
/// only lower a future payment, so this bounds what claims can still take.
pub fn reserved_points(state: &CoordinatorState) -> Result<u64, TreasurerError> {
    state
        .clients
        .iter()
        .filter(|c| c.occupied != 0)
        .try_fold(0u64, |acc, c| acc.checked_add(c.earned.saturating_sub(c.slashed)).ok_or(TreasurerError::MathOverflow))
}

/// Whether the run's tokens not reserved for claims may be withdrawn.
pub fn withdrawable(state: &CoordinatorState) -> bool {
    matches!(RunState::from_u8(state.run_state), Some(RunState::Finished))
}

#[cfg(test)]
mod tests;
