//! One world per program under test: the bank it starts from and the
//! well-formed instructions that move it forward. Instructions of the program
//! under test count towards its executions; the others a world sends to make
//! progress (a System transfer, Coordinator ticks and witnesses in a
//! Treasurer run, SPL top-ups of a competition's pool) are "support",
//! checked by the same invariants. The Competition's world is in
//! competition.rs.

use psyche_authorizer as ap;
use psyche_coordinator as cp;
use psyche_coordinator_logic::state::RunState;
use psyche_coordinator_logic::state::ACCOUNT_SIZE;
use psyche_treasurer as tp;

use crate::builtins::{self, mint_data, token_account_data, ATA_PROGRAM, TOKEN_PROGRAM};
use crate::coord::{self, view, CoordRun, Step};
use crate::gen::{Rng, W};
use crate::keys::{self, key};
use crate::runtime::{Account, Env, Instr, Key, Meta, SYSTEM_PROGRAM};

pub const SCOPE: &[u8] = b"CoordinatorJoinRun";
const SOL: u64 = 1_000_000_000;

/// Which program a world fuzzes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    Coordinator,
    Authorizer,
    Treasurer,
    Competition,
}

impl Program {
    pub fn id(self) -> Key {
        match self {
            Program::Coordinator => keys::COORDINATOR,
            Program::Authorizer => keys::AUTHORIZER,
            Program::Treasurer => keys::TREASURER,
            Program::Competition => keys::COMPETITION,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Program::Coordinator => "coordinator",
            Program::Authorizer => "authorizer",
            Program::Treasurer => "treasurer",
            Program::Competition => "competition",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Program::all().into_iter().find(|p| p.name() == s)
    }
    pub fn all() -> [Program; 4] {
        [Program::Coordinator, Program::Authorizer, Program::Treasurer, Program::Competition]
    }
}

pub(crate) fn fund(env: &mut Env, k: Key, lamports: u64) {
    env.accounts.insert(k, Account { lamports, data: vec![], owner: SYSTEM_PROGRAM, executable: false });
}

/// Advances the clock like the walk (0-3 s per instruction, one slot or a
/// few), now and then by a large jump; SlotHashes is rarely empty.
pub fn tick_clock(env: &mut Env, rng: &mut Rng) {
    let sv = &mut env.sysvars;
    sv.unix_timestamp = sv.unix_timestamp.saturating_add(match rng.below(1000) {
        0 => 3600 + rng.below(86_400) as i64,
        1 => i64::MAX / 2,
        n => (n % 4) as i64,
    });
    sv.slot = sv.slot.saturating_add(1 + rng.below(3));
    sv.slot_hash = rng.bytes32();
    sv.slot_hashes_len = if rng.one_in(500) { 0 } else { 512 };
}

pub fn system_transfer(from: Key, to: Key, lamports: u64) -> Instr {
    Instr { program: SYSTEM_PROGRAM, metas: vec![Meta::ws(from), Meta::w(to)], data: W(vec![2, 0, 0, 0]).u64(lamports).done() }
}

/// Authorizer instructions.
pub mod auth {
    use super::*;

