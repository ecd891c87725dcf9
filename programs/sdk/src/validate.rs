//! Account checks that every instruction runs, failing with Anchor's codes.
//!
//! Each check logs the failure like Anchor ("AnchorError occurred. ...") so a
//! failed transaction's logs say which constraint broke.

use crate::cpi::system::SYSTEM_PROGRAM_ID;
use crate::pda;
use crate::{AccountView, Address, ErrorCode, ProgramError, ProgramResult};

/// Returns the first `N` accounts, or AccountNotEnoughKeys.
pub fn accounts<const N: usize>(accounts: &[AccountView]) -> Result<&[AccountView; N], ProgramError> {
    accounts.get(..N).and_then(|a| a.try_into().ok()).ok_or_else(|| ErrorCode::AccountNotEnoughKeys.fail())
}

/// The account signed the transaction.
pub fn signer(account: &AccountView) -> ProgramResult {
    if account.is_signer() {
        Ok(())
    } else {
        Err(ErrorCode::AccountNotSigner.fail())
    }
}

/// The account was passed writable.
pub fn writable(account: &AccountView) -> ProgramResult {
    if account.is_writable() {
        Ok(())
    } else {
        Err(ErrorCode::ConstraintMut.fail())
    }
}

/// The account is owned by `owner`.
pub fn owner(account: &AccountView, owner: &Address) -> ProgramResult {
    if account.owned_by(owner) {
        Ok(())
    } else {
        Err(ErrorCode::AccountOwnedByWrongProgram.fail())
    }
}

/// The account is `expected`.
pub fn address(account: &AccountView, expected: &Address) -> ProgramResult {
    if account.address() == expected {
        Ok(())
    } else {
        Err(ErrorCode::ConstraintAddress.fail())
    }
}

/// The account is the executable program `id`.
pub fn program(account: &AccountView, id: &Address) -> ProgramResult {
    if account.address() != id {
        return Err(ErrorCode::InvalidProgramId.fail());
    }
    if !account.executable() {
        return Err(ErrorCode::InvalidProgramExecutable.fail());
    }
    Ok(())
}

/// An initialized account of this program and type: owned by `program_id`,
/// holding `discriminator` in its first 8 bytes.
pub fn initialized(account: &AccountView, program_id: &Address, discriminator: &[u8; 8]) -> ProgramResult {
    if account.owned_by(&SYSTEM_PROGRAM_ID) && account.lamports() == 0 {
        return Err(ErrorCode::AccountNotInitialized.fail());
    }
    owner(account, program_id)?;
    let data = account.try_borrow()?;
    if data.len() < 8 {
        return Err(ErrorCode::AccountDiscriminatorNotFound.fail());
    }
    if &data[..8] != discriminator {
        return Err(ErrorCode::AccountDiscriminatorMismatch.fail());
    }
    Ok(())
}

/// An account of this program not yet initialized (zeroed discriminator), so
/// that an init instruction can never run twice on one account.
pub fn uninitialized(account: &AccountView, program_id: &Address) -> ProgramResult {
    owner(account, program_id)?;
    let data = account.try_borrow()?;
    if data.len() < 8 {
        return Err(ErrorCode::AccountDiscriminatorNotFound.fail());
    }
    if data[..8] != [0u8; 8] {
        return Err(ErrorCode::AccountDiscriminatorAlreadySet.fail());
    }
    Ok(())
}

/// The account is the PDA of `seeds` with the canonical bump, which it
/// returns.
pub fn pda(account: &AccountView, seeds: &[&[u8]], program_id: &Address) -> Result<u8, ProgramError> {
    let (expected, bump) = pda::find_program_address(seeds, program_id)?;
    if account.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(bump)
}

/// The account is the PDA of `seeds` + `[bump]`, where `bump` was stored when
/// the account was created from a canonical derivation (cheaper than [`pda`]).
pub fn pda_with_bump(account: &AccountView, seeds: &[&[u8]], bump: u8, program_id: &Address) -> ProgramResult {
    let mut all: [&[u8]; pda::MAX_SEEDS] = [&[]; pda::MAX_SEEDS];
    if seeds.len() >= pda::MAX_SEEDS {
        return Err(ProgramError::MaxSeedLengthExceeded);
    }
    all[..seeds.len()].copy_from_slice(seeds);
    let bump = [bump];
    all[seeds.len()] = &bump;
    let expected = pda::create_program_address(&all[..=seeds.len()], program_id)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if account.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(())
}

/// Closes a program-owned account like Anchor's `close`: moves all lamports to
/// `destination`, zeroes the data and gives the account back to the system
/// program, so it can neither be used nor revived with stale data in this
/// transaction.
pub fn close(account: &AccountView, destination: &AccountView) -> ProgramResult {
    if account.address() == destination.address() {
        return Err(ErrorCode::ConstraintMut.fail());
    }
    writable(account)?;
    writable(destination)?;
    let lamports = destination.lamports().checked_add(account.lamports()).ok_or(ProgramError::ArithmeticOverflow)?;
    destination.set_lamports(lamports);
    account.set_lamports(0);
    {
        let mut data = account.try_borrow_mut()?;
        crate::mem::fill(&mut data, 0);
    }
    account.resize(0)?;
    // SAFETY: no reference to the account's owner is alive here.
    unsafe { account.assign(&SYSTEM_PROGRAM_ID) };
    Ok(())
}
