//! Well-formed Coordinator instructions for one run, chosen like the logic's
//! random walk (machine_tests.rs) but as real transactions: discriminator +
//! Borsh arguments, the accounts each instruction expects with the right
//! signer, roles (elected witnesses, drawn verifiers, committees) computed
//! from the account with the logic crate's selection functions, and the
//! Instructions sysvar holding the Ed25519 join proof. Mostly-right choices:
//! some signers, indexes, steps and arguments are deliberately wrong, as in
//! the walk.

use psyche_coordinator as cp;
use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::fixtures;
use psyche_coordinator_logic::state::RunState;
use psyche_coordinator_logic::selection;
use psyche_coordinator_logic::state::*;

use crate::gen::{text, Rng, W};
use crate::invariants::with_state;
use crate::keys;
use crate::runtime::{Account, Env, Instr, Key, Meta};

/// One instruction, with the accounts the harness sets first (the
/// Instructions sysvar: per transaction on chain).
pub struct Step {
    pub ix: Instr,
    pub setup: Vec<(Key, Account)>,
}

impl Step {
    pub fn new(ix: Instr) -> Self {
        Step { ix, setup: vec![] }
    }
}

#[derive(Clone)]
pub struct CoordRun {
    pub run_id: Vec<u8>,
    pub instance: Key,
    pub account: Key,
    pub authority: Key,
    pub join_authority: Key,
    pub config: CoordinatorConfig,
    pub model: Model,
    /// Client wallets and their p2p identities.
    pub users: Vec<Key>,
    pub p2p: Vec<Key>,
    /// The authorization account each user joins under.
    pub auths: Vec<Key>,
}

pub fn view<T>(env: &Env, account: &Key, f: impl FnOnce(&CoordinatorState) -> T) -> Option<T> {
    let a = env.accounts.get(account)?;
    if a.data.len() != ACCOUNT_SIZE || a.owner != keys::COORDINATOR {
        return None;
    }
    Some(with_state(&a.data, f))
}

/// The random walk's base configuration (its `all_witness`).
pub fn base_config() -> CoordinatorConfig {
    CoordinatorConfig { witness_nodes: 0, min_clients: 2, init_min_clients: 3, total_steps: 60, epoch_time: 200, ..fixtures::valid_config() }
}

pub fn valid_config(rng: &mut Rng) -> CoordinatorConfig {
    let base = base_config();
    // The random walk's five configurations, and a ramping batch.
    match rng.below(6) {
        0 => base,
        1 => CoordinatorConfig { witness_nodes: 2, ..base },
        2 => CoordinatorConfig { verification_percent: 50, round_witness_time: 30, ..base },
        3 => CoordinatorConfig { verification_percent: 100, round_witness_time: 30, vesting_epochs: 2, forgive_per_epoch: 0, ..base },
        4 => CoordinatorConfig { overlap: 1, ..base },
        _ => CoordinatorConfig { global_batch_size_start: 4, global_batch_size_end: 16, global_batch_size_warmup_tokens: 4096, total_steps: 30, ..base },
    }
}

/// The logic tests' models as the random walk uses them: cold start
/// warmup of 2 steps (10 would not fit the rounds of a 200 s epoch), and 3
/// inner steps for SparseLoCo.
pub fn valid_model(sparseloco: bool) -> Model {
    if sparseloco {
        Model { cold_start_warmup_steps: 2, inner_steps: 3, ..fixtures::valid_sparseloco() }
    } else {
        Model { cold_start_warmup_steps: 2, ..fixtures::valid_model() }
    }
}

pub fn metadata(rng: &mut Rng) -> RunMetadata {
    RunMetadata { name: text("fuzz run"), description: text("a run driven by psyche-fuzz"), num_parameters: rng.below(1 << 40), vocab_size: 256 }
}

