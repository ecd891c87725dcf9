//! Program logs, without `core::fmt`.
//!
//! [`Message`] assembles text and integers in a stack buffer so a log line is one
//! syscall. On the host, logs are discarded.

use crate::Address;

/// Logs a string ("Program log: <msg>").
#[inline]
pub fn log(msg: &str) {
    log_bytes(msg.as_bytes());
}

/// Logs raw bytes as text.
#[inline]
pub fn log_bytes(msg: &[u8]) {
    #[cfg(target_arch = "bpf")]
    // SAFETY: msg is valid for reads of msg.len() bytes.
    unsafe {
        pinocchio::syscalls::sol_log_(msg.as_ptr(), msg.len() as u64)
    };
    #[cfg(not(target_arch = "bpf"))]
    let _ = msg;
}

/// Logs five integers in hex ("Program log: 0x1, 0x2, ...").
#[inline]
pub fn log_u64(a: u64, b: u64, c: u64, d: u64, e: u64) {
    #[cfg(target_arch = "bpf")]
    // SAFETY: the syscall only reads its register arguments.
    unsafe {
        pinocchio::syscalls::sol_log_64_(a, b, c, d, e)
    };
    #[cfg(not(target_arch = "bpf"))]
    let _ = (a, b, c, d, e);
}

/// Logs an address in base58.
#[inline]
pub fn log_address(address: &Address) {
    #[cfg(target_arch = "bpf")]
    // SAFETY: address points to 32 readable bytes.
    unsafe {
        pinocchio::syscalls::sol_log_pubkey(address.as_ref().as_ptr())
    };
    #[cfg(not(target_arch = "bpf"))]
    let _ = address;
}

/// Logs the remaining compute units ("Program consumption: N units remaining").
#[inline]
pub fn log_compute_units() {
    #[cfg(target_arch = "bpf")]
    // SAFETY: no arguments.
    unsafe {
        pinocchio::syscalls::sol_log_compute_units_()
    };
}

/// Logs binary fields ("Program data: <base64> <base64>..."): Anchor events and
/// other structured output.
#[inline]
pub fn log_data(fields: &[&[u8]]) {
    #[cfg(target_arch = "bpf")]
    // SAFETY: a slice of slices has the (ptr, len) pair layout the syscall
    // reads.
    unsafe {
        pinocchio::syscalls::sol_log_data(fields.as_ptr() as *const u8, fields.len() as u64)
    };
    #[cfg(not(target_arch = "bpf"))]
    let _ = fields;
}

/// Writes the decimal form of `v` at the end of `buf` and returns it.
// Note: u64::MAX has 20 digits, so i stays >= 0 over at most 20 iterations;
// b'0' + v % 10 <= b'9'.
#[allow(clippy::arithmetic_side_effects)]
pub fn fmt_u64(v: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // SAFETY: only ASCII digits were written to buf[i..].
    unsafe { core::str::from_utf8_unchecked(&buf[i..]) }
}

/// Writes the decimal form of `v` (with a leading '-' when negative).
// Note: fmt_u64 returns at most buf.len() bytes, and at most 19 for
// |i64::MIN|, so start >= 1 before the sign.
#[allow(clippy::arithmetic_side_effects)]
pub fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &str {
    // |i64::MIN| has 19 digits, so the sign always fits in the 20-byte buffer.
    let len = fmt_u64(v.unsigned_abs(), buf).len();
    let mut start = buf.len() - len;
    if v < 0 {
        start -= 1;
        buf[start] = b'-';
    }
    // SAFETY: ASCII digits and '-'.
    unsafe { core::str::from_utf8_unchecked(&buf[start..]) }
}

/// A log line assembled on the stack; text beyond `N` bytes is cut and ends
/// with "...".
pub struct Message<const N: usize> {
    buf: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> Default for Message<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Message<N> {
    pub const fn new() -> Self {
        Self { buf: [0; N], len: 0, truncated: false }
    }

    /// Appends text.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    /// Appends an unsigned integer in decimal.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        let mut b = [0u8; 20];
        let s = fmt_u64(v, &mut b);
        self.bytes(s.as_bytes())
    }

    /// Appends a signed integer in decimal.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        let mut b = [0u8; 20];
        let s = fmt_i64(v, &mut b);
        self.bytes(s.as_bytes())
    }

    // Note: self.len <= N always (it only grows here, by n <= N - self.len).
    #[allow(clippy::arithmetic_side_effects)]
    fn bytes(&mut self, s: &[u8]) -> &mut Self {
        let room = N - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        if n < s.len() {
            self.truncated = true;
        }
        self
    }

    /// The text so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether text was cut.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Logs the message, marking a cut with "...".
    pub fn log(&mut self) {
        if let (true, Some(start)) = (self.truncated, N.checked_sub(3)) {
            self.buf[start..].copy_from_slice(b"...");
        }
        log_bytes(self.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_integers() {
        let cases: [(u64, &str); 5] =
            [(0, "0"), (7, "7"), (10, "10"), (6000, "6000"), (u64::MAX, "18446744073709551615")];
        for (v, want) in cases {
            let mut b = [0u8; 20];
            assert_eq!(fmt_u64(v, &mut b), want);
        }
        let signed: [(i64, &str); 4] =
            [(0, "0"), (-1, "-1"), (i64::MIN, "-9223372036854775808"), (i64::MAX, "9223372036854775807")];
        for (v, want) in signed {
            let mut b = [0u8; 20];
            assert_eq!(fmt_i64(v, &mut b), want);
        }
    }

    #[test]
    fn message_builds_and_truncates() {
        let mut m = Message::<32>::new();
        m.str("error ").u64(6001).str(" at slot ").i64(-5);
        assert_eq!(m.as_bytes(), b"error 6001 at slot -5");
        assert!(!m.truncated());
        let mut short = Message::<8>::new();
        short.str("abcdef").u64(123456);
        assert_eq!(short.as_bytes(), b"abcdef12");
        assert!(short.truncated());
    }
}
