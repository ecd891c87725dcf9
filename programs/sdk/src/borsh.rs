//! Borsh encoding (little-endian integers, u32 length prefixes) with bounds
//! checks: malformed input is an error, never a panic.

use crate::{Address, ErrorCode, ProgramError};

/// Why decoding or encoding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BorshError {
    /// The input ended early (or the output buffer is full).
    UnexpectedEnd,
    /// A bool byte other than 0 or 1, or an Option tag other than 0 or 1.
    InvalidTag,
    /// A string that is not UTF-8.
    InvalidUtf8,
    /// Bytes left over after a value that must fill its input.
    TrailingBytes,
}

/// Instruction arguments that fail to decode are Anchor's
/// InstructionDidNotDeserialize; map account data explicitly with
/// [`BorshError::account`].
impl From<BorshError> for ProgramError {
    fn from(_: BorshError) -> Self {
        ErrorCode::InstructionDidNotDeserialize.into()
    }
}

impl BorshError {
    /// The error for account data that fails to decode.
    pub fn account(self) -> ProgramError {
        ErrorCode::AccountDidNotDeserialize.into()
    }
}

/// Reads Borsh values from a byte slice.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

macro_rules! read_le {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Reads a little-endian ", stringify!($t), ".")]
        pub fn $name(&mut self) -> Result<$t, BorshError> {
            Ok(<$t>::from_le_bytes(self.array()?))
        }
    )*};
}

impl<'a> Reader<'a> {
    pub const fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), BorshError> {
        if self.pos == self.data.len() {
            Ok(())
        } else {
            Err(BorshError::TrailingBytes)
        }
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], BorshError> {
        let end = self.pos.checked_add(n).ok_or(BorshError::UnexpectedEnd)?;
        let out = self.data.get(self.pos..end).ok_or(BorshError::UnexpectedEnd)?;
        self.pos = end;
        Ok(out)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], BorshError> {
        let b = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    read_le!(u16: u16, u32: u32, u64: u64, i8: i8, i16: i16, i32: i32, i64: i64, u128: u128, i128: i128);

    pub fn u8(&mut self) -> Result<u8, BorshError> {
        Ok(self.bytes(1)?[0])
    }

    pub fn bool(&mut self) -> Result<bool, BorshError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(BorshError::InvalidTag),
        }
    }

    /// Reads an Option tag: true when a value follows.
    pub fn option_tag(&mut self) -> Result<bool, BorshError> {
        self.bool()
    }

    pub fn address(&mut self) -> Result<Address, BorshError> {
        Ok(Address::new_from_array(self.array()?))
    }

    /// Reads a Vec<u8> / byte string (u32 length prefix).
    pub fn byte_vec(&mut self) -> Result<&'a [u8], BorshError> {
        let n = self.u32()? as usize;
        self.bytes(n)
    }

    /// Reads a String.
    pub fn string(&mut self) -> Result<&'a str, BorshError> {
        core::str::from_utf8(self.byte_vec()?).map_err(|_| BorshError::InvalidUtf8)
    }

    /// Reads a Vec<T> length prefix, checking that `len` elements of at least
    /// `min_elem_size` bytes can follow, so a hostile length cannot drive a long
    /// loop.
    // Note: pos <= data.len() always: only bytes() moves it, to an end that
    // data.get() accepted.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn vec_len(&mut self, min_elem_size: usize) -> Result<usize, BorshError> {
        let n = self.u32()? as usize;
        let need = n.checked_mul(min_elem_size).ok_or(BorshError::UnexpectedEnd)?;
        if need > self.data.len() - self.pos {
            return Err(BorshError::UnexpectedEnd);
        }
        Ok(n)
    }
}

/// Writes Borsh values into a byte buffer.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

