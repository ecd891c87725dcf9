use psyche_authorizer_interface::{check_authorized, ID as AUTHORIZER_ID};
use psyche_coordinator_logic::error::CoordinatorError;
use psyche_sdk::{validate, AccountView, ProgramResult};

use crate::args::{Decode, JoinRunParams};
use crate::events::emit_all;
use crate::join_proof::{join_message, proven, INSTRUCTIONS_SYSVAR};
use crate::run::{fail, load_instance, with_clock};
use crate::JOIN_RUN_SCOPE;

/// join_run { signer, p2p_identity }: the signer registers for the next epoch
/// that forms, with the p2p identity it trains under. It must be authorized by
/// the run's join authority in the Authorizer (scope "CoordinatorJoinRun";
/// the authorization is read, not called). The transaction must prove that
/// the signer holds the p2p key (crate::join_proof), read from the
/// Instructions sysvar.
///
/// Accounts: 0. [SIGNER] user, 1. [] authorization, 2. [] coordinator_instance,
/// 3. [WRITE] coordinator_account, 4. [] instructions (the sysvar).
pub fn join_run(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [user, authorization, instance, account, instructions] = validate::accounts::<5>(accounts)?;
    let JoinRunParams { signer, p2p_identity } = JoinRunParams::decode(args)?;
    validate::signer(user)?;
    if user.address() != &signer {
        return Err(fail(CoordinatorError::SignerMismatch));
    }
    validate::address(instructions, &INSTRUCTIONS_SYSVAR)?;
    let inst = load_instance(instance)?;
    if !check_authorized(authorization, &AUTHORIZER_ID, &inst.join_authority, &signer, JOIN_RUN_SCOPE)? {
        return Err(fail(CoordinatorError::JoinNotAuthorized));
    }
    let message = join_message(&crate::ID.to_bytes(), &account.address().to_bytes(), &signer.to_bytes());
    if !proven(&instructions.try_borrow()?, &p2p_identity, &message) {
        return Err(fail(CoordinatorError::P2pKeyNotProven));
    }
    let key = signer.to_bytes();
    let events = with_clock(&inst, account, |s, clock| s.join(&key, &p2p_identity, clock))?;
    emit_all(&events)
}
