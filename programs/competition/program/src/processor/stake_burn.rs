use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::BurnChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_pool, emit, load_competition, pool_balance, store_competition, CompetitionSeeds};
use crate::STAKES_BURNED;

/// stake_burn {}: anyone burns the stakes faulted validators forfeited, from
/// the pool (SPL `BurnChecked`, the competition PDA signs): the mint's supply
/// drops by as much, and nobody receives them, so nobody gains by faulting
/// anyone. `NothingToBurn` when none are pending.
///
/// Accounts: 0. [WRITE] competition, 1. [WRITE] pool, 2. [WRITE] reward_mint,
/// 3. [] token_program.
pub fn stake_burn(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [competition, pool, mint, token_program] = validate::accounts::<4>(accounts)?;
    Reader::new(args).finish()?;
    validate::writable(competition)?;
    validate::writable(pool)?;
    validate::writable(mint)?;
    let mut c = load_competition(competition)?;
    let amount = c.take_forfeited().map_err(|e| e.fail())?;
    let decimals = check_pool(&c, pool, mint, token_program)?;
    pool_balance(&c, pool, competition)?;
    let seeds = CompetitionSeeds::new(&c);
    let seeds = seeds.seeds();
    BurnChecked { program_id: &c.token_program, account: pool, mint, authority: competition, amount, decimals }
        .invoke_signed(&[Signer::from(&seeds)])?;
    store_competition(competition, &c)?;
    emit(&STAKES_BURNED, |w| {
        w.address(competition.address())?.u64(amount)?;
        Ok(())
    })
}
