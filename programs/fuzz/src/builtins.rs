//! Models of the native programs our programs invoke, with the checks and
//! errors of the real ones on the paths used (documented simplifications):
//!
//! - System: CreateAccount, Assign, Transfer, Allocate (bincode tags 0, 1, 2,
//!   8); anything else is InvalidInstructionData.
//! - SPL Token and Token-2022 (base layouts only: extensions after byte 165 /
//!   82 are kept but not interpreted): MintTo, CloseAccount, TransferChecked,
//!   BurnChecked, and InitializeAccount3 for the ATA model; no delegates,
//!   no native (wrapped SOL) accounts, no multisig.
//! - Associated Token: CreateIdempotent.
//!
//! Every change goes through `Env::apply` under the program's own id, so the
//! runtime's rules hold for them too.

use crate::runtime::{unique, Account, Env, Key, Meta, Outcome, SYSTEM_PROGRAM};

pub const TOKEN_PROGRAM: Key = psyche_sdk::cpi::token::TOKEN_PROGRAM_ID.to_bytes();
pub const TOKEN_2022_PROGRAM: Key = psyche_sdk::cpi::token::TOKEN_2022_PROGRAM_ID.to_bytes();
pub const ATA_PROGRAM: Key = psyche_sdk::cpi::ata::ASSOCIATED_TOKEN_PROGRAM_ID.to_bytes();

pub const TOKEN_ACCOUNT_LEN: usize = 165;
pub const MINT_LEN: usize = 82;

// ProgramError's u64 encoding of the builtin errors.
const INVALID_ARGUMENT: u64 = 2 << 32;
const INVALID_INSTRUCTION_DATA: u64 = 3 << 32;
const INVALID_ACCOUNT_DATA: u64 = 4 << 32;
const INCORRECT_PROGRAM_ID: u64 = 7 << 32;
const MISSING_SIGNATURE: u64 = 8 << 32;
const NOT_ENOUGH_KEYS: u64 = 11 << 32;
const BORROW_FAILED: u64 = 12 << 32;
const INVALID_SEEDS: u64 = 14 << 32;
const ILLEGAL_OWNER: u64 = 18 << 32;
// System errors.
const ACCOUNT_ALREADY_IN_USE: u64 = 0;
const RESULT_WITH_NEGATIVE_LAMPORTS: u64 = 1;
const INVALID_ACCOUNT_DATA_LENGTH: u64 = 3;
// Token errors.
const TOKEN_INSUFFICIENT_FUNDS: u64 = 1;
const TOKEN_MINT_MISMATCH: u64 = 3;
const TOKEN_OWNER_MISMATCH: u64 = 4;
const TOKEN_FIXED_SUPPLY: u64 = 5;
const TOKEN_UNINITIALIZED: u64 = 9;
const TOKEN_NON_NATIVE_HAS_BALANCE: u64 = 11;
const TOKEN_OVERFLOW: u64 = 14;
const TOKEN_ACCOUNT_FROZEN: u64 = 17;
const TOKEN_DECIMALS_MISMATCH: u64 = 18;

pub fn process(env: &mut Env, program: &Key, metas: &[Meta], data: &[u8]) -> Result<(), Outcome> {
    let r = if program == &SYSTEM_PROGRAM {
        system(env, metas, data)
    } else if program == &TOKEN_PROGRAM || program == &TOKEN_2022_PROGRAM {
        token(env, program, metas, data)
    } else if program == &ATA_PROGRAM {
        ata(env, metas, data)
    } else {
        return Err(Outcome::Refused(format!("UnsupportedProgramId({})", env.name(program))));
    };
    r.map_err(|code| Outcome::ProgramError { program: *program, code })
}

type Res = Result<(), u64>;

fn commit(env: &mut Env, program: &Key, m: &Meta, a: &Account) -> Res {
    env.apply(program, m.writable, &m.key, a.lamports, &a.owner, &a.data).map_err(|e| {
        // A model bug, not the caller's: report loudly.
        panic!("builtin {} broke a runtime rule: {e}", crate::keys::short(program))
    })
}

fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

