//! The Competition world: competitions created with and without a reward
//! pool, permissioned or not, the board allocated as a client does; miners
//! committing models, validators joining (through the Authorizer when
//! permissioned), leaving and voting on each round: honest ones alike
//! (wins and invalid models drawn from the seed, as every honest validator
//! would compute them), liars with another table; ticks that open, seed and
//! expire rounds; claims, burns, updates, withdrawals, closes, and pool
//! top-ups (SPL transfers, support).

use psyche_competition as cp;
use psyche_competition_interface::{Board, Competition, RoundState, BOARD_SPACE, MAX_SUBMISSIONS};

use crate::builtins::{mint_data, token_account_data, ATA_PROGRAM, TOKEN_PROGRAM};
use crate::coord::Step;
use crate::gen::{Rng, W};
use crate::keys::{self, key};
use crate::runtime::{Account, Env, Instr, Key, Meta, SYSTEM_PROGRAM};
use crate::worlds::{ata, auth, fund};

const SOL: u64 = 1_000_000_000;
const DECIMALS: u8 = 6;
const SCOPE: &[u8] = b"CompetitionValidate";
/// Validators that always vote another table.
const LIARS: usize = 1;

struct Comp {
    key: Key,
    board: Key,
    /// None: a competition without a pool.
    pool: Option<Key>,
}

pub struct CompetitionWorld {
    payer: Key,
    authority: Key,
    authority_ata: Key,
    mint: Key,
    miners: Vec<Key>,
    miner_atas: Vec<Key>,
    validators: Vec<Key>,
    validator_atas: Vec<Key>,
    comps: Vec<Comp>,
    count: u64,
}

fn ix(metas: Vec<Meta>, data: Vec<u8>) -> Instr {
    Instr { program: keys::COMPETITION, metas, data }
}

/// The program id in an absent account's place.
fn none() -> Meta {
    Meta::ro(keys::COMPETITION)
}

impl CompetitionWorld {
    pub fn new(env: &mut Env) -> Self {
        let payer = key("c-payer", 0);
        let authority = key("c-authority", 0);
        let mint = key("c-mint", 0);
        let miners: Vec<Key> = (0..8).map(|i| key("miner", i)).collect();
        let validators: Vec<Key> = (0..6).map(|i| key("validator", i)).collect();
        for k in [payer, authority].iter().chain(&miners).chain(&validators) {
            fund(env, *k, 1000 * SOL);
        }
        let per_wallet = 1_000_000u64;
        let token = |env: &mut Env, owner: &Key| {
            let a = ata(owner, &mint);
            let lamports = env.sysvars.rent_minimum(165);
            env.accounts.insert(a, Account { lamports, data: token_account_data(&mint, owner, per_wallet), owner: TOKEN_PROGRAM, executable: false });
            a
        };
        let authority_ata = token(env, &authority);
        let miner_atas: Vec<Key> = miners.iter().map(|m| token(env, m)).collect();
        let validator_atas: Vec<Key> = validators.iter().map(|v| token(env, v)).collect();
        let supply = per_wallet * (1 + miners.len() + validators.len()) as u64;
        let lamports = env.sysvars.rent_minimum(82);
        env.accounts.insert(mint, Account { lamports, data: mint_data(Some(&key("c-mint-authority", 0)), supply, DECIMALS), owner: TOKEN_PROGRAM, executable: false });
        // The authority admits validators 0-3 to its permissioned competitions.
        for v in &validators[..4] {
            for step in [auth::create(env, payer, authority, *v, SCOPE), auth::grantor_update(authority, auth::address(env, &authority, v, SCOPE), true)] {
                let out = env.process(&step);
                assert!(out.is_ok(), "world setup failed: {out:?}");
            }
        }
        CompetitionWorld { payer, authority, authority_ata, mint, miners, miner_atas, validators, validator_atas, comps: vec![], count: 0 }
    }

