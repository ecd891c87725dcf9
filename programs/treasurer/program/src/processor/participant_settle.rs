use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::Signer;
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{Participant, TreasurerError, COORDINATOR_ID, ID, PARTICIPANT_SEED, PARTICIPANT_SPACE};

use super::{
    create_pda, emit, load_participant, load_run, require_coordinator, store_participant, store_run, ParticipantSeeds,
    RunSeeds,
};
use crate::coordinator::{user_view, Authority, SETTLE_POINTS};
use crate::POINTS_SETTLED;

/// participant_settle {}: anyone moves `user`'s earned and slashed points
/// from its Coordinator slot into its Participant record (settle_points by
/// CPI, signed by the Run), so that the slot can be reused once nothing else
/// holds it (pending, in the epoch, unvested or burned points, an open
/// dispute). It pays nothing: the record keeps the points, the run reserves
/// what the record now owes (`Run::unclaimed_settled_points`), and the
/// user's later claim pays exactly what it would have paid without the
/// settle. The slot's latest fault is recorded, as a claim does (the slot
/// may be reused and forget it). The record is created when the user has
/// none, its rent paid by `payer`. `NothingToSettle` when the slot holds no
/// earned or slashed points, `UserNotInRun` when the user has no slot.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [] user (the wallet; not a signer),
/// 2. [WRITE] run, 3. [WRITE] participant (its PDA, created or not),
/// 4. [] coordinator_instance, 5. [WRITE] coordinator_account,
/// 6. [] coordinator_program, 7. [] system_program.
pub fn participant_settle(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, wallet, run, participant, instance, account, coordinator_program, system_program] = validate::accounts::<8>(accounts)?;
    Reader::new(args).finish()?;
    let user = wallet.address();
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::writable(run)?;
    validate::writable(participant)?;
    let mut state = load_run(run)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    let create = !participant.owned_by(&ID);
    let mut record = if create {
        let bump = validate::pda(participant, &[PARTICIPANT_SEED, run.address().as_ref(), user.as_ref()], &ID)?;
        Participant::new(bump, run.address().clone(), user.clone())
    } else {
        load_participant(participant, run, user)?
    };
    let slot = user_view(account, user)?.slot.ok_or_else(|| TreasurerError::UserNotInRun.fail())?;
    record.observe_fault(Some(&slot));
    let claimable = state.settle(&mut record, slot.earned, slot.slashed).map_err(|e| e.fail())?;

    if create {
        let seeds = ParticipantSeeds::new(&record);
        let seeds = seeds.seeds();
        create_pda(payer, participant, PARTICIPANT_SPACE, &Signer::from(&seeds))?;
    }
    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let mut data = [0u8; 8 + 32];
    data[..8].copy_from_slice(&SETTLE_POINTS);
    data[8..].copy_from_slice(user.as_ref());
    Authority { run, instance, account }.invoke(&data, &Signer::from(&seeds))?;
    store_participant(participant, &record)?;
    store_run(run, &state)?;
    emit(&POINTS_SETTLED, |w| {
        w.address(run.address())?.address(user)?.u64(slot.earned)?.u64(slot.slashed)?.u64(claimable)?;
        Ok(())
    })
}
