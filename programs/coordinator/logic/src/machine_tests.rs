//! State-machine tests: every transition, timer boundary and rejection path.

use crate::bloom::Bloom;
use crate::fixtures::{valid_config, valid_model, valid_sparseloco};
use crate::error::CoordinatorError as E;
use crate::invariants;
use crate::event::{Event, Events};
use crate::machine::*;
use crate::selection::{self, Entropy};
use psyche_sdk::hash::hashv;
use crate::state::client_state::*;
use crate::state::*;

fn zeroed_state() -> Box<CoordinatorState> {
    // SAFETY: CoordinatorState consists of integers and byte arrays only, so the
    // all-zero pattern is a valid value (an uninitialized account).
    unsafe { Box::<CoordinatorState>::new_zeroed().assume_init() }
}

fn key(i: u32) -> [u8; 32] {
    hashv(&[b"signer", &i.to_le_bytes()])
}

fn p2p(i: u32) -> [u8; 32] {
    hashv(&[b"p2p", &i.to_le_bytes()])
}

fn text<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s.as_bytes());
    out
}

struct Sim {
    s: Box<CoordinatorState>,
    now: i64,
    slot: u64,
}

impl Sim {
    fn uninitialized() -> Sim {
        let mut s = zeroed_state();
        s.init(b"test-run", b"v1").unwrap();
        Sim { s, now: 1_000_000, slot: 500 }
    }

    fn with(config: CoordinatorConfig) -> Sim {
        Sim::with_model(config, valid_model())
    }

    fn with_model(config: CoordinatorConfig, model: Model) -> Sim {
        let mut sim = Sim::uninitialized();
        let model = Model { cold_start_warmup_steps: 2, ..model };
        sim.s.update(&Update { config: Some(&config), model: Some(&model), ..Default::default() }).unwrap();
        sim.s.set_paused(false, &sim.clock()).unwrap();
        assert_eq!(sim.state(), RunState::WaitingForMembers);
        sim
    }

    fn new() -> Sim {
        Sim::with(valid_config())
    }

    /// SlotHashes holds every slot up to the current one.
    fn clock(&self) -> Clock {
        let entry = |slot: u64| Entropy { slot, slot_hash: hashv(&[b"slot", &slot.to_le_bytes()]) };
        let drawn = self.s.draw_after().filter(|&a| a < self.slot).map(|a| entry(a + 1));
        Clock { unix_timestamp: self.now, slot: self.slot, entropy: entry(self.slot), drawn }
    }

    /// The next slot begins and a tick draws the round's verify seed.
    fn draw(&mut self) {
        assert!(self.s.draw_after().is_some(), "no verify seed to draw");
        self.slot += 1;
        self.tick().unwrap();
        assert!(self.s.draw_after().is_none());
    }

    fn wait(&mut self, secs: i64) {
        self.now += secs;
        self.slot += 2 * secs as u64 + 1;
    }

    fn state(&self) -> RunState {
        self.s.run_state().unwrap()
    }

    fn tick(&mut self) -> Result<Events, E> {
        let c = self.clock();
        self.s.tick(&c)
    }

    fn join(&mut self, i: u32) -> Result<Events, E> {
        let c = self.clock();
        self.s.join(&key(i), &p2p(i), &c)
    }

    fn leave(&mut self, i: u32) -> Result<Events, E> {
        let c = self.clock();
        self.s.leave(&key(i), &c)
    }

    /// Runs `f` and checks that it fails with `want` and changes no byte.
    fn rejects<T: std::fmt::Debug>(&mut self, want: E, f: impl FnOnce(&mut CoordinatorState, &Clock) -> Result<T, E>) {
        let before = self.s.as_bytes().to_vec();
        let c = self.clock();
        let got = f(&mut self.s, &c);
        assert_eq!(got.err(), Some(want));
        assert!(self.s.as_bytes() == &before[..], "rejected {want:?} changed the account");
    }

    /// Joins `ids` and forms the epoch (WaitingForMembers -> Warmup).
    fn form_epoch(&mut self, ids: impl IntoIterator<Item = u32>) {
        for i in ids {
            self.join(i).unwrap();
        }
        self.wait(i64::from(self.s.config.waiting_for_members_extra_time));
        self.tick().unwrap();
        assert_eq!(self.state(), RunState::Warmup);
    }

    fn members(&self) -> Vec<(u16, [u8; 32])> {
        (0..self.s.epoch.clients_len as usize).map(|i| (i as u16, self.s.epoch_client(i).unwrap().1.signer)).collect()
    }

    /// Every healthy member reports ready until training starts.
    fn start_training(&mut self) {
        for (_, signer) in self.members() {
            if self.state() != RunState::Warmup {
                break;
            }
            let c = self.clock();
            self.s.warmup_witness(&signer, &c).unwrap();
        }
        assert_eq!(self.state(), RunState::RoundTrain);
    }

    fn elected(&self) -> Vec<(u16, [u8; 32])> {
        let r = self.s.current_round();
        self.members()
            .into_iter()
            .filter(|(i, _)| selection::is_witness(*i, r.clients_len, self.s.config.witness_nodes, &r.seed))
            .collect()
    }

    fn report(&self, index: u16, seen: &[[u8; 32]]) -> WitnessReport {
        let mut participant = Bloom::new(1024, 6, [index as u8; 8]).unwrap();
        for k in seen {
            participant.add(k);
        }
        WitnessReport {
            step: self.s.progress.step,
            index,
            participant_bloom: participant,
            broadcast_bloom: Bloom::new(512, 4, [9; 8]).unwrap(),
            broadcast_merkle: [3; 32],
        }
    }

    /// The first `count` elected witnesses report having seen `seen`.
    fn witness(&mut self, count: usize, seen: &[[u8; 32]]) {
        for (index, signer) in self.elected().into_iter().take(count) {
            let report = self.report(index, seen);
            let c = self.clock();
            self.s.witness(&signer, &report, &c).unwrap();
        }
    }

    fn healthy_signers(&self) -> Vec<[u8; 32]> {
        self.members().into_iter().filter(|(i, _)| self.s.epoch.clients[*i as usize].state == HEALTHY).map(|(_, k)| k).collect()
    }

    /// All witnesses report everyone healthy; the round ends.
    fn finish_round(&mut self) {
        assert_eq!(self.state(), RunState::RoundTrain);
        let seen = self.healthy_signers();
        self.witness(usize::MAX, &seen);
        assert_eq!(self.state(), RunState::RoundWitness);
        if self.s.draw_after().is_some() {
            self.draw();
        }
        self.wait(self.s.config.round_witness_time as i64);
        self.tick().unwrap();
    }
}

#[test]
fn init_once_with_a_valid_run_id() {
    let mut s = zeroed_state();
    assert_eq!(s.init(b"", b"v1"), Err(E::InvalidRunId));
    assert_eq!(s.init(&[b'a'; 33], b"v1"), Err(E::InvalidRunId));
    assert_eq!(s.init(b"a\0b", b"v1"), Err(E::InvalidRunId));
    assert_eq!(s.init(b"\xff", b"v1"), Err(E::InvalidRunId));
    assert_eq!(s.init(b"run", b""), Err(E::InvalidClientVersion));
    assert_eq!(s.version, 0);
    s.init(&[b'a'; 32], b"v1").unwrap();
    assert_eq!(s.run_state(), Ok(RunState::Uninitialized));
    assert_eq!(s.init(b"other", b"v1"), Err(E::AlreadyInitialized));
    let mut corrupt = zeroed_state();
    assert_eq!(corrupt.tick(&Sim::uninitialized().clock()), Err(E::CorruptState));
    corrupt.init(b"x", b"v").unwrap();
    corrupt.run_state = 8;
    assert_eq!(corrupt.run_state(), Err(E::CorruptState));
}

#[test]
fn resume_from_uninitialized_needs_a_valid_config_and_model() {
    let mut sim = Sim::uninitialized();
    sim.rejects(E::ConfigEpochTime, |s, c| s.set_paused(false, c));
    sim.rejects(E::RunUninitialized, |s, c| s.join(&key(1), &p2p(1), c));
    sim.rejects(E::RunHalted, |s, c| s.tick(c));
    let config = valid_config();
    sim.s.update(&Update { config: Some(&config), ..Default::default() }).unwrap();
    sim.rejects(E::ModelArchitecture, |s, c| s.set_paused(false, c));
    let mut bad_model = valid_model();
    bad_model.cold_start_warmup_steps = 1000;
    sim.rejects(E::ModelColdStartSteps, |s, _| s.update(&Update { model: Some(&bad_model), ..Default::default() }));
    sim.s.update(&Update { model: Some(&valid_model()), ..Default::default() }).unwrap();
    let ev = sim.s.set_paused(false, &sim.clock()).unwrap();
    assert_eq!(sim.state(), RunState::WaitingForMembers);
    assert_eq!(sim.s.progress.step, 1);
    assert!(matches!(ev.iter().next(), Some(Event::StateChanged { from: RunState::Uninitialized, to: RunState::WaitingForMembers, .. })));
}

#[test]
fn a_run_paused_before_it_ever_started_resumes_at_step_one() {
    let mut sim = Sim::uninitialized();
    let (config, model) = (valid_config(), valid_model());
    sim.s.update(&Update { config: Some(&config), model: Some(&model), ..Default::default() }).unwrap();
    sim.s.set_paused(true, &sim.clock()).unwrap();
    assert_eq!((sim.state(), sim.s.progress.step), (RunState::Paused, 0));
    sim.join(1).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    assert_eq!((sim.state(), sim.s.progress.step), (RunState::WaitingForMembers, 1));
    // The join made while paused still counts.
    assert_eq!(sim.s.clients[0].pending, 1);
}

#[test]
fn updates_only_while_halted_and_validated() {
    let mut sim = Sim::new();
    let config = valid_config();
    sim.rejects(E::RunNotHalted, |s, _| s.update(&Update { config: Some(&config), ..Default::default() }));
    sim.rejects(E::RunNotHalted, |s, _| s.update_client_version(b"v2"));
    let md = RunMetadata { name: text("run"), description: text("desc"), num_parameters: 10, vocab_size: 256 };
    let nonce = sim.s.nonce;
    sim.s.update(&Update { metadata: Some(&md), ..Default::default() }).unwrap();
    assert_eq!(sim.s.metadata, md);
    assert_eq!(sim.s.nonce, nonce + 1);
    let bad_md = RunMetadata { name: [0xff; NAME_LEN], ..md };
    sim.rejects(E::InvalidMetadata, |s, _| s.update(&Update { metadata: Some(&bad_md), ..Default::default() }));
    sim.s.set_paused(true, &sim.clock()).unwrap();
    let bad = CoordinatorConfig { min_clients: 0, ..config };
    sim.rejects(E::ConfigMinClients, |s, _| s.update(&Update { config: Some(&bad), ..Default::default() }));
    let progress = Progress { epoch: 3, step: 101, data_index: 7 };
    sim.rejects(E::InvalidProgress, |s, _| s.update(&Update { progress: Some(&progress), ..Default::default() }));
    let progress = Progress { step: 50, ..progress };
    sim.s.update(&Update { progress: Some(&progress), ..Default::default() }).unwrap();
    sim.s.update_client_version(b"v2").unwrap();
    assert_eq!(&sim.s.client_version[..3], b"v2\0");
    sim.s.set_future_epoch_rates(Some(90), None).unwrap();
    sim.s.set_future_epoch_rates(None, Some(5)).unwrap();
    assert_eq!(sim.s.future_rates, EpochRates { earning_rate_total_shared: 90, slashing_rate_per_client: 5 });
    sim.s.set_paused(false, &sim.clock()).unwrap();
    assert_eq!(sim.s.progress, progress);
}

#[test]
fn waiting_for_members_needs_init_min_clients_and_the_extra_time() {
    let mut sim = Sim::new();
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.join(1).unwrap();
    sim.join(2).unwrap();
    sim.wait(100);
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c)); // 2 < init_min_clients = 3
    // A fresh WaitingForMembers phase: the extra time counts from its start.
    let mut sim = Sim::new();
    let start = sim.now;
    for i in 1..=3 {
        sim.join(i).unwrap();
    }
    sim.now = start + 2;
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.now = start + 3; // exactly waiting_for_members_extra_time
    let ev = sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Warmup);
    assert!(matches!(ev.iter().next(), Some(Event::StateChanged { to: RunState::Warmup, .. })));
    assert_eq!(sim.s.epoch.clients_len, 3);
    assert_eq!(sim.s.epoch.start_timestamp, sim.now);
    // Same-second double tick: nothing more can happen.
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    assert!(sim.s.clients.iter().filter(|c| c.occupied != 0).all(|c| c.in_epoch == 1 && c.pending == 0));
}

#[test]
fn a_join_that_completes_the_quorum_forms_the_epoch_itself() {
    let mut sim = Sim::new();
    sim.join(1).unwrap();
    sim.join(2).unwrap();
    sim.wait(10);
    let ev = sim.join(3).unwrap();
    assert_eq!(sim.state(), RunState::Warmup);
    assert_eq!(ev.len(), 2);
}

#[test]
fn warmup_ends_on_enough_ready_reports() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=4);
    let members = sim.members();
    let c = sim.clock();
    sim.s.warmup_witness(&members[0].1, &c).unwrap();
    sim.rejects(E::AlreadyWitnessed, |s, c| s.warmup_witness(&members[0].1, c));
    sim.rejects(E::NotInEpoch, |s, c| s.warmup_witness(&key(99), c));
    assert_eq!(sim.state(), RunState::Warmup);
    // witness_nodes = 2: the second report starts training in the same second.
    let ev = sim.s.warmup_witness(&members[1].1, &c).unwrap();
    assert_eq!(sim.state(), RunState::RoundTrain);
    let kinds: Vec<_> = ev.iter().collect();
    assert!(matches!(kinds[1], Event::StateChanged { to: RunState::RoundTrain, .. }));
    assert!(matches!(kinds[2], Event::RoundStarted { height: 0, step: 1, data_index: 0, batch_size: 8, inner_steps: 1, clients: 4, .. }));
    sim.rejects(E::WrongPhase, |s, c| s.warmup_witness(&members[2].1, c));
}

#[test]
fn warmup_times_out_at_exactly_warmup_time() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    let start = sim.now;
    sim.now = start + 29;
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.now = start + 30;
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::RoundTrain);
}