/// A config with one field pushed to an edge (mostly invalid).
pub fn edgy_config(rng: &mut Rng, c: CoordinatorConfig) -> CoordinatorConfig {
    let mut c = c;
    let v = rng.interesting_u64();
    match rng.below(18) {
        0 => c.warmup_time = v,
        1 => c.cooldown_time = v,
        2 => c.max_round_train_time = v,
        3 => c.round_witness_time = v,
        4 => c.epoch_time = v,
        5 => c.global_batch_size_warmup_tokens = v,
        6 => c.total_steps = v as u32,
        7 => c.init_min_clients = v as u16,
        8 => c.min_clients = v as u16,
        9 => c.witness_nodes = v as u16,
        10 => c.global_batch_size_start = v as u16,
        11 => c.global_batch_size_end = v as u16,
        12 => c.waiting_for_members_extra_time = v as u16,
        13 => c.verification_percent = v as u8,
        14 => c.forgive_per_epoch = v as u8,
        15 => c.vesting_epochs = v as u8,
        _ => c.overlap = v as u8,
    }
    c
}

pub fn edgy_model(rng: &mut Rng, m: Model) -> Model {
    let mut m = m;
    let v = rng.interesting_u64();
    match rng.below(23) {
        0 => m.architecture = v as u8,
        1 => m.tokenizer = v as u8,
        2 => m.optimizer = v as u8,
        3 => m.max_seq_len = v as u32,
        4 => m.inner_steps = v as u32,
        5 => m.value_bits = v as u8,
        6 => m.compression_chunk = v as u32,
        7 => m.compression_topk = v as u32,
        8 => m.learning_rate = v as u32,
        9 => m.outer_learning_rate = v as u32,
        10 => m.vocab_size = v as u32,
        11 => m.n_head = v as u16,
        12 => m.checkpoint_kind = v as u8,
        13 => m.cold_start_warmup_steps = v as u32,
        14 => m.tokenizer_hash = [v as u8; 32],
        15 => m.precision = v as u8,
        16 => m.grad_shards_log2 = v as u8,
        17 => m.rms_norm_eps = v as u32,
        18 => m.rope_scaling = v as u8,
        19 => m.rope_factor = v as u32,
        20 => m.rope_original_context = v as u32,
        21 => m.qkv_bias = v as u8,
        _ => m.checkpoint_repo = [v as u8; URL_LEN],
    }
    m
}

/// The Instructions sysvar of a transaction [ed25519 proof, join]: the
/// runtime verified the signature; the program only finds it there.
pub fn instructions_sysvar(ed25519_data: &[u8], join: &Instr) -> Vec<u8> {
    let ixs: [(&Key, &[Meta], &[u8]); 2] = [(&keys::ED25519_PROGRAM, &[], ed25519_data), (&join.program, &join.metas, &join.data)];
    let mut head = (ixs.len() as u16).to_le_bytes().to_vec();
    let mut body = Vec::new();
    let base = 2 + 2 * ixs.len();
    for (program, metas, data) in ixs {
        head.extend_from_slice(&((base + body.len()) as u16).to_le_bytes());
        body.extend_from_slice(&(metas.len() as u16).to_le_bytes());
        for m in metas {
            body.push(m.signer as u8 | (m.writable as u8) << 1);
            body.extend_from_slice(&m.key);
        }
        body.extend_from_slice(program);
        body.extend_from_slice(&(data.len() as u16).to_le_bytes());
        body.extend_from_slice(data);
    }
    head.extend_from_slice(&body);
    head.extend_from_slice(&1u16.to_le_bytes());
    head
}

/// Ed25519 program data for one signature by `key` over `message`, all in
/// the instruction itself (offsets as solana-sdk lays them out).
pub fn ed25519_ix(key: &Key, message: &[u8]) -> Vec<u8> {
    let this = u16::MAX;
    let (key_off, sig_off, msg_off) = (16u16, 48u16, 112u16);
    let mut d = vec![1u8, 0];
    for v in [sig_off, this, key_off, this, msg_off, message.len() as u16, this] {
        d.extend_from_slice(&v.to_le_bytes());
    }
    d.extend_from_slice(key);
    d.extend_from_slice(&[7u8; 64]);
    d.extend_from_slice(message);
    d
}