fn system(env: &mut Env, metas: &[Meta], data: &[u8]) -> Res {
    let tag = u32::from_le_bytes(data.get(0..4).ok_or(INVALID_INSTRUCTION_DATA)?.try_into().unwrap());
    let sp = SYSTEM_PROGRAM;
    let transfer = |env: &mut Env, from: &Meta, to: &Meta, lamports: u64| -> Res {
        if !from.signer {
            return Err(MISSING_SIGNATURE);
        }
        let mut f = env.get(&from.key);
        if !f.data.is_empty() {
            return Err(INVALID_ARGUMENT);
        }
        if f.owner != SYSTEM_PROGRAM {
            // The runtime refuses the debit (ExternalAccountLamportSpend).
            return Err(INVALID_ARGUMENT);
        }
        if lamports > f.lamports {
            return Err(RESULT_WITH_NEGATIVE_LAMPORTS);
        }
        if lamports == 0 {
            return Ok(());
        }
        if from.key == to.key {
            return Ok(());
        }
        if !from.writable || !to.writable {
            return Err(INVALID_ARGUMENT);
        }
        f.lamports -= lamports;
        let mut t = env.get(&to.key);
        t.lamports = t.lamports.checked_add(lamports).ok_or(INVALID_ARGUMENT)?;
        commit(env, &sp, from, &f)?;
        commit(env, &sp, to, &t)
    };
    let allocate = |env: &mut Env, m: &Meta, space: u64| -> Res {
        if !m.signer {
            return Err(MISSING_SIGNATURE);
        }
        let mut a = env.get(&m.key);
        if !a.data.is_empty() || a.owner != SYSTEM_PROGRAM {
            return Err(ACCOUNT_ALREADY_IN_USE);
        }
        if space > crate::runtime::MAX_PERMITTED_DATA_LENGTH as u64 {
            return Err(INVALID_ACCOUNT_DATA_LENGTH);
        }
        if space == 0 {
            return Ok(());
        }
        if !m.writable {
            return Err(INVALID_ARGUMENT);
        }
        a.data = vec![0; space as usize];
        commit(env, &sp, m, &a)
    };
    let assign = |env: &mut Env, m: &Meta, owner: Key| -> Res {
        let mut a = env.get(&m.key);
        if a.owner == owner {
            return Ok(());
        }
        if !m.signer {
            return Err(MISSING_SIGNATURE);
        }
        if a.owner != SYSTEM_PROGRAM || !m.writable || a.data.iter().any(|&b| b != 0) {
            return Err(INVALID_ARGUMENT);
        }
        a.owner = owner;
        commit(env, &sp, m, &a)
    };
    match tag {
        0 => {
            let (lamports, space) = (u64_at(data, 4).ok_or(INVALID_INSTRUCTION_DATA)?, u64_at(data, 12).ok_or(INVALID_INSTRUCTION_DATA)?);
            let owner: Key = data.get(20..52).ok_or(INVALID_INSTRUCTION_DATA)?.try_into().unwrap();
            let [from, to] = metas.get(0..2).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            if from.key == to.key {
                return Err(BORROW_FAILED);
            }
            if env.get(&to.key).lamports > 0 {
                return Err(ACCOUNT_ALREADY_IN_USE);
            }
            allocate(env, to, space)?;
            assign(env, to, owner)?;
            transfer(env, from, to, lamports)
        }
        1 => {
            let owner: Key = data.get(4..36).ok_or(INVALID_INSTRUCTION_DATA)?.try_into().unwrap();
            let m = metas.first().ok_or(NOT_ENOUGH_KEYS)?;
            assign(env, m, owner)
        }
        2 => {
            let lamports = u64_at(data, 4).ok_or(INVALID_INSTRUCTION_DATA)?;
            let [from, to] = metas.get(0..2).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            transfer(env, from, to, lamports)
        }
        8 => {
            let space = u64_at(data, 4).ok_or(INVALID_INSTRUCTION_DATA)?;
            let m = metas.first().ok_or(NOT_ENOUGH_KEYS)?;
            allocate(env, m, space)
        }
        _ => Err(INVALID_INSTRUCTION_DATA),
    }
}

