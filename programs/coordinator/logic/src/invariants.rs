//! The invariants of a Coordinator state, one implementation for every
//! checker: the random walk of machine_tests.rs asserts them after each step,
//! and psyche-fuzz checks them on every Coordinator account an instruction
//! touched. The program never calls `check`, so it is dead-stripped from the
//! .so.
//!
//! `check` holds between instructions, whatever succeeded or failed:
//! - the run state tag is valid;
//! - the epoch lists at most MAX_CLIENTS members, each in an `in_epoch`
//!   slot with a state, and exactly those slots are `in_epoch`;
//! - during RoundTrain/RoundWitness the current round has the epoch's
//!   members, at least one sequence per member, no more witnesses than
//!   elected, the model's inner steps, the data cursor right after its
//!   batch, a verify seed drawn only in RoundWitness of a verifying run,
//!   `unjudged` counting the sampled commitments without a verdict; verdicts
//!   only in RoundWitness, on commitments, from the drawn verifier;
//!   commitments only while verification is on;
//! - used dispute slots have a valid state and distinct ids in
//!   1..=disputes_opened; open ones are within their deadline and have a
//!   committee;
//! - no client's fault is of a later epoch than the current one;
//! - Finished leaves no open dispute and no unvested points;
//! - each slot's `open_disputes` counts the open disputes it is trainer,
//!   accuser or committee member of.

use core::fmt;

use crate::selection;
use crate::state::{client_state, commit_flags, dispute_state, verdict, CoordinatorState, RunState, MAX_CLIENTS, VESTING_BUCKETS};

/// The first invariant `check` found broken: a static description and up to
/// three named numbers of the case (the slot, dispute id, values compared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    pub what: &'static str,
    /// Named numbers, `None` after the last one.
    pub context: [Option<(&'static str, u64)>; 3],
}

impl Violation {
    pub const fn new(what: &'static str) -> Self {
        Violation { what, context: [None; 3] }
    }

    /// Adds a named number (dropped past the third).
    pub fn with(mut self, name: &'static str, value: u64) -> Self {
        if let Some(free) = self.context.iter_mut().find(|c| c.is_none()) {
            *free = Some((name, value));
        }
        self
    }
}

/// "what (name value, name value)".
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)?;
        for (i, (name, value)) in self.context.iter().flatten().enumerate() {
            f.write_str(if i == 0 { " (" } else { ", " })?;
            write!(f, "{name} {value}")?;
        }
        if self.context[0].is_some() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Returns the violation unless `$cond`; the context is evaluated only then.
macro_rules! ensure {
    ($cond:expr, $what:expr $(, $name:literal = $value:expr)* $(,)?) => {
        if !$cond {
            return Err(Violation::new($what)$(.with($name, $value))*);
        }
    };
}

/// Checks every invariant of `s` (see the module documentation).
pub fn check(s: &CoordinatorState) -> Result<(), Violation> {
    let Ok(state) = s.run_state() else {
        return Err(Violation::new("corrupt run state").with("version", s.version).with("run_state", u64::from(s.run_state)));
    };
    let members = usize::from(s.epoch.clients_len);
    ensure!(members <= MAX_CLIENTS, "epoch has more than MAX_CLIENTS members", "clients_len" = u64::from(s.epoch.clients_len));
    if matches!(state, RunState::RoundTrain | RunState::RoundWitness) {
        check_round(s, state)?;
    }
    for k in 0..members {
        let Some((e, slot)) = s.epoch_client(k) else {
            return Err(Violation::new("epoch member without a slot").with("member", k as u64));
        };
        ensure!(slot.in_epoch == 1, "epoch member's slot not marked in_epoch", "member" = k as u64, "in_epoch" = u64::from(slot.in_epoch));
        ensure!(e.state != 0, "epoch member without a state", "member" = k as u64);
    }
    let in_epoch = s.clients.iter().filter(|c| c.in_epoch != 0).count();
    ensure!(in_epoch == members, "slots in_epoch != epoch members", "in_epoch" = in_epoch as u64, "clients_len" = members as u64);
    check_disputes(s)?;
    for (i, c) in s.clients.iter().enumerate().filter(|(_, c)| c.has_fault != 0) {
        ensure!(
            c.last_fault_epoch <= s.progress.epoch,
            "fault of a later epoch",
            "slot" = i as u64,
            "last_fault_epoch" = u64::from(c.last_fault_epoch),
            "epoch" = u64::from(s.progress.epoch),
        );
    }
    if state == RunState::Finished {
        for d in &s.disputes {
            ensure!(d.state != dispute_state::OPEN, "Finished with an open dispute", "id" = d.id);
        }
        for (i, c) in s.clients.iter().enumerate() {
            ensure!(c.unvested == [0; VESTING_BUCKETS], "Finished with unvested points", "slot" = i as u64);
        }
    }
    check_dispute_counts(s)
}

