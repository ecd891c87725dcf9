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

// SAFETY: see the trait; layouts checked by psyche-coordinator-logic's state tests.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_read_their_borsh_encoding() {
        let mut data = [0u8; 1 + 16];
        data[0] = 1;
        data[1..5].copy_from_slice(&7u32.to_le_bytes());
        data[5..9].copy_from_slice(&9u32.to_le_bytes());
        data[9..17].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        let mut r = Reader::new(&data);
        let p: Option<Progress> = option_pod(&mut r).unwrap();
        assert_eq!(p, Some(Progress { epoch: 7, step: 9, data_index: u64::MAX - 1 }));
        assert!(r.finish().is_ok());
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&[0])).unwrap(), None);
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&[2])), Err(BorshError::InvalidTag));
        assert_eq!(option_pod::<Progress>(&mut Reader::new(&data[..16])), Err(BorshError::UnexpectedEnd));
    }

    #[test]
    fn fixed_strings_fit_or_fail() {
        assert_eq!(fixed::<4>(b"ab"), Some(*b"ab\0\0"));
        assert_eq!(fixed::<2>(b"ab"), Some(*b"ab"));
        assert_eq!(fixed::<2>(b"abc"), None);
        assert_eq!(option_u64(&mut Reader::new(&[1, 5, 0, 0, 0, 0, 0, 0, 0])), Ok(Some(5)));
    }
}
