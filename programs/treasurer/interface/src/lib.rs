//! The Treasurer's interface: its id, the `Run` and `Participant` account
//! layouts, its errors, and the reward and deposit arithmetic (what a claim
//! pays, what burn_forfeited burns, when a deposit is returned, what the run
//! must keep). Pure code: `cargo test` runs it on the host, and the program
//! crate links it for everything it stores and decides.
//!
//! `Run` (Borsh, after the 8-byte discriminator), PDA ["Run", index u64 LE]:
//! ```text
//! bump u8 | index u64 | main_authority [32] | join_authority [32]
//! | coordinator_instance [32] | coordinator_account [32] | collateral_mint [32]
//! | token_program [32] | total_claimed_points u64 | closed u8
//! | join_deposit u64 | total_deposits u64 | total_burned u64
//! | unclaimed_settled_points u64
//! ```
//! `Participant`, PDA ["Participant", run, user]:
//! ```text
//! bump u8 | run [32] | user [32] | earned_points u64 | slashed_points u64 | claimed_points u64
//! | deposit u64 | deposit_epoch u32 | deposited u8 | has_fault u8 | last_fault_epoch u32
//! | burned_points u64 | burned_deposit u64
//! ```
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

use psyche_authorizer_interface::Authorization;
use psyche_coordinator_logic::state::{ClientSlot, CoordinatorState, RunState};
use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::token::{TokenErrors, MINT_LEN};
use psyche_sdk::{anchor, base58, define_errors, Address, ProgramError};

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("GRMnhStRdTw6M1634WCGVgovRDrRsQFAsVHkuxhceYRB");
/// The Coordinator program the Treasurer drives (checked against its IDL by a host test).
pub const COORDINATOR_ID: Address = base58::address("35x8S52DBwBD26VfaLGro8BRpuyg8LVYFeKzCt918Frz");
pub const COORDINATOR_ACCOUNT: [u8; 8] = anchor::account("CoordinatorAccount");
pub const COORDINATOR_INSTANCE: [u8; 8] = anchor::account("CoordinatorInstance");
/// The Authorizer program, whose join authorizations a deposit grants (the
/// Coordinator checks joins against the same program).
pub const AUTHORIZER_ID: Address = psyche_authorizer_interface::ID;
pub const AUTHORIZATION_SEED: &[u8] = psyche_authorizer_interface::AUTHORIZATION_SEED;
/// The Authorizer scope the Coordinator's join_run checks.
pub const JOIN_RUN_SCOPE: &[u8] = b"CoordinatorJoinRun";

pub const RUN_SEED: &[u8] = b"Run";
pub const PARTICIPANT_SEED: &[u8] = b"Participant";

pub const RUN_ACCOUNT: [u8; 8] = anchor::account("Run");
pub const PARTICIPANT_ACCOUNT: [u8; 8] = anchor::account("Participant");

