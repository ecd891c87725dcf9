//! A small Solana runtime around solana-sbpf, enough to run our three programs
//! as deployed, faithfully at the boundary they see:
//!
//! - **Input**: the account list is serialized exactly as the upgradeable
//!   loader does (`serialize_parameters_aligned`: dup markers, flags, key,
//!   owner, lamports, length, data + 10 KiB realloc room + 8-alignment, rent
//!   epoch, then instruction data and program id), at `MM_INPUT_START`, so the
//!   program's own pinocchio deserializer parses it; after a successful run it
//!   is deserialized back with the runtime's rules (`check_change`).
//! - **Syscalls** (`sbf::register`): logs, memory, SHA-256, PDAs, Clock/Rent/
//!   SlotHashes (values from [`Sysvars`], which the fuzzer drives),
//!   return data, panic/abort, and `sol_invoke_signed_c`.
//! - **CPI** (`Env::cpi`): privilege checks (writable/signer, PDA signers from
//!   the caller's seeds), account-info pointer checks, caller -> callee account
//!   sync with the same rules, the callee run (a BPF program of ours in a
//!   nested VM, or the System / SPL Token / Associated Token models in
//!   `builtins`), callee -> caller sync (realloc limit checked), depth limit 4,
//!   no reentrancy.
//! - **Transaction semantics**: a failed instruction rolls every account back;
//!   each instruction's lamports must balance; a writable account may not end
//!   below rent exemption unless it was already (Agave's rent-state rule).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use solana_sbpf::aligned_memory::AlignedMemory;
use solana_sbpf::ebpf;
use solana_sbpf::elf::Executable;
use solana_sbpf::error::{EbpfError, ProgramResult};
use solana_sbpf::memory_region::{MemoryMapping, MemoryRegion};
use solana_sbpf::program::BuiltinProgram;
use solana_sbpf::vm::{Config, EbpfVm};

use crate::builtins;
use crate::sbf::{self, Ctx};

pub type Key = [u8; 32];

pub const SYSTEM_PROGRAM: Key = [0; 32];
pub const MAX_PERMITTED_DATA_INCREASE: usize = 10 * 1024;
pub const MAX_PERMITTED_DATA_LENGTH: usize = 10 * 1024 * 1024;
const NON_DUP_MARKER: u8 = 0xff;
/// Agave's default per-transaction cap (the programs document <200k each).
pub const COMPUTE_BUDGET: u64 = 1_400_000;
/// Top-level instruction is height 1; Agave allows 5 (4 nested CPIs).
const MAX_INVOKE_HEIGHT: usize = 5;

/// One account of the bank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Account {
    pub lamports: u64,
    pub data: Vec<u8>,
    pub owner: Key,
    pub executable: bool,
}

/// An instruction account: key and the privileges the transaction gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub key: Key,
    pub signer: bool,
    pub writable: bool,
}

impl Meta {
    pub fn new(key: Key, signer: bool, writable: bool) -> Self {
        Meta { key, signer, writable }
    }
    pub fn ro(key: Key) -> Self {
        Meta { key, signer: false, writable: false }
    }
    pub fn w(key: Key) -> Self {
        Meta { key, signer: false, writable: true }
    }
    pub fn s(key: Key) -> Self {
        Meta { key, signer: true, writable: false }
    }
    pub fn ws(key: Key) -> Self {
        Meta { key, signer: true, writable: true }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    pub program: Key,
    pub metas: Vec<Meta>,
    pub data: Vec<u8>,
}

/// Clock, Rent and the newest SlotHashes entry, as the syscalls return them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sysvars {
    pub slot: u64,
    pub epoch_start_timestamp: i64,
    pub epoch: u64,
    pub unix_timestamp: i64,
    /// SlotHashes' entry count (512 on a running cluster, 0 at genesis).
    pub slot_hashes_len: u64,
    pub slot_hash: [u8; 32],
    pub lamports_per_byte_year: u64,
    pub exemption_threshold: f64,
}

impl Default for Sysvars {
    fn default() -> Self {
        Sysvars {
            slot: 1000,
            epoch_start_timestamp: 1_700_000_000,
            epoch: 1,
            unix_timestamp: 1_700_000_000,
            slot_hashes_len: 512,
            slot_hash: [7; 32],
            lamports_per_byte_year: 3480,
            exemption_threshold: 2.0,
        }
    }
}

