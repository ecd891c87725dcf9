//! Clock and Rent sysvars through their syscalls, rent with integer math
//! (upstream BPF has no floating point), and SlotHashes entries read one at
//! a time.

#[cfg(not(target_arch = "bpf"))]
use crate::ErrorCode;
use crate::ProgramError;
#[cfg(target_arch = "bpf")]
use crate::{base58, Address};

/// The Clock sysvar.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    pub slot: u64,
    pub epoch_start_timestamp: i64,
    pub epoch: u64,
    pub leader_schedule_epoch: u64,
    pub unix_timestamp: i64,
}

/// The Rent sysvar; the exemption threshold is an f64 kept as its bits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rent {
    pub lamports_per_byte_year: u64,
    pub exemption_threshold_bits: u64,
    pub burn_percent: u8,
}

/// Bytes the runtime charges for on top of an account's data.
pub const ACCOUNT_STORAGE_OVERHEAD: u64 = 128;

impl Clock {
    pub fn get() -> Result<Self, ProgramError> {
        #[cfg(target_arch = "bpf")]
        {
            let mut c = Clock::default();
            // SAFETY: Clock has the sysvar's C layout and is writable.
            #[allow(deprecated)]
            let rc = unsafe { pinocchio::syscalls::sol_get_clock_sysvar(&mut c as *mut Clock as *mut u8) };
            if rc != 0 {
                return Err(ProgramError::UnsupportedSysvar);
            }
            Ok(c)
        }
        #[cfg(not(target_arch = "bpf"))]
        Err(ErrorCode::OnChainOnly.into())
    }
}

impl Rent {
    pub fn get() -> Result<Self, ProgramError> {
        #[cfg(target_arch = "bpf")]
        {
            let mut r = Rent::default();
            // SAFETY: Rent has the sysvar's C layout (u64, f64, u8) and is
            // writable.
            #[allow(deprecated)]
            let rc = unsafe { pinocchio::syscalls::sol_get_rent_sysvar(&mut r as *mut Rent as *mut u8) };
            if rc != 0 {
                return Err(ProgramError::UnsupportedSysvar);
            }
            Ok(r)
        }
        #[cfg(not(target_arch = "bpf"))]
        Err(ErrorCode::OnChainOnly.into())
    }

    /// The balance that makes an account of `data_len` bytes rent exempt:
    /// floor((128 + data_len) * lamports_per_byte_year * threshold), computed
    /// exactly from the threshold's binary representation. Thresholds whose
    /// mantissa does not fit (none in use: 2.0 today, 1.0 after SIMD-0194)
    /// report ArithmeticOverflow rather than a wrong figure.
    pub fn minimum_balance(&self, data_len: usize) -> Result<u64, ProgramError> {
        let bytes = ACCOUNT_STORAGE_OVERHEAD.checked_add(data_len as u64).ok_or(ProgramError::ArithmeticOverflow)?;
        let base = bytes.checked_mul(self.lamports_per_byte_year).ok_or(ProgramError::ArithmeticOverflow)?;
        let bits = self.exemption_threshold_bits;
        let exponent = ((bits >> 52) & 0x7ff) as i64;
        let fraction = bits & ((1 << 52) - 1);
        if bits >> 63 != 0 || exponent == 0x7ff {
            return Err(ProgramError::InvalidAccountData);
        }
        if exponent == 0 {
            // Zero or subnormal: below one lamport for any real balance.
            return Ok(0);
        }
        // threshold = mantissa * 2^shift, mantissa odd.
        let mut mantissa = (1u64 << 52) | fraction;
        let tz = mantissa.trailing_zeros();
        mantissa >>= tz;
        // Note: exponent is in 1..=0x7fe and tz <= 52, so shift is in
        // -1074..=1023.
        #[allow(clippy::arithmetic_side_effects)]
        let shift = exponent - 1075 + tz as i64;
        let scaled = base.checked_mul(mantissa).ok_or(ProgramError::ArithmeticOverflow)?;
        if shift >= 0 {
            if shift >= 64 || scaled.leading_zeros() < shift as u32 {
                return Err(ProgramError::ArithmeticOverflow);
            }
            Ok(scaled << shift)
        } else if shift <= -64 {
            Ok(0)
        } else {
            // Note: shift is in -63..=-1 here.
            #[allow(clippy::arithmetic_side_effects)]
            let right = -shift;
            Ok(scaled >> right)
        }
    }
}

/// The SlotHashes sysvar: u64 count, then (slot u64, hash [32]) newest
/// first, up to 512 entries. It is ~20 KB, so entries are read one at a
/// time with `sol_get_sysvar` (no account to pass).
pub struct SlotHashes;

