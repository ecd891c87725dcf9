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

    /// The vote of validator `vi` on the board's round: honest validators
    /// all find the same wins and invalid models, drawn from the seed.
    fn ballot(&self, env: &Env, c: &Comp, vi: usize, rng: &mut Rng) -> Vec<u8> {
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
        if vi < LIARS || rng.one_in(25) {
            match rng.below(3) {
                0 => table[0] ^= 1,
                1 if !wins.is_empty() => wins[0] = wins[0].saturating_sub(1),
                _ => table[1] ^= 2,
            }
        }
        let mut w = W::new(cp::ROUND_VOTE).u64(if rng.one_in(30) { round + 1 } else { round }).bytes(&table).u32(wins.len() as u32);
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
                Step::new(ix(vec![Meta::s(validator), Meta::w(c.key), Meta::w(c.board), pool], self.ballot(env, c, vi, rng)))
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
