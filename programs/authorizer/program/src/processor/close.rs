use psyche_authorizer_interface::AuthorizerError;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{emit, require_grantor, with_authorization};
use crate::AUTHORIZATION_CLOSED;

/// authorization_close {}: the grantor deletes an inactive authorization; its
/// rent goes to `spill`. Requiring deactivation first means a close is never
/// the first sign that access was revoked.
///
/// Accounts: 0. [SIGNER] grantor, 1. [WRITE] spill, 2. [WRITE] authorization.
pub fn close(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [grantor, spill, authorization] = validate::accounts::<3>(accounts)?;
    Reader::new(args).finish()?;
    with_authorization(authorization, |auth| {
        require_grantor(auth, grantor)?;
        if auth.active {
            return Err(AuthorizerError::AuthorizationStillActive.fail());
        }
        Ok(())
    })?;
    validate::close(authorization, spill)?;
    emit(&AUTHORIZATION_CLOSED, |w| {
        w.address(authorization.address())?.address(spill.address())?;
        Ok(())
    })
}
