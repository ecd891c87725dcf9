//! The run state machine and every instruction's logic, as methods on the
//! account state. Each public method validates everything before it changes
//! anything, so a rejected instruction leaves the account bytes as they were
//! (the runtime would revert them anyway; tests check we do not rely on it).
//! Every successful call that changes the state bumps `nonce` (all but
//! `report_eval` and `report_prompt`, which only emit an event).

use crate::bloom::Bloom;
use crate::config::{f32_unit, nonempty_str};
use crate::error::CoordinatorError as E;
use crate::event::{Event, Events};
use crate::selection::{self, Entropy};
use crate::state::client_state::{DROPPED, FAULTED, HEALTHY, LEFT};
use crate::state::commit_flags::{COMMITTED, FRESH, PROBATION};
use crate::state::*;

/// Rounds still run after `epoch_time` is up: a round's results are applied
/// during the next one, so two more rounds drain the pipeline before Cooldown.
pub const DRAIN_ROUNDS: u32 = 2;

/// Rounds after the disputed one in which a dispute can be settled: it is
/// open until the run's step passes `step + DISPUTE_ROUNDS`.
pub const DISPUTE_ROUNDS: u32 = 2;

/// Height of the first round whose predecessor can be health-checked: the first
/// round of an epoch is exempt because late joiners may still be loading. With
/// overlapped rounds it is one later (`first_health_check_height`).
pub const FIRST_HEALTH_CHECK_HEIGHT: u32 = 2;

/// Open disputes one accuser may hold at once: an eighth of the table, so
/// that filling it takes eight colluding verifiers.
pub const MAX_OPEN_PER_ACCUSER: usize = MAX_DISPUTES / 8;

/// What the instruction glue reads from sysvars for every state transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Clock::unix_timestamp, in seconds.
    pub unix_timestamp: i64,
    /// Clock::slot.
    pub slot: u64,
    /// Latest SlotHashes entry, mixed into round seeds.
    pub entropy: Entropy,
    /// The oldest SlotHashes entry of a slot after `CoordinatorState::
    /// draw_after()`, when that asks for one and SlotHashes has one: the
    /// verify seed's entropy.
    pub drawn: Option<Entropy>,
}

/// Arguments of `update`: each part present is validated and replaced.
#[derive(Clone, Copy, Debug, Default)]
pub struct Update<'a> {
    pub metadata: Option<&'a RunMetadata>,
    pub config: Option<&'a CoordinatorConfig>,
    pub model: Option<&'a Model>,
    pub progress: Option<&'a Progress>,
}

/// Arguments of `witness` (loss, throughput and other metadata travel in the
/// transaction for indexers but are not stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WitnessReport {
    /// The step of the round being witnessed (stale reports are rejected).
    pub step: u32,
    /// The witness's index in the round's client list.
    pub index: u16,
    pub participant_bloom: Bloom,
    pub broadcast_bloom: Bloom,
    pub broadcast_merkle: [u8; 32],
}

/// Arguments of `health_check`: the accused by index and signer, for the
/// previous round of the current epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    /// The current round's step (the previous round is judged).
    pub step: u32,
    pub index: u16,
    pub accused: [u8; 32],
}

/// Arguments of `checkpoint`: where the latest model was uploaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointRepo {
    pub repo: [u8; URL_LEN],
    pub revision: [u8; REVISION_LEN],
}

/// Arguments of `report_eval`: a client's score of the model after `step` on
/// one benchmark task. Scores are f32 bits (the program has no floats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalReport<'a> {
    /// The optimizer step after which the model was evaluated.
    pub step: u32,
    /// The task's name: 1..=EVAL_TASK_LEN bytes of UTF-8 without NUL.
    pub task: &'a [u8],
    /// Accuracy and length-normalized accuracy, in [0, 1].
    pub acc: u32,
    pub acc_norm: u32,
    /// Items scored.
    pub count: u32,
}

/// Arguments of `report_prompt`: the tokens a client's model after `step`
/// generated as the continuation of one of the clients' fixed prompts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptReport<'a> {
    /// The optimizer step after which the model generated.
    pub step: u32,
    /// The prompt's index in the clients' list (the program does not know it).
    pub prompt: u16,
    /// The generated token ids, little-endian u32 each (the instruction's
    /// bytes, unaligned): 1..=PROMPT_TOKENS_LEN of them, each below vocab_size.
    pub tokens: &'a [[u8; 4]],
}

/// Arguments of `commit`: a member's commitment to its step in the current
/// round (only in RoundTrain, only while verification is on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitArgs {
    /// The current round's step.
    pub step: u32,
    /// The member's index in the round.
    pub index: u16,
    /// SHA-256 of the payload bytes.
    pub payload: [u8; 32],
    /// SHA-256 of the member's private replay state before and after the step.
    pub state_before: [u8; 32],
    pub state_after: [u8; 32],
    /// 1: `state_before` is a fresh, zero-momentum state; 0: it continues the
    /// member's previous commitment (`ClientSlot::state_after`).
    pub fresh: u8,
}

/// Arguments of `verify`: the verifier's verdict on a trainer's commitment
/// of the current round (only in RoundWitness).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyArgs {
    pub step: u32,
    /// The verifier's index in the round.
    pub verifier_index: u16,
    /// The trainer's index in the round.
    pub index: u16,
    /// A `verdict` tag: MATCH, MISMATCH or NO_DATA.
    pub verdict: u8,
    /// The verifier's own replay hashes (zero for MATCH and NO_DATA).
    pub claimed_payload: [u8; 32],
    pub claimed_after: [u8; 32],
}

/// Arguments of `answer_dispute`: the accused trainer's rerun of the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisputeAnswer {
    pub id: u64,
    pub rerun_payload: [u8; 32],
    pub rerun_after: [u8; 32],
}

/// Arguments of `judge_dispute`: a committee member's vote (a `verdict` tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisputeVote {
    pub id: u64,
    pub vote: u8,
}

type Key = [u8; 32];

/// The empty client slot a new signer starts from.
const EMPTY_SLOT: ClientSlot = ClientSlot {
    signer: [0; 32],
    p2p_identity: [0; 32],
    earned: 0,
    slashed: 0,
    last_finished_epoch: 0,
    occupied: 0,
    pending: 0,
    in_epoch: 0,
    has_finished: 0,
    state_after: [0; 32],
    unvested: [0; VESTING_BUCKETS],
    burned: 0,
    last_fault_epoch: 0,
    has_fault: 0,
    forgiven: 0,
    open_disputes: 0,
    checkpointer: 0,
};

/// Seconds from `since` to `now`, 0 if the clock has not moved forward.
fn elapsed(now: i64, since: i64) -> u64 {
    if now > since {
        // now > since, so the two's-complement difference is the true distance.
        (now as u64).wrapping_sub(since as u64)
    } else {
        0
    }
}

fn valid_id_str(s: &[u8], max: usize) -> bool {
    !s.is_empty() && s.len() <= max && !s.contains(&0) && core::str::from_utf8(s).is_ok()
}

impl CoordinatorState {
    /// Initializes a zeroed account for `run_id`.
    pub fn init(&mut self, run_id: &[u8], client_version: &[u8]) -> Result<(), E> {
        if self.version != 0 {
            return Err(E::AlreadyInitialized);
        }
        if !valid_id_str(run_id, RUN_ID_LEN) {
            return Err(E::InvalidRunId);
        }
        if !valid_id_str(client_version, CLIENT_VERSION_LEN) {
            return Err(E::InvalidClientVersion);
        }
        self.version = STATE_VERSION;
        self.nonce = 0;
        self.run_id = [0; RUN_ID_LEN];
        self.run_id[..run_id.len()].copy_from_slice(run_id);
        self.client_version = [0; CLIENT_VERSION_LEN];
        self.client_version[..client_version.len()].copy_from_slice(client_version);
        self.seed = selection::genesis_seed(run_id);
        self.run_state = RunState::Uninitialized as u8;
        Ok(())
    }

    /// The current phase; fails on an uninitialized or corrupt account.
    pub fn run_state(&self) -> Result<RunState, E> {
        if self.version != STATE_VERSION {
            return Err(E::CorruptState);
        }
        RunState::from_u8(self.run_state).ok_or(E::CorruptState)
    }

    /// The round in progress (meaningful in RoundTrain, RoundWitness, Cooldown).
    pub fn current_round(&self) -> &Round {
        &self.epoch.rounds[usize::from(self.epoch.rounds_head) % NUM_STORED_ROUNDS]
    }