#[test]
fn warmup_returns_to_waiting_when_members_left() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    sim.leave(1).unwrap();
    sim.leave(2).unwrap();
    sim.wait(30);
    let ev = sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::WaitingForMembers);
    assert!(matches!(ev.iter().next(), Some(Event::EpochEnded { success: false, .. })));
    // The one who stayed is pending again; those who left are not.
    let pending: Vec<_> = sim.s.clients.iter().filter(|c| c.pending != 0).map(|c| c.signer).collect();
    assert_eq!(pending, vec![key(3)]);
    assert_eq!(sim.s.epoch.clients_len, 0);
    assert!(sim.s.clients.iter().all(|c| c.in_epoch == 0));
}

#[test]
fn round_train_ends_when_all_witnesses_report_or_on_timeout() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=4);
    sim.start_training();
    let seen = sim.healthy_signers();
    sim.witness(1, &seen);
    assert_eq!(sim.state(), RunState::RoundTrain);
    let (index, signer) = sim.elected()[1];
    let report = sim.report(index, &seen);
    let c = sim.clock();
    sim.s.witness(&signer, &report, &c).unwrap();
    assert_eq!(sim.state(), RunState::RoundWitness, "all elected witnesses reported");

    let mut sim = Sim::new();
    sim.form_epoch(1..=4);
    sim.start_training();
    let start = sim.now;
    sim.now = start + 19;
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.now = start + 20;
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::RoundWitness);
    // RoundWitness lasts round_witness_time = 5 seconds.
    sim.now = start + 24;
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.now = start + 25;
    sim.tick().unwrap();
    // No witness reported: the round missed its quorum and the epoch cools down.
    assert_eq!(sim.state(), RunState::Cooldown);
    assert_eq!(sim.s.epoch.quorum_failed, 1);
}

#[test]
fn rounds_advance_step_data_cursor_height_and_seed() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=4);
    sim.start_training();
    let mut seeds = vec![sim.s.current_round().seed];
    for round in 1..=6u32 {
        let before = sim.s.progress;
        sim.finish_round();
        assert_eq!(sim.state(), RunState::RoundTrain);
        let r = sim.s.current_round();
        assert_eq!(r.height, round);
        assert_eq!(r.step, before.step + 1);
        assert_eq!(r.data_index, before.data_index);
        assert_eq!(sim.s.progress.data_index, before.data_index + 8);
        assert_eq!(usize::from(sim.s.epoch.rounds_head), round as usize % NUM_STORED_ROUNDS);
        assert!(!seeds.contains(&r.seed));
        seeds.push(r.seed);
    }
    assert_eq!(sim.s.progress.step, 7);
    assert_eq!(sim.s.progress.data_index, 7 * 8);
}

#[test]
fn batch_size_ramps_and_caps_the_epoch_size() {
    let config = CoordinatorConfig {
        global_batch_size_start: 3,
        global_batch_size_end: 11,
        global_batch_size_warmup_tokens: 256 * 40, // 40 sequences of 256 tokens
        ..valid_config()
    };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=5);
    // Only 3 sequences in the first batch: 3 members, the other 2 stay pending.
    assert_eq!(sim.s.epoch.clients_len, 3);
    assert_eq!(sim.s.clients.iter().filter(|c| c.pending != 0).count(), 2);
    sim.start_training();
    let mut sizes = vec![sim.s.current_round().batch_size];
    for _ in 0..8 {
        sim.finish_round();
        sizes.push(sim.s.current_round().batch_size);
    }
    // tokens = data_index * 256; size = 3 + 8 * data_index / 40 until 40 sequences.
    // data_index 0, 3, 6, 10, 15, 21, 28, 36, 46 (>= 40: the end size).
    assert_eq!(sizes, vec![3, 3, 4, 5, 6, 7, 8, 10, 11]);
    let r = sim.s.current_round();
    let sched = selection::BatchSchedule { start: 3, end: 11, warmup_tokens: 256 * 40, seq_len: 256, inner_steps: 1 };
    assert_eq!(r.data_index, selection::data_index_for_step(&sched, r.step), "restart formula agrees");
    assert_eq!(sim.s.progress.data_index, 46 + 11);
}

#[test]
fn inner_steps_multiply_the_cursor_advance_and_keep_the_ramp_on_data_index() {
    let config = CoordinatorConfig {
        global_batch_size_start: 3,
        global_batch_size_end: 11,
        global_batch_size_warmup_tokens: 256 * 40, // 40 sequences of 256 tokens
        ..valid_config()
    };
    let model = Model { inner_steps: 4, ..valid_sparseloco() };
    let mut sim = Sim::with_model(config, model);
    sim.form_epoch(1..=5);
    // The member cap counts one inner step's batch: 3 members.
    assert_eq!(sim.s.epoch.clients_len, 3);
    let c = sim.clock();
    let members = sim.members();
    sim.s.warmup_witness(&members[0].1, &c).unwrap();
    let ev = sim.s.warmup_witness(&members[1].1, &c).unwrap();
    assert!(ev.iter().any(|e| matches!(e, Event::RoundStarted { step: 1, data_index: 0, batch_size: 3, inner_steps: 4, .. })));
    let mut rounds = vec![(sim.s.current_round().data_index, sim.s.current_round().batch_size, sim.s.current_round().inner_steps)];
    for _ in 0..5 {
        sim.finish_round();
        let r = sim.s.current_round();
        rounds.push((r.data_index, r.batch_size, r.inner_steps));
    }
    // size = 3 + 8 * data_index / 40 until 40 sequences; each round covers size * 4.
    // data_index 0, 12, 32, 68 (the end size from here), 112, 156.
    assert_eq!(rounds, vec![(0, 3, 4), (12, 5, 4), (32, 9, 4), (68, 11, 4), (112, 11, 4), (156, 11, 4)]);
    let r = *sim.s.current_round();
    assert_eq!(sim.s.progress.data_index, r.data_index + 11 * 4);
    let sched = selection::BatchSchedule { start: 3, end: 11, warmup_tokens: 256 * 40, seq_len: 256, inner_steps: 4 };
    for (step, (index, _, _)) in rounds.iter().enumerate() {
        assert_eq!(selection::data_index_for_step(&sched, step as u32 + 1), *index, "restart formula at step {}", step + 1);
    }
    // Every member trains 4 contiguous shares; together they cover the round once.
    let data = selection::DataRound {
        seed: r.seed,
        data_index: r.data_index,
        batch_size: r.batch_size,
        clients: r.clients_len,
        inner_steps: r.inner_steps,
    };
    let mut covered: Vec<u64> = (0..r.clients_len)
        .flat_map(|i| {
            let a = selection::assignment(&data, i).unwrap();
            assert_eq!(a.len % 4, 0);
            a.start..a.start + a.len
        })
        .collect();
    covered.sort();
    assert_eq!(covered, (r.data_index..r.data_index + 44).collect::<Vec<_>>());
    // A model change while paused takes effect at the next round start.
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Paused);
    let distro = valid_model();
    sim.s.update(&Update { model: Some(&distro), ..Default::default() }).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    let index = sim.s.progress.data_index;
    sim.form_epoch(1..=5);
    sim.start_training();
    let r = sim.s.current_round();
    assert_eq!((r.data_index, r.inner_steps), (index, 1));
    assert_eq!(sim.s.progress.data_index, index + 11);
}

#[test]
fn epoch_ends_after_its_time_plus_two_drain_rounds_and_pays_finishers() {
    let config = CoordinatorConfig { epoch_time: 120, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.s.set_future_epoch_rates(Some(100), Some(7)).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.form_epoch(1..=3);
    sim.start_training();
    let epoch_start = sim.s.epoch.start_timestamp;
    let mut rounds = 1;
    while sim.s.epoch.last_step == 0 {
        sim.wait(10);
        sim.finish_round();
        rounds += 1;
    }
    assert!(sim.now - epoch_start >= 120);
    assert_eq!(sim.s.epoch.last_step, sim.s.progress.step + DRAIN_ROUNDS);
    sim.finish_round();
    assert_eq!(sim.state(), RunState::RoundTrain);
    sim.finish_round();
    assert_eq!(sim.state(), RunState::Cooldown);
    assert_eq!(sim.s.progress.step as usize, rounds + 2, "two drain rounds after the one that saw the time run out");
    let start = sim.now;
    sim.now = start + 9;
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    sim.now = start + 10;
    let ev = sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::WaitingForMembers);
    assert!(matches!(ev.iter().next(), Some(Event::EpochEnded { epoch: 0, success: true, rewarded: 3 })));
    assert_eq!(sim.s.progress.epoch, 1);
    // 100 points over 3 finishers: 34 + 33 + 33, exactly the rate.
    let mut earned: Vec<_> = (1..=3).map(|i| sim.s.clients.iter().find(|c| c.signer == key(i)).unwrap().earned).collect();
    earned.sort();
    assert_eq!(earned, vec![33, 33, 34]);
    // Hub hands over to peers; everyone must re-join.
    assert_eq!(sim.s.model.checkpoint_kind, CHECKPOINT_P2P);
    assert!(sim.s.clients.iter().all(|c| c.pending == 0 && c.in_epoch == 0));
}

#[test]
fn checkpoint_reverts_to_hub_when_no_model_holder_returns() {
    let mut sim = Sim::new();
    let run_epoch = |sim: &mut Sim, ids: std::ops::RangeInclusive<u32>| {
        sim.form_epoch(ids);
        sim.start_training();
        sim.s.set_paused(true, &sim.clock()).unwrap(); // pending pause ends the epoch after this round
        sim.finish_round();
        assert_eq!(sim.state(), RunState::Cooldown);
        sim.wait(10);
        sim.tick().unwrap();
        assert_eq!(sim.state(), RunState::Paused);
        sim.s.set_paused(false, &sim.clock()).unwrap();
    };
    run_epoch(&mut sim, 1..=3);
    assert_eq!(sim.s.model.checkpoint_kind, CHECKPOINT_P2P);
    // One finisher of epoch 0 returns: peers can serve the model.
    sim.form_epoch([3, 4, 5]);
    assert_eq!(sim.s.model.checkpoint_kind, CHECKPOINT_P2P);
    assert_eq!(sim.s.epoch.cold_start, 1, "first epoch after a pause is a cold start");
    sim.start_training();
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    // Nobody from epoch 1 returns: joiners must load the repo.
    sim.form_epoch(10..=12);
    assert_eq!(sim.s.model.checkpoint_kind, CHECKPOINT_HUB);
}

#[test]
fn run_finishes_after_total_steps() {
    let config = CoordinatorConfig { total_steps: 3, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    sim.finish_round();
    assert_eq!(sim.state(), RunState::RoundTrain);
    sim.finish_round();
    assert_eq!(sim.state(), RunState::Cooldown);
    assert_eq!(sim.s.progress.step, 4);
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Finished);
    sim.rejects(E::RunHalted, |s, c| s.tick(c));
    sim.rejects(E::RunFinished, |s, c| s.join(&key(1), &p2p(1), c));
    sim.rejects(E::RunFinished, |s, c| s.set_paused(false, c));
    sim.rejects(E::RunFinished, |s, _| s.update(&Update::default()));
    // The final model may still be announced, by a client that finished the
    // last epoch, and the run stays Finished.
    let repo = CheckpointRepo { repo: text("http://127.0.0.1:9/final"), revision: text("f00d") };
    sim.rejects(E::NotInEpoch, |s, c| s.checkpoint(&key(9), &repo, c));
    let elected = sim.s.clients.iter().find(|c| c.checkpointer != 0).map(|c| c.signer).unwrap();
    let c = sim.clock();
    sim.s.checkpoint(&elected, &repo, &c).unwrap();
    assert_eq!((sim.s.model.checkpoint_repo, sim.s.model.checkpoint_revision), (repo.repo, repo.revision));
    assert_eq!(sim.state(), RunState::Finished);
}

#[test]
fn final_checkpoint_needs_a_finisher_of_the_last_epoch() {
    let config = CoordinatorConfig { total_steps: 1, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Finished);
    // A paused run refuses announcements; a finished one only from finishers.
    let repo = CheckpointRepo { repo: text("http://127.0.0.1:9/final"), revision: text("f00d") };
    // The last round's witnesses are the finishers that may announce.
    let elected: Vec<[u8; 32]> = sim.s.clients.iter().filter(|c| c.checkpointer != 0).map(|c| c.signer).collect();
    assert_eq!(elected.len(), 2, "witness_nodes = 2");
    let passed_over = sim.s.clients.iter().find(|c| c.occupied != 0 && c.checkpointer == 0).map(|c| c.signer).unwrap();
    sim.rejects(E::NotCheckpointer, |s, c| s.checkpoint(&passed_over, &repo, c));
    sim.s.clients.iter_mut().for_each(|c| c.has_finished = 0);
    sim.rejects(E::NotInEpoch, |s, c| s.checkpoint(&elected[0], &repo, c));
}

#[test]
fn quorum_counts_elected_witnesses_not_arrivals() {
    // witness_nodes = 0: min(clients, 32) are elected; 6 clients -> 6 elected, quorum 4.
    let config = CoordinatorConfig { witness_nodes: 0, init_min_clients: 6, min_clients: 2, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=6);
    sim.start_training();
    assert_eq!(sim.s.current_round().witness_count, 6);
    let seen = sim.healthy_signers();
    sim.witness(3, &seen);
    sim.wait(20);
    sim.tick().unwrap();
    sim.wait(5);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Cooldown, "3 of 6 elected is below quorum 4");
    sim.wait(10);
    let ev = sim.tick().unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::EpochEnded { success: false, rewarded: 0, .. })));

    let mut sim = Sim::with(config);
    sim.form_epoch(1..=6);
    sim.start_training();
    let seen = sim.healthy_signers();
    sim.witness(4, &seen);
    sim.wait(20);
    sim.tick().unwrap();
    sim.wait(5);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::RoundTrain, "4 of 6 meets quorum");
}