    pub fn create(env: &mut Env, payer: Key, grantor: Key, grantee: Key, scope: &[u8]) -> Instr {
        let pda = env.find_pda(&[b"Authorization", &grantor, &grantee, scope], &keys::AUTHORIZER).map(|p| p.0).unwrap_or([1; 32]);
        Instr {
            program: keys::AUTHORIZER,
            metas: vec![Meta::ws(payer), Meta::s(grantor), Meta::w(pda), Meta::ro(SYSTEM_PROGRAM)],
            data: W::new(ap::AUTHORIZATION_CREATE).bytes(&grantee).string(scope).done(),
        }
    }
    pub fn address(env: &mut Env, grantor: &Key, grantee: &Key, scope: &[u8]) -> Key {
        env.find_pda(&[b"Authorization", grantor, grantee, scope], &keys::AUTHORIZER).map(|p| p.0).unwrap_or([1; 32])
    }
    pub fn grantor_update(grantor: Key, authorization: Key, active: bool) -> Instr {
        Instr {
            program: keys::AUTHORIZER,
            metas: vec![Meta::s(grantor), Meta::w(authorization)],
            data: W::new(ap::AUTHORIZATION_GRANTOR_UPDATE).bool(active).done(),
        }
    }
    pub fn grantee_update(payer: Key, grantee: Key, authorization: Key, clear: bool, added: &[Key]) -> Instr {
        let mut w = W::new(ap::AUTHORIZATION_GRANTEE_UPDATE).bool(clear).u32(added.len() as u32);
        for k in added {
            w = w.bytes(k);
        }
        Instr { program: keys::AUTHORIZER, metas: vec![Meta::ws(payer), Meta::s(grantee), Meta::w(authorization), Meta::ro(SYSTEM_PROGRAM)], data: w.done() }
    }
    pub fn close(grantor: Key, spill: Key, authorization: Key) -> Instr {
        Instr { program: keys::AUTHORIZER, metas: vec![Meta::s(grantor), Meta::w(spill), Meta::w(authorization)], data: ap::AUTHORIZATION_CLOSE.to_vec() }
    }
}

// ---------------------------------------------------------------- Authorizer

pub struct AuthorizerWorld {
    payers: Vec<Key>,
    grantors: Vec<Key>,
    grantees: Vec<Key>,
    scopes: Vec<Vec<u8>>,
}

impl AuthorizerWorld {
    pub fn new(env: &mut Env) -> Self {
        let payers: Vec<Key> = (0..2).map(|i| key("payer", i)).collect();
        let grantors: Vec<Key> = (0..3).map(|i| key("grantor", i)).collect();
        let mut grantees: Vec<Key> = (0..3).map(|i| key("grantee", i)).collect();
        grantees.push([0; 32]);
        for k in payers.iter().chain(&grantors).chain(&grantees[..3]) {
            fund(env, *k, 1000 * SOL);
        }
        let scopes = vec![SCOPE.to_vec(), b"x".to_vec(), vec![], vec![b's'; 32], vec![b's'; 33]];
        AuthorizerWorld { payers, grantors, grantees, scopes }
    }

    fn existing(&self, env: &Env) -> Vec<Key> {
        env.accounts
            .iter()
            .filter(|(_, a)| a.owner == keys::AUTHORIZER && psyche_authorizer_interface::Authorization::decode(&a.data).is_ok())
            .map(|(k, _)| *k)
            .collect()
    }

    pub fn step(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        let existing = self.existing(env);
        let payer = *rng.pick(&self.payers);
        let grantor = *rng.pick(&self.grantors);
        let grantee = *rng.pick(&self.grantees);
        let decoded = |env: &Env, k: &Key| -> Option<(Key, Key)> {
            let a = env.accounts.get(k)?;
            let d = psyche_authorizer_interface::Authorization::decode(&a.data).ok()?;
            Some((d.grantor.to_bytes(), d.grantee.to_bytes()))
        };
        let pick_auth = |rng: &mut Rng| -> Option<Key> { (!existing.is_empty()).then(|| *rng.pick(&existing)) };
        match rng.below(12) {
            0..=3 => {
                let scope = if rng.one_in(4) { rng.pick(&self.scopes).clone() } else { SCOPE.to_vec() };
                let mut ix = auth::create(env, payer, grantor, grantee, &scope);
                if rng.one_in(10) {
                    // Pre-funded PDA: anyone may send lamports first.
                    let pda = ix.metas[2].key;
                    return Step::new(system_transfer(payer, pda, if rng.one_in(3) { 1 + rng.below(900_000) } else { 890_880 + rng.below(2_000_000) }));
                }
                if rng.one_in(15) {
                    ix.metas[2].key = auth::address(env, &grantor, &grantee, b"other");
                }
                Step::new(ix)
            }
            4..=6 => {
                let Some(a) = pick_auth(rng) else { return Step::new(auth::create(env, payer, grantor, grantee, SCOPE)) };
                let g = match decoded(env, &a) {
                    Some((g, _)) if !rng.one_in(6) => g,
                    _ => grantor,
                };
                Step::new(auth::grantor_update(g, a, !rng.one_in(3)))
            }
            7..=9 => {
                let Some(a) = pick_auth(rng) else { return Step::new(auth::create(env, payer, grantor, grantee, SCOPE)) };
                let ge = match decoded(env, &a) {
                    Some((_, ge)) if !rng.one_in(6) && ge != [0; 32] => ge,
                    _ => grantee,
                };
                let n = match rng.below(10) {
                    0 => 33,
                    1 => 32,
                    n => n as usize % 4,
                };
                let added: Vec<Key> = (0..n).map(|i| key("delegate", rng.below(40) + i as u64 % 2)).collect();
                Step::new(auth::grantee_update(payer, ge, a, rng.one_in(3), &added))
            }
            _ => {
                let Some(a) = pick_auth(rng) else { return Step::new(auth::create(env, payer, grantor, grantee, SCOPE)) };
                let g = match decoded(env, &a) {
                    Some((g, _)) if !rng.one_in(6) => g,
                    _ => grantor,
                };
                let spill = if rng.one_in(8) { a } else { payer };
                Step::new(auth::close(g, spill, a))
            }
        }
    }
}

// --------------------------------------------------------------- Coordinator

/// Users, their p2p keys and authorizations, shared by the Coordinator and
/// Treasurer worlds.
pub struct Cast {
    pub payer: Key,
    pub authority: Key,
    pub join_authority: Key,
    pub users: Vec<Key>,
    pub p2p: Vec<Key>,
    /// join_authority's grant to everyone.
    pub everyone: Key,
}

impl Cast {
    /// Funds everyone and creates join_authority's authorizations through the
    /// Authorizer program: everyone (active), user 0 alone, user 1 with user 2
    /// as delegate.
    pub fn new(env: &mut Env) -> Self {
        let payer = key("payer", 0);
        let authority = key("authority", 0);
        let join_authority = key("join-authority", 0);
        let users: Vec<Key> = (0..10).map(|i| key("user", i)).collect();
        let p2p: Vec<Key> = (0..10).map(|i| key("p2p", i)).collect();
        for k in [payer, authority, join_authority].iter().chain(&users) {
            fund(env, *k, 100_000 * SOL);
        }
        let mut setup = vec![];
        for grantee in [[0u8; 32], users[0], users[1]] {
            setup.push(auth::create(env, payer, join_authority, grantee, SCOPE));
            let a = auth::address(env, &join_authority, &grantee, SCOPE);
            setup.push(auth::grantor_update(join_authority, a, true));
        }
        let a1 = auth::address(env, &join_authority, &users[1], SCOPE);
        setup.push(auth::grantee_update(payer, users[1], a1, false, &[users[2]]));
        for ix in setup {
            let out = env.process(&ix);
            assert!(out.is_ok(), "world setup failed: {out:?}");
        }
        let everyone = auth::address(env, &join_authority, &[0; 32], SCOPE);
        Cast { payer, authority, join_authority, users, p2p, everyone }
    }

