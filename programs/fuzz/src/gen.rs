//! Deterministic randomness and instruction encoding helpers.

/// splitmix64, as the logic's random walk uses.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability 1/n.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }

    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut k = [0u8; 32];
        for c in k.chunks_mut(8) {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        k
    }

    /// An "interesting" integer: edges and small values mostly.
    pub fn interesting_u64(&mut self) -> u64 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => u64::MAX / 2 + self.below(3),
            4 => u32::MAX as u64 + self.below(3),
            5 => self.below(300),
            6 => 1u64 << self.below(64),
            _ => self.next(),
        }
    }
}

/// Borsh-style little-endian writer.
#[derive(Default, Clone)]
pub struct W(pub Vec<u8>);

impl W {
    pub fn new(disc: [u8; 8]) -> Self {
        W(disc.to_vec())
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn bool(self, v: bool) -> Self {
        self.u8(v as u8)
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
    /// u32 length + bytes (Borsh string / Vec<u8>).
    pub fn string(self, v: &[u8]) -> Self {
        self.u32(v.len() as u32).bytes(v)
    }
    pub fn opt<T>(self, v: Option<T>, f: impl FnOnce(Self, T) -> Self) -> Self {
        match v {
            None => self.u8(0),
            Some(x) => f(self.u8(1), x),
        }
    }
    /// The raw bytes of a #[repr(C)] layout struct without padding (its
    /// Borsh encoding, per the logic crate's layout tests).
    pub fn pod<T: Copy>(self, v: &T) -> Self {
        // SAFETY: T is a padding-free #[repr(C)] struct of integers and byte
        // arrays (the logic crate's layout types).
        let b = unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) };
        self.bytes(b)
    }
    pub fn done(self) -> Vec<u8> {
        self.0
    }
}

/// A fixed-size zero-padded text field.
pub fn text<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    out[..s.len().min(N)].copy_from_slice(&s.as_bytes()[..s.len().min(N)]);
    out
}