impl Sysvars {
    pub fn rent_minimum(&self, len: usize) -> u64 {
        (((128 + len as u64) * self.lamports_per_byte_year) as f64 * self.exemption_threshold) as u64
    }

    pub fn clock_bytes(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.epoch_start_timestamp.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.epoch.to_le_bytes());
        b[32..40].copy_from_slice(&self.unix_timestamp.to_le_bytes());
        b
    }

    pub fn rent_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&self.lamports_per_byte_year.to_le_bytes());
        b[8..16].copy_from_slice(&self.exemption_threshold.to_le_bytes());
        b[16] = 50;
        b
    }

    /// `len` bytes at `offset` of the SlotHashes sysvar (count, then (slot,
    /// hash) newest first; entries after the first are synthesized).
    pub fn slot_hashes_read(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        let total = 8 + 40 * self.slot_hashes_len;
        if offset.checked_add(len)? > total {
            return None;
        }
        let mut out = Vec::with_capacity(len as usize);
        for at in offset..offset + len {
            let b = if at < 8 {
                self.slot_hashes_len.to_le_bytes()[at as usize]
            } else {
                let i = (at - 8) / 40;
                let k = ((at - 8) % 40) as usize;
                if k < 8 {
                    self.slot.saturating_sub(1 + i).to_le_bytes()[k]
                } else if i == 0 {
                    self.slot_hash[k - 8]
                } else {
                    (i as u8) ^ self.slot_hash[k - 8]
                }
            };
            out.push(b);
        }
        Some(out)
    }
}

/// What one instruction came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The program (or a callee it invoked) returned this error
    /// (ProgramError's u64 encoding: Custom(n) is n).
    ProgramError { program: Key, code: u64 },
    /// The runtime refused something the transaction asked for (privilege
    /// escalation in a CPI, unknown program, rent state...): a safe failure.
    Refused(String),
    /// The program broke a runtime rule with its own writes (modified a
    /// read-only account, spent lamports it does not own, unbalanced the
    /// instruction, realloc past the limit...): caught on chain, but a bug.
    Violation { program: Key, what: String },
    /// The VM stopped the program: panic, abort, access violation, compute
    /// exhausted, division by zero, call depth.
    Crash { program: Key, what: String },
}

impl Outcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }
}

/// One instruction account inside a BPF frame.
#[derive(Clone, Debug)]
pub struct FrameAccount {
    pub key: Key,
    pub signer: bool,
    pub writable: bool,
    /// Offset of its serialized record in the input buffer (for a duplicate:
    /// of the first occurrence's record).
    pub record: usize,
    /// Data length when serialized (realloc is limited relative to it).
    pub pre_len: usize,
    pub dup: bool,
}

/// Per-invocation state the syscalls see through [`Ctx`].
pub struct Frame {
    pub program: Key,
    pub accounts: Vec<FrameAccount>,
    pub input: *mut u8,
    pub input_len: usize,
    /// A CPI of this frame succeeded (its writes are then legitimately in
    /// the buffer when the program later fails).
    pub cpi_done: bool,
}

// Record layout offsets (from the record start).
pub const REC_KEY: usize = 8;
pub const REC_OWNER: usize = 40;
pub const REC_LAMPORTS: usize = 72;
pub const REC_LEN: usize = 80;
pub const REC_DATA: usize = 88;

pub struct Env {
    pub accounts: BTreeMap<Key, Account>,
    programs: HashMap<Key, Arc<Executable<Ctx>>>,
    pub names: HashMap<Key, &'static str>,
    pub sysvars: Sysvars,
    pub remaining: u64,
    pub stack: Vec<Key>,
    pub logs: Option<Vec<String>>,
    pub return_data: (Key, Vec<u8>),
    pub cpi_failure: Option<Outcome>,
    /// Set when a program returned an error after writing to its accounts
    /// with no CPI in between (rolled back on chain; the logic promises "no
    /// change on error").
    pub dirty_error: Option<(Key, String)>,
    pub interpreted: bool,
    pub pda_cache: HashMap<Vec<u8>, Option<Key>>,
    curve_cache: HashMap<Key, bool>,
    /// Peak compute units of a top-level instruction, per program.
    pub last_cu: u64,
    loader: Arc<BuiltinProgram<Ctx>>,
    stacks: Vec<(AlignedMemory<{ ebpf::HOST_ALIGN }>, AlignedMemory<{ ebpf::HOST_ALIGN }>)>,
}

