use psyche_competition_interface::{Commit, CompetitionError as E, Submission, ID, SUBMISSION_SEED, SUBMISSION_SPACE};
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::Clock;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_board, create_pda, emit, load_open, load_submission, store_submission, with_board};
use crate::SUBMISSION_COMMITTED;

/// submission_commit { commitment, revision, params, repo }: the miner
/// commits a model: `commitment = sha256(checkpoint bytes ‖ miner)`,
/// `revision = sha256(checkpoint bytes)`, found on the hub as
/// `<repo>/<hex revision>.safetensors`. The first commit creates its
/// Submission PDA ["Submission", competition, miner] (the miner pays the
/// rent) and its entry on the board; a later one replaces the model, keeping
/// the one the last round evaluates as `prev` when it has to
/// (`Board::recommit`), and makes an excluded entry active again. Refused
/// while paused, above max_params (`ModelTooLarge`), with 0 params, a repo
/// outside 1..=192 bytes or a full board (`CompetitionFull`).
///
/// Accounts: 0. [WRITE, SIGNER] miner, 1. [] competition, 2. [WRITE] board,
/// 3. [WRITE] submission, 4. [] system_program.
pub fn submission_commit(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [miner, competition, board, submission, system_program] = validate::accounts::<5>(accounts)?;
    let commit = Commit::decode(args)?;
    validate::signer(miner)?;
    validate::writable(miner)?;
    validate::writable(submission)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    let c = load_open(competition)?;
    if c.paused {
        return Err(E::CompetitionPaused.fail());
    }
    check_board(board, &c, competition)?;
    let slot = Clock::get()?.slot;
    let model = commit.model(&c, slot).map_err(|e| e.fail())?;
    let s = if submission.owned_by(&ID) {
        let mut s = load_submission(submission, competition, miner.address())?;
        let shift = with_board(board, |b| b.recommit(s.index, miner.address(), slot))?;
        s.commit(model, shift);
        s
    } else {
        let bump =
            validate::pda(submission, &[SUBMISSION_SEED, competition.address().as_ref(), miner.address().as_ref()], &ID)?;
        let index = with_board(board, |b| b.add_entry(miner.address(), slot))?;
        let bump_seed = [bump];
        let seeds = [
            Seed::from(SUBMISSION_SEED),
            Seed::from(competition.address().as_ref()),
            Seed::from(miner.address().as_ref()),
            Seed::from(&bump_seed),
        ];
        create_pda(miner, submission, SUBMISSION_SPACE, &Signer::from(&seeds))?;
        Submission::new(bump, competition.address().clone(), miner.address().clone(), index, model)
    };
    store_submission(submission, &s)?;
    emit(&SUBMISSION_COMMITTED, |w| {
        w.address(competition.address())?
            .address(miner.address())?
            .u16(s.index)?
            .bytes(&model.commitment)?
            .bytes(&model.revision)?
            .u64(model.params)?
            .u64(slot)?;
        Ok(())
    })
}
