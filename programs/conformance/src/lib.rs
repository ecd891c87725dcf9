//! The conformance program: one instruction per SDK and toolchain feature, each
//! invoked from Go on the local validator (programs/conformance/conformance_test.go).
//! Instructions use Anchor discriminators and Borsh arguments.
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

use psyche_sdk::anchor::{self, split_instruction};
use psyche_sdk::borsh::Reader;
use psyche_sdk::cpi::ata::{CreateIdempotent, ASSOCIATED_TOKEN_PROGRAM_ID};
use psyche_sdk::cpi::system::{CreateAccount, SYSTEM_PROGRAM_ID};
use psyche_sdk::cpi::token::TransferChecked;
use psyche_sdk::cpi::{set_return_data, Seed, Signer};
use psyche_sdk::log::{log, Message};
use psyche_sdk::sysvar::{Clock, Rent};
use psyche_sdk::{define_errors, validate, AccountView, Address, ErrorCode, ProgramError, ProgramResult};

psyche_sdk::entrypoint!(process, 8);

define_errors! {
    pub enum ConformanceError {
        Unused = "Never returned; keeps Deliberate at 6001",
        Deliberate = "The caller asked for this error",
    }
}

pub const LOG_AND_EMIT: [u8; 8] = anchor::instruction("log_and_emit");
pub const WRITE_ACCOUNT: [u8; 8] = anchor::instruction("write_account");
pub const FAIL_CUSTOM: [u8; 8] = anchor::instruction("fail_custom");
pub const CREATE_PDA: [u8; 8] = anchor::instruction("create_pda");
pub const TOKEN_TRANSFER: [u8; 8] = anchor::instruction("token_transfer");
pub const FIVE_ARGS: [u8; 8] = anchor::instruction("five_args");
pub const U128_MATH: [u8; 8] = anchor::instruction("u128_math");
pub const PANIC: [u8; 8] = anchor::instruction("panic");
pub const ECHO_RETURN: [u8; 8] = anchor::instruction("echo_return");
pub const REQUIRE_SIGNER: [u8; 8] = anchor::instruction("require_signer");
pub const CLOCK: [u8; 8] = anchor::instruction("clock");
pub const CLOSE_VAULT: [u8; 8] = anchor::instruction("close_vault");
pub const CREATE_ATA: [u8; 8] = anchor::instruction("create_ata");
pub const RESIZE_ACCOUNT: [u8; 8] = anchor::instruction("resize_account");
pub const ACCOUNT_KEYS: [u8; 8] = anchor::instruction("account_keys");

pub const PING_EVENT: [u8; 8] = anchor::event("Ping");
pub const VAULT_ACCOUNT: [u8; 8] = anchor::account("Vault");
pub const VAULT_SEED: &[u8] = b"vault";
/// Vault layout: discriminator (8), bump (1), padding (7), owner (32).
pub const VAULT_SPACE: usize = 48;

fn process(program_id: &Address, accounts: &[AccountView], data: &[u8]) -> ProgramResult {
    let (disc, args) = split_instruction(data)?;
    match disc {
        LOG_AND_EMIT => log_and_emit(args),
        WRITE_ACCOUNT => write_account(program_id, accounts, args),
        FAIL_CUSTOM => Err(ConformanceError::Deliberate.fail()),
        CREATE_PDA => create_pda(program_id, accounts),
        TOKEN_TRANSFER => token_transfer(accounts, args),
        FIVE_ARGS => five_args(args),
        U128_MATH => u128_math(args),
        PANIC => panic_on(args),
        ECHO_RETURN => {
            set_return_data(args);
            Ok(())
        }
        REQUIRE_SIGNER => validate::signer(validate::accounts::<1>(accounts)?.first().ok_or(ProgramError::NotEnoughAccountKeys)?),
        CLOCK => {
            let clock = Clock::get()?;
            set_return_data(&clock.unix_timestamp.to_le_bytes());
            Ok(())
        }
        CLOSE_VAULT => close_vault(program_id, accounts),
        CREATE_ATA => create_ata(accounts),
        RESIZE_ACCOUNT => resize_account(program_id, accounts, args),
        ACCOUNT_KEYS => account_keys(accounts),
        _ => Err(ErrorCode::InstructionFallbackNotFound.fail()),
    }
}

