use super::rules::*;
use super::*;

extern crate std;
use std::collections::BTreeMap;
use std::format;
use std::vec;
use std::vec::Vec;

use psyche_sdk::base58;
use psyche_sdk::borsh::BorshError;

fn addr(b: u8) -> Address {
    Address::new_from_array([b; 32])
}

fn params() -> CompetitionParams<'static> {
    CompetitionParams {
        id: "sn9-124m",
        architecture: ARCHITECTURE_GPT2,
        max_params: 186_000_000,
        tokenizer_hash: [3; 32],
        seq_len: 1024,
        precision: PRECISION_FP32,
        data_root: [4; 32],
        data_location: "hf://datasets/psyche/fineweb-edu",
        sequences_per_page: 100,
        epsilon_start_ppm: 5_000,
        epsilon_end_ppm: 1_000,
        epsilon_decay_slots: 1_000_000,
        pages_per_round: 4,
        temperature_ppm: 10_000,
        round_slots: 300,
        reward_per_round: 1_000,
        validator_stake: 50,
        permissioned: false,
        quorum: 2,
    }
}

fn keys() -> CompetitionKeys {
    CompetitionKeys {
        bump: 254,
        authority: addr(1),
        board: addr(2),
        reward_mint: addr(5),
        token_program: addr(6),
        pool: addr(7),
        created_slot: 10,
    }
}

fn no_pool() -> CompetitionKeys {
    CompetitionKeys { reward_mint: addr(0), token_program: addr(0), pool: addr(0), ..keys() }
}

fn competition() -> Competition {
    Competition::new(&params(), &keys()).unwrap()
}

// ---------------------------------------------------------------- layouts

#[test]
fn competition_round_trips_at_its_exact_size() {
    let mut c = competition();
    c.unclaimed = 11;
    c.stakes = 12;
    c.forfeited = 13;
    c.total_paid = 14;
    c.total_burned = 15;
    c.paused = true;
    let mut data = vec![0u8; c.space()];
    c.encode(&mut data).unwrap();
    assert_eq!(Competition::decode(&data).unwrap(), c);
    assert_eq!(c.space(), competition_space(8, 32));
    assert_eq!(competition_space(0, 0), 357);
    assert!(c.encode(&mut data[..c.space() - 1]).is_err(), "a short buffer must not hold it");
    for n in 0..data.len() {
        assert!(Competition::decode(&data[..n]).is_err(), "truncated at {n}");
    }
    let mut trailing = data.clone();
    trailing.push(0);
    assert_eq!(Competition::decode(&trailing), Err(BorshError::TrailingBytes));
    let mut wrong = data.clone();
    wrong[0] ^= 1;
    assert_eq!(Competition::decode(&wrong), Err(BorshError::InvalidTag));
    // The paused byte is a bool: 2 does not decode.
    let mut bad_bool = data.clone();
    let paused_at = c.space() - 40 - 2;
    assert_eq!(bad_bool[paused_at], 1);
    bad_bool[paused_at] = 2;
    assert_eq!(Competition::decode(&bad_bool), Err(BorshError::InvalidTag));
}

#[test]
fn params_decode_in_wire_order() {
    let p = params();
    let mut buf = vec![0u8; 512];
    let mut w = psyche_sdk::borsh::Writer::new(&mut buf);
    w.string(p.id)
        .and_then(|w| w.u8(p.architecture))
        .and_then(|w| w.u64(p.max_params))
        .and_then(|w| w.bytes(&p.tokenizer_hash))
        .and_then(|w| w.u32(p.seq_len))
        .and_then(|w| w.u8(p.precision))
        .and_then(|w| w.bytes(&p.data_root))
        .and_then(|w| w.string(p.data_location))
        .and_then(|w| w.u32(p.sequences_per_page))
        .and_then(|w| w.u32(p.epsilon_start_ppm))
        .and_then(|w| w.u32(p.epsilon_end_ppm))
        .and_then(|w| w.u64(p.epsilon_decay_slots))
        .and_then(|w| w.u16(p.pages_per_round))
        .and_then(|w| w.u32(p.temperature_ppm))
        .and_then(|w| w.u64(p.round_slots))
        .and_then(|w| w.u64(p.reward_per_round))
        .and_then(|w| w.u64(p.validator_stake))
        .and_then(|w| w.bool(p.permissioned))
        .and_then(|w| w.u8(p.quorum))
        .unwrap();
    let n = w.len();
    assert_eq!(CompetitionParams::decode(&buf[..n]).unwrap(), p);
    assert!(CompetitionParams::decode(&buf[..n - 1]).is_err());
    assert!(CompetitionParams::decode(&buf[..n + 1]).is_err());

    // The update: a tag per option.
    let mut w = psyche_sdk::borsh::Writer::new(&mut buf);
    w.bool(true).and_then(|w| w.u32(7)).unwrap();
    for _ in 0..8 {
        w.bool(false).unwrap();
    }
    w.bool(true).and_then(|w| w.bool(true)).unwrap();
    let n = w.len();
    let u = CompetitionUpdate::decode(&buf[..n]).unwrap();
    assert_eq!(u, CompetitionUpdate { epsilon_start_ppm: Some(7), paused: Some(true), ..Default::default() });
    assert!(CompetitionUpdate::decode(&buf[..n - 1]).is_err());
}

