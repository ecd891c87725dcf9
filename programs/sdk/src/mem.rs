//! Memory syscalls with slice bounds: on-chain they cost a flat fee plus a
//! per-byte rate, far below a byte loop in the VM.

use crate::ProgramError;
use core::cmp::Ordering;

/// Copies `src` into `dst`; their lengths must match.
pub fn copy(dst: &mut [u8], src: &[u8]) -> Result<(), ProgramError> {
    if dst.len() != src.len() {
        return Err(ProgramError::InvalidArgument);
    }
    #[cfg(target_arch = "bpf")]
    // SAFETY: both slices are valid for len bytes and cannot overlap (one is
    // borrowed mutably).
    unsafe {
        pinocchio::syscalls::sol_memcpy_(dst.as_mut_ptr(), src.as_ptr(), src.len() as u64)
    };
    #[cfg(not(target_arch = "bpf"))]
    dst.copy_from_slice(src);
    Ok(())
}

/// Copies `len` bytes inside `buf` from `from` to `to`; the ranges may overlap.
pub fn copy_within(buf: &mut [u8], from: usize, to: usize, len: usize) -> Result<(), ProgramError> {
    let fits = |start: usize| start.checked_add(len).is_some_and(|end| end <= buf.len());
    if !fits(from) || !fits(to) {
        return Err(ProgramError::InvalidArgument);
    }
    #[cfg(target_arch = "bpf")]
    // SAFETY: both ranges were checked to lie inside buf; memmove allows overlap.
    unsafe {
        let p = buf.as_mut_ptr();
        pinocchio::syscalls::sol_memmove_(p.add(to), p.add(from), len as u64)
    };
    // Note: fits(from) checked that from + len <= buf.len().
    #[cfg(not(target_arch = "bpf"))]
    #[allow(clippy::arithmetic_side_effects)]
    buf.copy_within(from..from + len, to);
    Ok(())
}

/// Sets every byte of `dst` to `byte`.
pub fn fill(dst: &mut [u8], byte: u8) {
    #[cfg(target_arch = "bpf")]
    // SAFETY: dst is valid for writes of its length.
    unsafe {
        pinocchio::syscalls::sol_memset_(dst.as_mut_ptr(), byte, dst.len() as u64)
    };
    #[cfg(not(target_arch = "bpf"))]
    dst.fill(byte);
}

/// Compares two byte strings like memcmp, then by length.
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "bpf")]
    let prefix = {
        let mut result = 0i32;
        // SAFETY: both are valid for n bytes; result is a valid i32.
        unsafe { pinocchio::syscalls::sol_memcmp_(a.as_ptr(), b.as_ptr(), n as u64, &mut result) };
        result.cmp(&0)
    };
    #[cfg(not(target_arch = "bpf"))]
    let prefix = a[..n].cmp(&b[..n]);
    prefix.then(a.len().cmp(&b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let mut d = [0u8; 4];
        assert!(copy(&mut d, &[1, 2, 3]).is_err());
        copy(&mut d, &[1, 2, 3, 4]).unwrap();
        assert_eq!(d, [1, 2, 3, 4]);
        assert!(copy_within(&mut d, 2, 0, 3).is_err());
        assert!(copy_within(&mut d, usize::MAX, 0, 2).is_err());
        copy_within(&mut d, 0, 1, 3).unwrap();
        assert_eq!(d, [1, 1, 2, 3]);
        fill(&mut d, 9);
        assert_eq!(d, [9; 4]);
        assert_eq!(compare(b"abc", b"abd"), Ordering::Less);
        assert_eq!(compare(b"ab", b"abc"), Ordering::Less);
        assert_eq!(compare(b"abc", b"abc"), Ordering::Equal);
    }
}