    fn current_round_mut(&mut self) -> &mut Round {
        &mut self.epoch.rounds[usize::from(self.epoch.rounds_head) % NUM_STORED_ROUNDS]
    }

    /// Whether the commitment of member `index` of `round` must be verified:
    /// never while verification is off or without a commitment; otherwise
    /// when its member was on probation as it committed (first epoch in the
    /// run, or a recent fault: `commit_flags::PROBATION`), or when the
    /// round's verify seed samples it.
    pub fn must_verify(&self, round: &Round, index: u16) -> bool {
        let percent = self.config.verification_percent;
        let Some(c) = round.commits.get(usize::from(index)).filter(|_| index < round.clients_len) else {
            return false;
        };
        percent > 0
            && c.flags & COMMITTED != 0
            && (c.flags & PROBATION != 0 || selection::sampled(&round.verify_seed, index, percent))
    }

    /// Who judges the commitment of member `index` of `round` (the current
    /// one): the verifier the seed drew, or, once that one is no longer a
    /// healthy member (faulted, dropped or left during the round), the
    /// fallback the seed fixes among the healthy ones, so that an honest
    /// contribution is not left out because its verifier was removed.
    pub fn verifier_of(&self, round: &Round, index: u16) -> Option<u16> {
        let n = round.clients_len;
        let healthy = |i: u16| self.epoch.clients.get(usize::from(i)).is_some_and(|e| e.state == HEALTHY);
        match selection::verifier(&round.verify_seed, index, n)? {
            d if healthy(d) => Some(d),
            d => selection::fallback_verifier(&round.verify_seed, index, d, n, healthy),
        }
    }

    /// The slot after which the glue must look up the verify seed's entropy
    /// (`Clock::drawn`): RoundTrain's last slot, while a verifying round
    /// waits in RoundWitness for its seed.
    pub fn draw_after(&self) -> Option<u64> {
        let r = self.current_round();
        let waiting = self.run_state == RunState::RoundWitness as u8
            && self.config.verification_percent > 0
            && r.verify_seed == [0; 32];
        waiting.then_some(r.verify_slot)
    }

    /// Whether the member at `index` of the current epoch is on probation:
    /// its first epoch in the run (it never finished one) or a fault this
    /// epoch or the previous one.
    pub fn on_probation(&self, index: u16) -> bool {
        self.epoch_client(usize::from(index))
            .is_some_and(|(_, slot)| slot.has_finished == 0 || slot.on_probation(self.progress.epoch))
    }

    /// The round before the current one in the ring buffer.
    pub fn previous_round(&self) -> &Round {
        // Note: rounds_head is a u8, so the sum is at most 255 + 3.
        #[allow(clippy::arithmetic_side_effects)]
        let prev = (usize::from(self.epoch.rounds_head) + NUM_STORED_ROUNDS - 1) % NUM_STORED_ROUNDS;
        &self.epoch.rounds[prev]
    }

    /// The registered client behind epoch entry `index`.
    pub fn epoch_client(&self, index: usize) -> Option<(&EpochClient, &ClientSlot)> {
        if index >= self.epoch_len() {
            return None;
        }
        let e = &self.epoch.clients[index];
        Some((e, &self.clients[usize::from(e.slot) % MAX_CLIENTS]))
    }

    /// Height of the first round of an epoch that accepts health checks. With
    /// overlapped rounds (`config.overlap == 1`) round r's witnesses' participant
    /// filters refer to round r-1's members' deliveries, so the checks of round
    /// r judge round r-2's trainers: one round later than without overlap, so
    /// that the first round of the epoch stays exempt.
    pub fn first_health_check_height(&self) -> u32 {
        if self.config.overlap != 0 {
            FIRST_HEALTH_CHECK_HEIGHT.saturating_add(1)
        } else {
            FIRST_HEALTH_CHECK_HEIGHT
        }
    }

    /// Inner steps of the next round: the model's `inner_steps` (validated to
    /// 1..=MAX_INNER_STEPS when the run resumed; clamped here all the same).
    pub fn next_inner_steps(&self) -> u16 {
        let h = self.model.inner_steps.clamp(1, MAX_INNER_STEPS);
        // h <= MAX_INNER_STEPS = 1000.
        h as u16
    }

    /// Global batch size of the next round, from the data cursor.
    pub fn next_batch_size(&self) -> u16 {
        let tokens = selection::tokens_before(self.progress.data_index, self.model.max_seq_len);
        let c = &self.config;
        selection::batch_size(c.global_batch_size_start, c.global_batch_size_end, c.global_batch_size_warmup_tokens, tokens)
    }

    // ----- authority instructions -----

    /// `update`: metadata at any time before the run finishes; config, model and
    /// progress only while halted.
    pub fn update(&mut self, u: &Update) -> Result<(), E> {
        let s = self.run_state()?;
        if s == RunState::Finished {
            return Err(E::RunFinished);
        }
        let touches_run = u.config.is_some() || u.model.is_some() || u.progress.is_some();
        if touches_run && !matches!(s, RunState::Uninitialized | RunState::Paused) {
            return Err(E::RunNotHalted);
        }
        if let Some(m) = u.metadata {
            m.validate()?;
        }
        let config = u.config.copied().unwrap_or(self.config);
        if let Some(c) = u.config {
            c.validate()?;
        }
        let config_ok = config.validate().is_ok();
        if let Some(m) = u.model {
            if config_ok {
                m.validate_with(&config)?;
            } else {
                m.validate()?;
            }
        }
        if let Some(p) = u.progress {
            if p.step == 0 || (config_ok && p.validate(&config).is_err()) {
                return Err(E::InvalidProgress);
            }
        }
        if let Some(m) = u.metadata {
            self.metadata = *m;
        }
        self.config = config;
        if let Some(m) = u.model {
            self.model = *m;
        }
        if let Some(p) = u.progress {
            self.progress = *p;
        }
        self.bump();
        Ok(())
    }

    /// `update_client_version`: only while halted.
    pub fn update_client_version(&mut self, version: &[u8]) -> Result<(), E> {
        match self.run_state()? {
            RunState::Finished => return Err(E::RunFinished),
            RunState::Uninitialized | RunState::Paused => {}
            _ => return Err(E::RunNotHalted),
        }
        if !valid_id_str(version, CLIENT_VERSION_LEN) {
            return Err(E::InvalidClientVersion);
        }
        self.client_version = [0; CLIENT_VERSION_LEN];
        self.client_version[..version.len()].copy_from_slice(version);
        self.bump();
        Ok(())
    }

    /// `set_future_epoch_rates`: takes effect when the next epoch forms.
    pub fn set_future_epoch_rates(&mut self, earning: Option<u64>, slashing: Option<u64>) -> Result<(), E> {
        if self.run_state()? == RunState::Finished {
            return Err(E::RunFinished);
        }
        if let Some(e) = earning {
            self.future_rates.earning_rate_total_shared = e;
        }
        if let Some(s) = slashing {
            self.future_rates.slashing_rate_per_client = s;
        }
        self.bump();
        Ok(())
    }

    /// `set_paused`. Pausing while WaitingForMembers or in Warmup withdraws
    /// everyone at once; while rounds run it is deferred to the end of the epoch.
    /// Resuming validates config, model and progress and waits for members;
    /// resuming while a pause is pending cancels it.
    pub fn set_paused(&mut self, paused: bool, clock: &Clock) -> Result<Events, E> {
        let s = self.run_state()?;
        let mut ev = Events::default();
        let step = self.progress.step;
        match (paused, s) {
            (_, RunState::Finished) => return Err(E::RunFinished),
            (true, RunState::Paused) => return Err(E::AlreadyPaused),
            (true, RunState::Uninitialized) => self.set_state(RunState::Paused, clock.unix_timestamp, &mut ev),
            (true, RunState::WaitingForMembers | RunState::Warmup) => {
                self.withdraw_all();
                self.cold_start_next = 1;
                self.set_state(RunState::Paused, clock.unix_timestamp, &mut ev);
            }
            (true, _) => {
                if self.pending_pause != 0 {
                    return Err(E::AlreadyPaused);
                }
                self.pending_pause = 1;
                ev.push(Event::PauseRequested { step });
            }
            (false, RunState::Uninitialized | RunState::Paused) => {
                let mut progress = self.progress;
                // Step 0 means the run never started (also when it was paused first).
                if progress.step == 0 {
                    progress.step = 1;
                }
                self.config.validate()?;
                self.model.validate_with(&self.config)?;
                progress.validate(&self.config)?;
                self.progress = progress;
                self.set_state(RunState::WaitingForMembers, clock.unix_timestamp, &mut ev);
            }
            (false, _) if self.pending_pause != 0 => {
                self.pending_pause = 0;
                ev.push(Event::PauseCancelled { step });
            }
            (false, _) => return Err(E::NotPaused),
        }
        self.bump();
        Ok(ev)
    }