#[test]
fn witness_rejections() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=5);
    sim.rejects(E::WrongPhase, |s, c| s.witness(&key(1), &WitnessReport { step: 1, index: 0, ..dummy_report() }, c));
    sim.start_training();
    let elected = sim.elected();
    let (wi, wk) = elected[0];
    let (ni, nk) = sim.members().into_iter().find(|m| !elected.contains(m)).unwrap();
    let good = sim.report(wi, &[]);
    sim.rejects(E::WrongRound, |s, c| s.witness(&wk, &WitnessReport { step: 2, ..good }, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.witness(&wk, &WitnessReport { index: ni, ..good }, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.witness(&wk, &WitnessReport { index: 200, ..good }, c));
    sim.rejects(E::NotAWitness, |s, c| s.witness(&nk, &WitnessReport { index: ni, ..good }, c));
    let mut bad_bloom = good;
    bad_bloom.participant_bloom.num_bits = 2048;
    sim.rejects(E::InvalidBloom, |s, c| s.witness(&wk, &bad_bloom, c));
    let mut bad_bloom = good;
    bad_bloom.broadcast_bloom.num_hashes = 0;
    sim.rejects(E::InvalidBloom, |s, c| s.witness(&wk, &bad_bloom, c));
    let c = sim.clock();
    sim.s.witness(&wk, &good, &c).unwrap();
    sim.rejects(E::AlreadyWitnessed, |s, c| s.witness(&wk, &good, c));
    // A witness that left is no longer accepted.
    let (wi2, wk2) = elected[1];
    let signer_id = (1..=5).find(|&i| key(i) == wk2).unwrap();
    sim.leave(signer_id).unwrap();
    let report = sim.report(wi2, &[]);
    sim.rejects(E::NotInEpoch, |s, c| s.witness(&wk2, &report, c));
    // Late reports are accepted during RoundWitness, stale ones after.
    sim.wait(20);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::RoundWitness);
}

fn dummy_report() -> WitnessReport {
    let b = Bloom::new(64, 1, [0; 8]).unwrap();
    WitnessReport { step: 0, index: 0, participant_bloom: b, broadcast_bloom: b, broadcast_merkle: [0; 32] }
}

#[test]
fn health_checks_drop_only_clients_a_quorum_did_not_see() {
    let config = CoordinatorConfig { witness_nodes: 3, min_clients: 3, init_min_clients: 5, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.s.set_future_epoch_rates(None, Some(50)).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.form_epoch(1..=5);
    sim.start_training();
    let members = sim.members();
    let (bad_index, bad) = members[4];
    let reporter = members[0].1;
    let check = |sim: &Sim| HealthCheck { step: sim.s.progress.step, index: bad_index, accused: bad };
    // Rounds 0 and 1: too early.
    let hc = check(&sim);
    sim.rejects(E::HealthCheckTooEarly, |s, c| s.health_check(&reporter, &hc, c));
    sim.finish_round();
    // Round 1 is witnessed without the bad client.
    let others: Vec<_> = sim.healthy_signers().into_iter().filter(|k| *k != bad).collect();
    sim.witness(usize::MAX, &others);
    sim.wait(5);
    sim.tick().unwrap();
    assert_eq!(sim.s.current_round().height, 2);
    let hc = check(&sim);
    sim.rejects(E::WrongRound, |s, c| s.health_check(&reporter, &HealthCheck { step: hc.step - 1, ..hc }, c));
    sim.rejects(E::NotInEpoch, |s, c| s.health_check(&key(77), &hc, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.health_check(&reporter, &HealthCheck { accused: key(77), ..hc }, c));
    // A client every witness saw cannot be dropped.
    let good = HealthCheck { step: hc.step, index: members[1].0, accused: members[1].1 };
    sim.rejects(E::ClientHealthy, |s, c| s.health_check(&reporter, &good, c));
    let ev = sim.s.health_check(&reporter, &hc, &sim.clock()).unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::ClientDropped { .. })));
    assert_eq!(sim.s.epoch.clients[bad_index as usize].state, DROPPED);
    assert_eq!(sim.s.clients.iter().find(|c| c.signer == bad).unwrap().slashed, 50);
    sim.rejects(E::ClientNotHealthy, |s, c| s.health_check(&reporter, &hc, c));
    // The dropped client is compacted away at the next round and gets no reward.
    sim.finish_round();
    assert_eq!(sim.s.epoch.clients_len, 4);
    assert!(sim.members().iter().all(|m| m.1 != bad));
    assert_eq!(sim.s.clients.iter().find(|c| c.signer == bad).unwrap().in_epoch, 0);
}

#[test]
fn overlapped_rounds_start_health_checks_one_round_later() {
    let config = CoordinatorConfig { overlap: 1, witness_nodes: 3, min_clients: 3, init_min_clients: 5, ..valid_config() };
    let mut sim = Sim::with(config);
    assert_eq!(sim.s.first_health_check_height(), FIRST_HEALTH_CHECK_HEIGHT + 1);
    sim.form_epoch(1..=5);
    sim.start_training();
    let members = sim.members();
    let (bad_index, bad) = members[4];
    let reporter = members[0].1;
    let others: Vec<_> = members.iter().map(|m| m.1).filter(|k| *k != bad).collect();
    // Rounds 0, 1 and 2 are witnessed without the bad client; checks are too
    // early until round 3 (round r's filters attest round r-1's deliveries).
    for height in 0..3u32 {
        assert_eq!(sim.s.current_round().height, height);
        let hc = HealthCheck { step: sim.s.progress.step, index: bad_index, accused: bad };
        sim.rejects(E::HealthCheckTooEarly, |s, c| s.health_check(&reporter, &hc, c));
        sim.witness(usize::MAX, &others);
        sim.wait(5);
        sim.tick().unwrap();
    }
    assert_eq!(sim.s.current_round().height, 3);
    let hc = HealthCheck { step: sim.s.progress.step, index: bad_index, accused: bad };
    let good = HealthCheck { step: hc.step, index: members[1].0, accused: members[1].1 };
    sim.rejects(E::ClientHealthy, |s, c| s.health_check(&reporter, &good, c));
    sim.s.health_check(&reporter, &hc, &sim.clock()).unwrap();
    assert_eq!(sim.s.epoch.clients[bad_index as usize].state, DROPPED);
    // Without overlap the same schedule accepts the check at height 2.
    let mut plain = Sim::with(CoordinatorConfig { overlap: 0, ..config });
    assert_eq!(plain.s.first_health_check_height(), FIRST_HEALTH_CHECK_HEIGHT);
    plain.form_epoch(1..=5);
    plain.start_training();
    for _ in 0..2 {
        plain.witness(usize::MAX, &others);
        plain.wait(5);
        plain.tick().unwrap();
    }
    assert_eq!(plain.s.current_round().height, 2);
    let hc = HealthCheck { step: plain.s.progress.step, index: bad_index, accused: bad };
    plain.s.health_check(&reporter, &hc, &plain.clock()).unwrap();
}

#[test]
fn overlap_and_optimizer_updates_are_validated_and_rejections_change_nothing() {
    let mut sim = Sim::uninitialized();
    let config = valid_config();
    let cases: [(CoordinatorConfig, E); 3] = [
        (CoordinatorConfig { overlap: 2, ..config }, E::ConfigOverlap),
        (CoordinatorConfig { overlap: 1, verification_percent: 10, ..config }, E::ConfigOverlap),
        (CoordinatorConfig { overlap: 255, verification_percent: 0, ..config }, E::ConfigOverlap),
    ];
    for (bad, want) in cases {
        sim.rejects(want, |s, _| s.update(&Update { config: Some(&bad), ..Default::default() }));
        sim.rejects(want, |s, _| s.update(&Update { config: Some(&bad), model: Some(&valid_model()), ..Default::default() }));
    }
    let models: [Model; 8] = [
        Model { inner_steps: 2, ..valid_model() },
        Model { value_bits: 8, ..valid_model() },
        Model { outer_learning_rate: 0x3f800000, ..valid_model() },
        Model { inner_steps: 0, ..valid_sparseloco() },
        Model { inner_steps: MAX_INNER_STEPS + 1, ..valid_sparseloco() },
        Model { outer_learning_rate: 0, ..valid_sparseloco() },
        Model { value_bits: 3, ..valid_sparseloco() },
        Model { quantize_1bit: 1, ..valid_sparseloco() },
    ];
    for bad in models {
        sim.rejects(E::ModelOptimizer, |s, _| s.update(&Update { model: Some(&bad), ..Default::default() }));
        sim.rejects(E::ModelOptimizer, |s, _| s.update(&Update { config: Some(&config), model: Some(&bad), ..Default::default() }));
    }
    let overlapped = CoordinatorConfig { overlap: 1, ..config };
    let model = valid_sparseloco();
    sim.s.update(&Update { config: Some(&overlapped), model: Some(&model), ..Default::default() }).unwrap();
    assert_eq!((sim.s.config.overlap, sim.s.model.inner_steps, sim.s.model.value_bits), (1, 10, 2));
    // A stored model that no longer validates (written before the rules) is
    // refused when the run resumes.
    sim.s.model.inner_steps = 0;
    sim.rejects(E::ModelOptimizer, |s, c| s.set_paused(false, c));
    sim.s.model.inner_steps = 10;
    sim.s.set_paused(false, &sim.clock()).unwrap();
    // Verification cannot be turned on while rounds overlap.
    sim.s.set_paused(true, &sim.clock()).unwrap();
    let verified = CoordinatorConfig { verification_percent: 5, ..overlapped };
    sim.rejects(E::ConfigOverlap, |s, _| s.update(&Update { config: Some(&verified), ..Default::default() }));
}

#[test]
fn precision_is_stored_and_unknown_contracts_are_refused() {
    let mut sim = Sim::uninitialized();
    let config = valid_config();
    for bad in [2u8, 255] {
        let model = Model { precision: bad, ..valid_model() };
        sim.rejects(E::ModelPrecision, |s, _| s.update(&Update { config: Some(&config), model: Some(&model), ..Default::default() }));
    }
    let mx8 = Model { precision: PRECISION_MX8, ..valid_model() };
    sim.s.update(&Update { config: Some(&config), model: Some(&mx8), ..Default::default() }).unwrap();
    assert_eq!(sim.s.model.precision, PRECISION_MX8);
    // The byte sits where the padding was: fp32 in an account written before it.
    let fp32 = Model { precision: PRECISION_FP32, ..valid_model() };
    sim.s.update(&Update { model: Some(&fp32), ..Default::default() }).unwrap();
    assert_eq!(sim.s.model.precision, PRECISION_FP32);
    // A stored contract this program does not know is refused when the run resumes.
    sim.s.model.precision = 2;
    sim.rejects(E::ModelPrecision, |s, c| s.set_paused(false, c));
    sim.s.model.precision = PRECISION_MX8;
    sim.s.set_paused(false, &sim.clock()).unwrap();
}

#[test]
fn grad_shards_are_stored_and_more_than_64_are_refused() {
    let mut sim = Sim::uninitialized();
    let config = valid_config();
    for bad in [MAX_GRAD_SHARDS_LOG2 + 1, 255] {
        let model = Model { grad_shards_log2: bad, ..valid_model() };
        sim.rejects(E::ModelGradShards, |s, _| s.update(&Update { config: Some(&config), model: Some(&model), ..Default::default() }));
    }
    let sixty_four = Model { grad_shards_log2: MAX_GRAD_SHARDS_LOG2, ..valid_model() };
    sim.s.update(&Update { config: Some(&config), model: Some(&sixty_four), ..Default::default() }).unwrap();
    assert_eq!(sim.s.model.grad_shards_log2, MAX_GRAD_SHARDS_LOG2);
    // The byte sits where the padding was: one shard in an account written before it.
    let one = Model { grad_shards_log2: 0, ..valid_model() };
    sim.s.update(&Update { model: Some(&one), ..Default::default() }).unwrap();
    assert_eq!(sim.s.model.grad_shards_log2, 0);
    let seven = Model { grad_shards_log2: 7, ..valid_model() };
    sim.rejects(E::ModelGradShards, |s, _| s.update(&Update { model: Some(&seven), ..Default::default() }));
    assert_eq!(sim.s.model.grad_shards_log2, 0);
    // A stored count past the limit is refused when the run resumes.
    sim.s.model.grad_shards_log2 = 7;
    sim.rejects(E::ModelGradShards, |s, c| s.set_paused(false, c));
    sim.s.model.grad_shards_log2 = 2;
    sim.s.set_paused(false, &sim.clock()).unwrap();
}

#[test]
fn joins_leaves_and_slot_reuse() {
    let mut sim = Sim::new();
    sim.join(1).unwrap();
    sim.rejects(E::AlreadyJoined, |s, c| s.join(&key(1), &p2p(1), c));
    sim.rejects(E::P2pIdentityTaken, |s, c| s.join(&key(2), &p2p(1), c));
    sim.rejects(E::NotAClient, |s, c| s.leave(&key(2), c));
    sim.leave(1).unwrap();
    sim.rejects(E::NotAClient, |s, c| s.leave(&key(1), c));
    // The slot of a client that left with no points is reused.
    sim.join(2).unwrap();
    assert_eq!(sim.s.clients[0].signer, key(2));
    for i in 3..=257 {
        sim.join(i).unwrap();
    }
    sim.rejects(E::ClientsFull, |s, c| s.join(&key(1000), &p2p(1000), c));
    // A leaver's slot with unsettled points is kept until settled.
    sim.s.clients[5].earned = 10;
    let holder = sim.s.clients[5].signer;
    let c = sim.clock();
    sim.s.leave(&holder, &c).unwrap();
    sim.rejects(E::ClientsFull, |s, c| s.join(&key(1000), &p2p(1000), c));
    assert_eq!(sim.s.settle_points(&holder), Ok((10, 0)));
    sim.join(1000).unwrap();
    assert_eq!(sim.s.clients[5].signer, key(1000));
    assert_eq!(sim.s.clients[5].earned, 0);
}

#[test]
fn members_can_rejoin_for_the_next_epoch_but_keep_their_p2p_identity() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    let c = sim.clock();
    sim.rejects(E::P2pIdentityLocked, |s, c| s.join(&key(1), &p2p(50), c));
    sim.s.join(&key(1), &p2p(1), &c).unwrap();
    sim.rejects(E::AlreadyJoined, |s, c| s.join(&key(1), &p2p(1), c));
    let slot = sim.s.clients.iter().find(|c| c.signer == key(1)).unwrap();
    assert_eq!((slot.pending, slot.in_epoch), (1, 1));
    // Leaving while pending and in the epoch withdraws both.
    sim.leave(1).unwrap();
    let slot = sim.s.clients.iter().find(|c| c.signer == key(1)).unwrap();
    assert_eq!(slot.pending, 0);
    assert_eq!(sim.s.epoch.clients[0].state, LEFT);
}

