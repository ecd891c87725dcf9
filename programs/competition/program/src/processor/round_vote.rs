use psyche_competition_interface::{Ballot, CompetitionError as E, MAX_SUBMISSIONS, MAX_VALIDATORS};
use psyche_sdk::borsh::Reader;
use psyche_sdk::sysvar::Clock;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{absent, check_board, emit, load_open, pool_balance, store_competition, with_board};
use crate::{ROUND_FINALIZED, VALIDATOR_FAULTED, VOTE_CAST};

/// round_vote { round, table_hash, wins, invalid }: an active validator
/// votes on the round being evaluated: the hash of its loss table, each
/// entry's pairwise wins and the entries whose model it found invalid. The
/// vote must fit the round (`BadVote`: one win count per entry, invalid
/// entries among the eligible ones, wins only for valid entries and at most
/// pages * (valid - 1) each) and come by the deadline; it is recorded as its
/// digest (`vote_digest`). The first digest to reach the round's quorum
/// makes the round final: the entries share min(reward_per_round, the
/// pool's tokens beyond its reserve) by weight, invalid entries are
/// excluded until their next commit, and every validator that voted another
/// digest is faulted (its stake forfeited). Later votes on the final round
/// are checked at once: a different digest faults its validator.
///
/// Accounts: 0. [SIGNER] validator, 1. [WRITE] competition, 2. [WRITE] board,
/// 3. [] pool (its balance; the program id without a pool).
pub fn round_vote(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [validator, competition, board, pool] = validate::accounts::<4>(accounts)?;
    let mut r = Reader::new(args);
    let round = r.u64()?;
    let table_hash = r.array()?;
    let n = r.vec_len(2)?;
    if n > MAX_SUBMISSIONS {
        return Err(E::BadVote.fail());
    }
    let mut wins = [0u16; MAX_SUBMISSIONS];
    for w in wins[..n].iter_mut() {
        *w = r.u16()?;
    }
    let invalid = r.array()?;
    r.finish()?;
    validate::signer(validator)?;
    validate::writable(competition)?;
    let mut c = load_open(competition)?;
    check_board(board, &c, competition)?;
    let pool_balance = if c.has_pool() {
        if pool.address() != &c.pool {
            return Err(E::PoolMismatch.fail());
        }
        pool_balance(&c, pool, competition)?
    } else {
        absent(&[pool])?;
        0
    };
    let now = Clock::get()?.slot;
    let ballot = Ballot { validator: validator.address(), round, table_hash, wins: &wins[..n], invalid, now, pool_balance };
    // The stakes before the vote, for the faulted validators' events.
    let mut stakes = [0u64; MAX_VALIDATORS];
    let tally = with_board(board, |b| {
        for (s, v) in stakes.iter_mut().zip(b.validators()) {
            *s = v.stake.get();
        }
        b.vote(&mut c, &ballot)
    })?;
    store_competition(competition, &c)?;
    emit(&VOTE_CAST, |w| {
        w.address(competition.address())?.u64(round)?.address(validator.address())?.bytes(&tally.digest)?;
        Ok(())
    })?;
    if let Some(f) = tally.finalized {
        emit(&ROUND_FINALIZED, |w| {
            w.address(competition.address())?.u64(round)?.bytes(&tally.digest)?.u64(f.paid)?.u64(f.credited)?.u8(f.agreeing)?;
            Ok(())
        })?;
    }
    for (i, &stake) in stakes.iter().enumerate().filter(|&(i, _)| (tally.faulted >> i) & 1 == 1) {
        let key = with_board(board, |b| Ok(b.validators[i].key))?;
        emit(&VALIDATOR_FAULTED, |w| {
            w.address(competition.address())?.u64(round)?.bytes(&key)?.u64(stake)?;
            Ok(())
        })?;
    }
    Ok(())
}
