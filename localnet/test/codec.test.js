// Unit tests for the codecs the RPC layer depends on: exact 64-bit JSON,
// base58, the transaction wire format and the stored zstd frame.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';

import * as bs58 from '../src/base58.js';
import { parseJSON, stringifyJSON, u64JSON } from '../src/json.js';
import { messageFee, parseTransaction, WireError, zstdFrame } from '../src/wire.js';

test('parseJSON keeps integers above 2^53 exact and leaves strings and floats alone', () => {
  const v = parseJSON('{"id":9223372036854775807,"s":"12345678901234567890","f":0.12345678901234567890,"n":[-12345678901234567890,5]}');
  assert.equal(v.id, 9223372036854775807n);
  assert.equal(v.s, '12345678901234567890');
  assert.equal(typeof v.f, 'number');
  assert.deepEqual(v.n, [-12345678901234567890n, 5]);
  assert.equal(stringifyJSON(v), '{"id":9223372036854775807,"s":"12345678901234567890","f":0.12345678901234568,"n":[-12345678901234567890,5]}');
});

test('stringifyJSON writes u64 max exactly', () => {
  assert.equal(stringifyJSON({ rentEpoch: 2n ** 64n - 1n }), '{"rentEpoch":18446744073709551615}');
});

test('u64JSON keeps exact values only as BigInt when they need it', () => {
  assert.equal(u64JSON(5n), 5);
  assert.equal(u64JSON(9007199254740991n), 9007199254740991);
  assert.equal(u64JSON(9007199254740993n), 9007199254740993n);
  assert.equal(stringifyJSON({ a: u64JSON(9007199254740993n), b: u64JSON(7n) }), '{"a":9007199254740993,"b":7}');
});

test('parseJSON rejects malformed input', () => {
  for (const bad of ['{', '{"a":1234567890123456789', '[1,]', '']) {
    assert.throws(() => parseJSON(bad), SyntaxError, bad);
  }
});

test('base58 round-trips random bytes, including leading zeros', () => {
  for (let i = 0; i < 500; i++) {
    const b = crypto.randomBytes(i % 70);
    if (i % 3 === 0) b.fill(0, 0, Math.min(2, b.length));
    assert.deepEqual(bs58.decode(bs58.encode(b)), b);
  }
  assert.equal(bs58.encode(Buffer.alloc(32)), '11111111111111111111111111111111');
  assert.equal(bs58.decode('0OIl'), null);
  assert.equal(bs58.decodeAddress('abc'), null);
});

function transferTx({ sigs = 1, blockhash = Buffer.alloc(32, 7) } = {}) {
  const keys = [crypto.randomBytes(32), crypto.randomBytes(32), Buffer.alloc(32)];
  const data = Buffer.alloc(12);
  data.writeUInt32LE(2, 0);
  data.writeBigUInt64LE(1000n, 4);
  const msg = Buffer.concat([Buffer.from([1, 0, 1, 3]), ...keys, blockhash, Buffer.from([1, 2, 2, 0, 1, 12]), data]);
  return Buffer.concat([Buffer.from([sigs]), Buffer.alloc(64 * sigs, 1), msg]);
}

test('parseTransaction reads a legacy transfer', () => {
  const tx = parseTransaction(transferTx());
  assert.equal(tx.message.version, 'legacy');
  assert.equal(tx.message.accountKeys.length, 3);
  assert.deepEqual(tx.message.instructions[0].accounts, [0, 1]);
  assert.equal(messageFee(tx.message), 5000n);
});

test('parseTransaction rejects malformed transactions', () => {
  const good = transferTx();
  const cases = {
    truncated: good.subarray(0, good.length - 1),
    trailing: Buffer.concat([good, Buffer.from([0])]),
    'signature count mismatch': transferTx({ sigs: 2 }),
    empty: Buffer.alloc(0),
    'too large': Buffer.alloc(1300),
  };
  for (const [name, buf] of Object.entries(cases)) {
    assert.throws(() => parseTransaction(buf), WireError, name);
  }
});

test('messageFee adds the prioritization fee', () => {
  const tx = parseTransaction(transferTx());
  const cb = bs58.decodeAddress('ComputeBudget111111111111111111111111111111');
  const price = Buffer.alloc(9);
  price[0] = 3;
  price.writeBigUInt64LE(1_000_000n, 1); // 1 lamport per compute unit
  const limit = Buffer.from([2, 0x10, 0x27, 0, 0]); // 10000 units
  const msg = { ...tx.message, accountKeys: [...tx.message.accountKeys, cb] };
  msg.instructions = [...msg.instructions, { programIdIndex: 3, accounts: [], data: price }, { programIdIndex: 3, accounts: [], data: limit }];
  assert.equal(messageFee(msg), 5000n + 10000n);
  // Without a limit the default counts the transfer and the price
  // instruction as builtins: 2 x 3,000 units at 1 lamport each.
  const noLimit = { ...msg, instructions: msg.instructions.slice(0, 2) };
  assert.equal(messageFee(noLimit), 5000n + 6000n);
});

test('zstdFrame writes a single-segment frame of raw blocks', () => {
  const data = crypto.randomBytes(300_000);
  const f = zstdFrame(data);
  assert.equal(f.readUInt32LE(0), 0xfd2fb528);
  assert.equal(f.readBigUInt64LE(5), 300_000n);
  // Walk the blocks: three raw blocks whose payloads concatenate to data.
  let off = 13;
  const parts = [];
  for (;;) {
    const h = f[off] | (f[off + 1] << 8) | (f[off + 2] << 16);
    const size = h >> 3;
    assert.equal((h >> 1) & 3, 0, 'raw block');
    parts.push(f.subarray(off + 3, off + 3 + size));
    off += 3 + size;
    if (h & 1) break;
  }
  assert.equal(off, f.length);
  assert.deepEqual(Buffer.concat(parts), data);
});
