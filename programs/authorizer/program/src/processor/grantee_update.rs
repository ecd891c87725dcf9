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
    // Note: len <= MAX_DELEGATES (32), and len < MAX_DELEGATES where it grows,
    // so 32 * len + 32 <= keys.len() (1,024).
    #[allow(clippy::arithmetic_side_effects)]
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
    // Note: vec_len(32) checked that 32 * n_added bytes (no overflow) follow.
    #[allow(clippy::arithmetic_side_effects)]
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
    let missing = rent.saturating_sub(held);
    if missing > 0 {
        Transfer { from: payer, to: authorization, lamports: missing }.invoke_signed(&[])?;
    }
    authorization.resize(size)?;
    let surplus = held.saturating_sub(rent);
    if surplus > 0 {
        let refund = payer.lamports().checked_add(surplus).ok_or(ProgramError::ArithmeticOverflow)?;
        authorization.set_lamports(rent);
        payer.set_lamports(refund);
    }
    write_delegates(&mut authorization.try_borrow_mut()?, scope_len, &list, timestamp);
    emit(&AUTHORIZATION_GRANTEE_UPDATED, |w| {
        w.address(authorization.address())?.u16(list.len as u16)?;
        Ok(())
    })
}

/// Writes the delegate list and the timestamp after it into account data of
/// `space(scope_len, list.len)` bytes.
// Note: scope_len <= MAX_SCOPE_LEN and list.len <= MAX_DELEGATES, so every
// offset lies inside the account (space() counts these very fields), and
// size >= 8.
#[allow(clippy::arithmetic_side_effects)]
fn write_delegates(data: &mut [u8], scope_len: usize, list: &Delegates, timestamp: i64) {
    let at = offsets::delegates_len(scope_len);
    let size = data.len();
    data[at..at + 4].copy_from_slice(&(list.len as u32).to_le_bytes());
    data[at + 4..at + 4 + 32 * list.len].copy_from_slice(&list.keys[..32 * list.len]);
    data[size - 8..].copy_from_slice(&timestamp.to_le_bytes());
}
