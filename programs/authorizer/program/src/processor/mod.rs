//! One handler per instruction. Each destructures its accounts, decodes its
//! arguments, runs every account check, then changes state.

mod close;
mod create;
mod grantee_update;
mod grantor_update;

pub use close::close;
pub use create::create;
pub use grantee_update::grantee_update;
pub use grantor_update::grantor_update;

use psyche_authorizer_interface::{Authorization, AuthorizerError, AUTHORIZATION_ACCOUNT, ID};
use psyche_sdk::borsh::{BorshError, Writer};
use psyche_sdk::{validate, AccountView, ErrorCode, ProgramError};

/// Checks that `account` is a writable authorization of this program and runs
/// `f` on its decoded contents.
fn with_authorization<T>(
    account: &AccountView,
    f: impl FnOnce(&Authorization<'_>) -> Result<T, ProgramError>,
) -> Result<T, ProgramError> {
    validate::writable(account)?;
    validate::initialized(account, &ID, &AUTHORIZATION_ACCOUNT)?;
    let data = account.try_borrow()?;
    let auth = Authorization::decode(&data).map_err(BorshError::account)?;
    f(&auth)
}

/// The signer must be the stored grantor.
fn require_grantor(auth: &Authorization<'_>, grantor: &AccountView) -> Result<(), ProgramError> {
    validate::signer(grantor)?;
    if &auth.grantor != grantor.address() {
        return Err(AuthorizerError::GrantorMismatch.fail());
    }
    Ok(())
}

/// Maps a full output buffer to Anchor's serialization error.
fn serialized<T>(r: Result<T, BorshError>) -> Result<T, ProgramError> {
    r.map_err(|_| ErrorCode::AccountDidNotSerialize.into())
}

/// Emits an event whose Borsh payload `write` produces.
fn emit(discriminator: &[u8; 8], write: impl FnOnce(&mut Writer<'_>) -> Result<(), BorshError>) -> Result<(), ProgramError> {
    let mut buf = [0u8; 256];
    let mut w = Writer::new(&mut buf);
    serialized(write(&mut w))?;
    let n = w.len();
    psyche_sdk::anchor::emit(discriminator, &buf[..n])
}
