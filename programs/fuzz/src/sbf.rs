//! The VM side: the context object and the syscalls our programs link
//! (see `readelf --dyn-syms programs/target/deploy/*.so`), with Agave's
//! compute costs where they matter for the budget.
//!
//! | syscall | here |
//! |---|---|
//! | `sol_log_`, `sol_log_64_`, `sol_log_pubkey`, `sol_log_data`, `sol_log_compute_units_` | charged, kept only when logs are captured (`--verbose`, reproductions) |
//! | `sol_memcpy_`/`memmove_`/`memset_`/`memcmp_` | native, bounds via the memory mapping; overlapping memcpy is an error as in Agave |
//! | `sol_sha256` | the SDK's SHA-256 |
//! | `sol_create_program_address`, `sol_try_find_program_address` | SHA-256 + the curve test (curve25519-dalek) |
//! | `sol_get_clock_sysvar`, `sol_get_rent_sysvar`, `sol_get_sysvar` (Clock, Rent, SlotHashes) | from `Env::sysvars`, which the fuzzer drives |
//! | `sol_set_return_data`, `sol_get_return_data` | kept in `Env` |
//! | `sol_invoke_signed_c` | `Env::cpi` |
//! | `sol_panic_`, `abort` | stop the VM (a crash finding) |

use std::fmt;
use std::ptr::NonNull;

use solana_sbpf::declare_builtin_function;
use solana_sbpf::error::EbpfError;
use solana_sbpf::memory_region::{AccessType, MemoryMapping};
use solana_sbpf::program::BuiltinProgram;
use solana_sbpf::vm::ContextObject;

use crate::runtime::{CpiInfo, CpiInstr, Env, Frame, Key, Meta};

/// The VM's context: the bank and the invocation being run.
pub struct Ctx {
    pub env: *mut Env,
    pub frame: *mut Frame,
}

impl Ctx {
    fn env(&mut self) -> &mut Env {
        // SAFETY: the Env outlives every VM it runs (Env::run_bpf) and is only
        // reached through this pointer while the VM runs.
        unsafe { &mut *self.env }
    }
    fn frame(&mut self) -> &mut Frame {
        // SAFETY: as for env: the frame lives on run_bpf's stack during the run.
        unsafe { &mut *self.frame }
    }
    fn charge(&mut self, cu: u64) -> Result<(), Box<dyn std::error::Error>> {
        let env = self.env();
        if env.remaining < cu {
            env.remaining = 0;
            return Err(Box::new(Crash("compute budget exceeded in a syscall".into())));
        }
        env.remaining -= cu;
        Ok(())
    }
}

impl ContextObject for Ctx {
    fn consume(&mut self, amount: u64) {
        let env = self.env();
        env.remaining = env.remaining.saturating_sub(amount);
    }
    fn get_remaining(&self) -> u64 {
        // SAFETY: see Ctx::env.
        unsafe { (*self.env).remaining }
    }
}

/// A callee failed; its outcome is in `Env::cpi_failure`.
#[derive(Debug)]
pub struct CpiFailed;
impl fmt::Display for CpiFailed {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "cross-program invocation failed")
    }
}
impl std::error::Error for CpiFailed {}

/// The runtime refused a CPI (privileges, unknown account...).
#[derive(Debug)]
pub struct Refused(pub String);
impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for Refused {}

/// The program broke a runtime rule.
#[derive(Debug)]
pub struct Violation(pub String);
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for Violation {}

/// The program stopped: panic, abort, a syscall misused.
#[derive(Debug)]
pub struct Crash(pub String);
impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl std::error::Error for Crash {}

type R = Result<u64, Box<dyn std::error::Error>>;

fn map(mm: &MemoryMapping, access: AccessType, addr: u64, len: u64) -> Result<*mut u8, Box<dyn std::error::Error>> {
    if len == 0 {
        return Ok(NonNull::dangling().as_ptr());
    }
    let r: Result<u64, EbpfError> = mm.map(access, addr, len).into();
    Ok(r.map_err(|e| Box::new(e) as Box<dyn std::error::Error>)? as *mut u8)
}

fn slice<'a>(mm: &MemoryMapping, addr: u64, len: u64) -> Result<&'a [u8], Box<dyn std::error::Error>> {
    let p = map(mm, AccessType::Load, addr, len)?;
    // SAFETY: the mapping checked that [addr, addr + len) lies in one region.
    Ok(unsafe { std::slice::from_raw_parts(p, len as usize) })
}

fn slice_mut<'a>(mm: &MemoryMapping, addr: u64, len: u64) -> Result<&'a mut [u8], Box<dyn std::error::Error>> {
    let p = map(mm, AccessType::Store, addr, len)?;
    // SAFETY: as in slice, and the region is writable.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len as usize) })
}


