//! Invariants checked after every instruction, on the accounts it touched
//! (so a corpus entry, which holds only those, is checked the same way).
//!
//! - lamports conserved over the touched accounts (nothing else can change);
//! - a failed instruction left every touched account as it was;
//! - tokens conserved per mint: the change of the touched token accounts'
//!   balances equals the change of the mint's supply (mint, burn);
//! - every touched Coordinator account satisfies the state invariants of the
//!   logic crate (`psyche_coordinator_logic::invariants::check`, which its
//!   random walk asserts too);
//! - every touched Treasurer Run holds at least its deposits in its
//!   collateral account, when both are touched;
//! - every touched Competition keeps its books with its board and pool (when
//!   the bank holds them): unclaimed == the entries' sum of earned -
//!   claimed, stakes == the validators' stakes, and the pool holds at least
//!   the reserve (unclaimed + stakes + forfeited); its board's round is in a
//!   known state with at most 32 votes and 256 entries.

use std::collections::BTreeMap;

use psyche_coordinator_logic::invariants;
use psyche_coordinator_logic::state::{CoordinatorState, ACCOUNT_SIZE};

use crate::builtins::{read_mint, read_token_account, TOKEN_2022_PROGRAM, TOKEN_PROGRAM};
use crate::keys;
use crate::runtime::{Account, Env, Key, Outcome};

/// `pre`: the touched accounts before the instruction (None: did not exist).
pub fn check(env: &Env, pre: &[(Key, Option<Account>)], out: &Outcome) -> Result<(), String> {
    let post: Vec<(Key, Account)> = pre.iter().map(|(k, _)| (*k, env.get(k))).collect();
    let pre_of = |k: &Key| pre.iter().find(|(p, _)| p == k).and_then(|(_, a)| a.clone()).unwrap_or_default();
    let before: u128 = pre.iter().map(|(_, a)| a.as_ref().map_or(0, |a| a.lamports as u128)).sum();
    let after: u128 = post.iter().map(|(_, a)| a.lamports as u128).sum();
    if before != after {
        return Err(format!("lamports not conserved: {before} -> {after}"));
    }
    if !out.is_ok() {
        for (k, a) in &post {
            if *a != pre_of(k) {
                return Err(format!("failed instruction changed account {}", env.name(k)));
            }
        }
        return Ok(());
    }
    // Tokens, per mint.
    let mut delta: BTreeMap<Key, i128> = BTreeMap::new();
    let token_owner = |a: &Account| a.owner == TOKEN_PROGRAM || a.owner == TOKEN_2022_PROGRAM;
    for (k, a) in &post {
        let p = pre_of(k);
        for (acc, sign) in [(&p, -1i128), (a, 1i128)] {
            if !token_owner(acc) {
                continue;
            }
            if acc.data.len() >= 165 {
                if let Some(t) = read_token_account(&acc.data) {
                    if t.state != 0 {
                        *delta.entry(t.mint).or_default() += sign * t.amount as i128;
                    }
                }
            } else if let Some(m) = read_mint(&acc.data) {
                if m.initialized {
                    *delta.entry(*k).or_default() -= sign * m.supply as i128;
                }
            }
        }
    }
    for (mint, d) in delta {
        if d != 0 && post.iter().any(|(k, _)| *k == mint) {
            return Err(format!("tokens of mint {} not conserved: balances - supply changed by {d}", env.name(&mint)));
        }
        if d != 0 && !post.iter().any(|(k, _)| *k == mint) {
            return Err(format!("token balances of mint {} changed by {d} without the mint", env.name(&mint)));
        }
    }
    for (k, a) in &post {
        if a.owner == keys::COORDINATOR && a.data.len() == ACCOUNT_SIZE && a.data[..8] == psyche_coordinator::COORDINATOR_ACCOUNT {
            with_state(&a.data, invariants::check).map_err(|e| format!("coordinator account {}: {e}", env.name(k)))?;
        }
        if a.owner == keys::TREASURER && a.data.get(..8) == Some(&psyche_treasurer_interface::RUN_ACCOUNT[..]) {
            if let Ok(run) = psyche_treasurer_interface::Run::decode(&a.data) {
                let ata = crate::pda::find_program_address(
                    &[k, &run.token_program.to_bytes(), &run.collateral_mint.to_bytes()],
                    &crate::builtins::ATA_PROGRAM,
                );
                if let Some((ata, _)) = ata {
                    if let Some((_, c)) = post.iter().find(|(p, _)| *p == ata) {
                        if let Some(t) = read_token_account(&c.data) {
                            if t.amount < run.total_deposits {
                                return Err(format!("run {} holds {} tokens, less than its deposits {}", env.name(k), t.amount, run.total_deposits));
                            }
                        }
                    }
                }
            }
        }
    }
    for (k, a) in &post {
        if a.owner == keys::COMPETITION && a.data.get(..8) == Some(&psyche_competition_interface::COMPETITION_ACCOUNT[..]) {
            check_competition(env, a).map_err(|e| format!("competition {}: {e}", env.name(k)))?;
        }
    }
    Ok(())
}