    /// `free_coordinator` may close the accounts only while the run is halted
    /// (Uninitialized, Paused or Finished), so no epoch in progress loses its state.
    pub fn check_closable(&self) -> Result<(), E> {
        if self.run_state()?.is_halted() {
            Ok(())
        } else {
            Err(E::RunNotHalted)
        }
    }

    /// Hands a client's reward and slash points to the Treasurer (which calls
    /// this through CPI and credits or debits them) and zeroes them here, so that
    /// the slot of a client that left can be reused without losing anything.
    pub fn settle_points(&mut self, signer: &Key) -> Result<(u64, u64), E> {
        self.run_state()?;
        let i = self.slot_of(signer).ok_or(E::NotAClient)?;
        let c = &mut self.clients[i];
        let points = (c.earned, c.slashed);
        c.earned = 0;
        c.slashed = 0;
        self.bump();
        Ok(points)
    }

    /// Hands a client's burned points (its unvested rewards taken by faults)
    /// to the Treasurer, which calls this through CPI and burns as many
    /// tokens, and zeroes them here. A slot is not reused while it holds
    /// burned points, so none is lost before it is burned.
    pub fn take_burned(&mut self, signer: &Key) -> Result<u64, E> {
        self.run_state()?;
        let i = self.slot_of(signer).ok_or(E::NotAClient)?;
        let burned = core::mem::take(&mut self.clients[i].burned);
        self.bump();
        Ok(burned)
    }

    // ----- client instructions -----

