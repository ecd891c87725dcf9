use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{TreasurerError, AUTHORIZER_ID};

use super::{emit, load_participant, load_run, require_coordinator, require_join_authorization, store_participant, store_run, RunSeeds};
use crate::authorizer::JoinAuthorization;
use crate::coordinator::{user_view, UserView};
use crate::DEPOSIT_RETURNED;

/// participant_withdraw_deposit {}: returns a user's deposit into its token
/// account and revokes its join authorization (deactivated and closed; the
/// rent goes back to the user). Only while the user is neither pending nor
/// in the current epoch (either is fine once the run is Finished) nor named
/// by an open dispute, and never after a fault found in the deposit's epoch
/// or later (`DepositForfeited`: burn_forfeited burns it). The signer is the
/// user, or the run authority once the run is Finished (so that every
/// deposit can be settled before run_close).
///
/// Accounts: 0. [SIGNER] signer, 1. [WRITE] user, 2. [WRITE] run,
/// 3. [WRITE] participant, 4. [WRITE] run_collateral, 5. [WRITE] user_collateral,
/// 6. [] collateral_mint, 7. [] coordinator_account, 8. [WRITE] authorization,
/// 9. [] authorizer_program, 10. [] token_program.
pub fn participant_withdraw_deposit(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [signer, user, run, participant, run_collateral, user_collateral, mint, account, authorization, authorizer_program, token_program] =
        validate::accounts::<11>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(signer)?;
    validate::writable(user)?;
    validate::writable(run)?;
    validate::writable(participant)?;
    validate::writable(run_collateral)?;
    validate::writable(user_collateral)?;
    let mut state = load_run(run)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    let mut record = load_participant(participant, run, user.address())?;
    require_coordinator(&state, None, account)?;
    validate::program(authorizer_program, &AUTHORIZER_ID)?;
    validate::program(token_program, &state.token_program)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals::<TreasurerError>(mint, &state.token_program)?;
    token_account::<TreasurerError>(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?;
    token_account::<TreasurerError>(user_collateral, &state.token_program, &state.collateral_mint, Some(user.address()))?;
    let UserView { phase, slot } = user_view(account, user.address())?;
    let finished = phase.finished;
    if signer.address() != user.address() && !(signer.address() == &state.main_authority && finished) {
        return Err(TreasurerError::NotDepositor.fail());
    }
    let amount = record.return_deposit(slot.as_ref(), finished).map_err(|e| e.fail())?;
    require_join_authorization(authorization, run, participant)?;
    state.total_deposits = state.total_deposits.checked_sub(amount).ok_or_else(|| TreasurerError::MathOverflow.fail())?;

    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let run_signer = Signer::from(&seeds);
    if amount > 0 {
        TransferChecked {
            program_id: &state.token_program,
            source: run_collateral,
            mint,
            destination: user_collateral,
            authority: run,
            amount,
            decimals,
        }
        .invoke_signed(core::slice::from_ref(&run_signer))?;
    }
    JoinAuthorization { run, participant, authorization }.revoke_and_close(user, &run_signer)?;
    store_participant(participant, &record)?;
    store_run(run, &state)?;
    emit(&DEPOSIT_RETURNED, |w| {
        w.address(run.address())?.address(user.address())?.u64(amount)?;
        Ok(())
    })
}
