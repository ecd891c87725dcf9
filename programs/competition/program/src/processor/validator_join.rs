use psyche_authorizer_interface::check_authorized;
use psyche_competition_interface::{CompetitionError as E, AUTHORIZER_ID, VALIDATE_SCOPE};
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::token::token_account;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{absent, check_board, check_pool, emit, load_open, store_competition, with_board};
use crate::VALIDATOR_JOINED;

/// validator_join {}: the signer becomes an active validator, staking the
/// competition's `validator_stake` (moved into the pool with SPL
/// `TransferChecked`, the validator signing; with a stake of 0 the token
/// accounts are the program id). A permissioned competition admits only a
/// holder of the Authorizer's authorization ["Authorization", authority,
/// validator or everyone, "CompetitionValidate"] granted by its authority
/// (read in place; the program id when not permissioned). A validator that
/// left comes back in its slot; a faulted one never does.
///
/// Accounts: 0. [WRITE, SIGNER] validator, 1. [WRITE] competition, 2. [WRITE]
/// board, 3. [] authorization, 4. [WRITE] validator_tokens, 5. [WRITE] pool,
/// 6. [] reward_mint, 7. [] token_program.
pub fn validator_join(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [validator, competition, board, authorization, validator_tokens, pool, mint, token_program] =
        validate::accounts::<8>(accounts)?;
    Reader::new(args).finish()?;
    validate::signer(validator)?;
    validate::writable(validator)?;
    validate::writable(competition)?;
    let mut c = load_open(competition)?;
    check_board(board, &c, competition)?;
    if c.permissioned {
        if !check_authorized(authorization, &AUTHORIZER_ID, &c.authority, validator.address(), VALIDATE_SCOPE)? {
            return Err(E::NotAuthorized.fail());
        }
    } else {
        absent(&[authorization])?;
    }
    let stake = c.validator_stake;
    let decimals = if stake > 0 {
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
    let (index, staked) = with_board(board, |b| b.join(&mut c, validator.address()))?;
    if staked > 0 {
        TransferChecked {
            program_id: &c.token_program,
            source: validator_tokens,
            mint,
            destination: pool,
            authority: validator,
            amount: staked,
            decimals,
        }
        .invoke_signed(&[])?;
    }
    store_competition(competition, &c)?;
    emit(&VALIDATOR_JOINED, |w| {
        w.address(competition.address())?.address(validator.address())?.u8(index)?.u64(staked)?;
        Ok(())
    })
}