    fn competition(env: &Env, c: &Comp) -> Option<Competition> {
        env.accounts.get(&c.key).and_then(|a| Competition::decode(&a.data).ok())
    }

    fn with_board<T>(env: &Env, c: &Comp, f: impl FnOnce(&Board) -> T) -> Option<T> {
        let a = env.accounts.get(&c.board)?;
        (a.owner == keys::COMPETITION).then_some(())?;
        Board::from_bytes(&a.data).filter(|b| b.discriminator == psyche_competition_interface::BOARD_ACCOUNT).map(f)
    }

    pub fn state_label(&self, env: &Env) -> &'static str {
        let Some(c) = self.comps.last() else { return "none" };
        if Self::competition(env, c).is_none_or(|k| k.closed) {
            return "closed";
        }
        match Self::with_board(env, c, |b| b.round_state()) {
            Some(RoundState::None) => "no-round",
            Some(RoundState::SeedPending) => "seed-pending",
            Some(RoundState::Evaluating) => "evaluating",
            Some(RoundState::Final) => "final",
            Some(RoundState::Expired) => "expired",
            None => "no-board",
        }
    }

    fn create(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        self.count += 1;
        let n = self.count;
        let id = format!("comp-{n}").into_bytes();
        let (key_, _) = env.find_pda(&[b"Competition", &id], &keys::COMPETITION).unwrap();
        let board = key("c-board", n);
        let pool = (!rng.one_in(4)).then(|| ata(&key_, &self.mint));
        let bad = rng.one_in(12);
        let data = W::new(cp::COMPETITION_CREATE)
            .string(&id)
            .u8(if bad && rng.one_in(3) { 2 } else { rng.below(2) as u8 })
            .u64(if bad && rng.one_in(3) { 0 } else { 1_000_000 })
            .bytes(&[3; 32])
            .u32(1024)
            .u8(rng.below(2) as u8)
            .bytes(&[4; 32])
            .string(b"hf://datasets/fuzz")
            .u32(10)
            .u32(5_000)
            .u32(1_000)
            .u64(rng.below(200))
            .u16(1 + rng.below(if bad { 300 } else { 4 }) as u16)
            .u32(1_000 + rng.below(1_000_000) as u32)
            .u64(10 + rng.below(60))
            .u64(if pool.is_some() { rng.below(1_000) } else { 0 })
            .u64(if pool.is_some() && !rng.one_in(4) { rng.below(100) } else { 0 })
            .bool(rng.one_in(3))
            .u8(if bad { rng.below(40) as u8 } else { 1 + rng.below(3) as u8 })
            .done();
        let metas = vec![
            Meta::ws(self.payer),
            Meta::s(self.authority),
            Meta::w(key_),
            Meta::w(board),
            pool.map_or(none(), |_| Meta::ro(self.mint)),
            pool.map_or(none(), Meta::w),
            pool.map_or(none(), |_| Meta::ro(TOKEN_PROGRAM)),
            Meta::ro(ATA_PROGRAM),
            Meta::ro(SYSTEM_PROGRAM),
        ];
        // The client allocates the board in the same transaction.
        let lamports = env.sysvars.rent_minimum(BOARD_SPACE);
        let setup = vec![(board, Account { lamports, data: vec![0; BOARD_SPACE], owner: keys::COMPETITION, executable: false })];
        self.comps.push(Comp { key: key_, board, pool });
        if self.comps.len() > 3 {
            self.comps.remove(0);
        }
        Step { ix: ix(metas, data), setup }
    }

    /// The pool, mint and token program metas (program ids without a pool or
    /// when `absent`).
    fn tokens(&self, c: &Comp, absent: bool, mint_writable: bool) -> [Meta; 3] {
        match c.pool {
            Some(pool) if !absent => [Meta::w(pool), Meta::new(self.mint, false, mint_writable), Meta::ro(TOKEN_PROGRAM)],
            _ => [none(), none(), none()],
        }
    }

    /// A vote on the board's round: honest validators all find the same
    /// wins and invalid models, drawn from the seed; `lie` picks a way to
    /// differ (another table, other wins, another round).
    fn ballot(env: &Env, c: &Comp, lie: Option<u64>) -> Vec<u8> {
        let (round, seed, n, eligible, pages) = Self::with_board(env, c, |b| {
            (b.round.number.get(), b.round.seed, usize::from(b.round.entries.get()), b.round.eligible, b.round.pages.get())
        })
        .unwrap_or((0, [0; 32], 0, [0; 32], 1));
        let bit = |m: &[u8; 32], i: usize| (m[i / 8] >> (i % 8)) & 1 == 1;
        let mut invalid = [0u8; 32];
        for i in 0..n.min(MAX_SUBMISSIONS) {
            if bit(&eligible, i) && seed[i % 32] % 5 == 0 {
                invalid[i / 8] |= 1 << (i % 8);
            }
        }
        let valid = |i: usize| bit(&eligible, i) && !bit(&invalid, i);
        let count = (0..n).filter(|&i| valid(i)).count() as u32;
        let max = u32::from(pages) * count.saturating_sub(1);
        let mut wins: Vec<u16> = (0..n).map(|i| if valid(i) { ((u32::from(seed[i % 32]) * (i as u32 + 1)) % (max + 1)) as u16 } else { 0 }).collect();
        let mut table = seed;
        let mut round = round;
        match lie {
            None => {}
            Some(0) => table[0] ^= 1,
            Some(1) if !wins.is_empty() => wins[0] ^= 1,
            Some(2) => round += 1,
            Some(_) => table[1] ^= 2,
        }
        let mut w = W::new(cp::ROUND_VOTE).u64(round).bytes(&table).u32(wins.len() as u32);
        for x in wins {
            w = w.u16(x);
        }
        w.bytes(&invalid).done()
    }

    pub fn step(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        if self.comps.is_empty() || rng.one_in(300) {
            return self.create(env, rng);
        }
        let ci = if rng.one_in(6) { rng.below(self.comps.len() as u64) as usize } else { self.comps.len() - 1 };
        let c = &self.comps[ci];
        let Some(state) = Self::competition(env, c) else {
            // Its creation failed: another one.
            return self.create(env, rng);
        };
        if state.closed && !rng.one_in(10) {
            return self.create(env, rng);
        }
        let round = Self::with_board(env, c, |b| b.round_state()).unwrap_or(RoundState::None);
        let mi = rng.below(self.miners.len() as u64) as usize;
        let vi = rng.below(self.validators.len() as u64) as usize;
        let (miner, validator) = (self.miners[mi], self.validators[vi]);
        let submission = env.find_pda(&[b"Submission", &c.key, &miner], &keys::COMPETITION).map(|p| p.0).unwrap_or([2; 32]);
        let choice = match round {
            RoundState::Evaluating if rng.below(10) < 6 => 3,
            _ => rng.below(24),
        };
        match choice {
            0..=2 => Step::new(ix(vec![Meta::ro(c.key), Meta::w(c.board)], cp::ROUND_TICK.to_vec())),
            3..=5 => {
                let pool = c.pool.map_or(none(), Meta::ro);
                let lie = (vi < LIARS || rng.one_in(25)).then(|| rng.below(4));
                Step::new(ix(vec![Meta::s(validator), Meta::w(c.key), Meta::w(c.board), pool], Self::ballot(env, c, lie)))
            }
            6..=9 => {
                let repo: Vec<u8> = match rng.below(30) {
                    0 => vec![],
                    1 => vec![b'r'; 193],
                    _ => format!("miner{mi}/model").into_bytes(),
                };
                let params = match rng.below(20) {
                    0 => 0,
                    1 => state.max_params + 1,
                    _ => 1 + rng.below(state.max_params),
                };
                let data = W::new(cp::SUBMISSION_COMMIT).bytes(&rng.bytes32()).bytes(&rng.bytes32()).u64(params).string(&repo).done();
                Step::new(ix(vec![Meta::ws(miner), Meta::ro(c.key), Meta::w(c.board), Meta::w(submission), Meta::ro(SYSTEM_PROGRAM)], data))
            }
            10 | 11 => {
                let authorization = if state.permissioned { auth::address(env, &self.authority, &validator, SCOPE) } else { keys::COMPETITION };
                let absent = state.validator_stake == 0;
                let [pool, mint, tp] = self.tokens(c, absent, false);
                let vtokens = if absent { none() } else { Meta::w(self.validator_atas[vi]) };
                Step::new(ix(
                    vec![Meta::ws(validator), Meta::w(c.key), Meta::w(c.board), Meta::ro(authorization), vtokens, pool, mint, tp],
                    cp::VALIDATOR_JOIN.to_vec(),
                ))
            }
            12 => {
                let staked = Self::with_board(env, c, |b| b.validator(&psyche_sdk::Address::new_from_array(validator)).map_or(0, |v| v.stake.get())).unwrap_or(0);
                let absent = staked == 0;
                let [pool, mint, tp] = self.tokens(c, absent, false);
                let vtokens = if absent { none() } else { Meta::w(self.validator_atas[vi]) };
                Step::new(ix(vec![Meta::s(validator), Meta::w(c.key), Meta::w(c.board), vtokens, pool, mint, tp], cp::VALIDATOR_LEAVE.to_vec()))
            }
            13 | 14 => {
                let [pool, mint, tp] = self.tokens(c, false, false);
                Step::new(ix(
                    vec![Meta::s(miner), Meta::w(c.key), Meta::w(c.board), Meta::ro(submission), pool, Meta::w(self.miner_atas[mi]), mint, tp],
                    cp::SUBMISSION_CLAIM.to_vec(),
                ))
            }
            15 => {
                let [pool, mint, tp] = self.tokens(c, false, true);
                Step::new(ix(vec![Meta::w(c.key), pool, mint, tp], cp::STAKE_BURN.to_vec()))
            }
            16 => {
                let amount = match rng.below(4) {
                    0 => u64::MAX,
                    1 => 0,
                    _ => rng.below(5_000),
                };
                let [pool, mint, tp] = self.tokens(c, false, false);
                Step::new(ix(
                    vec![Meta::s(self.authority), Meta::ro(c.key), pool, Meta::w(self.authority_ata), mint, tp],
                    W::new(cp::COMPETITION_WITHDRAW).u64(amount).done(),
                ))
            }
            17 => {
                let opt = |rng: &mut Rng| rng.one_in(3);
                let w = W::new(cp::COMPETITION_UPDATE)
                    .opt(opt(rng).then(|| rng.below(8_000) as u32), |w, v| w.u32(v))
                    .opt(opt(rng).then(|| rng.below(2_000) as u32), |w, v| w.u32(v))
                    .opt(opt(rng).then(|| rng.below(300)), |w, v| w.u64(v))
                    .opt(opt(rng).then(|| rng.below(6) as u16), |w, v| w.u16(v))
                    .opt(opt(rng).then(|| 500 + rng.below(2_000_000) as u32), |w, v| w.u32(v))
                    .opt(opt(rng).then(|| rng.below(80)), |w, v| w.u64(v))
                    .opt(opt(rng).then(|| rng.below(2_000)), |w, v| w.u64(v))
                    .opt(opt(rng).then(|| rng.below(120)), |w, v| w.u64(v))
                    .opt(opt(rng).then(|| rng.below(5) as u8), |w, v| w.u8(v))
                    .opt(rng.one_in(4).then(|| rng.one_in(3)), |w, v| w.bool(v));
                Step::new(ix(vec![Meta::s(self.authority), Meta::w(c.key)], w.done()))
            }
            18 if rng.one_in(4) => {
                let spill = if rng.one_in(10) { c.board } else { self.payer };
                Step::new(ix(vec![Meta::s(self.authority), Meta::w(spill), Meta::w(c.key), Meta::w(c.board)], cp::COMPETITION_CLOSE.to_vec()))
            }
            19 if c.pool.is_some() => {
                // Top-up: an SPL transfer into the pool (support).
                let from = if rng.one_in(2) { (self.authority_ata, self.authority) } else { (self.miner_atas[mi], miner) };
                Step::new(Instr {
                    program: TOKEN_PROGRAM,
                    metas: vec![Meta::w(from.0), Meta::ro(self.mint), Meta::w(c.pool.unwrap_or_default()), Meta::s(from.1)],
                    data: W(vec![12]).u64(1 + rng.below(5_000)).u8(DECIMALS).done(),
                })
            }
            _ => Step::new(ix(vec![Meta::ro(c.key), Meta::w(c.board)], cp::ROUND_TICK.to_vec())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::fuzz::load_env;
    use crate::runtime::Outcome;

    /// The largest round on the real program: 256 entries, 32 validators
    /// staking, 15 of them voting another table before 16 others reach the
    /// quorum of 16. Every step fits the default 200,000 CU of
    /// an instruction; prints the compute of each kind (programs/competition/README.md).
    #[test]
    fn the_largest_round_fits_the_compute_budget() {
        let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/deploy");
        let Ok(mut env) = load_env(&deploy) else {
            eprintln!("skipped: no programs in {} (scripts/build-programs.sh)", deploy.display());
            return;
        };
        let mut w = CompetitionWorld::new(&mut env);
        let mut max: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut run = |env: &mut Env, name: &'static str, step: Step| {
            for (k, a) in step.setup {
                env.accounts.insert(k, a);
            }
            env.sysvars.slot += 1;
            let out = env.process(&step.ix);
            assert_eq!(out, Outcome::Ok, "{name}");
            let cu = max.entry(name).or_default();
            *cu = (*cu).max(env.last_cu);
        };
        // A pooled competition with a stake and a quorum of 16.
        let mut rng = Rng(3);
        let mut create = w.create(&mut env, &mut rng);
        let c = w.comps.last().map(|c| (c.key, c.board, c.pool)).unwrap();
        let (comp, board, pool) = (c.0, c.1, c.2.expect("a pool"));
        let id = format!("comp-{}", w.count).into_bytes();
        create.ix.data = W::new(cp::COMPETITION_CREATE)
            .string(&id)
            .u8(0)
            .u64(1_000_000)
            .bytes(&[3; 32])
            .u32(1024)
            .u8(0)
            .bytes(&[4; 32])
            .string(b"hf://datasets/fuzz")
            .u32(10)
            .u32(5_000)
            .u32(1_000)
            .u64(100)
            .u16(psyche_competition_interface::MAX_PAGES_PER_ROUND)
            .u32(10_000)
            .u64(1_000)
            .u64(1_000)
            .u64(10)
            .bool(false)
            .u8(16)
            .done();
        run(&mut env, "competition_create", create);
        let top_up = Instr {
            program: TOKEN_PROGRAM,
            metas: vec![Meta::w(w.authority_ata), Meta::ro(w.mint), Meta::w(pool), Meta::s(w.authority)],
            data: W(vec![12]).u64(100_000).u8(DECIMALS).done(),
        };
        run(&mut env, "top-up", Step::new(top_up));
        // 32 validators, each with tokens to stake.
        for i in 0..32u64 {
            let v = key("cu-validator", i);
            fund(&mut env, v, 10 * SOL);
            let a = ata(&v, &w.mint);
            let lamports = env.sysvars.rent_minimum(165);
            env.accounts.insert(a, Account { lamports, data: token_account_data(&w.mint, &v, 100), owner: TOKEN_PROGRAM, executable: false });
            let metas = vec![Meta::ws(v), Meta::w(comp), Meta::w(board), none(), Meta::w(a), Meta::w(pool), Meta::ro(w.mint), Meta::ro(TOKEN_PROGRAM)];
            run(&mut env, "validator_join", Step::new(ix(metas, cp::VALIDATOR_JOIN.to_vec())));
        }
        // 256 miners.
        for i in 0..256u64 {
            let m = key("cu-miner", i);
            fund(&mut env, m, 10 * SOL);
            let (s, _) = env.find_pda(&[b"Submission", &comp, &m], &keys::COMPETITION).unwrap();
            let data = W::new(cp::SUBMISSION_COMMIT).bytes(&[i as u8; 32]).bytes(&[7; 32]).u64(1_000).string(&[b'r'; 192]).done();
            let metas = vec![Meta::ws(m), Meta::ro(comp), Meta::w(board), Meta::w(s), Meta::ro(SYSTEM_PROGRAM)];
            run(&mut env, "submission_commit", Step::new(ix(metas, data)));
        }
        let tick = || Step::new(ix(vec![Meta::ro(comp), Meta::w(board)], cp::ROUND_TICK.to_vec()));
        run(&mut env, "round_tick (open)", tick());
        env.sysvars.slot += 1;
        run(&mut env, "round_tick (seed)", tick());
        let c = Comp { key: comp, board, pool: Some(pool) };
        let validators: Vec<Key> = (0..32).map(|i| key("cu-validator", i)).collect();
        for (i, v) in validators.iter().enumerate() {
            let data = CompetitionWorld::ballot(&env, &c, (i < 15).then_some(0));
            let name = match i {
                30 => "round_vote (final, 15 faults)",
                31 => "round_vote (late)",
                _ => "round_vote",
            };
            run(&mut env, name, Step::new(ix(vec![Meta::s(*v), Meta::w(comp), Meta::w(board), Meta::ro(pool)], data)));
        }
        let b = CompetitionWorld::with_board(&env, &c, |b| (b.round_state(), b.validators().iter().filter(|v| v.status == 2).count())).unwrap();
        assert_eq!(b, (RoundState::Final, 15));
        let m = key("cu-miner", 0);
        let (s, _) = env.find_pda(&[b"Submission", &comp, &m], &keys::COMPETITION).unwrap();
        let ma = ata(&m, &w.mint);
        let lamports = env.sysvars.rent_minimum(165);
        env.accounts.insert(ma, Account { lamports, data: token_account_data(&w.mint, &m, 0), owner: TOKEN_PROGRAM, executable: false });
        let earned = CompetitionWorld::with_board(&env, &c, |b| b.submissions[0].earned.get()).unwrap();
        if earned > 0 {
            let metas = vec![Meta::s(m), Meta::w(comp), Meta::w(board), Meta::ro(s), Meta::w(pool), Meta::w(ma), Meta::ro(w.mint), Meta::ro(TOKEN_PROGRAM)];
            run(&mut env, "submission_claim", Step::new(ix(metas, cp::SUBMISSION_CLAIM.to_vec())));
        }
        run(&mut env, "stake_burn", Step::new(ix(vec![Meta::w(comp), Meta::w(pool), Meta::w(w.mint), Meta::ro(TOKEN_PROGRAM)], cp::STAKE_BURN.to_vec())));
        let leave = vec![Meta::s(validators[20]), Meta::w(comp), Meta::w(board), Meta::w(ata(&validators[20], &w.mint)), Meta::w(pool), Meta::ro(w.mint), Meta::ro(TOKEN_PROGRAM)];
        run(&mut env, "validator_leave", Step::new(ix(leave, cp::VALIDATOR_LEAVE.to_vec())));
        // The next round opens a round length (1,000 slots) after this one.
        env.sysvars.slot += 1_000;
        run(&mut env, "round_tick (open)", tick());
        for (name, cu) in &max {
            println!("{name}: {cu} CU");
            assert!(*cu <= 200_000, "{name}: {cu} CU");
        }
    }
}