fn key_at(mm: &MemoryMapping, addr: u64) -> Result<Key, Box<dyn std::error::Error>> {
    Ok(slice(mm, addr, 32)?.try_into().unwrap())
}

/// A (ptr, len) array of byte slices in VM memory.
fn slices<'a>(mm: &MemoryMapping, addr: u64, n: u64) -> Result<Vec<&'a [u8]>, Box<dyn std::error::Error>> {
    let table = slice(mm, addr, n.checked_mul(16).ok_or_else(|| Box::new(Crash("slice table overflow".into())))?)?;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let p = u64::from_le_bytes(table[16 * i..16 * i + 8].try_into().unwrap());
        let l = u64::from_le_bytes(table[16 * i + 8..16 * i + 16].try_into().unwrap());
        out.push(slice(mm, p, l)?);
    }
    Ok(out)
}

fn log(ctx: &mut Ctx, line: impl FnOnce() -> String) {
    if let Some(logs) = ctx.env().logs.as_mut() {
        logs.push(line());
    }
}

declare_builtin_function!(SolLog, fn rust(ctx: &mut Ctx, addr: u64, len: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100.max(len))?;
    let s = slice(mm, addr, len)?;
    log(ctx, || format!("Program log: {}", String::from_utf8_lossy(s)));
    Ok(0)
});

declare_builtin_function!(SolLog64, fn rust(ctx: &mut Ctx, a: u64, b: u64, c: u64, d: u64, e: u64, _mm: &mut MemoryMapping,) -> R {
    ctx.charge(100)?;
    log(ctx, || format!("Program log: {a:#x}, {b:#x}, {c:#x}, {d:#x}, {e:#x}"));
    Ok(0)
});

declare_builtin_function!(SolLogPubkey, fn rust(ctx: &mut Ctx, addr: u64, _b: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100)?;
    let k = key_at(mm, addr)?;
    log(ctx, || format!("Program log: {}", crate::keys::short(&k)));
    Ok(0)
});

declare_builtin_function!(SolLogData, fn rust(ctx: &mut Ctx, addr: u64, n: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100)?;
    let parts = slices(mm, addr, n)?;
    let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
    ctx.charge(total)?;
    log(ctx, || format!("Program data: {} field(s), {} bytes", parts.len(), total));
    Ok(0)
});

declare_builtin_function!(SolLogComputeUnits, fn rust(ctx: &mut Ctx, _a: u64, _b: u64, _c: u64, _d: u64, _e: u64, _mm: &mut MemoryMapping,) -> R {
    ctx.charge(100)?;
    Ok(0)
});

declare_builtin_function!(SolPanic, fn rust(ctx: &mut Ctx, file: u64, len: u64, line: u64, column: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    let f = slice(mm, file, len).map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_else(|_| "?".into());
    let _ = ctx;
    Err(Box::new(Crash(format!("panicked at {f}:{line}:{column}"))))
});

declare_builtin_function!(Abort, fn rust(_ctx: &mut Ctx, _a: u64, _b: u64, _c: u64, _d: u64, _e: u64, _mm: &mut MemoryMapping,) -> R {
    Err(Box::new(Crash("abort".into())))
});

fn mem_cost(ctx: &mut Ctx, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    ctx.charge(10.max(n / 250))
}

declare_builtin_function!(SolMemcpy, fn rust(ctx: &mut Ctx, dst: u64, src: u64, n: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    mem_cost(ctx, n)?;
    if (dst <= src && src < dst.saturating_add(n)) || (src <= dst && dst < src.saturating_add(n)) {
        return Err(Box::new(Crash("sol_memcpy_ with overlapping ranges".into())));
    }
    let s = slice(mm, src, n)?.to_vec();
    slice_mut(mm, dst, n)?.copy_from_slice(&s);
    Ok(0)
});

declare_builtin_function!(SolMemmove, fn rust(ctx: &mut Ctx, dst: u64, src: u64, n: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    mem_cost(ctx, n)?;
    let s = slice(mm, src, n)?.to_vec();
    slice_mut(mm, dst, n)?.copy_from_slice(&s);
    Ok(0)
});

declare_builtin_function!(SolMemset, fn rust(ctx: &mut Ctx, dst: u64, c: u64, n: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    mem_cost(ctx, n)?;
    slice_mut(mm, dst, n)?.fill(c as u8);
    Ok(0)
});

declare_builtin_function!(SolMemcmp, fn rust(ctx: &mut Ctx, a: u64, b: u64, n: u64, out: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    mem_cost(ctx, n)?;
    let x = slice(mm, a, n)?;
    let y = slice(mm, b, n)?;
    let mut r = 0i32;
    for i in 0..n as usize {
        if x[i] != y[i] {
            r = x[i] as i32 - y[i] as i32;
            break;
        }
    }
    slice_mut(mm, out, 4)?.copy_from_slice(&r.to_le_bytes());
    Ok(0)
});

