//! What the logic reads from the runtime at every state transition: the clock
//! and the newest SlotHashes entry (round-seed entropy).

use psyche_coordinator_logic::machine::Clock as RunClock;
use psyche_coordinator_logic::selection::Entropy;
use psyche_sdk::sysvar::Clock;
use psyche_sdk::ProgramError;
#[cfg(target_arch = "bpf")]
use psyche_sdk::{base58, Address};

/// The SlotHashes sysvar: u64 count, then (slot u64, hash [32]) newest first.
#[cfg(target_arch = "bpf")]
const SLOT_HASHES_ID: Address = base58::address("SysvarS1otHashes111111111111111111111111111");

/// Clock::unix_timestamp and the newest SlotHashes entry. The sysvar is ~20 KB,
/// so only its first entry is read with `sol_get_sysvar` (no account to pass).
/// An empty SlotHashes (only at genesis) yields the current slot and a zero hash.
pub fn run_clock() -> Result<RunClock, ProgramError> {
    let clock = Clock::get()?;
    let mut head = [0u8; 48];
    read_slot_hashes_head(&mut head)?;
    let count = u64::from_le_bytes(word(&head, 0));
    let entropy = if count == 0 {
        Entropy { slot: clock.slot, slot_hash: [0; 32] }
    } else {
        let mut slot_hash = [0u8; 32];
        slot_hash.copy_from_slice(&head[16..48]);
        Entropy { slot: u64::from_le_bytes(word(&head, 8)), slot_hash }
    };
    Ok(RunClock { unix_timestamp: clock.unix_timestamp, entropy })
}

fn word(b: &[u8; 48], at: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..][..8]);
    w
}

/// Reads the count and first entry; a sysvar shorter than that (no entry) reads
/// just the count.
#[cfg(target_arch = "bpf")]
fn read_slot_hashes_head(out: &mut [u8; 48]) -> Result<(), ProgramError> {
    use psyche_sdk::pinocchio::sysvars::get_sysvar_unchecked;
    // SAFETY: `out` is valid for 48 (then 8) writable bytes.
    unsafe {
        if get_sysvar_unchecked(out.as_mut_ptr(), &SLOT_HASHES_ID, 0, 48).is_ok() {
            return Ok(());
        }
        *out = [0; 48];
        get_sysvar_unchecked(out.as_mut_ptr(), &SLOT_HASHES_ID, 0, 8)?;
    }
    if out[..8] != [0; 8] {
        // A count but no full first entry: the sysvar is malformed.
        return Err(ProgramError::InvalidAccountData);
    }
    Ok(())
}

#[cfg(not(target_arch = "bpf"))]
fn read_slot_hashes_head(_out: &mut [u8; 48]) -> Result<(), ProgramError> {
    Err(psyche_sdk::ErrorCode::OnChainOnly.into())
}
