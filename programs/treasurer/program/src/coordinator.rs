//! Calls into the Coordinator program, signed by the Run PDA (the run's main
//! authority), and the read-only view of its run account.

use psyche_coordinator_logic::state::{ClientSlot, CoordinatorState, ACCOUNT_SIZE};
use psyche_sdk::anchor;
use psyche_sdk::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use psyche_sdk::{validate, AccountView, Address, ProgramError, ProgramResult};
use psyche_treasurer_interface::{client_slot, RunPhase, TreasurerError, COORDINATOR_ACCOUNT, COORDINATOR_ID};

pub const INIT_COORDINATOR: [u8; 8] = anchor::instruction("init_coordinator");
pub const UPDATE: [u8; 8] = anchor::instruction("update");
pub const UPDATE_CLIENT_VERSION: [u8; 8] = anchor::instruction("update_client_version");
pub const SET_FUTURE_EPOCH_RATES: [u8; 8] = anchor::instruction("set_future_epoch_rates");
pub const SET_PAUSED: [u8; 8] = anchor::instruction("set_paused");
pub const SETTLE_POINTS: [u8; 8] = anchor::instruction("settle_points");
pub const TAKE_BURNED: [u8; 8] = anchor::instruction("take_burned");
pub const FREE_COORDINATOR: [u8; 8] = anchor::instruction("free_coordinator");

/// The accounts of a Coordinator authority instruction.
pub struct Authority<'a> {
    pub run: &'a AccountView,
    pub instance: &'a AccountView,
    pub account: &'a AccountView,
}

impl Authority<'_> {
    /// Runs an authority instruction (`data` = discriminator + Borsh args):
    /// 0. [SIGNER] authority (the Run PDA), 1. [] instance, 2. [WRITE] account.
    pub fn invoke(&self, data: &[u8], signer: &Signer<'_, '_>) -> ProgramResult {
        let metas = [
            InstructionAccount::readonly_signer(self.run.address()),
            InstructionAccount::readonly(self.instance.address()),
            InstructionAccount::writable(self.account.address()),
        ];
        let ix = InstructionView { program_id: &COORDINATOR_ID, data, accounts: &metas };
        invoke_signed(&ix, &[self.run, self.instance, self.account], core::slice::from_ref(signer))
    }

    /// free_coordinator: both accounts' rent goes to `spill`.
    pub fn free(&self, spill: &AccountView, signer: &Signer<'_, '_>) -> ProgramResult {
        let metas = [
            InstructionAccount::readonly_signer(self.run.address()),
            InstructionAccount::writable(spill.address()),
            InstructionAccount::writable(self.instance.address()),
            InstructionAccount::writable(self.account.address()),
        ];
        let ix = InstructionView { program_id: &COORDINATOR_ID, data: &FREE_COORDINATOR, accounts: &metas };
        invoke_signed(&ix, &[self.run, spill, self.instance, self.account], core::slice::from_ref(signer))
    }
}

/// Runs `f` on the Coordinator run in `account` (owner, discriminator and
/// layout checked), read in place without a CPI.
pub fn with_state<T>(account: &AccountView, f: impl FnOnce(&CoordinatorState) -> Result<T, ProgramError>) -> Result<T, ProgramError> {
    validate::initialized(account, &COORDINATOR_ID, &COORDINATOR_ACCOUNT)?;
    let data = account.try_borrow()?;
    // The loader places account data 8-aligned, so data[8..] is aligned for
    // the state; from_bytes checks size and alignment anyway.
    let state = (data.len() == ACCOUNT_SIZE)
        .then(|| CoordinatorState::from_bytes(&data[8..]))
        .flatten()
        .ok_or_else(|| TreasurerError::CoordinatorAccountInvalid.fail())?;
    f(state)
}

/// What the Treasurer reads about one user: where the run is and a copy of
/// the user's slot (None when it has none). One function for every caller,
/// so the slot search is compiled once.
pub struct UserView {
    pub phase: RunPhase,
    pub slot: Option<ClientSlot>,
}

#[inline(never)]
pub fn user_view(account: &AccountView, user: &Address) -> Result<UserView, ProgramError> {
    with_state(account, |s| Ok(UserView { phase: RunPhase::of(s), slot: client_slot(s, user).copied() }))
}
