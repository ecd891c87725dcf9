use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{TreasurerError, COORDINATOR_ID};

use super::{emit, load_participant, load_run, require_coordinator, store_participant, store_run, RunSeeds};
use crate::coordinator::{user_view, Authority, SETTLE_POINTS};
use crate::REWARDS_CLAIMED;

/// participant_claim {}: pays the user 1 collateral base unit per point it
/// earned in the Coordinator run, minus its slashes and what it already
/// claimed. The points are read from the coordinator account in place, then
/// moved into the Participant record (settle_points by CPI, so the client's
/// slot can be reused); the slot's latest fault is recorded too (deposits
/// depend on it). Points a participant_settle already moved into the record
/// are paid the same way, also once the user has no slot any more.
/// Deposits held in the run's token account never pay a claim. Idempotent:
/// a claim with nothing new pays nothing.
///
/// Accounts: 0. [SIGNER] user, 1. [WRITE] run, 2. [WRITE] participant,
/// 3. [WRITE] run_collateral, 4. [WRITE] user_collateral, 5. [] collateral_mint,
/// 6. [] coordinator_instance, 7. [WRITE] coordinator_account,
/// 8. [] coordinator_program, 9. [] token_program.
pub fn participant_claim(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [user, run, participant, run_collateral, user_collateral, mint, instance, account, coordinator_program, token_program] =
        validate::accounts::<10>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(user)?;
    validate::writable(run)?;
    validate::writable(participant)?;
    validate::writable(run_collateral)?;
    validate::writable(user_collateral)?;
    let mut state = load_run(run)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    let mut record = load_participant(participant, run, user.address())?;
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    validate::program(token_program, &state.token_program)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals::<TreasurerError>(mint, &state.token_program)?;
    let held = token_account::<TreasurerError>(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?.amount;
    token_account::<TreasurerError>(user_collateral, &state.token_program, &state.collateral_mint, Some(user.address()))?;
    let slot = user_view(account, user.address())?.slot;
    let (earned, slashed) = record.claim_points(slot.as_ref()).map_err(|e| e.fail())?;

    record.observe_fault(slot.as_ref());
    let owed = state.claim(&mut record, earned, slashed).map_err(|e| e.fail())?;
    if owed > held.saturating_sub(state.total_deposits) {
        return Err(TreasurerError::InsufficientCollateral.fail());
    }

    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let signer = Signer::from(&seeds);
    if earned != 0 || slashed != 0 {
        let mut data = [0u8; 8 + 32];
        data[..8].copy_from_slice(&SETTLE_POINTS);
        data[8..].copy_from_slice(user.address().as_ref());
        Authority { run, instance, account }.invoke(&data, &signer)?;
    }
    if owed > 0 {
        TransferChecked {
            program_id: &state.token_program,
            source: run_collateral,
            mint,
            destination: user_collateral,
            authority: run,
            amount: owed,
            decimals,
        }
        .invoke_signed(core::slice::from_ref(&signer))?;
    }
    store_participant(participant, &record)?;
    store_run(run, &state)?;
    emit(&REWARDS_CLAIMED, |w| {
        w.address(run.address())?.address(user.address())?.u64(owed)?.u64(earned)?.u64(slashed)?;
        Ok(())
    })
}
