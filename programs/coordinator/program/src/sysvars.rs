//! What the logic reads from the runtime at every state transition: the clock,
//! the newest SlotHashes entry (round-seed entropy) and, while a round waits
//! for its verify seed, the oldest entry after the slot RoundTrain ended in.

use psyche_coordinator_logic::machine::Clock as RunClock;
use psyche_coordinator_logic::selection::Entropy;
use psyche_sdk::sysvar::{Clock, SlotHash, SlotHashes};
use psyche_sdk::ProgramError;

/// Clock::unix_timestamp and slot, the newest SlotHashes entry, and with
/// `draw_after` the oldest entry of a slot after it (none yet: `drawn` is
/// None). An empty SlotHashes (only at genesis) yields the current slot and
/// a zero hash.
pub fn run_clock(draw_after: Option<u64>) -> Result<RunClock, ProgramError> {
    let clock = Clock::get()?;
    let count = SlotHashes::len()?;
    let newest = if count == 0 { SlotHash { slot: clock.slot, hash: [0; 32] } } else { SlotHashes::entry(0)? };
    let drawn = match draw_after {
        Some(after) if count > 0 && newest.slot > after => Some(entropy(SlotHashes::oldest_after(after, count)?)),
        _ => None,
    };
    Ok(RunClock { unix_timestamp: clock.unix_timestamp, slot: clock.slot, entropy: entropy(newest), drawn })
}

fn entropy(e: SlotHash) -> Entropy {
    Entropy { slot: e.slot, slot_hash: e.hash }
}
