//! The two accounts every instruction works on: the CoordinatorInstance PDA
//! (who runs the run) and the CoordinatorAccount (the run's state, zero-copy).

use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::state::{CoordinatorState, ACCOUNT_SIZE, RUN_ID_LEN};
use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::error::log_error;
use psyche_sdk::{pda, validate, AccountView, Address, ErrorCode, ProgramError, ProgramResult};

use crate::sysvars::run_clock;
use crate::{COORDINATOR_ACCOUNT, COORDINATOR_INSTANCE, ID, INSTANCE_SEED};
use psyche_coordinator_logic::machine::Clock as RunClock;

/// `CoordinatorInstance` (Borsh, after the discriminator):
/// bump u8 | main_authority [32] | join_authority [32] | coordinator_account [32]
/// | run_id string (1..=32 bytes).
pub struct Instance {
    pub bump: u8,
    pub main_authority: Address,
    pub join_authority: Address,
    pub coordinator_account: Address,
    run_id: [u8; RUN_ID_LEN],
    run_id_len: usize,
}

/// The fixed-size fields of a new instance (passed by reference: calls take
/// at most five argument registers on this target).
pub struct InstanceKeys {
    pub bump: u8,
    pub main_authority: Address,
    pub join_authority: Address,
    pub coordinator_account: Address,
}

/// Size of an instance account for a run id of `run_id_len` bytes.
// Note: callers pass run_id_len <= RUN_ID_LEN (32), checked first.
#[allow(clippy::arithmetic_side_effects)]
pub const fn instance_space(run_id_len: usize) -> usize {
    8 + 1 + 32 * 3 + 4 + run_id_len
}

impl Instance {
    /// A new instance; `run_id` must hold 1..=32 bytes (InvalidRunId).
    pub fn new(keys: &InstanceKeys, run_id: &[u8]) -> Result<Self, ProgramError> {
        if run_id.is_empty() || run_id.len() > RUN_ID_LEN {
            return Err(fail(CoordinatorError::InvalidRunId));
        }
        let mut id = [0u8; RUN_ID_LEN];
        id[..run_id.len()].copy_from_slice(run_id);
        Ok(Self {
            bump: keys.bump,
            main_authority: keys.main_authority.clone(),
            join_authority: keys.join_authority.clone(),
            coordinator_account: keys.coordinator_account.clone(),
            run_id: id,
            run_id_len: run_id.len(),
        })
    }

    pub fn run_id(&self) -> &[u8] {
        &self.run_id[..self.run_id_len]
    }

    /// Decodes account data, discriminator included.
    pub fn decode(data: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != COORDINATOR_INSTANCE {
            return Err(BorshError::InvalidTag);
        }
        let bump = r.u8()?;
        let main_authority = r.address()?;
        let join_authority = r.address()?;
        let coordinator_account = r.address()?;
        let id = r.byte_vec()?;
        r.finish()?;
        if id.is_empty() || id.len() > RUN_ID_LEN {
            return Err(BorshError::InvalidTag);
        }
        let mut run_id = [0u8; RUN_ID_LEN];
        run_id[..id.len()].copy_from_slice(id);
        Ok(Self { bump, main_authority, join_authority, coordinator_account, run_id, run_id_len: id.len() })
    }

    /// Writes the account data, discriminator included.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), BorshError> {
        let mut w = Writer::new(out);
        w.bytes(&COORDINATOR_INSTANCE)?
            .u8(self.bump)?
            .address(&self.main_authority)?
            .address(&self.join_authority)?
            .address(&self.coordinator_account)?
            .byte_vec(self.run_id())?;
        Ok(())
    }
}

/// Logs a logic error the way Anchor does and converts it.
#[cold]
pub fn fail(e: CoordinatorError) -> ProgramError {
    log_error(e.code(), e.name(), e.message());
    ProgramError::Custom(e.code())
}

/// Checks that `instance` is an instance of this program at its PDA (stored
/// canonical bump) and decodes it.
pub fn load_instance(instance: &AccountView) -> Result<Instance, ProgramError> {
    validate::initialized(instance, &ID, &COORDINATOR_INSTANCE)?;
    let inst = {
        let data = instance.try_borrow()?;
        Instance::decode(&data).map_err(|_| ErrorCode::AccountDidNotDeserialize.fail())?
    };
    // Not validate::pda_with_bump: its six argument registers fit upstream BPF
    // only where it is inlined, and the join check already calls it.
    let bump = [inst.bump];
    let expected = pda::create_program_address(&[INSTANCE_SEED, inst.run_id(), &bump], &ID)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if instance.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(inst)
}

/// The signer must be the run's main authority.
pub fn require_main_authority(inst: &Instance, authority: &AccountView) -> ProgramResult {
    validate::signer(authority)?;
    if authority.address() != &inst.main_authority {
        return Err(fail(CoordinatorError::Unauthorized));
    }
    Ok(())
}

/// Runs `f` on the state in `account`, which must be the instance's writable,
/// initialized coordinator account. A logic error is logged and returned.
pub fn with_state<T>(
    inst: &Instance,
    account: &AccountView,
    f: impl FnOnce(&mut CoordinatorState) -> Result<T, CoordinatorError>,
) -> Result<T, ProgramError> {
    with_clock_opt(inst, account, false, |s, _| f(s))
}