    pub fn auths(&self, env: &mut Env) -> Vec<Key> {
        let mut v: Vec<Key> = vec![self.everyone; self.users.len()];
        v[0] = auth::address(env, &self.join_authority, &self.users[0], SCOPE);
        v[2] = auth::address(env, &self.join_authority, &self.users[1], SCOPE);
        v
    }
}

pub struct CoordinatorWorld {
    cast: Cast,
    run: Option<CoordRun>,
    runs: u64,
}

impl CoordinatorWorld {
    pub fn new(env: &mut Env) -> Self {
        let cast = Cast::new(env);
        CoordinatorWorld { cast, run: None, runs: 0 }
    }

    pub fn state_label(&self, env: &Env) -> &'static str {
        self.run.as_ref().map_or("none", |r| coord::state_label(env, &r.account))
    }

    pub fn step(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        let Some(run) = &self.run else {
            self.runs += 1;
            let run_id = format!("fuzz-{}", self.runs).into_bytes();
            let (instance, _) = env.find_pda(&[b"coordinator", &run_id], &keys::COORDINATOR).unwrap();
            let config = coord::valid_config(rng);
            let model = coord::valid_model(config.overlap == 1 || rng.one_in(4));
            let r = CoordRun {
                run_id,
                instance,
                account: key("coordinator-account", self.runs),
                authority: self.cast.authority,
                join_authority: self.cast.join_authority,
                config,
                model,
                users: self.cast.users.clone(),
                p2p: self.cast.p2p.clone(),
                auths: self.cast.auths(env),
            };
            let step = r.init_step(env, self.cast.payer, b"v1");
            self.run = Some(r);
            return step;
        };
        let state = view(env, &run.account, |s| s.run_state().ok()).flatten();
        let Some(state) = state else {
            // Not initialized (init failed) or freed: start over.
            let r = run.clone();
            if !env.accounts.contains_key(&r.instance) && env.accounts.get(&r.account).is_some_and(|a| a.data[..8] == [0; 8]) {
                return r.init_step(env, self.cast.payer, b"v1");
            }
            self.run = None;
            return self.step(env, rng);
        };
        let authority = |rng: &mut Rng| -> Step {
            let d = run.authority_data(env, rng);
            Step::new(run.authority_ix(d))
        };
        match state {
            RunState::Uninitialized | RunState::Paused if rng.one_in(3) => {
                // Configure, then resume: the path to a running run.
                let d = if rng.one_in(2) {
                    W::new(cp::UPDATE)
                        .u8(1)
                        .pod(&coord::metadata(rng))
                        .u8(1)
                        .pod(&run.config)
                        .u8(1)
                        .pod(&run.model)
                        .u8(0)
                        .done()
                } else {
                    W::new(cp::SET_PAUSED).bool(false).done()
                };
                Step::new(run.authority_ix(d))
            }
            RunState::Finished | RunState::Paused | RunState::Uninitialized if rng.one_in(30) => {
                let spill = if rng.one_in(10) { run.instance } else { self.cast.payer };
                Step::new(run.free_ix(spill))
            }
            _ if rng.one_in(6) => authority(rng),
            _ => run.client_step(env, rng),
        }
    }