/// A token account's base fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenAccount {
    pub mint: Key,
    pub owner: Key,
    pub amount: u64,
    pub state: u8,
}

pub fn read_token_account(d: &[u8]) -> Option<TokenAccount> {
    if d.len() < TOKEN_ACCOUNT_LEN {
        return None;
    }
    Some(TokenAccount { mint: d[0..32].try_into().unwrap(), owner: d[32..64].try_into().unwrap(), amount: u64_at(d, 64)?, state: d[108] })
}

pub fn token_account_data(mint: &Key, owner: &Key, amount: u64) -> Vec<u8> {
    let mut d = vec![0u8; TOKEN_ACCOUNT_LEN];
    d[0..32].copy_from_slice(mint);
    d[32..64].copy_from_slice(owner);
    d[64..72].copy_from_slice(&amount.to_le_bytes());
    d[108] = 1;
    d
}

/// Mint: COption authority (4 + 32), supply, decimals, initialized, COption freeze.
pub fn mint_data(authority: Option<&Key>, supply: u64, decimals: u8) -> Vec<u8> {
    let mut d = vec![0u8; MINT_LEN];
    if let Some(a) = authority {
        d[0] = 1;
        d[4..36].copy_from_slice(a);
    }
    d[36..44].copy_from_slice(&supply.to_le_bytes());
    d[44] = decimals;
    d[45] = 1;
    d
}

pub struct MintView {
    pub authority: Option<Key>,
    pub supply: u64,
    pub decimals: u8,
    pub initialized: bool,
}

pub fn read_mint(d: &[u8]) -> Option<MintView> {
    if d.len() < MINT_LEN {
        return None;
    }
    let authority = (d[0..4] == [1, 0, 0, 0]).then(|| d[4..36].try_into().unwrap());
    Some(MintView { authority, supply: u64_at(d, 36)?, decimals: d[44], initialized: d[45] == 1 })
}

