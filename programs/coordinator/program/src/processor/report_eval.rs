use psyche_coordinator_logic::machine::EvalReport;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// report_eval { step, task, acc, acc_norm, count }: a registered client
/// publishes its benchmark score of the model after `step` (event
/// EvalReported); the account is not changed.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn report_eval(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let report = EvalReport::decode(args)?;
    as_client(accounts, |s, signer, _| s.report_eval(signer, &report))
}
