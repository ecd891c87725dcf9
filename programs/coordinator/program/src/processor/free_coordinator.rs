use psyche_sdk::{validate, AccountView, ProgramResult};

use crate::args::{Decode, NoParams};
use crate::run::{load_instance, require_main_authority, with_state};

/// free_coordinator {}: the main authority closes the run while it is halted
/// (Uninitialized, Paused or Finished); both accounts' rent goes to `spill`.
///
/// Accounts: 0. [SIGNER] authority, 1. [WRITE] spill, 2. [WRITE] coordinator_instance,
/// 3. [WRITE] coordinator_account.
pub fn free_coordinator(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, spill, instance, account] = validate::accounts::<4>(accounts)?;
    NoParams::decode(args)?;
    let inst = load_instance(instance)?;
    require_main_authority(&inst, authority)?;
    with_state(&inst, account, |s| s.check_closable())?;
    validate::close(account, spill)?;
    validate::close(instance, spill)
}