#[test]
fn pause_is_immediate_while_forming_and_deferred_while_training() {
    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    sim.s.set_paused(true, &sim.clock()).unwrap();
    assert_eq!(sim.state(), RunState::Paused);
    assert_eq!(sim.s.epoch.clients_len, 0);
    assert!(sim.s.clients.iter().all(|c| c.pending == 0 && c.in_epoch == 0));
    sim.rejects(E::AlreadyPaused, |s, c| s.set_paused(true, c));
    sim.rejects(E::RunHalted, |s, c| s.tick(c));
    // Joining while paused counts for the epoch after resuming.
    sim.join(7).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.rejects(E::NotPaused, |s, c| s.set_paused(false, c));
    sim.form_epoch([8, 9]);
    assert_eq!(sim.s.epoch.cold_start, 1);
    sim.start_training();
    let ev = sim.s.set_paused(true, &sim.clock()).unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::PauseRequested { step: 1 })));
    sim.rejects(E::AlreadyPaused, |s, c| s.set_paused(true, c));
    // Resuming cancels the pending pause.
    sim.s.set_paused(false, &sim.clock()).unwrap();
    assert_eq!(sim.s.pending_pause, 0);
    sim.finish_round();
    assert_eq!(sim.state(), RunState::RoundTrain);
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.finish_round();
    assert_eq!(sim.state(), RunState::Cooldown);
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Paused);
    assert_eq!(sim.s.cold_start_next, 1);
    let data_index = sim.s.progress.data_index;
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.form_epoch(1..=3);
    sim.start_training();
    assert_eq!(sim.s.current_round().data_index, data_index, "a resumed run continues where it stopped");
}

#[test]
fn checkpoint_updates_come_from_members_of_hub_or_p2p_runs() {
    let mut sim = Sim::new();
    let repo = CheckpointRepo { repo: text("http://127.0.0.1:9/new"), revision: text("abc") };
    sim.rejects(E::NotInEpoch, |s, c| s.checkpoint(&key(1), &repo, c));
    sim.form_epoch(1..=3);
    sim.start_training();
    let empty = CheckpointRepo { repo: [0; URL_LEN], revision: repo.revision };
    // witness_nodes = 2 of 3 members: the round's witnesses that reported
    // are its checkpointers; the one yet to report and the third member may
    // not announce.
    let elected: Vec<[u8; 32]> = sim.elected().into_iter().map(|(_, k)| k).collect();
    assert_eq!(elected.len(), 2);
    let passed_over = sim.members().into_iter().map(|(_, k)| k).find(|k| !elected.contains(k)).unwrap();
    sim.rejects(E::NotCheckpointer, |s, c| s.checkpoint(&elected[0], &repo, c));
    let seen = sim.healthy_signers();
    sim.witness(1, &seen);
    sim.rejects(E::InvalidCheckpoint, |s, c| s.checkpoint(&elected[0], &empty, c));
    sim.rejects(E::NotInEpoch, |s, c| s.checkpoint(&key(9), &repo, c));
    sim.rejects(E::NotCheckpointer, |s, c| s.checkpoint(&passed_over, &repo, c));
    sim.rejects(E::NotCheckpointer, |s, c| s.checkpoint(&elected[1], &repo, c));
    let c = sim.clock();
    sim.s.checkpoint(&elected[0], &repo, &c).unwrap();
    assert_eq!(sim.s.model.checkpoint_repo, repo.repo);
    assert_eq!(sim.s.model.checkpoint_kind, CHECKPOINT_HUB);

    let mut sim = Sim::uninitialized();
    let mut model = valid_model();
    model.checkpoint_kind = CHECKPOINT_EPHEMERAL;
    model.checkpoint_repo = [0; URL_LEN];
    sim.s.update(&Update { config: Some(&valid_config()), model: Some(&model), ..Default::default() }).unwrap();
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.form_epoch(1..=3);
    sim.rejects(E::CheckpointNotConfigured, |s, c| s.checkpoint(&key(1), &repo, c));
}

#[test]
fn epoch_time_boundary_is_exact() {
    for (round_end, drains) in [(99i64, false), (100, true)] {
        let config = CoordinatorConfig { epoch_time: 100, ..valid_config() };
        let mut sim = Sim::with(config);
        sim.form_epoch(1..=3);
        let t0 = sim.s.epoch.start_timestamp;
        sim.start_training();
        sim.now = t0 + round_end - 5;
        let seen = sim.healthy_signers();
        sim.witness(usize::MAX, &seen);
        assert_eq!(sim.state(), RunState::RoundWitness);
        sim.now = t0 + round_end;
        sim.tick().unwrap();
        assert_eq!(sim.state(), RunState::RoundTrain);
        assert_eq!(sim.s.epoch.last_step != 0, drains, "round ending {round_end}s into a 100s epoch");
    }
}

#[test]
fn at_most_one_timed_transition_per_second() {
    // Drive a whole epoch by timers alone; right after each transition, a second
    // tick in the same second must find nothing to do.
    // 3 elected witnesses, 2 report: quorum is met but RoundTrain ends by its timer.
    let config = CoordinatorConfig { total_steps: 2, witness_nodes: 3, min_clients: 3, ..valid_config() };
    let mut sim = Sim::with(config);
    for i in 1..=3 {
        sim.join(i).unwrap();
    }
    let mut phases = vec![];
    for _ in 0..500 {
        if sim.state() == RunState::Finished {
            break;
        }
        sim.wait(1);
        if sim.state() == RunState::RoundTrain && sim.s.current_round().witnesses_len == 0 {
            let seen = sim.healthy_signers();
            sim.witness(2, &seen);
        }
        if sim.tick().is_ok() {
            phases.push(sim.state());
            let again = if sim.state().is_halted() { E::RunHalted } else { E::TickTooEarly };
            sim.rejects(again, |s, c| s.tick(c));
        }
    }
    use RunState::*;
    assert_eq!(phases, vec![Warmup, RoundTrain, RoundWitness, RoundTrain, RoundWitness, Cooldown, Finished]);
}

#[test]
fn accounts_close_only_while_halted() {
    let mut sim = Sim::uninitialized();
    assert_eq!(sim.s.check_closable(), Ok(()));
    sim = Sim::new();
    assert_eq!(sim.s.check_closable(), Err(E::RunNotHalted));
    sim.form_epoch(1..=3);
    assert_eq!(sim.s.check_closable(), Err(E::RunNotHalted));
    sim.s.set_paused(true, &sim.clock()).unwrap();
    assert_eq!(sim.s.check_closable(), Ok(()));
}

#[test]
fn nonce_bumps_on_every_success() {
    let mut sim = Sim::new();
    let mut last = sim.s.nonce;
    for i in 1..=3 {
        sim.join(i).unwrap();
        assert_eq!(sim.s.nonce, last + 1);
        last = sim.s.nonce;
    }
    sim.wait(3);
    sim.tick().unwrap();
    assert_eq!(sim.s.nonce, last + 1);
}

/// splitmix64: a tiny deterministic generator for the random walk below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random operations from random signers: every call either succeeds or fails
/// without changing a byte, and the invariants hold after each step.
#[test]
fn random_walk_keeps_invariants() {
    let all_witness = CoordinatorConfig { witness_nodes: 0, min_clients: 2, init_min_clients: 3, total_steps: 60, epoch_time: 200, ..valid_config() };
    let two_witnesses = CoordinatorConfig { witness_nodes: 2, ..all_witness };
    // Verdicts need RoundWitness, so it lasts longer in the walks that verify.
    let verified = CoordinatorConfig { verification_percent: 50, round_witness_time: 30, ..all_witness };
    let vesting = CoordinatorConfig { verification_percent: 100, vesting_epochs: 2, forgive_per_epoch: 0, ..verified };
    let overlapped = CoordinatorConfig { overlap: 1, ..all_witness };
    let (distro, sparseloco) = (valid_model(), Model { inner_steps: 3, ..valid_sparseloco() });
    let mut total = [0u32; 4];
    for (seed, config, model) in [
        (42, all_witness, distro),
        (7, two_witnesses, distro),
        (1234, all_witness, distro),
        (99, verified, distro),
        (5, verified, distro),
        (31, vesting, distro),
        (17, overlapped, sparseloco),
        (18, two_witnesses, sparseloco),
        (19, verified, sparseloco),
    ] {
        let ops = random_walk(seed, config, model);
        if config.verification_percent > 0 {
            assert!(ops[0] > 0 && ops[1] > 0, "walk {seed}: commits, verdicts, answers, votes {ops:?}");
            total.iter_mut().zip(ops).for_each(|(t, n)| *t += n);
        }
    }
    // An answer needs an open, unanswered MISMATCH dispute, which one walk
    // may not produce: counted over the verifying walks.
    assert!(total.iter().all(|&n| n > 0), "commits, verdicts, answers, votes {total:?}");
}

fn random_dispute(sim: &Sim, rng: &mut Rng) -> Dispute {
    let open: Vec<_> = sim.s.disputes.iter().filter(|d| d.state == dispute_state::OPEN).collect();
    if !open.is_empty() && rng.below(4) != 0 {
        *open[rng.below(open.len() as u64) as usize]
    } else {
        sim.s.disputes[rng.below(MAX_DISPUTES as u64) as usize]
    }
}

fn random_walk(seed: u64, config: CoordinatorConfig, model: Model) -> [u32; 4] {
    let mut rng = Rng(seed);
    let mut sim = Sim::with_model(config, model);
    let mut batches = 0u64;
    let mut visited = std::collections::BTreeSet::new();
    let mut verification_ops = [0u32; 4];
    for _ in 0..4000 {
        sim.wait(rng.below(4) as i64);
        let who = rng.below(12) as u32;
        let before = sim.s.as_bytes().to_vec();
        let c = sim.clock();
        let op = match rng.below(18) {
            n if n >= 14 && config.verification_percent == 0 => n - 14,
            n if n >= 14 => n - 4, // verification ops twice as often
            n => n,
        };
        let result = match op {
            0 | 1 => sim.s.join(&key(who), &p2p(who), &c).map(|_| ()),
            2 => sim.s.leave(&key(who), &c).map(|_| ()),
            3 | 4 => sim.s.tick(&c).map(|_| ()),
            5 => sim.s.warmup_witness(&key(who), &c).map(|_| ()),
            6 | 7 => {
                let index = sim.members().iter().position(|m| m.1 == key(who)).unwrap_or(0) as u16;
                let seen = sim.healthy_signers();
                let mut report = sim.report(index, &seen);
                if rng.below(8) == 0 {
                    report.step = report.step.wrapping_add(1);
                }
                sim.s.witness(&key(who), &report, &c).map(|_| ())
            }
            8 => {
                let index = rng.below(6) as u16;
                let accused = sim.s.epoch_client(index as usize).map(|(_, s)| s.signer).unwrap_or([0; 32]);
                let hc = HealthCheck { step: sim.s.progress.step, index, accused };
                sim.s.health_check(&key(who), &hc, &c).map(|_| ())
            }
            9 => sim.s.set_paused(rng.below(2) == 0, &c).map(|_| ()),
            10 => {
                // A commitment by a member (mostly), fresh or linked (sometimes
                // to a wrong state).
                let members = sim.members();
                let who_key = match members.len() {
                    n if n > 0 && rng.below(5) != 0 => members[rng.below(n as u64) as usize].1,
                    _ => key(who),
                };
                let index = members.iter().position(|m| m.1 == who_key).unwrap_or(0) as u16;
                let linked = sim.s.clients.iter().find(|c| c.occupied != 0 && c.signer == who_key).map(|c| c.state_after).unwrap_or([0; 32]);
                let fresh = rng.below(3) == 0;
                let args = CommitArgs {
                    step: sim.s.progress.step,
                    index,
                    payload: h("payload", rng.below(1000) as u32),
                    state_before: if fresh || rng.below(8) == 0 { h("fresh", who) } else { linked },
                    state_after: h("after", rng.below(1000) as u32),
                    fresh: u8::from(fresh),
                };
                sim.s.commit(&who_key, &args, &c).map(|_| ())
            }
            11 => {
                // A verdict by `who` on a random trainer, from the drawn verifier
                // most of the time.
                let r = *sim.s.current_round();
                let committed: Vec<u16> = (0..r.clients_len).filter(|&i| r.commits[i as usize].flags != 0).collect();
                let trainer = match committed.len() {
                    n if n > 0 && rng.below(4) != 0 => committed[rng.below(n as u64) as usize],
                    _ => rng.below(u64::from(r.clients_len.max(1))) as u16,
                };
                let drawn = selection::verifier(&r.verify_seed, trainer, r.clients_len);
                let signer = match drawn {
                    Some(v) if rng.below(4) != 0 => sim.s.epoch_client(v as usize).map(|(_, s)| s.signer).unwrap_or(key(who)),
                    _ => key(who),
                };
                let verifier_index = sim.members().iter().position(|m| m.1 == signer).unwrap_or(0) as u16;
                let args = VerifyArgs {
                    step: r.step,
                    verifier_index,
                    index: trainer,
                    verdict: 1 + rng.below(3) as u8,
                    claimed_payload: [1; 32],
                    claimed_after: [2; 32],
                };
                sim.s.verify(&signer, &args, &c).map(|_| ())
            }
            12 => {
                // The trainer of a random (mostly open, unanswered MISMATCH)
                // dispute answers, mostly with the accuser's hashes.
                let answerable: Vec<_> = sim.s.disputes.iter()
                    .filter(|d| d.state == dispute_state::OPEN && d.kind == verdict::MISMATCH && d.answered == 0)
                    .copied()
                    .collect();
                let d = if !answerable.is_empty() && rng.below(4) != 0 {
                    answerable[rng.below(answerable.len() as u64) as usize]
                } else {
                    random_dispute(&sim, &mut rng)
                };
                let signer = if rng.below(5) == 0 { key(who) } else { sim.s.clients[d.trainer_slot as usize].signer };
                let same = rng.below(4) != 0;
                let answer = DisputeAnswer {
                    id: d.id,
                    rerun_payload: if same { d.claimed_payload } else { [9; 32] },
                    rerun_after: d.claimed_after,
                };
                sim.s.answer_dispute(&signer, &answer, &c).map(|_| ())
            }
            _ => {
                // A committee member of a random (mostly open) dispute votes.
                let d = random_dispute(&sim, &mut rng);
                let k = rng.below(4) as usize;
                let signer = if k < d.committee_len as usize { sim.s.clients[d.committee[k] as usize].signer } else { key(who) };
                let vote = DisputeVote { id: d.id, vote: rng.below(5) as u8 };
                sim.s.judge_dispute(&signer, &vote, &c).map(|_| ())
            }
        };
        if result.is_err() {
            assert!(sim.s.as_bytes() == &before[..], "{result:?} changed the account");
        }
        let state = sim.s.run_state().unwrap();
        visited.insert(state as u8);
        if let Err(v) = invariants::check(&sim.s) {
            panic!("walk {seed}: {v} after {result:?} (op {op})");
        }
        // The check compares the round's inner steps with the state's model.
        assert_eq!(sim.s.model.inner_steps, model.inner_steps);
        if state == RunState::Finished {
            break;
        }
        if let Ok(()) = result {
            batches += 1;
            if op >= 10 {
                verification_ops[op as usize - 10] += 1;
            }
        }
    }
    assert!(batches > 100, "the walk should mostly make progress ({batches} successes)");
    eprintln!("walk {seed}: commits, verdicts, answers, votes {verification_ops:?}; disputes opened {}", sim.s.disputes_opened);
    for state in [RunState::Warmup, RunState::RoundTrain, RunState::RoundWitness, RunState::Cooldown, RunState::Paused] {
        assert!(visited.contains(&(state as u8)), "walk {seed} never reached {state:?}: {visited:?}");
    }
    verification_ops
}

