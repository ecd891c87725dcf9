use core::mem::size_of;

use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata};
use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::cpi::Signer;
use psyche_sdk::{validate, AccountView, ProgramResult};
use psyche_treasurer_interface::{check_earning_rate, TreasurerError, COORDINATOR_ID};

use super::{load_run, require_authority, require_coordinator, serialized, store_run, RunSeeds};
use crate::coordinator::{with_state, Authority, SET_FUTURE_EPOCH_RATES, SET_PAUSED, UPDATE, UPDATE_CLIENT_VERSION};

/// The Coordinator's `update` arguments: four Options of layout structs.
const UPDATE_ARGS: usize = 4 + size_of::<RunMetadata>() + size_of::<CoordinatorConfig>() + size_of::<Model>() + size_of::<Progress>();

/// run_update { metadata?, config?, model?, progress?, epoch_earning_rate_total_shared?,
/// epoch_slashing_rate_per_client?, paused?, client_version?, join_deposit? }:
/// the run authority changes the Coordinator run, which the Treasurer
/// forwards signed by the Run PDA: a pause first (so that config changes
/// apply to a halted run), then update, update_client_version,
/// set_future_epoch_rates, and a resume last (after the new config is in
/// place). A new join deposit applies to deposits made from then on (the
/// run must be its own join authority for one above 0; the run account
/// must then be writable). A new earning rate that no funding can ever
/// cover is refused (`UnfundableRate`: one epoch of it exceeds the supply of
/// a mint without a mint authority; `check_earning_rate`). An update that
/// sets the slashing rate or the join deposit is refused when it leaves a
/// run that asks for or holds deposits with a slashing rate of 0 for the
/// coming epochs (`ZeroSlashingRate`; `Run::check_slashing_rate`).
///
/// Accounts: 0. [SIGNER] authority, 1. [WRITE] run, 2. [] coordinator_instance,
/// 3. [WRITE] coordinator_account, 4. [] coordinator_program, 5. [] collateral_mint.
pub fn run_update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, run, instance, account, coordinator_program, mint] = validate::accounts::<6>(accounts)?;
    let mut r = Reader::new(args);
    // The layout structs pass through unchanged: the Coordinator validates them.
    let mut update = [0u8; 8 + UPDATE_ARGS];
    let update_len = {
        let mut w = Writer::new(&mut update);
        w.bytes(&UPDATE)?;
        let mut any = false;
        for size in [size_of::<RunMetadata>(), size_of::<CoordinatorConfig>(), size_of::<Model>(), size_of::<Progress>()] {
            let some = r.option_tag()?;
            w.bool(some)?;
            if some {
                w.bytes(r.bytes(size)?)?;
                any = true;
            }
        }
        if any { w.len() } else { 0 }
    };
    let earning = option_u64(&mut r)?;
    let slashing = option_u64(&mut r)?;
    let paused = if r.option_tag()? { Some(r.bool()?) } else { None };
    let client_version = if r.option_tag()? { Some(r.string()?) } else { None };
    let join_deposit = option_u64(&mut r)?;
    r.finish()?;

    let mut state = load_run(run)?;
    require_authority(&state, authority)?;
    if state.closed {
        return Err(TreasurerError::RunClosed.fail());
    }
    require_coordinator(&state, Some(instance), account)?;
    validate::program(coordinator_program, &COORDINATOR_ID)?;
    if mint.address() != &state.collateral_mint {
        return Err(TreasurerError::MintMismatch.fail());
    }
    if let Some(rate) = earning {
        if !mint.owned_by(&state.token_program) {
            return Err(TreasurerError::InvalidMint.fail());
        }
        let data = mint.try_borrow()?;
        check_earning_rate(&data, rate).map_err(|e| e.fail())?;
    }
    if update_len == 0 && earning.is_none() && slashing.is_none() && paused.is_none() && client_version.is_none() && join_deposit.is_none() {
        return Err(TreasurerError::EmptyUpdate.fail());
    }
    if let Some(amount) = join_deposit {
        validate::writable(run)?;
        state.set_join_deposit(run.address(), amount).map_err(|e| e.fail())?;
    }
    if slashing.is_some() || join_deposit.is_some() {
        // The coming epochs' rate once this update is done.
        let rate = match slashing {
            Some(rate) => rate,
            None => with_state(account, |s| Ok(s.future_rates.slashing_rate_per_client))?,
        };
        state.check_slashing_rate(rate).map_err(|e| e.fail())?;
    }

    let seeds = RunSeeds::new(&state);
    let seeds = seeds.seeds();
    let signer = Signer::from(&seeds);
    let coordinator = Authority { run, instance, account };
    if paused == Some(true) {
        coordinator.invoke(&set_paused(true), &signer)?;
    }
    if update_len > 0 {
        coordinator.invoke(&update[..update_len], &signer)?;
    }
    if let Some(version) = client_version {
        let mut data = [0u8; 8 + 4 + 128];
        let mut w = Writer::new(&mut data);
        serialized(w.bytes(&UPDATE_CLIENT_VERSION).and_then(|w| w.string(version)))?;
        let n = w.len();
        coordinator.invoke(&data[..n], &signer)?;
    }
    if earning.is_some() || slashing.is_some() {
        let mut data = [0u8; 8 + 9 + 9];
        let mut w = Writer::new(&mut data);
        w.bytes(&SET_FUTURE_EPOCH_RATES)?;
        write_option_u64(&mut w, earning)?;
        write_option_u64(&mut w, slashing)?;
        let n = w.len();
        coordinator.invoke(&data[..n], &signer)?;
    }
    if paused == Some(false) {
        coordinator.invoke(&set_paused(false), &signer)?;
    }
    if join_deposit.is_some() {
        store_run(run, &state)?;
    }
    Ok(())
}

fn set_paused(paused: bool) -> [u8; 9] {
    let mut data = [0u8; 9];
    data[..8].copy_from_slice(&SET_PAUSED);
    data[8] = paused as u8;
    data
}

fn option_u64(r: &mut Reader<'_>) -> Result<Option<u64>, BorshError> {
    if r.option_tag()? {
        Ok(Some(r.u64()?))
    } else {
        Ok(None)
    }
}

fn write_option_u64(w: &mut Writer<'_>, v: Option<u64>) -> Result<(), BorshError> {
    match v {
        Some(v) => w.bool(true)?.u64(v)?,
        None => w.bool(false)?,
    };
    Ok(())
}
