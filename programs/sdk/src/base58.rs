//! Base58 (Bitcoin alphabet) for 32-byte addresses: decoding in const
//! contexts, and encoding (the IDL generators print program ids with it).

use crate::Address;

const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

// Note: i < 58.
#[allow(clippy::arithmetic_side_effects)]
const fn digit(c: u8) -> Option<u32> {
    let mut i = 0;
    while i < 58 {
        if ALPHABET[i] == c {
            return Some(i as u32);
        }
        i += 1;
    }
    None
}

/// Decodes a base58 string of exactly 32 bytes; `None` on a bad character or
/// length.
// Note: indexes stay below their loop bounds (i < s.len(), 0 < j <= 33,
// zeros < s.len(), leading < 32, k < 32), and carry < 58 + 255 * 58 before each
// shift (a base-58 digit plus a byte times 58), far below u32::MAX.
#[allow(clippy::arithmetic_side_effects)]
pub const fn decode_32(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    // Big-endian base-256 accumulator, with room to detect overflow.
    let mut out = [0u8; 33];
    let mut i = 0;
    while i < s.len() {
        let mut carry = match digit(s[i]) {
            Some(d) => d,
            None => return None,
        };
        let mut j = out.len();
        while j > 0 {
            j -= 1;
            carry += out[j] as u32 * 58;
            out[j] = (carry & 0xff) as u8;
            carry >>= 8;
        }
        if carry != 0 || out[0] != 0 {
            return None;
        }
        i += 1;
    }
    // Leading '1's encode leading zero bytes; the rest must fit exactly.
    let mut zeros = 0;
    while zeros < s.len() && s[zeros] == b'1' {
        zeros += 1;
    }
    let mut leading = 0;
    while leading < 32 && out[1 + leading] == 0 {
        leading += 1;
    }
    if leading != zeros {
        return None;
    }
    let mut res = [0u8; 32];
    let mut k = 0;
    while k < 32 {
        res[k] = out[k + 1];
        k += 1;
    }
    Some(res)
}

/// An address from its base58 form; fails compilation when used in a const
/// with an invalid string.
pub const fn address(s: &str) -> Address {
    match decode_32(s) {
        Some(b) => Address::new_from_array(b),
        None => panic!("invalid base58 address"),
    }
}

/// The longest base58 form of 32 bytes.
pub const MAX_ENCODED_32: usize = 44;

/// Encodes 32 bytes into `out`, returning the base58 text.
// Note: carry < 256 + 57 * 256 (a byte plus a digit shifted by 8) fits u32;
// 32 bytes have at most 44 base-58 digits, and zeros + len <= 44 (all-zero
// input: 32 + 0), so every index is inside the 44-byte buffers.
#[allow(clippy::arithmetic_side_effects)]
pub fn encode_32<'a>(bytes: &[u8; 32], out: &'a mut [u8; MAX_ENCODED_32]) -> &'a str {
    // Little-endian base-58 digits of the number the bytes spell.
    let mut digits = [0u8; MAX_ENCODED_32];
    let mut len = 0;
    for &byte in bytes {
        let mut carry = byte as u32;
        for d in digits[..len].iter_mut() {
            carry += (*d as u32) << 8;
            *d = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits[len] = (carry % 58) as u8;
            len += 1;
            carry /= 58;
        }
    }
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    let n = zeros + len;
    for c in out[..zeros].iter_mut() {
        *c = b'1';
    }
    for (i, &d) in digits[..len].iter().rev().enumerate() {
        out[zeros + i] = ALPHABET[d as usize];
    }
    // Every byte written is from the ASCII alphabet, so this never fails.
    core::str::from_utf8(&out[..n]).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_addresses() {
        assert_eq!(decode_32("11111111111111111111111111111111"), Some([0; 32]));
        let token = decode_32("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA").unwrap();
        assert_eq!(&token[..4], &[6, 221, 246, 225]);
        assert_eq!(&token[28..], &[126, 255, 0, 169]);
        let mut one = [0u8; 32];
        one[31] = 1;
        assert_eq!(decode_32("11111111111111111111111111111112"), Some(one));
    }

    #[test]
    fn encode_round_trips() {
        let mut buf = [0u8; MAX_ENCODED_32];
        for s in ["11111111111111111111111111111111", "11111111111111111111111111111112", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"] {
            assert_eq!(encode_32(&decode_32(s).unwrap(), &mut buf), s);
        }
        let max = [0xffu8; 32];
        let text = encode_32(&max, &mut buf);
        assert_eq!(text.len(), MAX_ENCODED_32);
        assert_eq!(decode_32(text), Some(max));
    }

    #[test]
    fn rejects_bad_input() {
        for s in ["", "0OIl", "1111111111111111111111111111111", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DAA", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"] {
            assert_eq!(decode_32(s), None, "{s}");
        }
    }
}
