//! Reading SPL Token / Token-2022 accounts. Both programs share the base
//! layouts (extensions follow them), so one reader serves both.

use psyche_sdk::cpi::token::{TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID};
use psyche_sdk::{validate, AccountView, Address, ErrorCode, ProgramError, ProgramResult};
use psyche_treasurer_interface::{check_collateral_mint, MintRefusal, TreasurerError, MINT_LEN};

/// Base size of a token account: mint, owner, amount, delegate, state, ...
const TOKEN_ACCOUNT_LEN: usize = 165;
const MINT_DECIMALS: usize = 44;
const MINT_INITIALIZED: usize = 45;

/// The fields of a token account the Treasurer checks.
pub struct TokenAccount {
    pub mint: Address,
    pub owner: Address,
    pub amount: u64,
}

/// `program` is SPL Token or Token-2022.
pub fn check_token_program(program: &AccountView) -> ProgramResult {
    let id = if program.address() == &TOKEN_2022_PROGRAM_ID { &TOKEN_2022_PROGRAM_ID } else { &TOKEN_PROGRAM_ID };
    validate::program(program, id)
}

/// Checks a mint of `token_program` as a new run's collateral: no freeze
/// authority, and no Token-2022 extension outside the allowed list
/// (`check_collateral_mint`).
pub fn check_collateral(mint: &AccountView, token_program: &Address) -> ProgramResult {
    if !mint.owned_by(token_program) {
        return Err(TreasurerError::InvalidMint.fail());
    }
    let data = mint.try_borrow()?;
    match check_collateral_mint(&data) {
        Ok(_) => Ok(()),
        Err(MintRefusal::Invalid) => Err(TreasurerError::InvalidMint.fail()),
        Err(_) => Err(TreasurerError::MintNotAllowed.fail()),
    }
}

/// Decimals of an initialized mint of `token_program`.
pub fn mint_decimals(mint: &AccountView, token_program: &Address) -> Result<u8, ProgramError> {
    if !mint.owned_by(token_program) {
        return Err(TreasurerError::InvalidMint.fail());
    }
    let data = mint.try_borrow()?;
    if data.len() < MINT_LEN || data[MINT_INITIALIZED] != 1 {
        return Err(TreasurerError::InvalidMint.fail());
    }
    Ok(data[MINT_DECIMALS])
}

/// Reads a token account of `token_program` holding `mint`, owned by `owner`
/// when one is given.
pub fn token_account(account: &AccountView, token_program: &Address, mint: &Address, owner: Option<&Address>) -> Result<TokenAccount, ProgramError> {
    validate::owner(account, token_program)?;
    let t = {
        let data = account.try_borrow()?;
        if data.len() < TOKEN_ACCOUNT_LEN {
            return Err(ErrorCode::AccountDidNotDeserialize.fail());
        }
        let mut amount = [0u8; 8];
        amount.copy_from_slice(&data[64..72]);
        TokenAccount { mint: address_at(&data, 0), owner: address_at(&data, 32), amount: u64::from_le_bytes(amount) }
    };
    if &t.mint != mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    if owner.is_some_and(|o| &t.owner != o) {
        return Err(TreasurerError::TokenAccountOwnerMismatch.fail());
    }
    Ok(t)
}

fn address_at(data: &[u8], at: usize) -> Address {
    let mut a = [0u8; 32];
    a.copy_from_slice(&data[at..][..32]);
    Address::new_from_array(a)
}