// ----- verification: commit, verify -----

fn h(label: &str, i: u32) -> [u8; 32] {
    hashv(&[label.as_bytes(), &i.to_le_bytes()])
}

fn verifying(percent: u8) -> CoordinatorConfig {
    CoordinatorConfig { verification_percent: percent, witness_nodes: 0, min_clients: 2, init_min_clients: 5, ..valid_config() }
}

impl Sim {
    /// A commitment of member `index` for the current step: fresh, or linked
    /// to its slot's latest state.
    fn commit_args(&self, index: u16, fresh: bool) -> CommitArgs {
        let slot = self.s.epoch_client(index as usize).unwrap().1;
        let step = self.s.progress.step;
        CommitArgs {
            step,
            index,
            payload: h("payload", step * 1000 + u32::from(index)),
            state_before: if fresh { h("fresh", u32::from(index)) } else { slot.state_after },
            state_after: h("after", step * 1000 + u32::from(index)),
            fresh: u8::from(fresh),
        }
    }

    fn commit(&mut self, index: u16, fresh: bool) -> Result<Events, E> {
        let args = self.commit_args(index, fresh);
        let signer = self.members()[index as usize].1;
        let c = self.clock();
        self.s.commit(&signer, &args, &c)
    }

    /// Every elected witness reports: the round moves to RoundWitness, and
    /// in the next slot its verify seed is drawn.
    fn end_training(&mut self) {
        let seen = self.healthy_signers();
        self.witness(usize::MAX, &seen);
        assert_eq!(self.state(), RunState::RoundWitness);
        self.draw();
    }

    /// The verdict arguments of the verifier drawn for `trainer`.
    fn verify_args(&self, trainer: u16, verdict: u8) -> (VerifyArgs, [u8; 32]) {
        let r = self.s.current_round();
        let v = selection::verifier(&r.verify_seed, trainer, r.clients_len).unwrap();
        let args = VerifyArgs {
            step: r.step,
            verifier_index: v,
            index: trainer,
            verdict,
            claimed_payload: if verdict == verdict::MISMATCH { [0xaa; 32] } else { [0; 32] },
            claimed_after: if verdict == verdict::MISMATCH { [0xbb; 32] } else { [0; 32] },
        };
        (args, self.members()[v as usize].1)
    }
}

