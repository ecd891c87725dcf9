// Unit tests for the jsonParsed encoding: instruction parsers and account
// keys, against the shapes of Agave's transaction-status crate.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';

import * as bs58 from '../src/base58.js';
import { parseInstruction, parsedAccountKeys } from '../src/parse.js';

const key = () => bs58.encode(crypto.randomBytes(32));
const SYSTEM = '11111111111111111111111111111111';
const TOKEN = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const TOKEN_2022 = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
const ATA = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
const MEMO = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
const RENT = 'SysvarRent111111111111111111111111111111111';
const RECENT_BLOCKHASHES = 'SysvarRecentB1ockHashes11111111111111111111';

const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };
const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return b; };
const pk = (k) => bs58.decode(k);
const str = (s) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);

// Parses data for program with the given account keys (in order).
function parse(program, accounts, ...data) {
  const keys = [program, ...accounts];
  return parseInstruction({ programIdIndex: 0, accounts: accounts.map((_, i) => i + 1), data: Buffer.concat(data) }, keys, null);
}

test('system instructions', () => {
  const [a, b, owner, base] = [key(), key(), key(), key()];
  assert.deepEqual(parse(SYSTEM, [a, b], u32(0), u64(10), u64(20), pk(owner)), {
    program: 'system', programId: SYSTEM, stackHeight: null,
    parsed: { type: 'createAccount', info: { source: a, newAccount: b, lamports: 10, space: 20, owner } },
  });
  assert.deepEqual(parse(SYSTEM, [a], u32(1), pk(owner)).parsed, { type: 'assign', info: { account: a, owner } });
  assert.deepEqual(parse(SYSTEM, [a, b], u32(2), u64(2n ** 63n)).parsed,
    { type: 'transfer', info: { source: a, destination: b, lamports: 2n ** 63n } }, 'u64 above 2^53 stays exact');
  assert.deepEqual(parse(SYSTEM, [a, b, base], u32(11), u64(5), str('s'), pk(owner)).parsed, {
    type: 'transferWithSeed', info: { source: a, sourceBase: b, destination: base, lamports: 5, sourceSeed: 's', sourceOwner: owner },
  });
  assert.deepEqual(parse(SYSTEM, [a, RECENT_BLOCKHASHES, b], u32(4)).parsed,
    { type: 'advanceNonce', info: { nonceAccount: a, recentBlockhashesSysvar: RECENT_BLOCKHASHES, nonceAuthority: b } });
  assert.deepEqual(parse(SYSTEM, [a, RECENT_BLOCKHASHES, RENT], u32(6), pk(owner)).parsed,
    { type: 'initializeNonce', info: { nonceAccount: a, recentBlockhashesSysvar: RECENT_BLOCKHASHES, rentSysvar: RENT, nonceAuthority: owner } });
  assert.deepEqual(parse(SYSTEM, [a], u32(8), u64(100)).parsed, { type: 'allocate', info: { account: a, space: 100 } });
  assert.deepEqual(parse(SYSTEM, [a, base], u32(9), pk(base), str('x'), u64(1), pk(owner)).parsed,
    { type: 'allocateWithSeed', info: { account: a, base, seed: 'x', space: 1, owner } });
  assert.deepEqual(parse(SYSTEM, [a], u32(12)).parsed, { type: 'upgradeNonce', info: { nonceAccount: a } });
});

test('what does not decode is partially decoded, as Agave answers it', () => {
  const [a, b] = [key(), key()];
  const partial = (program, accounts, data) => ({
    programId: program, accounts, data: bs58.encode(data), stackHeight: null,
  });
  const short = Buffer.concat([u32(2), Buffer.alloc(4)]);
  assert.deepEqual(parse(SYSTEM, [a, b], short), partial(SYSTEM, [a, b], short), 'truncated transfer');
  assert.deepEqual(parse(SYSTEM, [a], u32(2), u64(1)), partial(SYSTEM, [a], Buffer.concat([u32(2), u64(1)])), 'too few accounts');
  assert.deepEqual(parse(SYSTEM, [a, b], u32(99)), partial(SYSTEM, [a, b], u32(99)), 'unknown instruction');
  const cb = 'ComputeBudget111111111111111111111111111111';
  assert.deepEqual(parse(cb, [], Buffer.from([2, 0x10, 0x27, 0, 0])), partial(cb, [], Buffer.from([2, 0x10, 0x27, 0, 0])));
  const other = key();
  assert.deepEqual(parse(other, [a], Buffer.from([1, 2, 3])), partial(other, [a], Buffer.from([1, 2, 3])));
  assert.deepEqual(parse(MEMO, [], Buffer.from([0xff, 0xfe])), partial(MEMO, [], Buffer.from([0xff, 0xfe])), 'memo not UTF-8');
  assert.deepEqual(parse(TOKEN_2022, [a, b], Buffer.from([26, 0])), partial(TOKEN_2022, [a, b], Buffer.from([26, 0])), 'extension');
  assert.deepEqual(parse(TOKEN, [], Buffer.from([17])), partial(TOKEN, [], Buffer.from([17])), 'no accounts');
});

