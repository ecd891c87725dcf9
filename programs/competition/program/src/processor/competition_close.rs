use psyche_sdk::borsh::Reader;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_board, emit, load_open, require_authority, store_competition};
use crate::COMPETITION_CLOSED;

/// competition_close {}: the authority ends the competition once nothing is
/// reserved (every reward claimed, every stake returned, every forfeited
/// stake burned): the board is closed (its rent to `spill`) and the
/// competition marked closed. It keeps its pool: the authority then
/// withdraws the rest (competition_withdraw).
///
/// Accounts: 0. [SIGNER] authority, 1. [WRITE] spill, 2. [WRITE] competition,
/// 3. [WRITE] board.
pub fn competition_close(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, spill, competition, board] = validate::accounts::<4>(accounts)?;
    Reader::new(args).finish()?;
    validate::writable(competition)?;
    let mut c = load_open(competition)?;
    require_authority(&c, authority)?;
    check_board(board, &c, competition)?;
    c.check_closable().map_err(|e| e.fail())?;
    validate::close(board, spill)?;
    c.closed = true;
    store_competition(competition, &c)?;
    emit(&COMPETITION_CLOSED, |w| {
        w.address(competition.address())?;
        Ok(())
    })
}
