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

// Decodes a frame of raw and RLE blocks, checking its headers.
function unframe(f) {
  assert.equal(f.readUInt32LE(0), 0xfd2fb528);
  let off = 13;
  const parts = [];
  const types = [];
  for (;;) {
    const h = f[off] | (f[off + 1] << 8) | (f[off + 2] << 16);
    const size = h >> 3;
    const type = (h >> 1) & 3;
    assert.ok(size <= 128 * 1024, 'block size');
    types.push(type);
    if (type === 0) {
      parts.push(f.subarray(off + 3, off + 3 + size));
      off += 3 + size;
    } else {
      assert.equal(type, 1, 'raw or RLE block');
      parts.push(Buffer.alloc(size, f[off + 3]));
      off += 4;
    }
    if (h & 1) break;
  }
  assert.equal(off, f.length);
  const out = Buffer.concat(parts);
  assert.equal(f.readBigUInt64LE(5), BigInt(out.length));
  return { out, types };
}

test('zstdFrame stores random data in raw blocks', () => {
  const data = crypto.randomBytes(300_000);
  const { out, types } = unframe(zstdFrame(data));
  assert.deepEqual(out, data);
  assert.deepEqual(types, [0, 0, 0]);
});

test('zstdFrame writes runs as RLE blocks', () => {
  // Mostly zeros, as an account is: a run longer than a block, short runs
  // that stay raw, a run at the end.
  const data = Buffer.concat([crypto.randomBytes(100), Buffer.alloc(200_000), Buffer.from([7, 7, 7]),
    crypto.randomBytes(50), Buffer.alloc(31, 9), crypto.randomBytes(5), Buffer.alloc(40, 0xff)]);
  const f = zstdFrame(data);
  const { out, types } = unframe(f);
  assert.deepEqual(out, data);
  assert.deepEqual(types, [0, 1, 1, 0, 1]);
  assert.ok(f.length < 300, `frame of ${f.length} bytes`);
  assert.deepEqual(unframe(zstdFrame(Buffer.alloc(0))).out, Buffer.alloc(0));
});