    pub fn after(&mut self, env: &Env) {
        if let Some(r) = &self.run {
            if !env.accounts.contains_key(&r.account) {
                self.run = None;
            }
        }
    }
}

// ----------------------------------------------------------------- Treasurer

struct TRun {
    index: u64,
    run: Key,
    collateral: Key,
    deposit: bool,
    coord: CoordRun,
    authority: Key,
}

pub struct TreasurerWorld {
    cast: Cast,
    mint: Key,
    mint_authority: Key,
    atas: Vec<Key>,
    truns: Vec<TRun>,
    count: u64,
}

const DECIMALS: u8 = 6;

pub fn ata(wallet: &Key, mint: &Key) -> Key {
    crate::pda::find_program_address(&[wallet, &TOKEN_PROGRAM, mint], &ATA_PROGRAM).unwrap().0
}

impl TreasurerWorld {
    pub fn new(env: &mut Env) -> Self {
        let cast = Cast::new(env);
        let mint = key("mint", 0);
        let mint_authority = key("mint-authority", 0);
        fund(env, mint_authority, 1000 * SOL);
        let per_user = 1_000_000_000u64;
        let mut atas = vec![];
        for u in cast.users.iter().chain([&cast.authority, &cast.payer]) {
            let a = ata(u, &mint);
            let lamports = env.sysvars.rent_minimum(165);
            env.accounts.insert(a, Account { lamports, data: token_account_data(&mint, u, per_user), owner: TOKEN_PROGRAM, executable: false });
            atas.push(a);
        }
        let supply = per_user * atas.len() as u64;
        let lamports = env.sysvars.rent_minimum(82);
        env.accounts.insert(mint, Account { lamports, data: mint_data(Some(&mint_authority), supply, DECIMALS), owner: TOKEN_PROGRAM, executable: false });
        TreasurerWorld { cast, mint, mint_authority, atas, truns: vec![], count: 0 }
    }

