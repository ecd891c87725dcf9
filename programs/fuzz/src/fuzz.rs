//! The fuzzing loop: corpus replay, then generated and mutated instructions
//! with every invariant checked after each; coverage keys (instruction x
//! outcome x run state) decide what enters the corpus.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::coord::Step;
use crate::gen::Rng;
use crate::invariants;
use crate::keys;
use crate::mutate;
use crate::runtime::{Account, Env, Instr, Key, Outcome, Sysvars};
use crate::competition::CompetitionWorld;
use crate::worlds::{AuthorizerWorld, CoordinatorWorld, Program, TreasurerWorld};

#[allow(clippy::large_enum_variant)]
pub enum World {
    Coordinator(CoordinatorWorld),
    Authorizer(AuthorizerWorld),
    Treasurer(TreasurerWorld),
    Competition(CompetitionWorld),
}

impl World {
    fn new(p: Program, env: &mut Env) -> Self {
        match p {
            Program::Coordinator => World::Coordinator(CoordinatorWorld::new(env)),
            Program::Authorizer => World::Authorizer(AuthorizerWorld::new(env)),
            Program::Treasurer => World::Treasurer(TreasurerWorld::new(env)),
            Program::Competition => World::Competition(CompetitionWorld::new(env)),
        }
    }
    fn step(&mut self, env: &mut Env, rng: &mut Rng) -> Step {
        match self {
            World::Coordinator(w) => w.step(env, rng),
            World::Authorizer(w) => w.step(env, rng),
            World::Treasurer(w) => w.step(env, rng),
            World::Competition(w) => w.step(env, rng),
        }
    }
    fn state_label(&self, env: &Env) -> &'static str {
        match self {
            World::Coordinator(w) => w.state_label(env),
            World::Authorizer(_) => "-",
            World::Treasurer(w) => w.state_label(env),
            World::Competition(w) => w.state_label(env),
        }
    }
    fn after(&mut self, env: &Env) {
        if let World::Coordinator(w) = self {
            w.after(env)
        }
    }
}

pub struct Options {
    pub program: Program,
    pub iterations: u64,
    pub seed: u64,
    pub corpus_dir: PathBuf,
    pub findings_dir: PathBuf,
    pub save_corpus: bool,
    pub interpreted: bool,
    /// Percent of target instructions that are mutated.
    pub mutate_percent: u64,
    pub reset_every: u64,
    pub max_corpus_bytes: u64,
    pub verbose: bool,
}

#[derive(Default)]
pub struct Stats {
    pub executions: u64,
    pub replayed: u64,
    pub support: u64,
    pub mutated: u64,
    pub ok: u64,
    pub program_errors: u64,
    pub refused: u64,
    pub violations: u64,
    pub crashes: u64,
    pub invariant_failures: u64,
    pub dirty_errors: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    pub successes: BTreeMap<String, u64>,
    pub states: BTreeSet<String>,
    pub coverage: BTreeSet<String>,
    pub corpus_added: u64,
    pub findings: Vec<String>,
    pub high_cu: Vec<String>,
    pub max_cu: BTreeMap<String, u64>,
    pub seconds: f64,
}

pub struct Fuzzer {
    pub opts: Options,
    pub env: Env,
    base: BTreeMap<Key, Account>,
    pub stats: Stats,
    corpus_bytes: u64,
    trace: u64,
}

/// Loads the programs' .so files from `deploy`.
pub fn load_env(deploy: &Path) -> Result<Env, String> {
    let mut env = Env::new();
    for (id, name, file) in [
        (keys::COORDINATOR, "coordinator", "psyche_coordinator.so"),
        (keys::AUTHORIZER, "authorizer", "psyche_authorizer.so"),
        (keys::TREASURER, "treasurer", "psyche_treasurer.so"),
        (keys::COMPETITION, "competition", "psyche_competition.so"),
    ] {
        let path = deploy.join(file);
        let elf = std::fs::read(&path).map_err(|e| format!("{}: {e} (build with scripts/build-programs.sh)", path.display()))?;
        env.load_program(id, name, &elf)?;
    }
    Ok(env)
}