#[test]
fn commits_are_taken_in_round_train_from_healthy_members_once() {
    let mut sim = Sim::with(verifying(100));
    sim.form_epoch(1..=5);
    let m0 = sim.members()[0].1;
    let a = sim.commit_args(0, true);
    sim.rejects(E::WrongPhase, |s, c| s.commit(&m0, &a, c));
    sim.start_training();
    let a = sim.commit_args(0, true);
    sim.rejects(E::WrongRound, |s, c| s.commit(&m0, &CommitArgs { step: a.step + 1, ..a }, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.commit(&key(99), &a, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.commit(&m0, &CommitArgs { index: 1, ..a }, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.commit(&m0, &CommitArgs { index: 300, ..a }, c));
    sim.rejects(E::InvalidParameters, |s, c| s.commit(&m0, &CommitArgs { fresh: 2, ..a }, c));
    // Not fresh: it must continue the slot's (still zero) state.
    sim.rejects(E::StateNotLinked, |s, c| s.commit(&m0, &CommitArgs { fresh: 0, ..a }, c));
    let nonce = sim.s.nonce;
    let ev = sim.commit(0, true).unwrap();
    assert!(ev.is_empty());
    assert_eq!(sim.s.nonce, nonce + 1);
    let stored = sim.s.current_round().commits[0];
    assert_eq!(
        (stored.payload, stored.state_before, stored.state_after, stored.flags, stored.verdict),
        // First epoch in the run: on probation.
        (a.payload, a.state_before, a.state_after, commit_flags::COMMITTED | commit_flags::FRESH | commit_flags::PROBATION, verdict::NONE)
    );
    assert_eq!(sim.s.clients.iter().find(|c| c.signer == m0).unwrap().state_after, a.state_after);
    sim.rejects(E::AlreadyCommitted, |s, c| s.commit(&m0, &a, c));
    // A member that left commits no more.
    let m4 = sim.members()[4].1;
    let a4 = sim.commit_args(4, true);
    let id = (1..=5).find(|&i| key(i) == m4).unwrap();
    sim.leave(id).unwrap();
    sim.rejects(E::NotInEpoch, |s, c| s.commit(&m4, &a4, c));
    // Linked (zero state, fresh = 0 with state_before = 0) is accepted.
    let zero = CommitArgs { fresh: 0, state_before: [0; 32], ..sim.commit_args(1, true) };
    let m1 = sim.members()[1].1;
    let c = sim.clock();
    sim.s.commit(&m1, &zero, &c).unwrap();
    assert_eq!(sim.s.current_round().commits[1].flags, commit_flags::COMMITTED | commit_flags::PROBATION);
    sim.wait(20);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::RoundWitness);
    let a2 = sim.commit_args(2, true);
    let m2 = sim.members()[2].1;
    sim.rejects(E::WrongRound, |s, c| s.commit(&m2, &a2, c));

    // Verification off: nothing to commit.
    let mut off = Sim::with(verifying(0));
    off.form_epoch(1..=5);
    off.start_training();
    let a = off.commit_args(0, true);
    let m0 = off.members()[0].1;
    off.rejects(E::VerificationOff, |s, c| s.commit(&m0, &a, c));
}

#[test]
fn commits_link_across_rounds_and_reset_each_round() {
    let mut sim = Sim::with(verifying(100));
    sim.form_epoch(1..=5);
    sim.start_training();
    sim.commit(0, true).unwrap();
    let after = sim.s.current_round().commits[0].state_after;
    sim.finish_round();
    let r = sim.s.current_round();
    assert_eq!(r.verify_seed, [0; 32], "a new round has no verify seed yet");
    assert!(r.commits[..r.clients_len as usize].iter().all(|c| *c == Commit { payload: [0; 32], state_before: [0; 32], state_after: [0; 32], verifier: 0, flags: 0, verdict: 0, _padding: [0; 4] }));
    // The next commitment continues from the last one.
    let a = sim.commit_args(0, false);
    assert_eq!(a.state_before, after);
    let m0 = sim.members()[0].1;
    sim.rejects(E::StateNotLinked, |s, c| s.commit(&m0, &CommitArgs { state_before: [1; 32], ..a }, c));
    sim.commit(0, false).unwrap();
    // Skipping a round breaks nothing: the slot keeps the latest state.
    sim.finish_round();
    sim.finish_round();
    sim.commit(0, false).unwrap();
    // A restart from a fresh state is always accepted.
    sim.finish_round();
    sim.commit(0, true).unwrap();
}

#[test]
fn verify_seed_is_drawn_from_the_first_slot_after_round_train() {
    let mut sim = Sim::with(verifying(100));
    sim.form_epoch(1..=5);
    sim.start_training();
    for i in 0..5 {
        sim.commit(i, true).unwrap();
    }
    let seen = sim.healthy_signers();
    sim.witness(usize::MAX, &seen);
    assert_eq!(sim.state(), RunState::RoundWitness);
    let ended = sim.slot;
    let r = *sim.s.current_round();
    assert_eq!((r.verify_slot, r.verify_seed), (ended, [0; 32]));
    assert_eq!(sim.s.draw_after(), Some(ended));
    // In the slot RoundTrain ended in, nothing can draw it: verdicts wait,
    // and a tick has nothing to do.
    let (a, v) = (VerifyArgs { step: r.step, verifier_index: 1, index: 0, verdict: verdict::MATCH, claimed_payload: [0; 32], claimed_after: [0; 32] }, sim.members()[1].1);
    sim.rejects(E::VerifySeedPending, |s, c| s.verify(&v, &a, c));
    sim.rejects(E::TickTooEarly, |s, c| s.tick(c));
    // An entry of that slot or before is never used, whatever the glue passes.
    let stale = Clock { drawn: Some(Entropy { slot: ended, slot_hash: [9; 32] }), ..sim.clock() };
    assert_eq!(sim.s.clone().tick(&stale).err(), Some(E::TickTooEarly));
    // Any instruction in a later slot draws it from the first slot after.
    sim.slot += 3;
    let started = sim.now;
    sim.tick().unwrap();
    let r = *sim.s.current_round();
    let first_after = Entropy { slot: ended + 1, slot_hash: hashv(&[b"slot", &(ended + 1).to_le_bytes()]) };
    assert_eq!(r.verify_seed, selection::verify_seed(&r.seed, &first_after));
    assert_eq!(r.unjudged, 5, "everyone is on probation in the first epoch");
    assert_eq!((sim.state(), sim.s.run_state_start), (RunState::RoundWitness, started));
    assert_eq!(sim.s.draw_after(), None);
    // Who ended RoundTrain, and when, does not matter: the same round ended
    // two slots later draws from the slot after that.
    let mut late = Sim::with(verifying(100));
    late.form_epoch(1..=5);
    late.start_training();
    late.slot += 2;
    let seen = late.healthy_signers();
    late.witness(usize::MAX, &seen);
    late.draw();
    let lr = late.s.current_round();
    assert_eq!(lr.seed, r.seed);
    let entry = Entropy { slot: lr.verify_slot + 1, slot_hash: hashv(&[b"slot", &(lr.verify_slot + 1).to_le_bytes()]) };
    assert_eq!(lr.verify_seed, selection::verify_seed(&lr.seed, &entry));
    assert_ne!(lr.verify_seed, r.verify_seed);
    // Without verification nothing is drawn, and RoundWitness lasts its window.
    let mut off = Sim::with(verifying(0));
    off.form_epoch(1..=5);
    off.start_training();
    let seen = off.healthy_signers();
    off.witness(usize::MAX, &seen);
    assert_eq!(off.s.draw_after(), None);
    off.slot += 1;
    off.rejects(E::TickTooEarly, |s, c| s.tick(c));
}

#[test]
fn verdicts_come_from_the_drawn_verifier_in_round_witness() {
    let mut sim = Sim::with(verifying(100));
    sim.form_epoch(1..=5);
    sim.start_training();
    for i in 0..3 {
        sim.commit(i, true).unwrap();
    }
    let early = VerifyArgs { step: sim.s.progress.step, verifier_index: 1, index: 0, verdict: 1, claimed_payload: [0; 32], claimed_after: [0; 32] };
    let m1 = sim.members()[1].1;
    sim.rejects(E::WrongRound, |s, c| s.verify(&m1, &early, c));
    sim.end_training();
    let (a, v) = sim.verify_args(0, verdict::MATCH);
    sim.rejects(E::WrongRound, |s, c| s.verify(&v, &VerifyArgs { step: a.step - 1, ..a }, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.verify(&key(99), &a, c));
    sim.rejects(E::ClientIndexMismatch, |s, c| s.verify(&v, &VerifyArgs { index: 5, ..a }, c));
    // Member 3 did not commit.
    let (a3, v3) = sim.verify_args(3, verdict::MATCH);
    sim.rejects(E::NotCommitted, |s, c| s.verify(&v3, &a3, c));
    // Anyone but the drawn verifier is refused.
    let other = (0..5u16).find(|&i| i != a.verifier_index && i != 0).unwrap();
    let ok = sim.members()[other as usize].1;
    sim.rejects(E::NotTheVerifier, |s, c| s.verify(&ok, &VerifyArgs { verifier_index: other, ..a }, c));
    sim.rejects(E::InvalidVerdict, |s, c| s.verify(&v, &VerifyArgs { verdict: 0, ..a }, c));
    sim.rejects(E::InvalidVerdict, |s, c| s.verify(&v, &VerifyArgs { verdict: 4, ..a }, c));
    let nonce = sim.s.nonce;
    let c = sim.clock();
    let ev = sim.s.verify(&v, &a, &c).unwrap();
    assert_eq!(sim.s.nonce, nonce + 1);
    assert_eq!(
        ev.iter().next(),
        Some(Event::Verified { step: a.step, trainer: sim.members()[0].1, verifier: v, verdict: verdict::MATCH })
    );
    let stored = sim.s.current_round().commits[0];
    assert_eq!((stored.verdict, stored.verifier), (verdict::MATCH, a.verifier_index));
    sim.rejects(E::AlreadyJudged, |s, c| s.verify(&v, &a, c));
    // NO_DATA on another trainer (stage 1: stored, nothing else).
    let (a2, v2) = sim.verify_args(2, verdict::NO_DATA);
    let c = sim.clock();
    sim.s.verify(&v2, &a2, &c).unwrap();
    assert_eq!(sim.s.current_round().commits[2].verdict, verdict::NO_DATA);
    // After the round: too late.
    let (a1, v1) = sim.verify_args(1, verdict::MATCH);
    sim.wait(5);
    sim.tick().unwrap();
    sim.rejects(E::WrongRound, |s, c| s.verify(&v1, &a1, c));
}

#[test]
fn only_sampled_first_epoch_or_probation_members_are_verified() {
    let mut sim = Sim::with(verifying(25));
    sim.form_epoch(1..=6);
    sim.start_training();
    // Members 0..=2 finished an epoch before, member 3 was at fault in the
    // previous epoch, 4 two epochs ago; 5 is in its first epoch.
    sim.s.progress.epoch = 5;
    let slot = |sim: &Sim, i: usize| sim.s.epoch.clients[i].slot as usize;
    for i in 0..5 {
        let k = slot(&sim, i);
        sim.s.clients[k].has_finished = 1;
    }
    for (i, fault) in [(3usize, 4u32), (4, 3)] {
        let k = slot(&sim, i);
        sim.s.clients[k].has_fault = 1;
        sim.s.clients[k].last_fault_epoch = fault;
    }
    let probation = [false, false, false, true, false, true];
    for i in 0..6u16 {
        assert_eq!(sim.s.on_probation(i), probation[i as usize], "member {i}");
        sim.commit(i, true).unwrap();
        let flags = sim.s.current_round().commits[i as usize].flags;
        assert_eq!(flags & commit_flags::PROBATION != 0, probation[i as usize], "member {i}: flags {flags}");
    }
    sim.end_training();
    let r = *sim.s.current_round();
    for i in 0..6u16 {
        let want = probation[i as usize] || selection::sampled(&r.verify_seed, i, 25);
        assert_eq!(sim.s.must_verify(&r, i), want, "member {i}");
    }
    assert!(!sim.s.must_verify(&r, 6), "beyond the round");
    // The flag is fixed at commit time: the slot's later history does not matter.
    let k = slot(&sim, 5);
    sim.s.clients[k].has_finished = 1;
    assert!(sim.s.must_verify(&r, 5));
    // An unsampled member without probation is not verified.
    if let Some(unsampled) = (0..3u16).find(|&i| !selection::sampled(&r.verify_seed, i, 25)) {
        let (a, v) = sim.verify_args(unsampled, verdict::MATCH);
        sim.rejects(E::NotSampled, |s, c| s.verify(&v, &a, c));
    }
    // Verification off: never.
    sim.s.config.verification_percent = 0;
    assert!((0..6).all(|i| !sim.s.must_verify(&r, i)));
}

// ----- disputes, outcomes, probation, vesting -----

impl Sim {
    /// Every member commits (fresh), the round ends training, and the drawn
    /// verifiers post `verdicts` (trainer index, verdict). Returns the ids of
    /// the disputes opened, in order.
    fn judged_round(&mut self, verdicts: &[(u16, u8)]) -> Vec<u64> {
        assert_eq!(self.state(), RunState::RoundTrain);
        for i in 0..self.s.current_round().clients_len {
            if self.s.epoch.clients[i as usize].state == HEALTHY {
                self.commit(i, true).unwrap();
            }
        }
        self.end_training();
        let mut ids = vec![];
        for &(t, verdict) in verdicts {
            let (a, v) = self.verify_args(t, verdict);
            let c = self.clock();
            let ev = self.s.verify(&v, &a, &c).unwrap();
            let opened = ev.iter().nth(1);
            if let Some(Event::DisputeOpened { id, .. }) = opened {
                ids.push(id);
            }
        }
        ids
    }

    fn dispute(&self, id: u64) -> Dispute {
        *self.s.disputes.iter().find(|d| d.id == id && d.state != dispute_state::FREE).unwrap()
    }

    fn slot_of_key(&self, k: &[u8; 32]) -> usize {
        self.s.clients.iter().position(|c| c.occupied != 0 && c.signer == *k).unwrap()
    }

    /// Committee members' signers of dispute `id`.
    fn committee(&self, id: u64) -> Vec<[u8; 32]> {
        let d = self.dispute(id);
        d.committee[..d.committee_len as usize].iter().map(|&s| self.s.clients[s as usize].signer).collect()
    }

    fn vote(&mut self, who: &[u8; 32], id: u64, vote: u8) -> Result<Events, E> {
        let c = self.clock();
        self.s.judge_dispute(who, &DisputeVote { id, vote }, &c)
    }

    fn answer(&mut self, id: u64, rerun_payload: [u8; 32], rerun_after: [u8; 32]) -> Result<Events, E> {
        let d = self.dispute(id);
        let trainer = self.s.clients[d.trainer_slot as usize].signer;
        let c = self.clock();
        self.s.answer_dispute(&trainer, &DisputeAnswer { id, rerun_payload, rerun_after }, &c)
    }

    /// Each slot's open_disputes equals the open disputes naming it.
    fn check_dispute_counts(&self) {
        if let Err(v) = invariants::check_dispute_counts(&self.s) {
            panic!("{v}");
        }
    }
}

fn disputing() -> CoordinatorConfig {
    CoordinatorConfig { verification_percent: 100, witness_nodes: 0, min_clients: 2, init_min_clients: 6, ..valid_config() }
}

#[test]
fn a_mismatch_opens_a_dispute_with_committee_batch_and_deadline() {
    let mut sim = Sim::with(disputing());
    sim.form_epoch(1..=6);
    sim.start_training();
    sim.finish_round(); // step 2, so the dispute is not of the epoch's first step
    let ids = sim.judged_round(&[(1, verdict::MISMATCH), (2, verdict::MATCH), (3, verdict::NO_DATA)]);
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(sim.s.disputes_opened, 2);
    let r = *sim.s.current_round();
    let d = sim.dispute(1);
    let (a, _) = sim.verify_args(1, verdict::MISMATCH);
    let (members, len) = selection::committee(&r.verify_seed, 1, a.verifier_index, 6);
    assert_eq!(len, 3);
    let slot = |i: u16| sim.s.epoch.clients[i as usize].slot;
    let batch = selection::assignment(
        &selection::DataRound {
            seed: r.seed,
            data_index: r.data_index,
            batch_size: r.batch_size,
            clients: r.clients_len,
            inner_steps: r.inner_steps,
        },
        1,
    )
    .unwrap();
    let commit = r.commits[1];
    assert_eq!(
        d,
        Dispute {
            state: dispute_state::OPEN,
            kind: verdict::MISMATCH,
            committee_len: 3,
            votes: [0; 3],
            trainer_slot: slot(1),
            accuser_slot: slot(a.verifier_index),
            trainer_index: 1,
            committee: [slot(members[0]), slot(members[1]), slot(members[2])],
            cold_start: sim.s.epoch.cold_start,
            fresh: 1,
            answered: 0,
            _padding: [0; 7],
            step: r.step,
            deadline_step: r.step + 2,
            epoch: 0,
            epoch_start_step: 1,
            batch_len: batch.len as u32,
            id: 1,
            batch_start: batch.start,
            payload: commit.payload,
            state_before: commit.state_before,
            state_after: commit.state_after,
            claimed_payload: [0xaa; 32],
            claimed_after: [0xbb; 32],
        }
    );
    assert_eq!(sim.dispute(2).kind, verdict::NO_DATA);
    assert_eq!(sim.dispute(2).claimed_payload, [0; 32]);
    sim.check_dispute_counts();
    assert!(sim.s.clients[slot(1) as usize].open_disputes >= 1);
    // The verdict's events: Verified, then DisputeOpened.
    let (a4, v4) = sim.verify_args(4, verdict::MISMATCH);
    let c = sim.clock();
    let ev = sim.s.verify(&v4, &a4, &c).unwrap();
    let got: Vec<_> = ev.iter().collect();
    assert!(matches!(got[0], Event::Verified { verdict: verdict::MISMATCH, .. }));
    assert_eq!(got[1], Event::DisputeOpened { id: 3, step: r.step, trainer: sim.members()[4].1, accuser: v4 });
}

#[test]
fn an_answer_needs_the_committee_to_fetch_the_rerun() {
    let config = CoordinatorConfig { forgive_per_epoch: 1, ..disputing() };
    let mut sim = Sim::with(config);
    sim.s.future_rates.slashing_rate_per_client = 7;
    sim.form_epoch(1..=6);
    sim.start_training();
    let ids = sim.judged_round(&[(1, verdict::MISMATCH), (2, verdict::NO_DATA), (3, verdict::MISMATCH)]);
    let (mismatch, no_data, copied) = (ids[0], ids[1], ids[2]);
    let trainer = sim.members()[1].1;
    sim.rejects(E::DisputeNotFound, |s, c| s.answer_dispute(&trainer, &DisputeAnswer { id: 0, rerun_payload: [0xaa; 32], rerun_after: [0xbb; 32] }, c));
    sim.rejects(E::DisputeNotFound, |s, c| s.answer_dispute(&trainer, &DisputeAnswer { id: 99, rerun_payload: [0xaa; 32], rerun_after: [0xbb; 32] }, c));
    sim.rejects(E::NotTheTrainer, |s, c| s.answer_dispute(&key(77), &DisputeAnswer { id: mismatch, rerun_payload: [0xaa; 32], rerun_after: [0xbb; 32] }, c));
    let t2 = sim.members()[2].1;
    sim.rejects(E::NotAnswerable, |s, c| s.answer_dispute(&t2, &DisputeAnswer { id: no_data, rerun_payload: [0; 32], rerun_after: [0; 32] }, c));
    // A rerun that differs changes nothing: the committee decides.
    sim.rejects(E::RerunDiffers, |s, c| s.answer_dispute(&trainer, &DisputeAnswer { id: mismatch, rerun_payload: [0xaa; 32], rerun_after: [0xbc; 32] }, c));
    // RERUN is no vote before an answer.
    let committee = sim.committee(mismatch);
    sim.rejects(E::InvalidVote, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: mismatch, vote: verdict::RERUN }, c));
    // The answer settles nothing: the accuser's hashes are public.
    assert!(sim.answer(mismatch, [0xaa; 32], [0xbb; 32]).unwrap().is_empty());
    assert_eq!((sim.dispute(mismatch).state, sim.dispute(mismatch).answered), (dispute_state::OPEN, 1));
    sim.rejects(E::AlreadyAnswered, |s, c| s.answer_dispute(&trainer, &DisputeAnswer { id: mismatch, rerun_payload: [0xaa; 32], rerun_after: [0xbb; 32] }, c));
    // A committee majority that fetched the rerun's payload: TRANSIENT.
    sim.vote(&committee[0], mismatch, verdict::RERUN).unwrap();
    let ev = sim.vote(&committee[1], mismatch, verdict::RERUN).unwrap();
    assert_eq!(ev.iter().next(), Some(Event::DisputeSettled { id: mismatch, outcome: dispute_state::TRANSIENT }));
    let slot = sim.slot_of_key(&trainer);
    assert_eq!((sim.s.clients[slot].forgiven, sim.s.clients[slot].has_fault, sim.s.clients[slot].slashed), (1, 0, 0));
    assert_eq!(sim.s.epoch.clients[1].state, HEALTHY);
    sim.rejects(E::DisputeNotOpen, |s, c| s.answer_dispute(&trainer, &DisputeAnswer { id: mismatch, rerun_payload: [0xaa; 32], rerun_after: [0xbb; 32] }, c));
    sim.check_dispute_counts();
    // A cheater that copies the accuser's hashes without rerunning serves
    // no such payload: the committee votes MISMATCH, and it is at fault.
    sim.answer(copied, [0xaa; 32], [0xbb; 32]).unwrap();
    for k in sim.committee(copied).iter().take(2) {
        sim.vote(k, copied, verdict::MISMATCH).unwrap();
    }
    let cheater = sim.s.clients[sim.dispute(copied).trainer_slot as usize];
    assert_eq!((sim.dispute(copied).state, cheater.forgiven, cheater.has_fault), (dispute_state::TRAINER_FAULT, 0, 1));
    // The first trainer's second forgiven mistake in the epoch is a fault.
    sim.wait(5);
    sim.tick().unwrap();
    let ids = sim.judged_round(&[(1, verdict::MISMATCH)]);
    sim.answer(ids[0], [0xaa; 32], [0xbb; 32]).unwrap();
    let committee = sim.committee(ids[0]);
    sim.vote(&committee[0], ids[0], verdict::RERUN).unwrap();
    let ev = sim.vote(&committee[1], ids[0], verdict::RERUN).unwrap();
    assert_eq!(ev.iter().next(), Some(Event::DisputeSettled { id: ids[0], outcome: dispute_state::TRAINER_FAULT }));
    let c = &sim.s.clients[slot];
    assert_eq!((c.forgiven, c.has_fault, c.last_fault_epoch, c.slashed), (2, 1, 0, 7));
    assert_eq!(sim.s.epoch.clients[1].state, FAULTED);
    sim.check_dispute_counts();
    // The faulted member leaves the epoch at the next round start.
    sim.wait(5);
    sim.tick().unwrap();
    assert!(sim.members().iter().all(|m| m.1 != trainer));
    assert_eq!(sim.s.clients[slot].in_epoch, 0);
}

#[test]
fn the_committee_majority_decides() {
    let mut sim = Sim::with(disputing());
    sim.s.future_rates.slashing_rate_per_client = 5;
    sim.form_epoch(1..=6);
    sim.start_training();
    let ids = sim.judged_round(&[(0, verdict::MISMATCH), (3, verdict::NO_DATA)]);
    let committee = sim.committee(ids[0]);
    assert_eq!(committee.len(), 3);
    let d = sim.dispute(ids[0]);
    let outsider = sim.members().iter().map(|m| m.1).find(|k| !committee.contains(k)).unwrap();
    sim.rejects(E::NotOnCommittee, |s, c| s.judge_dispute(&outsider, &DisputeVote { id: ids[0], vote: 1 }, c));
    sim.rejects(E::NotOnCommittee, |s, c| s.judge_dispute(&key(99), &DisputeVote { id: ids[0], vote: 1 }, c));
    sim.rejects(E::DisputeNotFound, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: 42, vote: 1 }, c));
    sim.rejects(E::InvalidVote, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: ids[0], vote: 0 }, c));
    sim.rejects(E::InvalidVote, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: ids[0], vote: 4 }, c));
    // One MATCH, one MISMATCH: no majority of 2 yet.
    assert!(sim.vote(&committee[0], ids[0], verdict::MATCH).unwrap().is_empty());
    sim.rejects(E::AlreadyVoted, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: ids[0], vote: 2 }, c));
    sim.vote(&committee[1], ids[0], verdict::MISMATCH).unwrap();
    assert_eq!(sim.dispute(ids[0]).state, dispute_state::OPEN);
    assert_eq!(sim.dispute(ids[0]).votes, [1, 2, 0]);
    // The second MATCH: the accuser was wrong.
    let ev = sim.vote(&committee[2], ids[0], verdict::MATCH).unwrap();
    assert_eq!(ev.iter().next(), Some(Event::DisputeSettled { id: ids[0], outcome: dispute_state::ACCUSER_FAULT }));
    let accuser = sim.s.clients[d.accuser_slot as usize];
    assert_eq!((accuser.has_fault, accuser.slashed), (1, 5));
    assert_eq!(sim.s.clients[d.trainer_slot as usize].has_fault, 0);
    let entry = |sim: &Sim, slot: u16| sim.s.epoch.clients[..sim.s.epoch.clients_len as usize].iter().find(|e| e.slot == slot).unwrap().state;
    assert_eq!(entry(&sim, d.accuser_slot), FAULTED);
    sim.rejects(E::DisputeNotOpen, |s, c| s.judge_dispute(&committee[2], &DisputeVote { id: ids[0], vote: 2 }, c));
    // MISMATCH and NO_DATA votes together put the trainer at fault.
    let committee = sim.committee(ids[1]);
    let d = sim.dispute(ids[1]);
    let voters: Vec<_> = committee.iter().filter(|k| sim.s.clients[sim.slot_of_key(k)].has_fault == 0).copied().collect();
    sim.vote(&voters[0], ids[1], verdict::NO_DATA).unwrap();
    let ev = sim.vote(&voters[1], ids[1], verdict::MISMATCH).unwrap();
    assert_eq!(ev.iter().next(), Some(Event::DisputeSettled { id: ids[1], outcome: dispute_state::TRAINER_FAULT }));
    assert_eq!(entry(&sim, d.trainer_slot), FAULTED);
    sim.check_dispute_counts();
}