pub fn vm_config() -> Config {
    Config {
        max_call_depth: 64,
        stack_frame_size: 4096,
        enable_address_translation: true,
        enable_stack_frame_gaps: true,
        instruction_meter_checkpoint_distance: 10_000,
        enable_instruction_meter: true,
        enable_register_tracing: false,
        enable_symbol_and_section_labels: false,
        reject_broken_elfs: true,
        noop_instruction_rate: 256,
        sanitize_user_provided_values: true,
        optimize_rodata: false,
        aligned_memory_mapping: true,
        enabled_sbpf_versions: solana_sbpf::program::SBPFVersion::V0..=solana_sbpf::program::SBPFVersion::V3,
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Self {
        let mut loader = BuiltinProgram::new_loader(vm_config());
        sbf::register(&mut loader);
        let mut env = Env {
            accounts: BTreeMap::new(),
            programs: HashMap::new(),
            names: HashMap::new(),
            sysvars: Sysvars::default(),
            remaining: COMPUTE_BUDGET,
            stack: Vec::new(),
            logs: None,
            return_data: ([0; 32], Vec::new()),
            cpi_failure: None,
            dirty_error: None,
            interpreted: false,
            pda_cache: HashMap::new(),
            curve_cache: HashMap::new(),
            last_cu: 0,
            loader: Arc::new(loader),
            stacks: Vec::new(),
        };
        for (id, name) in [
            (SYSTEM_PROGRAM, "system"),
            (builtins::TOKEN_PROGRAM, "spl-token"),
            (builtins::TOKEN_2022_PROGRAM, "spl-token-2022"),
            (builtins::ATA_PROGRAM, "associated-token"),
        ] {
            env.add_program_account(id, name);
        }
        env
    }

    /// Loads (verifies, JIT-compiles) a BPF program from its .so.
    pub fn load_program(&mut self, id: Key, name: &'static str, elf: &[u8]) -> Result<(), String> {
        let mut exe = Executable::<Ctx>::from_elf(elf, self.loader.clone()).map_err(|e| format!("{name}: load: {e}"))?;
        exe.verify::<solana_sbpf::verifier::RequisiteVerifier>().map_err(|e| format!("{name}: verify: {e}"))?;
        exe.jit_compile().map_err(|e| format!("{name}: jit: {e}"))?;
        self.programs.insert(id, Arc::new(exe));
        self.add_program_account(id, name);
        Ok(())
    }

    fn add_program_account(&mut self, id: Key, name: &'static str) {
        let owner = if self.programs.contains_key(&id) { crate::keys::UPGRADEABLE_LOADER } else { crate::keys::NATIVE_LOADER };
        self.accounts.insert(id, Account { lamports: 1_141_440, data: vec![], owner, executable: true });
        self.names.insert(id, name);
    }

    pub fn name(&self, k: &Key) -> String {
        self.names.get(k).map(|s| s.to_string()).unwrap_or_else(|| crate::keys::short(k))
    }

    pub fn get(&self, k: &Key) -> Account {
        self.accounts.get(k).cloned().unwrap_or_default()
    }

    pub fn total_lamports(&self) -> u128 {
        self.accounts.values().map(|a| a.lamports as u128).sum()
    }

    pub fn pda(&mut self, seeds: &[&[u8]], program: &Key) -> Option<Key> {
        let mut k = Vec::with_capacity(64);
        for s in seeds {
            k.push(s.len() as u8);
            k.extend_from_slice(s);
        }
        k.extend_from_slice(program);
        if let Some(v) = self.pda_cache.get(&k) {
            return *v;
        }
        let v = crate::pda::create_program_address(seeds, program);
        if self.pda_cache.len() > 100_000 {
            self.pda_cache.clear();
        }
        self.pda_cache.insert(k, v);
        v
    }

    pub fn find_pda(&mut self, seeds: &[&[u8]], program: &Key) -> Option<(Key, u8)> {
        for bump in (0..=255u8).rev() {
            let b = [bump];
            let mut all: Vec<&[u8]> = seeds.to_vec();
            all.push(&b);
            if let Some(k) = self.pda(&all, program) {
                return Some((k, bump));
            }
        }
        None
    }

    /// Runs one top-level instruction as a transaction of its own: all or
    /// nothing, lamports balanced, rent states checked.
    pub fn process(&mut self, ix: &Instr) -> Outcome {
        let mut keys: Vec<Key> = Vec::new();
        for m in &ix.metas {
            if !keys.contains(&m.key) {
                keys.push(m.key);
            }
        }
        let snapshot: Vec<(Key, Option<Account>)> = keys.iter().map(|k| (*k, self.accounts.get(k).cloned())).collect();
        self.remaining = COMPUTE_BUDGET;
        self.stack.clear();
        self.return_data = ([0; 32], Vec::new());
        self.cpi_failure = None;
        self.dirty_error = None;
        // Executable accounts are demoted to read-only, as the message
        // sanitizer does; duplicates share the OR of their privileges.
        let metas: Vec<Meta> = ix
            .metas
            .iter()
            .map(|m| {
                let mut signer = false;
                let mut writable = false;
                for o in ix.metas.iter().filter(|o| o.key == m.key) {
                    signer |= o.signer;
                    writable |= o.writable;
                }
                if self.accounts.get(&m.key).is_some_and(|a| a.executable) {
                    writable = false;
                }
                Meta { key: m.key, signer, writable }
            })
            .collect();
        // A transaction is signed by keypairs: an address off the curve (a
        // PDA) cannot sign one.
        let pda_signer = metas.iter().find(|m| m.signer && !*self.curve_cache.entry(m.key).or_insert_with(|| crate::keys::on_curve(&m.key)));
        let mut out = if let Some(m) = pda_signer {
            Outcome::Refused(format!("OffCurveSigner({})", self.name(&m.key)))
        } else if !metas.iter().any(|m| m.key == ix.program) && !self.accounts.get(&ix.program).is_some_and(|a| a.executable) {
            Outcome::Refused("ProgramAccountNotFound".into())
        } else {
            match self.invoke(&ix.program, &metas, &ix.data) {
                Ok(()) => Outcome::Ok,
                Err(o) => o,
            }
        };
        self.last_cu = COMPUTE_BUDGET - self.remaining;
        if out.is_ok() {
            // Rent state transitions (Agave: a writable account may not become
            // rent-paying, nor a rent-paying one grow or gain).
            for (k, pre) in &snapshot {
                let post = self.get(k);
                if post.lamports == 0 || post.lamports >= self.sysvars.rent_minimum(post.data.len()) {
                    continue;
                }
                let pre = pre.clone().unwrap_or_default();
                let pre_paying = pre.lamports > 0 && pre.lamports < self.sysvars.rent_minimum(pre.data.len());
                if !(pre_paying && post.data.len() == pre.data.len() && post.lamports <= pre.lamports) {
                    out = Outcome::Refused(format!("InsufficientFundsForRent({})", self.name(k)));
                    break;
                }
            }
        }
        if out.is_ok() {
            for k in &keys {
                if self.accounts.get(k).is_some_and(|a| a.lamports == 0) {
                    self.accounts.remove(k);
                }
            }
        } else {
            for (k, a) in snapshot {
                match a {
                    Some(a) => {
                        self.accounts.insert(k, a);
                    }
                    None => {
                        self.accounts.remove(&k);
                    }
                }
            }
        }
        out
    }

    /// Runs `program` on `metas` (privileges already granted).
    pub fn invoke(&mut self, program: &Key, metas: &[Meta], data: &[u8]) -> Result<(), Outcome> {
        if self.stack.len() >= MAX_INVOKE_HEIGHT {
            return Err(Outcome::Refused("CallDepth".into()));
        }
        if let Some(pos) = self.stack.iter().position(|p| p == program) {
            if pos + 1 != self.stack.len() {
                return Err(Outcome::Refused("ReentrancyNotAllowed".into()));
            }
        }
        let pre_sum: u128 = unique(metas).iter().map(|m| self.get(&m.key).lamports as u128).sum();
        self.stack.push(*program);
        let r = if let Some(exe) = self.programs.get(program).cloned() {
            self.run_bpf(&exe, program, metas, data)
        } else {
            builtins::process(self, program, metas, data)
        };
        self.stack.pop();
        r?;
        let post_sum: u128 = unique(metas).iter().map(|m| self.get(&m.key).lamports as u128).sum();
        if pre_sum != post_sum {
            return Err(Outcome::Violation { program: *program, what: format!("UnbalancedInstruction ({pre_sum} -> {post_sum})") });
        }
        Ok(())
    }

    fn run_bpf(&mut self, exe: &Arc<Executable<Ctx>>, program: &Key, metas: &[Meta], data: &[u8]) -> Result<(), Outcome> {
        // Layout.
        let mut frame_accounts: Vec<FrameAccount> = Vec::with_capacity(metas.len());
        let mut len = 8usize;
        for m in metas.iter() {
            if let Some(first) = frame_accounts.iter().position(|f| f.key == m.key) {
                let record = frame_accounts[first].record;
                let pre_len = frame_accounts[first].pre_len;
                frame_accounts.push(FrameAccount { key: m.key, signer: m.signer, writable: m.writable, record, pre_len, dup: true });
                len += 8;
            } else {
                let dlen = self.accounts.get(&m.key).map_or(0, |a| a.data.len());
                frame_accounts.push(FrameAccount { key: m.key, signer: m.signer, writable: m.writable, record: len, pre_len: dlen, dup: false });
                len += REC_DATA + dlen + MAX_PERMITTED_DATA_INCREASE + pad8(dlen) + 8;
            }
        }
        let ix_data_at = len;
        len += 8 + data.len() + 32;
        let mut input = AlignedMemory::<{ ebpf::HOST_ALIGN }>::zero_filled(len);
        {
            let buf = input.as_slice_mut();
            buf[0..8].copy_from_slice(&(metas.len() as u64).to_le_bytes());
            let mut at = 8;
            for (i, f) in frame_accounts.iter().enumerate() {
                if f.dup {
                    let first = frame_accounts.iter().position(|g| g.key == f.key).unwrap();
                    buf[at] = first as u8;
                    at += 8;
                    let _ = i;
                    continue;
                }
                let acc = self.accounts.get(&f.key);
                buf[at] = NON_DUP_MARKER;
                buf[at + 1] = f.signer as u8;
                buf[at + 2] = f.writable as u8;
                buf[at + 3] = acc.is_some_and(|a| a.executable) as u8;
                buf[at + REC_KEY..at + REC_KEY + 32].copy_from_slice(&f.key);
                if let Some(a) = acc {
                    buf[at + REC_OWNER..at + REC_OWNER + 32].copy_from_slice(&a.owner);
                    buf[at + REC_LAMPORTS..at + REC_LAMPORTS + 8].copy_from_slice(&a.lamports.to_le_bytes());
                    buf[at + REC_LEN..at + REC_LEN + 8].copy_from_slice(&(a.data.len() as u64).to_le_bytes());
                    buf[at + REC_DATA..at + REC_DATA + a.data.len()].copy_from_slice(&a.data);
                }
                let dlen = f.pre_len;
                at += REC_DATA + dlen + MAX_PERMITTED_DATA_INCREASE + pad8(dlen);
                buf[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes()); // rent epoch
                at += 8;
            }
            debug_assert_eq!(at, ix_data_at);
            buf[at..at + 8].copy_from_slice(&(data.len() as u64).to_le_bytes());
            buf[at + 8..at + 8 + data.len()].copy_from_slice(data);
            buf[at + 8 + data.len()..].copy_from_slice(program);
        }
        let mut frame = Frame { program: *program, accounts: frame_accounts, input: input.as_slice_mut().as_mut_ptr(), input_len: len, cpi_done: false };

        // Stack and heap, reused per depth (zeroed each run).
        let depth = self.stack.len();
        let config = exe.get_config();
        while self.stacks.len() < depth {
            self.stacks.push((
                AlignedMemory::zero_filled(config.stack_size()),
                AlignedMemory::zero_filled(32 * 1024),
            ));
        }
        let (mut stack, mut heap) = std::mem::replace(&mut self.stacks[depth - 1], (AlignedMemory::zero_filled(0), AlignedMemory::zero_filled(0)));
        stack.as_slice_mut().fill(0);
        heap.as_slice_mut().fill(0);
        let version = exe.get_sbpf_version();
        let result = {
            let regions = vec![
                exe.get_ro_region(),
                MemoryRegion::new_writable_gapped(stack.as_slice_mut(), ebpf::MM_STACK_START, config.stack_frame_size as u64),
                MemoryRegion::new_writable(heap.as_slice_mut(), ebpf::MM_HEAP_START),
                MemoryRegion::new_writable(input.as_slice_mut(), ebpf::MM_INPUT_START),
            ];
            let mapping = match MemoryMapping::new(regions, config, version) {
                Ok(m) => m,
                Err(e) => return Err(Outcome::Crash { program: *program, what: format!("mapping: {e}") }),
            };
            let mut ctx = Ctx { env: self as *mut Env, frame: &mut frame as *mut Frame };
            let stack_len = stack.len();
            let mut vm = EbpfVm::new(exe.get_loader().clone(), version, &mut ctx, mapping, stack_len);
            vm.registers[1] = ebpf::MM_INPUT_START;
            let (_, result) = vm.execute_program(exe, self.interpreted);
            result
        };
        self.stacks[depth - 1] = (stack, heap);

        match result {
            ProgramResult::Ok(0) => self.deserialize(&frame, input.as_slice()),
            ProgramResult::Ok(code) => {
                if !frame.cpi_done && self.dirty_error.is_none() {
                    if let Some(what) = self.changed_accounts(&frame, input.as_slice()) {
                        self.dirty_error = Some((*program, what));
                    }
                }
                Err(Outcome::ProgramError { program: *program, code })
            }
            ProgramResult::Err(EbpfError::SyscallError(e)) if e.is::<sbf::CpiFailed>() => {
                Err(self.cpi_failure.take().unwrap_or(Outcome::Refused("CpiFailed".into())))
            }
            ProgramResult::Err(EbpfError::SyscallError(e)) if e.is::<sbf::Refused>() => Err(Outcome::Refused(e.to_string())),
            ProgramResult::Err(EbpfError::SyscallError(e)) if e.is::<sbf::Violation>() => {
                Err(Outcome::Violation { program: *program, what: e.to_string() })
            }
            ProgramResult::Err(e) => Err(Outcome::Crash { program: *program, what: e.to_string() }),
        }
    }

    /// Names the accounts whose serialized state differs from the bank.
    fn changed_accounts(&self, frame: &Frame, buf: &[u8]) -> Option<String> {
        let mut changed = Vec::new();
        for f in frame.accounts.iter().filter(|f| !f.dup) {
            let (lamports, owner, data) = read_record(buf, f);
            let pre = self.get(&f.key);
            if pre.lamports != lamports || pre.owner != owner || pre.data != data {
                changed.push(self.name(&f.key));
            }
        }
        (!changed.is_empty()).then(|| changed.join(","))
    }

    /// Applies a finished frame's buffer to the bank with the runtime's rules.
    fn deserialize(&mut self, frame: &Frame, buf: &[u8]) -> Result<(), Outcome> {
        for f in frame.accounts.iter().filter(|f| !f.dup) {
            let post_len = u64::from_le_bytes(buf[f.record + REC_LEN..f.record + REC_LEN + 8].try_into().unwrap()) as usize;
            if post_len.saturating_sub(f.pre_len) > MAX_PERMITTED_DATA_INCREASE || post_len > MAX_PERMITTED_DATA_LENGTH {
                return Err(Outcome::Violation { program: frame.program, what: format!("InvalidRealloc({})", self.name(&f.key)) });
            }
            let (lamports, owner, data) = read_record(buf, f);
            self.apply(&frame.program, f.writable, &f.key, lamports, &owner, data)
                .map_err(|what| Outcome::Violation { program: frame.program, what })?;
        }
        Ok(())
    }

    /// The runtime's rules for what `program` may change in an account
    /// (BorrowedAccount::set_lamports/set_data/set_owner), then the change.
    pub fn apply(&mut self, program: &Key, writable: bool, key: &Key, lamports: u64, owner: &Key, data: &[u8]) -> Result<(), String> {
        let pre = self.accounts.get(key);
        let (pre_lamports, pre_owner, pre_data, exec) = match pre {
            Some(a) => (a.lamports, a.owner, &a.data[..], a.executable),
            None => (0, SYSTEM_PROGRAM, &[][..], false),
        };
        let lamports_changed = lamports != pre_lamports;
        let data_changed = data != pre_data;
        let owner_changed = owner != &pre_owner;
        if !lamports_changed && !data_changed && !owner_changed {
            return Ok(());
        }
        let name = self.name(key);
        let owned = &pre_owner == program;
        if lamports_changed {
            if exec {
                return Err(format!("ExecutableLamportChange({name})"));
            }
            if !writable {
                return Err(format!("ReadonlyLamportChange({name})"));
            }
            if lamports < pre_lamports && !owned {
                return Err(format!("ExternalAccountLamportSpend({name})"));
            }
        }
        if data_changed {
            if exec {
                return Err(format!("ExecutableDataModified({name})"));
            }
            if !writable {
                return Err(format!("ReadonlyDataModified({name})"));
            }
            if !owned {
                return Err(format!("ExternalAccountDataModified({name})"));
            }
        }
        if owner_changed && (!writable || !owned || exec || data.iter().any(|&b| b != 0)) {
            return Err(format!("ModifiedProgramId({name})"));
        }
        let acc = self.accounts.entry(*key).or_default();
        acc.lamports = lamports;
        if data_changed {
            acc.data.clear();
            acc.data.extend_from_slice(data);
        }
        acc.owner = *owner;
        Ok(())
    }

    /// `sol_invoke_signed_c`, after the syscall has read the caller's
    /// structures: `infos` are (key, lamports ptr, data ptr, data len, owner
    /// ptr, address of the info's data_len field) in VM addresses.
    pub fn cpi(&mut self, frame: &mut Frame, callee: CpiInstr, infos: &[CpiInfo], signers: &[Key]) -> Result<(), Outcome> {
        let caller = frame.program;
        let refuse = |s: String| Outcome::Refused(s);
        // Privileges.
        let mut metas: Vec<Meta> = Vec::with_capacity(callee.metas.len());
        for m in &callee.metas {
            let Some(fa) = frame.accounts.iter().find(|f| f.key == m.key) else {
                return Err(refuse(format!("MissingAccount({})", self.name(&m.key))));
            };
            // Duplicates in the caller's list share privileges.
            let (cs, cw) = frame.accounts.iter().filter(|f| f.key == m.key).fold((false, false), |(s, w), f| (s | f.signer, w | f.writable));
            let _ = fa;
            if m.writable && !cw {
                return Err(refuse(format!("PrivilegeEscalation(writable {})", self.name(&m.key))));
            }
            if m.signer && !cs && !signers.contains(&m.key) {
                return Err(refuse(format!("PrivilegeEscalation(signer {})", self.name(&m.key))));
            }
            metas.push(*m);
        }
        // OR privileges of duplicates in the callee's list.
        let metas: Vec<Meta> = metas
            .iter()
            .map(|m| {
                let (s, w) = metas.iter().filter(|o| o.key == m.key).fold((false, false), |(s, w), o| (s | o.signer, w | o.writable));
                Meta { key: m.key, signer: s, writable: w }
            })
            .collect();
        if !frame.accounts.iter().any(|f| f.key == callee.program) {
            return Err(refuse(format!("MissingAccount(program {})", self.name(&callee.program))));
        }
        if !self.accounts.get(&callee.program).is_some_and(|a| a.executable) {
            return Err(refuse("AccountNotExecutable".into()));
        }
        // Caller -> bank, for each account of the callee, through its info.
        let input_vm = ebpf::MM_INPUT_START;
        // SAFETY: the frame's buffer outlives the CPI (it is the caller's
        // input region, borrowed by the suspended VM only through the
        // mapping).
        let buf = unsafe { std::slice::from_raw_parts_mut(frame.input, frame.input_len) };
        let mut synced: Vec<(usize, usize)> = Vec::new(); // (frame account, info)
        for m in unique(&metas) {
            let Some(ii) = infos.iter().position(|i| i.key == m.key) else {
                return Err(refuse(format!("MissingAccountInfo({})", self.name(&m.key))));
            };
            let fi = frame.accounts.iter().position(|f| f.key == m.key && !f.dup).unwrap();
            let f = &frame.accounts[fi];
            let info = &infos[ii];
            let rec = input_vm + f.record as u64;
            if info.lamports_addr != rec + REC_LAMPORTS as u64 || info.owner_addr != rec + REC_OWNER as u64 || info.data_addr != rec + REC_DATA as u64 {
                return Err(Outcome::Violation { program: caller, what: format!("InvalidAccountInfoPointer({})", self.name(&m.key)) });
            }
            let serialized_len = u64::from_le_bytes(buf[f.record + REC_LEN..f.record + REC_LEN + 8].try_into().unwrap());
            if info.data_len > (f.pre_len + MAX_PERMITTED_DATA_INCREASE) as u64 || info.data_len != serialized_len {
                return Err(Outcome::Violation { program: caller, what: format!("InvalidAccountInfoLength({})", self.name(&m.key)) });
            }
            let (lamports, owner, data) = read_record(buf, f);
            let (writable, key) = (f.writable, f.key);
            self.apply(&caller, writable, &key, lamports, &owner, data).map_err(|what| Outcome::Violation { program: caller, what })?;
            synced.push((fi, ii));
        }
        // The callee.
        self.invoke(&callee.program, &metas, &callee.data)?;
        // Bank -> caller.
        for (fi, ii) in synced {
            let f = frame.accounts[fi].clone();
            let acc = self.get(&f.key);
            if acc.data.len().saturating_sub(f.pre_len) > MAX_PERMITTED_DATA_INCREASE {
                return Err(Outcome::Violation { program: callee.program, what: format!("InvalidRealloc in CPI({})", self.name(&f.key)) });
            }
            let r = f.record;
            let old_len = u64::from_le_bytes(buf[r + REC_LEN..r + REC_LEN + 8].try_into().unwrap()) as usize;
            buf[r + REC_OWNER..r + REC_OWNER + 32].copy_from_slice(&acc.owner);
            buf[r + REC_LAMPORTS..r + REC_LAMPORTS + 8].copy_from_slice(&acc.lamports.to_le_bytes());
            buf[r + REC_LEN..r + REC_LEN + 8].copy_from_slice(&(acc.data.len() as u64).to_le_bytes());
            buf[r + REC_DATA..r + REC_DATA + acc.data.len()].copy_from_slice(&acc.data);
            if old_len > acc.data.len() {
                buf[r + REC_DATA + acc.data.len()..r + REC_DATA + old_len].fill(0);
            }
            let _ = ii;
        }
        frame.cpi_done = true;
        Ok(())
    }
}

/// The instruction a CPI asks for.
pub struct CpiInstr {
    pub program: Key,
    pub metas: Vec<Meta>,
    pub data: Vec<u8>,
}

/// One SolAccountInfo of a CPI, with its VM pointers.
pub struct CpiInfo {
    pub key: Key,
    pub lamports_addr: u64,
    pub data_addr: u64,
    pub data_len: u64,
    pub owner_addr: u64,
}

fn pad8(n: usize) -> usize {
    (8 - n % 8) % 8
}

/// The first occurrence of each key.
pub fn unique(metas: &[Meta]) -> Vec<Meta> {
    let mut out: Vec<Meta> = Vec::with_capacity(metas.len());
    for m in metas {
        if !out.iter().any(|o| o.key == m.key) {
            out.push(*m);
        }
    }
    out
}

fn read_record<'a>(buf: &'a [u8], f: &FrameAccount) -> (u64, Key, &'a [u8]) {
    let r = f.record;
    let owner: Key = buf[r + REC_OWNER..r + REC_OWNER + 32].try_into().unwrap();
    let lamports = u64::from_le_bytes(buf[r + REC_LAMPORTS..r + REC_LAMPORTS + 8].try_into().unwrap());
    let len = (u64::from_le_bytes(buf[r + REC_LEN..r + REC_LEN + 8].try_into().unwrap()) as usize).min(f.pre_len + MAX_PERMITTED_DATA_INCREASE);
    (lamports, owner, &buf[r + REC_DATA..r + REC_DATA + len])
}
