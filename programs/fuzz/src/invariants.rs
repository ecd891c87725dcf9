//! Invariants checked after every instruction, on the accounts it touched
//! (so a corpus entry, which holds only those, is checked the same way).
//!
//! - lamports conserved over the touched accounts (nothing else can change);
//! - a failed instruction left every touched account as it was;
//! - tokens conserved per mint: the change of the touched token accounts'
//!   balances equals the change of the mint's supply (mint, burn);
//! - every touched Coordinator account satisfies the state invariants of the
//!   logic crate's random walk (`machine_tests::random_walk`), ported here;
//! - every touched Treasurer Run holds at least its deposits in its
//!   collateral account, when both are touched.

use std::collections::BTreeMap;

use psyche_coordinator_logic::state::RunState;
use psyche_coordinator_logic::selection;
use psyche_coordinator_logic::state::{commit_flags, dispute_state, verdict, CoordinatorState, ACCOUNT_SIZE, MAX_CLIENTS, VESTING_BUCKETS};

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
            with_state(&a.data, coordinator).map_err(|e| format!("coordinator account {}: {e}", env.name(k)))?;
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

macro_rules! ensure {
    ($c:expr, $($msg:tt)*) => {
        if !$c {
            return Err(format!($($msg)*));
        }
    };
}

/// The per-step checks of `random_walk` in the logic's machine_tests.rs.
pub fn coordinator(s: &CoordinatorState) -> Result<(), String> {
    let state = s.run_state().map_err(|e| format!("run_state: {e:?}"))?;
    ensure!(usize::from(s.epoch.clients_len) <= MAX_CLIENTS, "epoch.clients_len {}", s.epoch.clients_len);
    if matches!(state, RunState::RoundTrain | RunState::RoundWitness) {
        let r = s.current_round();
        ensure!(r.clients_len == s.epoch.clients_len, "round clients {} != epoch clients {}", r.clients_len, s.epoch.clients_len);
        ensure!(r.batch_size >= r.clients_len, "batch {} < clients {}", r.batch_size, r.clients_len);
        ensure!(r.witnesses_len <= r.witness_count, "witnesses {} > elected {}", r.witnesses_len, r.witness_count);
        ensure!(u32::from(r.inner_steps) == s.model.inner_steps, "round inner steps {} != model {}", r.inner_steps, s.model.inner_steps);
        ensure!(
            s.progress.data_index == r.data_index.wrapping_add(u64::from(r.batch_size) * u64::from(r.inner_steps)),
            "data cursor {} != round start {} + {} * {}",
            s.progress.data_index,
            r.data_index,
            r.batch_size,
            r.inner_steps
        );
        ensure!((r.verify_seed == [0; 32]) == (state == RunState::RoundTrain), "verify seed drawn exactly when RoundTrain ends");
        for (i, c) in r.commits[..usize::from(r.clients_len).min(r.commits.len())].iter().enumerate() {
            if c.verdict != verdict::NONE {
                ensure!(c.flags & commit_flags::COMMITTED != 0, "verdict on an uncommitted commitment {i}");
                ensure!(state == RunState::RoundWitness, "verdict outside RoundWitness");
                ensure!(
                    selection::verifier(&r.verify_seed, i as u16, r.clients_len) == Some(c.verifier),
                    "commitment {i} judged by a verifier not drawn"
                );
            }
            ensure!(c.flags == 0 || s.config.verification_percent > 0, "commitment {i} while verification is off");
        }
    }
    for k in 0..usize::from(s.epoch.clients_len) {
        let Some((e, slot)) = s.epoch_client(k) else { return Err(format!("epoch client {k} has no slot")) };
        ensure!(slot.in_epoch == 1, "epoch client {k} not marked in_epoch");
        ensure!(e.state != 0, "epoch client {k} has no state");
    }
    let in_epoch = s.clients.iter().filter(|c| c.in_epoch != 0).count();
    ensure!(in_epoch == usize::from(s.epoch.clients_len), "{in_epoch} slots in_epoch, epoch has {}", s.epoch.clients_len);
    let mut ids = std::collections::BTreeSet::new();
    for d in s.disputes.iter().filter(|d| d.state != dispute_state::FREE) {
        ensure!(d.state <= dispute_state::UNRESOLVED && d.id >= 1 && d.id <= s.disputes_opened, "dispute {} state {}", d.id, d.state);
        ensure!(ids.insert(d.id), "dispute id {} twice", d.id);
        if d.state == dispute_state::OPEN {
            ensure!(s.progress.step <= d.deadline_step, "open dispute {} past its deadline", d.id);
            ensure!(d.committee_len > 0, "open dispute {} without committee", d.id);
        }
    }
    for c in s.clients.iter().filter(|c| c.has_fault != 0) {
        ensure!(c.last_fault_epoch <= s.progress.epoch, "fault epoch {} > epoch {}", c.last_fault_epoch, s.progress.epoch);
    }
    if state == RunState::Finished {
        ensure!(s.disputes.iter().all(|d| d.state != dispute_state::OPEN), "Finished with an open dispute");
        ensure!(s.clients.iter().all(|c| c.unvested == [0; VESTING_BUCKETS]), "Finished with unvested points");
    }
    // check_dispute_counts.
    let mut want = [0u32; MAX_CLIENTS];
    for d in s.disputes.iter().filter(|d| d.state == dispute_state::OPEN) {
        for &c in [d.trainer_slot, d.accuser_slot].iter().chain(&d.committee[..usize::from(d.committee_len).min(d.committee.len())]) {
            if let Some(w) = want.get_mut(usize::from(c)) {
                *w += 1;
            }
        }
    }
    for (i, c) in s.clients.iter().enumerate() {
        ensure!(u32::from(c.open_disputes) == want[i], "slot {i}: open_disputes {} != {}", c.open_disputes, want[i]);
    }
    Ok(())
}