pub fn join_message(account: &Key, signer: &Key) -> Vec<u8> {
    let mut m = b"psyche:join_run:v1".to_vec();
    m.extend_from_slice(&keys::COORDINATOR);
    m.extend_from_slice(account);
    m.extend_from_slice(signer);
    m
}

fn bloom_bytes(b: &Bloom) -> Vec<u8> {
    W::default().pod(b).done()
}

impl CoordRun {
    fn members(&self, s: &CoordinatorState) -> Vec<(u16, Key)> {
        (0..s.epoch.clients_len as usize).filter_map(|i| s.epoch_client(i).map(|(_, c)| (i as u16, c.signer))).collect()
    }

    fn client_ix(&self, disc: [u8; 8], user: Key, data: W) -> Instr {
        let _ = disc;
        Instr { program: keys::COORDINATOR, metas: vec![Meta::s(user), Meta::ro(self.instance), Meta::w(self.account)], data: data.done() }
    }

    /// An authority instruction's data (the caller sends it directly, or
    /// through the Treasurer).
    pub fn authority_data(&self, env: &Env, rng: &mut Rng) -> Vec<u8> {
        let halted = view(env, &self.account, |s| matches!(s.run_state(), Ok(RunState::Uninitialized | RunState::Paused | RunState::Finished)))
            .unwrap_or(true);
        match rng.below(10) {
            0..=2 => {
                let (meta, config, model, progress) = if halted && !rng.one_in(5) {
                    let config = if rng.one_in(4) { edgy_config(rng, self.config) } else { self.config };
                    let model = if rng.one_in(4) { edgy_model(rng, self.model) } else { self.model };
                    let progress = rng.one_in(6).then(|| Progress { epoch: rng.below(3) as u32, step: rng.below(5) as u32, data_index: 0 });
                    (rng.one_in(2).then(|| metadata(rng)), Some(config), Some(model), progress)
                } else {
                    (Some(metadata(rng)), None, None, None)
                };
                W::new(cp::UPDATE)
                    .opt(meta, |w, m| w.pod(&m))
                    .opt(config, |w, c| w.pod(&c))
                    .opt(model, |w, m| w.pod(&m))
                    .opt(progress, |w, p| w.pod(&p))
                    .done()
            }
            3..=5 => W::new(cp::SET_PAUSED).bool(rng.one_in(3)).done(),
            6 => W::new(cp::SET_FUTURE_EPOCH_RATES)
                .opt(rng.one_in(3).then(|| rng.below(10_000)), |w, v| w.u64(v))
                .opt(rng.one_in(2).then(|| rng.below(1000)), |w, v| w.u64(v))
                .done(),
            7 => W::new(cp::UPDATE_CLIENT_VERSION).string(if rng.one_in(5) { b"" } else { b"v2" }).done(),
            8 => W::new(cp::SETTLE_POINTS).bytes(&rng.pick(&self.users)[..]).done(),
            _ => W::new(cp::TAKE_BURNED).bytes(&rng.pick(&self.users)[..]).done(),
        }
    }

    pub fn authority_ix(&self, data: Vec<u8>) -> Instr {
        Instr { program: keys::COORDINATOR, metas: vec![Meta::s(self.authority), Meta::ro(self.instance), Meta::w(self.account)], data }
    }

    pub fn free_ix(&self, spill: Key) -> Instr {
        Instr {
            program: keys::COORDINATOR,
            metas: vec![Meta::s(self.authority), Meta::w(spill), Meta::w(self.instance), Meta::w(self.account)],
            data: cp::FREE_COORDINATOR.to_vec(),
        }
    }

