//! Calls into the Authorizer: the join authorization a deposit grants. Its
//! grantor is the Run PDA (the run's join authority) and its grantee the
//! user's Participant PDA, which names the user as its one delegate; only the
//! Treasurer signs for either, so nobody else can add delegates, activate it
//! or close it.

use psyche_sdk::anchor;
use psyche_sdk::borsh::Writer;
use psyche_sdk::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use psyche_sdk::{AccountView, ProgramResult};
use psyche_treasurer_interface::{AUTHORIZER_ID, JOIN_RUN_SCOPE};

use crate::processor::serialized;

pub const AUTHORIZATION_CREATE: [u8; 8] = anchor::instruction("authorization_create");
pub const AUTHORIZATION_GRANTOR_UPDATE: [u8; 8] = anchor::instruction("authorization_grantor_update");
pub const AUTHORIZATION_GRANTEE_UPDATE: [u8; 8] = anchor::instruction("authorization_grantee_update");
pub const AUTHORIZATION_CLOSE: [u8; 8] = anchor::instruction("authorization_close");

/// The accounts of the join authorization of one user.
pub struct JoinAuthorization<'a> {
    /// The grantor: the Run PDA.
    pub run: &'a AccountView,
    /// The grantee: the user's Participant PDA.
    pub participant: &'a AccountView,
    pub authorization: &'a AccountView,
}

impl JoinAuthorization<'_> {
    /// Creates the authorization (rent paid by `payer`), names `payer` (the
    /// user) its delegate and activates it. `run_signer` signs as the Run,
    /// `participant_signer` as the Participant.
    // Five arguments and a returned Result: inlined for the BPF subset.
    #[inline(always)]
    pub fn create(
        &self,
        payer: &AccountView,
        system_program: &AccountView,
        run_signer: &Signer<'_, '_>,
        participant_signer: &Signer<'_, '_>,
    ) -> ProgramResult {
        // authorization_create { grantee: the Participant, scope }.
        let mut data = [0u8; 8 + 32 + 4 + JOIN_RUN_SCOPE.len()];
        serialized(
            Writer::new(&mut data)
                .bytes(&AUTHORIZATION_CREATE)
                .and_then(|w| w.address(self.participant.address()))
                .and_then(|w| w.byte_vec(JOIN_RUN_SCOPE)),
        )?;
        let metas = [
            InstructionAccount::writable_signer(payer.address()),
            InstructionAccount::readonly_signer(self.run.address()),
            InstructionAccount::writable(self.authorization.address()),
            InstructionAccount::readonly(system_program.address()),
        ];
        let ix = InstructionView { program_id: &AUTHORIZER_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[payer, self.run, self.authorization, system_program], core::slice::from_ref(run_signer))?;

        // authorization_grantee_update { delegates_clear: true, delegates_added: [user] }.
        let mut data = [0u8; 8 + 1 + 4 + 32];
        serialized(
            Writer::new(&mut data)
                .bytes(&AUTHORIZATION_GRANTEE_UPDATE)
                .and_then(|w| w.bool(true))
                .and_then(|w| w.u32(1))
                .and_then(|w| w.address(payer.address())),
        )?;
        let metas = [
            InstructionAccount::writable_signer(payer.address()),
            InstructionAccount::readonly_signer(self.participant.address()),
            InstructionAccount::writable(self.authorization.address()),
            InstructionAccount::readonly(system_program.address()),
        ];
        let ix = InstructionView { program_id: &AUTHORIZER_ID, data: &data, accounts: &metas };
        invoke_signed(
            &ix,
            &[payer, self.participant, self.authorization, system_program],
            core::slice::from_ref(participant_signer),
        )?;
        self.set_active(true, run_signer)
    }

    /// authorization_grantor_update { active }, signed by the Run.
    pub fn set_active(&self, active: bool, run_signer: &Signer<'_, '_>) -> ProgramResult {
        let mut data = [0u8; 9];
        data[..8].copy_from_slice(&AUTHORIZATION_GRANTOR_UPDATE);
        data[8] = active as u8;
        let metas =
            [InstructionAccount::readonly_signer(self.run.address()), InstructionAccount::writable(self.authorization.address())];
        let ix = InstructionView { program_id: &AUTHORIZER_ID, data: &data, accounts: &metas };
        invoke_signed(&ix, &[self.run, self.authorization], core::slice::from_ref(run_signer))
    }

    /// Deactivates the authorization and closes it; its rent goes to `spill`.
    pub fn revoke_and_close(&self, spill: &AccountView, run_signer: &Signer<'_, '_>) -> ProgramResult {
        self.set_active(false, run_signer)?;
        let metas = [
            InstructionAccount::readonly_signer(self.run.address()),
            InstructionAccount::writable(spill.address()),
            InstructionAccount::writable(self.authorization.address()),
        ];
        let ix = InstructionView { program_id: &AUTHORIZER_ID, data: &AUTHORIZATION_CLOSE, accounts: &metas };
        invoke_signed(&ix, &[self.run, spill, self.authorization], core::slice::from_ref(run_signer))
    }
}