fn token(env: &mut Env, program: &Key, metas: &[Meta], data: &[u8]) -> Res {
    let tag = *data.first().ok_or(INVALID_INSTRUCTION_DATA)?;
    let owned = |env: &Env, k: &Key| -> Res {
        if env.get(k).owner != *program {
            return Err(INCORRECT_PROGRAM_ID);
        }
        Ok(())
    };
    let account = |env: &Env, k: &Key| -> Result<TokenAccount, u64> {
        owned(env, k)?;
        let t = read_token_account(&env.get(k).data).ok_or(INVALID_ACCOUNT_DATA)?;
        match t.state {
            0 => Err(TOKEN_UNINITIALIZED),
            2 => Err(TOKEN_ACCOUNT_FROZEN),
            1 => Ok(t),
            _ => Err(INVALID_ACCOUNT_DATA),
        }
    };
    let mint = |env: &Env, k: &Key| -> Result<MintView, u64> {
        owned(env, k)?;
        let m = read_mint(&env.get(k).data).ok_or(INVALID_ACCOUNT_DATA)?;
        if !m.initialized {
            return Err(TOKEN_UNINITIALIZED);
        }
        Ok(m)
    };
    let set_amount = |env: &mut Env, m: &Meta, amount: u64| -> Res {
        let mut a = env.get(&m.key);
        a.data[64..72].copy_from_slice(&amount.to_le_bytes());
        if !m.writable {
            return Err(INVALID_ARGUMENT);
        }
        commit(env, program, m, &a)
    };
    let set_supply = |env: &mut Env, m: &Meta, supply: u64| -> Res {
        let mut a = env.get(&m.key);
        a.data[36..44].copy_from_slice(&supply.to_le_bytes());
        if !m.writable {
            return Err(INVALID_ARGUMENT);
        }
        commit(env, program, m, &a)
    };
    let amount_arg = || u64_at(data, 1).ok_or(INVALID_INSTRUCTION_DATA);
    match tag {
        // MintTo { amount }: mint [w], account [w], authority [s].
        7 => {
            let [m, a, auth] = metas.get(0..3).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            let amount = amount_arg()?;
            let mv = mint(env, &m.key)?;
            let t = account(env, &a.key)?;
            if t.mint != m.key {
                return Err(TOKEN_MINT_MISMATCH);
            }
            match mv.authority {
                None => return Err(TOKEN_FIXED_SUPPLY),
                Some(k) if k != auth.key => return Err(TOKEN_OWNER_MISMATCH),
                _ => {}
            }
            if !auth.signer {
                return Err(MISSING_SIGNATURE);
            }
            let supply = mv.supply.checked_add(amount).ok_or(TOKEN_OVERFLOW)?;
            let bal = t.amount.checked_add(amount).ok_or(TOKEN_OVERFLOW)?;
            set_supply(env, m, supply)?;
            set_amount(env, a, bal)
        }
        // CloseAccount: account [w], destination [w], authority [s].
        9 => {
            let [a, dest, auth] = metas.get(0..3).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            let t = account(env, &a.key)?;
            if a.key == dest.key {
                return Err(INVALID_ACCOUNT_DATA);
            }
            if t.amount != 0 {
                return Err(TOKEN_NON_NATIVE_HAS_BALANCE);
            }
            if t.owner != auth.key {
                return Err(TOKEN_OWNER_MISMATCH);
            }
            if !auth.signer {
                return Err(MISSING_SIGNATURE);
            }
            if !a.writable || !dest.writable {
                return Err(INVALID_ARGUMENT);
            }
            let acc = env.get(&a.key);
            let mut d = env.get(&dest.key);
            d.lamports = d.lamports.checked_add(acc.lamports).ok_or(TOKEN_OVERFLOW)?;
            commit(env, program, dest, &d)?;
            let closed = Account { lamports: 0, data: vec![], owner: SYSTEM_PROGRAM, executable: false };
            // Zero the data first, then hand it back (set_owner needs zeroes).
            let zeroed = Account { lamports: 0, data: vec![], owner: *program, executable: false };
            commit(env, program, a, &zeroed)?;
            commit(env, program, a, &closed)
        }
        // TransferChecked { amount, decimals }: source [w], mint, destination [w], authority [s].
        12 => {
            let [src, m, dst, auth] = metas.get(0..4).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            let amount = amount_arg()?;
            let decimals = *data.get(9).ok_or(INVALID_INSTRUCTION_DATA)?;
            let s = account(env, &src.key)?;
            let d = account(env, &dst.key)?;
            if s.mint != d.mint || s.mint != m.key {
                return Err(TOKEN_MINT_MISMATCH);
            }
            let mv = mint(env, &m.key)?;
            if mv.decimals != decimals {
                return Err(TOKEN_DECIMALS_MISMATCH);
            }
            if s.owner != auth.key {
                return Err(TOKEN_OWNER_MISMATCH);
            }
            if !auth.signer {
                return Err(MISSING_SIGNATURE);
            }
            if s.amount < amount {
                return Err(TOKEN_INSUFFICIENT_FUNDS);
            }
            if src.key == dst.key {
                return Ok(());
            }
            let to = d.amount.checked_add(amount).ok_or(TOKEN_OVERFLOW)?;
            set_amount(env, src, s.amount - amount)?;
            set_amount(env, dst, to)
        }
        // BurnChecked { amount, decimals }: account [w], mint [w], authority [s].
        15 => {
            let [a, m, auth] = metas.get(0..3).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            let amount = amount_arg()?;
            let decimals = *data.get(9).ok_or(INVALID_INSTRUCTION_DATA)?;
            let t = account(env, &a.key)?;
            if t.mint != m.key {
                return Err(TOKEN_MINT_MISMATCH);
            }
            let mv = mint(env, &m.key)?;
            if mv.decimals != decimals {
                return Err(TOKEN_DECIMALS_MISMATCH);
            }
            if t.owner != auth.key {
                return Err(TOKEN_OWNER_MISMATCH);
            }
            if !auth.signer {
                return Err(MISSING_SIGNATURE);
            }
            if t.amount < amount {
                return Err(TOKEN_INSUFFICIENT_FUNDS);
            }
            set_amount(env, a, t.amount - amount)?;
            set_supply(env, m, mv.supply - amount)
        }
        // InitializeAccount3 { owner }: account [w], mint.
        18 => {
            let [a, m] = metas.get(0..2).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
            let owner: Key = data.get(1..33).ok_or(INVALID_INSTRUCTION_DATA)?.try_into().unwrap();
            owned(env, &a.key)?;
            mint(env, &m.key)?;
            let mut acc = env.get(&a.key);
            if acc.data.len() < TOKEN_ACCOUNT_LEN || acc.data[108] != 0 {
                return Err(INVALID_ACCOUNT_DATA);
            }
            acc.data[..TOKEN_ACCOUNT_LEN].copy_from_slice(&token_account_data(&m.key, &owner, 0));
            commit(env, program, a, &acc)
        }
        _ => Err(INVALID_INSTRUCTION_DATA),
    }
}