declare_builtin_function!(SolSha256, fn rust(ctx: &mut Ctx, vals: u64, n: u64, out: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(85)?;
    let parts = slices(mm, vals, n)?;
    for p in &parts {
        ctx.charge(10.max(p.len() as u64 / 2))?;
    }
    let h = psyche_sdk::hash::hashv(&parts);
    slice_mut(mm, out, 32)?.copy_from_slice(&h);
    Ok(0)
});

fn seeds<'a>(mm: &MemoryMapping, addr: u64, n: u64) -> Result<Vec<&'a [u8]>, Box<dyn std::error::Error>> {
    if n > 16 {
        return Err(Box::new(Crash("BadSeeds: too many seeds".into())));
    }
    let s = slices(mm, addr, n)?;
    if s.iter().any(|s| s.len() > 32) {
        return Err(Box::new(Crash("BadSeeds: seed longer than 32 bytes".into())));
    }
    Ok(s)
}

declare_builtin_function!(SolCreateProgramAddress, fn rust(ctx: &mut Ctx, seeds_addr: u64, n: u64, program: u64, out: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(1500)?;
    let s = seeds(mm, seeds_addr, n)?;
    let p = key_at(mm, program)?;
    match ctx.env().pda(&s, &p) {
        Some(k) => {
            slice_mut(mm, out, 32)?.copy_from_slice(&k);
            Ok(0)
        }
        None => Ok(1),
    }
});

declare_builtin_function!(SolTryFindProgramAddress, fn rust(ctx: &mut Ctx, seeds_addr: u64, n: u64, program: u64, out: u64, bump_out: u64, mm: &mut MemoryMapping,) -> R {
    let s = seeds(mm, seeds_addr, n)?;
    if s.len() >= 16 {
        return Err(Box::new(Crash("BadSeeds: no room for the bump".into())));
    }
    let p = key_at(mm, program)?;
    for bump in (0..=255u8).rev() {
        ctx.charge(1500)?;
        let b = [bump];
        let mut all = s.clone();
        all.push(&b);
        if let Some(k) = ctx.env().pda(&all, &p) {
            slice_mut(mm, out, 32)?.copy_from_slice(&k);
            slice_mut(mm, bump_out, 1)?[0] = bump;
            return Ok(0);
        }
    }
    Ok(1)
});

declare_builtin_function!(SolGetClock, fn rust(ctx: &mut Ctx, out: u64, _b: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100 + 40)?;
    let b = ctx.env().sysvars.clock_bytes();
    slice_mut(mm, out, 40)?.copy_from_slice(&b);
    Ok(0)
});

declare_builtin_function!(SolGetRent, fn rust(ctx: &mut Ctx, out: u64, _b: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100 + 24)?;
    let b = ctx.env().sysvars.rent_bytes();
    slice_mut(mm, out, 24)?.copy_from_slice(&b);
    Ok(0)
});

declare_builtin_function!(SolGetSysvar, fn rust(ctx: &mut Ctx, id: u64, out: u64, offset: u64, len: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100 + len / 250)?;
    let id = key_at(mm, id)?;
    let sv = ctx.env().sysvars;
    let whole = if id == crate::keys::CLOCK_SYSVAR {
        Some(sv.clock_bytes().to_vec())
    } else if id == crate::keys::RENT_SYSVAR {
        Some(sv.rent_bytes()[..17].to_vec())
    } else {
        None
    };
    let bytes = match whole {
        Some(w) => match offset.checked_add(len) {
            Some(end) if end <= w.len() as u64 => w[offset as usize..end as usize].to_vec(),
            _ => return Ok(1),
        },
        None if id == crate::keys::SLOT_HASHES_SYSVAR => match sv.slot_hashes_read(offset, len) {
            Some(b) => b,
            None => return Ok(1),
        },
        None => return Ok(2),
    };
    slice_mut(mm, out, len)?.copy_from_slice(&bytes);
    Ok(0)
});

declare_builtin_function!(SolSetReturnData, fn rust(ctx: &mut Ctx, addr: u64, len: u64, _c: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100 + len / 250)?;
    if len > 1024 {
        return Err(Box::new(Crash("return data too large".into())));
    }
    let d = slice(mm, addr, len)?.to_vec();
    let p = ctx.frame().program;
    ctx.env().return_data = (p, d);
    Ok(0)
});

declare_builtin_function!(SolGetReturnData, fn rust(ctx: &mut Ctx, out: u64, len: u64, program: u64, _d: u64, _e: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(100)?;
    let (p, d) = ctx.env().return_data.clone();
    let n = (len as usize).min(d.len());
    if n > 0 {
        slice_mut(mm, out, n as u64)?.copy_from_slice(&d[..n]);
        slice_mut(mm, program, 32)?.copy_from_slice(&p);
    }
    Ok(d.len() as u64)
});

