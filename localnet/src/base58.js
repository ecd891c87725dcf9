// Base58 (Bitcoin alphabet), as used for Solana addresses and signatures.
const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i;

/** Encodes bytes as base58 text. */
export function encode(bytes) {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // log(256)/log(58) < 1.38: enough base-58 digits for the remaining bytes.
  const size = Math.ceil(((bytes.length - zeros) * 138) / 100) + 1;
  const digits = new Uint8Array(size);
  let used = 0;
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i];
    let n = 0;
    for (let k = size - 1; (carry !== 0 || n < used) && k >= 0; k--, n++) {
      carry += 256 * digits[k];
      digits[k] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    used = n;
  }
  let start = size - used;
  while (start < size && digits[start] === 0) start++;
  let out = '1'.repeat(zeros);
  for (let i = start; i < size; i++) out += ALPHABET[digits[i]];
  return out;
}

/** Decodes base58 text; returns null when it is not valid base58. */
export function decode(text) {
  if (typeof text !== 'string') return null;
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  // log(58)/log(256) < 0.733.
  const size = Math.ceil(((text.length - zeros) * 733) / 1000) + 1;
  const bytes = new Uint8Array(size);
  let used = 0;
  for (let i = zeros; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? INDEX[c] : -1;
    if (v < 0) return null;
    let carry = v;
    let n = 0;
    for (let k = size - 1; (carry !== 0 || n < used) && k >= 0; k--, n++) {
      carry += 58 * bytes[k];
      bytes[k] = carry & 0xff;
      carry >>= 8;
    }
    used = n;
  }
  let start = size - used;
  while (start < size && bytes[start] === 0) start++;
  const out = Buffer.alloc(zeros + size - start);
  out.set(bytes.subarray(start), zeros);
  return out;
}

/** Decodes a 32-byte address; returns null if text is not one. */
export function decodeAddress(text) {
  if (typeof text !== 'string' || text.length < 32 || text.length > 44) return null;
  const b = decode(text);
  return b && b.length === 32 ? b : null;
}