test('SPL Token instructions (Token and Token-2022 both report "spl-token")', () => {
  const [mint, account, owner, dest, delegate, multisig, s1, s2] = Array.from({ length: 8 }, key);
  const p = (accounts, ...data) => parse(TOKEN, accounts, Buffer.from(data.flatMap((d) => [...d])));
  assert.deepEqual(parse(TOKEN_2022, [mint, RENT], Buffer.from([0, 9]), pk(owner), Buffer.from([0])), {
    program: 'spl-token', programId: TOKEN_2022, stackHeight: null,
    parsed: { type: 'initializeMint', info: { mint, decimals: 9, mintAuthority: owner, rentSysvar: RENT } },
  });
  assert.deepEqual(p([mint], [20, 2], pk(owner), [1], pk(delegate)).parsed,
    { type: 'initializeMint2', info: { mint, decimals: 2, mintAuthority: owner, freezeAuthority: delegate } });
  assert.deepEqual(p([account, mint, owner, RENT], [1]).parsed,
    { type: 'initializeAccount', info: { account, mint, owner, rentSysvar: RENT } });
  assert.deepEqual(p([account, mint, RENT], [16], pk(owner)).parsed,
    { type: 'initializeAccount2', info: { account, mint, owner, rentSysvar: RENT } });
  assert.deepEqual(p([multisig, RENT, s1, s2], [2, 2]).parsed,
    { type: 'initializeMultisig', info: { multisig, rentSysvar: RENT, signers: [s1, s2], m: 2 } });
  // A multisig authority: the multisig account and its signers.
  assert.deepEqual(p([account, dest, multisig, s1, s2], [3], u64(7)).parsed, {
    type: 'transfer', info: { source: account, destination: dest, amount: '7', multisigAuthority: multisig, signers: [s1, s2] },
  });
  assert.deepEqual(p([account, mint, delegate, owner], [13], u64(1500), [3]).parsed, {
    type: 'approveChecked',
    info: { source: account, mint, delegate, owner, tokenAmount: { amount: '1500', decimals: 3, uiAmount: 1.5, uiAmountString: '1.5' } },
  });
  assert.deepEqual(p([account, mint, owner], [10]).parsed, { type: 'freezeAccount', info: { account, mint, freezeAuthority: owner } });
  assert.deepEqual(p([account, mint, owner], [11]).parsed, { type: 'thawAccount', info: { account, mint, freezeAuthority: owner } });
  assert.deepEqual(p([account, owner], [6, 2, 0]).parsed,
    { type: 'setAuthority', info: { account, authorityType: 'accountOwner', newAuthority: null, authority: owner } });
  assert.deepEqual(p([account], [17]).parsed, { type: 'syncNative', info: { account } });
  assert.deepEqual(p([mint], [21, 7, 0, 8, 0]).parsed,
    { type: 'getAccountDataSize', info: { mint, extensionTypes: ['immutableOwner', 'memoTransfer'] } });
  assert.deepEqual(p([account], [22]).parsed, { type: 'initializeImmutableOwner', info: { account } });
  assert.deepEqual(p([mint], [23], u64(5)).parsed, { type: 'amountToUiAmount', info: { mint, amount: '5' } });
  assert.deepEqual(p([mint], [24], Buffer.from('1.25')).parsed, { type: 'uiAmountToAmount', info: { mint, uiAmount: '1.25' } });
  assert.deepEqual(p([mint, account, owner], [7], u64(1)).parsed, { type: 'mintTo', info: { mint, account, amount: '1', mintAuthority: owner } });
});

test('associated token account and memo instructions', () => {
  const [payer, ata, wallet, mint] = [key(), key(), key(), key()];
  const accounts = [payer, ata, wallet, mint, SYSTEM, TOKEN];
  const info = { source: payer, account: ata, wallet, mint, systemProgram: SYSTEM, tokenProgram: TOKEN };
  assert.deepEqual(parse(ATA, accounts, Buffer.alloc(0)).parsed, { type: 'create', info });
  assert.deepEqual(parse(ATA, accounts, Buffer.from([1])), {
    program: 'spl-associated-token-account', programId: ATA, stackHeight: null, parsed: { type: 'createIdempotent', info },
  });
  assert.equal(parse(ATA, accounts.slice(0, 5), Buffer.from([1])).parsed, undefined, 'too few accounts');
  assert.deepEqual(parse(MEMO, [payer], Buffer.from('gm 🦖')), { program: 'spl-memo', programId: MEMO, parsed: 'gm 🦖', stackHeight: null });
});

test('account keys: writable by header, reserved keys and invoked programs demoted', () => {
  const [payer, signer, dest] = [key(), key(), key()];
  const program = key();
  const message = {
    version: 'legacy',
    header: { numRequiredSignatures: 2, numReadonlySignedAccounts: 1, numReadonlyUnsignedAccounts: 0 },
    accountKeys: [payer, signer, dest, SYSTEM, program, RENT].map(pk),
    instructions: [{ programIdIndex: 3 }, { programIdIndex: 4 }],
  };
  const keys = message.accountKeys;
  assert.deepEqual(parsedAccountKeys(message, keys).map((k) => [k.writable, k.signer, k.source]), [
    [true, true, 'transaction'], [false, true, 'transaction'], [true, false, 'transaction'],
    [false, false, 'transaction'], // reserved (and invoked)
    [false, false, 'transaction'], // invoked program, no upgradeable loader among the keys
    [false, false, 'transaction'], // reserved sysvar
  ]);
  // With the upgradeable loader present an invoked program keeps its lock.
  const loader = 'BPFLoaderUpgradeab1e11111111111111111111111';
  const withLoader = { ...message, accountKeys: [...keys, pk(loader)] };
  assert.equal(parsedAccountKeys(withLoader, withLoader.accountKeys)[4].writable, true);

  const [w, r] = [key(), key()];
  const v0 = { ...message, version: 0 };
  const loaded = parsedAccountKeys(v0, [...keys, pk(w), pk(r)], 1);
  assert.deepEqual(loaded.slice(-2), [
    { pubkey: w, writable: true, signer: false, source: 'lookupTable' },
    { pubkey: r, writable: false, signer: false, source: 'lookupTable' },
  ]);
});
