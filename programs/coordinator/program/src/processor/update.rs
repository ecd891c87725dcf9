use psyche_coordinator_logic::event::Events;
use psyche_coordinator_logic::machine::Update;
use psyche_sdk::borsh::Reader;
use psyche_sdk::{AccountView, ProgramResult};

use super::as_authority;
use crate::args::option_pod;

/// update { metadata?, config?, model?, progress? }: the main authority
/// replaces what it passes. Metadata changes at any time; config, model and
/// progress only while the run is halted. Everything is validated first.
///
/// Accounts: 0. [SIGNER] authority, 1. [] coordinator_instance, 2. [WRITE] coordinator_account.
pub fn update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let mut r = Reader::new(args);
    let metadata = option_pod(&mut r)?;
    let config = option_pod(&mut r)?;
    let model = option_pod(&mut r)?;
    let progress = option_pod(&mut r)?;
    r.finish()?;
    let u = Update { metadata: metadata.as_ref(), config: config.as_ref(), model: model.as_ref(), progress: progress.as_ref() };
    as_authority(accounts, |s| s.update(&u).map(|()| Events::default()))
}