#[test]
fn every_parameter_rule_has_its_error() {
    let long_id: std::string::String = "x".repeat(33);
    let long_location: std::string::String = "y".repeat(193);
    let max_id: std::string::String = "x".repeat(32);
    let max_location: std::string::String = "y".repeat(192);
    let base = params();
    let cases: Vec<(CompetitionParams<'_>, Option<CompetitionError>)> = vec![
        (CompetitionParams { id: "", ..base.clone() }, Some(CompetitionError::InvalidId)),
        (CompetitionParams { id: &long_id, ..base.clone() }, Some(CompetitionError::InvalidId)),
        (CompetitionParams { id: &max_id, ..base.clone() }, None),
        (CompetitionParams { architecture: 2, ..base.clone() }, Some(CompetitionError::InvalidArchitecture)),
        (CompetitionParams { architecture: ARCHITECTURE_LLAMA, ..base.clone() }, None),
        (CompetitionParams { precision: 2, ..base.clone() }, Some(CompetitionError::InvalidPrecision)),
        (CompetitionParams { precision: PRECISION_MX8, ..base.clone() }, None),
        (CompetitionParams { max_params: 0, ..base.clone() }, Some(CompetitionError::InvalidMaxParams)),
        (CompetitionParams { seq_len: 0, ..base.clone() }, Some(CompetitionError::InvalidSeqLen)),
        (CompetitionParams { seq_len: 65_537, ..base.clone() }, Some(CompetitionError::InvalidSeqLen)),
        (CompetitionParams { seq_len: 65_536, ..base.clone() }, None),
        (CompetitionParams { sequences_per_page: 0, ..base.clone() }, Some(CompetitionError::InvalidSequencesPerPage)),
        (CompetitionParams { data_location: "", ..base.clone() }, Some(CompetitionError::InvalidDataLocation)),
        (CompetitionParams { data_location: &long_location, ..base.clone() }, Some(CompetitionError::InvalidDataLocation)),
        (CompetitionParams { data_location: &max_location, ..base.clone() }, None),
        (CompetitionParams { epsilon_start_ppm: 1_000_001, epsilon_end_ppm: 0, ..base.clone() }, Some(CompetitionError::InvalidEpsilon)),
        (CompetitionParams { epsilon_start_ppm: 1_000_000, epsilon_end_ppm: 1_000_000, ..base.clone() }, None),
        (CompetitionParams { epsilon_start_ppm: 10, epsilon_end_ppm: 11, ..base.clone() }, Some(CompetitionError::InvalidEpsilon)),
        (CompetitionParams { epsilon_start_ppm: 0, epsilon_end_ppm: 0, epsilon_decay_slots: 0, ..base.clone() }, None),
        (CompetitionParams { pages_per_round: 0, ..base.clone() }, Some(CompetitionError::InvalidPagesPerRound)),
        (CompetitionParams { pages_per_round: 257, ..base.clone() }, None),
        (CompetitionParams { pages_per_round: 258, ..base.clone() }, Some(CompetitionError::InvalidPagesPerRound)),
        (CompetitionParams { temperature_ppm: 999, ..base.clone() }, Some(CompetitionError::InvalidTemperature)),
        (CompetitionParams { temperature_ppm: 1_000, ..base.clone() }, None),
        (CompetitionParams { temperature_ppm: 100_000_000, ..base.clone() }, None),
        (CompetitionParams { temperature_ppm: 100_000_001, ..base.clone() }, Some(CompetitionError::InvalidTemperature)),
        (CompetitionParams { round_slots: 0, ..base.clone() }, Some(CompetitionError::InvalidRoundSlots)),
        (CompetitionParams { quorum: 0, ..base.clone() }, Some(CompetitionError::InvalidQuorum)),
        (CompetitionParams { quorum: 32, ..base.clone() }, None),
        (CompetitionParams { quorum: 33, ..base.clone() }, Some(CompetitionError::InvalidQuorum)),
    ];
    for (p, want) in cases {
        assert_eq!(Competition::new(&p, &keys()).err(), want, "{p:?}");
    }
    // The largest pages_per_round keeps every win count in a u16.
    assert_eq!(u32::from(MAX_PAGES_PER_ROUND) * (MAX_SUBMISSIONS as u32 - 1), 65_535);
    // Without a pool nothing is paid or staked.
    assert_eq!(Competition::new(&params(), &no_pool()).err(), Some(CompetitionError::RewardsWithoutPool));
    let free = CompetitionParams { reward_per_round: 0, validator_stake: 0, ..params() };
    let c = Competition::new(&free, &no_pool()).unwrap();
    assert!(!c.has_pool());
    assert_eq!(c.round_pot(1_000_000), Ok(0));
    assert_eq!(Competition::new(&CompetitionParams { validator_stake: 0, ..params() }, &no_pool()).err(), Some(CompetitionError::RewardsWithoutPool));
}

#[test]
fn updates_keep_the_rules_and_change_nothing_on_an_error() {
    let mut c = competition();
    assert_eq!(c.update(&CompetitionUpdate::default()), Err(CompetitionError::EmptyUpdate));
    let before = c.clone();
    for (u, e) in [
        (CompetitionUpdate { epsilon_end_ppm: Some(6_000), ..Default::default() }, CompetitionError::InvalidEpsilon),
        (CompetitionUpdate { pages_per_round: Some(0), ..Default::default() }, CompetitionError::InvalidPagesPerRound),
        (CompetitionUpdate { temperature_ppm: Some(1), ..Default::default() }, CompetitionError::InvalidTemperature),
        (CompetitionUpdate { round_slots: Some(0), ..Default::default() }, CompetitionError::InvalidRoundSlots),
        (CompetitionUpdate { quorum: Some(33), paused: Some(true), ..Default::default() }, CompetitionError::InvalidQuorum),
    ] {
        assert_eq!(c.update(&u), Err(e));
        assert_eq!(c, before, "{e:?} changed the competition");
    }
    let u = CompetitionUpdate {
        epsilon_start_ppm: Some(9_000),
        epsilon_end_ppm: Some(9_000),
        epsilon_decay_slots: Some(0),
        pages_per_round: Some(257),
        temperature_ppm: Some(5_000),
        round_slots: Some(9),
        reward_per_round: Some(0),
        validator_stake: Some(7),
        quorum: Some(1),
        paused: Some(true),
    };
    c.update(&u).unwrap();
    assert_eq!(
        (c.epsilon_start_ppm, c.epsilon_end_ppm, c.epsilon_decay_slots, c.pages_per_round, c.temperature_ppm),
        (9_000, 9_000, 0, 257, 5_000)
    );
    assert_eq!((c.round_slots, c.reward_per_round, c.validator_stake, c.quorum, c.paused), (9, 0, 7, 1, true));
    // Constraints and dataset are untouched.
    assert_eq!((c.max_params, c.data_root, c.id), (before.max_params, before.data_root, before.id));
    // Without a pool, no update can ask for rewards or stakes.
    let mut free = Competition::new(&CompetitionParams { reward_per_round: 0, validator_stake: 0, ..params() }, &no_pool()).unwrap();
    assert_eq!(free.update(&CompetitionUpdate { reward_per_round: Some(1), ..Default::default() }), Err(CompetitionError::RewardsWithoutPool));
    assert_eq!(free.update(&CompetitionUpdate { validator_stake: Some(1), ..Default::default() }), Err(CompetitionError::RewardsWithoutPool));
}

#[test]
fn submission_round_trips_and_clears_stale_bytes() {
    let c = competition();
    let commit = Commit { commitment: [8; 32], revision: [9; 32], params: 124_000_000, repo: "miner/model" };
    let long: std::string::String = "r".repeat(MAX_REPO_LEN);
    let mut s = Submission::new(250, addr(3), addr(4), 7, Commit { repo: &long, ..commit }.model(&c, 100).unwrap());
    let mut data = vec![0u8; SUBMISSION_SPACE];
    s.encode(&mut data).unwrap();
    assert_eq!(Submission::decode(&data).unwrap(), s);
    // Both models with the longest repo fill the account exactly.
    s.commit(s.current, true);
    s.encode(&mut data).unwrap();
    assert!(data[SUBMISSION_SPACE - 1] != 0);
    assert_eq!(Submission::decode(&data).unwrap(), s);
    // A shorter repo leaves zeros behind its encoding.
    let short = Submission::new(250, addr(3), addr(4), 7, commit.model(&c, 5).unwrap());
    short.encode(&mut data).unwrap();
    assert_eq!(Submission::decode(&data).unwrap(), short);
    let used = 8 + 1 + 64 + 2 + (32 + 32 + 8 + 8 + 4 + 11) + (32 + 32 + 8 + 8 + 4);
    assert!(data[used..].iter().all(|&b| b == 0));
    assert!(short.encode(&mut data[..used - 1]).is_err());
    for n in 0..used {
        assert!(Submission::decode(&data[..n]).is_err(), "truncated at {n}");
    }
    let mut wrong = data.clone();
    wrong[..8].copy_from_slice(&COMPETITION_ACCOUNT);
    assert_eq!(Submission::decode(&wrong), Err(BorshError::InvalidTag));
}

