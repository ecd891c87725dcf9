// Solana transaction wire format: just enough parsing for the RPC layer to
// validate input, index accounts and answer getTransaction. Execution itself
// happens in the SVM on the original bytes.
import * as bs58 from './base58.js';

/** Largest serialized transaction a validator accepts (PACKET_DATA_SIZE). */
export const MAX_TX_BYTES = 1232;

export class WireError extends Error {}

class Reader {
  constructor(buf) {
    this.buf = buf;
    this.off = 0;
  }
  need(n, what) {
    if (this.off + n > this.buf.length) throw new WireError(`truncated ${what}`);
  }
  u8(what) {
    this.need(1, what);
    return this.buf[this.off++];
  }
  bytes(n, what) {
    this.need(n, what);
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return b;
  }
  // compact-u16: 7 bits per byte, at most 3 bytes, no redundant encodings.
  shortVec(what) {
    let value = 0;
    for (let i = 0; i < 3; i++) {
      const b = this.u8(what);
      value |= (b & 0x7f) << (7 * i);
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new WireError(`non-canonical length of ${what}`);
        if (value > 0xffff) throw new WireError(`length of ${what} overflows u16`);
        return value;
      }
    }
    throw new WireError(`length of ${what} is longer than 3 bytes`);
  }
}

/** Parses a message (legacy or v0) starting at r's offset. */
function readMessage(r) {
  const start = r.off;
  let version = 'legacy';
  const first = r.u8('message header');
  let numRequiredSignatures = first;
  if (first & 0x80) {
    version = first & 0x7f;
    if (version !== 0) throw new WireError(`unsupported transaction version ${version}`);
    numRequiredSignatures = r.u8('message header');
  }
  const header = {
    numRequiredSignatures,
    numReadonlySignedAccounts: r.u8('message header'),
    numReadonlyUnsignedAccounts: r.u8('message header'),
  };
  const nKeys = r.shortVec('account keys');
  const accountKeys = [];
  for (let i = 0; i < nKeys; i++) accountKeys.push(r.bytes(32, 'account key'));
  const recentBlockhash = r.bytes(32, 'recent blockhash');
  const nIx = r.shortVec('instructions');
  const instructions = [];
  for (let i = 0; i < nIx; i++) {
    const programIdIndex = r.u8('instruction');
    const accounts = Array.from(r.bytes(r.shortVec('instruction accounts'), 'instruction accounts'));
    const data = r.bytes(r.shortVec('instruction data'), 'instruction data');
    instructions.push({ programIdIndex, accounts, data });
  }
  const addressTableLookups = [];
  if (version === 0) {
    const nLookups = r.shortVec('address table lookups');
    for (let i = 0; i < nLookups; i++) {
      const accountKey = r.bytes(32, 'lookup table address');
      const writableIndexes = Array.from(r.bytes(r.shortVec('lookup indexes'), 'lookup indexes'));
      const readonlyIndexes = Array.from(r.bytes(r.shortVec('lookup indexes'), 'lookup indexes'));
      addressTableLookups.push({ accountKey, writableIndexes, readonlyIndexes });
    }
  }
  const nLoaded = addressTableLookups.reduce((n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length, 0);
  if (header.numRequiredSignatures === 0) throw new WireError('message has no signers');
  if (header.numRequiredSignatures + header.numReadonlyUnsignedAccounts > nKeys ||
      header.numReadonlySignedAccounts >= header.numRequiredSignatures) {
    throw new WireError('message header does not match its account keys');
  }
  for (const ix of instructions) {
    if (ix.programIdIndex === 0 || ix.programIdIndex >= nKeys) {
      throw new WireError('instruction program id index out of range');
    }
    if (ix.accounts.some((a) => a >= nKeys + nLoaded)) {
      throw new WireError('instruction account index out of range');
    }
  }
  return {
    version, header, accountKeys, recentBlockhash, instructions, addressTableLookups,
    bytes: r.buf.subarray(start, r.off),
  };
}

/** Parses a serialized message, e.g. the argument of getFeeForMessage. */
export function parseMessage(buf) {
  const r = new Reader(buf);
  const msg = readMessage(r);
  if (r.off !== buf.length) throw new WireError('trailing bytes after message');
  return msg;
}

/** Parses a serialized transaction. Throws WireError on malformed input. */
export function parseTransaction(buf) {
  if (buf.length > MAX_TX_BYTES) {
    throw new WireError(`transaction too large: ${buf.length} bytes (max ${MAX_TX_BYTES})`);
  }
  const r = new Reader(buf);
  const nSigs = r.shortVec('signatures');
  const signatures = [];
  for (let i = 0; i < nSigs; i++) signatures.push(r.bytes(64, 'signature'));
  const message = readMessage(r);
  if (r.off !== buf.length) throw new WireError('trailing bytes after transaction');
  if (nSigs !== message.header.numRequiredSignatures) {
    throw new WireError(`transaction has ${nSigs} signatures, its message requires ${message.header.numRequiredSignatures}`);
  }
  return { signatures, message, raw: buf };
}

/** Whether the static key at index i is writable by the message header. */
export function isStaticWritable(message, i) {
  const h = message.header;
  if (i < h.numRequiredSignatures) return i < h.numRequiredSignatures - h.numReadonlySignedAccounts;
  return i < message.accountKeys.length - h.numReadonlyUnsignedAccounts;
}

// The address lookup table account: a 56-byte header, then 32-byte addresses.
const LOOKUP_TABLE_META_SIZE = 56;

/**
 * Resolves a v0 message's lookups with getData(address) -> account data or
 * null. Unknown tables or indexes resolve to nothing: the SVM then rejects the
 * transaction with the precise error.
 */
export function loadedAddresses(message, getData) {
  const writable = [];
  const readonly = [];
  for (const l of message.addressTableLookups) {
    const data = getData(l.accountKey);
    if (!data) continue;
    const count = Math.floor((data.length - LOOKUP_TABLE_META_SIZE) / 32);
    const at = (i) => (i < count ? data.subarray(LOOKUP_TABLE_META_SIZE + 32 * i, LOOKUP_TABLE_META_SIZE + 32 * (i + 1)) : null);
    for (const i of l.writableIndexes) { const a = at(i); if (a) writable.push(Buffer.from(a)); }
    for (const i of l.readonlyIndexes) { const a = at(i); if (a) readonly.push(Buffer.from(a)); }
  }
  return { writable, readonly };
}

const COMPUTE_BUDGET = bs58.decodeAddress('ComputeBudget111111111111111111111111111111');
const PRECOMPILES = ['Ed25519SigVerify111111111111111111111111111', 'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111'].map((a) => bs58.decodeAddress(a));
// Programs whose instructions get the builtin default compute limit.
const BUILTINS = ['11111111111111111111111111111111', 'ComputeBudget111111111111111111111111111111',
  'Vote111111111111111111111111111111111111111', 'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111', 'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111', 'Config1111111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111', 'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111'].map((a) => bs58.decodeAddress(a));

const LAMPORTS_PER_SIGNATURE = 5000n;
const DEFAULT_INSTRUCTION_CU_LIMIT = 200_000n;
const BUILTIN_INSTRUCTION_CU_LIMIT = 3_000n;
const MAX_CU_LIMIT = 1_400_000n;
const MICRO_LAMPORTS_PER_LAMPORT = 1_000_000n;

const inList = (list, key) => list.some((k) => k.equals(key));

/** The compute-unit price a message sets (micro-lamports per unit; 0: none). */
export function computeUnitPrice(message) {
  let price = 0n;
  for (const ix of message.instructions) {
    const program = message.accountKeys[ix.programIdIndex];
    if (program.equals(COMPUTE_BUDGET) && ix.data[0] === 3 && ix.data.length >= 9) price = ix.data.readBigUInt64LE(1);
  }
  return price;
}

/**
 * The fee the runtime charges for a message: 5000 lamports per signature
 * (transaction and precompile signatures) plus the prioritization fee,
 * ceil(compute unit price * compute unit limit / 1e6).
 */
export function messageFee(message) {
  let signatures = BigInt(message.header.numRequiredSignatures);
  let limit = null;
  const price = computeUnitPrice(message);
  let defaultLimit = 0n;
  for (const ix of message.instructions) {
    const program = message.accountKeys[ix.programIdIndex];
    if (inList(PRECOMPILES, program) && ix.data.length > 0) signatures += BigInt(ix.data[0]);
    if (program.equals(COMPUTE_BUDGET)) {
      if (ix.data[0] === 2 && ix.data.length >= 5) limit = BigInt(ix.data.readUInt32LE(1));
    }
    // Without a limit, every instruction counts, ComputeBudget's own too (a
    // builtin), as the runtime charges.
    defaultLimit += inList(BUILTINS, program) ? BUILTIN_INSTRUCTION_CU_LIMIT : DEFAULT_INSTRUCTION_CU_LIMIT;
  }
  let units = limit ?? defaultLimit;
  if (units > MAX_CU_LIMIT) units = MAX_CU_LIMIT;
  const priority = (price * units + MICRO_LAMPORTS_PER_LAMPORT - 1n) / MICRO_LAMPORTS_PER_LAMPORT;
  return signatures * LAMPORTS_PER_SIGNATURE + priority;
}

/**
 * A zstd frame (RFC 8878), for the base64+zstd account encoding: runs of one
 * byte (account data is mostly zeros) become RLE blocks and the rest is
 * stored in raw blocks. Any zstd decoder reads it; Node 20 ships no zstd
 * compressor.
 */
export function zstdFrame(data) {
  const MAX_BLOCK = 128 * 1024;
  const MIN_RUN = 32; // a shorter run saves less than its block header costs
  const header = Buffer.alloc(13);
  header.writeUInt32LE(0xfd2fb528, 0);
  // Frame header descriptor: single segment, 8-byte content size field.
  header[4] = 0b1110_0000;
  header.writeBigUInt64LE(BigInt(data.length), 5);
  const blocks = []; // [type (0 raw, 1 RLE), start, size]
  const raw = (from, to) => {
    for (let off = from; off < to; off += MAX_BLOCK) blocks.push([0, off, Math.min(MAX_BLOCK, to - off)]);
  };
  let pending = 0; // start of the bytes not yet in a block
  for (let i = 0; i < data.length; ) {
    let j = i + 1;
    while (j < data.length && data[j] === data[i] && j - i < MAX_BLOCK) j++;
    if (j - i >= MIN_RUN) {
      raw(pending, i);
      blocks.push([1, i, j - i]);
      pending = j;
    }
    i = j;
  }
  raw(pending, data.length);
  if (blocks.length === 0) blocks.push([0, 0, 0]);
  const parts = [header];
  blocks.forEach(([type, start, size], k) => {
    // Block header: 3 bytes little endian: last bit, 2 type bits, size.
    const bh = (size << 3) | (type << 1) | (k === blocks.length - 1 ? 1 : 0);
    parts.push(Buffer.from([bh & 0xff, (bh >> 8) & 0xff, (bh >> 16) & 0xff]));
    parts.push(type === 0 ? data.subarray(start, start + size) : data.subarray(start, start + 1));
  });
  return Buffer.concat(parts);
}
