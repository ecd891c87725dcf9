//! What the logic reads from the runtime at every state transition: the clock,
//! the newest SlotHashes entry (round-seed entropy) and, while a round waits
//! for its verify seed, the oldest entry after the slot RoundTrain ended in.

use psyche_coordinator_logic::machine::Clock as RunClock;
use psyche_coordinator_logic::selection::Entropy;
use psyche_sdk::sysvar::Clock;
use psyche_sdk::ProgramError;
#[cfg(target_arch = "bpf")]
use psyche_sdk::{base58, Address};

/// The SlotHashes sysvar: u64 count, then (slot u64, hash [32]) newest first.
#[cfg(target_arch = "bpf")]
const SLOT_HASHES_ID: Address = base58::address("SysvarS1otHashes111111111111111111111111111");
const ENTRY_LEN: u64 = 40;

/// Clock::unix_timestamp and slot, the newest SlotHashes entry, and with
/// `draw_after` the oldest entry of a slot after it (none yet: `drawn` is
/// None). The sysvar is ~20 KB, so entries are read one at a time with
/// `sol_get_sysvar` (no account to pass). An empty SlotHashes (only at
/// genesis) yields the current slot and a zero hash.
pub fn run_clock(draw_after: Option<u64>) -> Result<RunClock, ProgramError> {
    let clock = Clock::get()?;
    let count = slot_hashes_count()?;
    let entropy = if count == 0 { Entropy { slot: clock.slot, slot_hash: [0; 32] } } else { slot_hashes_entry(0)? };
    let drawn = match draw_after {
        Some(after) if count > 0 && entropy.slot > after => Some(oldest_after(after, count)?),
        _ => None,
    };
    Ok(RunClock { unix_timestamp: clock.unix_timestamp, slot: clock.slot, entropy, drawn })
}

/// The oldest of the `count` entries whose slot is above `after`; entry 0
/// (the newest) is. Slots fall strictly with the index, so a binary search
/// reads about log2(512) = 9 entries. If every kept entry is above `after`
/// (nobody acted for 512 slots), the oldest kept one.
fn oldest_after(after: u64, count: u64) -> Result<Entropy, ProgramError> {
    // Invariant: entry lo is above `after`; entries past hi are not.
    let (mut lo, mut hi) = (0u64, count.saturating_sub(1));
    while lo < hi {
        // lo < hi, so mid > lo and the loop shrinks.
        #[allow(clippy::arithmetic_side_effects)]
        let mid = lo + (hi - lo).div_ceil(2);
        if slot_hashes_entry(mid)?.slot > after {
            lo = mid;
        } else {
            // mid > lo >= 0.
            #[allow(clippy::arithmetic_side_effects)]
            let below = mid - 1;
            hi = below;
        }
    }
    slot_hashes_entry(lo)
}

fn slot_hashes_count() -> Result<u64, ProgramError> {
    let mut w = [0u8; 8];
    read_slot_hashes(&mut w, 0)?;
    Ok(u64::from_le_bytes(w))
}

/// Entry `i` (0 = newest); the caller checked i < count.
fn slot_hashes_entry(i: u64) -> Result<Entropy, ProgramError> {
    let mut e = [0u8; ENTRY_LEN as usize];
    let offset = i.checked_mul(ENTRY_LEN).and_then(|o| o.checked_add(8)).ok_or(ProgramError::InvalidAccountData)?;
    read_slot_hashes(&mut e, offset)?;
    let mut slot = [0u8; 8];
    slot.copy_from_slice(&e[..8]);
    let mut slot_hash = [0u8; 32];
    slot_hash.copy_from_slice(&e[8..]);
    Ok(Entropy { slot: u64::from_le_bytes(slot), slot_hash })
}

/// Reads `out.len()` bytes of the sysvar at `offset`; a read past its end
/// (a count the data does not hold) is a malformed sysvar.
#[cfg(target_arch = "bpf")]
fn read_slot_hashes(out: &mut [u8], offset: u64) -> Result<(), ProgramError> {
    use psyche_sdk::pinocchio::sysvars::get_sysvar_unchecked;
    // SAFETY: `out` is valid for out.len() writable bytes.
    unsafe { get_sysvar_unchecked(out.as_mut_ptr(), &SLOT_HASHES_ID, offset as usize, out.len()) }
        .map_err(|_| ProgramError::InvalidAccountData)
}

#[cfg(not(target_arch = "bpf"))]
fn read_slot_hashes(_out: &mut [u8], _offset: u64) -> Result<(), ProgramError> {
    Err(psyche_sdk::ErrorCode::OnChainOnly.into())
}
