use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::Signer;
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{check_closable, TreasurerError, COORDINATOR_ID};

use super::{load_run, require_authority, require_coordinator, store_run, RunSeeds};
use crate::coordinator::{with_state, Authority};

/// run_close {}: the run authority frees the Coordinator run (free_coordinator
/// by CPI: the run must be halted; rent goes to `spill`) once nothing is
/// reserved, since the points live in the account being closed: every point
/// claimed, none unvested, every burned point burned, and every deposit
/// returned or burned. The Run stays, marked closed, so the authority can
/// withdraw what is left.
///
/// Accounts: 0. [SIGNER] authority, 1. [WRITE] spill, 2. [WRITE] run,
/// 3. [WRITE] coordinator_instance, 4. [WRITE] coordinator_account, 5. [] coordinator_program.
pub fn run_close(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, spill, run, instance, account, coordinator_program] = validate::accounts::<6>(accounts)?;
    Reader::new(args).finish()?;
    validate::writable(run)?;
    let mut state = load_run(run)?;
    require_authority(&state, authority)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    with_state(account, |s| check_closable(&state, s).map_err(|e| e.fail()))?;
    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    Authority { run, instance, account }.free(spill, &Signer::from(&seeds))?;
    state.closed = true;
    store_run(run, &state)
}