#[test]
fn commits_are_checked_against_the_constraints() {
    let c = competition();
    let ok = Commit { commitment: [1; 32], revision: [2; 32], params: c.max_params, repo: "a" };
    assert!(ok.model(&c, 1).is_ok());
    assert_eq!(Commit { params: 0, ..ok }.model(&c, 1), Err(CompetitionError::InvalidParams));
    assert_eq!(Commit { params: c.max_params + 1, ..ok }.model(&c, 1), Err(CompetitionError::ModelTooLarge));
    assert_eq!(Commit { repo: "", ..ok }.model(&c, 1), Err(CompetitionError::InvalidRepo));
    let long: std::string::String = "r".repeat(193);
    assert_eq!(Commit { repo: &long, ..ok }.model(&c, 1), Err(CompetitionError::InvalidRepo));
}

#[test]
fn board_layout() {
    // The fixed layout the IDL and the Go clients read.
    assert_eq!(size_of::<Vote>(), 33);
    assert_eq!(size_of::<Entry>(), 32 + 8 + 8 + 1 + 8 + 8 + 2 + 4);
    assert_eq!(size_of::<Validator>(), 32 + 8 + 1 + 4 + 4);
    assert_eq!(size_of::<Round>(), 8 + 1 + 8 + 8 + 32 + 8 + 2 + 32 + 1 + 2 + 4 + 4 + 8 + 1 + 33 * 32 + 32 + 1 + 8);
    assert_eq!(core::mem::offset_of!(Board, round), 43);
    assert_eq!(BOARD_SPACE, 43 + size_of::<Round>() + 71 * 256 + 49 * 32);
    assert_eq!(BOARD_SPACE, 21_003);
    const { assert!(BOARD_SPACE > 10 * 1024, "a CPI cannot create it: the client allocates it") };
    let mut data = vec![0u8; BOARD_SPACE + 1];
    assert!(Board::from_bytes(&data[..BOARD_SPACE - 1]).is_none());
    assert!(Board::from_bytes_mut(&mut data).is_none());
    // Any offset will do: the layout has alignment 1.
    let b = Board::from_bytes_mut(&mut data[1..]).unwrap();
    b.init(&addr(9));
    b.round.open_slot.set(0x0102_0304_0506_0708);
    assert_eq!(&data[1..9], &BOARD_ACCOUNT);
    assert_eq!(&data[1 + 8..1 + 40], &[9; 32]);
    let open_at = 1 + 43 + 8 + 1;
    assert_eq!(&data[open_at..open_at + 8], &0x0102_0304_0506_0708u64.to_le_bytes());
}

// ----------------------------------------------------------- the model rule

#[test]
fn the_round_evaluates_the_model_committed_before_it_opened() {
    use Evaluated::*;
    assert_eq!(evaluated_model(50, 0, 100), Some(Current));
    assert_eq!(evaluated_model(99, 40, 100), Some(Current));
    assert_eq!(evaluated_model(100, 0, 100), None, "a commit in the opening slot is too late");
    assert_eq!(evaluated_model(120, 0, 100), None);
    assert_eq!(evaluated_model(120, 50, 100), Some(Prev));
    assert_eq!(evaluated_model(120, 100, 100), None);
}

/// A test board with its data.
struct Fixture {
    data: Vec<u8>,
    c: Competition,
    /// Submissions by miner, as the program keeps them.
    subs: BTreeMap<u8, Submission>,
    balance: u64,
}

impl Fixture {
    fn new(c: Competition) -> Self {
        let mut data = vec![0u8; BOARD_SPACE];
        Board::from_bytes_mut(&mut data).unwrap().init(&addr(0xc0));
        Fixture { data, c, subs: BTreeMap::new(), balance: 0 }
    }

    fn board(&mut self) -> &mut Board {
        Board::from_bytes_mut(&mut self.data).unwrap()
    }

    fn b(&self) -> &Board {
        Board::from_bytes(&self.data).unwrap()
    }

    /// submission_commit by miner `m` at `slot`, as the program does it.
    fn commit(&mut self, m: u8, slot: u64, tag: u8) -> Result<(), CompetitionError> {
        let miner = addr(m);
        let repo = format!("m{m}/r{tag}");
        let model = Commit { commitment: [tag; 32], revision: [tag; 32], params: 1_000, repo: &repo }.model(&self.c, slot)?;
        match self.subs.get(&m).cloned() {
            None => {
                let index = self.board().add_entry(&miner, slot)?;
                self.subs.insert(m, Submission::new(255, addr(0xc0), miner, index, model));
            }
            Some(mut s) => {
                let shift = self.board().recommit(s.index, &miner, slot)?;
                s.commit(model, shift);
                self.subs.insert(m, s);
            }
        }
        Ok(())
    }

    fn join(&mut self, v: u8) -> Result<u64, CompetitionError> {
        let mut c = self.c.clone();
        let r = self.board().join(&mut c, &addr(v));
        self.c = c;
        let (_, stake) = r?;
        self.balance += stake;
        Ok(stake)
    }

    fn leave(&mut self, v: u8) -> Result<u64, CompetitionError> {
        let mut c = self.c.clone();
        let r = self.board().leave(&mut c, &addr(v));
        self.c = c;
        let (_, stake) = r?;
        self.balance -= stake;
        Ok(stake)
    }

    fn tick(&mut self, now: u64) -> Result<Tick, CompetitionError> {
        let c = self.c.clone();
        let t = self.b().tick_action(&c, now, Some(now.saturating_sub(1)))?;
        match t {
            Tick::Open => {
                self.board().open_round(&c, now)?;
            }
            Tick::Seed => {
                let seed_slot = self.b().round.seed_slot.get();
                self.board().seed_round(&addr(0xc0), (seed_slot + 1, &[seed_slot as u8; 32]), now, c.round_slots);
            }
            Tick::Expire => self.board().expire_round(),
        }
        Ok(t)
    }