pub const RUN_SPACE: usize = 8 + 1 + 8 + 32 * 6 + 8 + 1 + 8 * 4;
pub const PARTICIPANT_SPACE: usize = 8 + 1 + 32 + 32 + 8 * 3 + 8 + 4 + 1 + 1 + 4 + 8 + 8;

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
        InsufficientCollateral = "The run's token account, deposits aside, holds less than the claim",
        RunNotFinished = "The run must be Finished or closed before tokens are withdrawn",
        WithdrawExceedsUnallocated = "The amount exceeds the tokens not owed to participants",
        UnclaimedPointsRemain = "Participants still have points to claim",
        RunClosed = "The run was closed",
        EmptyUpdate = "run_update was given nothing to change",
        MathOverflow = "Arithmetic overflow",
        UnvestedPointsRemain = "Participants still have unvested points",
        BurnPending = "Participants still have burned points: burn them first (burn_forfeited)",
        DepositsRemain = "Participants still hold deposits: return or burn them first",
        JoinNotThroughTreasurer = "The run's join authority is not the Treasurer run, so a deposit cannot gate joins",
        DepositMismatch = "The amount differs from the run's join deposit",
        DepositAlreadyMade = "This user already holds a deposit in the run",
        NoDeposit = "This user holds no deposit in the run",
        DepositLocked = "The user is pending, in the current epoch or named by an open dispute",
        DepositForfeited = "The user was found at fault since its deposit: the deposit is burned, not returned",
        FaultThisEpoch = "The user was found at fault in this epoch: deposit in a later one",
        RunFinished = "The run is Finished: nobody can join it any more",
        NotDepositor = "Only the user, or the run authority once the run is Finished, may return a deposit",
        AuthorizationMismatch = "The authorization is not the user's join authorization from this run",
        NothingToBurn = "The user has no burned points and no forfeited deposit",
        BurnExceedsBalance = "The run's token account, deposits aside, holds fewer tokens than the points to burn",
        MintNotAllowed = "The collateral mint could freeze, move, hook or tax the run's tokens: a freeze authority or a Token-2022 extension outside the allowed list",
        NothingToSettle = "The user's Coordinator slot holds no earned or slashed points to settle",
        UnfundableRate = "One epoch at this earning rate needs more tokens than the mint's supply, which can never grow (no mint authority)",
        ZeroSlashingRate = "A run that asks for or holds join deposits needs a slashing rate above 0: a fault that slashes nothing can leave no trace, and its deposit could come back",
    }
}

/// Every error, in code order (the IDL lists them so).
pub const ERRORS: [TreasurerError; 36] = [
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
    TreasurerError::UnvestedPointsRemain,
    TreasurerError::BurnPending,
    TreasurerError::DepositsRemain,
    TreasurerError::JoinNotThroughTreasurer,
    TreasurerError::DepositMismatch,
    TreasurerError::DepositAlreadyMade,
    TreasurerError::NoDeposit,
    TreasurerError::DepositLocked,
    TreasurerError::DepositForfeited,
    TreasurerError::FaultThisEpoch,
    TreasurerError::RunFinished,
    TreasurerError::NotDepositor,
    TreasurerError::AuthorizationMismatch,
    TreasurerError::NothingToBurn,
    TreasurerError::BurnExceedsBalance,
    TreasurerError::MintNotAllowed,
    TreasurerError::NothingToSettle,
    TreasurerError::UnfundableRate,
    TreasurerError::ZeroSlashingRate,
];

/// The token checks fail with the Treasurer's own errors.
impl TokenErrors for TreasurerError {
    const INVALID_MINT: Self = TreasurerError::InvalidMint;
    const MINT_NOT_ALLOWED: Self = TreasurerError::MintNotAllowed;
    const MINT_MISMATCH: Self = TreasurerError::MintMismatch;
    const OWNER_MISMATCH: Self = TreasurerError::TokenAccountOwnerMismatch;
    fn fail(self) -> ProgramError {
        TreasurerError::fail(self)
    }
}

/// A mint's supply, and whether it is fixed for good (no mint authority:
/// nobody can ever mint more; burns can only lower it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MintSupply {
    pub supply: u64,
    pub fixed: bool,
}

/// Reads the supply and the mint authority (a u32 COption tag at 0, the key
/// after it) of an initialized mint's data (SPL Token or Token-2022); None
/// when it is not one.
pub fn mint_supply(data: &[u8]) -> Option<MintSupply> {
    if data.len() < MINT_LEN || data[45] != 1 {
        return None;
    }
    let fixed = match data[0..4] {
        [0, 0, 0, 0] => true,
        [1, 0, 0, 0] => false,
        _ => return None,
    };
    let mut supply = [0u8; 8];
    supply.copy_from_slice(&data[36..44]);
    Some(MintSupply { supply: u64::from_le_bytes(supply), fixed })
}