fn check_competition(env: &Env, a: &Account) -> Result<(), String> {
    use psyche_competition_interface::{Board, Competition, RoundState, BOARD_ACCOUNT, MAX_SUBMISSIONS, MAX_VALIDATORS};
    let c = Competition::decode(&a.data).map_err(|e| format!("does not decode: {e:?}"))?;
    let reserve = c.reserve().map_err(|e| format!("reserve: {e:?}"))?;
    if c.has_pool() {
        if let Some(t) = env.accounts.get(&c.pool.to_bytes()).and_then(|p| read_token_account(&p.data)) {
            if t.amount < reserve {
                return Err(format!("the pool holds {} tokens, less than its reserve {reserve}", t.amount));
            }
        }
    } else if reserve != 0 {
        return Err(format!("no pool, yet a reserve of {reserve}"));
    }
    let Some(b) = env.accounts.get(&c.board.to_bytes()).filter(|b| b.owner == keys::COMPETITION) else { return Ok(()) };
    let Some(b) = Board::from_bytes(&b.data).filter(|b| b.discriminator == BOARD_ACCOUNT) else { return Ok(()) };
    if c.closed {
        return Err("closed, with its board open".into());
    }
    if usize::from(b.submission_count.get()) > MAX_SUBMISSIONS || usize::from(b.validator_count) > MAX_VALIDATORS {
        return Err("board counts out of range".into());
    }
    if RoundState::from_u8(b.round.state).is_none() || usize::from(b.round.vote_count) > MAX_VALIDATORS || b.round.entries.get() > b.submission_count.get() {
        return Err(format!("round out of shape: state {}, {} votes", b.round.state, b.round.vote_count));
    }
    let owed: u128 = b.entries().iter().map(|e| u128::from(e.earned.get()) - u128::from(e.claimed.get().min(e.earned.get()))).sum();
    if b.entries().iter().any(|e| e.claimed.get() > e.earned.get()) || owed != u128::from(c.unclaimed) {
        return Err(format!("unclaimed {} != the entries' earned - claimed {owed}", c.unclaimed));
    }
    let staked: u128 = b.validators().iter().map(|v| u128::from(v.stake.get())).sum();
    if staked != u128::from(c.stakes) {
        return Err(format!("stakes {} != the validators' stakes {staked}", c.stakes));
    }
    Ok(())
}

/// Views coordinator account data (discriminator included) as the state,
/// copying it to an aligned buffer when the Vec is not 8-aligned at byte 8.
pub fn with_state<T>(data: &[u8], f: impl FnOnce(&CoordinatorState) -> T) -> T {
    if let Some(s) = CoordinatorState::from_bytes(&data[8..]) {
        return f(s);
    }
    let mut words = vec![0u64; data.len() / 8 + 1];
    // SAFETY: a u64 buffer viewed as bytes, long enough for data.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) };
    bytes[..data.len() - 8].copy_from_slice(&data[8..]);
    f(CoordinatorState::from_bytes(&bytes[..data.len() - 8]).expect("aligned copy"))
}
