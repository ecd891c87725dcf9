//! Reading SPL Token / Token-2022 accounts, and the rule for the mints a
//! program may hold tokens of. Both token programs share the base layouts
//! (extensions follow them), so one reader serves both.
//!
//! The refusals are the calling program's own errors: each names them once
//! by implementing [`TokenErrors`] for its error enum.

use crate::cpi::token::{TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID};
use crate::{validate, AccountView, Address, ErrorCode, ProgramError, ProgramResult};

/// Base size of a mint; `decimals` at 44, `is_initialized` at 45, the
/// freeze authority (a u32 COption tag, then the key) at 46.
pub const MINT_LEN: usize = 82;
const MINT_DECIMALS: usize = 44;
const MINT_INITIALIZED: usize = 45;
/// Base size of a token account: mint, owner, amount, delegate, state, ...
pub const TOKEN_ACCOUNT_LEN: usize = 165;
/// Token-2022: a mint with extensions is padded to a token account's size,
/// then an account-type byte (1: mint), then TLV entries (u16 type, u16
/// length, value).
const MINT_ACCOUNT_TYPE_AT: usize = TOKEN_ACCOUNT_LEN;

/// The Token-2022 mint extensions a program accepts: none lets anyone
/// freeze, move, hook, tax, pause or hide the tokens it holds. Mint close
/// authority (a mint closes only at zero supply), interest-bearing and
/// scaled UI amounts (display only), metadata and group pointers and data.
pub const ALLOWED_MINT_EXTENSIONS: [u16; 9] = [
    3,  // MintCloseAuthority
    10, // InterestBearingConfig
    18, // MetadataPointer
    19, // TokenMetadata
    20, // GroupPointer
    21, // TokenGroup
    22, // GroupMemberPointer
    23, // TokenGroupMember
    25, // ScaledUiAmount
];

/// Why a mint is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MintRefusal {
    /// Not an initialized mint, or extension data that does not parse.
    Invalid,
    /// Its freeze authority could freeze the program's token account.
    FreezeAuthority,
    /// A Token-2022 extension outside ALLOWED_MINT_EXTENSIONS.
    Extension(u16),
}

/// Checks the data of a mint account (SPL Token or Token-2022) as the mint
/// of tokens a program holds for others (rewards, deposits, stakes) and
/// returns its decimals: no freeze authority, and no Token-2022 extension
/// outside ALLOWED_MINT_EXTENSIONS.
pub fn check_collateral_mint(data: &[u8]) -> Result<u8, MintRefusal> {
    if data.len() < MINT_LEN || data[MINT_INITIALIZED] != 1 {
        return Err(MintRefusal::Invalid);
    }
    if data[46..50] != [0; 4] {
        return Err(MintRefusal::FreezeAuthority);
    }
    if data.len() > MINT_LEN {
        // Token-2022 with extensions: zero padding, the type byte, then TLVs.
        if data.len() <= MINT_ACCOUNT_TYPE_AT || data[MINT_LEN..MINT_ACCOUNT_TYPE_AT].iter().any(|&b| b != 0) || data[MINT_ACCOUNT_TYPE_AT] != 1 {
            return Err(MintRefusal::Invalid);
        }
        let mut tlv = &data[MINT_ACCOUNT_TYPE_AT + 1..];
        while tlv.len() >= 4 {
            let kind = u16::from_le_bytes([tlv[0], tlv[1]]);
            let len = usize::from(u16::from_le_bytes([tlv[2], tlv[3]]));
            if kind == 0 {
                break; // uninitialized: the rest is free space
            }
            let value = &tlv[4..];
            if value.len() < len {
                return Err(MintRefusal::Invalid);
            }
            if !ALLOWED_MINT_EXTENSIONS.contains(&kind) {
                return Err(MintRefusal::Extension(kind));
            }
            tlv = &value[len..];
        }
    }
    Ok(data[MINT_DECIMALS])
}

/// The program errors the token checks fail with (each program numbers its
/// own with `define_errors!`).
pub trait TokenErrors: Copy {
    /// Not an initialized mint of the token program.
    const INVALID_MINT: Self;
    /// A mint `check_collateral_mint` refuses (freeze authority, extension).
    const MINT_NOT_ALLOWED: Self;
    /// A token account of another mint.
    const MINT_MISMATCH: Self;
    /// A token account of another wallet.
    const OWNER_MISMATCH: Self;
    /// Logs the error like Anchor and converts it.
    fn fail(self) -> ProgramError;
}

/// The fields of a token account the programs check.
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

