//! One handler per instruction. Each destructures its accounts, decodes its
//! arguments, runs every account check, then calls the logic on the account
//! data in place and logs the logic's events.

mod answer_dispute;
mod checkpoint;
mod commit;
mod free_coordinator;
mod health_check;
mod init_coordinator;
mod join_run;
mod judge_dispute;
mod leave_run;
mod report_eval;
mod report_prompt;
mod set_future_epoch_rates;
mod set_paused;
mod settle_points;
mod take_burned;
mod tick;
mod update;
mod update_client_version;
mod verify;
mod warmup_witness;
mod witness;

pub use answer_dispute::answer_dispute;
pub use checkpoint::checkpoint;
pub use commit::commit;
pub use free_coordinator::free_coordinator;
pub use health_check::health_check;
pub use init_coordinator::init_coordinator;
pub use join_run::join_run;
pub use judge_dispute::judge_dispute;
pub use leave_run::leave_run;
pub use report_eval::report_eval;
pub use report_prompt::report_prompt;
pub use set_future_epoch_rates::set_future_epoch_rates;
pub use set_paused::set_paused;
pub use settle_points::settle_points;
pub use take_burned::take_burned;
pub use tick::tick;
pub use update::update;
pub use update_client_version::update_client_version;
pub use verify::verify;
pub use warmup_witness::warmup_witness;
pub use witness::witness;

use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::event::Events;
use psyche_coordinator_logic::machine::Clock;
use psyche_coordinator_logic::state::CoordinatorState;
use psyche_sdk::{validate, AccountView, ProgramResult};

use crate::events::emit_all;
use crate::run::{load_instance, require_main_authority, with_clock, with_state};

/// An authority instruction. Accounts: 0. [SIGNER] authority (the run's main
/// authority), 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
/// Runs `f` on the state and logs its events.
fn as_authority(accounts: &[AccountView], f: impl FnOnce(&mut CoordinatorState) -> Result<Events, CoordinatorError>) -> ProgramResult {
    let [authority, instance, account] = validate::accounts::<3>(accounts)?;
    let inst = load_instance(instance)?;
    require_main_authority(&inst, authority)?;
    let events = with_state(&inst, account, f)?;
    emit_all(&events)
}

/// A client instruction: 0. [SIGNER] user, 1. [] coordinator_instance,
/// 2. [WRITE] coordinator_account. Runs `f` with the signer's key and the
/// clock, and logs its events.
fn as_client(
    accounts: &[AccountView],
    f: impl FnOnce(&mut CoordinatorState, &[u8; 32], &Clock) -> Result<Events, CoordinatorError>,
) -> ProgramResult {
    let [user, instance, account] = validate::accounts::<3>(accounts)?;
    validate::signer(user)?;
    let inst = load_instance(instance)?;
    let signer = user.address().to_bytes();
    let events = with_clock(&inst, account, |s, clock| f(s, &signer, clock))?;
    emit_all(&events)
}
