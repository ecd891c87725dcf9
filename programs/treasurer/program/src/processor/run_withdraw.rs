use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{reserved_tokens, withdrawable, TreasurerError};

use super::{emit, load_run, require_authority, require_coordinator, RunSeeds};
use crate::coordinator::with_state;
use crate::COLLATERAL_WITHDRAWN;

/// run_withdraw { amount }: the run authority takes tokens nobody is owed, once
/// the run is Finished (no more points can be earned) or closed. What the
/// run keeps is every client's unsettled earned - slashed points, unvested
/// points and burned points not yet burned, and every deposit held, so
/// claims, burns and deposit returns still to come are always covered.
///
/// Accounts: 0. [SIGNER] authority, 1. [] run, 2. [WRITE] run_collateral,
/// 3. [WRITE] destination (a token account of the mint), 4. [] collateral_mint,
/// 5. [] coordinator_account, 6. [] token_program.
pub fn run_withdraw(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, run, run_collateral, destination, mint, account, token_program] = validate::accounts::<7>(accounts)?;
    let mut r = Reader::new(args);
    let amount = r.u64()?;
    r.finish()?;
    validate::writable(run_collateral)?;
    validate::writable(destination)?;
    let state = load_run(run)?;
    require_authority(&state, authority)?;
    require_coordinator(&state, None, account)?;
    validate::program(token_program, &state.token_program)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals::<TreasurerError>(mint, &state.token_program)?;
    let held = token_account::<TreasurerError>(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?.amount;
    token_account::<TreasurerError>(destination, &state.token_program, &state.collateral_mint, None)?;
    // A closed run's coordinator account is gone, and with it every point;
    // deposits stay reserved.
    let reserved = if state.closed {
        reserved_tokens(&state, None).map_err(|e| e.fail())?
    } else {
        with_state(account, |s| {
            if !withdrawable(s) {
                return Err(TreasurerError::RunNotFinished.fail());
            }
            reserved_tokens(&state, Some(s)).map_err(|e| e.fail())
        })?
    };
    if amount > held.saturating_sub(reserved) {
        return Err(TreasurerError::WithdrawExceedsUnallocated.fail());
    }
    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let signer = Signer::from(&seeds);
    TransferChecked { program_id: &state.token_program, source: run_collateral, mint, destination, authority: run, amount, decimals }
        .invoke_signed(core::slice::from_ref(&signer))?;
    emit(&COLLATERAL_WITHDRAWN, |w| {
        w.address(run.address())?.address(destination.address())?.u64(amount)?;
        Ok(())
    })
}