#[test]
fn a_disproved_no_data_accusation_costs_the_accuser() {
    // The trainer may have served the committee and not the verifier, so a
    // NO_DATA the committee replays to MATCH is a forgiven mistake of the
    // accuser's; past forgive_per_epoch in an epoch it is a fault.
    let config = CoordinatorConfig { forgive_per_epoch: 1, ..disputing() };
    let mut sim = Sim::with(config);
    sim.s.future_rates.slashing_rate_per_client = 5;
    sim.form_epoch(1..=6);
    sim.start_training();
    let refute = |sim: &mut Sim, id: u64| {
        let committee = sim.committee(id);
        sim.vote(&committee[0], id, verdict::MATCH).unwrap();
        sim.vote(&committee[1], id, verdict::MATCH).unwrap().iter().next()
    };
    let ids = sim.judged_round(&[(1, verdict::NO_DATA)]);
    let d = sim.dispute(ids[0]);
    assert_eq!(refute(&mut sim, ids[0]), Some(Event::DisputeSettled { id: ids[0], outcome: dispute_state::REFUTED }));
    let accuser = sim.s.clients[d.accuser_slot as usize];
    assert_eq!((accuser.forgiven, accuser.has_fault, accuser.slashed), (1, 0, 0));
    assert_eq!(sim.s.clients[d.trainer_slot as usize].has_fault, 0);
    sim.check_dispute_counts();
    // The same accuser's next refuted NO_DATA this epoch is its fault.
    let accuser_key = accuser.signer;
    let mut next = None;
    for _ in 0..40 {
        sim.wait(5);
        sim.tick().unwrap();
        let r = *sim.s.current_round();
        let me = sim.members().iter().position(|m| m.1 == accuser_key).unwrap() as u16;
        let Some(t) = (0..r.clients_len).find(|&t| t != me) else { break };
        // Commit, end training, draw; then find a trainer this accuser verifies.
        let ids = sim.judged_round(&[]);
        assert!(ids.is_empty());
        let r = *sim.s.current_round();
        let _ = t;
        if let Some(t) = (0..r.clients_len).find(|&t| selection::verifier(&r.verify_seed, t, r.clients_len) == Some(me)) {
            let (a, v) = sim.verify_args(t, verdict::NO_DATA);
            let c = sim.clock();
            sim.s.verify(&v, &a, &c).unwrap();
            next = Some(sim.s.disputes_opened);
            break;
        }
    }
    let id = next.expect("the accuser was drawn as a verifier");
    assert_eq!(refute(&mut sim, id), Some(Event::DisputeSettled { id, outcome: dispute_state::ACCUSER_FAULT }));
    let accuser = sim.s.clients[d.accuser_slot as usize];
    assert_eq!((accuser.forgiven, accuser.has_fault, accuser.slashed), (2, 1, 5));
    sim.check_dispute_counts();
}

#[test]
fn one_accuser_holds_at_most_an_eighth_of_the_dispute_table() {
    let mut sim = Sim::with(disputing());
    sim.form_epoch(1..=6);
    sim.start_training();
    sim.judged_round(&[]);
    let r = *sim.s.current_round();
    let (a, v) = sim.verify_args(0, verdict::NO_DATA);
    let accuser = sim.s.epoch.clients[a.verifier_index as usize].slot;
    // The accuser already holds its share of open disputes (from earlier
    // rounds, still within their deadline).
    for k in 0..MAX_OPEN_PER_ACCUSER {
        let free = sim.s.disputes[k];
        sim.s.disputes[k] = Dispute { state: dispute_state::OPEN, id: k as u64 + 1, accuser_slot: accuser, deadline_step: r.step, ..free };
    }
    sim.s.disputes_opened = MAX_OPEN_PER_ACCUSER as u64;
    sim.rejects(E::AccuserDisputesFull, |s, c| s.verify(&v, &a, c));
    // Once one settles, the accusation goes through.
    sim.s.disputes[0].state = dispute_state::UNRESOLVED;
    let c = sim.clock();
    sim.s.verify(&v, &a, &c).unwrap();
    assert_eq!(sim.s.disputes_opened, MAX_OPEN_PER_ACCUSER as u64 + 1);
}

#[test]
fn a_removed_verifier_hands_its_verdicts_to_the_fallback() {
    let mut sim = Sim::with(disputing());
    sim.form_epoch(1..=6);
    sim.start_training();
    sim.judged_round(&[]);
    let r = *sim.s.current_round();
    let (t, drawn) = (0u16, selection::verifier(&r.verify_seed, 0, 6).unwrap());
    // The drawn verifier is found at fault during the round (a dispute of
    // an earlier round settles against it).
    sim.s.epoch.clients[drawn as usize].state = FAULTED;
    let healthy = |i: u16| i != drawn;
    let fallback = selection::fallback_verifier(&r.verify_seed, t, drawn, 6, healthy).unwrap();
    assert_eq!(sim.s.verifier_of(&r, t), Some(fallback));
    let args = |v: u16| VerifyArgs { step: r.step, verifier_index: v, index: t, verdict: verdict::MATCH, claimed_payload: [0; 32], claimed_after: [0; 32] };
    let key_of = |sim: &Sim, v: u16| sim.members()[v as usize].1;
    let drawn_key = key_of(&sim, drawn);
    sim.rejects(E::NotInEpoch, |s, c| s.verify(&drawn_key, &args(drawn), c));
    let other = (0..6).find(|&i| i != t && i != drawn && i != fallback).unwrap();
    let other_key = key_of(&sim, other);
    sim.rejects(E::NotTheVerifier, |s, c| s.verify(&other_key, &args(other), c));
    let fallback_key = key_of(&sim, fallback);
    let c = sim.clock();
    sim.s.verify(&fallback_key, &args(fallback), &c).unwrap();
    assert_eq!(sim.s.current_round().commits[0].verifier, fallback);
    if let Err(v) = invariants::check(&sim.s) {
        panic!("{v}");
    }
}

#[test]
fn round_witness_ends_once_every_sampled_contribution_is_judged() {
    let mut sim = Sim::with(verifying(100));
    sim.form_epoch(1..=5);
    sim.start_training();
    for i in 0..5 {
        sim.commit(i, true).unwrap();
    }
    sim.end_training();
    let step = sim.s.progress.step;
    for t in 0..5u16 {
        assert_eq!(sim.state(), RunState::RoundWitness, "before the verdict on {t}");
        assert_eq!(sim.s.current_round().unjudged, 5 - t);
        let (a, v) = sim.verify_args(t, verdict::MATCH);
        let c = sim.clock();
        sim.s.verify(&v, &a, &c).unwrap();
    }
    // The last verdict ended the round at once, with no time passing.
    assert_eq!((sim.state(), sim.s.progress.step), (RunState::RoundTrain, step + 1));
    // A member that did not commit is not waited for.
    for i in 0..4 {
        sim.commit(i, false).unwrap();
    }
    sim.end_training();
    assert_eq!(sim.s.current_round().unjudged, 4);
    // Without every elected witness's report, the window runs its course.
    let mut sim = Sim::with(CoordinatorConfig { max_round_train_time: 10, ..verifying(100) });
    sim.form_epoch(1..=5);
    sim.start_training();
    sim.commit(0, true).unwrap();
    sim.wait(10);
    sim.tick().unwrap();
    sim.draw();
    let (a, v) = sim.verify_args(0, verdict::MATCH);
    let c = sim.clock();
    sim.s.verify(&v, &a, &c).unwrap();
    assert_eq!((sim.state(), sim.s.current_round().unjudged), (RunState::RoundWitness, 0));
}

#[test]
fn faulted_members_lose_the_epoch_reward_and_are_on_probation() {
    let mut sim = Sim::with(disputing());
    sim.s.future_rates.earning_rate_total_shared = 400;
    sim.form_epoch(1..=6);
    sim.start_training();
    let ids = sim.judged_round(&[(2, verdict::MISMATCH)]);
    let trainer = sim.members()[2].1;
    for k in sim.committee(ids[0]).iter().take(2) {
        sim.vote(k, ids[0], verdict::MISMATCH).unwrap();
    }
    assert_eq!(sim.dispute(ids[0]).state, dispute_state::TRAINER_FAULT);
    // The epoch ends after a pending pause; the faulted member gets nothing.
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.wait(5);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Cooldown);
    sim.wait(10);
    let ev = sim.tick().unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::EpochEnded { rewarded: 5, .. })));
    let slot = sim.slot_of_key(&trainer);
    assert_eq!(sim.s.clients[slot].earned, 0);
    assert_eq!(sim.s.clients.iter().map(|c| c.earned).sum::<u64>(), 400);
    // Next epoch: everyone else finished one, the faulted member is on probation.
    sim.s.set_paused(false, &sim.clock()).unwrap();
    sim.form_epoch(1..=6);
    sim.start_training();
    for i in 0..6u16 {
        sim.commit(i, true).unwrap();
        let probation = sim.s.current_round().commits[i as usize].flags & commit_flags::PROBATION != 0;
        assert_eq!(probation, sim.members()[i as usize].1 == trainer, "member {i}");
    }
}

#[test]
fn open_disputes_expire_after_two_more_rounds() {
    let mut sim = Sim::with(disputing());
    sim.form_epoch(1..=6);
    sim.start_training();
    let ids = sim.judged_round(&[(0, verdict::MISMATCH)]);
    let step = sim.dispute(ids[0]).step;
    for _ in 0..2 {
        sim.wait(5);
        let ev = sim.tick().unwrap();
        assert!(ev.iter().all(|e| !matches!(e, Event::DisputeSettled { .. })));
        assert_eq!(sim.dispute(ids[0]).state, dispute_state::OPEN, "step {}", sim.s.progress.step);
        sim.end_training();
    }
    assert_eq!(sim.s.progress.step, step + 2);
    sim.wait(5);
    let ev = sim.tick().unwrap();
    assert_eq!(sim.s.progress.step, step + 3);
    assert_eq!(sim.dispute(ids[0]).state, dispute_state::UNRESOLVED);
    assert_eq!(ev.iter().last(), Some(Event::DisputeSettled { id: ids[0], outcome: dispute_state::UNRESOLVED }));
    sim.check_dispute_counts();
    assert!(sim.s.clients.iter().all(|c| c.has_fault == 0 && c.slashed == 0));
    let committee = sim.committee(ids[0]);
    sim.rejects(E::DisputeNotOpen, |s, c| s.judge_dispute(&committee[0], &DisputeVote { id: ids[0], vote: 2 }, c));
}

#[test]
fn a_dispute_nobody_can_judge_is_unresolved_at_once() {
    let config = CoordinatorConfig { init_min_clients: 2, ..disputing() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=2);
    sim.start_training();
    sim.commit(0, true).unwrap();
    sim.commit(1, true).unwrap();
    sim.end_training();
    let (a, v) = sim.verify_args(0, verdict::MISMATCH);
    let c = sim.clock();
    let ev = sim.s.verify(&v, &a, &c).unwrap();
    let got: Vec<_> = ev.iter().collect();
    assert!(matches!(got[1], Event::DisputeOpened { id: 1, .. }));
    assert_eq!(*got.last().unwrap(), Event::DisputeSettled { id: 1, outcome: dispute_state::UNRESOLVED });
    assert_eq!((sim.dispute(1).state, sim.dispute(1).committee_len), (dispute_state::UNRESOLVED, 0));
    sim.check_dispute_counts();
}

#[test]
fn thirty_two_open_disputes_fill_the_table_and_settled_ones_are_reused() {
    let config = CoordinatorConfig {
        init_min_clients: 64,
        global_batch_size_start: 64,
        global_batch_size_end: 64,
        ..disputing()
    };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=64);
    sim.start_training();
    for i in 0..64 {
        sim.commit(i, true).unwrap();
    }
    sim.end_training();
    // 32 accusations, no accuser holding more than its share.
    let r = *sim.s.current_round();
    let mut held = [0usize; 64];
    let mut accused = vec![];
    let mut spare = vec![];
    for t in 0..64u16 {
        let v = selection::verifier(&r.verify_seed, t, 64).unwrap() as usize;
        if accused.len() < 32 && held[v] < MAX_OPEN_PER_ACCUSER {
            held[v] += 1;
            accused.push(t);
        } else {
            spare.push(t);
        }
    }
    assert_eq!(accused.len(), 32);
    for (k, &t) in accused.iter().enumerate() {
        let (a, v) = sim.verify_args(t, verdict::MISMATCH);
        let c = sim.clock();
        sim.s.verify(&v, &a, &c).unwrap();
        assert_eq!(sim.s.disputes_opened, k as u64 + 1);
    }
    let (a, v) = sim.verify_args(spare[0], verdict::NO_DATA);
    sim.rejects(E::DisputesFull, |s, c| s.verify(&v, &a, c));
    // A MATCH needs no entry.
    let (m, mv) = sim.verify_args(spare[1], verdict::MATCH);
    let c = sim.clock();
    sim.s.verify(&mv, &m, &c).unwrap();
    // Settle disputes 5 and 3: the next one takes the entry of the lower id.
    for id in [5, 3] {
        for k in sim.committee(id).iter().take(2) {
            sim.vote(k, id, verdict::MISMATCH).unwrap();
        }
        assert_eq!(sim.dispute(id).state, dispute_state::TRAINER_FAULT);
    }
    let entry3 = sim.s.disputes.iter().position(|d| d.id == 3).unwrap();
    let c = sim.clock();
    sim.s.verify(&v, &a, &c).unwrap();
    assert_eq!(sim.s.disputes[entry3].id, 33);
    assert_eq!(sim.s.disputes[entry3].state, dispute_state::OPEN);
    sim.check_dispute_counts();
    assert!(sim.s.clients.iter().any(|c| c.open_disputes > 1), "committees overlap");
}