    /// Opens a round at `now` and seeds it two slots later (SlotHashes'
    /// newest entry is the slot before the current one).
    fn round(&mut self, now: u64) {
        assert_eq!(self.tick(now), Ok(Tick::Open));
        assert_eq!(self.tick(now + 1), Err(CompetitionError::NothingToTick));
        assert_eq!(self.tick(now + 2), Ok(Tick::Seed));
    }

    /// The vote an honest validator sends for the current round: wins from
    /// a table every honest validator computes alike (here: from the seed),
    /// with `invalid` marking models it could not use.
    fn honest(&self, invalid: [u8; 32]) -> (u64, [u8; 32], Vec<u16>, [u8; 32]) {
        let r = &self.b().round;
        let n = usize::from(r.entries.get());
        let valid: Vec<bool> = (0..n).map(|i| bit(&r.eligible, i) && !bit(&invalid, i)).collect();
        let count = valid.iter().filter(|&&v| v).count() as u32;
        let max = u32::from(r.pages.get()) * count.saturating_sub(1);
        let wins = (0..n)
            .map(|i| if valid[i] { ((r.seed[i % 32] as u32 * (i as u32 + 1)) % (max + 1)) as u16 } else { 0 })
            .collect();
        (r.number.get(), r.seed, wins, invalid)
    }

    fn vote(&mut self, v: u8, ballot: &(u64, [u8; 32], Vec<u16>, [u8; 32]), now: u64) -> Result<Tally, CompetitionError> {
        let key = addr(v);
        let b = Ballot { validator: &key, round: ballot.0, table_hash: ballot.1, wins: &ballot.2, invalid: ballot.3, now, pool_balance: self.balance };
        let mut c = self.c.clone();
        let r = self.board().vote(&mut c, &b);
        self.c = c;
        r
    }

    fn claim(&mut self, m: u8) -> Result<u64, CompetitionError> {
        let index = self.subs.get(&m).ok_or(CompetitionError::SubmissionMismatch)?.index;
        let mut c = self.c.clone();
        let r = self.board().claim(&mut c, index, &addr(m));
        self.c = c;
        let paid = r?;
        self.balance -= paid;
        Ok(paid)
    }

    /// The accounting every state keeps.
    fn check(&self) {
        let b = self.b();
        let owed: u64 = b.entries().iter().map(|e| e.earned.get() - e.claimed.get()).sum();
        assert_eq!(self.c.unclaimed, owed, "unclaimed == sum of earned - claimed");
        let staked: u64 = b.validators().iter().map(|v| v.stake.get()).sum();
        assert_eq!(self.c.stakes, staked, "stakes == sum of the validators' stakes");
        assert!(b.validators().iter().all(|v| v.status == VALIDATOR_ACTIVE || v.stake.get() == 0));
        assert!(self.c.reserve().unwrap() <= self.balance, "the pool covers its reserve");
        for (m, s) in &self.subs {
            let e = &b.entries()[usize::from(s.index)];
            assert_eq!(e.miner, addr(*m).to_bytes());
            assert_eq!((e.slot.get(), e.prev_slot.get()), (s.current.slot, s.prev.slot), "board and submission agree");
        }
        assert!(usize::from(b.round.vote_count) <= MAX_VALIDATORS);
    }
}

#[test]
fn a_second_commit_during_a_round_never_moves_the_model_it_evaluates() {
    let mut f = Fixture::new(competition());
    f.commit(1, 50, 1).unwrap(); // A at 50
    f.round(100);
    f.commit(1, 120, 2).unwrap(); // B: A moves to prev
    assert_eq!(f.subs[&1].prev.commitment, [1; 32]);
    f.commit(1, 130, 3).unwrap(); // C overwrites B, prev stays A
    let s = &f.subs[&1];
    assert_eq!((s.current.commitment, s.prev.commitment), ([3; 32], [1; 32]));
    assert_eq!(evaluated_model(s.current.slot, s.prev.slot, 100), Some(Evaluated::Prev));
    // Final: late voters must still see A, whatever the miner commits now.
    f.join(10).unwrap();
    f.c.quorum = 1;
    f.board().round.quorum = 1;
    let ballot = f.honest([0; 32]);
    assert!(f.vote(10, &ballot, 140).unwrap().finalized.is_some());
    f.commit(1, 150, 4).unwrap();
    f.commit(1, 160, 5).unwrap();
    let s = &f.subs[&1];
    assert_eq!(s.prev.commitment, [1; 32], "still A for the final round");
    assert_eq!(s.current.commitment, [5; 32]);
    // The next round opens a round length (300 slots) after it, not
    // before: it evaluates E, the latest.
    assert_eq!(f.tick(399), Err(CompetitionError::NothingToTick), "one slot short of a round length");
    f.round(400);
    let s = &f.subs[&1];
    assert_eq!(evaluated_model(s.current.slot, s.prev.slot, 400), Some(Evaluated::Current));
    f.check();
}

#[test]
fn commits_before_any_round_overwrite_and_a_first_commit_mid_round_waits() {
    let mut f = Fixture::new(competition());
    f.commit(1, 10, 1).unwrap();
    f.commit(1, 20, 2).unwrap();
    assert_eq!(f.subs[&1].prev, Model::NONE, "no round yet: nothing to keep");
    f.round(100);
    f.commit(2, 110, 1).unwrap();
    let r = f.b().round;
    assert_eq!(r.entries.get(), 1, "the newcomer is not in this round");
    assert_eq!(r.eligible[0], 0b1);
    // An entry whose only model came in the opening slot waits too.
    let mut f = Fixture::new(competition());
    f.commit(1, 10, 1).unwrap();
    f.commit(2, 100, 1).unwrap();
    f.round(100);
    assert_eq!(f.b().round.eligible[0], 0b01);
    assert_eq!(f.b().round.entries.get(), 2);
}

#[test]
fn the_board_holds_256_entries() {
    let mut f = Fixture::new(competition());
    for i in 0..MAX_SUBMISSIONS {
        assert_eq!(f.board().add_entry(&Address::new_from_array([(i % 256) as u8; 32]), 5), Ok(i as u16));
    }
    assert_eq!(f.board().add_entry(&addr(1), 5), Err(CompetitionError::CompetitionFull));
    assert_eq!(f.board().recommit(3, &addr(4), 6), Err(CompetitionError::SubmissionMismatch));
    assert_eq!(f.board().recommit(3, &addr(3), 6), Ok(false));
}

// ----------------------------------------------------------------- rounds

