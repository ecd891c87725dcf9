//! Associated Token Account program.

use crate::base58::address;
use crate::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use crate::{AccountView, Address, ProgramResult};

pub const ASSOCIATED_TOKEN_PROGRAM_ID: Address = address("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");

const CREATE_IDEMPOTENT: u8 = 1;

/// Creates `account`, the associated token account of `wallet` for `mint`,
/// unless it already exists.
pub struct CreateIdempotent<'a> {
    pub payer: &'a AccountView,
    pub account: &'a AccountView,
    pub wallet: &'a AccountView,
    pub mint: &'a AccountView,
    pub system_program: &'a AccountView,
    pub token_program: &'a AccountView,
}

impl CreateIdempotent<'_> {
    pub fn invoke_signed(&self, signers: &[Signer]) -> ProgramResult {
        let data = [CREATE_IDEMPOTENT];
        let metas = [
            InstructionAccount::writable_signer(self.payer.address()),
            InstructionAccount::writable(self.account.address()),
            InstructionAccount::readonly(self.wallet.address()),
            InstructionAccount::readonly(self.mint.address()),
            InstructionAccount::readonly(self.system_program.address()),
            InstructionAccount::readonly(self.token_program.address()),
        ];
        let ix = InstructionView { program_id: &ASSOCIATED_TOKEN_PROGRAM_ID, data: &data, accounts: &metas };
        invoke_signed(
            &ix,
            &[self.payer, self.account, self.wallet, self.mint, self.system_program, self.token_program],
            signers,
        )
    }
}
