use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{Participant, TreasurerError, ID, PARTICIPANT_SEED, PARTICIPANT_SPACE};

use super::{create_pda, load_run, serialized};

/// participant_create {}: the user's claim record for a run, PDA
/// ["Participant", run, user]; rent paid by `payer`.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [SIGNER] user, 2. [] run,
/// 3. [WRITE] participant, 4. [] system_program.
pub fn participant_create(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, user, run, participant, system_program] = validate::accounts::<5>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::signer(user)?;
    validate::writable(participant)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    load_run(run)?;
    let bump = validate::pda(participant, &[PARTICIPANT_SEED, run.address().as_ref(), user.address().as_ref()], &ID)?;
    if !participant.owned_by(&SYSTEM_PROGRAM_ID) {
        return Err(TreasurerError::ParticipantAlreadyExists.fail());
    }
    let bump_seed = [bump];
    let seeds =
        [Seed::from(PARTICIPANT_SEED), Seed::from(run.address().as_ref()), Seed::from(user.address().as_ref()), Seed::from(&bump_seed)];
    create_pda(payer, participant, PARTICIPANT_SPACE, &Signer::from(&seeds))?;
    let p = Participant::new(bump, run.address().clone(), user.address().clone());
    let mut data = participant.try_borrow_mut()?;
    serialized(p.encode(&mut data))
}