/// run_update refuses an epoch earning rate that no funding can ever cover:
/// one epoch pays `rate` points (1 point = 1 base unit), and a mint without a
/// mint authority can never hold more than its supply now. A mint with an
/// authority may still mint what a rate needs, so any rate passes there
/// (treasurer-json-dump-run says when the supply cannot cover an epoch now).
pub fn check_earning_rate(mint: &[u8], rate: u64) -> Result<(), TreasurerError> {
    let m = mint_supply(mint).ok_or(TreasurerError::InvalidMint)?;
    if m.fixed && rate > m.supply {
        return Err(TreasurerError::UnfundableRate);
    }
    Ok(())
}

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
    /// Tokens (base units) a user deposits to be allowed to join (0: none).
    /// Enforced only when the run's join authority is the Run itself.
    pub join_deposit: u64,
    /// Deposits held for users now (part of the token account's balance).
    pub total_deposits: u64,
    /// Tokens burned by burn_forfeited: burned points and forfeited deposits.
    pub total_burned: u64,
    /// Points settled into Participant records (participant_settle) and not
    /// claimed yet: the sum over participants of `Participant::owed`. They
    /// left the Coordinator's slots, so the run reserves them here.
    pub unclaimed_settled_points: u64,
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
            join_deposit: r.u64()?,
            total_deposits: r.u64()?,
            total_burned: r.u64()?,
            unclaimed_settled_points: r.u64()?,
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
            .bool(self.closed)?
            .u64(self.join_deposit)?
            .u64(self.total_deposits)?
            .u64(self.total_burned)?
            .u64(self.unclaimed_settled_points)?;
        Ok(())
    }

    /// participant_settle: moves `earned` and `slashed` points from the
    /// user's Coordinator slot into its record `p` and pays nothing; returns
    /// what the user can now claim from the record (`p.owed()`). The run
    /// reserves the record's change in `owed` (it may fall, when a slash
    /// outweighs new points), so a later claim pays exactly what it would
    /// have paid without this settle. Nothing changes on an error.
    pub fn settle(&mut self, p: &mut Participant, earned: u64, slashed: u64) -> Result<u64, TreasurerError> {
        if earned == 0 && slashed == 0 {
            return Err(TreasurerError::NothingToSettle);
        }
        let mut q = p.clone();
        q.add_points(earned, slashed)?;
        let owed = q.owed();
        let unclaimed = self
            .unclaimed_settled_points
            .checked_sub(p.owed())
            .and_then(|u| u.checked_add(owed))
            .ok_or(TreasurerError::MathOverflow)?;
        *p = q;
        self.unclaimed_settled_points = unclaimed;
        Ok(owed)
    }

    /// participant_claim: settles `earned` and `slashed` into `p` and returns
    /// what the claim pays: earned - slashed - claimed over the record, or
    /// nothing when slashes exceed the rest (the debt stays against future
    /// points). `claimed_points` grows by the payment, so a second claim pays
    /// nothing and the total paid never exceeds earned - slashed; what an
    /// earlier participant_settle reserved for the record is released.
    /// Nothing changes on an error.
    pub fn claim(&mut self, p: &mut Participant, earned: u64, slashed: u64) -> Result<u64, TreasurerError> {
        let mut q = p.clone();
        q.add_points(earned, slashed)?;
        let owed = q.owed();
        q.claimed_points = q.claimed_points.checked_add(owed).ok_or(TreasurerError::MathOverflow)?;
        let unclaimed = self.unclaimed_settled_points.checked_sub(p.owed()).ok_or(TreasurerError::MathOverflow)?;
        let claimed = self.total_claimed_points.checked_add(owed).ok_or(TreasurerError::MathOverflow)?;
        *p = q;
        self.unclaimed_settled_points = unclaimed;
        self.total_claimed_points = claimed;
        Ok(owed)
    }

    /// run_update's rule for the slashing rate of the coming epochs
    /// (`slashing`, the Coordinator's future rate once the update is done):
    /// above 0 while the run asks for a deposit or holds deposits, so that
    /// every epoch a depositor can train in slashes a fault (see
    /// `check_deposit_slashing`). Checked whenever an update sets the
    /// slashing rate or the join deposit (after `set_join_deposit`).
    pub fn check_slashing_rate(&self, slashing: u64) -> Result<(), TreasurerError> {
        if slashing == 0 && (self.join_deposit > 0 || self.total_deposits > 0) {
            return Err(TreasurerError::ZeroSlashingRate);
        }
        Ok(())
    }

    /// Sets the join deposit of the run at `address`: only a run whose join
    /// authority is the Run itself can enforce one (a deposit is what grants
    /// the join authorization).
    pub fn set_join_deposit(&mut self, address: &Address, amount: u64) -> Result<(), TreasurerError> {
        if amount > 0 && &self.join_authority != address {
            return Err(TreasurerError::JoinNotThroughTreasurer);
        }
        self.join_deposit = amount;
        Ok(())
    }
}