/// Runs one epoch of `ids` to its end (a pending pause ends it after one
/// round) and resumes the run.
fn one_epoch(sim: &mut Sim, ids: std::ops::RangeInclusive<u32>) {
    sim.form_epoch(ids);
    sim.start_training();
    sim.s.set_paused(true, &sim.clock()).unwrap();
    sim.finish_round();
    assert_eq!(sim.state(), RunState::Cooldown);
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Paused);
    sim.s.set_paused(false, &sim.clock()).unwrap();
}

#[test]
fn rewards_vest_after_vesting_epochs_and_faults_burn_the_unvested() {
    let config = CoordinatorConfig { vesting_epochs: 2, ..disputing() };
    let mut sim = Sim::with(config);
    sim.s.future_rates = EpochRates { earning_rate_total_shared: 600, slashing_rate_per_client: 11 };
    let one = key(1);
    let slot = |sim: &Sim| sim.slot_of_key(&one);
    one_epoch(&mut sim, 1..=6);
    let c = sim.s.clients[slot(&sim)];
    assert_eq!((c.earned, c.unvested), (0, [100, 0, 0, 0]));
    assert!(!c.is_free(), "unvested points keep the slot");
    one_epoch(&mut sim, 1..=6);
    assert_eq!((sim.s.clients[slot(&sim)].earned, sim.s.clients[slot(&sim)].unvested), (0, [100, 100, 0, 0]));
    // End of epoch 2: epoch 0's points vest.
    one_epoch(&mut sim, 1..=6);
    assert_eq!((sim.s.clients[slot(&sim)].earned, sim.s.clients[slot(&sim)].unvested), (100, [0, 100, 100, 0]));
    // A client that sat epoch 3 out still vests epoch 1's points at its end.
    one_epoch(&mut sim, 2..=7);
    assert_eq!((sim.s.clients[slot(&sim)].earned, sim.s.clients[slot(&sim)].unvested), (200, [0, 0, 100, 0]));
    // A fault burns what has not vested; earned points stay.
    sim.form_epoch(1..=6);
    sim.start_training();
    let index = sim.members().iter().position(|m| m.1 == one).unwrap() as u16;
    let ids = sim.judged_round(&[(index, verdict::MISMATCH)]);
    for k in sim.committee(ids[0]).iter().take(2) {
        sim.vote(k, ids[0], verdict::MISMATCH).unwrap();
    }
    let c = sim.s.clients[slot(&sim)];
    assert_eq!((c.earned, c.unvested, c.burned, c.slashed, c.has_fault, c.last_fault_epoch), (200, [0; 4], 100, 11, 1, 4));
}

#[test]
fn a_finished_run_settles_disputes_and_vests_everything() {
    let config = CoordinatorConfig { vesting_epochs: 4, total_steps: 2, ..disputing() };
    let mut sim = Sim::with(config);
    sim.s.future_rates.earning_rate_total_shared = 60;
    sim.form_epoch(1..=6);
    sim.start_training();
    sim.finish_round();
    let ids = sim.judged_round(&[(0, verdict::MISMATCH)]);
    sim.wait(5);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Cooldown);
    assert_eq!(sim.dispute(ids[0]).state, dispute_state::OPEN, "the deadline has not passed");
    sim.wait(10);
    let ev = sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Finished);
    assert!(ev.iter().any(|e| e == Event::DisputeSettled { id: ids[0], outcome: dispute_state::UNRESOLVED }));
    sim.check_dispute_counts();
    assert!(sim.s.clients.iter().all(|c| c.unvested == [0; 4]));
    assert_eq!(sim.s.clients.iter().map(|c| c.earned).sum::<u64>(), 60);
}

#[test]
fn slots_named_by_open_disputes_are_not_reused() {
    let mut slot = ClientSlot { occupied: 1, ..ClientSlot::clone(&zeroed_state().clients[0]) };
    assert!(slot.is_free());
    slot.open_disputes = 1;
    assert!(!slot.is_free());
    slot.open_disputes = 0;
    slot.unvested[3] = 1;
    assert!(!slot.is_free());
    slot.unvested[3] = 0;
    slot.burned = 1;
    assert!(!slot.is_free(), "burned points keep the slot until the Treasurer burns them");
}

#[test]
fn take_burned_hands_the_burned_points_over_once_and_frees_the_slot() {
    let config = CoordinatorConfig { vesting_epochs: 2, ..disputing() };
    let mut sim = Sim::with(config);
    sim.s.future_rates = EpochRates { earning_rate_total_shared: 600, slashing_rate_per_client: 11 };
    let one = key(1);
    one_epoch(&mut sim, 1..=6);
    // Epoch 1: member 1's commitment is disputed and the committee finds it at fault.
    sim.form_epoch(1..=6);
    sim.start_training();
    let index = sim.members().iter().position(|m| m.1 == one).unwrap() as u16;
    let ids = sim.judged_round(&[(index, verdict::MISMATCH)]);
    for k in sim.committee(ids[0]).iter().take(2) {
        sim.vote(k, ids[0], verdict::MISMATCH).unwrap();
    }
    let slot = sim.slot_of_key(&one);
    assert_eq!((sim.s.clients[slot].burned, sim.s.clients[slot].slashed), (100, 11));
    let nonce = sim.s.nonce;
    assert_eq!(sim.s.take_burned(&one), Ok(100));
    assert_eq!(sim.s.nonce, nonce.wrapping_add(1));
    let c = sim.s.clients[slot];
    assert_eq!((c.burned, c.slashed, c.has_fault, c.last_fault_epoch), (0, 11, 1, 1), "only the burned points move");
    // A second call hands over nothing; a stranger has no slot.
    assert_eq!(sim.s.take_burned(&one), Ok(0));
    sim.rejects(E::NotAClient, |s, _| s.take_burned(&key(999)));
    // Out of the epoch (at the next round start) and settled, the slot is free again.
    sim.wait(sim.s.config.round_witness_time as i64);
    sim.tick().unwrap();
    assert_eq!(sim.s.clients[slot].in_epoch, 0);
    assert_eq!(sim.s.settle_points(&one), Ok((0, 11)));
    assert!(sim.s.clients[slot].is_free());
    assert_eq!(zeroed_state().take_burned(&one), Err(E::CorruptState));
}

#[test]
fn report_eval_emits_the_scores_and_changes_nothing() {
    const ONE: u32 = 0x3f80_0000;
    let report = |step, task| EvalReport { step, task, acc: 0x3f00_0000, acc_norm: ONE, count: 100 };
    let mut sim = Sim::uninitialized();
    sim.rejects(E::RunUninitialized, |s, _| s.report_eval(&key(1), &report(1, b"hellaswag")));
    assert_eq!(zeroed_state().report_eval(&key(1), &report(1, b"hellaswag")), Err(E::CorruptState));

    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    assert_eq!(sim.s.progress.step, 2);
    let before = sim.s.as_bytes().to_vec();
    let ev = sim.s.report_eval(&key(1), &report(1, b"hellaswag")).unwrap();
    let mut task = [0u8; EVAL_TASK_LEN];
    task[..9].copy_from_slice(b"hellaswag");
    let want = Event::EvalReported { signer: key(1), epoch: 0, step: 1, task, acc: 0x3f00_0000, acc_norm: ONE, count: 100 };
    assert_eq!(ev.iter().collect::<Vec<_>>(), vec![want]);
    assert!(sim.s.as_bytes() == &before[..], "a report changed the account (nonce included)");
    // Boundaries that pass: a 32-byte task, scores 0 and 1, one item.
    let edge = EvalReport { step: 1, task: &[b'x'; EVAL_TASK_LEN], acc: 0, acc_norm: ONE, count: 1 };
    assert!(sim.s.report_eval(&key(2), &edge).is_ok());

    sim.rejects(E::NotAClient, |s, _| s.report_eval(&key(9), &report(1, b"hellaswag")));
    let bad: [(&str, EvalReport); 12] = [
        ("step 0", report(0, b"hellaswag")),
        ("step not yet trained", report(2, b"hellaswag")),
        ("empty task", report(1, b"")),
        ("33-byte task", report(1, &[b'x'; EVAL_TASK_LEN + 1])),
        ("non-UTF-8 task", report(1, b"arc\xff")),
        ("NUL in task", report(1, b"arc\0easy")),
        ("acc above 1", EvalReport { acc: ONE + 1, ..report(1, b"arc") }),
        ("acc_norm negative", EvalReport { acc_norm: 0xbf00_0000, ..report(1, b"arc") }),
        ("acc -0", EvalReport { acc: 0x8000_0000, ..report(1, b"arc") }),
        ("acc NaN", EvalReport { acc: 0x7fc0_0000, ..report(1, b"arc") }),
        ("acc_norm infinite", EvalReport { acc_norm: 0x7f80_0000, ..report(1, b"arc") }),
        ("count 0", EvalReport { count: 0, ..report(1, b"arc") }),
    ];
    for (name, r) in bad {
        let before = sim.s.as_bytes().to_vec();
        assert_eq!(sim.s.report_eval(&key(1), &r), Err(E::EvalReport), "{name}");
        assert!(sim.s.as_bytes() == &before[..], "{name}");
    }

    // Paused and Finished runs take reports of any trained step.
    let config = CoordinatorConfig { total_steps: 1, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Finished);
    let ev = sim.s.report_eval(&key(3), &report(1, b"piqa")).unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::EvalReported { epoch: 1, step: 1, .. })));
    sim.rejects(E::EvalReport, |s, _| s.report_eval(&key(3), &report(2, b"piqa")));
    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    let c = sim.clock();
    sim.s.set_paused(true, &c).unwrap();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Paused);
    assert!(sim.s.report_eval(&key(1), &report(2, b"piqa")).is_ok());
}

/// Token ids as report_prompt's instruction bytes carry them.
fn le_ids(ids: &[u32]) -> Vec<[u8; 4]> {
    ids.iter().map(|t| t.to_le_bytes()).collect()
}

#[test]
fn report_prompt_emits_the_tokens_and_changes_nothing() {
    fn report(step: u32, tokens: &[[u8; 4]]) -> PromptReport<'_> {
        PromptReport { step, prompt: 7, tokens }
    }
    let ids = le_ids(&[5, 0, 255]);
    let mut sim = Sim::uninitialized();
    sim.rejects(E::RunUninitialized, |s, _| s.report_prompt(&key(1), &report(1, &ids)));
    assert_eq!(zeroed_state().report_prompt(&key(1), &report(1, &ids)), Err(E::CorruptState));

    let mut sim = Sim::new();
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    assert_eq!(sim.s.progress.step, 2);
    let vocab = sim.s.model.vocab_size;
    let before = sim.s.as_bytes().to_vec();
    let ev = sim.s.report_prompt(&key(1), &report(1, &ids)).unwrap();
    let mut tokens = [0u32; PROMPT_TOKENS_LEN];
    tokens[..3].copy_from_slice(&[5, 0, 255]);
    let want = Event::PromptReported { signer: key(1), epoch: 0, step: 1, prompt: 7, len: 3, tokens };
    assert_eq!(ev.iter().collect::<Vec<_>>(), vec![want]);
    assert!(sim.s.as_bytes() == &before[..], "a report changed the account (nonce included)");
    // Boundaries that pass: 32 tokens of the largest id, one token, any prompt index.
    let full = le_ids(&[vocab - 1; PROMPT_TOKENS_LEN]);
    let ev = sim.s.report_prompt(&key(2), &PromptReport { step: 1, prompt: u16::MAX, tokens: &full }).unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::PromptReported { len: 32, prompt: u16::MAX, tokens, .. }) if tokens == [vocab - 1; PROMPT_TOKENS_LEN]));
    assert!(sim.s.report_prompt(&key(2), &report(1, &le_ids(&[0]))).is_ok());

    sim.rejects(E::NotAClient, |s, _| s.report_prompt(&key(9), &report(1, &ids)));
    let too_many = le_ids(&[1; PROMPT_TOKENS_LEN + 1]);
    let at_vocab = le_ids(&[1, vocab]);
    let huge = le_ids(&[u32::MAX]);
    let bad: [(&str, PromptReport); 6] = [
        ("step 0", report(0, &ids)),
        ("step not yet trained", report(2, &ids)),
        ("no tokens", report(1, &[])),
        ("33 tokens", report(1, &too_many)),
        ("an id equal to vocab_size", report(1, &at_vocab)),
        ("id u32::MAX", report(1, &huge)),
    ];
    for (name, r) in bad {
        let before = sim.s.as_bytes().to_vec();
        assert_eq!(sim.s.report_prompt(&key(1), &r), Err(E::PromptReport), "{name}");
        assert!(sim.s.as_bytes() == &before[..], "{name}");
    }

    // A Finished run takes reports of any trained step.
    let config = CoordinatorConfig { total_steps: 1, ..valid_config() };
    let mut sim = Sim::with(config);
    sim.form_epoch(1..=3);
    sim.start_training();
    sim.finish_round();
    sim.wait(10);
    sim.tick().unwrap();
    assert_eq!(sim.state(), RunState::Finished);
    let ev = sim.s.report_prompt(&key(3), &report(1, &ids)).unwrap();
    assert!(matches!(ev.iter().next(), Some(Event::PromptReported { epoch: 1, step: 1, .. })));
    sim.rejects(E::PromptReport, |s, _| s.report_prompt(&key(3), &report(2, &ids)));
}
