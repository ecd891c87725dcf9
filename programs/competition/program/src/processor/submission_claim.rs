use psyche_competition_interface::CompetitionError as E;
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::token_account;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_board, check_pool, emit, load_open, load_submission, store_competition, with_board, CompetitionSeeds};
use crate::REWARDS_CLAIMED;

/// submission_claim {}: pays the miner what its entry earned since its last
/// claim, from the pool (the competition PDA signs) into the miner's token
/// account of the reward mint. `NothingToClaim` when there is nothing.
///
/// Accounts: 0. [SIGNER] miner, 1. [WRITE] competition, 2. [WRITE] board,
/// 3. [] submission, 4. [WRITE] pool, 5. [WRITE] miner_tokens,
/// 6. [] reward_mint, 7. [] token_program.
pub fn submission_claim(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [miner, competition, board, submission, pool, miner_tokens, mint, token_program] = validate::accounts::<8>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(miner)?;
    validate::writable(competition)?;
    validate::writable(pool)?;
    validate::writable(miner_tokens)?;
    let mut c = load_open(competition)?;
    check_board(board, &c, competition)?;
    let s = load_submission(submission, competition, miner.address())?;
    // Without a pool nothing is ever earned.
    if with_board(board, |b| b.owed(s.index, miner.address()))? == 0 {
        return Err(E::NothingToClaim.fail());
    }
    let decimals = check_pool(&c, pool, mint, token_program)?;
    token_account::<E>(pool, &c.token_program, &c.reward_mint, Some(competition.address()))?;
    token_account::<E>(miner_tokens, &c.token_program, &c.reward_mint, Some(miner.address()))?;
    let amount = with_board(board, |b| b.claim(&mut c, s.index, miner.address()))?;
    let seeds = CompetitionSeeds::new(&c);
    let seeds = seeds.seeds();
    TransferChecked { program_id: &c.token_program, source: pool, mint, destination: miner_tokens, authority: competition, amount, decimals }
        .invoke_signed(&[Signer::from(&seeds)])?;
    store_competition(competition, &c)?;
    emit(&REWARDS_CLAIMED, |w| {
        w.address(competition.address())?.address(miner.address())?.u64(amount)?;
        Ok(())
    })
}