/// A decoded `Participant` account. Points move here from the Coordinator at
/// each claim and each participant_settle (settle_points), so the
/// coordinator slot can be reused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    pub bump: u8,
    pub run: Address,
    pub user: Address,
    pub earned_points: u64,
    pub slashed_points: u64,
    pub claimed_points: u64,
    /// Tokens held for the user while it may join (see `make_deposit`).
    pub deposit: u64,
    /// The Coordinator epoch in which the deposit was made.
    pub deposit_epoch: u32,
    /// A deposit is held (possibly of 0 tokens) and the user's join
    /// authorization is active.
    pub deposited: bool,
    /// The latest fault of the user's slot seen by a claim, a deposit or a
    /// burn (kept here because the Coordinator forgets it when the slot is
    /// reused).
    pub has_fault: bool,
    pub last_fault_epoch: u32,
    /// Burned points and forfeited deposit tokens burned for this user.
    pub burned_points: u64,
    pub burned_deposit: u64,
}

impl Participant {
    /// A new record, nothing held.
    pub fn new(bump: u8, run: Address, user: Address) -> Self {
        Participant {
            bump,
            run,
            user,
            earned_points: 0,
            slashed_points: 0,
            claimed_points: 0,
            deposit: 0,
            deposit_epoch: 0,
            deposited: false,
            has_fault: false,
            last_fault_epoch: 0,
            burned_points: 0,
            burned_deposit: 0,
        }
    }

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
            deposit: r.u64()?,
            deposit_epoch: r.u32()?,
            deposited: r.bool()?,
            has_fault: r.bool()?,
            last_fault_epoch: r.u32()?,
            burned_points: r.u64()?,
            burned_deposit: r.u64()?,
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
            .u64(self.claimed_points)?
            .u64(self.deposit)?
            .u32(self.deposit_epoch)?
            .bool(self.deposited)?
            .bool(self.has_fault)?
            .u32(self.last_fault_epoch)?
            .u64(self.burned_points)?
            .u64(self.burned_deposit)?;
        Ok(())
    }

    /// What a claim would pay out of the record alone: earned - slashed -
    /// claimed, or nothing while slashes exceed the rest.
    pub fn owed(&self) -> u64 {
        self.earned_points
            .checked_sub(self.slashed_points)
            .and_then(|net| net.checked_sub(self.claimed_points))
            .unwrap_or(0)
    }

    /// Adds points settled from the Coordinator (see `Run::settle`, `Run::claim`).
    fn add_points(&mut self, earned: u64, slashed: u64) -> Result<(), TreasurerError> {
        self.earned_points = self.earned_points.checked_add(earned).ok_or(TreasurerError::MathOverflow)?;
        self.slashed_points = self.slashed_points.checked_add(slashed).ok_or(TreasurerError::MathOverflow)?;
        Ok(())
    }

    /// The (earned, slashed) points a claim settles from the user's slot:
    /// its points, or none once it has no slot (a participant_settle freed
    /// it and another client may hold it now), which is fine for a user
    /// whose record holds points; a user with neither never joined the run
    /// (`UserNotInRun`).
    pub fn claim_points(&self, slot: Option<&ClientSlot>) -> Result<(u64, u64), TreasurerError> {
        match slot {
            Some(c) => Ok((c.earned, c.slashed)),
            None if self.earned_points != 0 || self.slashed_points != 0 => Ok((0, 0)),
            None => Err(TreasurerError::UserNotInRun),
        }
    }

    /// Records the latest fault `slot` shows, so that it outlives the slot.
    pub fn observe_fault(&mut self, slot: Option<&ClientSlot>) {
        if let Some(c) = slot.filter(|c| c.has_fault != 0) {
            if !self.has_fault || c.last_fault_epoch > self.last_fault_epoch {
                self.has_fault = true;
                self.last_fault_epoch = c.last_fault_epoch;
            }
        }
    }

    /// A fault at or after `epoch` is known, here or in `slot`.
    pub fn fault_since(&self, slot: Option<&ClientSlot>, epoch: u32) -> bool {
        (self.has_fault && self.last_fault_epoch >= epoch)
            || slot.is_some_and(|c| c.has_fault != 0 && c.last_fault_epoch >= epoch)
    }

    /// The held deposit is forfeited: the user was found at fault in the
    /// epoch of the deposit or later (a fault settled after the deposit in
    /// the same epoch counts; one before it was refused by `make_deposit`).
    pub fn deposit_forfeited(&self, slot: Option<&ClientSlot>) -> bool {
        self.deposited && self.fault_since(slot, self.deposit_epoch)
    }

    /// Checks a deposit of `amount` into `run` (at `run_address`) while the
    /// Coordinator run is where `coordinator` says, and records it with the
    /// current epoch. `slot` is the user's client slot, if any. A deposit
    /// above 0 needs a fault to slash (`check_deposit_slashing`).
    // Six arguments: inlined for the BPF subset (programs/README.md).
    #[inline(always)]
    pub fn make_deposit(
        &mut self,
        run: &Run,
        run_address: &Address,
        slot: Option<&ClientSlot>,
        coordinator: RunPhase,
        amount: u64,
    ) -> Result<(), TreasurerError> {
        if &run.join_authority != run_address {
            return Err(TreasurerError::JoinNotThroughTreasurer);
        }
        if coordinator.finished {
            return Err(TreasurerError::RunFinished);
        }
        if amount != run.join_deposit {
            return Err(TreasurerError::DepositMismatch);
        }
        if amount > 0 {
            check_deposit_slashing(coordinator, slot)?;
        }
        if self.deposited {
            return Err(TreasurerError::DepositAlreadyMade);
        }
        if self.fault_since(slot, coordinator.epoch) {
            return Err(TreasurerError::FaultThisEpoch);
        }
        self.observe_fault(slot);
        self.deposit = amount;
        self.deposit_epoch = coordinator.epoch;
        self.deposited = true;
        Ok(())
    }

    /// Checks that the held deposit may go back to the user and clears it;
    /// returns its amount. It stays while the user is pending or in the
    /// current epoch (unless the run is Finished) or named by an open
    /// dispute, and is never returned after a fault since the deposit.
    pub fn return_deposit(&mut self, slot: Option<&ClientSlot>, finished: bool) -> Result<u64, TreasurerError> {
        if !self.deposited {
            return Err(TreasurerError::NoDeposit);
        }
        if self.deposit_forfeited(slot) {
            return Err(TreasurerError::DepositForfeited);
        }
        if slot.is_some_and(|c| c.open_disputes != 0 || (!finished && (c.pending != 0 || c.in_epoch != 0))) {
            return Err(TreasurerError::DepositLocked);
        }
        self.observe_fault(slot);
        let amount = self.deposit;
        self.deposit = 0;
        self.deposited = false;
        Ok(amount)
    }

    /// Records what burn_forfeited burned (nothing changes on an error).
    pub fn apply_forfeit(&mut self, f: &Forfeit) -> Result<(), TreasurerError> {
        let points = self.burned_points.checked_add(f.points).ok_or(TreasurerError::MathOverflow)?;
        if f.revoke {
            self.burned_deposit = self.burned_deposit.checked_add(f.deposit).ok_or(TreasurerError::MathOverflow)?;
            self.deposit = 0;
            self.deposited = false;
        }
        self.burned_points = points;
        Ok(())
    }
}