/// `with_state` for instructions that may advance the run: `f` also gets
/// the clock, with the verify seed's entropy when the state waits for it.
pub fn with_clock<T>(
    inst: &Instance,
    account: &AccountView,
    f: impl FnOnce(&mut CoordinatorState, &RunClock) -> Result<T, CoordinatorError>,
) -> Result<T, ProgramError> {
    with_clock_opt(inst, account, true, |s, c| f(s, c.as_ref().ok_or(CoordinatorError::CorruptState)?))
}

fn with_clock_opt<T>(
    inst: &Instance,
    account: &AccountView,
    clocked: bool,
    f: impl FnOnce(&mut CoordinatorState, Option<RunClock>) -> Result<T, CoordinatorError>,
) -> Result<T, ProgramError> {
    validate::writable(account)?;
    if account.address() != &inst.coordinator_account {
        return Err(ErrorCode::ConstraintHasOne.fail());
    }
    validate::initialized(account, &ID, &COORDINATOR_ACCOUNT)?;
    let mut data = account.try_borrow_mut()?;
    let s = state_mut(&mut data)?;
    let clock = if clocked { Some(run_clock(s.draw_after())?) } else { None };
    f(s, clock).map_err(fail)
}

/// Views coordinator account data (discriminator included) as the state, in
/// place: the state is ~67 KB and the stack frame 4 KiB, so it is never copied.
///
/// Alignment: the loader serializes each account's data at an 8-byte aligned
/// offset of the 8-byte aligned input region (it pads after every account's
/// data and realloc space to 8, `BPF_ALIGN_OF_U128`), so `data[8..]` is 8-byte
/// aligned, which is `CoordinatorState`'s alignment. `from_bytes_mut` checks
/// size and alignment anyway and we fail cleanly rather than cast a misaligned
/// pointer.
pub fn state_mut(data: &mut [u8]) -> Result<&mut CoordinatorState, ProgramError> {
    if data.len() != ACCOUNT_SIZE {
        return Err(ErrorCode::AccountDidNotDeserialize.fail());
    }
    CoordinatorState::from_bytes_mut(&mut data[8..]).ok_or_else(|| ErrorCode::AccountDidNotDeserialize.fail())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    fn instance(run_id: &[u8]) -> Instance {
        let keys = InstanceKeys {
            bump: 254,
            main_authority: Address::new_from_array([1; 32]),
            join_authority: Address::new_from_array([2; 32]),
            coordinator_account: Address::new_from_array([3; 32]),
        };
        Instance::new(&keys, run_id).unwrap()
    }

    #[test]
    fn instance_round_trips_at_its_exact_size() {
        for id in [&b"r"[..], b"a-run", &[b'x'; RUN_ID_LEN]] {
            let inst = instance(id);
            let mut data = vec![0u8; instance_space(id.len())];
            inst.encode(&mut data).unwrap();
            let back = Instance::decode(&data).unwrap();
            assert_eq!(back.run_id(), id);
            assert_eq!((back.bump, back.main_authority, back.join_authority), (254, inst.main_authority.clone(), inst.join_authority.clone()));
            assert_eq!(back.coordinator_account, inst.coordinator_account);
            // One byte short cannot hold it.
            assert!(inst.encode(&mut data[..instance_space(id.len()) - 1]).is_err());
        }
    }

    #[test]
    fn malformed_instances_are_rejected() {
        let mut data = vec![0u8; instance_space(5)];
        instance(b"a-run").encode(&mut data).unwrap();
        let mut wrong_disc = data.clone();
        wrong_disc[0] ^= 1;
        let mut trailing = data.clone();
        trailing.push(0);
        let mut empty_id = data[..instance_space(0)].to_vec();
        empty_id[8 + 1 + 96..].copy_from_slice(&0u32.to_le_bytes());
        let mut long = vec![0u8; instance_space(RUN_ID_LEN + 1)];
        long[..instance_space(0)].copy_from_slice(&data[..instance_space(0)]);
        long[8 + 1 + 96..8 + 1 + 96 + 4].copy_from_slice(&((RUN_ID_LEN + 1) as u32).to_le_bytes());
        for (name, bad) in [("discriminator", &wrong_disc), ("trailing", &trailing), ("empty id", &empty_id), ("long id", &long)] {
            assert!(Instance::decode(bad).is_err(), "{name}");
        }
        for n in 0..data.len() {
            assert!(Instance::decode(&data[..n]).is_err(), "truncated at {n}");
        }
    }

    #[test]
    fn state_view_needs_the_exact_size() {
        let mut words = vec![0u64; ACCOUNT_SIZE / 8 + 1];
        // SAFETY: a u64 buffer viewed as bytes; it outlives the slice.
        let bytes = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) };
        assert!(state_mut(&mut bytes[..ACCOUNT_SIZE]).is_ok());
        assert!(state_mut(&mut bytes[..ACCOUNT_SIZE - 1]).is_err());
        assert!(state_mut(&mut bytes[..ACCOUNT_SIZE + 1]).is_err());
        // Misaligned data is refused rather than cast.
        assert!(state_mut(&mut bytes[1..ACCOUNT_SIZE + 1]).is_err());
    }
}
