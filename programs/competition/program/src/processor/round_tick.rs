use psyche_competition_interface::Tick;
use psyche_sdk::borsh::Reader;
use psyche_sdk::sysvar::{Clock, SlotHashes};
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{check_board, emit, load_open, with_board};
use crate::{ROUND_EXPIRED, ROUND_OPENED, ROUND_SEEDED};

/// round_tick {}: anyone moves the round on, one step per call:
/// - after a round (or before the first), when an entry has a model
///   committed before this slot: opens the next round (its entries, the
///   eligible ones, the rules it keeps); RoundOpened;
/// - an open round, once SlotHashes holds a slot after the opening one:
///   seeds it from the oldest such entry, whose hash nobody could know when
///   the round opened (`round_seed`), and sets the deadline now +
///   round_slots; RoundSeeded;
/// - a round past its deadline without a quorum: expires it (nothing paid,
///   nobody faulted); RoundExpired; also while paused.
///
/// Otherwise `NothingToTick` (`CompetitionPaused` while paused).
///
/// Accounts: 0. [] competition, 1. [WRITE] board.
pub fn round_tick(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [competition, board] = validate::accounts::<2>(accounts)?;
    Reader::new(args).finish()?;
    let c = load_open(competition)?;
    check_board(board, &c, competition)?;
    let now = Clock::get()?.slot;
    let count = SlotHashes::len()?;
    let newest = if count > 0 { Some(SlotHashes::entry(0)?.slot) } else { None };
    let (tick, after, number) = with_board(board, |b| Ok((b.tick_action(&c, now, newest)?, b.round.seed_slot.get(), b.round.number.get())))?;
    match tick {
        Tick::Open => {
            let o = with_board(board, |b| b.open_round(&c, now))?;
            emit(&ROUND_OPENED, |w| {
                w.address(competition.address())?.u64(o.number)?.u64(now)?.u16(o.entries)?.u16(o.eligible)?;
                Ok(())
            })
        }
        Tick::Seed => {
            let e = SlotHashes::oldest_after(after, count)?;
            let (seed, deadline) = with_board(board, |b| {
                b.seed_round(competition.address(), (e.slot, &e.hash), now, c.round_slots);
                Ok((b.round.seed, b.round.deadline_slot.get()))
            })?;
            emit(&ROUND_SEEDED, |w| {
                w.address(competition.address())?.u64(number)?.bytes(&seed)?.u64(e.slot)?.u64(deadline)?;
                Ok(())
            })
        }
        Tick::Expire => {
            with_board(board, |b| {
                b.expire_round();
                Ok(())
            })?;
            emit(&ROUND_EXPIRED, |w| {
                w.address(competition.address())?.u64(number)?;
                Ok(())
            })
        }
    }
}
