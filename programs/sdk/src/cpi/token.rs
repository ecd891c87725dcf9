//! SPL Token instructions (one-byte tag, then little-endian fields). They work
//! for Token-2022 too when `program_id` is its id.

use crate::base58::address;
use crate::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use crate::{AccountView, Address, ProgramResult};

pub const TOKEN_PROGRAM_ID: Address = address("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
pub const TOKEN_2022_PROGRAM_ID: Address = address("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb");

const MINT_TO: u8 = 7;
const CLOSE_ACCOUNT: u8 = 9;
const TRANSFER_CHECKED: u8 = 12;
const BURN_CHECKED: u8 = 15;

/// Moves `amount` tokens of `mint` from `source` to `destination`.
pub struct TransferChecked<'a> {
    pub program_id: &'a Address,
    pub source: &'a AccountView,
    pub mint: &'a AccountView,
    pub destination: &'a AccountView,
    pub authority: &'a AccountView,
    pub amount: u64,
    pub decimals: u8,
}

impl TransferChecked<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 10];
        data[0] = TRANSFER_CHECKED;
        data[1..9].copy_from_slice(&self.amount.to_le_bytes());
        data[9] = self.decimals;
        let metas = [
            InstructionAccount::writable(self.source.address()),
            InstructionAccount::readonly(self.mint.address()),
            InstructionAccount::writable(self.destination.address()),
            InstructionAccount::readonly_signer(self.authority.address()),
        ];
        let ix = InstructionView { program_id: self.program_id, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.source, self.mint, self.destination, self.authority], signers)
    }
}

/// Mints `amount` new tokens of `mint` into `account`.
pub struct MintTo<'a> {
    pub program_id: &'a Address,
    pub mint: &'a AccountView,
    pub account: &'a AccountView,
    pub authority: &'a AccountView,
    pub amount: u64,
}

impl MintTo<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 9];
        data[0] = MINT_TO;
        data[1..].copy_from_slice(&self.amount.to_le_bytes());
        let metas = [
            InstructionAccount::writable(self.mint.address()),
            InstructionAccount::writable(self.account.address()),
            InstructionAccount::readonly_signer(self.authority.address()),
        ];
        let ix = InstructionView { program_id: self.program_id, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.mint, self.account, self.authority], signers)
    }
}

/// Closes an empty token `account`, sending its lamports to `destination`.
pub struct CloseAccount<'a> {
    pub program_id: &'a Address,
    pub account: &'a AccountView,
    pub destination: &'a AccountView,
    pub authority: &'a AccountView,
}

impl CloseAccount<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let data = [CLOSE_ACCOUNT];
        let metas = [
            InstructionAccount::writable(self.account.address()),
            InstructionAccount::writable(self.destination.address()),
            InstructionAccount::readonly_signer(self.authority.address()),
        ];
        let ix = InstructionView { program_id: self.program_id, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.account, self.destination, self.authority], signers)
    }
}

/// Burns `amount` tokens of `mint` held by `account` (the mint's supply drops
/// by as much), signed by the account's owner.
pub struct BurnChecked<'a> {
    pub program_id: &'a Address,
    pub account: &'a AccountView,
    pub mint: &'a AccountView,
    pub authority: &'a AccountView,
    pub amount: u64,
    pub decimals: u8,
}

impl BurnChecked<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 10];
        data[0] = BURN_CHECKED;
        data[1..9].copy_from_slice(&self.amount.to_le_bytes());
        data[9] = self.decimals;
        let metas = [
            InstructionAccount::writable(self.account.address()),
            InstructionAccount::writable(self.mint.address()),
            InstructionAccount::readonly_signer(self.authority.address()),
        ];
        let ix = InstructionView { program_id: self.program_id, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.account, self.mint, self.authority], signers)
    }
}