/// Checks a mint of `token_program` with `check_collateral_mint`.
pub fn check_mint<E: TokenErrors>(mint: &AccountView, token_program: &Address) -> ProgramResult {
    if !mint.owned_by(token_program) {
        return Err(E::INVALID_MINT.fail());
    }
    let data = mint.try_borrow()?;
    match check_collateral_mint(&data) {
        Ok(_) => Ok(()),
        Err(MintRefusal::Invalid) => Err(E::INVALID_MINT.fail()),
        Err(_) => Err(E::MINT_NOT_ALLOWED.fail()),
    }
}

/// Decimals of an initialized mint of `token_program`.
pub fn mint_decimals<E: TokenErrors>(mint: &AccountView, token_program: &Address) -> Result<u8, ProgramError> {
    if !mint.owned_by(token_program) {
        return Err(E::INVALID_MINT.fail());
    }
    let data = mint.try_borrow()?;
    if data.len() < MINT_LEN || data[MINT_INITIALIZED] != 1 {
        return Err(E::INVALID_MINT.fail());
    }
    Ok(data[MINT_DECIMALS])
}

/// Reads a token account of `token_program` holding `mint`, owned by `owner`
/// when one is given.
pub fn token_account<E: TokenErrors>(
    account: &AccountView,
    token_program: &Address,
    mint: &Address,
    owner: Option<&Address>,
) -> Result<TokenAccount, ProgramError> {
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
        return Err(E::MINT_MISMATCH.fail());
    }
    if owner.is_some_and(|o| &t.owner != o) {
        return Err(E::OWNER_MISMATCH.fail());
    }
    Ok(t)
}

fn address_at(data: &[u8], at: usize) -> Address {
    let mut a = [0u8; 32];
    a.copy_from_slice(&data[at..][..32]);
    Address::new_from_array(a)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// A mint's data: base layout (decimals 6, initialized), an optional
    /// freeze authority, and for Token-2022 the given (type, length)
    /// extensions.
    fn mint_data(freeze: bool, extensions: &[(u16, u16)]) -> Vec<u8> {
        let mut d = vec![0u8; MINT_LEN];
        d[44] = 6;
        d[45] = 1;
        if freeze {
            d[46] = 1;
            d[50..82].fill(9);
        }
        if !extensions.is_empty() {
            d.resize(165, 0);
            d.push(1); // account type: mint
            for &(kind, len) in extensions {
                d.extend_from_slice(&kind.to_le_bytes());
                d.extend_from_slice(&len.to_le_bytes());
                d.extend(core::iter::repeat_n(7u8, usize::from(len)));
            }
        }
        d
    }

    #[test]
    fn collateral_mint_rule() {
        assert_eq!(check_collateral_mint(&mint_data(false, &[])), Ok(6));
        assert_eq!(check_collateral_mint(&mint_data(true, &[])), Err(MintRefusal::FreezeAuthority));
        // Every allowed extension together, then free space.
        let allowed: Vec<(u16, u16)> = ALLOWED_MINT_EXTENSIONS.iter().map(|&k| (k, 32)).collect();
        let mut d = mint_data(false, &allowed);
        d.extend_from_slice(&[0; 12]);
        assert_eq!(check_collateral_mint(&d), Ok(6));
        // The extensions that can freeze, move, hook, tax, pause or hide
        // tokens, and one this rule has never heard of, alone and after
        // allowed ones.
        for kind in [1u16, 4, 6, 9, 12, 14, 16, 24, 26, 999] {
            assert_eq!(check_collateral_mint(&mint_data(false, &[(kind, 32)])), Err(MintRefusal::Extension(kind)), "extension {kind}");
            assert_eq!(
                check_collateral_mint(&mint_data(false, &[(18, 64), (kind, 0)])),
                Err(MintRefusal::Extension(kind)),
                "extension {kind} after one allowed"
            );
        }
        // Malformed: uninitialized, short, an overlong TLV, a wrong account
        // type, non-zero padding, extension space without the type byte.
        let mut d = mint_data(false, &[]);
        d[45] = 0;
        assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
        assert_eq!(check_collateral_mint(&mint_data(false, &[])[..81]), Err(MintRefusal::Invalid));
        let mut d = mint_data(false, &[(18, 64)]);
        d.truncate(d.len() - 1);
        assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
        let mut d = mint_data(false, &[(18, 64)]);
        d[165] = 2;
        assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
        let mut d = mint_data(false, &[(18, 64)]);
        d[100] = 1;
        assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
        let padded: Vec<u8> = mint_data(false, &[])[..MINT_LEN].iter().copied().chain([0u8; 50]).collect();
        assert_eq!(check_collateral_mint(&padded), Err(MintRefusal::Invalid));
    }
}
