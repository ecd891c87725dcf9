use psyche_sdk::borsh::{BorshError, Reader};
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::{pda, validate, AccountView, ErrorCode, ProgramError, ProgramResult};
use psyche_treasurer_interface::{client_points, Participant, TreasurerError, COORDINATOR_ID, ID, PARTICIPANT_ACCOUNT, PARTICIPANT_SEED};

use super::{emit, load_run, require_coordinator, serialized, store_run, RunSeeds};
use crate::coordinator::{with_state, Authority, SETTLE_POINTS};
use crate::token::{mint_decimals, token_account};
use crate::REWARDS_CLAIMED;

/// participant_claim {}: pays the user 1 collateral base unit per point it
/// earned in the Coordinator run, minus its slashes and what it already
/// claimed. The points are read from the coordinator account in place, then
/// moved into the Participant record (settle_points by CPI, so the client's
/// slot can be reused). Idempotent: a claim with nothing new pays nothing.
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
    let mut record = load_participant(participant)?;
    if &record.run != run.address() || &record.user != user.address() {
        return Err(TreasurerError::ParticipantMismatch.fail());
    }
    check_participant_pda(participant, &record)?;
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    validate::program(token_program, &state.token_program)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals(mint, &state.token_program)?;
    let held = token_account(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?.amount;
    token_account(user_collateral, &state.token_program, &state.collateral_mint, Some(user.address()))?;
    let (earned, slashed) =
        with_state(account, |s| client_points(s, user.address()).ok_or_else(|| TreasurerError::UserNotInRun.fail()))?;

    let owed = record.settle_and_claim(earned, slashed).map_err(|e| e.fail())?;
    if owed > held {
        return Err(TreasurerError::InsufficientCollateral.fail());
    }
    state.total_claimed_points = state.total_claimed_points.checked_add(owed).ok_or_else(|| TreasurerError::MathOverflow.fail())?;

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
    {
        let mut data = participant.try_borrow_mut()?;
        serialized(record.encode(&mut data))?;
    }
    store_run(run, &state)?;
    emit(&REWARDS_CLAIMED, |w| {
        w.address(run.address())?.address(user.address())?.u64(owed)?.u64(earned)?.u64(slashed)?;
        Ok(())
    })
}

fn load_participant(participant: &AccountView) -> Result<Participant, ProgramError> {
    validate::initialized(participant, &ID, &PARTICIPANT_ACCOUNT)?;
    let data = participant.try_borrow()?;
    Participant::decode(&data).map_err(BorshError::account)
}

fn check_participant_pda(participant: &AccountView, p: &Participant) -> ProgramResult {
    let bump = [p.bump];
    let expected = pda::create_program_address(&[PARTICIPANT_SEED, p.run.as_ref(), p.user.as_ref(), &bump], &ID)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if participant.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(())
}