    pub fn state_label(&self, env: &Env) -> &'static str {
        self.truns.last().map_or("none", |t| coord::state_label(env, &t.coord.account))
    }

    fn participant(&self, env: &mut Env, run: &Key, user: &Key) -> Key {
        env.find_pda(&[b"Participant", run, user], &keys::TREASURER).map(|p| p.0).unwrap_or([2; 32])
    }

    fn create_run(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        self.count += 1;
        let index = self.count;
        let (run, _) = env.find_pda(&[b"Run", &index.to_le_bytes()], &keys::TREASURER).unwrap();
        let collateral = ata(&run, &self.mint);
        let run_id = format!("trun-{index}").into_bytes();
        let (instance, _) = env.find_pda(&[b"coordinator", &run_id], &keys::COORDINATOR).unwrap();
        let deposit = rng.one_in(2);
        let join_authority = if deposit { run } else { self.cast.join_authority };
        let config = coord::valid_config(rng);
        let model = coord::valid_model(config.overlap == 1);
        let mut auths = self.cast.auths(env);
        if deposit {
            for (i, u) in self.cast.users.clone().iter().enumerate() {
                let p = self.participant(env, &run, u);
                auths[i] = auth::address(env, &run, &p, SCOPE);
            }
        }
        let coord = CoordRun {
            run_id: run_id.clone(),
            instance,
            account: key("t-coordinator-account", index),
            authority: run,
            join_authority,
            config,
            model,
            users: self.cast.users.clone(),
            p2p: self.cast.p2p.clone(),
            auths,
        };
        let lamports = env.sysvars.rent_minimum(ACCOUNT_SIZE);
        let join_deposit = if deposit { 1000 + rng.below(3) } else if rng.one_in(10) { 5 } else { 0 };
        let data = W::new(tp::RUN_CREATE)
            .u64(index)
            .string(&run_id)
            .string(b"v1")
            .bytes(&self.cast.authority)
            .bytes(&join_authority)
            .u64(join_deposit)
            .done();
        let ix = Instr {
            program: keys::TREASURER,
            metas: vec![
                Meta::ws(self.cast.payer),
                Meta::w(run),
                Meta::w(collateral),
                Meta::ro(self.mint),
                Meta::w(instance),
                Meta::w(coord.account),
                Meta::ro(keys::COORDINATOR),
                Meta::ro(TOKEN_PROGRAM),
                Meta::ro(ATA_PROGRAM),
                Meta::ro(SYSTEM_PROGRAM),
            ],
            data,
        };
        let setup = vec![(coord.account, Account { lamports, data: vec![0; ACCOUNT_SIZE], owner: keys::COORDINATOR, executable: false })];
        self.truns.push(TRun { index, run, collateral, deposit, coord, authority: self.cast.authority });
        if self.truns.len() > 3 {
            self.truns.remove(0);
        }
        Step { ix, setup }
    }

    fn run_update(&self, t: &TRun, env: &Env, rng: &mut Rng) -> Instr {
        let halted = view(env, &t.coord.account, |s| matches!(s.run_state(), Ok(RunState::Uninitialized | RunState::Paused | RunState::Finished)))
            .unwrap_or(true);
        let full = halted || rng.one_in(5);
        let resume = rng.one_in(2);
        let mut w = W::new(tp::RUN_UPDATE)
            .opt(rng.one_in(3).then(|| coord::metadata(rng)), |w, m| w.pod(&m))
            .opt(full.then(|| if rng.one_in(5) { coord::edgy_config(rng, t.coord.config) } else { t.coord.config }), |w, c| w.pod(&c))
            .opt(full.then_some(t.coord.model), |w, m| w.pod(&m))
            .opt(None::<u8>, |w, _| w);
        w = w
            .opt((!rng.one_in(3)).then(|| if rng.one_in(8) { u64::MAX } else { 100 + rng.below(5000) }), |w, v| w.u64(v))
            .opt(rng.one_in(2).then(|| rng.below(500)), |w, v| w.u64(v))
            .opt(
                match rng.below(4) {
                    0 => Some(true),
                    1 | 2 if resume => Some(false),
                    _ => None,
                },
                |w, v| w.bool(v),
            )
            .opt(rng.one_in(8).then_some(()), |w, _| w.string(b"v2"))
            .opt(rng.one_in(8).then_some(if t.deposit { 1000 } else { rng.below(3) }), |w, v| w.u64(v));
        Instr {
            program: keys::TREASURER,
            metas: vec![Meta::s(t.authority), Meta::w(t.run), Meta::ro(t.coord.instance), Meta::w(t.coord.account), Meta::ro(keys::COORDINATOR), Meta::ro(self.mint)],
            data: w.done(),
        }
    }

    pub fn step(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        if self.truns.is_empty() || rng.one_in(400) {
            return self.create_run(env, rng);
        }
        let ti = if rng.one_in(5) { rng.below(self.truns.len() as u64) as usize } else { self.truns.len() - 1 };
        let t = &self.truns[ti];
        let ui = rng.below(self.cast.users.len() as u64) as usize;
        let user = self.cast.users[ui];
        let user_ata = self.atas[ui];
        let participant = self.participant(env, &t.run, &user);
        let authorization = auth::address(env, &t.run, &participant, SCOPE);
        let tp_ = |metas: Vec<Meta>, data: Vec<u8>| Step::new(Instr { program: keys::TREASURER, metas, data });
        let live = env.accounts.get(&t.run).and_then(|a| psyche_treasurer_interface::Run::decode(&a.data).ok()).is_some_and(|r| !r.closed);
        if !live && !rng.one_in(20) {
            return self.create_run(env, rng);
        }
        if rng.below(10) < 6 {
            // Training on the run's Coordinator (support): client
            // instructions only; its authority is the Run PDA.
            return t.coord.client_step(env, rng);
        }
        match rng.below(24) {
            12 if !rng.one_in(4) => t.coord.client_step(env, rng),
            0..=2 => Step::new(self.run_update(t, env, rng)),
            3..=4 => tp_(
                vec![Meta::ws(self.cast.payer), Meta::s(user), Meta::ro(t.run), Meta::w(participant), Meta::ro(SYSTEM_PROGRAM)],
                tp::PARTICIPANT_CREATE.to_vec(),
            ),
            5..=6 => {
                let amount = if rng.one_in(6) { rng.below(3000) } else { 1000 };
                tp_(
                    vec![
                        Meta::ws(user),
                        Meta::w(t.run),
                        Meta::w(participant),
                        Meta::w(user_ata),
                        Meta::w(t.collateral),
                        Meta::ro(self.mint),
                        Meta::ro(t.coord.account),
                        Meta::w(authorization),
                        Meta::ro(keys::AUTHORIZER),
                        Meta::ro(TOKEN_PROGRAM),
                        Meta::ro(SYSTEM_PROGRAM),
                    ],
                    W::new(tp::PARTICIPANT_DEPOSIT).u64(amount).done(),
                )
            }
            7..=8 => tp_(
                vec![
                    Meta::s(user),
                    Meta::w(t.run),
                    Meta::w(participant),
                    Meta::w(t.collateral),
                    Meta::w(user_ata),
                    Meta::ro(self.mint),
                    Meta::ro(t.coord.instance),
                    Meta::w(t.coord.account),
                    Meta::ro(keys::COORDINATOR),
                    Meta::ro(TOKEN_PROGRAM),
                ],
                tp::PARTICIPANT_CLAIM.to_vec(),
            ),
            9 => {
                let signer = if rng.one_in(3) { t.authority } else { user };
                tp_(
                    vec![
                        Meta::s(signer),
                        Meta::w(user),
                        Meta::w(t.run),
                        Meta::w(participant),
                        Meta::w(t.collateral),
                        Meta::w(user_ata),
                        Meta::ro(self.mint),
                        Meta::ro(t.coord.account),
                        Meta::w(authorization),
                        Meta::ro(keys::AUTHORIZER),
                        Meta::ro(TOKEN_PROGRAM),
                    ],
                    tp::PARTICIPANT_WITHDRAW_DEPOSIT.to_vec(),
                )
            }
            10 => tp_(
                vec![
                    Meta::w(user),
                    Meta::w(t.run),
                    Meta::w(participant),
                    Meta::w(t.collateral),
                    Meta::w(self.mint),
                    Meta::ro(t.coord.instance),
                    Meta::w(t.coord.account),
                    Meta::ro(keys::COORDINATOR),
                    Meta::w(authorization),
                    Meta::ro(keys::AUTHORIZER),
                    Meta::ro(TOKEN_PROGRAM),
                ],
                tp::BURN_FORFEITED.to_vec(),
            ),
            11 => {
                let amount = match rng.below(4) {
                    0 => u64::MAX,
                    1 => 0,
                    _ => rng.below(100_000),
                };
                let dest = *rng.pick(&self.atas);
                tp_(
                    vec![
                        Meta::s(t.authority),
                        Meta::ro(t.run),
                        Meta::w(t.collateral),
                        Meta::w(dest),
                        Meta::ro(self.mint),
                        Meta::ro(t.coord.account),
                        Meta::ro(TOKEN_PROGRAM),
                    ],
                    W::new(tp::RUN_WITHDRAW).u64(amount).done(),
                )
            }
            12 => tp_(
                vec![Meta::s(t.authority), Meta::w(self.cast.payer), Meta::w(t.run), Meta::w(t.coord.instance), Meta::w(t.coord.account), Meta::ro(keys::COORDINATOR)],
                tp::RUN_CLOSE.to_vec(),
            ),
            13 => {
                // Top-up: an SPL transfer into the run's token account (support).
                let amount = 1 + rng.below(50_000);
                Step::new(Instr {
                    program: TOKEN_PROGRAM,
                    metas: vec![Meta::w(user_ata), Meta::ro(self.mint), Meta::w(t.collateral), Meta::s(user)],
                    data: W(vec![12]).u64(amount).u8(DECIMALS).done(),
                })
            }
            _ => {
                // Training on the run's Coordinator (support): client
                // instructions only; its authority is the Run PDA.
                let _ = (&self.mint_authority, builtins::MINT_LEN, t.index);
                t.coord.client_step(env, rng)
            }
        }
    }
}