/// The current round, in RoundTrain or RoundWitness.
fn check_round(s: &CoordinatorState, state: RunState) -> Result<(), Violation> {
    let r = s.current_round();
    ensure!(
        r.clients_len == s.epoch.clients_len,
        "round members != epoch members",
        "round" = u64::from(r.clients_len),
        "epoch" = u64::from(s.epoch.clients_len),
    );
    ensure!(
        r.batch_size >= r.clients_len,
        "a member trains no sequence: batch < members",
        "batch_size" = u64::from(r.batch_size),
        "clients_len" = u64::from(r.clients_len),
    );
    ensure!(
        r.witnesses_len <= r.witness_count,
        "more witnesses than elected",
        "witnesses_len" = u64::from(r.witnesses_len),
        "witness_count" = u64::from(r.witness_count),
    );
    ensure!(
        u32::from(r.inner_steps) == s.model.inner_steps,
        "round inner steps != model's",
        "round" = u64::from(r.inner_steps),
        "model" = u64::from(s.model.inner_steps),
    );
    // u16 x u16 fits a u64; the sum overflows only in a broken state.
    let end = r.data_index.checked_add(u64::from(r.batch_size).saturating_mul(u64::from(r.inner_steps)));
    ensure!(
        end == Some(s.progress.data_index),
        "data cursor != round start + batch x inner steps",
        "data_index" = s.progress.data_index,
        "round_start" = r.data_index,
        "sequences" = u64::from(r.batch_size).saturating_mul(u64::from(r.inner_steps)),
    );
    let drawn = r.verify_seed != [0; 32];
    ensure!(!drawn || (state == RunState::RoundWitness && s.config.verification_percent > 0), "verify seed drawn before RoundWitness or without verification");
    // Before the draw nothing is judged; after it `unjudged` counts exactly
    // the commitments that must be verified and have no verdict.
    let open = if drawn {
        (0..r.clients_len).filter(|&i| s.must_verify(r, i) && r.commits[usize::from(i)].verdict == verdict::NONE).count()
    } else {
        0
    };
    ensure!(usize::from(r.unjudged) == open, "unjudged count is off", "unjudged" = u64::from(r.unjudged), "open" = open as u64);
    let Some(commits) = r.commits.get(..usize::from(r.clients_len)) else {
        return Err(Violation::new("round has more members than commitments").with("clients_len", u64::from(r.clients_len)));
    };
    for (i, c) in commits.iter().enumerate() {
        if c.verdict != verdict::NONE {
            ensure!(c.flags & commit_flags::COMMITTED != 0, "verdict on an uncommitted commitment", "member" = i as u64);
            ensure!(state == RunState::RoundWitness, "verdict outside RoundWitness", "member" = i as u64);
            // i < clients_len, a u16.
            // The drawn verifier, or another member once the drawn one is
            // no longer healthy (the fallback depends on health at the
            // verdict, which may have changed since).
            let drawn = u16::try_from(i).ok().and_then(|i| selection::verifier(&r.verify_seed, i, r.clients_len));
            let drawn_healthy = drawn.is_some_and(|d| s.epoch.clients[usize::from(d) % MAX_CLIENTS].state == client_state::HEALTHY);
            ensure!(
                drawn == Some(c.verifier) || (!drawn_healthy && usize::from(c.verifier) != i && c.verifier < r.clients_len),
                "commitment judged by a verifier not drawn",
                "member" = i as u64,
                "verifier" = u64::from(c.verifier),
            );
        }
        ensure!(c.flags == 0 || s.config.verification_percent > 0, "commitment while verification is off", "member" = i as u64);
    }
    Ok(())
}

/// Used dispute slots: state, unique ids, open ones' deadline and committee.
fn check_disputes(s: &CoordinatorState) -> Result<(), Violation> {
    let used = |d: &&crate::state::Dispute| d.state != dispute_state::FREE;
    for (i, d) in s.disputes.iter().enumerate().filter(|(_, d)| used(d)) {
        ensure!(d.state <= dispute_state::REFUTED, "dispute in an unknown state", "id" = d.id, "state" = u64::from(d.state));
        ensure!(d.id >= 1 && d.id <= s.disputes_opened, "dispute id not in 1..=disputes_opened", "id" = d.id, "disputes_opened" = s.disputes_opened);
        // Note: i < MAX_DISPUTES, so i + 1 cannot overflow.
        #[allow(clippy::arithmetic_side_effects)]
        let later = &s.disputes[i + 1..];
        ensure!(!later.iter().filter(used).any(|e| e.id == d.id), "dispute id used twice", "id" = d.id);
        if d.state == dispute_state::OPEN {
            ensure!(
                s.progress.step <= d.deadline_step,
                "open dispute past its deadline",
                "id" = d.id,
                "step" = u64::from(s.progress.step),
                "deadline_step" = u64::from(d.deadline_step),
            );
            ensure!(d.committee_len > 0, "open dispute without a committee", "id" = d.id);
        }
    }
    Ok(())
}

/// Each slot's `open_disputes` counts the open disputes it takes part in
/// (part of `check`).
pub fn check_dispute_counts(s: &CoordinatorState) -> Result<(), Violation> {
    let mut want = [0u32; MAX_CLIENTS];
    for d in s.disputes.iter().filter(|d| d.state == dispute_state::OPEN) {
        let Some(committee) = d.committee.get(..usize::from(d.committee_len)) else {
            return Err(Violation::new("open dispute with a committee too large").with("id", d.id).with("committee_len", u64::from(d.committee_len)));
        };
        for &slot in [d.trainer_slot, d.accuser_slot].iter().chain(committee) {
            let Some(w) = want.get_mut(usize::from(slot)) else {
                return Err(Violation::new("open dispute names a slot out of range").with("id", d.id).with("slot", u64::from(slot)));
            };
            // At most 2 + COMMITTEE_SIZE per dispute, over MAX_DISPUTES.
            *w = w.saturating_add(1);
        }
    }
    for (i, (c, &want)) in s.clients.iter().zip(&want).enumerate() {
        ensure!(
            u32::from(c.open_disputes) == want,
            "slot's open_disputes != its open disputes",
            "slot" = i as u64,
            "open_disputes" = u64::from(c.open_disputes),
            "want" = u64::from(want),
        );
    }
    Ok(())
}
