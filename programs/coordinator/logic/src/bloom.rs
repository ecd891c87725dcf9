//! Fixed-size Bloom filters carried in witness reports.
//!
//! Each filter has its own salt, chosen by the witness, so a non-member that is a
//! false positive in one witness's filter is not also one in every other filter
//! built over the same members (which would let it pass a quorum it never earned).
//! Bit positions use double hashing over sha256(salt || item):
//! h1 = LE u64 of digest[0..8], h2 = LE u64 of digest[8..16] | 1,
//! position_i = (h1 + i * h2) mod num_bits (wrapping u64 arithmetic).

use core::num::NonZeroU64;

use psyche_sdk::hash::hashv;

/// 64-bit words of filter storage (1024 bits).
pub const BLOOM_WORDS: usize = 16;
/// Largest filter size in bits.
pub const MAX_BLOOM_BITS: u16 = (BLOOM_WORDS * 64) as u16;
/// Most hash functions a filter may use.
pub const MAX_BLOOM_HASHES: u8 = 16;

/// A Bloom filter over 32-byte items (signer keys, commitment hashes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bloom {
    pub bits: [u64; BLOOM_WORDS],
    pub salt: [u8; 8],
    /// Size in bits: a multiple of 64, 64..=1024.
    pub num_bits: u16,
    /// Hash functions per item: 1..=16.
    pub num_hashes: u8,
    pub _padding: [u8; 5],
}

/// Why a filter received in a witness report is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloomError {
    Size,
    Hashes,
    NonCanonical,
}

impl Bloom {
    /// An empty filter of `num_bits` bits and `num_hashes` hashes.
    pub fn new(num_bits: u16, num_hashes: u8, salt: [u8; 8]) -> Result<Bloom, BloomError> {
        let b = Bloom { bits: [0; BLOOM_WORDS], salt, num_bits, num_hashes, _padding: [0; 5] };
        b.validate()?;
        Ok(b)
    }

    /// Checks the parameters and that no bit beyond `num_bits` (or padding) is set,
    /// so every filter has exactly one encoding.
    pub fn validate(&self) -> Result<(), BloomError> {
        if self.num_bits == 0 || self.num_bits > MAX_BLOOM_BITS || !self.num_bits.is_multiple_of(64) {
            return Err(BloomError::Size);
        }
        if self.num_hashes == 0 || self.num_hashes > MAX_BLOOM_HASHES {
            return Err(BloomError::Hashes);
        }
        let used = usize::from(self.num_bits / 64);
        if self.bits[used..].iter().any(|&w| w != 0) || self._padding != [0; 5] {
            return Err(BloomError::NonCanonical);
        }
        Ok(())
    }

    fn positions(&self, item: &[u8; 32]) -> (u64, u64) {
        let d = hashv(&[&self.salt, item]);
        let h1 = u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
        let h2 = u64::from_le_bytes([d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]]) | 1;
        (h1, h2)
    }

    /// Adds `item`. The filter must be valid (see `validate`).
    pub fn add(&mut self, item: &[u8; 32]) {
        let (h1, h2) = self.positions(item);
        let m = NonZeroU64::new(u64::from(self.num_bits)).unwrap_or(NonZeroU64::MIN);
        for i in 0..u64::from(self.num_hashes) {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % m;
            self.bits[(bit / 64) as usize % BLOOM_WORDS] |= 1 << (bit % 64);
        }
    }

    /// Whether `item` may have been added (false positives possible, no false
    /// negatives). A filter with no bits never contains anything.
    pub fn contains(&self, item: &[u8; 32]) -> bool {
        let Some(m) = NonZeroU64::new(u64::from(self.num_bits)) else {
            return false;
        };
        if self.num_hashes == 0 {
            return false;
        }
        let (h1, h2) = self.positions(item);
        (0..u64::from(self.num_hashes)).all(|i| {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % m;
            self.bits[(bit / 64) as usize % BLOOM_WORDS] & (1 << (bit % 64)) != 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: u32) -> [u8; 32] {
        hashv(&[b"item", &i.to_le_bytes()])
    }

    #[test]
    fn validate_rejects_bad_shapes() {
        let ok = Bloom::new(1024, 8, [1; 8]).unwrap();
        let cases: [(Bloom, Result<(), BloomError>); 8] = [
            (ok, Ok(())),
            (Bloom { num_bits: 64, ..ok }, Ok(())),
            (Bloom { num_bits: 0, ..ok }, Err(BloomError::Size)),
            (Bloom { num_bits: 1088, ..ok }, Err(BloomError::Size)),
            (Bloom { num_bits: 100, ..ok }, Err(BloomError::Size)),
            (Bloom { num_hashes: 0, ..ok }, Err(BloomError::Hashes)),
            (Bloom { num_hashes: 17, ..ok }, Err(BloomError::Hashes)),
            (Bloom { num_bits: 128, bits: { let mut b = [0; 16]; b[2] = 1; b }, ..ok }, Err(BloomError::NonCanonical)),
        ];
        for (i, (b, want)) in cases.iter().enumerate() {
            assert_eq!(b.validate(), *want, "case {i}");
        }
        assert_eq!(Bloom { _padding: [0, 0, 1, 0, 0], ..ok }.validate(), Err(BloomError::NonCanonical));
    }

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let mut b = Bloom::new(1024, 7, *b"saltsalt").unwrap();
        for i in 0..100 {
            b.add(&item(i));
        }
        assert!((0..100).all(|i| b.contains(&item(i))));
        assert_eq!(b.validate(), Ok(()));
        // 100 items in 1024 bits with 7 hashes: expected false-positive rate ~1%.
        let fp = (1000..11_000).filter(|&i| b.contains(&item(i))).count();
        assert!(fp < 300, "{fp} false positives in 10000");
    }

    #[test]
    fn salt_changes_the_bits() {
        let mut a = Bloom::new(256, 4, [1; 8]).unwrap();
        let mut b = Bloom::new(256, 4, [2; 8]).unwrap();
        a.add(&item(1));
        b.add(&item(1));
        assert_ne!(a.bits, b.bits);
    }

    #[test]
    fn empty_or_degenerate_filters_contain_nothing() {
        let empty = Bloom::new(512, 3, [0; 8]).unwrap();
        assert!(!empty.contains(&item(1)));
        let degenerate = Bloom { num_bits: 0, ..empty };
        assert!(!degenerate.contains(&item(1)));
    }
}
