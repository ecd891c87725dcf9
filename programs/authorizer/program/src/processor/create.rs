use psyche_authorizer_interface::{space, AuthorizerError, AUTHORIZATION_ACCOUNT, AUTHORIZATION_SEED, ID, MAX_SCOPE_LEN};
use psyche_sdk::borsh::{Reader, Writer};
use psyche_sdk::cpi::system::{Allocate, Assign, CreateAccount, Transfer, SYSTEM_PROGRAM_ID};
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::{Clock, Rent};
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{emit, serialized};
use crate::AUTHORIZATION_CREATED;

/// authorization_create { grantee, scope }: a new, inactive authorization.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [SIGNER] grantor,
/// 2. [WRITE] authorization (PDA), 3. [] system program.
pub fn create(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, grantor, authorization, system_program] = validate::accounts::<4>(accounts)?;
    let mut r = Reader::new(args);
    let grantee = r.address()?;
    let scope = r.byte_vec()?;
    r.finish()?;
    if scope.len() > MAX_SCOPE_LEN {
        return Err(AuthorizerError::ScopeTooLong.fail());
    }
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::signer(grantor)?;
    validate::writable(authorization)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    let bump = validate::pda(authorization, &[AUTHORIZATION_SEED, grantor.address().as_ref(), grantee.as_ref(), scope], &ID)?;
    // Only this program can give the PDA data or an owner, so a system-owned
    // PDA is uninitialized (possibly pre-funded by anyone).
    if !authorization.owned_by(&SYSTEM_PROGRAM_ID) {
        return Err(AuthorizerError::AuthorizationAlreadyExists.fail());
    }

    let size = space(scope.len(), 0);
    let bump_seed = [bump];
    let seeds = [
        Seed::from(AUTHORIZATION_SEED),
        Seed::from(grantor.address().as_ref()),
        Seed::from(grantee.as_ref()),
        Seed::from(scope),
        Seed::from(&bump_seed),
    ];
    create_account(payer, authorization, size, &Signer::from(&seeds))?;

    let now = Clock::get()?.unix_timestamp;
    {
        let mut data = authorization.try_borrow_mut()?;
        let mut w = Writer::new(&mut data);
        serialized(
            w.bytes(&AUTHORIZATION_ACCOUNT)
                .and_then(|w| w.u8(bump))
                .and_then(|w| w.address(grantor.address()))
                .and_then(|w| w.address(&grantee))
                .and_then(|w| w.byte_vec(scope))
                .and_then(|w| w.bool(false))
                .and_then(|w| w.u32(0))
                .and_then(|w| w.i64(now)),
        )?;
    }
    emit(&AUTHORIZATION_CREATED, |w| {
        w.address(authorization.address())?.address(grantor.address())?.address(&grantee)?.byte_vec(scope)?;
        Ok(())
    })
}

/// Creates the program-owned PDA `account` with `size` bytes, rent paid by
/// `payer`. An address that already holds lamports (anyone may send some to
/// block a plain CreateAccount) is topped up, allocated and assigned instead.
fn create_account(payer: &AccountView, account: &AccountView, size: usize, signer: &Signer<'_, '_>) -> ProgramResult {
    let rent = Rent::get()?.minimum_balance(size)?;
    let held = account.lamports();
    if held == 0 {
        return CreateAccount { from: payer, to: account, lamports: rent, space: size as u64, owner: &ID }
            .invoke_signed(core::slice::from_ref(signer));
    }
    let missing = rent.saturating_sub(held);
    if missing > 0 {
        Transfer { from: payer, to: account, lamports: missing }.invoke_signed(&[])?;
    }
    Allocate { account, space: size as u64 }.invoke_signed(core::slice::from_ref(signer))?;
    Assign { account, owner: &ID }.invoke_signed(core::slice::from_ref(signer))
}
