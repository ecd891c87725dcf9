use psyche_coordinator_logic::machine::PromptReport;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_client;
use crate::args::Decode;

/// report_prompt { step, prompt, tokens }: a registered client publishes the
/// tokens the model after `step` generated for prompt number `prompt` (event
/// PromptReported); the account is not changed.
///
/// Accounts: 0. [SIGNER] user, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn report_prompt(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let report = PromptReport::decode(args)?;
    as_client(accounts, |s, signer, _| s.report_prompt(signer, &report))
}
