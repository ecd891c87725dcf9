use psyche_competition_interface::CompetitionError as E;
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::token_account;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_pool, emit, load_competition, pool_balance, require_authority, CompetitionSeeds};
use crate::REWARDS_WITHDRAWN;

/// competition_withdraw { amount }: the authority takes tokens nobody is
/// owed, any time: at most the pool's balance beyond its reserve (rewards
/// credited and not claimed, stakes held, forfeited stakes not burned), so
/// every claim, stake return and burn stays covered. Once closed, nothing is
/// reserved.
///
/// Accounts: 0. [SIGNER] authority, 1. [] competition, 2. [WRITE] pool,
/// 3. [WRITE] destination (a token account of the reward mint),
/// 4. [] reward_mint, 5. [] token_program.
pub fn competition_withdraw(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, competition, pool, destination, mint, token_program] = validate::accounts::<6>(accounts)?;
    let mut r = Reader::new(args);
    let amount = r.u64()?;
    r.finish()?;
    validate::writable(pool)?;
    validate::writable(destination)?;
    let c = load_competition(competition)?;
    require_authority(&c, authority)?;
    let decimals = check_pool(&c, pool, mint, token_program)?;
    let balance = pool_balance(&c, pool, competition)?;
    token_account::<E>(destination, &c.token_program, &c.reward_mint, None)?;
    c.check_withdraw(amount, balance).map_err(|e| e.fail())?;
    let seeds = CompetitionSeeds::new(&c);
    let seeds = seeds.seeds();
    TransferChecked { program_id: &c.token_program, source: pool, mint, destination, authority: competition, amount, decimals }
        .invoke_signed(&[Signer::from(&seeds)])?;
    emit(&REWARDS_WITHDRAWN, |w| {
        w.address(competition.address())?.address(destination.address())?.u64(amount)?;
        Ok(())
    })
}