#[test]
fn rounds_open_seed_and_expire() {
    let mut f = Fixture::new(competition());
    assert_eq!(f.tick(10), Err(CompetitionError::NothingToTick), "no entry");
    f.commit(1, 10, 1).unwrap();
    assert_eq!(f.tick(10), Err(CompetitionError::NothingToTick), "committed in this slot");
    assert_eq!(f.tick(11), Ok(Tick::Open));
    let r = f.b().round;
    assert_eq!((r.number.get(), r.open_slot.get(), r.entries.get(), f.b().round_state()), (1, 11, 1, RoundState::SeedPending));
    assert_eq!((r.quorum, r.pages.get(), r.epsilon_start_ppm.get()), (2, 4, 5_000), "the rules it opened with");
    // No slot hash after the opening slot yet.
    assert_eq!(f.b().tick_action(&f.c, 11, Some(11)), Err(CompetitionError::NothingToTick));
    assert_eq!(f.b().tick_action(&f.c, 11, None), Err(CompetitionError::NothingToTick));
    assert_eq!(f.b().tick_action(&f.c, 12, Some(12)), Ok(Tick::Seed));
    f.board().seed_round(&addr(0xc0), (12, &[6; 32]), 13, 300);
    let r = f.b().round;
    assert_eq!(r.seed, round_seed(&addr(0xc0), 1, 12, &[6; 32]));
    assert_eq!((r.seed_slot.get(), r.deadline_slot.get(), f.b().round_state()), (12, 313, RoundState::Evaluating));
    assert_eq!(f.tick(313), Err(CompetitionError::NothingToTick), "the deadline slot still takes votes");
    // Paused: nothing opens or seeds, but a round past its deadline expires.
    f.c.paused = true;
    assert_eq!(f.tick(100), Err(CompetitionError::CompetitionPaused));
    assert_eq!(f.tick(314), Ok(Tick::Expire));
    assert_eq!(f.b().round_state(), RoundState::Expired);
    assert_eq!(f.tick(315), Err(CompetitionError::CompetitionPaused));
    f.c.paused = false;
    assert_eq!(f.tick(315), Ok(Tick::Open));
    assert_eq!(f.b().round.number.get(), 2);
    // An update applies to the next round only.
    f.c.update(&CompetitionUpdate { pages_per_round: Some(9), quorum: Some(1), ..Default::default() }).unwrap();
    assert_eq!((f.b().round.pages.get(), f.b().round.quorum), (4, 2));
}

#[test]
fn round_seeds_are_entropy_from_a_later_slot() {
    // Every input changes the seed.
    let base = round_seed(&addr(1), 2, 3, &[4; 32]);
    assert_ne!(base, round_seed(&addr(9), 2, 3, &[4; 32]));
    assert_ne!(base, round_seed(&addr(1), 9, 3, &[4; 32]));
    assert_ne!(base, round_seed(&addr(1), 2, 9, &[4; 32]));
    assert_ne!(base, round_seed(&addr(1), 2, 3, &[9; 32]));
    let mut pre = Vec::new();
    pre.extend_from_slice(b"psyche-competition-round");
    pre.extend_from_slice(&[1; 32]);
    pre.extend_from_slice(&2u64.to_le_bytes());
    pre.extend_from_slice(&3u64.to_le_bytes());
    pre.extend_from_slice(&[4; 32]);
    assert_eq!(base, psyche_sdk::hash::hashv(&[&pre]));
}

/// Four entries, three validators, quorum 2, a seeded round at slot 100.
fn evaluating() -> Fixture {
    let mut f = Fixture::new(competition());
    f.balance = 10_000;
    for m in 1..=4 {
        f.commit(m, 10 + u64::from(m), m).unwrap();
    }
    for v in 10..13 {
        f.join(v).unwrap();
    }
    f.round(100);
    f.check();
    f
}

#[test]
fn votes_are_checked() {
    let mut f = evaluating();
    let good = f.honest([0; 32]);
    let n = good.2.len();
    assert_eq!(n, 4);
    assert_eq!(f.vote(99, &good, 110), Err(CompetitionError::NotValidator));
    assert_eq!(f.vote(10, &(good.0 + 1, good.1, good.2.clone(), good.3), 110), Err(CompetitionError::WrongRound));
    assert_eq!(f.vote(10, &good, 403), Err(CompetitionError::RoundDeadlinePassed));
    assert!(f.b().round.deadline_slot.get() == 402);
    // Wrong length, wins where none can be, too many wins, invalid outside the eligible.
    let mut short = good.clone();
    short.2.pop();
    let max = 4 * 3;
    let mut too_many = good.clone();
    too_many.2[0] = max + 1;
    let mut invalid_with_wins = good.clone();
    invalid_with_wins.3[0] = 0b1;
    invalid_with_wins.2[0] = 1;
    let mut outside = good.clone();
    outside.3[0] = 0b1_0000;
    for bad in [&short, &too_many, &invalid_with_wins, &outside] {
        assert_eq!(f.vote(10, bad, 110), Err(CompetitionError::BadVote));
    }
    let mut at_max = good.clone();
    at_max.2 = vec![max, 0, 0, 0];
    let t = f.vote(10, &at_max, 110).unwrap();
    assert_eq!(t.finalized, None);
    assert_eq!(t.digest, vote_digest(good.0, &f.b().round.seed, &good.1, &at_max.2, &good.3));
    assert_eq!(f.vote(10, &good, 111), Err(CompetitionError::AlreadyVoted));
    assert_eq!(f.b().validators()[0].votes.get(), 1);
    // Nothing to vote on once expired, or before the seed.
    f.board().expire_round();
    assert_eq!(f.vote(11, &good, 120), Err(CompetitionError::RoundNotOpen));
    f.board().round.state = RoundState::SeedPending as u8;
    assert_eq!(f.vote(11, &good, 120), Err(CompetitionError::RoundNotOpen));
}

