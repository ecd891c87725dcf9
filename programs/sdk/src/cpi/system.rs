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

/// Creates the PDA `account` with `lamports`, `space` bytes and `owner`,
/// paid by `payer`; `signer` signs for the PDA. An address that already
/// holds lamports (anyone may send some to block a plain CreateAccount) is
/// topped up to `lamports`, allocated and assigned instead.
pub struct CreatePda<'a> {
    pub payer: &'a AccountView,
    pub account: &'a AccountView,
    pub lamports: u64,
    pub space: u64,
    pub owner: &'a Address,
}

impl CreatePda<'_> {
    pub fn invoke_signed(&self, signer: &Signer) -> ProgramResult {
        let signers = core::slice::from_ref(signer);
        let held = self.account.lamports();
        if held == 0 {
            return CreateAccount { from: self.payer, to: self.account, lamports: self.lamports, space: self.space, owner: self.owner }
                .invoke_signed(signers);
        }
        let missing = self.lamports.saturating_sub(held);
        if missing > 0 {
            Transfer { from: self.payer, to: self.account, lamports: missing }.invoke_signed(&[])?;
        }
        Allocate { account: self.account, space: self.space }.invoke_signed(signers)?;
        Assign { account: self.account, owner: self.owner }.invoke_signed(signers)
    }
}