/// CreateIdempotent: payer [w, s], account [w], wallet, mint, system, token program.
fn ata(env: &mut Env, metas: &[Meta], data: &[u8]) -> Res {
    if data != [1] && !data.is_empty() {
        return Err(INVALID_INSTRUCTION_DATA);
    }
    let [payer, account, wallet, mint, system, token_program] = metas.get(0..6).ok_or(NOT_ENOUGH_KEYS)? else { unreachable!() };
    let tp = token_program.key;
    if tp != TOKEN_PROGRAM && tp != TOKEN_2022_PROGRAM {
        return Err(INCORRECT_PROGRAM_ID);
    }
    if system.key != SYSTEM_PROGRAM {
        return Err(INCORRECT_PROGRAM_ID);
    }
    let existing = env.get(&account.key);
    if existing.owner == tp {
        let t = read_token_account(&existing.data).ok_or(ILLEGAL_OWNER)?;
        if t.mint == mint.key && t.owner == wallet.key {
            return Ok(());
        }
        return Err(ILLEGAL_OWNER);
    }
    let Some((expected, _)) = env.find_pda(&[&wallet.key, &tp, &mint.key], &ATA_PROGRAM) else {
        return Err(INVALID_SEEDS);
    };
    if expected != account.key {
        return Err(INVALID_SEEDS);
    }
    if env.get(&mint.key).owner != tp {
        return Err(INCORRECT_PROGRAM_ID);
    }
    if existing.owner != SYSTEM_PROGRAM || !existing.data.is_empty() {
        return Err(ACCOUNT_ALREADY_IN_USE);
    }
    let size = if tp == TOKEN_2022_PROGRAM { TOKEN_ACCOUNT_LEN + 5 } else { TOKEN_ACCOUNT_LEN };
    let rent = env.sysvars.rent_minimum(size);
    let missing = rent.saturating_sub(existing.lamports);
    // System transfer from the payer, then allocate + assign (signed by the
    // ATA program for its PDA), then InitializeAccount3: the real program's
    // CPIs, each checked by the models above.
    let pda = Meta { key: account.key, signer: true, writable: true };
    if missing > 0 {
        let mut d = vec![2, 0, 0, 0];
        d.extend_from_slice(&missing.to_le_bytes());
        env.invoke(&SYSTEM_PROGRAM, &[*payer, Meta { signer: false, ..pda }], &d).map_err(code)?;
    }
    let mut d = vec![8, 0, 0, 0];
    d.extend_from_slice(&(size as u64).to_le_bytes());
    env.invoke(&SYSTEM_PROGRAM, &[pda], &d).map_err(code)?;
    let mut d = vec![1, 0, 0, 0];
    d.extend_from_slice(&tp);
    env.invoke(&SYSTEM_PROGRAM, &[pda], &d).map_err(code)?;
    let mut d = vec![18];
    d.extend_from_slice(&wallet.key);
    let _ = unique(metas);
    env.invoke(&tp, &[Meta::w(account.key), Meta::ro(mint.key)], &d).map_err(code)
}

fn code(o: Outcome) -> u64 {
    match o {
        Outcome::ProgramError { code, .. } => code,
        _ => INVALID_ARGUMENT,
    }
}
