//! Base58 (Bitcoin alphabet) decoding of 32-byte addresses, in const contexts.

use crate::Address;

const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

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
    fn rejects_bad_input() {
        for s in ["", "0OIl", "1111111111111111111111111111111", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DAA", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"] {
            assert_eq!(decode_32(s), None, "{s}");
        }
    }
}
