//! The Authorizer's interface: its id, the `Authorization` account layout, its
//! errors and the rule that decides whether a user may act under an
//! authorization. The Coordinator links this crate to check a join without a
//! CPI; the program crate links it for everything it stores.
//!
//! `Authorization` (Borsh, after the 8-byte discriminator):
//! ```text
//! bump u8 | grantor [32] | grantee [32] | scope u32 len + bytes (<= 32)
//! | active u8 | delegates u32 len + [32] * n (<= 32) | grantor_update_unix_timestamp i64
//! ```
//! The address is the PDA ["Authorization", grantor, grantee, scope]; the
//! grantee is the all-zero key for "everyone".
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

use psyche_sdk::borsh::{BorshError, Reader};
use psyche_sdk::{anchor, base58, define_errors, validate, AccountView, Address, ProgramError};

/// The program's id (Anchor.toml, the IDL and programs/keys agree; a Go test checks).
pub const ID: Address = base58::address("GtrhoCuywatUjtYA4AAtutfN4peC4PxaDorxqcuNMgYn");

pub const AUTHORIZATION_SEED: &[u8] = b"Authorization";
/// A seed holds at most 32 bytes, so the scope does too.
pub const MAX_SCOPE_LEN: usize = 32;
/// Bounds the account (and a join check's work) at 90 + 32 + 32 * 32 bytes.
pub const MAX_DELEGATES: usize = 32;
/// The grantee of a permissionless authorization.
pub const EVERYONE: Address = Address::new_from_array([0; 32]);

pub const AUTHORIZATION_ACCOUNT: [u8; 8] = anchor::account("Authorization");

/// Byte offsets of the fixed-position fields.
const BUMP_OFFSET: usize = 8;
const GRANTOR_OFFSET: usize = 9;
const GRANTEE_OFFSET: usize = 41;
const SCOPE_OFFSET: usize = 73;

define_errors! {
    pub enum AuthorizerError {
        ScopeTooLong = "The scope is longer than 32 bytes",
        TooManyDelegates = "An authorization holds at most 32 delegates",
        AuthorizationStillActive = "Deactivate the authorization before closing it",
        GrantorMismatch = "The signer is not this authorization's grantor",
        GranteeMismatch = "The signer is not this authorization's grantee",
        AuthorizationAlreadyExists = "An authorization for this grantor, grantee and scope already exists",
    }
}

/// Account size for a scope and a number of delegates.
// Note: callers pass a scope_len <= MAX_SCOPE_LEN and delegates <=
// MAX_DELEGATES, both checked first: at most 1,146 bytes.
#[allow(clippy::arithmetic_side_effects)]
pub const fn space(scope_len: usize, delegates: usize) -> usize {
    8 + 1 + 32 + 32 + 4 + scope_len + 1 + 4 + 32 * delegates + 8
}

/// A decoded view of an `Authorization` account's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization<'a> {
    pub bump: u8,
    pub grantor: Address,
    pub grantee: Address,
    pub scope: &'a [u8],
    pub active: bool,
    /// The delegates' keys, 32 bytes each.
    pub delegates: &'a [u8],
    pub grantor_update_unix_timestamp: i64,
}

impl<'a> Authorization<'a> {
    /// Decodes account data, discriminator included; bounds and tags checked.
    pub fn decode(data: &'a [u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != AUTHORIZATION_ACCOUNT {
            return Err(BorshError::InvalidTag);
        }
        let bump = r.u8()?;
        let grantor = r.address()?;
        let grantee = r.address()?;
        let scope = r.byte_vec()?;
        if scope.len() > MAX_SCOPE_LEN {
            return Err(BorshError::InvalidTag);
        }
        let active = r.bool()?;
        let n = r.vec_len(32)?;
        if n > MAX_DELEGATES {
            return Err(BorshError::InvalidTag);
        }
        // Note: n <= MAX_DELEGATES (32), checked above.
        #[allow(clippy::arithmetic_side_effects)]
        let delegates = r.bytes(32 * n)?;
        let grantor_update_unix_timestamp = r.i64()?;
        r.finish()?;
        Ok(Self { bump, grantor, grantee, scope, active, delegates, grantor_update_unix_timestamp })
    }

    /// Number of delegates.
    pub fn delegates_len(&self) -> usize {
        self.delegates.len() / 32
    }

    /// The i-th delegate.
    pub fn delegate(&self, i: usize) -> Option<Address> {
        let b = self.delegates.chunks_exact(32).nth(i)?;
        let mut a = [0u8; 32];
        a.copy_from_slice(b);
        Some(Address::new_from_array(a))
    }

    /// Whether `user` may act for `grantor` in `scope`: the authorization is
    /// active, was granted by `grantor` for exactly `scope`, and its grantee is
    /// everyone, `user`, or lists `user` as a delegate.
    pub fn is_valid_for(&self, grantor: &Address, user: &Address, scope: &[u8]) -> bool {
        if !self.active || &self.grantor != grantor || self.scope != scope {
            return false;
        }
        if self.grantee == EVERYONE || &self.grantee == user {
            return true;
        }
        self.delegates.chunks_exact(32).any(|d| d == user.as_ref())
    }
}

/// Positions of fields that handlers update in place.
pub mod offsets {
    pub const BUMP: usize = super::BUMP_OFFSET;
    pub const GRANTOR: usize = super::GRANTOR_OFFSET;
    pub const GRANTEE: usize = super::GRANTEE_OFFSET;
    pub const SCOPE: usize = super::SCOPE_OFFSET;
    /// The `active` byte follows the scope.
    // Note: scope_len is a decoded scope's length, <= MAX_SCOPE_LEN (32).
    #[allow(clippy::arithmetic_side_effects)]
    pub const fn active(scope_len: usize) -> usize {
        SCOPE + 4 + scope_len
    }
    // Note: as for active(): at most 110.
    #[allow(clippy::arithmetic_side_effects)]
    pub const fn delegates_len(scope_len: usize) -> usize {
        active(scope_len) + 1
    }
}

/// Checks that `account` is a genuine authorization at the PDA of
/// (grantor, grantee, scope) under the Authorizer `program`, and that `user`
/// may act under it. This is the Coordinator's join check: no CPI, one
/// create_program_address with the stored bump.
pub fn check_authorized(
    account: &AccountView,
    program: &Address,
    grantor: &Address,
    user: &Address,
    scope: &[u8],
) -> Result<bool, ProgramError> {
    validate::initialized(account, program, &AUTHORIZATION_ACCOUNT)?;
    let data = account.try_borrow()?;
    let auth = Authorization::decode(&data).map_err(BorshError::account)?;
    validate::pda_with_bump(
        account,
        &[AUTHORIZATION_SEED, grantor.as_ref(), auth.grantee.as_ref(), auth.scope],
        auth.bump,
        program,
    )?;
    Ok(auth.is_valid_for(grantor, user, scope))
}

#[cfg(test)]
mod tests;