#[test]
fn a_quorum_finalizes_pays_and_faults_the_dissent() {
    let mut f = evaluating();
    let good = f.honest([0b0100, 0, 0, 0].iter().copied().chain([0; 28]).collect::<Vec<u8>>().try_into().unwrap());
    let mut liar = good.clone();
    liar.1 = [0xee; 32];
    let t = f.vote(11, &liar, 110).unwrap();
    assert_eq!((t.finalized, t.faulted), (None, 0));
    let t = f.vote(10, &good, 111).unwrap();
    assert_eq!(t.finalized, None);
    let t = f.vote(12, &good, 112).unwrap();
    let fin = t.finalized.unwrap();
    assert_eq!(t.faulted, 1 << 1, "validator 11 (index 1) voted for another digest");
    assert_eq!(f.b().round_state(), RoundState::Final);
    assert_eq!(fin.paid, 1_000);
    assert_eq!(fin.agreeing, 2);
    assert!(fin.credited <= 1_000 && fin.credited >= 1_000 - 4);
    // Weights and payouts as the rules compute them.
    let valid = [0b1011u8].iter().copied().chain([0; 31]).collect::<Vec<u8>>().try_into().unwrap();
    let mut w = [0u32; 4];
    weights(&good.2, &valid, 10_000, &mut w);
    let b = f.b();
    for (i, e) in b.entries().iter().enumerate() {
        assert_eq!(e.weight.get(), w[i]);
        assert_eq!(e.wins.get(), good.2[i]);
        let mut p = [0u64];
        payouts(1_000, &[w[i]], &mut p);
        assert_eq!(e.earned.get(), p[0]);
    }
    assert_eq!(b.entries()[2].status, ENTRY_EXCLUDED, "its model was invalid");
    assert_eq!(b.entries()[2].earned.get(), 0);
    assert_eq!(b.round.final_digest, t.digest);
    assert_eq!(b.round.paid.get(), 1_000);
    // The liar's stake is forfeited.
    assert_eq!(b.validators()[1].status, VALIDATOR_FAULTED);
    assert_eq!(b.validators()[1].faults.get(), 1);
    assert_eq!((f.c.stakes, f.c.forfeited, f.c.unclaimed, f.c.total_paid), (100, 50, fin.credited, fin.credited));
    f.check();
    // The faulted validator can neither vote, leave nor come back.
    assert_eq!(f.vote(11, &good, 113), Err(CompetitionError::NotValidator));
    assert_eq!(f.leave(11), Err(CompetitionError::ValidatorFaulted));
    assert_eq!(f.join(11), Err(CompetitionError::ValidatorFaulted));
    // Excluded until the miner commits again.
    f.commit(3, 150, 9).unwrap();
    assert_eq!(f.b().entries()[2].status, ENTRY_ACTIVE);
    // Claims pay what was credited, once.
    let (top, earned) = f.b().entries().iter().enumerate().map(|(i, e)| (i, e.earned.get())).max_by_key(|&(_, e)| e).unwrap();
    assert!(earned > 0);
    let miner = top as u8 + 1;
    assert_eq!(f.claim(miner), Ok(earned));
    assert_eq!(f.claim(miner), Err(CompetitionError::NothingToClaim));
    assert_eq!(f.claim(3), Err(CompetitionError::NothingToClaim));
    f.check();
    // Burning the forfeited stake.
    assert_eq!(f.c.take_forfeited(), Ok(50));
    assert_eq!((f.c.forfeited, f.c.total_burned), (0, 50));
    assert_eq!(f.c.take_forfeited(), Err(CompetitionError::NothingToBurn));
}

#[test]
fn late_votes_on_a_final_round_agree_or_are_faulted_at_once() {
    let mut f = evaluating();
    f.join(13).unwrap();
    let good = f.honest([0; 32]);
    f.vote(10, &good, 110).unwrap();
    assert!(f.vote(11, &good, 111).unwrap().finalized.is_some());
    let t = f.vote(12, &good, 500).unwrap();
    assert_eq!((t.finalized, t.faulted), (None, 0), "no deadline once final");
    assert_eq!(f.b().round.agreeing, 3);
    let mut other = good.clone();
    other.2[0] = good.2[0] ^ 1;
    let t = f.vote(13, &other, 501).unwrap();
    assert_eq!(t.faulted, 1 << 3);
    assert_eq!(f.b().validators()[3].status, VALIDATOR_FAULTED);
    assert_eq!(f.b().round.agreeing, 3);
    assert_eq!(f.c.forfeited, 50);
    f.check();
    // The next round clears the votes.
    f.round(600);
    assert_eq!((f.b().round.vote_count, f.b().round.agreeing), (0, 0));
}

#[test]
fn a_split_below_quorum_expires_and_faults_nobody() {
    let mut f = evaluating();
    f.c.quorum = 3;
    f.board().round.quorum = 3;
    let good = f.honest([0; 32]);
    let mut other = good.clone();
    other.3[0] = 0b1;
    other.2[0] = 0;
    f.vote(10, &good, 110).unwrap();
    f.vote(11, &good, 110).unwrap();
    f.vote(12, &other, 110).unwrap();
    assert_eq!(f.b().round_state(), RoundState::Evaluating);
    assert_eq!(f.tick(402), Err(CompetitionError::NothingToTick));
    assert_eq!(f.tick(403), Ok(Tick::Expire));
    assert_eq!((f.c.forfeited, f.c.unclaimed), (0, 0));
    assert!(f.b().validators().iter().all(|v| v.status == VALIDATOR_ACTIVE));
}

#[test]
fn the_pot_never_touches_the_reserve() {
    let mut f = evaluating();
    // The pool holds the stakes (150) and 100 more: the round pays 100.
    f.balance = 250;
    assert_eq!(f.c.reserve(), Ok(150));
    assert_eq!(f.c.round_pot(f.balance), Ok(100));
    let good = f.honest([0; 32]);
    f.vote(10, &good, 110).unwrap();
    let fin = f.vote(11, &good, 110).unwrap().finalized.unwrap();
    assert_eq!(fin.paid, 100);
    f.check();
    assert_eq!(f.c.unallocated(f.balance), Ok(100 - fin.credited));
    assert_eq!(f.c.check_withdraw(100 - fin.credited, f.balance), Ok(()));
    assert_eq!(f.c.check_withdraw(101 - fin.credited, f.balance), Err(CompetitionError::WithdrawExceedsUnallocated));
    // A pool below its reserve (never, but saturating) pays nothing.
    assert_eq!(f.c.round_pot(10), Ok(0));
    assert_eq!(f.c.unallocated(0), Ok(0));
}

#[test]
fn validators_join_leave_and_are_locked_by_their_vote() {
    let mut f = evaluating();
    assert_eq!(f.join(10), Err(CompetitionError::ValidatorActive));
    assert_eq!(f.leave(99), Err(CompetitionError::NotValidator));
    let good = f.honest([0; 32]);
    f.vote(10, &good, 110).unwrap();
    assert_eq!(f.leave(10), Err(CompetitionError::ValidatorLocked));
    assert_eq!(f.leave(12), Ok(50), "it has not voted");
    assert_eq!(f.leave(12), Err(CompetitionError::NotValidator));
    // A stake change applies to later joins; a rejoin takes its old slot.
    f.c.validator_stake = 70;
    assert_eq!(f.join(12), Ok(70));
    assert_eq!(f.b().validator_count, 3);
    assert_eq!(f.b().validators()[2].stake.get(), 70);
    f.vote(11, &good, 111).unwrap();
    assert_eq!(f.b().round_state(), RoundState::Final);
    assert_eq!(f.leave(10), Ok(50), "final: free to go");
    assert_eq!(f.c.stakes, 120);
    f.check();
}

#[test]
fn the_board_holds_32_validators_and_reuses_slots_left() {
    let mut f = evaluating();
    for v in 13..(10 + MAX_VALIDATORS as u8) {
        f.join(v).unwrap();
    }
    assert_eq!(f.join(200), Err(CompetitionError::ValidatorsFull));
    let good = f.honest([0; 32]);
    f.vote(10, &good, 110).unwrap();
    f.vote(11, &good, 110).unwrap();
    // Slot 0 voted in this round: it is not reused; slot 5 is.
    f.leave(10).unwrap();
    assert_eq!(f.join(200), Err(CompetitionError::ValidatorsFull));
    f.leave(15).unwrap();
    assert_eq!(f.join(200), Ok(50));
    let v = f.b().validators()[5];
    assert_eq!((v.key, v.votes.get(), v.status), (addr(200).to_bytes(), 0, VALIDATOR_ACTIVE));
    assert_eq!(f.join(15), Err(CompetitionError::ValidatorsFull));
    f.check();
}

