use psyche_sdk::borsh::{Reader, Writer};
use psyche_sdk::cpi::ata::{CreateIdempotent, ASSOCIATED_TOKEN_PROGRAM_ID};
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::{invoke_signed, InstructionAccount, InstructionView, Signer};
use psyche_sdk::token::{check_mint, check_token_program};
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{Run, TreasurerError, COORDINATOR_ID, ID, RUN_SEED, RUN_SPACE};

use super::{create_pda, serialized, store_run, RunSeeds};
use crate::coordinator::INIT_COORDINATOR;

/// run_create { index, run_id, client_version, main_authority, join_authority,
/// join_deposit }: creates the Run PDA ["Run", index], its associated token
/// account for the collateral mint, and the Coordinator run (init_coordinator
/// by CPI) whose main authority is the Run PDA. The client allocates the
/// coordinator account in the same transaction, as for a plain Coordinator
/// run. A join deposit above 0 needs the Run PDA as the join authority: then
/// only participant_deposit grants joins.
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [WRITE] run, 2. [WRITE] run_collateral
/// (the Run's associated token account), 3. [] collateral_mint,
/// 4. [WRITE] coordinator_instance, 5. [WRITE] coordinator_account,
/// 6. [] coordinator_program, 7. [] token_program, 8. [] associated_token_program,
/// 9. [] system_program.
pub fn run_create(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, run, run_collateral, mint, instance, account, coordinator_program, token_program, ata_program, system_program] =
        validate::accounts::<10>(accounts)?;
    let mut r = Reader::new(args);
    let index = r.u64()?;
    let run_id = r.string()?;
    let client_version = r.string()?;
    let main_authority = r.address()?;
    let join_authority = r.address()?;
    let join_deposit = r.u64()?;
    r.finish()?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::writable(run)?;
    validate::writable(run_collateral)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    check_token_program(token_program)?;
    validate::program(ata_program, &ASSOCIATED_TOKEN_PROGRAM_ID)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    check_mint::<TreasurerError>(mint, token_program.address())?;
    let index_le = index.to_le_bytes();
    let bump = validate::pda(run, &[RUN_SEED, &index_le], &ID)?;
    // Only this program can give the PDA data or an owner, so a system-owned
    // PDA is uninitialized (possibly pre-funded by anyone).
    if !run.owned_by(&SYSTEM_PROGRAM_ID) {
        return Err(TreasurerError::RunAlreadyExists.fail());
    }

    let mut state = Run {
        bump,
        index,
        main_authority,
        join_authority: join_authority.clone(),
        coordinator_instance: instance.address().clone(),
        coordinator_account: account.address().clone(),
        collateral_mint: mint.address().clone(),
        token_program: token_program.address().clone(),
        total_claimed_points: 0,
        closed: false,
        join_deposit: 0,
        total_deposits: 0,
        total_burned: 0,
        unclaimed_settled_points: 0,
    };
    state.set_join_deposit(run.address(), join_deposit).map_err(|e| e.fail())?;
    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    create_pda(payer, run, RUN_SPACE, &Signer::from(&seeds))?;
    store_run(run, &state)?;

    CreateIdempotent { payer, account: run_collateral, wallet: run, mint, system_program, token_program }.invoke_signed(&[])?;

    // init_coordinator { main_authority: the Run, join_authority, run_id, client_version }.
    let mut data = [0u8; 256];
    let mut w = Writer::new(&mut data);
    serialized(
        w.bytes(&INIT_COORDINATOR)
            .and_then(|w| w.address(run.address()))
            .and_then(|w| w.address(&join_authority))
            .and_then(|w| w.string(run_id))
            .and_then(|w| w.string(client_version)),
    )?;
    let n = w.len();
    let metas = [
        InstructionAccount::writable_signer(payer.address()),
        InstructionAccount::writable(instance.address()),
        InstructionAccount::writable(account.address()),
        InstructionAccount::readonly(system_program.address()),
    ];
    let ix = InstructionView { program_id: &COORDINATOR_ID, data: &data[..n], accounts: &metas };
    invoke_signed(&ix, &[payer, instance, account, system_program], &[])
}