/// Where the Coordinator run is, as deposits see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunPhase {
    pub epoch: u32,
    pub finished: bool,
    /// What a fault slashes now (the Coordinator's `current_rates`, fixed
    /// when the epoch under way formed).
    pub current_slashing: u64,
    /// What a fault slashes in every epoch that forms from now on
    /// (`future_rates`, copied into the current rates as an epoch forms).
    pub future_slashing: u64,
}

impl RunPhase {
    pub fn of(state: &CoordinatorState) -> Self {
        RunPhase {
            epoch: state.progress.epoch,
            finished: withdrawable(state),
            current_slashing: state.current_rates.slashing_rate_per_client,
            future_slashing: state.future_rates.slashing_rate_per_client,
        }
    }
}

/// A deposit above 0 is at stake only where a fault slashes (audit finding
/// F5): a fault that slashes nothing, on a member whose slot holds no
/// points, leaves the slot free once the member is out of the epoch, and
/// another client can take the slot (forgetting the fault) before a claim,
/// a settle or burn_forfeited records it; the deposit would then come back.
/// A slashed point holds the slot until a claim or settle, and both record
/// the fault. So a deposit needs the rate of every epoch that forms from now
/// on above 0 (`Run::check_slashing_rate` keeps it so while deposits are
/// asked or held), and the current rate above 0 when the user can still be
/// found at fault at it: while in the epoch under way or named by an open
/// dispute. A user joining now trains from the next epoch on.
pub fn check_deposit_slashing(phase: RunPhase, slot: Option<&ClientSlot>) -> Result<(), TreasurerError> {
    let exposed_now = slot.is_some_and(|c| c.in_epoch != 0 || c.open_disputes != 0);
    if phase.future_slashing == 0 || (exposed_now && phase.current_slashing == 0) {
        return Err(TreasurerError::ZeroSlashingRate);
    }
    Ok(())
}

