use psyche_competition_interface::CompetitionError as E;
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::Signer;
use psyche_sdk::token::token_account;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{absent, check_board, check_pool, emit, load_open, store_competition, with_board, CompetitionSeeds};
use crate::VALIDATOR_LEFT;

/// validator_leave {}: an active validator leaves and takes back its stake
/// (from the pool, the competition PDA signing; the token accounts are the
/// program id when it staked nothing). Refused while its vote is in the
/// round being evaluated (`ValidatorLocked`: a vote against the final
/// result forfeits the stake) and after a fault (`ValidatorFaulted`).
///
/// Accounts: 0. [SIGNER] validator, 1. [WRITE] competition, 2. [WRITE] board,
/// 3. [WRITE] validator_tokens, 4. [WRITE] pool, 5. [] reward_mint,
/// 6. [] token_program.
pub fn validator_leave(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [validator, competition, board, validator_tokens, pool, mint, token_program] = validate::accounts::<7>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(validator)?;
    validate::writable(competition)?;
    let mut c = load_open(competition)?;
    check_board(board, &c, competition)?;
    let held = with_board(board, |b| Ok(b.validator(validator.address()).map_or(0, |v| v.stake.get())))?;
    let decimals = if held > 0 {
        validate::writable(validator_tokens)?;
        validate::writable(pool)?;
        let decimals = check_pool(&c, pool, mint, token_program)?;
        token_account::<E>(validator_tokens, &c.token_program, &c.reward_mint, Some(validator.address()))?;
        token_account::<E>(pool, &c.token_program, &c.reward_mint, Some(competition.address()))?;
        decimals
    } else {
        absent(&[validator_tokens, pool, mint, token_program])?;
        0
    };
    let (index, stake) = with_board(board, |b| b.leave(&mut c, validator.address()))?;
    if stake > 0 {
        let seeds = CompetitionSeeds::new(&c);
        let seeds = seeds.seeds();
        TransferChecked {
            program_id: &c.token_program,
            source: pool,
            mint,
            destination: validator_tokens,
            authority: competition,
            amount: stake,
            decimals,
        }
        .invoke_signed(&[Signer::from(&seeds)])?;
    }
    store_competition(competition, &c)?;
    emit(&VALIDATOR_LEFT, |w| {
        w.address(competition.address())?.address(validator.address())?.u8(index)?.u64(stake)?;
        Ok(())
    })
}