pub fn ix_name(ix: &Instr) -> String {
    let table: &[(&str, [u8; 8])] = if ix.program == keys::COORDINATOR {
        &psyche_coordinator::INSTRUCTIONS
    } else if ix.program == keys::AUTHORIZER {
        &psyche_authorizer::INSTRUCTIONS
    } else if ix.program == keys::TREASURER {
        &psyche_treasurer::INSTRUCTIONS
    } else if ix.program == keys::COMPETITION {
        &psyche_competition::INSTRUCTIONS
    } else {
        return format!("native:{}", ix.data.first().copied().unwrap_or(0));
    };
    match ix.data.get(..8) {
        None => "short-data".into(),
        Some(d) => table.iter().find(|(_, disc)| disc == d).map_or("unknown-discriminator".into(), |(n, _)| n.to_string()),
    }
}

pub fn error_name(program: &Key, code: u64) -> String {
    if code >> 32 != 0 {
        return format!("{:?}", psyche_sdk::ProgramError::from(code));
    }
    let c = code as u32;
    if let Some(e) = psyche_sdk::ErrorCode::from_code(c) {
        return e.name().to_string();
    }
    if *program == keys::COORDINATOR {
        if let Some(e) = psyche_coordinator_logic::error::CoordinatorError::ALL.iter().find(|e| e.code() == c) {
            return e.name().to_string();
        }
    }
    if *program == keys::TREASURER {
        if let Some(e) = psyche_treasurer_interface::ERRORS.iter().find(|e| e.code() == c) {
            return e.name().to_string();
        }
    }
    if *program == keys::COMPETITION {
        if let Some(e) = psyche_competition_interface::ERRORS.iter().find(|e| e.code() == c) {
            return e.name().to_string();
        }
    }
    if *program == keys::AUTHORIZER {
        use psyche_authorizer_interface::AuthorizerError as A;
        for e in [A::ScopeTooLong, A::TooManyDelegates, A::AuthorizationStillActive, A::GrantorMismatch, A::GranteeMismatch, A::AuthorizationAlreadyExists] {
            if e.code() == c {
                return e.name().to_string();
            }
        }
    }
    format!("Custom({c})")
}

pub fn outcome_label(env: &Env, o: &Outcome) -> String {
    match o {
        Outcome::Ok => "ok".into(),
        Outcome::ProgramError { program, code } => format!("{}:{}", env.name(program), error_name(program, *code)),
        Outcome::Refused(s) => format!("refused:{}", s.split('(').next().unwrap_or(s)),
        Outcome::Violation { program, what } => format!("VIOLATION:{}:{what}", env.name(program)),
        Outcome::Crash { program, what } => format!("CRASH:{}:{what}", env.name(program)),
    }
}

