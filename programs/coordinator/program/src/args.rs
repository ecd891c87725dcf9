//! Decoding instruction arguments. The layout structs of the logic crate
//! travel in their C layout, which is also their Borsh encoding (no implicit
//! padding, little-endian integers), so they are read with one copy.

use core::mem::size_of;

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata};
use psyche_sdk::borsh::{BorshError, Reader};

/// # Safety
/// Implementors are `#[repr(C)]` structs of integers and byte arrays without
/// implicit padding (the logic crate tests this), so every bit pattern of
/// `size_of::<Self>()` bytes is a valid value.
pub unsafe trait Pod: Copy {}

// SAFETY: see the trait; layouts checked by psyche-coordinator's state tests.
unsafe impl Pod for RunMetadata {}
// SAFETY: as above.
unsafe impl Pod for CoordinatorConfig {}
// SAFETY: as above.
unsafe impl Pod for Model {}
// SAFETY: as above.
unsafe impl Pod for Progress {}
// SAFETY: as above.
unsafe impl Pod for Bloom {}

/// Reads a layout struct.
pub fn pod<T: Pod>(r: &mut Reader<'_>) -> Result<T, BorshError> {
    let b = r.bytes(size_of::<T>())?;
    // SAFETY: `b` holds size_of::<T>() bytes, any of which form a valid T
    // (Pod); instruction data has no alignment, hence read_unaligned.
    Ok(unsafe { core::ptr::read_unaligned(b.as_ptr() as *const T) })
}

/// Reads an Option of a layout struct.
pub fn option_pod<T: Pod>(r: &mut Reader<'_>) -> Result<Option<T>, BorshError> {
    if r.option_tag()? {
        Ok(Some(pod(r)?))
    } else {
        Ok(None)
    }
}

/// Reads an Option<u64>.
pub fn option_u64(r: &mut Reader<'_>) -> Result<Option<u64>, BorshError> {
    if r.option_tag()? {
        Ok(Some(r.u64()?))
    } else {
        Ok(None)
    }
}

/// Copies a string into a zero-padded fixed field; None if it does not fit.
pub fn fixed<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() > N {
        return None;
    }
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s);
    Some(out)
}