/// What burn_forfeited burns for a user: the burned points its slot holds,
/// and its deposit when forfeited (`revoke`: the deposit, possibly of 0
/// tokens, goes and the join authorization is deactivated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Forfeit {
    pub points: u64,
    pub deposit: u64,
    pub revoke: bool,
}

impl Forfeit {
    /// For the user with record `p` (None: never created) and slot `slot`.
    pub fn of(p: Option<&Participant>, slot: Option<&ClientSlot>) -> Self {
        let points = slot.map_or(0, |c| c.burned);
        match p {
            Some(p) if p.deposit_forfeited(slot) => Forfeit { points, deposit: p.deposit, revoke: true },
            _ => Forfeit { points, deposit: 0, revoke: false },
        }
    }

    /// Checks that there is something to burn and that the run can burn
    /// it, and returns the tokens to burn. The burned points come out of the
    /// tokens not held as deposits (deposits are the users'), the forfeited
    /// deposit out of the deposits.
    pub fn check(&self, held: u64, run: &Run) -> Result<u64, TreasurerError> {
        if self.points == 0 && !self.revoke {
            return Err(TreasurerError::NothingToBurn);
        }
        if self.points > held.saturating_sub(run.total_deposits) {
            return Err(TreasurerError::BurnExceedsBalance);
        }
        self.points.checked_add(self.deposit).ok_or(TreasurerError::MathOverflow)
    }
}

/// Whether `data` (an account owned by the Authorizer) is the join
/// authorization the Treasurer run `run` grants through `participant`: the
/// grantor is the Run, the grantee the Participant PDA (which only the
/// Treasurer signs for, so only it can name delegates), the scope join_run's.
pub fn is_join_authorization(data: &[u8], run: &Address, participant: &Address) -> bool {
    Authorization::decode(data).is_ok_and(|a| &a.grantor == run && &a.grantee == participant && a.scope == JOIN_RUN_SCOPE)
}

