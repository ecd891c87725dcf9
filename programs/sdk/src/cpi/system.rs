//! System program instructions (bincode: u32 little-endian variant index,
//! then fields).

use crate::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use crate::{AccountView, Address, ProgramResult};

pub const SYSTEM_PROGRAM_ID: Address = Address::new_from_array([0; 32]);

const CREATE_ACCOUNT: u32 = 0;
const ASSIGN: u32 = 1;
const TRANSFER: u32 = 2;
const ALLOCATE: u32 = 8;

/// Creates `to` with `lamports`, `space` bytes and `owner`, paid by `from`.
pub struct CreateAccount<'a> {
    pub from: &'a AccountView,
    pub to: &'a AccountView,
    pub lamports: u64,
    pub space: u64,
    pub owner: &'a Address,
}

impl CreateAccount<'_> {
    /// Invokes the system program; `signers` sign for PDAs among from/to.
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 52];
        data[..4].copy_from_slice(&CREATE_ACCOUNT.to_le_bytes());
        data[4..12].copy_from_slice(&self.lamports.to_le_bytes());
        data[12..20].copy_from_slice(&self.space.to_le_bytes());
        data[20..].copy_from_slice(self.owner.as_ref());
        let metas = [
            InstructionAccount::writable_signer(self.from.address()),
            InstructionAccount::writable_signer(self.to.address()),
        ];
        let ix = InstructionView { program_id: &SYSTEM_PROGRAM_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.from, self.to], signers)
    }
}

/// Moves `lamports` from `from` (system-owned, signer) to `to`.
pub struct Transfer<'a> {
    pub from: &'a AccountView,
    pub to: &'a AccountView,
    pub lamports: u64,
}

impl Transfer<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 12];
        data[..4].copy_from_slice(&TRANSFER.to_le_bytes());
        data[4..].copy_from_slice(&self.lamports.to_le_bytes());
        let metas = [
            InstructionAccount::writable_signer(self.from.address()),
            InstructionAccount::writable(self.to.address()),
        ];
        let ix = InstructionView { program_id: &SYSTEM_PROGRAM_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.from, self.to], signers)
    }
}

/// Gives `account` `space` bytes of data.
pub struct Allocate<'a> {
    pub account: &'a AccountView,
    pub space: u64,
}

impl Allocate<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 12];
        data[..4].copy_from_slice(&ALLOCATE.to_le_bytes());
        data[4..].copy_from_slice(&self.space.to_le_bytes());
        let metas = [InstructionAccount::writable_signer(self.account.address())];
        let ix = InstructionView { program_id: &SYSTEM_PROGRAM_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.account], signers)
    }
}

/// Makes `owner` the owner of `account`.
pub struct Assign<'a> {
    pub account: &'a AccountView,
    pub owner: &'a Address,
}

impl Assign<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let mut data = [0u8; 36];
        data[..4].copy_from_slice(&ASSIGN.to_le_bytes());
        data[4..].copy_from_slice(self.owner.as_ref());
        let metas = [InstructionAccount::writable_signer(self.account.address())];
        let ix = InstructionView { program_id: &SYSTEM_PROGRAM_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.account], signers)
    }
}