/// Logs text and integers, then emits a Ping event carrying `value`.
fn log_and_emit(args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let value = r.u64()?;
    let delta = r.i64()?;
    r.finish()?;
    log("conformance: hello");
    Message::<64>::new().str("value=").u64(value).str(" delta=").i64(delta).log();
    anchor::emit(&PING_EVENT, &value.to_le_bytes())
}

/// Writes `bytes` at `offset` into account 0, which this program owns.
fn write_account(program_id: &Address, accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [target] = validate::accounts::<1>(accounts)?;
    validate::writable(target)?;
    validate::owner(target, program_id)?;
    let mut r = Reader::new(args);
    let offset = r.u32()? as usize;
    let bytes = r.byte_vec()?;
    r.finish()?;
    let mut data = target.try_borrow_mut()?;
    let end = offset.checked_add(bytes.len()).ok_or(ProgramError::InvalidArgument)?;
    let dst = data.get_mut(offset..end).ok_or(ErrorCode::AccountDidNotSerialize.fail())?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Creates the payer's vault PDA through a system-program CPI signed by the PDA.
fn create_pda(program_id: &Address, accounts: &[AccountView]) -> ProgramResult {
    let [payer, vault, system] = validate::accounts::<3>(accounts)?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::writable(vault)?;
    validate::program(system, &SYSTEM_PROGRAM_ID)?;
    let bump = validate::pda(vault, &[VAULT_SEED, payer.address().as_ref()], program_id)?;
    let lamports = Rent::get()?.minimum_balance(VAULT_SPACE)?;
    let bump_seed = [bump];
    let seeds = [Seed::from(VAULT_SEED), Seed::from(payer.address().as_ref()), Seed::from(&bump_seed)];
    CreateAccount { from: payer, to: vault, lamports, space: VAULT_SPACE as u64, owner: program_id }
        .invoke_signed(&[Signer::from(&seeds)])?;
    let mut data = vault.try_borrow_mut()?;
    data[..8].copy_from_slice(&VAULT_ACCOUNT);
    data[8] = bump;
    data[16..48].copy_from_slice(payer.address().as_ref());
    Ok(())
}

/// Closes the payer's vault: an initialized Vault of this program at the PDA
/// recorded in it, owned by the payer; its lamports go back to the payer.
fn close_vault(program_id: &Address, accounts: &[AccountView]) -> ProgramResult {
    let [payer, vault] = validate::accounts::<2>(accounts)?;
    validate::signer(payer)?;
    validate::initialized(vault, program_id, &VAULT_ACCOUNT)?;
    let (bump, owner_matches) = {
        let data = vault.try_borrow()?;
        (data[8], &data[16..48] == payer.address().as_ref())
    };
    if !owner_matches {
        return Err(ErrorCode::ConstraintHasOne.fail());
    }
    validate::pda_with_bump(vault, &[VAULT_SEED, payer.address().as_ref()], bump, program_id)?;
    validate::close(vault, payer)
}

/// Resizes account 0 (owned by this program) to `new_len` bytes; growth is
/// limited to 10 KiB per instruction by the runtime, and checked here first.
fn resize_account(program_id: &Address, accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [target] = validate::accounts::<1>(accounts)?;
    validate::writable(target)?;
    validate::owner(target, program_id)?;
    let mut r = Reader::new(args);
    let new_len = r.u32()? as usize;
    r.finish()?;
    target.resize(new_len)
}

/// Returns, for every account as parsed from the loader input, its key, data
/// length and a flag byte (signer 1, writable 2): duplicates and accounts of
/// odd data lengths test the input parser.
// Note: i < n <= 8, so every offset is at most 8 * ENTRY = 328.
#[allow(clippy::arithmetic_side_effects)]
fn account_keys(accounts: &[AccountView]) -> ProgramResult {
    const ENTRY: usize = 32 + 8 + 1;
    let mut out = [0u8; 8 * ENTRY];
    let n = accounts.len().min(8);
    for (i, a) in accounts[..n].iter().enumerate() {
        let e = &mut out[i * ENTRY..(i + 1) * ENTRY];
        e[..32].copy_from_slice(a.address().as_ref());
        e[32..40].copy_from_slice(&(a.data_len() as u64).to_le_bytes());
        e[40] = a.is_signer() as u8 | (a.is_writable() as u8) << 1;
    }
    set_return_data(&out[..n * ENTRY]);
    Ok(())
}

/// Creates (idempotently) the wallet's associated token account for a mint.
fn create_ata(accounts: &[AccountView]) -> ProgramResult {
    let [payer, account, wallet, mint, system_program, token_program, ata_program] = validate::accounts::<7>(accounts)?;
    validate::program(ata_program, &ASSOCIATED_TOKEN_PROGRAM_ID)?;
    CreateIdempotent { payer, account, wallet, mint, system_program, token_program }.invoke_signed(&[])
}

/// Moves tokens by CPI to the token program given as account 4.
fn token_transfer(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [source, mint, destination, authority, token_program] = validate::accounts::<5>(accounts)?;
    let mut r = Reader::new(args);
    let amount = r.u64()?;
    let decimals = r.u8()?;
    r.finish()?;
    TransferChecked {
        program_id: token_program.address(),
        source,
        mint,
        destination,
        authority,
        amount,
        decimals,
    }
    .invoke_signed(&[])
}

/// A call with five arguments (the most upstream BPF passes in registers) that
/// the optimizer must not inline away.
#[inline(never)]
fn mix5(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    a.wrapping_mul(31).wrapping_add(b).rotate_left((c & 63) as u32) ^ d.wrapping_sub(e)
}

fn five_args(args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let v = [r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?];
    r.finish()?;
    let out = mix5(v[0], v[1], v[2], v[3], v[4]);
    set_return_data(&out.to_le_bytes());
    Ok(())
}

/// u128 add, sub and compare: returns sum (16 bytes LE), difference (16 bytes
/// LE), and the ordering of a and b (0 less, 1 equal, 2 greater).
fn u128_math(args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let a = r.u128()?;
    let b = r.u128()?;
    r.finish()?;
    let sum = a.checked_add(b).ok_or(ProgramError::ArithmeticOverflow)?;
    let diff = a.checked_sub(b).ok_or(ProgramError::ArithmeticOverflow)?;
    let ord = match a.cmp(&b) {
        core::cmp::Ordering::Less => 0u8,
        core::cmp::Ordering::Equal => 1,
        core::cmp::Ordering::Greater => 2,
    };
    let mut out = [0u8; 33];
    out[..16].copy_from_slice(&sum.to_le_bytes());
    out[16..32].copy_from_slice(&diff.to_le_bytes());
    out[32] = ord;
    set_return_data(&out);
    Ok(())
}

/// Panics by indexing past the end of its arguments.
fn panic_on(args: &[u8]) -> ProgramResult {
    // Note: instruction data is at most 1,232 bytes (one transaction).
    #[allow(clippy::arithmetic_side_effects)]
    let index = args.len() + 3;
    if args.get(index).copied() == Some(0) {
        return Ok(());
    }
    let v = args[index];
    set_return_data(&[v]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discriminators_are_distinct() {
        let all = [
            LOG_AND_EMIT, WRITE_ACCOUNT, FAIL_CUSTOM, CREATE_PDA, TOKEN_TRANSFER, FIVE_ARGS, U128_MATH, PANIC, ECHO_RETURN,
            REQUIRE_SIGNER, CLOCK, CLOSE_VAULT, CREATE_ATA, RESIZE_ACCOUNT, ACCOUNT_KEYS,
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn mix5_is_not_trivial() {
        assert_ne!(mix5(1, 2, 3, 4, 5), mix5(1, 2, 3, 4, 6));
    }
}
