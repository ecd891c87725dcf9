use psyche_authorizer_interface::{offsets, space, AuthorizerError, MAX_DELEGATES};
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::system::{Transfer, SYSTEM_PROGRAM_ID};
use psyche_sdk::sysvar::Rent;
use psyche_sdk::{validate, AccountView, ProgramError, ProgramResult};

use super::{emit, with_authorization};
use crate::AUTHORIZATION_GRANTEE_UPDATED;

/// The new delegate list, built before the account is resized.
struct Delegates {
    keys: [u8; 32 * MAX_DELEGATES],
    len: usize,
}

impl Delegates {
    /// Adds `key` unless already present; more than MAX_DELEGATES fails.
    fn push(&mut self, key: &[u8]) -> ProgramResult {
        if self.keys[..32 * self.len].chunks_exact(32).any(|k| k == key) {
            return Ok(());
        }
        if self.len == MAX_DELEGATES {
            return Err(AuthorizerError::TooManyDelegates.fail());
        }
        self.keys[32 * self.len..32 * self.len + 32].copy_from_slice(key);
        self.len += 1;
        Ok(())
    }
}

/// authorization_grantee_update { delegates_clear, delegates_added }: the
/// grantee replaces or extends its delegates (duplicates are kept once). The
/// account grows or shrinks to fit; the payer covers or recovers the rent.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [SIGNER] grantee,
/// 2. [WRITE] authorization, 3. [] system program.
pub fn grantee_update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, grantee, authorization, system_program] = validate::accounts::<4>(accounts)?;
    let mut r = Reader::new(args);
    let clear = r.bool()?;
    let n_added = r.vec_len(32)?;
    let added = r.bytes(32 * n_added)?;
    r.finish()?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::signer(grantee)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;

    let mut list = Delegates { keys: [0; 32 * MAX_DELEGATES], len: 0 };
    let (scope_len, timestamp) = with_authorization(authorization, |auth| {
        if &auth.grantee != grantee.address() {
            return Err(AuthorizerError::GranteeMismatch.fail());
        }
        if !clear {
            for key in auth.delegates.chunks_exact(32) {
                list.push(key)?;
            }
        }
        Ok((auth.scope.len(), auth.grantor_update_unix_timestamp))
    })?;
    for key in added.chunks_exact(32) {
        list.push(key)?;
    }

    let size = space(scope_len, list.len);
    let rent = Rent::get()?.minimum_balance(size)?;
    let held = authorization.lamports();
    if held < rent {
        Transfer { from: payer, to: authorization, lamports: rent - held }.invoke_signed(&[])?;
    }
    authorization.resize(size)?;
    if held > rent {
        let refund = payer.lamports().checked_add(held - rent).ok_or(ProgramError::ArithmeticOverflow)?;
        authorization.set_lamports(rent);
        payer.set_lamports(refund);
    }
    {
        let mut data = authorization.try_borrow_mut()?;
        let at = offsets::delegates_len(scope_len);
        data[at..at + 4].copy_from_slice(&(list.len as u32).to_le_bytes());
        data[at + 4..at + 4 + 32 * list.len].copy_from_slice(&list.keys[..32 * list.len]);
        data[size - 8..].copy_from_slice(&timestamp.to_le_bytes());
    }
    emit(&AUTHORIZATION_GRANTEE_UPDATED, |w| {
        w.address(authorization.address())?.u16(list.len as u16)?;
        Ok(())
    })
}
