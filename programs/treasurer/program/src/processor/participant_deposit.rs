use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{TreasurerError, AUTHORIZER_ID};

use super::{emit, load_participant, load_run, require_coordinator, store_participant, store_run, ParticipantSeeds, RunSeeds};
use crate::authorizer::JoinAuthorization;
use crate::coordinator::{user_view, UserView};
use crate::DEPOSIT_MADE;

/// participant_deposit { amount }: the user deposits the run's join deposit
/// (`amount` must equal it, so a change of the deposit never surprises a
/// depositor) into the run's token account and gets its join authorization:
/// the Authorizer account ["Authorization", run, participant,
/// "CoordinatorJoinRun"] that the Run (the run's join authority) grants to
/// the user's Participant PDA, naming the user its delegate (it exists only
/// while a deposit is held: a return or a burn closes it). The deposit is
/// recorded in the
/// Participant with the Coordinator's current epoch: a fault found in that
/// epoch or later forfeits it (burn_forfeited); otherwise
/// participant_withdraw_deposit returns it. Refused while the run is
/// Finished, while a deposit is held, in the epoch of a fault of the user,
/// and, for a deposit above 0, while a fault would slash nothing
/// (`ZeroSlashingRate`; `check_deposit_slashing`).
///
/// Accounts: 0. [WRITE, SIGNER] user (pays the authorization's rent),
/// 1. [WRITE] run, 2. [WRITE] participant, 3. [WRITE] user_collateral,
/// 4. [WRITE] run_collateral, 5. [] collateral_mint, 6. [] coordinator_account,
/// 7. [WRITE] authorization, 8. [] authorizer_program, 9. [] token_program,
/// 10. [] system_program.
pub fn participant_deposit(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [user, run, participant, user_collateral, run_collateral, mint, account, authorization, authorizer_program, token_program, system_program] =
        validate::accounts::<11>(accounts)?;
    let mut r = Reader::new(args);
    let amount = r.u64()?;
    r.finish()?;
    validate::signer(user)?;
    validate::writable(user)?;
    validate::writable(run)?;
    validate::writable(participant)?;
    validate::writable(user_collateral)?;
    validate::writable(run_collateral)?;
    validate::writable(authorization)?;
    let mut state = load_run(run)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    let mut record = load_participant(participant, run, user.address())?;
    require_coordinator(&state, None, account)?;
    validate::program(authorizer_program, &AUTHORIZER_ID)?;
    validate::program(token_program, &state.token_program)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    let decimals = mint_decimals::<TreasurerError>(mint, &state.token_program)?;
    token_account::<TreasurerError>(run_collateral, &state.token_program, &state.collateral_mint, Some(run.address()))?;
    token_account::<TreasurerError>(user_collateral, &state.token_program, &state.collateral_mint, Some(user.address()))?;
    let UserView { phase, slot } = user_view(account, user.address())?;
    record.make_deposit(&state, run.address(), slot.as_ref(), phase, amount).map_err(|e| e.fail())?;
    state.total_deposits = state.total_deposits.checked_add(amount).ok_or_else(|| TreasurerError::MathOverflow.fail())?;

    if amount > 0 {
        TransferChecked {
            program_id: &state.token_program,
            source: user_collateral,
            mint,
            destination: run_collateral,
            authority: user,
            amount,
            decimals,
        }
        .invoke_signed(&[])?;
    }
    let run_seeds = RunSeeds::new(&state);
    let run_seeds = run_seeds.seeds();
    let run_signer = Signer::from(&run_seeds);
    // The Authorizer checks that `authorization` is the PDA of (Run,
    // Participant, scope) and does not exist yet.
    let participant_seeds = ParticipantSeeds::new(&record);
    let participant_seeds = participant_seeds.seeds();
    JoinAuthorization { run, participant, authorization }.create(user, system_program, &run_signer, &Signer::from(&participant_seeds))?;
    store_participant(participant, &record)?;
    store_run(run, &state)?;
    emit(&DEPOSIT_MADE, |w| {
        w.address(run.address())?.address(user.address())?.u64(amount)?.u32(phase.epoch)?;
        Ok(())
    })
}