#[test]
fn closing_needs_nothing_reserved() {
    let mut c = competition();
    assert_eq!(c.check_closable(), Ok(()));
    for (field, e) in [(0, CompetitionError::UnclaimedRewardsRemain), (1, CompetitionError::StakesRemain), (2, CompetitionError::BurnPending)] {
        let mut d = c.clone();
        *[&mut d.unclaimed, &mut d.stakes, &mut d.forfeited][field] = 1;
        assert_eq!(d.check_closable(), Err(e));
    }
    c.unclaimed = u64::MAX;
    c.stakes = 1;
    assert_eq!(c.reserve(), Err(CompetitionError::MathOverflow));
}

// ------------------------------------------------------------- arithmetic

#[test]
fn exp_neg_q32_follows_the_exponential() {
    assert_eq!(exp_neg_q32(0), 1 << 32);
    assert_eq!(exp_neg_q32(LN2_Q32), 1 << 31, "e^-ln2 = 1/2 (k = 1, r = 0)");
    assert_eq!(exp_neg_q32(64 * LN2_Q32), 0);
    assert_eq!(exp_neg_q32(u64::MAX), 0);
    let mut last = u64::MAX;
    for z in (0..40u64 << 32).step_by(977_777_777) {
        let got = exp_neg_q32(z);
        let want = (2f64.powi(32) * (-(z as f64) / 2f64.powi(32)).exp()).floor();
        assert!((got as f64 - want).abs() <= 8.0, "z {z}: {got} vs {want}");
        assert!(got <= last, "decreasing");
        last = got;
    }
    assert_eq!(LN2_Q32, (2f64.ln() * 2f64.powi(32)).floor() as u64);
}

fn valid_all(n: usize) -> [u8; 32] {
    let mut v = [0u8; 32];
    for i in 0..n {
        v[i / 8] |= 1 << (i % 8);
    }
    v
}

#[test]
fn weights_are_a_softmax_of_win_shares() {
    let mut out = [0u32; 4];
    // No valid entry: nothing.
    weights(&[3, 2, 1, 0], &[0; 32], 10_000, &mut out);
    assert_eq!(out, [0; 4]);
    // No wins at all: equal shares of the valid entries.
    weights(&[0, 0, 0, 0], &valid_all(4), 10_000, &mut out);
    assert_eq!(out, [1 << 22; 4]);
    // One valid entry takes everything.
    weights(&[0, 0, 0, 0], &[0b0100; 32], 10_000, &mut out);
    assert_eq!(out, [0, 0, WEIGHT_ONE, 0]);
    // Low temperature: the leader takes (nearly) all; high: near uniform.
    weights(&[12, 6, 6, 0], &valid_all(4), 1_000, &mut out);
    assert_eq!(out[0], WEIGHT_ONE, "e^-(0.25 / 0.001) rounds the rest to 0");
    weights(&[12, 6, 6, 0], &valid_all(4), 100_000_000, &mut out);
    assert!(out.iter().all(|&w| (w as i64 - (1 << 22)).abs() < 40_000), "{out:?}");
    // Against floating point, and the sums.
    let wins = [9u16, 5, 3, 3, 0, 7];
    let valid = valid_all(6);
    let mut out = [0u32; 6];
    weights(&wins, &valid, 100_000, &mut out);
    let total: f64 = wins.iter().map(|&w| w as f64).sum();
    let ex: Vec<f64> = wins.iter().map(|&w| ((w as f64 / total) / 0.1).exp()).collect();
    let sum: f64 = ex.iter().sum();
    for (i, &w) in out.iter().enumerate() {
        let want = ex[i] / sum * WEIGHT_ONE as f64;
        assert!((w as f64 - want).abs() < 64.0, "entry {i}: {w} vs {want}");
    }
    let s: u64 = out.iter().map(|&w| w as u64).sum();
    assert!(s <= WEIGHT_ONE as u64 && s > WEIGHT_ONE as u64 - 6);
    // Invalid entries weigh 0 whatever their wins (the vote checks forbid them anyway).
    let mut out2 = [0u32; 6];
    weights(&wins, &[0b11_1110; 32], 100_000, &mut out2);
    assert_eq!(out2[0], 0);
}

#[test]
fn payouts_never_exceed_the_pot_and_match_wide_arithmetic() {
    let ws = [WEIGHT_ONE, WEIGHT_ONE / 2, 1, 0, 12_345_678, WEIGHT_ONE - 1];
    for paid in [0u64, 1, 999, 1 << 24, (1 << 24) - 1, u64::MAX, u64::MAX / 3, 123_456_789_012_345] {
        let mut out = [0u64; 6];
        payouts(paid, &ws, &mut out);
        for (i, &w) in ws.iter().enumerate() {
            assert_eq!(out[i] as u128, (paid as u128 * w as u128) >> 24, "paid {paid} w {w}");
        }
    }
    let mut rng = Rng(5);
    for _ in 0..200 {
        let n = 1 + rng.below(256) as usize;
        let wins: Vec<u16> = (0..n).map(|_| rng.below(1000) as u16).collect();
        let valid: [u8; 32] = core::array::from_fn(|_| rng.next() as u8);
        let mut w = vec![0u32; n];
        weights(&wins, &valid, 1_000 + rng.below(100_000_000) as u32, &mut w);
        let s: u64 = w.iter().map(|&x| x as u64).sum();
        assert!(s <= WEIGHT_ONE as u64);
        let paid = rng.next() >> rng.below(64);
        let mut out = vec![0u64; n];
        payouts(paid, &w, &mut out);
        let total: u128 = out.iter().map(|&x| x as u128).sum();
        assert!(total <= paid as u128);
    }
}

#[test]
fn the_vote_digest_commits_to_every_field() {
    let d = vote_digest(7, &[1; 32], &[2; 32], &[0x0102, 3], &[4; 32]);
    let mut pre = Vec::new();
    pre.extend_from_slice(&7u64.to_le_bytes());
    pre.extend_from_slice(&[1; 32]);
    pre.extend_from_slice(&[2; 32]);
    pre.extend_from_slice(&[0x02, 0x01, 3, 0]);
    pre.extend_from_slice(&[4; 32]);
    assert_eq!(d, psyche_sdk::hash::hashv(&[&pre]));
    assert_ne!(d, vote_digest(8, &[1; 32], &[2; 32], &[0x0102, 3], &[4; 32]));
    assert_ne!(d, vote_digest(7, &[1; 32], &[2; 32], &[0x0102, 4], &[4; 32]));
    assert_ne!(d, vote_digest(7, &[1; 32], &[2; 32], &[0x0102, 3], &[5; 32]));
}

