use psyche_authorizer_interface::offsets;
use psyche_sdk::borsh::Reader;
use psyche_sdk::sysvar::Clock;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{emit, require_grantor, with_authorization};
use crate::AUTHORIZATION_GRANTOR_UPDATED;

/// authorization_grantor_update { active }: the grantor switches the
/// authorization on or off; the time of the change is recorded.
///
/// Accounts: 0. [SIGNER] grantor, 1. [WRITE] authorization.
pub fn grantor_update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [grantor, authorization] = validate::accounts::<2>(accounts)?;
    let mut r = Reader::new(args);
    let active = r.bool()?;
    r.finish()?;
    let scope_len = with_authorization(authorization, |auth| {
        require_grantor(auth, grantor)?;
        Ok(auth.scope.len())
    })?;
    let now = Clock::get()?.unix_timestamp;
    {
        let mut data = authorization.try_borrow_mut()?;
        data[offsets::active(scope_len)] = active as u8;
        // Note: the data decoded as an Authorization, which ends with this
        // 8-byte timestamp.
        #[allow(clippy::arithmetic_side_effects)]
        let at = data.len() - 8;
        data[at..].copy_from_slice(&now.to_le_bytes());
    }
    emit(&AUTHORIZATION_GRANTOR_UPDATED, |w| {
        w.address(authorization.address())?.bool(active)?.i64(now)?;
        Ok(())
    })
}
