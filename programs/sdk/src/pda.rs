//! Program derived addresses through the runtime's syscalls.

#[cfg(not(target_arch = "bpf"))]
use crate::ErrorCode;
use crate::{Address, ProgramError};

/// Seeds per derivation (including the bump) and bytes per seed, as the
/// runtime enforces.
pub const MAX_SEEDS: usize = 16;
pub const MAX_SEED_LEN: usize = 32;

fn check_seeds(seeds: &[&[u8]]) -> Result<(), ProgramError> {
    if seeds.len() >= MAX_SEEDS {
        return Err(ProgramError::MaxSeedLengthExceeded);
    }
    if seeds.iter().any(|s| s.len() > MAX_SEED_LEN) {
        return Err(ProgramError::MaxSeedLengthExceeded);
    }
    Ok(())
}

/// Finds the canonical (highest valid) bump for `seeds` and returns the
/// address with it.
pub fn find_program_address(seeds: &[&[u8]], program_id: &Address) -> Result<(Address, u8), ProgramError> {
    check_seeds(seeds)?;
    #[cfg(target_arch = "bpf")]
    {
        let mut out = [0u8; 32];
        let mut bump = 0u8;
        // SAFETY: seeds has the (ptr, len) slice layout the syscall reads;
        // program_id is 32 bytes; out and bump are writable.
        let rc = unsafe {
            pinocchio::syscalls::sol_try_find_program_address(
                seeds.as_ptr() as *const u8,
                seeds.len() as u64,
                program_id.as_ref().as_ptr(),
                out.as_mut_ptr(),
                &mut bump,
            )
        };
        if rc != 0 {
            return Err(ProgramError::InvalidSeeds);
        }
        Ok((Address::new_from_array(out), bump))
    }
    #[cfg(not(target_arch = "bpf"))]
    {
        let _ = program_id;
        Err(ErrorCode::OnChainOnly.into())
    }
}

/// The address for `seeds` (which include the bump), or InvalidSeeds when it
/// falls on the curve.
pub fn create_program_address(seeds: &[&[u8]], program_id: &Address) -> Result<Address, ProgramError> {
    if seeds.len() > MAX_SEEDS {
        return Err(ProgramError::MaxSeedLengthExceeded);
    }
    if seeds.iter().any(|s| s.len() > MAX_SEED_LEN) {
        return Err(ProgramError::MaxSeedLengthExceeded);
    }
    #[cfg(target_arch = "bpf")]
    {
        let mut out = [0u8; 32];
        // SAFETY: as in find_program_address.
        let rc = unsafe {
            pinocchio::syscalls::sol_create_program_address(
                seeds.as_ptr() as *const u8,
                seeds.len() as u64,
                program_id.as_ref().as_ptr(),
                out.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(ProgramError::InvalidSeeds);
        }
        Ok(Address::new_from_array(out))
    }
    #[cfg(not(target_arch = "bpf"))]
    {
        let _ = program_id;
        Err(ErrorCode::OnChainOnly.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_limits() {
        let id = Address::new_from_array([1; 32]);
        let long = [0u8; 33];
        assert_eq!(find_program_address(&[&long], &id), Err(ProgramError::MaxSeedLengthExceeded));
        let many: [&[u8]; 16] = [b"x"; 16];
        assert_eq!(find_program_address(&many, &id), Err(ProgramError::MaxSeedLengthExceeded));
        assert_eq!(find_program_address(&[b"ok"], &id), Err(ProgramError::Custom(4900)));
    }
}