macro_rules! write_le {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Writes a little-endian ", stringify!($t), ".")]
        pub fn $name(&mut self, v: $t) -> Result<&mut Self, BorshError> {
            self.bytes(&v.to_le_bytes())
        }
    )*};
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// The written bytes.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    pub fn bytes(&mut self, b: &[u8]) -> Result<&mut Self, BorshError> {
        let end = self.pos.checked_add(b.len()).ok_or(BorshError::UnexpectedEnd)?;
        self.buf.get_mut(self.pos..end).ok_or(BorshError::UnexpectedEnd)?.copy_from_slice(b);
        self.pos = end;
        Ok(self)
    }

    write_le!(u16: u16, u32: u32, u64: u64, i8: i8, i16: i16, i32: i32, i64: i64, u128: u128, i128: i128);

    pub fn u8(&mut self, v: u8) -> Result<&mut Self, BorshError> {
        self.bytes(&[v])
    }

    pub fn bool(&mut self, v: bool) -> Result<&mut Self, BorshError> {
        self.u8(v as u8)
    }

    pub fn address(&mut self, a: &Address) -> Result<&mut Self, BorshError> {
        self.bytes(a.as_ref())
    }

    /// Writes a byte string with its u32 length prefix.
    pub fn byte_vec(&mut self, b: &[u8]) -> Result<&mut Self, BorshError> {
        let n = u32::try_from(b.len()).map_err(|_| BorshError::UnexpectedEnd)?;
        self.u32(n)?.bytes(b)
    }

    pub fn string(&mut self, s: &str) -> Result<&mut Self, BorshError> {
        self.byte_vec(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = [0u8; 128];
        let mut w = Writer::new(&mut buf);
        let addr = Address::new_from_array([7; 32]);
        w.u8(1).unwrap().bool(true).unwrap().u16(0xbeef).unwrap().u32(6000).unwrap();
        w.u64(u64::MAX - 1).unwrap().i64(-42).unwrap().u128(1 << 100).unwrap();
        w.address(&addr).unwrap().string("héllo").unwrap().byte_vec(&[9, 8]).unwrap();
        let n = w.len();
        let mut r = Reader::new(&buf[..n]);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.u16(), Ok(0xbeef));
        assert_eq!(r.u32(), Ok(6000));
        assert_eq!(r.u64(), Ok(u64::MAX - 1));
        assert_eq!(r.i64(), Ok(-42));
        assert_eq!(r.u128(), Ok(1 << 100));
        assert_eq!(r.address(), Ok(addr));
        assert_eq!(r.string(), Ok("héllo"));
        assert_eq!(r.byte_vec(), Ok(&[9u8, 8][..]));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn little_endian_layout() {
        let mut buf = [0u8; 12];
        let mut w = Writer::new(&mut buf);
        w.u32(0x01020304).unwrap().string("ab").unwrap();
        assert_eq!(w.written(), &[4, 3, 2, 1, 2, 0, 0, 0, b'a', b'b']);
    }

    #[test]
    fn rejects_malformed_input() {
        assert_eq!(Reader::new(&[1, 2, 3]).u64(), Err(BorshError::UnexpectedEnd));
        assert_eq!(Reader::new(&[2]).bool(), Err(BorshError::InvalidTag));
        assert_eq!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 1]).byte_vec(), Err(BorshError::UnexpectedEnd));
        assert_eq!(Reader::new(&[2, 0, 0, 0, 0xc3, 0x28]).string(), Err(BorshError::InvalidUtf8));
        assert_eq!(Reader::new(&[0xff, 0xff, 0xff, 0x7f, 0]).vec_len(8), Err(BorshError::UnexpectedEnd));
        assert_eq!(Reader::new(&[2, 0, 0, 0, 1, 2, 3, 4]).vec_len(4), Err(BorshError::UnexpectedEnd));
        assert_eq!(Reader::new(&[2, 0, 0, 0, 1, 2, 3, 4]).vec_len(2), Ok(2));
        let mut r = Reader::new(&[1, 2]);
        r.u8().unwrap();
        assert_eq!(r.finish(), Err(BorshError::TrailingBytes));
        assert_eq!(ProgramError::from(BorshError::UnexpectedEnd), ProgramError::Custom(102));
        assert_eq!(BorshError::InvalidTag.account(), ProgramError::Custom(3003));
        let mut small = [0u8; 3];
        assert_eq!(Writer::new(&mut small).u32(1).err(), Some(BorshError::UnexpectedEnd));
    }

    #[test]
    fn every_truncation_fails_cleanly() {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        w.u64(5).unwrap().string("payload").unwrap().u128(9).unwrap();
        let n = w.len();
        for cut in 0..n {
            let mut r = Reader::new(&buf[..cut]);
            let res = (|| -> Result<(), BorshError> {
                r.u64()?;
                r.string()?;
                r.u128()?;
                Ok(())
            })();
            assert!(res.is_err(), "cut at {cut} decoded");
        }
    }

    /// xorshift64*: a deterministic generator, so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    #[test]
    fn random_input_never_panics_and_round_trips() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut input = [0u8; 96];
        for _ in 0..20_000 {
            let n = (rng.next() % input.len() as u64) as usize;
            for b in input[..n].iter_mut() {
                *b = rng.next() as u8;
            }
            // Any decoding sequence on arbitrary bytes returns, never panics.
            let mut r = Reader::new(&input[..n]);
            let _ = (|| -> Result<(), BorshError> {
                r.bool()?;
                r.string()?;
                let len = r.vec_len(8)?;
                for _ in 0..len {
                    r.u64()?;
                }
                r.address()?;
                r.i128()?;
                r.finish()
            })();

            // Values written are read back unchanged.
            let (a, b, c) = (rng.next(), rng.next() as i64, (rng.next() as u128) << 64 | rng.next() as u128);
            let text_len = (rng.next() % 20) as usize;
            let text = &"abcdefghijklmnopqrstuvwxyz"[..text_len];
            let mut buf = [0u8; 128];
            let mut w = Writer::new(&mut buf);
            w.u64(a).unwrap().i64(b).unwrap().u128(c).unwrap().string(text).unwrap();
            let len = w.len();
            let mut r = Reader::new(&buf[..len]);
            assert_eq!((r.u64(), r.i64(), r.u128(), r.string()), (Ok(a), Ok(b), Ok(c), Ok(text)));
            assert_eq!(r.finish(), Ok(()));
        }
    }
}