/// The slot of `user` in the Coordinator run, if it has one.
pub fn client_slot<'a>(state: &'a CoordinatorState, user: &Address) -> Option<&'a ClientSlot> {
    state.clients.iter().find(|c| c.occupied != 0 && &c.signer == user.as_array())
}

/// The points of `user` still held by the Coordinator: (earned, slashed), or
/// None when the user never joined.
pub fn client_points(state: &CoordinatorState, user: &Address) -> Option<(u64, u64)> {
    client_slot(state, user).map(|c| (c.earned, c.slashed))
}

/// The points the Coordinator still holds that the run must cover, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserve {
    /// Every slot's earned - slashed (claims still to come).
    pub claims: u64,
    /// Every slot's unvested points (they vest into earned, or are burned).
    pub unvested: u64,
    /// Every slot's burned points (burn_forfeited burns as many tokens).
    pub burned: u64,
}

impl Reserve {
    pub fn points(&self) -> Result<u64, TreasurerError> {
        self.claims
            .checked_add(self.unvested)
            .and_then(|p| p.checked_add(self.burned))
            .ok_or(TreasurerError::MathOverflow)
    }
}

/// The reserve of the Coordinator run. Points settled by a claim were paid
/// in full (a claim pays everything owed), those settled by
/// participant_settle are reserved in `Run::unclaimed_settled_points`, a
/// participant's leftover slash debt can only lower a future payment, an
/// unvested point either vests into earned or is burned, and a burned point
/// leaves only through burn_forfeited, so this, with the Run's settled
/// points, bounds what claims and burns can still take.
pub fn reserve(state: &CoordinatorState) -> Result<Reserve, TreasurerError> {
    let mut r = Reserve::default();
    for c in state.clients.iter().filter(|c| c.occupied != 0) {
        let add = |acc: u64, v: u64| acc.checked_add(v).ok_or(TreasurerError::MathOverflow);
        r.claims = add(r.claims, c.earned.saturating_sub(c.slashed))?;
        r.unvested = c.unvested.iter().try_fold(r.unvested, |acc, &v| add(acc, v))?;
        r.burned = add(r.burned, c.burned)?;
    }
    Ok(r)
}

/// Points the run must keep tokens for: `reserve(state).points()`.
pub fn reserved_points(state: &CoordinatorState) -> Result<u64, TreasurerError> {
    reserve(state)?.points()
}

/// Tokens the run must keep: the reserved points of its Coordinator run
/// (None once closed: the points went with the account), the points settled
/// into Participant records and not claimed yet, and every deposit held for
/// users.
pub fn reserved_tokens(run: &Run, state: Option<&CoordinatorState>) -> Result<u64, TreasurerError> {
    let points = state.map_or(Ok(0), reserved_points)?;
    points
        .checked_add(run.unclaimed_settled_points)
        .and_then(|t| t.checked_add(run.total_deposits))
        .ok_or(TreasurerError::MathOverflow)
}

/// run_close frees the Coordinator run only when nothing is reserved: every
/// point claimed (settled or not), none unvested, every burned point burned
/// and every deposit returned or burned.
pub fn check_closable(run: &Run, state: &CoordinatorState) -> Result<(), TreasurerError> {
    let r = reserve(state)?;
    if r.claims != 0 || run.unclaimed_settled_points != 0 {
        return Err(TreasurerError::UnclaimedPointsRemain);
    }
    if r.unvested != 0 {
        return Err(TreasurerError::UnvestedPointsRemain);
    }
    if r.burned != 0 {
        return Err(TreasurerError::BurnPending);
    }
    if run.total_deposits != 0 {
        return Err(TreasurerError::DepositsRemain);
    }
    Ok(())
}

/// Whether the run's tokens not reserved for claims may be withdrawn.
pub fn withdrawable(state: &CoordinatorState) -> bool {
    matches!(RunState::from_u8(state.run_state), Some(RunState::Finished))
}

#[cfg(test)]
mod tests;