declare_builtin_function!(SolInvokeSignedC, fn rust(ctx: &mut Ctx, ix: u64, infos: u64, n_infos: u64, signers: u64, n_signers: u64, mm: &mut MemoryMapping,) -> R {
    ctx.charge(1000)?;
    // SolInstruction: program_id*, accounts*, accounts_len, data*, data_len.
    let raw = slice(mm, ix, 40)?;
    let w = |i: usize| u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap());
    let program = key_at(mm, w(0))?;
    let (metas_addr, n_metas, data_addr, data_len) = (w(1), w(2), w(3), w(4));
    if n_metas > 255 || data_len > 10 * 1024 || n_infos > 255 {
        return Err(Box::new(Refused("CPI limits exceeded".into())));
    }
    ctx.charge(data_len / 250)?;
    let mut metas = Vec::with_capacity(n_metas as usize);
    for i in 0..n_metas {
        // SolAccountMeta: pubkey*, is_writable, is_signer.
        let m = slice(mm, metas_addr + 16 * i, 16)?;
        let key = key_at(mm, u64::from_le_bytes(m[0..8].try_into().unwrap()))?;
        metas.push(Meta { key, writable: m[8] != 0, signer: m[9] != 0 });
    }
    let data = slice(mm, data_addr, data_len)?.to_vec();
    let mut cpi_infos = Vec::with_capacity(n_infos as usize);
    for i in 0..n_infos {
        // SolAccountInfo: key*, lamports*, data_len, data*, owner*, rent_epoch,
        // is_signer, is_writable, executable.
        let a = slice(mm, infos + 56 * i, 56)?;
        let f = |j: usize| u64::from_le_bytes(a[8 * j..8 * j + 8].try_into().unwrap());
        cpi_infos.push(CpiInfo { key: key_at(mm, f(0))?, lamports_addr: f(1), data_len: f(2), data_addr: f(3), owner_addr: f(4) });
    }
    if n_signers > 16 {
        return Err(Box::new(Crash("too many signers".into())));
    }
    let caller = ctx.frame().program;
    let mut pdas = Vec::new();
    for i in 0..n_signers {
        let s = slice(mm, signers + 16 * i, 16)?;
        let addr = u64::from_le_bytes(s[0..8].try_into().unwrap());
        let n = u64::from_le_bytes(s[8..16].try_into().unwrap());
        let sd = seeds(mm, addr, n)?;
        match ctx.env().pda(&sd, &caller) {
            Some(k) => pdas.push(k),
            None => return Err(Box::new(Crash("BadSeeds: signer seeds on the curve".into()))),
        }
    }
    // SAFETY: the frame and the bank are distinct objects (see Ctx::env).
    let (frame, env) = unsafe { (&mut *ctx.frame, &mut *ctx.env) };
    match env.cpi(frame, CpiInstr { program, metas, data }, &cpi_infos, &pdas) {
        Ok(()) => Ok(0),
        Err(o) => {
            env.cpi_failure = Some(o);
            Err(Box::new(CpiFailed))
        }
    }
});

/// Registers every syscall above under its runtime name.
pub fn register(loader: &mut BuiltinProgram<Ctx>) {
    let r = |l: &mut BuiltinProgram<Ctx>, name: &str, f| l.register_function(name, f).unwrap();
    r(loader, "sol_log_", SolLog::vm);
    r(loader, "sol_log_64_", SolLog64::vm);
    r(loader, "sol_log_pubkey", SolLogPubkey::vm);
    r(loader, "sol_log_data", SolLogData::vm);
    r(loader, "sol_log_compute_units_", SolLogComputeUnits::vm);
    r(loader, "sol_panic_", SolPanic::vm);
    r(loader, "abort", Abort::vm);
    r(loader, "sol_memcpy_", SolMemcpy::vm);
    r(loader, "sol_memmove_", SolMemmove::vm);
    r(loader, "sol_memset_", SolMemset::vm);
    r(loader, "sol_memcmp_", SolMemcmp::vm);
    r(loader, "sol_sha256", SolSha256::vm);
    r(loader, "sol_create_program_address", SolCreateProgramAddress::vm);
    r(loader, "sol_try_find_program_address", SolTryFindProgramAddress::vm);
    r(loader, "sol_get_clock_sysvar", SolGetClock::vm);
    r(loader, "sol_get_rent_sysvar", SolGetRent::vm);
    r(loader, "sol_get_sysvar", SolGetSysvar::vm);
    r(loader, "sol_set_return_data", SolSetReturnData::vm);
    r(loader, "sol_get_return_data", SolGetReturnData::vm);
    r(loader, "sol_invoke_signed_c", SolInvokeSignedC::vm);
}
