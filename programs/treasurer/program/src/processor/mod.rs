//! One handler per instruction. Each destructures its accounts, decodes its
//! arguments, runs every account check, then calls other programs and writes
//! its own accounts.

mod burn_forfeited;
mod participant_claim;
mod participant_create;
mod participant_deposit;
mod participant_settle;
mod participant_withdraw_deposit;
mod run_close;
mod run_create;
mod run_update;
mod run_withdraw;

pub use burn_forfeited::burn_forfeited;
pub use participant_claim::participant_claim;
pub use participant_create::participant_create;
pub use participant_deposit::participant_deposit;
pub use participant_settle::participant_settle;
pub use participant_withdraw_deposit::participant_withdraw_deposit;
pub use run_close::run_close;
pub use run_create::run_create;
pub use run_update::run_update;
pub use run_withdraw::run_withdraw;

use psyche_sdk::borsh::{BorshError, Writer};
use psyche_sdk::cpi::system::CreatePda;
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::Rent;
use psyche_sdk::{pda, validate, AccountView, ErrorCode, ProgramError, ProgramResult};
use psyche_treasurer_interface::{
    is_join_authorization, Participant, Run, TreasurerError, AUTHORIZER_ID, ID, PARTICIPANT_ACCOUNT, PARTICIPANT_SEED, RUN_ACCOUNT,
    RUN_SEED,
};

/// Checks that `run` is a Run of this program at its PDA (stored bump) and
/// decodes it.
fn load_run(run: &AccountView) -> Result<Run, ProgramError> {
    validate::initialized(run, &ID, &RUN_ACCOUNT)?;
    let r = {
        let data = run.try_borrow()?;
        Run::decode(&data).map_err(BorshError::account)?
    };
    let index = r.index.to_le_bytes();
    let bump = [r.bump];
    let expected = pda::create_program_address(&[RUN_SEED, &index, &bump], &ID).map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if run.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(r)
}

/// The signer must be the run's main authority.
fn require_authority(r: &Run, authority: &AccountView) -> ProgramResult {
    validate::signer(authority)?;
    if authority.address() != &r.main_authority {
        return Err(TreasurerError::RunAuthorityMismatch.fail());
    }
    Ok(())
}

/// The accounts passed as the run's coordinator accounts are the run's.
fn require_coordinator(r: &Run, instance: Option<&AccountView>, account: &AccountView) -> ProgramResult {
    if account.address() != &r.coordinator_account || instance.is_some_and(|i| i.address() != &r.coordinator_instance) {
        return Err(TreasurerError::CoordinatorMismatch.fail());
    }
    Ok(())
}

/// The seeds of the Run PDA, for signing as the run.
struct RunSeeds {
    index: [u8; 8],
    bump: [u8; 1],
}

impl RunSeeds {
    fn new(r: &Run) -> Self {
        Self { index: r.index.to_le_bytes(), bump: [r.bump] }
    }

    fn seeds(&self) -> [Seed<'_>; 3] {
        [Seed::from(RUN_SEED), Seed::from(&self.index), Seed::from(&self.bump)]
    }
}

/// Writes the run back.
fn store_run(run: &AccountView, r: &Run) -> ProgramResult {
    let mut data = run.try_borrow_mut()?;
    serialized(r.encode(&mut data))
}

/// Maps a full output buffer to Anchor's serialization error.
pub(crate) fn serialized<T>(r: Result<T, BorshError>) -> Result<T, ProgramError> {
    r.map_err(|_| ErrorCode::AccountDidNotSerialize.fail())
}

/// Emits an event whose Borsh payload `write` produces.
fn emit(discriminator: &[u8; 8], write: impl FnOnce(&mut Writer<'_>) -> Result<(), BorshError>) -> ProgramResult {
    let mut buf = [0u8; 128];
    let mut w = Writer::new(&mut buf);
    serialized(write(&mut w))?;
    let n = w.len();
    psyche_sdk::anchor::emit(discriminator, &buf[..n])
}

/// Creates the program-owned PDA `account` of `size` bytes, rent paid by
/// `payer`.
fn create_pda(payer: &AccountView, account: &AccountView, size: usize, signer: &Signer<'_, '_>) -> ProgramResult {
    let lamports = Rent::get()?.minimum_balance(size)?;
    CreatePda { payer, account, lamports, space: size as u64, owner: &ID }.invoke_signed(signer)
}

/// Checks that `participant` is a Participant of this program at its PDA
/// (stored bump) for `run` and `user`, and decodes it.
fn load_participant(participant: &AccountView, run: &AccountView, user: &psyche_sdk::Address) -> Result<Participant, ProgramError> {
    validate::initialized(participant, &ID, &PARTICIPANT_ACCOUNT)?;
    let p = {
        let data = participant.try_borrow()?;
        Participant::decode(&data).map_err(BorshError::account)?
    };
    if &p.run != run.address() || &p.user != user {
        return Err(TreasurerError::ParticipantMismatch.fail());
    }
    let bump = [p.bump];
    let expected = pda::create_program_address(&[PARTICIPANT_SEED, p.run.as_ref(), p.user.as_ref(), &bump], &ID)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if participant.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(p)
}

/// Writes a participant back.
fn store_participant(participant: &AccountView, p: &Participant) -> ProgramResult {
    let mut data = participant.try_borrow_mut()?;
    serialized(p.encode(&mut data))
}

/// The seeds of a Participant PDA, for signing as the grantee of its join
/// authorization.
struct ParticipantSeeds<'a> {
    p: &'a Participant,
    bump: [u8; 1],
}

impl<'a> ParticipantSeeds<'a> {
    fn new(p: &'a Participant) -> Self {
        Self { p, bump: [p.bump] }
    }

    fn seeds(&self) -> [Seed<'_>; 4] {
        [Seed::from(PARTICIPANT_SEED), Seed::from(self.p.run.as_ref()), Seed::from(self.p.user.as_ref()), Seed::from(&self.bump)]
    }
}

/// The existing `authorization` is the join authorization this run granted
/// through `participant` (owner and contents checked: the Authorizer only
/// writes grantor, grantee and scope at their PDA).
fn require_join_authorization(authorization: &AccountView, run: &AccountView, participant: &AccountView) -> ProgramResult {
    validate::writable(authorization)?;
    let ok = authorization.owned_by(&AUTHORIZER_ID) && {
        let data = authorization.try_borrow()?;
        is_join_authorization(&data, run.address(), participant.address())
    };
    if !ok {
        return Err(TreasurerError::AuthorizationMismatch.fail());
    }
    Ok(())
}