    /// `init_coordinator` with the coordinator account the client allocates
    /// in the same transaction.
    pub fn init_step(&self, env: &Env, payer: Key, client_version: &[u8]) -> Step {
        let data = W::new(cp::INIT_COORDINATOR)
            .bytes(&self.authority)
            .bytes(&self.join_authority)
            .string(&self.run_id)
            .string(client_version)
            .done();
        let lamports = env.sysvars.rent_minimum(ACCOUNT_SIZE);
        Step {
            ix: Instr {
                program: keys::COORDINATOR,
                metas: vec![Meta::ws(payer), Meta::w(self.instance), Meta::w(self.account), Meta::ro(crate::runtime::SYSTEM_PROGRAM)],
                data,
            },
            setup: vec![(self.account, Account { lamports, data: vec![0; ACCOUNT_SIZE], owner: keys::COORDINATOR, executable: false })],
        }
    }

    pub fn join_step(&self, env: &Env, rng: &mut Rng, who: usize) -> Step {
        let user = self.users[who];
        let p2p = if rng.one_in(20) { self.p2p[(who + 1) % self.p2p.len()] } else { self.p2p[who] };
        let signer = if rng.one_in(30) { self.users[(who + 1) % self.users.len()] } else { user };
        let auth = if rng.one_in(30) { *rng.pick(&self.auths) } else { self.auths[who] };
        let data = W::new(cp::JOIN_RUN).bytes(&signer).bytes(&p2p).done();
        let ix = Instr {
            program: keys::COORDINATOR,
            metas: vec![Meta::s(user), Meta::ro(auth), Meta::ro(self.instance), Meta::w(self.account), Meta::ro(keys::INSTRUCTIONS_SYSVAR)],
            data,
        };
        let prover = if rng.one_in(25) { self.p2p[(who + 2) % self.p2p.len()] } else { p2p };
        let proof = ed25519_ix(&prover, &join_message(&self.account, &signer));
        let _ = env;
        let sysvar = Account { lamports: 1_000_000, data: instructions_sysvar(&proof, &ix), owner: keys::SYSVAR_OWNER, executable: false };
        Step { ix, setup: vec![(keys::INSTRUCTIONS_SYSVAR, sysvar)] }
    }