// ------------------------------------------------------------ random walk

/// splitmix64.
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
        self.next() % n.max(1)
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Competitions driven by random miners, validators (some lying) and
/// funders, every decision through the interface as the program makes it;
/// after each step the accounting invariants hold, and the model every
/// eligible entry is evaluated on stays the one it had at the opening.
#[test]
fn random_walk_keeps_the_books_and_the_models() {
    let (mut all_expired, mut all_faults, mut all_claims) = (0, 0, 0);
    for seed in 0..60u64 {
        let mut rng = Rng(seed);
        let quorum = 1 + rng.below(3) as u8;
        let p = CompetitionParams { quorum, pages_per_round: 1 + rng.below(8) as u16, round_slots: 20 + rng.below(60), ..params() };
        let mut f = Fixture::new(Competition::new(&p, &keys()).unwrap());
        f.balance = rng.below(5_000);
        let mut now = 100u64;
        let mut liars = [false; 256];
        for l in liars.iter_mut() {
            *l = rng.one_in(4);
        }
        // (entry index -> commitment evaluated) of the last opened round.
        let mut evaluated: BTreeMap<u16, [u8; 32]> = BTreeMap::new();
        let (mut finals, mut expired, mut faults) = (0, 0, 0);
        for step in 0..1_500 {
            now += rng.below(4);
            let m = 1 + rng.below(12) as u8;
            let v = 100 + rng.below(8) as u8;
            match rng.below(20) {
                0..=3 => {
                    let _ = f.commit(m, now, (step % 250) as u8 + 1);
                }
                4 | 5 => {
                    let _ = f.join(v);
                }
                6 => {
                    let _ = f.leave(v);
                }
                7..=9 => match f.tick(now) {
                    Ok(Tick::Open) => {
                        let open = f.b().round.open_slot.get();
                        evaluated.clear();
                        for s in f.subs.values() {
                            match evaluated_model(s.current.slot, s.prev.slot, open) {
                                Some(Evaluated::Current) => evaluated.insert(s.index, s.current.commitment),
                                Some(Evaluated::Prev) => evaluated.insert(s.index, s.prev.commitment),
                                None => None,
                            };
                        }
                    }
                    Ok(Tick::Expire) => expired += 1,
                    _ => {}
                },
                10..=15 => {
                    let mut ballot = f.honest([0; 32]);
                    let liar = liars[usize::from(v)];
                    if liar {
                        match rng.below(3) {
                            0 => ballot.1[0] ^= 1,
                            1 if !ballot.2.is_empty() => ballot.2[0] = 0,
                            _ => ballot.0 += rng.below(2),
                        }
                    } else if rng.one_in(5) {
                        // Every honest validator finds the same model invalid.
                        let r = f.b().round;
                        if let Some(i) = (0..usize::from(r.entries.get())).find(|&i| bit(&r.eligible, i)) {
                            let mut inv = [0u8; 32];
                            inv[i / 8] |= 1 << (i % 8);
                            ballot = f.honest(inv);
                        }
                    }
                    if let Ok(t) = f.vote(v, &ballot, now) {
                        faults += t.faulted.count_ones();
                        if t.finalized.is_some() {
                            finals += 1;
                        }
                    }
                }
                16 => {
                    if f.claim(m).is_ok() {
                        all_claims += 1;
                    }
                }
                17 => f.balance += rng.below(3_000),
                18 => {
                    if let Ok(burned) = f.c.take_forfeited() {
                        f.balance -= burned;
                    }
                }
                _ => {
                    let amount = rng.below(2_000);
                    if f.c.check_withdraw(amount, f.balance).is_ok() {
                        f.balance -= amount;
                    }
                }
            }
            f.check();
            // The models the round evaluates never change under it.
            let open = f.b().round.open_slot.get();
            if f.b().round_state() != RoundState::None {
                for s in f.subs.values() {
                    if let Some(&want) = evaluated.get(&s.index) {
                        let got = match evaluated_model(s.current.slot, s.prev.slot, open) {
                            Some(Evaluated::Current) => s.current.commitment,
                            Some(Evaluated::Prev) => s.prev.commitment,
                            None => panic!("seed {seed} step {step}: entry {} lost its model", s.index),
                        };
                        assert_eq!(got, want, "seed {seed} step {step}: entry {} model changed", s.index);
                    }
                }
            }
            let b = f.b();
            // Faulted validators hold nothing; the forfeited stakes were theirs.
            for val in b.validators() {
                assert!(val.status != VALIDATOR_FAULTED || val.faults.get() == 1);
            }
            // A final round's entries: wins only where valid, weights sum to at most 1.
            if b.round_state() == RoundState::Final {
                let n = usize::from(b.round.entries.get());
                let ws: u64 = b.entries()[..n].iter().map(|e| u64::from(e.weight.get())).sum();
                assert!(ws <= u64::from(WEIGHT_ONE));
                for (i, e) in b.entries()[..n].iter().enumerate() {
                    assert!(e.wins.get() == 0 || bit(&b.round.eligible, i));
                }
            }
        }
        assert!(finals > 0, "seed {seed}: no round became final");
        all_expired += expired;
        all_faults += faults;
    }
    assert!(all_expired > 0 && all_faults > 0 && all_claims > 0, "expired {all_expired}, faults {all_faults}, claims {all_claims}");
}

// ----------------------------------------------------------- the IDL side

/// The program, its IDL and the Go bindings must agree; this side checks the
/// id and the errors against idl/psyche_competition.json.
#[test]
fn matches_idl() {
    let idl = psyche_idl::committed("psyche_competition");
    assert_eq!(base58::decode_32(idl["address"].as_str().unwrap()), Some(ID.to_bytes()));
    let errors = idl["errors"].as_array().unwrap();
    assert_eq!(errors.len(), ERRORS.len());
    for (e, o) in errors.iter().zip(ERRORS) {
        assert_eq!(e["code"].as_u64(), Some(o.code() as u64));
        assert_eq!(e["name"].as_str(), Some(o.name()));
        assert_eq!(e["msg"].as_str(), Some(o.message()));
    }
}

#[test]
fn errors_are_numbered_in_order() {
    for (i, e) in ERRORS.iter().enumerate() {
        assert_eq!(e.code(), 6000 + i as u32, "{}", e.name());
    }
    assert_eq!(ERRORS.last().map(|e| e.code()), Some(CompetitionError::MathOverflow.code()));
}

fn bit(bitmap: &[u8; 32], i: usize) -> bool {
    (bitmap[i / 8] >> (i % 8)) & 1 == 1
}

