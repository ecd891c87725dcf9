use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::BurnChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{Forfeit, TreasurerError, AUTHORIZER_ID, COORDINATOR_ID, ID, PARTICIPANT_SEED};

use super::{emit, load_participant, load_run, require_coordinator, require_join_authorization, store_participant, store_run, RunSeeds};
use crate::authorizer::JoinAuthorization;
use crate::coordinator::{user_view, Authority, TAKE_BURNED};
use crate::FORFEITS_BURNED;

/// burn_forfeited {}: anyone burns what `user` forfeited: the burned points
/// its Coordinator slot holds (unvested rewards taken by faults; moved out
/// with take_burned by CPI, signed by the Run) and, when a fault was found in
/// its deposit's epoch or later, its deposit (its join authorization is
/// deactivated and closed, the rent going back to the user, so a later
/// deposit grants a new one). The tokens are burned from the run's
/// token account (SPL `BurnChecked`, the Run signs), so nobody receives
/// them and the mint's supply drops by as much. Burned points are paid from
/// the tokens that are not deposits: when those are short, nothing happens
/// (`BurnExceedsBalance`). The user's Participant may not exist (then only
/// points are burned); the account passed must still be its PDA.
///
/// Accounts: 0. [WRITE] user (the wallet; not a signer), 1. [WRITE] run,
/// 2. [WRITE] participant, 3. [WRITE] run_collateral, 4. [WRITE] collateral_mint,
/// 5. [] coordinator_instance, 6. [WRITE] coordinator_account, 7. [] coordinator_program,
/// 8. [WRITE] authorization, 9. [] authorizer_program, 10. [] token_program.
pub fn burn_forfeited(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [wallet, run, participant, run_collateral, mint, instance, account, coordinator_program, authorization, authorizer_program, token_program] =
        validate::accounts::<11>(accounts)?;
    Reader::new(args).finish()?;
    let user = wallet.address();
    validate::writable(wallet)?;
    validate::writable(run)?;
    validate::writable(participant)?;
    validate::writable(run_collateral)?;
    validate::writable(mint)?;
    let mut state = load_run(run)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    validate::program(authorizer_program, &AUTHORIZER_ID)?;
    validate::program(token_program, &state.token_program)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals::<TreasurerError>(mint, &state.token_program)?;
    let held = token_account::<TreasurerError>(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?.amount;
    let mut record = if participant.owned_by(&ID) {
        Some(load_participant(participant, run, user)?)
    } else {
        // Never created: it must still be the user's PDA, so that a record
        // holding a deposit cannot be left out.
        validate::pda(participant, &[PARTICIPANT_SEED, run.address().as_ref(), user.as_ref()], &ID)?;
        None
    };
    let slot = user_view(account, user)?.slot;
    if let Some(p) = record.as_mut() {
        p.observe_fault(slot.as_ref());
    }
    let forfeit = Forfeit::of(record.as_ref(), slot.as_ref());
    let total = forfeit.check(held, &state).map_err(|e| e.fail())?;
    if forfeit.revoke {
        require_join_authorization(authorization, run, participant)?;
    }
    if let Some(p) = record.as_mut() {
        p.apply_forfeit(&forfeit).map_err(|e| e.fail())?;
    }
    state.total_deposits = state.total_deposits.checked_sub(forfeit.deposit).ok_or_else(|| TreasurerError::MathOverflow.fail())?;
    state.total_burned = state.total_burned.checked_add(total).ok_or_else(|| TreasurerError::MathOverflow.fail())?;

    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let signer = Signer::from(&seeds);
    if forfeit.points > 0 {
        let mut data = [0u8; 8 + 32];
        data[..8].copy_from_slice(&TAKE_BURNED);
        data[8..].copy_from_slice(user.as_ref());
        Authority { run, instance, account }.invoke(&data, &signer)?;
    }
    if total > 0 {
        BurnChecked { program_id: &state.token_program, account: run_collateral, mint, authority: run, amount: total, decimals }
            .invoke_signed(core::slice::from_ref(&signer))?;
    }
    if forfeit.revoke {
        JoinAuthorization { run, participant, authorization }.revoke_and_close(wallet, &signer)?;
    }
    if let Some(p) = record.as_ref() {
        store_participant(participant, p)?;
    }
    store_run(run, &state)?;
    emit(&FORFEITS_BURNED, |w| {
        w.address(run.address())?.address(user)?.u64(forfeit.points)?.u64(forfeit.deposit)?;
        Ok(())
    })
}