/// One SlotHashes entry: a recent slot and its bank hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotHash {
    pub slot: u64,
    pub hash: [u8; 32],
}

#[cfg(target_arch = "bpf")]
const SLOT_HASHES_ID: Address = base58::address("SysvarS1otHashes111111111111111111111111111");
const SLOT_HASH_LEN: u64 = 40;

impl SlotHashes {
    /// The number of entries (0 only at genesis).
    pub fn len() -> Result<u64, ProgramError> {
        let mut w = [0u8; 8];
        read_slot_hashes(&mut w, 0)?;
        Ok(u64::from_le_bytes(w))
    }

    /// Entry `i` (0 = newest); the caller checked i < len().
    pub fn entry(i: u64) -> Result<SlotHash, ProgramError> {
        let mut e = [0u8; SLOT_HASH_LEN as usize];
        let offset = i.checked_mul(SLOT_HASH_LEN).and_then(|o| o.checked_add(8)).ok_or(ProgramError::InvalidAccountData)?;
        read_slot_hashes(&mut e, offset)?;
        let mut slot = [0u8; 8];
        slot.copy_from_slice(&e[..8]);
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&e[8..]);
        Ok(SlotHash { slot: u64::from_le_bytes(slot), hash })
    }

    /// The oldest of the `count` (= len()) entries whose slot is above
    /// `after`; the caller checked that entry 0 (the newest) is. Slots fall
    /// strictly with the index, so a binary search reads about log2(512) = 9
    /// entries. If every kept entry is above `after` (nobody acted for 512
    /// slots), the oldest kept one. Whoever sends the instruction at slot
    /// `after` cannot know the hash of a later slot, so the entry is entropy
    /// it could not choose.
    pub fn oldest_after(after: u64, count: u64) -> Result<SlotHash, ProgramError> {
        // Invariant: entry lo is above `after`; entries past hi are not.
        let (mut lo, mut hi) = (0u64, count.saturating_sub(1));
        while lo < hi {
            // lo < hi, so mid > lo and the loop shrinks.
            #[allow(clippy::arithmetic_side_effects)]
            let mid = lo + (hi - lo).div_ceil(2);
            if Self::entry(mid)?.slot > after {
                lo = mid;
            } else {
                // mid > lo >= 0.
                #[allow(clippy::arithmetic_side_effects)]
                let below = mid - 1;
                hi = below;
            }
        }
        Self::entry(lo)
    }
}

/// Reads `out.len()` bytes of the sysvar at `offset`; a read past its end
/// (a count the data does not hold) is a malformed sysvar.
#[cfg(target_arch = "bpf")]
fn read_slot_hashes(out: &mut [u8], offset: u64) -> Result<(), ProgramError> {
    use pinocchio::sysvars::get_sysvar_unchecked;
    // SAFETY: `out` is valid for out.len() writable bytes.
    unsafe { get_sysvar_unchecked(out.as_mut_ptr(), &SLOT_HASHES_ID, offset as usize, out.len()) }
        .map_err(|_| ProgramError::InvalidAccountData)
}

#[cfg(not(target_arch = "bpf"))]
fn read_slot_hashes(_out: &mut [u8], _offset: u64) -> Result<(), ProgramError> {
    Err(ErrorCode::OnChainOnly.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rent(threshold: f64) -> Rent {
        Rent { lamports_per_byte_year: 3480, exemption_threshold_bits: threshold.to_bits(), burn_percent: 50 }
    }

    #[test]
    fn matches_float_formula() {
        for threshold in [2.0, 1.0, 0.5, 4.0, 1.5, 0.0] {
            for len in [0usize, 1, 36, 165, 10_240, 1 << 20] {
                let want = (((ACCOUNT_STORAGE_OVERHEAD + len as u64) * 3480) as f64 * threshold) as u64;
                assert_eq!(rent(threshold).minimum_balance(len), Ok(want), "threshold {threshold} len {len}");
            }
        }
        // The figure solana-test-validator reports for a 0-byte account.
        assert_eq!(rent(2.0).minimum_balance(0), Ok(890_880));
    }

    #[test]
    fn refuses_unrepresentable() {
        assert_eq!(rent(-1.0).minimum_balance(1), Err(ProgramError::InvalidAccountData));
        assert_eq!(rent(f64::NAN).minimum_balance(1), Err(ProgramError::InvalidAccountData));
        assert_eq!(rent(2.0).minimum_balance(usize::MAX), Err(ProgramError::ArithmeticOverflow));
        assert_eq!(rent(1e30).minimum_balance(10), Err(ProgramError::ArithmeticOverflow));
    }
}
