// Base58 (Bitcoin alphabet), as used for Solana addresses and signatures.
// Conversions go through BigInt in chunks of 9 base-58 digits: several times
// faster than digit-at-a-time long division, and signatures are encoded on
// every transaction.
const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i;
const CHUNK_DIGITS = 9;
const CHUNK = 58n ** 9n; // below 2^53, so a remainder is exact as a Number

/** Encodes bytes as base58 text. */
export function encode(bytes) {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  let out = '';
  if (zeros < bytes.length) {
    let n = BigInt(`0x${Buffer.from(bytes.buffer, bytes.byteOffset + zeros, bytes.length - zeros).toString('hex')}`);
    while (n > 0n) {
      let r = Number(n % CHUNK);
      n /= CHUNK;
      // Inner chunks are zero-padded to 9 digits; the top one is not.
      let s = '';
      for (let i = 0; i < CHUNK_DIGITS && (n > 0n || r > 0); i++) {
        s = ALPHABET[r % 58] + s;
        r = Math.floor(r / 58);
      }
      out = s + out;
    }
  }
  return '1'.repeat(zeros) + out;
}

/** Decodes base58 text; returns null when it is not valid base58. */
export function decode(text) {
  if (typeof text !== 'string') return null;
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  let n = 0n;
  for (let i = zeros; i < text.length;) {
    let chunk = 0;
    let scale = 1;
    for (const end = Math.min(i + CHUNK_DIGITS, text.length); i < end; i++) {
      const c = text.charCodeAt(i);
      const v = c < 128 ? INDEX[c] : -1;
      if (v < 0) return null;
      chunk = chunk * 58 + v;
      scale *= 58;
    }
    n = n * BigInt(scale) + BigInt(chunk);
  }
  let hex = n === 0n ? '' : n.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  return Buffer.concat([Buffer.alloc(zeros), Buffer.from(hex, 'hex')]);
}

/** Decodes a 32-byte address; returns null if text is not one. */
export function decodeAddress(text) {
  if (typeof text !== 'string' || text.length < 32 || text.length > 44) return null;
  const b = decode(text);
  return b && b.length === 32 ? b : null;
}