impl Fuzzer {
    pub fn new(opts: Options, mut env: Env) -> Self {
        env.interpreted = opts.interpreted;
        // The loaded programs only: an Env reused from another program's run
        // still holds that run's accounts.
        let base: BTreeMap<Key, Account> = env.accounts.iter().filter(|(_, a)| a.executable).map(|(k, a)| (*k, a.clone())).collect();
        let corpus_bytes = dir_bytes(&opts.corpus_dir.join(opts.program.name()));
        let trace = std::env::var("PSYCHE_FUZZ_TRACE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        Fuzzer { opts, env, base, stats: Stats::default(), corpus_bytes, trace }
    }

    fn reset_bank(&mut self) {
        self.env.accounts = self.base.clone();
        self.env.sysvars = Sysvars::default();
    }

    /// Runs one instruction and checks everything; returns the outcome.
    fn exec(&mut self, step: &Step, target: bool, state: &str, mutated: bool) -> Outcome {
        for (k, a) in &step.setup {
            self.env.accounts.insert(*k, a.clone());
        }
        let ix = &step.ix;
        let mut keys: Vec<Key> = Vec::new();
        for m in &ix.metas {
            if !keys.contains(&m.key) {
                keys.push(m.key);
            }
        }
        let pre: Vec<(Key, Option<Account>)> = keys.iter().map(|k| (*k, self.env.accounts.get(k).cloned())).collect();
        let sysvars = self.env.sysvars;
        let out = self.env.process(ix);
        let label = outcome_label(&self.env, &out);
        let name = ix_name(ix);
        let s = &mut self.stats;
        if target {
            s.executions += 1;
            if mutated {
                s.mutated += 1;
            }
        } else {
            s.support += 1;
        }
        match &out {
            Outcome::Ok => {
                s.ok += 1;
                *s.successes.entry(name.clone()).or_default() += 1;
                let cu = s.max_cu.entry(name.clone()).or_default();
                *cu = (*cu).max(self.env.last_cu);
            }
            Outcome::ProgramError { .. } => s.program_errors += 1,
            Outcome::Refused(_) => s.refused += 1,
            Outcome::Violation { .. } => s.violations += 1,
            Outcome::Crash { .. } => s.crashes += 1,
        }
        if !out.is_ok() {
            *s.errors.entry(format!("{name} -> {label}")).or_default() += 1;
        }
        if let Some((p, what)) = self.env.dirty_error.take() {
            let k = format!("{} {} -> {}", self.env.name(&p), name, label);
            let first = !self.stats.dirty_errors.contains_key(&k);
            *self.stats.dirty_errors.entry(k.clone()).or_default() += 1;
            if first {
                let e = Entry { program: self.opts.program, sysvars, accounts: pre.iter().filter_map(|(k, a)| a.clone().map(|a| (*k, a))).collect(), ix: ix.clone(), label: format!("dirty error: {k} (changed {what})") };
                let path = e.save(&self.opts.findings_dir);
                eprintln!("NOTE dirty error {k} (changed {what})\n  reproducer: {}", path.display());
            }
        }
        self.stats.states.insert(state.to_string());
        let mut problem = match &out {
            Outcome::Crash { .. } | Outcome::Violation { .. } => Some(label.clone()),
            _ => None,
        };
        if let Err(e) = invariants::check(&self.env, &pre, &out) {
            self.stats.invariant_failures += 1;
            problem = Some(format!("INVARIANT:{e} (after {label})"));
        }
        let entry = Entry { program: self.opts.program, sysvars, accounts: pre.iter().filter_map(|(k, a)| a.clone().map(|a| (*k, a))).collect(), ix: ix.clone(), label: String::new() };
        if out.is_ok() && self.env.last_cu > 150_000 {
            let key = format!("{name}: {} CU (above 150,000), run state {state}", self.env.last_cu);
            if !self.stats.high_cu.iter().any(|k| k.starts_with(&format!("{name}:"))) {
                let mut e = entry.clone();
                e.label = key.clone();
                let path = e.save(&self.opts.findings_dir);
                eprintln!("NOTE {key}\n  reproducer: {}", path.display());
                self.stats.high_cu.push(key);
            }
        }
        if let Some(p) = problem {
            let key = format!("{name}: {p}");
            // One reproducer per kind: details in parentheses vary.
            let kind = key.split(" (").next().unwrap_or(&key).to_string();
            if !self.stats.findings.iter().any(|f| f.split(" (").next() == Some(&kind)) {
                let mut e = entry.clone();
                e.label = key.clone();
                let path = e.save(&self.opts.findings_dir);
                eprintln!("FINDING {key}\n  reproducer: {}", path.display());
                self.stats.findings.push(key);
            }
        }
        if self.trace > 0 {
            self.trace -= 1;
            eprintln!("{} {} cu={} [{}] {}{} -> {label}", self.stats.executions + self.stats.support, self.env.last_cu, name, state, if mutated { "mutated " } else { "" }, self.env.name(&ix.metas.first().map(|m| m.key).unwrap_or_default()));
        }
        let cov = format!("{}|{}|{}|{}", self.env.name(&ix.program), name, label, state);
        if self.stats.coverage.insert(cov.clone()) && self.opts.save_corpus && target {
            let mut e = entry;
            e.label = cov;
            let bytes = e.encode();
            if self.corpus_bytes + bytes.len() as u64 <= self.opts.max_corpus_bytes {
                e.save(&self.opts.corpus_dir.join(self.opts.program.name()));
                self.corpus_bytes += bytes.len() as u64;
                self.stats.corpus_added += 1;
            }
        }
        out
    }

    /// Replays the committed corpus of this program.
    pub fn replay(&mut self) {
        let dir = self.opts.corpus_dir.join(self.opts.program.name());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        files.sort();
        for f in files {
            let Ok(bytes) = std::fs::read(&f) else { continue };
            let Some(e) = Entry::decode(&bytes) else {
                eprintln!("corpus: cannot decode {}", f.display());
                continue;
            };
            self.reset_bank();
            for (k, a) in &e.accounts {
                self.env.accounts.insert(*k, a.clone());
            }
            self.env.sysvars = e.sysvars;
            let state = e.label.rsplit('|').next().unwrap_or("-").to_string();
            let target = e.ix.program == self.opts.program.id();
            self.exec(&Step::new(e.ix), target, &state, false);
            self.stats.replayed += 1;
        }
    }

    pub fn run(&mut self) {
        let start = Instant::now();
        self.replay();
        let mut rng = Rng(self.opts.seed);
        let mut since_reset = 0u64;
        self.reset_bank();
        let mut world = World::new(self.opts.program, &mut self.env);
        let target_id = self.opts.program.id();
        let goal = self.stats.executions + self.opts.iterations;
        while self.stats.executions < goal {
            if since_reset >= self.opts.reset_every {
                since_reset = 0;
                self.reset_bank();
                world = World::new(self.opts.program, &mut self.env);
            }
            since_reset += 1;
            crate::worlds::tick_clock(&mut self.env, &mut rng);
            let mut step = world.step(&mut self.env, &mut rng);
            let target = step.ix.program == target_id;
            let mutated = target && rng.below(100) < self.opts.mutate_percent;
            if mutated {
                mutate::mutate(&mut step, &self.env, &mut rng);
            }
            let state = world.state_label(&self.env);
            self.exec(&step, target, state, mutated);
            world.after(&self.env);
        }
        self.stats.seconds = start.elapsed().as_secs_f64();
    }

    /// Runs one reproducer with logs and prints what happened.
    pub fn reproduce(&mut self, path: &Path) -> Result<(), String> {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        let e = Entry::decode(&bytes).ok_or("not a psyche-fuzz entry")?;
        self.reset_bank();
        for (k, a) in &e.accounts {
            self.env.accounts.insert(*k, a.clone());
        }
        self.env.sysvars = e.sysvars;
        if let Some(t) = std::env::var("PSYCHE_FUZZ_CLOCK").ok().and_then(|v| v.parse().ok()) {
            self.env.sysvars.unix_timestamp = t;
        }
        self.env.logs = Some(vec![]);
        println!("entry: {}", e.label);
        println!("clock: unix {} slot {}", e.sysvars.unix_timestamp, e.sysvars.slot);
        println!("instruction: {} {} ({} bytes of data)", self.env.name(&e.ix.program), ix_name(&e.ix), e.ix.data.len());
        for m in &e.ix.metas {
            let a = self.env.get(&m.key);
            println!(
                "  {} signer={} writable={} owner={} lamports={} len={}",
                self.env.name(&m.key),
                m.signer,
                m.writable,
                self.env.name(&a.owner),
                a.lamports,
                a.data.len()
            );
        }
        let pre: Vec<(Key, Option<Account>)> = e.ix.metas.iter().map(|m| (m.key, self.env.accounts.get(&m.key).cloned())).collect();
        let out = self.env.process(&e.ix);
        for l in self.env.logs.take().unwrap_or_default() {
            println!("  {l}");
        }
        println!("outcome: {} ({} CU)", outcome_label(&self.env, &out), self.env.last_cu);
        if let Some((p, what)) = self.env.dirty_error.take() {
            println!("dirty error: {} returned an error after changing {what}", self.env.name(&p));
        }
        match invariants::check(&self.env, &pre, &out) {
            Ok(()) => println!("invariants: hold"),
            Err(e) => println!("invariants: VIOLATED: {e}"),
        }
        Ok(())
    }
}

fn dir_bytes(d: &Path) -> u64 {
    std::fs::read_dir(d).map(|r| r.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()).unwrap_or(0)
}

/// A self-contained input: the accounts of one instruction, the sysvars and
/// the instruction. Account data is stored with runs of zeros compressed.
#[derive(Clone)]
pub struct Entry {
    pub program: Program,
    pub sysvars: Sysvars,
    pub accounts: Vec<(Key, Account)>,
    pub ix: Instr,
    pub label: String,
}

const MAGIC: &[u8; 8] = b"PSYFZ001";

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.push(Program::all().iter().position(|p| *p == self.program).unwrap() as u8);
        let sv = &self.sysvars;
        b.extend_from_slice(&sv.slot.to_le_bytes());
        b.extend_from_slice(&sv.unix_timestamp.to_le_bytes());
        b.extend_from_slice(&sv.slot_hashes_len.to_le_bytes());
        b.extend_from_slice(&sv.slot_hash);
        b.extend_from_slice(&(self.accounts.len() as u32).to_le_bytes());
        for (k, a) in &self.accounts {
            b.extend_from_slice(k);
            b.extend_from_slice(&a.lamports.to_le_bytes());
            b.extend_from_slice(&a.owner);
            b.push(a.executable as u8);
            b.extend_from_slice(&(a.data.len() as u32).to_le_bytes());
            rle(&a.data, &mut b);
        }
        b.extend_from_slice(&self.ix.program);
        b.extend_from_slice(&(self.ix.metas.len() as u32).to_le_bytes());
        for m in &self.ix.metas {
            b.extend_from_slice(&m.key);
            b.push(m.signer as u8);
            b.push(m.writable as u8);
        }
        b.extend_from_slice(&(self.ix.data.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.ix.data);
        b.extend_from_slice(&(self.label.len() as u32).to_le_bytes());
        b.extend_from_slice(self.label.as_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Entry> {
        let mut r = Rd(b, 0);
        if r.take(8)? != MAGIC {
            return None;
        }
        let program = *Program::all().get(r.u8()? as usize)?;
        let mut sysvars = Sysvars { slot: r.u64()?, unix_timestamp: r.u64()? as i64, slot_hashes_len: r.u64()?, ..Sysvars::default() };
        sysvars.slot_hash = r.key()?;
        let n = r.u32()?;
        let mut accounts = Vec::new();
        for _ in 0..n {
            let k = r.key()?;
            let lamports = r.u64()?;
            let owner = r.key()?;
            let executable = r.u8()? != 0;
            let len = r.u32()? as usize;
            let data = unrle(&mut r, len)?;
            accounts.push((k, Account { lamports, data, owner, executable }));
        }
        let program_id = r.key()?;
        let nm = r.u32()?;
        let mut metas = Vec::new();
        for _ in 0..nm {
            metas.push(crate::runtime::Meta { key: r.key()?, signer: r.u8()? != 0, writable: r.u8()? != 0 });
        }
        let dl = r.u32()? as usize;
        let data = r.take(dl)?.to_vec();
        let ll = r.u32()? as usize;
        let label = String::from_utf8_lossy(r.take(ll)?).into_owned();
        Some(Entry { program, sysvars, accounts, ix: Instr { program: program_id, metas, data }, label })
    }

    /// Writes the entry under `dir`, named by its content hash.
    pub fn save(&self, dir: &Path) -> PathBuf {
        let b = self.encode();
        let h = psyche_sdk::hash::hashv(&[&b]);
        let name: String = h[..8].iter().map(|x| format!("{x:02x}")).collect();
        let _ = std::fs::create_dir_all(dir);
        let path = dir.join(format!("{name}.bin"));
        let _ = std::fs::write(&path, b);
        path
    }
}

struct Rd<'a>(&'a [u8], usize);
impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.0.get(self.1..self.1.checked_add(n)?)?;
        self.1 += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn key(&mut self) -> Option<Key> {
        self.take(32)?.try_into().ok()
    }
}