    /// A client instruction, the mix of the walk plus checkpoint, report_eval, report_prompt.
    pub fn client_step(&self, env: &Env, rng: &mut Rng) -> Step {
        let who = rng.below(self.users.len() as u64) as usize;
        let user = self.users[who];
        let Some(s) = view(env, &self.account, |s| Box::new(*s)) else {
            return Step::new(self.client_ix(cp::TICK, user, W::new(cp::TICK)));
        };
        let members = self.members(&s);
        let member = |rng: &mut Rng| -> (u16, Key) {
            if !members.is_empty() && !rng.one_in(5) {
                *rng.pick(&members)
            } else {
                (rng.below(6) as u16, user)
            }
        };
        let op = match rng.below(20) {
            n if n >= 14 && s.config.verification_percent == 0 => n - 14,
            n => n,
        };
        match op {
            0 | 1 => self.join_step(env, rng, who),
            2 => Step::new(self.client_ix(cp::LEAVE_RUN, user, W::new(cp::LEAVE_RUN))),
            3 | 4 => Step::new(self.client_ix(cp::TICK, user, W::new(cp::TICK))),
            5 => {
                let (_, k) = member(rng);
                Step::new(self.client_ix(cp::WARMUP_WITNESS, k, W::new(cp::WARMUP_WITNESS)))
            }
            6 | 7 => {
                let r = s.current_round();
                let elected: Vec<(u16, Key)> =
                    members.iter().copied().filter(|(i, _)| selection::is_witness(*i, r.clients_len, s.config.witness_nodes, &r.seed)).collect();
                let (index, signer) = if !elected.is_empty() && !rng.one_in(6) { *rng.pick(&elected) } else { member(rng) };
                let healthy: Vec<Key> = members
                    .iter()
                    .filter(|(i, _)| s.epoch.clients[*i as usize].state == client_state::HEALTHY && !rng.one_in(12))
                    .map(|(_, k)| *k)
                    .collect();
                let mut participant = Bloom::new(1024, 6, [index as u8; 8]).unwrap();
                for k in &healthy {
                    participant.add(k);
                }
                let broadcast = Bloom::new(512, 4, [9; 8]).unwrap();
                let mut pb = bloom_bytes(&participant);
                if rng.one_in(15) {
                    let i = rng.below(pb.len() as u64) as usize;
                    pb[i] ^= 1 << rng.below(8);
                }
                let step = if rng.one_in(8) { s.progress.step.wrapping_add(1) } else { s.progress.step };
                let data = W::new(cp::WITNESS)
                    .u32(step)
                    .u16(index)
                    .bytes(&pb)
                    .bytes(&bloom_bytes(&broadcast))
                    .bytes(&[3; 32])
                    .u32(0x3f800000)
                    .u64(rng.below(100_000))
                    .u64(rng.below(100_000))
                    .u32(0x3f000000);
                Step::new(self.client_ix(cp::WITNESS, signer, data))
            }
            8 => {
                let index = rng.below(6) as u16;
                let accused = s.epoch_client(index as usize).map(|(_, c)| c.signer).unwrap_or([0; 32]);
                let (_, signer) = member(rng);
                let data = W::new(cp::HEALTH_CHECK).u32(s.progress.step).u16(index).bytes(&accused);
                Step::new(self.client_ix(cp::HEALTH_CHECK, signer, data))
            }
            9 => {
                let (_, signer) = member(rng);
                let repo: &[u8] = if rng.one_in(10) { &[b'x'; 193] } else { b"hub://psyche/fuzz" };
                let rev: &[u8] = if rng.one_in(3) { b"" } else { b"rev1" };
                Step::new(self.client_ix(cp::CHECKPOINT, signer, W::new(cp::CHECKPOINT).string(repo).string(rev)))
            }
            10 if rng.one_in(2) => {
                let step = if rng.one_in(4) { rng.below(u32::MAX as u64) as u32 } else { 1 + rng.below(s.progress.step.max(1) as u64) as u32 };
                // 0..=33 tokens, now and then one at or above the vocabulary.
                let n = rng.below(34) as u32;
                let mut data = W::new(cp::REPORT_PROMPT).u32(step).u16(rng.below(20) as u16).u32(n);
                for _ in 0..n {
                    let id = if rng.one_in(10) { s.model.vocab_size.saturating_add(rng.below(3) as u32) } else { rng.below(s.model.vocab_size.max(1) as u64) as u32 };
                    data = data.u32(id);
                }
                let (_, signer) = member(rng);
                Step::new(self.client_ix(cp::REPORT_PROMPT, signer, data))
            }
            10 => {
                let step = if rng.one_in(4) { rng.below(u32::MAX as u64) as u32 } else { 1 + rng.below(s.progress.step.max(1) as u64) as u32 };
                let task: &[u8] = match rng.below(8) {
                    0 => b"",
                    1 => &[0xff, 0xfe],
                    2 => b"a\0b",
                    3 => &[b't'; 33],
                    _ => b"hellaswag",
                };
                let acc = if rng.one_in(6) { rng.next() as u32 } else { 0x3f000000 };
                let data = W::new(cp::REPORT_EVAL).u32(step).string(task).u32(acc).u32(0x3e800000).u32(if rng.one_in(8) { 0 } else { 100 });
                let (_, signer) = member(rng);
                Step::new(self.client_ix(cp::REPORT_EVAL, signer, data))
            }
            11 | 14 | 15 => {
                // commit
                let (index, who_key) = member(rng);
                let linked = s.clients.iter().find(|c| c.occupied != 0 && c.signer == who_key).map(|c| c.state_after).unwrap_or([0; 32]);
                let fresh = rng.one_in(3);
                let before = if fresh || rng.one_in(8) { h("fresh", who as u32) } else { linked };
                let data = W::new(cp::COMMIT)
                    .u32(if rng.one_in(10) { s.progress.step + 1 } else { s.progress.step })
                    .u16(index)
                    .bytes(&h("payload", rng.below(1000) as u32))
                    .bytes(&before)
                    .bytes(&h("after", rng.below(1000) as u32))
                    .u8(if rng.one_in(20) { 2 } else { fresh as u8 });
                Step::new(self.client_ix(cp::COMMIT, who_key, data))
            }
            12 | 16 | 17 => {
                // verify
                let r = s.current_round();
                let committed: Vec<u16> = (0..r.clients_len).filter(|&i| r.commits[i as usize].flags != 0).collect();
                let trainer = if !committed.is_empty() && !rng.one_in(4) {
                    *rng.pick(&committed)
                } else {
                    rng.below(u64::from(r.clients_len.max(1))) as u16
                };
                let drawn = selection::verifier(&r.verify_seed, trainer, r.clients_len);
                let signer = match drawn {
                    Some(v) if !rng.one_in(4) => s.epoch_client(v as usize).map(|(_, c)| c.signer).unwrap_or(user),
                    _ => user,
                };
                let verifier_index = members.iter().position(|m| m.1 == signer).unwrap_or(0) as u16;
                let data = W::new(cp::VERIFY)
                    .u32(r.step)
                    .u16(verifier_index)
                    .u16(trainer)
                    .u8({
                        let n = if rng.one_in(10) { 5 } else { 3 };
                        1 + rng.below(n) as u8
                    })
                    .bytes(&[1; 32])
                    .bytes(&[2; 32]);
                Step::new(self.client_ix(cp::VERIFY, signer, data))
            }
            13 | 18 => {
                let d = random_dispute(&s, rng);
                let signer = if rng.one_in(5) { user } else { s.clients[d.trainer_slot as usize % MAX_CLIENTS].signer };
                let same = !rng.one_in(4);
                let data = W::new(cp::ANSWER_DISPUTE).u64(d.id).bytes(if same { &d.claimed_payload } else { &[9; 32] }).bytes(&d.claimed_after);
                Step::new(self.client_ix(cp::ANSWER_DISPUTE, signer, data))
            }
            _ => {
                let d = random_dispute(&s, rng);
                let k = rng.below(4) as usize;
                let signer = if k < d.committee_len as usize { s.clients[d.committee[k] as usize % MAX_CLIENTS].signer } else { user };
                let data = W::new(cp::JUDGE_DISPUTE).u64(d.id).u8(rng.below(4) as u8);
                Step::new(self.client_ix(cp::JUDGE_DISPUTE, signer, data))
            }
        }
    }
}

fn h(label: &str, i: u32) -> [u8; 32] {
    psyche_sdk::hash::hashv(&[label.as_bytes(), &i.to_le_bytes()])
}

fn random_dispute(s: &CoordinatorState, rng: &mut Rng) -> Dispute {
    let open: Vec<&Dispute> = s.disputes.iter().filter(|d| d.state == dispute_state::OPEN).collect();
    if !open.is_empty() && !rng.one_in(4) {
        **rng.pick(&open)
    } else {
        s.disputes[rng.below(MAX_DISPUTES as u64) as usize]
    }
}

/// The run state tag of a coordinator account (for coverage labels).
pub fn state_label(env: &Env, account: &Key) -> &'static str {
    match view(env, account, |s| s.run_state()) {
        None => "none",
        Some(Err(_)) => "bad",
        Some(Ok(s)) => match s {
            RunState::Uninitialized => "Uninitialized",
            RunState::WaitingForMembers => "WaitingForMembers",
            RunState::Warmup => "Warmup",
            RunState::RoundTrain => "RoundTrain",
            RunState::RoundWitness => "RoundWitness",
            RunState::Cooldown => "Cooldown",
            RunState::Finished => "Finished",
            RunState::Paused => "Paused",
        },
    }
}
