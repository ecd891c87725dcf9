use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::state::ACCOUNT_SIZE;
use psyche_sdk::cpi::system::{CreatePda, SYSTEM_PROGRAM_ID};
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::Rent;
use psyche_sdk::{validate, AccountView, ErrorCode, ProgramResult};

use crate::args::{Decode, InitCoordinatorParams};
use crate::run::{fail, instance_space, state_mut, Instance, InstanceKeys};
use crate::{COORDINATOR_ACCOUNT, ID, INSTANCE_SEED};

/// init_coordinator { main_authority, join_authority, run_id, client_version }:
/// creates the run's instance PDA and initialises the coordinator account,
/// which the client allocated (ACCOUNT_SIZE bytes, rent exempt, owned by this
/// program) in the same transaction. The run starts Uninitialized: the main
/// authority then sends `update` (config, model) and `set_paused(false)`.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [WRITE] coordinator_instance (PDA
/// ["coordinator", run_id]), 2. [WRITE] coordinator_account, 3. [] system program.
pub fn init_coordinator(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, instance, account, system_program] = validate::accounts::<4>(accounts)?;
    let InitCoordinatorParams { main_authority, join_authority, run_id, client_version } = InitCoordinatorParams::decode(args)?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::writable(instance)?;
    validate::writable(account)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    if run_id.is_empty() || run_id.len() > psyche_coordinator_logic::state::RUN_ID_LEN {
        return Err(fail(CoordinatorError::InvalidRunId));
    }
    let bump = validate::pda(instance, &[INSTANCE_SEED, run_id], &ID)?;
    // Only this program can give the PDA data or an owner, so a system-owned
    // PDA is uninitialized (possibly pre-funded by anyone).
    if !instance.owned_by(&SYSTEM_PROGRAM_ID) {
        return Err(fail(CoordinatorError::AlreadyInitialized));
    }
    // A zeroed discriminator: never initialised, so never re-initialised.
    validate::uninitialized(account, &ID)?;
    if account.data_len() != ACCOUNT_SIZE {
        return Err(ErrorCode::ConstraintSpace.fail());
    }
    let rent = Rent::get()?;
    if account.lamports() < rent.minimum_balance(ACCOUNT_SIZE)? {
        return Err(ErrorCode::ConstraintRentExempt.fail());
    }
    {
        let mut data = account.try_borrow_mut()?;
        state_mut(&mut data)?.init(run_id, client_version).map_err(fail)?;
        data[..8].copy_from_slice(&COORDINATOR_ACCOUNT);
    }

    let keys = InstanceKeys { bump, main_authority, join_authority, coordinator_account: account.address().clone() };
    let inst = Instance::new(&keys, run_id)?;
    let size = instance_space(run_id.len());
    let bump_seed = [bump];
    let seeds = [Seed::from(INSTANCE_SEED), Seed::from(run_id), Seed::from(&bump_seed)];
    let lamports = rent.minimum_balance(size)?;
    CreatePda { payer, account: instance, lamports, space: size as u64, owner: &ID }.invoke_signed(&Signer::from(&seeds))?;
    let mut data = instance.try_borrow_mut()?;
    inst.encode(&mut data).map_err(|_| ErrorCode::AccountDidNotSerialize.fail())
}
