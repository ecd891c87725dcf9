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
//!   collateral account, when both are touched.

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