/// (zeros u32, literal length u32, literal) pairs.
fn rle(d: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < d.len() {
        let z = d[i..].iter().take_while(|&&b| b == 0).count();
        let start = i + z;
        let mut end = start;
        // A literal ends at 16 zeros in a row or at the end.
        while end < d.len() {
            if d[end] == 0 && d[end..].iter().take(16).all(|&b| b == 0) {
                break;
            }
            end += 1;
        }
        out.extend_from_slice(&(z as u32).to_le_bytes());
        out.extend_from_slice(&((end - start) as u32).to_le_bytes());
        out.extend_from_slice(&d[start..end]);
        i = end;
    }
}

fn unrle(r: &mut Rd, len: usize) -> Option<Vec<u8>> {
    let mut d = Vec::with_capacity(len);
    while d.len() < len {
        let z = r.u32()? as usize;
        let l = r.u32()? as usize;
        if d.len() + z + l > len {
            return None;
        }
        d.resize(d.len() + z, 0);
        d.extend_from_slice(r.take(l)?);
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short pass per program when the .so files are built (CI builds them
    /// first; scripts/test.sh also runs the release pass).
    #[test]
    fn short_pass_finds_nothing() {
        let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/deploy");
        let Ok(env) = load_env(&deploy) else {
            eprintln!("skipped: no programs in {} (scripts/build-programs.sh)", deploy.display());
            return;
        };
        let mut env = Some(env);
        for program in Program::all() {
            let opts = Options {
                program,
                iterations: 1500,
                seed: 7,
                corpus_dir: PathBuf::from("/nonexistent"),
                findings_dir: std::env::temp_dir().join("psyche-fuzz-test-findings"),
                save_corpus: false,
                interpreted: false,
                mutate_percent: 30,
                reset_every: 20_000,
                max_corpus_bytes: 0,
                verbose: false,
            };
            let mut f = Fuzzer::new(opts, env.take().unwrap());
            f.run();
            assert_eq!(f.stats.executions, 1500);
            assert!(f.stats.ok > 0, "{}: nothing succeeded", program.name());
            assert!(f.stats.findings.is_empty(), "{}: {:?}", program.name(), f.stats.findings);
            env = Some(f.env);
        }
    }

    #[test]
    fn entries_round_trip() {
        let e = crate::repro::cooldown_tick(3);
        let back = Entry::decode(&e.encode()).unwrap();
        assert_eq!(back.accounts, e.accounts);
        assert_eq!(back.ix, e.ix);
        assert_eq!(back.sysvars, e.sysvars);
        assert_eq!(back.label, e.label);
    }

    #[test]
    fn rle_round_trips() {
        for d in [vec![], vec![0u8; 100], vec![1, 2, 3], [vec![0; 40], vec![5; 3], vec![0; 17], vec![9], vec![0; 3]].concat()] {
            let mut b = vec![];
            rle(&d, &mut b);
            let mut r = Rd(&b, 0);
            assert_eq!(unrle(&mut r, d.len()).unwrap(), d);
        }
    }
}
