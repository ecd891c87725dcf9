//! SHA-256, the one implementation of the programs: a `const fn` one (FIPS
//! 180-4) for compile-time discriminators and host code (`cargo test`, the
//! Coordinator logic's selection on the host), and the `sol_sha256` syscall
//! on-chain through [`hashv`].

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const H0: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// Incremental SHA-256, usable in `const` contexts (methods take and return
/// `self` because const fns cannot mutate through references to locals in
/// loops portably across compiler versions).
#[derive(Clone, Copy)]
pub struct Sha256 {
    state: [u32; 8],
    block: [u8; 64],
    filled: usize,
    total: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

impl Sha256 {
    pub const fn new() -> Self {
        Self { state: H0, block: [0; 64], filled: 0, total: 0 }
    }

    /// Absorbs `data`.
    // Note: i < data.len() and filled < 64 (reset to 0 when it reaches 64).
    #[allow(clippy::arithmetic_side_effects)]
    pub const fn update(mut self, data: &[u8]) -> Self {
        let mut i = 0;
        while i < data.len() {
            self.block[self.filled] = data[i];
            self.filled += 1;
            if self.filled == 64 {
                self.state = compress(self.state, &self.block);
                self.filled = 0;
            }
            i += 1;
        }
        self.total = self.total.wrapping_add(data.len() as u64);
        self
    }

    /// Pads and returns the digest.
    // Note: filled < 64 on entry and stays <= 64; i < 8 and w < 8, so
    // 56 + i < 64 and 4 * w + 3 < 32.
    #[allow(clippy::arithmetic_side_effects)]
    pub const fn finalize(mut self) -> [u8; 32] {
        let bits = self.total.wrapping_mul(8);
        self.block[self.filled] = 0x80;
        self.filled += 1;
        if self.filled > 56 {
            while self.filled < 64 {
                self.block[self.filled] = 0;
                self.filled += 1;
            }
            self.state = compress(self.state, &self.block);
            self.filled = 0;
        }
        while self.filled < 56 {
            self.block[self.filled] = 0;
            self.filled += 1;
        }
        let len = bits.to_be_bytes();
        let mut i = 0;
        while i < 8 {
            self.block[56 + i] = len[i];
            i += 1;
        }
        self.state = compress(self.state, &self.block);
        let mut out = [0u8; 32];
        let mut w = 0;
        while w < 8 {
            let b = self.state[w].to_be_bytes();
            out[4 * w] = b[0];
            out[4 * w + 1] = b[1];
            out[4 * w + 2] = b[2];
            out[4 * w + 3] = b[3];
            w += 1;
        }
        out
    }
}

// Note: 16 <= t < 64 where t - 16 is taken, t < 16 where 4 * t + 3 (< 64) is,
// and i < 8; the word arithmetic itself is wrapping_add, as FIPS 180-4 defines.
#[allow(clippy::arithmetic_side_effects)]
const fn compress(mut h: [u32; 8], block: &[u8; 64]) -> [u32; 8] {
    let mut w = [0u32; 64];
    let mut t = 0;
    while t < 16 {
        w[t] = u32::from_be_bytes([block[4 * t], block[4 * t + 1], block[4 * t + 2], block[4 * t + 3]]);
        t += 1;
    }
    while t < 64 {
        let s0 = w[t - 15].rotate_right(7) ^ w[t - 15].rotate_right(18) ^ (w[t - 15] >> 3);
        let s1 = w[t - 2].rotate_right(17) ^ w[t - 2].rotate_right(19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16].wrapping_add(s0).wrapping_add(w[t - 7]).wrapping_add(s1);
        t += 1;
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
    t = 0;
    while t < 64 {
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let ch = (e & f) ^ (!e & g);
        let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[t]).wrapping_add(w[t]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        hh = g;
        g = f;
        f = e;
        e = d.wrapping_add(t1);
        d = c;
        c = b;
        b = a;
        a = t1.wrapping_add(t2);
        t += 1;
    }
    let add = [a, b, c, d, e, f, g, hh];
    let mut i = 0;
    while i < 8 {
        h[i] = h[i].wrapping_add(add[i]);
        i += 1;
    }
    h
}

/// SHA-256 of one byte string, in const contexts too.
pub const fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::new().update(data).finalize()
}

/// SHA-256 of the concatenation of `parts`: the `sol_sha256` syscall on-chain
/// (cheaper than hashing in the VM), the const implementation on the host.
pub fn hashv(parts: &[&[u8]]) -> [u8; 32] {
    #[cfg(target_arch = "bpf")]
    {
        let mut out = [0u8; 32];
        // SAFETY: parts has the (ptr, len) slice layout the syscall reads; out
        // has room for the 32-byte digest. The syscall cannot fail for valid
        // pointers.
        unsafe {
            pinocchio::syscalls::sol_sha256(parts.as_ptr() as *const u8, parts.len() as u64, out.as_mut_ptr());
        }
        out
    }
    #[cfg(not(target_arch = "bpf"))]
    {
        let mut h = Sha256::new();
        for p in parts {
            h = h.update(p);
        }
        h.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u8; 32]) -> [u8; 64] {
        let digits = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in d.iter().enumerate() {
            out[2 * i] = digits[(b >> 4) as usize];
            out[2 * i + 1] = digits[(b & 15) as usize];
        }
        out
    }

    #[test]
    fn nist_vectors() {
        let cases: [(&[u8], &str); 4] = [
            (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
            (
                b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(&hex(sha256(input)), want.as_bytes());
        }
    }

    #[test]
    fn million_a_and_incremental_split() {
        let chunk = [b'a'; 1000];
        let mut h = Sha256::new();
        for _ in 0..1000 {
            h = h.update(&chunk);
        }
        assert_eq!(&hex(h.finalize()), b"cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        // Every split point of a two-block message gives the same digest.
        let msg = [0x5au8; 130];
        let whole = sha256(&msg);
        for cut in 0..=msg.len() {
            assert_eq!(hashv(&[&msg[..cut], &msg[cut..]]), whole, "cut at {cut}");
            assert_eq!(hashv(&[&msg[..cut], &[], &msg[cut..]]), whole, "cut at {cut} with an empty part");
        }
        assert_eq!(hashv(&[]), sha256(b""));
    }

    #[test]
    fn usable_in_const() {
        const D: [u8; 32] = sha256(b"abc");
        assert_eq!(D[0], 0xba);
    }
}