    /// `join_run`: registers `signer` (already authorized by the glue) for the
    /// next epoch that forms, with its p2p identity.
    pub fn join(&mut self, signer: &Key, p2p_identity: &Key, clock: &Clock) -> Result<Events, E> {
        match self.run_state()? {
            RunState::Uninitialized => return Err(E::RunUninitialized),
            RunState::Finished => return Err(E::RunFinished),
            _ => {}
        }
        let existing = self.slot_of(signer);
        if let Some(i) = existing {
            let c = &self.clients[i];
            if c.pending != 0 {
                return Err(E::AlreadyJoined);
            }
            if c.in_epoch != 0 && c.p2p_identity != *p2p_identity {
                return Err(E::P2pIdentityLocked);
            }
        }
        let taken = self
            .clients
            .iter()
            .enumerate()
            .any(|(j, c)| Some(j) != existing && c.occupied != 0 && !c.is_free() && c.p2p_identity == *p2p_identity);
        if taken {
            return Err(E::P2pIdentityTaken);
        }
        let i = match existing {
            Some(i) => i,
            None => self.clients.iter().position(|c| c.occupied == 0 || c.is_free()).ok_or(E::ClientsFull)?,
        };
        let c = &mut self.clients[i];
        if existing.is_none() {
            *c = ClientSlot { signer: *signer, occupied: 1, ..EMPTY_SLOT };
        }
        c.p2p_identity = *p2p_identity;
        c.pending = 1;
        let mut ev = Events::default();
        // i < MAX_CLIENTS = 256.
        ev.push(Event::ClientJoined { signer: *signer, slot: i as u16 });
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `leave_run`: withdraws a pending join and/or leaves the current epoch
    /// (forfeiting its reward). The slot becomes reusable once its points are settled.
    pub fn leave(&mut self, signer: &Key, clock: &Clock) -> Result<Events, E> {
        if self.run_state()? == RunState::Uninitialized {
            return Err(E::RunUninitialized);
        }
        let i = self.slot_of(signer).ok_or(E::NotAClient)?;
        let member = self.member_of(signer).filter(|&m| self.epoch.clients[m].state == HEALTHY);
        if self.clients[i].pending == 0 && member.is_none() {
            return Err(E::NotAClient);
        }
        self.clients[i].pending = 0;
        if let Some(m) = member {
            self.epoch.clients[m].state = LEFT;
        }
        let mut ev = Events::default();
        ev.push(Event::ClientLeft { signer: *signer });
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `tick`: advances the run if a condition or timer allows; an error when
    /// nothing can happen yet, so useless ticks cost nothing but a failed tx.
    pub fn tick(&mut self, clock: &Clock) -> Result<Events, E> {
        if self.run_state()?.is_halted() {
            return Err(E::RunHalted);
        }
        let mut ev = Events::default();
        if !self.advance(clock, &mut ev)? {
            return Err(E::TickTooEarly);
        }
        self.bump();
        Ok(ev)
    }

    /// `warmup_witness`: a member reports it has the model loaded.
    pub fn warmup_witness(&mut self, signer: &Key, clock: &Clock) -> Result<Events, E> {
        self.require_phase(&[RunState::Warmup])?;
        let m = self.healthy_member(signer)?;
        if self.epoch.clients[m].warmup_witnessed != 0 {
            return Err(E::AlreadyWitnessed);
        }
        self.epoch.clients[m].warmup_witnessed = 1;
        self.epoch.warmup_witnesses = self.epoch.warmup_witnesses.saturating_add(1);
        let mut ev = Events::default();
        ev.push(Event::WarmupWitnessed { signer: *signer });
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `witness`: an elected witness reports what it saw in the current round.
    pub fn witness(&mut self, signer: &Key, report: &WitnessReport, clock: &Clock) -> Result<Events, E> {
        self.require_phase(&[RunState::RoundTrain, RunState::RoundWitness])?;
        let round = self.current_round();
        if report.step != round.step {
            return Err(E::WrongRound);
        }
        let n = round.clients_len;
        let index = self.client_at(report.index, signer)?;
        if self.epoch.clients[index].state != HEALTHY {
            return Err(E::NotInEpoch);
        }
        let round = self.current_round();
        let len = usize::from(round.witnesses_len).min(round.witnesses.len());
        if round.witnesses[..len].iter().any(|w| w.index == report.index) {
            return Err(E::AlreadyWitnessed);
        }
        if report.participant_bloom.validate().is_err() || report.broadcast_bloom.validate().is_err() {
            return Err(E::InvalidBloom);
        }
        if !selection::is_witness(report.index, n, self.config.witness_nodes, &round.seed) {
            return Err(E::NotAWitness);
        }
        if len >= round.witnesses.len() {
            return Err(E::CorruptState);
        }
        let head = usize::from(self.epoch.rounds_head) % NUM_STORED_ROUNDS;
        let round = &mut self.epoch.rounds[head];
        let w = &mut round.witnesses[len];
        w.index = report.index;
        w._padding = [0; 6];
        w.participant_bloom = report.participant_bloom;
        w.broadcast_bloom = report.broadcast_bloom;
        w.broadcast_merkle = report.broadcast_merkle;
        // Note: len = witnesses_len < witnesses.len() (32), checked above.
        #[allow(clippy::arithmetic_side_effects)]
        let witnesses_len = round.witnesses_len + 1;
        round.witnesses_len = witnesses_len;
        let mut ev = Events::default();
        ev.push(Event::WitnessReported { signer: *signer, step: report.step, index: report.index });
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `commit`: a member commits to its step of the current round, in
    /// RoundTrain: the payload's hash and its private replay state before and
    /// after. A non-fresh commitment must continue the member's previous one.
    pub fn commit(&mut self, signer: &Key, c: &CommitArgs, clock: &Clock) -> Result<Events, E> {
        let s = self.run_state()?;
        self.require_phase(&[RunState::RoundTrain, RunState::RoundWitness])?;
        if s != RunState::RoundTrain || c.step != self.current_round().step {
            return Err(E::WrongRound);
        }
        if self.config.verification_percent == 0 {
            return Err(E::VerificationOff);
        }
        let index = self.client_at(c.index, signer)?;
        if self.epoch.clients[index].state != HEALTHY {
            return Err(E::NotInEpoch);
        }
        if self.current_round().commits[index].flags & COMMITTED != 0 {
            return Err(E::AlreadyCommitted);
        }
        if c.fresh > 1 {
            return Err(E::InvalidParameters);
        }
        let slot = usize::from(self.epoch.clients[index].slot) % MAX_CLIENTS;
        if c.fresh == 0 && self.clients[slot].state_after != c.state_before {
            return Err(E::StateNotLinked);
        }
        let probation = if self.on_probation(c.index) { PROBATION } else { 0 };
        let commit = &mut self.current_round_mut().commits[index];
        commit.payload = c.payload;
        commit.state_before = c.state_before;
        commit.state_after = c.state_after;
        commit.verifier = 0;
        commit.flags = COMMITTED | probation | if c.fresh == 1 { FRESH } else { 0 };
        commit.verdict = verdict::NONE;
        self.clients[slot].state_after = c.state_after;
        let mut ev = Events::default();
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `verify`: the verifier drawn for a trainer whose commitment must be
    /// verified posts its verdict, in the round's RoundWitness phase.
    pub fn verify(&mut self, signer: &Key, v: &VerifyArgs, clock: &Clock) -> Result<Events, E> {
        let s = self.run_state()?;
        self.require_phase(&[RunState::RoundTrain, RunState::RoundWitness])?;
        if s != RunState::RoundWitness || v.step != self.current_round().step {
            return Err(E::WrongRound);
        }
        if self.config.verification_percent == 0 {
            return Err(E::VerificationOff);
        }
        if self.draw_after().is_some() {
            return Err(E::VerifySeedPending);
        }
        let me = self.client_at(v.verifier_index, signer)?;
        if self.epoch.clients[me].state != HEALTHY {
            return Err(E::NotInEpoch);
        }
        let round = self.current_round();
        let n = round.clients_len;
        if v.index >= n || usize::from(v.index) >= self.epoch_len() {
            return Err(E::ClientIndexMismatch);
        }
        let trainer = usize::from(v.index);
        let commit = &round.commits[trainer];
        if commit.flags & COMMITTED == 0 {
            return Err(E::NotCommitted);
        }
        if !self.must_verify(round, v.index) {
            return Err(E::NotSampled);
        }
        if self.verifier_of(round, v.index) != Some(v.verifier_index) {
            return Err(E::NotTheVerifier);
        }
        if !matches!(v.verdict, verdict::MATCH | verdict::MISMATCH | verdict::NO_DATA) {
            return Err(E::InvalidVerdict);
        }
        if commit.verdict != verdict::NONE {
            return Err(E::AlreadyJudged);
        }
        // A MISMATCH or NO_DATA verdict opens a dispute: everything it needs
        // is checked before anything changes.
        let dispute = if v.verdict == verdict::MATCH { None } else { Some(self.new_dispute(v, me)?) };
        let trainer_signer = self.clients[usize::from(self.epoch.clients[trainer].slot) % MAX_CLIENTS].signer;
        let round = self.current_round_mut();
        round.unjudged = round.unjudged.saturating_sub(1);
        let commit = &mut round.commits[trainer];
        commit.verdict = v.verdict;
        commit.verifier = v.verifier_index;
        let mut ev = Events::default();
        ev.push(Event::Verified { step: v.step, trainer: trainer_signer, verifier: *signer, verdict: v.verdict });
        if let Some((entry, d)) = dispute {
            self.open_dispute(entry, &d);
            ev.push(Event::DisputeOpened { id: d.id, step: d.step, trainer: trainer_signer, accuser: *signer });
            if d.committee_len == 0 {
                // Nobody can judge it.
                self.settle_dispute(entry, dispute_state::UNRESOLVED, &mut ev);
            }
        }
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `answer_dispute`: the accused trainer answers an open MISMATCH dispute
    /// that its own rerun of the step reproduces the accuser's hashes, and
    /// serves the rerun's payload by hash. The answer settles nothing: the
    /// accuser's hashes are public, so only a committee majority that
    /// fetched the rerun's bytes (vote RERUN) makes it TRANSIENT. A rerun
    /// that differs changes nothing (`RerunDiffers`): the committee decides.
    pub fn answer_dispute(&mut self, signer: &Key, answer: &DisputeAnswer, clock: &Clock) -> Result<Events, E> {
        self.run_state()?;
        let k = self.find_dispute(answer.id)?;
        let d = self.disputes[k];
        let trainer = usize::from(d.trainer_slot) % MAX_CLIENTS;
        if self.clients[trainer].occupied == 0 || self.clients[trainer].signer != *signer {
            return Err(E::NotTheTrainer);
        }
        if d.state != dispute_state::OPEN {
            return Err(E::DisputeNotOpen);
        }
        if d.kind != verdict::MISMATCH {
            return Err(E::NotAnswerable);
        }
        if answer.rerun_payload != d.claimed_payload || answer.rerun_after != d.claimed_after {
            return Err(E::RerunDiffers);
        }
        if d.answered != 0 {
            return Err(E::AlreadyAnswered);
        }
        self.disputes[k].answered = 1;
        let mut ev = Events::default();
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `judge_dispute`: a committee member votes on an open dispute, once.
    /// A majority of the committee (len / 2 + 1) voting MATCH puts the accuser
    /// of a MISMATCH at fault, and refutes a NO_DATA accusation (REFUTED: a
    /// forgiven mistake of the accuser's, a fault past `forgive_per_epoch`);
    /// one voting MISMATCH or NO_DATA puts the trainer at fault; one voting
    /// RERUN (only on an answered MISMATCH dispute) makes it TRANSIENT, a
    /// forgiven mistake of the trainer's.
    pub fn judge_dispute(&mut self, signer: &Key, judgement: &DisputeVote, clock: &Clock) -> Result<Events, E> {
        self.run_state()?;
        let k = self.find_dispute(judgement.id)?;
        let d = self.disputes[k];
        let len = usize::from(d.committee_len).min(COMMITTEE_SIZE);
        let member = d.committee[..len]
            .iter()
            .position(|&slot| {
                let c = &self.clients[usize::from(slot) % MAX_CLIENTS];
                c.occupied != 0 && c.signer == *signer
            })
            .ok_or(E::NotOnCommittee)?;
        if d.state != dispute_state::OPEN {
            return Err(E::DisputeNotOpen);
        }
        let rerun_ok = d.kind == verdict::MISMATCH && d.answered != 0;
        let valid = matches!(judgement.vote, verdict::MATCH | verdict::MISMATCH | verdict::NO_DATA)
            || (judgement.vote == verdict::RERUN && rerun_ok);
        if !valid {
            return Err(E::InvalidVote);
        }
        if d.votes[member] != verdict::NONE {
            return Err(E::AlreadyVoted);
        }
        self.disputes[k].votes[member] = judgement.vote;
        let votes = &self.disputes[k].votes[..len];
        let matches = votes.iter().filter(|&&v| v == verdict::MATCH).count();
        let faults = votes.iter().filter(|&&v| v == verdict::MISMATCH || v == verdict::NO_DATA).count();
        let reruns = votes.iter().filter(|&&v| v == verdict::RERUN).count();
        // Note: len <= COMMITTEE_SIZE (3).
        #[allow(clippy::arithmetic_side_effects)]
        let majority = len / 2 + 1;
        let mut ev = Events::default();
        if matches >= majority {
            // A disproved MISMATCH is the accuser's fault. A NO_DATA
            // accusation the committee got the data for may be honest (the
            // trainer may have served the committee and not the verifier),
            // so it is a forgiven mistake, and a fault only past the bound:
            // leaving honest work out is never free.
            let outcome = if d.kind == verdict::MISMATCH {
                dispute_state::ACCUSER_FAULT
            } else {
                self.forgive(usize::from(d.accuser_slot), dispute_state::REFUTED, dispute_state::ACCUSER_FAULT)
            };
            self.settle_dispute(k, outcome, &mut ev);
        } else if faults >= majority {
            self.settle_dispute(k, dispute_state::TRAINER_FAULT, &mut ev);
        } else if reruns >= majority {
            let outcome = self.forgive(usize::from(d.trainer_slot), dispute_state::TRANSIENT, dispute_state::TRAINER_FAULT);
            self.settle_dispute(k, outcome, &mut ev);
        }
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `health_check`: a member accuses another of not delivering in the previous
    /// round. Accepted only if fewer than a quorum of that round's elected
    /// witnesses saw the accused; the accused is then dropped and slashed.
    pub fn health_check(&mut self, signer: &Key, check: &HealthCheck, clock: &Clock) -> Result<Events, E> {
        self.require_phase(&[RunState::RoundTrain, RunState::RoundWitness])?;
        let round = self.current_round();
        if check.step != round.step {
            return Err(E::WrongRound);
        }
        if round.height < self.first_health_check_height() {
            return Err(E::HealthCheckTooEarly);
        }
        self.healthy_member(signer)?;
        let accused = self.client_at(check.index, &check.accused)?;
        if self.epoch.clients[accused].state != HEALTHY {
            return Err(E::ClientNotHealthy);
        }
        let prev = self.previous_round();
        let len = usize::from(prev.witnesses_len).min(prev.witnesses.len());
        let seen = prev.witnesses[..len].iter().filter(|w| w.participant_bloom.contains(&check.accused)).count();
        if seen >= usize::from(selection::quorum(prev.witness_count)) {
            return Err(E::ClientHealthy);
        }
        self.epoch.clients[accused].state = DROPPED;
        let slot = usize::from(self.epoch.clients[accused].slot) % MAX_CLIENTS;
        let slash = self.current_rates.slashing_rate_per_client;
        self.clients[slot].slashed = self.clients[slot].slashed.saturating_add(slash);
        let mut ev = Events::default();
        ev.push(Event::ClientDropped { client: check.accused, reporter: *signer, step: check.step });
        self.advance(clock, &mut ev)?;
        self.bump();
        Ok(ev)
    }

    /// `checkpoint`: an elected checkpointer records where it uploaded the
    /// latest model. The checkpointers are the members that reported as
    /// witnesses of the current round (in Cooldown, the epoch's last), so a
    /// member the election passed over cannot point joiners at a file of
    /// its own.
    pub fn checkpoint(&mut self, signer: &Key, repo: &CheckpointRepo, clock: &Clock) -> Result<Events, E> {
        let finished = self.run_state()? == RunState::Finished;
        let member = if finished {
            // The run's final model: announced by a client that finished
            // the last epoch healthy and was elected in its last round (the
            // epoch list is empty by now: end_epoch kept that in the slot).
            if !self.finished_last_epoch(signer) {
                return Err(E::NotInEpoch);
            }
            None
        } else if self.run_state()?.is_halted() {
            return Err(E::RunHalted);
        } else {
            Some(self.healthy_member(signer)?)
        };
        if !matches!(self.model.checkpoint_kind, CHECKPOINT_HUB | CHECKPOINT_P2P) {
            return Err(E::CheckpointNotConfigured);
        }
        let elected = match member {
            Some(k) => self.elected_checkpointer(k),
            None => self.clients.iter().any(|c| c.occupied != 0 && c.signer == *signer && c.checkpointer != 0),
        };
        if !elected {
            return Err(E::NotCheckpointer);
        }
        if !nonempty_str(&repo.repo) || fixed_str_len(&repo.revision).is_none() {
            return Err(E::InvalidCheckpoint);
        }
        self.model.checkpoint_repo = repo.repo;
        self.model.checkpoint_revision = repo.revision;
        let mut ev = Events::default();
        ev.push(Event::CheckpointUpdated { signer: *signer });
        if !finished {
            self.advance(clock, &mut ev)?;
        }
        self.bump();
        Ok(ev)
    }

    /// `report_eval`: a registered client publishes its benchmark score of
    /// the model after a trained step, as an event only. It changes nothing,
    /// not even the nonce, so it never invalidates what clients read, and is
    /// accepted in every phase of a configured run (scores come between
    /// epochs and after the last one).
    pub fn report_eval(&self, signer: &Key, r: &EvalReport) -> Result<Events, E> {
        if self.run_state()? == RunState::Uninitialized {
            return Err(E::RunUninitialized);
        }
        self.slot_of(signer).ok_or(E::NotAClient)?;
        let valid = (1..self.progress.step).contains(&r.step)
            && valid_id_str(r.task, EVAL_TASK_LEN)
            && f32_unit(r.acc)
            && f32_unit(r.acc_norm)
            && r.count > 0;
        if !valid {
            return Err(E::EvalReport);
        }
        let mut task = [0u8; EVAL_TASK_LEN];
        task[..r.task.len()].copy_from_slice(r.task);
        let mut ev = Events::default();
        ev.push(Event::EvalReported {
            signer: *signer,
            epoch: self.progress.epoch,
            step: r.step,
            task,
            acc: r.acc,
            acc_norm: r.acc_norm,
            count: r.count,
        });
        Ok(ev)
    }

    /// `report_prompt`: a registered client publishes the tokens the model
    /// after a trained step generated for one of the clients' prompts, as an
    /// event only: like `report_eval`, it changes nothing and is accepted in
    /// every phase of a configured run.
    pub fn report_prompt(&self, signer: &Key, r: &PromptReport) -> Result<Events, E> {
        if self.run_state()? == RunState::Uninitialized {
            return Err(E::RunUninitialized);
        }
        self.slot_of(signer).ok_or(E::NotAClient)?;
        let vocab = self.model.vocab_size;
        let valid = (1..self.progress.step).contains(&r.step)
            && (1..=PROMPT_TOKENS_LEN).contains(&r.tokens.len())
            && r.tokens.iter().all(|t| u32::from_le_bytes(*t) < vocab);
        if !valid {
            return Err(E::PromptReport);
        }
        let mut tokens = [0u32; PROMPT_TOKENS_LEN];
        for (out, t) in tokens.iter_mut().zip(r.tokens) {
            *out = u32::from_le_bytes(*t);
        }
        let mut ev = Events::default();
        ev.push(Event::PromptReported {
            signer: *signer,
            epoch: self.progress.epoch,
            step: r.step,
            prompt: r.prompt,
            // Note: at most PROMPT_TOKENS_LEN (32), checked above.
            len: r.tokens.len() as u8,
            tokens,
        });
        Ok(ev)
    }

    // ----- disputes -----

    /// Entry `k` of the dispute table holding dispute `id` (0 is never an id).
    fn find_dispute(&self, id: u64) -> Result<usize, E> {
        self.disputes
            .iter()
            .position(|d| id != 0 && d.id == id && d.state != dispute_state::FREE)
            .ok_or(E::DisputeNotFound)
    }

    /// The dispute a MISMATCH or NO_DATA verdict `v` by the member at round
    /// index `accuser` opens, and the table entry it takes: the first free
    /// one, else the settled one with the lowest id (`DisputesFull` when all
    /// are open; `AccuserDisputesFull` when the accuser already holds
    /// `MAX_OPEN_PER_ACCUSER` open ones). Changes nothing.
    fn new_dispute(&self, v: &VerifyArgs, accuser: usize) -> Result<(usize, Dispute), E> {
        let accuser_slot = self.epoch.clients[accuser % MAX_CLIENTS].slot;
        let held = self.disputes.iter().filter(|d| d.state == dispute_state::OPEN && d.accuser_slot == accuser_slot).count();
        if held >= MAX_OPEN_PER_ACCUSER {
            return Err(E::AccuserDisputesFull);
        }
        let entry = match self.disputes.iter().position(|d| d.state == dispute_state::FREE) {
            Some(k) => k,
            None => self
                .disputes
                .iter()
                .enumerate()
                .filter(|(_, d)| d.state != dispute_state::OPEN)
                .min_by_key(|(_, d)| d.id)
                .map(|(k, _)| k)
                .ok_or(E::DisputesFull)?,
        };
        let id = self.disputes_opened.checked_add(1).ok_or(E::ArithmeticOverflow)?;
        let round = self.current_round();
        let n = round.clients_len;
        let (members, committee_len) = selection::committee(&round.verify_seed, v.index, v.verifier_index, n);
        let data = selection::DataRound {
            seed: round.seed,
            data_index: round.data_index,
            batch_size: round.batch_size,
            clients: n,
            inner_steps: round.inner_steps,
        };
        let batch = selection::assignment(&data, v.index).ok_or(E::CorruptState)?;
        let batch_len = u32::try_from(batch.len).map_err(|_| E::CorruptState)?;
        let slot_of = |i: u16| self.epoch.clients[usize::from(i) % MAX_CLIENTS].slot;
        let mut committee = [0u16; COMMITTEE_SIZE];
        for (c, &i) in committee.iter_mut().zip(&members[..committee_len]) {
            *c = slot_of(i);
        }
        let commit = &round.commits[usize::from(v.index) % MAX_CLIENTS];
        let d = Dispute {
            state: dispute_state::OPEN,
            kind: v.verdict,
            // committee_len <= COMMITTEE_SIZE (3).
            committee_len: committee_len as u8,
            votes: [verdict::NONE; COMMITTEE_SIZE],
            trainer_slot: slot_of(v.index),
            // accuser < epoch_len <= MAX_CLIENTS.
            accuser_slot: slot_of(accuser as u16),
            trainer_index: v.index,
            committee,
            cold_start: self.epoch.cold_start,
            fresh: u8::from(commit.flags & FRESH != 0),
            answered: 0,
            _padding: [0; 7],
            step: round.step,
            deadline_step: round.step.saturating_add(DISPUTE_ROUNDS),
            epoch: self.progress.epoch,
            epoch_start_step: self.epoch.start_step,
            // A share of every inner step: batch.len <= batch_size * inner_steps.
            batch_len,
            id,
            batch_start: batch.start,
            payload: commit.payload,
            state_before: commit.state_before,
            state_after: commit.state_after,
            claimed_payload: v.claimed_payload,
            claimed_after: v.claimed_after,
        };
        Ok((entry, d))
    }

    /// Stores a new dispute (from `new_dispute`) and counts it on every slot it names.
    fn open_dispute(&mut self, entry: usize, d: &Dispute) {
        self.disputes_opened = d.id;
        self.disputes[entry % MAX_DISPUTES] = *d;
        for slot in self.dispute_slots(d) {
            let c = &mut self.clients[usize::from(slot) % MAX_CLIENTS];
            c.open_disputes = c.open_disputes.saturating_add(1);
        }
    }

    /// The slots a dispute names: trainer, accuser and committee (distinct
    /// members of its round).
    fn dispute_slots(&self, d: &Dispute) -> impl Iterator<Item = u16> {
        let len = usize::from(d.committee_len).min(COMMITTEE_SIZE);
        let c = d.committee;
        [d.trainer_slot, d.accuser_slot].into_iter().chain((0..len).map(move |i| c[i]))
    }

    /// Settles open dispute `k` with `outcome`: the slots it names are free
    /// of it, and a fault outcome hits the trainer or the accuser. An
    /// UNRESOLVED outcome is reported among the events' unresolved ids.
    fn settle_dispute(&mut self, k: usize, outcome: u8, ev: &mut Events) {
        let k = k % MAX_DISPUTES;
        let d = self.disputes[k];
        if d.state != dispute_state::OPEN {
            return;
        }
        self.disputes[k].state = outcome;
        for slot in self.dispute_slots(&d) {
            let c = &mut self.clients[usize::from(slot) % MAX_CLIENTS];
            c.open_disputes = c.open_disputes.saturating_sub(1);
        }
        match outcome {
            dispute_state::TRAINER_FAULT => self.fault(usize::from(d.trainer_slot)),
            dispute_state::ACCUSER_FAULT => self.fault(usize::from(d.accuser_slot)),
            _ => {}
        }
        if outcome == dispute_state::UNRESOLVED {
            ev.unresolved(d.id);
        } else {
            ev.push(Event::DisputeSettled { id: d.id, outcome });
        }
    }

    /// Counts a mistake of the client in `slot`: `forgiven` while it has made
    /// at most `forgive_per_epoch` this epoch, `fault` beyond.
    fn forgive(&mut self, slot: usize, forgiven: u8, fault: u8) -> u8 {
        let c = &mut self.clients[slot % MAX_CLIENTS];
        c.forgiven = c.forgiven.saturating_add(1);
        if c.forgiven > self.config.forgive_per_epoch {
            fault
        } else {
            forgiven
        }
    }

    /// A fault: the client leaves the current epoch without reward (FAULTED,
    /// removed at the next round start) if it is a healthy member, is slashed,
    /// its unvested points are burned, and it is on probation.
    fn fault(&mut self, slot: usize) {
        let slot = slot % MAX_CLIENTS;
        if self.clients[slot].in_epoch != 0 {
            let n = self.epoch_len();
            if let Some(e) = self.epoch.clients[..n].iter_mut().find(|e| usize::from(e.slot) == slot && e.state == HEALTHY) {
                e.state = FAULTED;
            }
        }
        let slash = self.current_rates.slashing_rate_per_client;
        let epoch = self.progress.epoch;
        let c = &mut self.clients[slot];
        c.slashed = c.slashed.saturating_add(slash);
        let unvested = c.unvested.iter().fold(0u64, |a, &p| a.saturating_add(p));
        c.burned = c.burned.saturating_add(unvested);
        c.unvested = [0; VESTING_BUCKETS];
        c.has_fault = 1;
        c.last_fault_epoch = epoch;
    }

    /// Open disputes whose deadline the run's step has passed end UNRESOLVED
    /// (every open one when `all`, as the run finishes).
    fn expire_disputes(&mut self, all: bool, ev: &mut Events) {
        let step = self.progress.step;
        for k in 0..MAX_DISPUTES {
            let d = &self.disputes[k];
            if d.state == dispute_state::OPEN && (all || step > d.deadline_step) {
                self.settle_dispute(k, dispute_state::UNRESOLVED, ev);
            }
        }
    }

    // ----- the state machine -----

    /// Makes at most one transition. Returns whether one happened.
    fn advance(&mut self, clock: &Clock, ev: &mut Events) -> Result<bool, E> {
        let now = clock.unix_timestamp;
        match self.run_state()? {
            RunState::Uninitialized | RunState::Paused | RunState::Finished => Ok(false),
            RunState::WaitingForMembers => Ok(self.try_form_epoch(now, ev)),
            RunState::Warmup => self.try_start_training(clock, ev),
            RunState::RoundTrain => {
                let r = self.current_round();
                if r.witnesses_len >= r.witness_count || self.timed_out(now, self.config.max_round_train_time) {
                    // Commitments end here; the verify seed comes from the
                    // first slot after this one (draw_verify_seed), so whoever
                    // chose this moment could not know it.
                    self.current_round_mut().verify_slot = clock.slot;
                    self.set_state(RunState::RoundWitness, now, ev);
                    return Ok(true);
                }
                Ok(false)
            }
            RunState::RoundWitness => {
                if let Some(after) = self.draw_after() {
                    return Ok(self.draw_verify_seed(after, clock));
                }
                let r = self.current_round();
                let judged = self.config.verification_percent > 0 && r.unjudged == 0 && r.witnesses_len >= r.witness_count;
                if !judged && !self.timed_out(now, self.config.round_witness_time) {
                    return Ok(false);
                }
                self.end_round(clock, ev)?;
                Ok(true)
            }
            RunState::Cooldown => {
                if !self.timed_out(now, self.config.cooldown_time) {
                    return Ok(false);
                }
                self.end_epoch(now, ev);
                Ok(true)
            }
        }
    }

    /// Draws the verify seed of the round in RoundWitness from the oldest
    /// SlotHashes entry of a slot after `after` (RoundTrain's last slot), if
    /// the glue found one; counts the commitments to judge and restarts the
    /// witness window, which is the verifiers' time to replay.
    fn draw_verify_seed(&mut self, after: u64, clock: &Clock) -> bool {
        let Some(entropy) = clock.drawn.filter(|e| e.slot > after) else {
            return false;
        };
        let r = self.current_round_mut();
        r.verify_seed = selection::verify_seed(&r.seed, &entropy);
        let r = self.current_round();
        // At most MAX_CLIENTS (256) members, so the count fits.
        let unjudged = (0..r.clients_len).filter(|&i| self.must_verify(r, i)).count() as u16;
        self.current_round_mut().unjudged = unjudged;
        self.run_state_start = clock.unix_timestamp;
        true
    }

    /// At most one timed transition per second: a phase that began at `now` never
    /// times out at `now`, whatever its duration.
    fn timed_out(&self, now: i64, duration: u64) -> bool {
        now != self.run_state_start && elapsed(now, self.run_state_start) >= duration
    }

    /// WaitingForMembers -> Warmup once enough joined and the extra wait is over.
    /// The epoch takes pending clients in slot order, at most as many as the next
    /// batch has sequences (so everyone trains something in every inner step:
    /// the cap counts one inner step's batch, not the round's
    /// `batch_size * inner_steps` sequences) and at most MAX_CLIENTS.
    fn try_form_epoch(&mut self, now: i64, ev: &mut Events) -> bool {
        let pending = self.clients.iter().filter(|c| c.occupied != 0 && c.pending != 0).count();
        if pending < usize::from(self.config.init_min_clients)
            || !self.timed_out(now, u64::from(self.config.waiting_for_members_extra_time))
        {
            return false;
        }
        let cap = usize::from(self.next_batch_size()).min(MAX_CLIENTS);
        let previous_epoch = self.progress.epoch.wrapping_sub(1);
        let mut n = 0usize;
        let mut model_holder = false;
        for (i, c) in self.clients.iter_mut().enumerate() {
            if n == cap {
                break;
            }
            if c.occupied == 0 || c.pending == 0 {
                continue;
            }
            c.pending = 0;
            c.forgiven = 0;
            c.in_epoch = 1;
            model_holder |= c.has_finished != 0 && self.progress.epoch > 0 && c.last_finished_epoch == previous_epoch;
            // i < MAX_CLIENTS = 256.
            self.epoch.clients[n] = EpochClient { slot: i as u16, state: HEALTHY, warmup_witnessed: 0 };
            // Note: n < cap, checked at the top of the loop.
            #[allow(clippy::arithmetic_side_effects)]
            let next = n + 1;
            n = next;
        }
        // Nobody who holds the latest model came back: joiners need the repo.
        if self.model.checkpoint_kind == CHECKPOINT_P2P && !model_holder {
            self.model.checkpoint_kind = CHECKPOINT_HUB;
        }
        let e = &mut self.epoch;
        e.start_timestamp = now;
        e.start_step = self.progress.step;
        e.last_step = 0;
        e.clients_len = n as u16;
        e.warmup_witnesses = 0;
        e.rounds_head = 0;
        e.cold_start = self.cold_start_next;
        e.quorum_failed = 0;
        for r in e.rounds.iter_mut() {
            r.witnesses_len = 0;
            r.witness_count = 0;
            r.clients_len = 0;
        }
        self.cold_start_next = 0;
        self.current_rates = self.future_rates;
        self.set_state(RunState::Warmup, now, ev);
        true
    }

    /// Warmup -> RoundTrain when enough members reported ready (as many as
    /// witnesses will be elected) or the warmup timer ran out; back to
    /// WaitingForMembers, members still pending, if too few remain.
    fn try_start_training(&mut self, clock: &Clock, ev: &mut Events) -> Result<bool, E> {
        let now = clock.unix_timestamp;
        let healthy = self.healthy_count();
        let target = selection::witness_count(self.config.witness_nodes, healthy);
        let ready = target > 0 && self.epoch.warmup_witnesses >= target;
        if !ready && !self.timed_out(now, self.config.warmup_time) {
            return Ok(false);
        }
        if healthy < self.config.min_clients {
            for k in 0..self.epoch_len() {
                let e = self.epoch.clients[k];
                let c = &mut self.clients[usize::from(e.slot) % MAX_CLIENTS];
                c.in_epoch = 0;
                if e.state == HEALTHY {
                    c.pending = 1;
                }
            }
            self.epoch.clients_len = 0;
            self.cold_start_next = self.epoch.cold_start;
            ev.push(Event::EpochEnded { epoch: self.progress.epoch, success: false, rewarded: 0 });
            self.set_state(RunState::WaitingForMembers, now, ev);
            return Ok(true);
        }
        let next = self.data_index_after_next_round()?;
        self.compact();
        self.set_state(RunState::RoundTrain, now, ev);
        self.start_round(clock, true, next, ev);
        Ok(true)
    }

    /// End of RoundWitness: the step is done. Continue with the next round, or go
    /// to Cooldown when the round missed its witness quorum, too few clients
    /// remain, all steps are done, a pause is pending, or the drain after the
    /// epoch's time ran out is over.
    fn end_round(&mut self, clock: &Clock, ev: &mut Events) -> Result<(), E> {
        let now = clock.unix_timestamp;
        let r = self.current_round();
        let quorum_failed = r.witnesses_len < selection::quorum(r.witness_count);
        let step = self.progress.step.checked_add(1).ok_or(E::ArithmeticOverflow)?;
        let mut last_step = self.epoch.last_step;
        if last_step == 0 && elapsed(now, self.epoch.start_timestamp) >= self.config.epoch_time {
            last_step = step.checked_add(DRAIN_ROUNDS).ok_or(E::ArithmeticOverflow)?;
        }
        let cooldown = quorum_failed
            || self.healthy_count() < self.config.min_clients
            || step > self.config.total_steps
            || self.pending_pause != 0
            || (last_step != 0 && step >= last_step);
        let next = if cooldown { 0 } else { self.data_index_after_next_round()? };
        self.progress.step = step;
        self.epoch.last_step = last_step;
        if quorum_failed {
            self.epoch.quorum_failed = 1;
        }
        self.expire_disputes(false, ev);
        if cooldown {
            self.set_state(RunState::Cooldown, now, ev);
        } else {
            self.compact();
            self.set_state(RunState::RoundTrain, now, ev);
            self.start_round(clock, false, next, ev);
        }
        Ok(())
    }

    /// End of Cooldown: rewards, checkpoint hand-over to peers, next phase.
    // Note: healthy > 0 where it divides; bonus is 1 only while extra > 0, so
    // extra never underflows and share + bonus <= rate (share * healthy +
    // extra = rate); rewarded counts at most MAX_CLIENTS (256) members.
    #[allow(clippy::arithmetic_side_effects)]
    fn end_epoch(&mut self, now: i64, ev: &mut Events) {
        let success = self.epoch.quorum_failed == 0;
        let healthy = u64::from(self.healthy_count());
        let rate = self.current_rates.earning_rate_total_shared;
        let (share, mut extra) = if success && healthy > 0 { (rate / healthy, rate % healthy) } else { (0, 0) };
        let mut rewarded = 0u16;
        // Vesting: first the bucket of epoch `epoch - vesting_epochs` becomes
        // claimable, then this epoch's rewards go to bucket `epoch % 4` (or
        // straight to `earned` without vesting).
        let vesting = u32::from(self.config.vesting_epochs);
        let bucket = (self.progress.epoch % VESTING_BUCKETS as u32) as usize;
        if let Some(vested) = self.progress.epoch.checked_sub(vesting) {
            self.vest(Some((vested % VESTING_BUCKETS as u32) as usize));
        }
        let checkpointers = self.checkpointers();
        for k in 0..self.epoch_len() {
            let e = self.epoch.clients[k];
            let elected = bit_set(&checkpointers, k);
            let c = &mut self.clients[usize::from(e.slot) % MAX_CLIENTS];
            c.in_epoch = 0;
            c.checkpointer = u8::from(elected && e.state == HEALTHY);
            if e.state != HEALTHY {
                continue;
            }
            c.has_finished = 1;
            c.last_finished_epoch = self.progress.epoch;
            if success {
                // The first `rate % healthy` finishers get one extra point, so the
                // shares add up to exactly the rate.
                let bonus = u64::from(extra > 0);
                extra -= bonus;
                if vesting > 0 {
                    c.unvested[bucket] = c.unvested[bucket].saturating_add(share + bonus);
                } else {
                    c.earned = c.earned.saturating_add(share + bonus);
                }
                rewarded += 1;
            }
        }
        self.epoch.clients_len = 0;
        let finished = self.progress.epoch;
        self.progress.epoch = finished.saturating_add(1);
        if self.model.checkpoint_kind == CHECKPOINT_HUB {
            self.model.checkpoint_kind = CHECKPOINT_P2P;
        }
        ev.push(Event::EpochEnded { epoch: finished, success, rewarded });
        if self.pending_pause != 0 {
            self.pending_pause = 0;
            self.withdraw_all();
            self.cold_start_next = 1;
            self.set_state(RunState::Paused, now, ev);
        } else if self.progress.step > self.config.total_steps {
            // Nothing can be judged any more: open disputes end unresolved,
            // and every unvested point becomes claimable.
            self.expire_disputes(true, ev);
            self.vest(None);
            self.set_state(RunState::Finished, now, ev);
        } else {
            self.set_state(RunState::WaitingForMembers, now, ev);
        }
    }

    /// Moves unvested points to `earned`: one bucket, or all of them.
    fn vest(&mut self, bucket: Option<usize>) {
        for c in self.clients.iter_mut() {
            for (b, points) in c.unvested.iter_mut().enumerate() {
                if *points != 0 && bucket.is_none_or(|k| k == b) {
                    c.earned = c.earned.saturating_add(*points);
                    *points = 0;
                }
            }
        }
    }

    /// Starts a round over the (compacted) epoch list; `next_data_index` was
    /// computed (overflow-checked) by the caller before anything changed.
    fn start_round(&mut self, clock: &Clock, first: bool, next_data_index: u64, ev: &mut Events) {
        let prev_head = usize::from(self.epoch.rounds_head) % NUM_STORED_ROUNDS;
        // Note: prev_head < NUM_STORED_ROUNDS (4).
        #[allow(clippy::arithmetic_side_effects)]
        let (head, height) =
            if first { (0, 0) } else { ((prev_head + 1) % NUM_STORED_ROUNDS, self.epoch.rounds[prev_head].height.saturating_add(1)) };
        let batch_size = self.next_batch_size();
        let inner_steps = self.next_inner_steps();
        let n = self.epoch.clients_len;
        let seed = selection::round_seed(&self.seed, &clock.entropy, self.progress.step);
        let data_index = self.progress.data_index;
        self.seed = seed;
        self.progress.data_index = next_data_index;
        // head < NUM_STORED_ROUNDS = 4.
        self.epoch.rounds_head = head as u8;
        let r = &mut self.epoch.rounds[head];
        r.seed = seed;
        r.data_index = data_index;
        r.step = self.progress.step;
        r.height = height;
        r.batch_size = batch_size;
        r.inner_steps = inner_steps;
        r.clients_len = n;
        r.witness_count = selection::witness_count(self.config.witness_nodes, n);
        r.witnesses_len = 0;
        r.unjudged = 0;
        r.verify_slot = 0;
        r.verify_seed = [0; 32];
        // n <= MAX_CLIENTS: one memset, not a loop over the entries.
        Commit::clear(&mut r.commits[..usize::from(n).min(MAX_CLIENTS)]);
        ev.push(Event::RoundStarted { step: r.step, height, data_index, batch_size, inner_steps, clients: n, seed });
    }

    /// The data cursor after the next round: it covers `batch_size *
    /// inner_steps` sequences.
    fn data_index_after_next_round(&self) -> Result<u64, E> {
        // Note: both factors are below 2^16, so the product is below 2^32 (a
        // plain u64 multiply: checked_mul would be a 128-bit one on BPF).
        #[allow(clippy::arithmetic_side_effects)]
        let sequences = u64::from(self.next_batch_size()) * u64::from(self.next_inner_steps());
        self.progress.data_index.checked_add(sequences).ok_or(E::ArithmeticOverflow)
    }

    /// Removes entries that are no longer healthy, keeping order, so that indices
    /// are stable within a round and dense across rounds.
    fn compact(&mut self) {
        let n = self.epoch_len();
        let mut w = 0usize;
        for k in 0..n {
            let e = self.epoch.clients[k];
            if e.state == HEALTHY {
                self.epoch.clients[w] = e;
                // Note: w <= k < n <= MAX_CLIENTS.
                #[allow(clippy::arithmetic_side_effects)]
                let next = w + 1;
                w = next;
            } else {
                self.clients[usize::from(e.slot) % MAX_CLIENTS].in_epoch = 0;
            }
        }
        for e in self.epoch.clients[w..n].iter_mut() {
            *e = EpochClient { slot: 0, state: 0, warmup_witnessed: 0 };
        }
        // w <= n <= MAX_CLIENTS.
        self.epoch.clients_len = w as u16;
    }

    /// Empties the epoch and cancels every pending join (pausing).
    fn withdraw_all(&mut self) {
        for k in 0..self.epoch_len() {
            let slot = usize::from(self.epoch.clients[k].slot) % MAX_CLIENTS;
            self.clients[slot].in_epoch = 0;
        }
        self.epoch.clients_len = 0;
        for c in self.clients.iter_mut() {
            c.pending = 0;
        }
    }

    fn set_state(&mut self, to: RunState, now: i64, ev: &mut Events) {
        let from = RunState::from_u8(self.run_state).unwrap_or(RunState::Uninitialized);
        self.run_state = to as u8;
        self.run_state_start = now;
        ev.push(Event::StateChanged { from, to, epoch: self.progress.epoch, step: self.progress.step });
    }

    fn bump(&mut self) {
        self.nonce = self.nonce.wrapping_add(1);
    }

    // ----- lookups -----

    fn epoch_len(&self) -> usize {
        usize::from(self.epoch.clients_len).min(MAX_CLIENTS)
    }

    fn require_phase(&self, allowed: &[RunState]) -> Result<(), E> {
        let s = self.run_state()?;
        if allowed.contains(&s) {
            Ok(())
        } else if s.is_halted() {
            Err(E::RunHalted)
        } else {
            Err(E::WrongPhase)
        }
    }

    fn slot_of(&self, signer: &Key) -> Option<usize> {
        self.clients.iter().position(|c| c.occupied != 0 && c.signer == *signer)
    }

    fn member_of(&self, signer: &Key) -> Option<usize> {
        (0..self.epoch_len()).find(|&k| self.clients[usize::from(self.epoch.clients[k].slot) % MAX_CLIENTS].signer == *signer)
    }

    /// Whether signer finished the epoch that just ended healthy.
    fn finished_last_epoch(&self, signer: &Key) -> bool {
        let last = self.progress.epoch.wrapping_sub(1);
        self.clients.iter().any(|c| c.occupied != 0 && c.signer == *signer && c.has_finished != 0 && c.last_finished_epoch == last)
    }

    /// Whether epoch entry `k` reported as a witness of the current round
    /// (the witness instruction checked its election): one of the epoch's
    /// checkpointers. From the at most 32 reports, where re-running the
    /// election per member would cost a shuffle (~29k CU) each.
    fn elected_checkpointer(&self, k: usize) -> bool {
        bit_set(&self.checkpointers(), k)
    }

    /// The epoch indices of the current round's reporting witnesses, as a
    /// bitmap: end_epoch tests every member against one (a scan of the
    /// reports per member cost 300k CU at 1024 members).
    fn checkpointers(&self) -> [u64; MAX_CLIENTS / 64] {
        let r = self.current_round();
        let n = usize::from(r.witnesses_len).min(r.witnesses.len());
        let mut m = [0u64; MAX_CLIENTS / 64];
        for w in &r.witnesses[..n] {
            let i = usize::from(w.index) % MAX_CLIENTS;
            m[i / 64] |= 1 << (i % 64);
        }
        m
    }

    fn healthy_member(&self, signer: &Key) -> Result<usize, E> {
        self.member_of(signer).filter(|&k| self.epoch.clients[k].state == HEALTHY).ok_or(E::NotInEpoch)
    }

    /// Epoch entry `index`, checked to belong to `signer`.
    fn client_at(&self, index: u16, signer: &Key) -> Result<usize, E> {
        match self.epoch_client(usize::from(index)) {
            Some((_, c)) if c.signer == *signer => Ok(usize::from(index)),
            _ => Err(E::ClientIndexMismatch),
        }
    }

    fn healthy_count(&self) -> u16 {
        // At most MAX_CLIENTS entries.
        self.epoch.clients[..self.epoch_len()].iter().filter(|e| e.state == HEALTHY).count() as u16
    }
}

/// Bit k of a bitmap over epoch indices.
fn bit_set(m: &[u64; MAX_CLIENTS / 64], k: usize) -> bool {
    m[k / 64 % (MAX_CLIENTS / 64)] >> (k % 64) & 1 != 0
}

impl ClientSlot {
    /// Reusable by a new signer: not pending, not in the current epoch, no
    /// reward, slash or burned points that the Treasurer has yet to settle
    /// or burn, no unvested points, and named by no open dispute.
    pub fn is_free(&self) -> bool {
        self.pending == 0
            && self.in_epoch == 0
            && self.earned == 0
            && self.slashed == 0
            && self.burned == 0
            && self.unvested == [0; VESTING_BUCKETS]
            && self.open_disputes == 0
    }

    /// On fault probation in `epoch`: found at fault in this epoch or the
    /// previous one (every commitment is verified meanwhile).
    pub fn on_probation(&self, epoch: u32) -> bool {
        self.has_fault != 0 && self.last_fault_epoch.saturating_add(1) >= epoch
    }
}

impl Commit {
    /// Zeroes `commits` with one memset (sol_memset_ on-chain).
    pub fn clear(commits: &mut [Commit]) {
        // SAFETY: Commit is integers and byte arrays, so all zero bytes is a
        // valid value; the pointer and count come from the slice.
        unsafe { core::ptr::write_bytes(commits.as_mut_ptr(), 0, commits.len()) };
    }
}
