// The server driven by @solana/web3.js v1, whose Connection checks every
// reply against superstruct schemas of Agave's shapes (a wrong shape
// throws a StructError): getParsedTransaction for System, SPL Token,
// associated token account, Memo and ComputeBudget instructions and v0
// transactions with lookup tables, and the block and cluster methods
// explorers and indexers call, against a real server process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import * as bs58 from '../src/base58.js';
import { parseJSON } from '../src/json.js';
import {
  AddressLookupTableProgram, ComputeBudgetProgram, Connection, Keypair, LAMPORTS_PER_SOL, PublicKey, StakeProgram, SystemProgram,
  Transaction, TransactionInstruction, TransactionMessage, VersionedTransaction, sendAndConfirmTransaction,
} from '@solana/web3.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const TOKEN = new PublicKey('TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA');
const ATA = new PublicKey('ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL');
const MEMO = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
const VOTE = new PublicKey('Vote111111111111111111111111111111111111111');
let server;
let rpcPort;
let conn;
let payer;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'localnet-web3-'));
  const ready = path.join(dir, 'ready.json');
  server = spawn(process.execPath, [path.join(root, 'src/server.js'), '--rpc-port', '0', '--ws-port', '0', '--slot-ms', '100',
    '--perf-sample-secs', '1', '--ready-file', ready, '--quiet'], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; !fs.existsSync(ready); i++) {
    if (i > 300) throw new Error('localnet did not start in 30 s');
    await sleep(100);
  }
  let wsPort;
  ({ rpcPort, wsPort } = JSON.parse(fs.readFileSync(ready, 'utf8')));
  conn = new Connection(`http://127.0.0.1:${rpcPort}`, { commitment: 'confirmed', wsEndpoint: `ws://127.0.0.1:${wsPort}` });
  payer = Keypair.generate();
  await conn.confirmTransaction(await conn.requestAirdrop(payer.publicKey, 100 * LAMPORTS_PER_SOL));
});

after(async () => {
  // web3.js closes its websocket 500 ms after the last subscription ends and
  // would otherwise keep reconnecting to the stopped server.
  conn?._rpcWebSocket?.close();
  server?.kill();
});

// A raw JSON-RPC call, for error replies and methods web3.js lacks;
// integers above 2^53 come back exact (BigInt).
async function call(method, params) {
  const res = await fetch(`http://127.0.0.1:${rpcPort}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return parseJSON(await res.text());
}

async function send(ixs, signers = []) {
  return sendAndConfirmTransaction(conn, new Transaction().add(...ixs), [payer, ...signers]);
}

const u64 = (n) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
};
const tokenIx = (keys, data) => new TransactionInstruction({
  programId: TOKEN, keys: keys.map(([pubkey, isSigner, isWritable]) => ({ pubkey, isSigner, isWritable })), data: Buffer.from(data),
});

async function createTokenAccountIxs(account, space) {
  const lamports = await conn.getMinimumBalanceForRentExemption(space);
  return SystemProgram.createAccount({ fromPubkey: payer.publicKey, newAccountPubkey: account.publicKey, lamports, space, programId: TOKEN });
}

test('getParsedTransaction: System, Memo and ComputeBudget instructions', async () => {
  const to = Keypair.generate();
  const seedBase = payer.publicKey;
  const seeded = await PublicKey.createWithSeed(seedBase, 'seed-1', SystemProgram.programId);
  const sig = await send([
    ComputeBudgetProgram.setComputeUnitLimit({ units: 50_000 }),
    ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 10 }),
    SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to.publicKey, lamports: LAMPORTS_PER_SOL }),
    SystemProgram.createAccountWithSeed({
      fromPubkey: payer.publicKey, newAccountPubkey: seeded, basePubkey: seedBase, seed: 'seed-1', lamports: LAMPORTS_PER_SOL,
      space: 8, programId: SystemProgram.programId,
    }),
    new TransactionInstruction({ programId: MEMO, keys: [], data: Buffer.from('hello, localnet') }),
  ]);
  const tx = await conn.getParsedTransaction(sig, { maxSupportedTransactionVersion: 0 });
  assert.equal(tx.version, 'legacy');
  const keys = tx.transaction.message.accountKeys;
  assert.ok(keys[0].pubkey.equals(payer.publicKey));
  assert.deepEqual([keys[0].signer, keys[0].writable, keys[0].source], [true, true, 'transaction']);
  const system = keys.find((k) => k.pubkey.equals(SystemProgram.programId));
  assert.deepEqual([system.signer, system.writable], [false, false]);

  const [limit, price, transfer, withSeed, memo] = tx.transaction.message.instructions;
  // Agave does not parse ComputeBudget: it is partially decoded.
  assert.ok(limit.programId.equals(ComputeBudgetProgram.programId));
  assert.deepEqual(limit.accounts, []);
  assert.equal(limit.data, bs58.encode(ComputeBudgetProgram.setComputeUnitLimit({ units: 50_000 }).data));
  assert.equal(limit.parsed, undefined);
  assert.equal(price.parsed, undefined);
  assert.equal(transfer.program, 'system');
  assert.equal(transfer.parsed.type, 'transfer');
  assert.deepEqual(transfer.parsed.info, { source: payer.publicKey.toBase58(), destination: to.publicKey.toBase58(), lamports: LAMPORTS_PER_SOL });
  assert.deepEqual(withSeed.parsed, {
    type: 'createAccountWithSeed',
    info: {
      source: payer.publicKey.toBase58(), newAccount: seeded.toBase58(), base: seedBase.toBase58(), seed: 'seed-1',
      lamports: LAMPORTS_PER_SOL, space: 8, owner: SystemProgram.programId.toBase58(),
    },
  });
  assert.equal(memo.program, 'spl-memo');
  assert.equal(memo.parsed, 'hello, localnet');
  assert.equal(tx.meta.err, null);
  assert.ok(tx.meta.logMessages.length > 0);
  assert.equal(tx.meta.computeUnitsConsumed > 0, true);
  assert.equal(tx.meta.fee, 5000 + 1); // 10 micro-lamports x 50,000 units, rounded up
  assert.equal(tx.meta.loadedAddresses, undefined, 'jsonParsed lists loaded keys in accountKeys');

  // The same transaction as plain json still decodes (getTransaction).
  const plain = await conn.getTransaction(sig, { maxSupportedTransactionVersion: 0 });
  assert.equal(plain.transaction.signatures[0], sig);
});

test('getParsedTransaction: SPL Token instructions, inner instructions and token balances', async () => {
  const mint = Keypair.generate();
  const account = Keypair.generate();
  const wallet = Keypair.generate().publicKey;
  const [ata] = PublicKey.findProgramAddressSync([wallet.toBuffer(), TOKEN.toBuffer(), mint.publicKey.toBuffer()], ATA);
  const me = payer.publicKey;
  const sig1 = await send([
    await createTokenAccountIxs(mint, 82),
    tokenIx([[mint.publicKey, false, true]], [20, 6, ...me.toBuffer(), 1, ...me.toBuffer()]), // InitializeMint2
    await createTokenAccountIxs(account, 165),
    tokenIx([[account.publicKey, false, true], [mint.publicKey, false, false]], [18, ...me.toBuffer()]), // InitializeAccount3
    new TransactionInstruction({ // create the associated token account (its CPIs are inner instructions)
      programId: ATA,
      keys: [
        { pubkey: me, isSigner: true, isWritable: true }, { pubkey: ata, isSigner: false, isWritable: true },
        { pubkey: wallet, isSigner: false, isWritable: false }, { pubkey: mint.publicKey, isSigner: false, isWritable: false },
        { pubkey: SystemProgram.programId, isSigner: false, isWritable: false }, { pubkey: TOKEN, isSigner: false, isWritable: false },
      ],
      data: Buffer.from([0]),
    }),
  ], [mint, account]);
  const tx1 = await conn.getParsedTransaction(sig1, { maxSupportedTransactionVersion: 0 });
  const ix1 = tx1.transaction.message.instructions;
  assert.deepEqual(ix1[1], {
    program: 'spl-token', programId: TOKEN, stackHeight: null,
    parsed: { type: 'initializeMint2', info: { mint: mint.publicKey.toBase58(), decimals: 6, mintAuthority: me.toBase58(), freezeAuthority: me.toBase58() } },
  });
  assert.deepEqual(ix1[3].parsed, {
    type: 'initializeAccount3', info: { account: account.publicKey.toBase58(), mint: mint.publicKey.toBase58(), owner: me.toBase58() },
  });
  assert.equal(ix1[4].program, 'spl-associated-token-account');
  assert.deepEqual(ix1[4].parsed.info, {
    source: me.toBase58(), account: ata.toBase58(), wallet: wallet.toBase58(), mint: mint.publicKey.toBase58(),
    systemProgram: SystemProgram.programId.toBase58(), tokenProgram: TOKEN.toBase58(),
  });
  const inner = tx1.meta.innerInstructions.find((i) => i.index === 4);
  assert.ok(inner, 'the ATA create has inner instructions');
  const innerTypes = inner.instructions.map((i) => `${i.program}:${i.parsed?.type}`);
  assert.ok(innerTypes.includes('spl-token:initializeAccount3'), innerTypes.join(' '));
  assert.ok(innerTypes.some((t) => t.startsWith('system:')), innerTypes.join(' '));
  assert.ok(inner.instructions.every((i) => i.stackHeight === 2));

  const sig2 = await send([
    tokenIx([[mint.publicKey, false, true], [account.publicKey, false, true], [me, true, false]], [14, ...u64(1_000_000_000), 6]),
    tokenIx([[mint.publicKey, false, true], [ata, false, true], [me, true, false]], [7, ...u64(5)]),
    tokenIx([[account.publicKey, false, true], [mint.publicKey, false, false], [ata, false, true], [me, true, false]], [12, ...u64(250_500_000), 6]),
    tokenIx([[account.publicKey, false, true], [ata, false, true], [me, true, false]], [3, ...u64(1)]),
  ]);
  const tx2 = await conn.getParsedTransaction(sig2, { maxSupportedTransactionVersion: 0 });
  const [mintTo, mintToPlain, transferChecked, transfer] = tx2.transaction.message.instructions.map((i) => i.parsed);
  assert.deepEqual(mintTo, {
    type: 'mintToChecked',
    info: {
      mint: mint.publicKey.toBase58(), account: account.publicKey.toBase58(), mintAuthority: me.toBase58(),
      tokenAmount: { amount: '1000000000', decimals: 6, uiAmount: 1000, uiAmountString: '1000' },
    },
  });
  assert.deepEqual(mintToPlain.info, { mint: mint.publicKey.toBase58(), account: ata.toBase58(), amount: '5', mintAuthority: me.toBase58() });
  assert.deepEqual(transferChecked.info, {
    source: account.publicKey.toBase58(), mint: mint.publicKey.toBase58(), destination: ata.toBase58(), authority: me.toBase58(),
    tokenAmount: { amount: '250500000', decimals: 6, uiAmount: 250.5, uiAmountString: '250.5' },
  });
  assert.deepEqual(transfer, {
    type: 'transfer', info: { source: account.publicKey.toBase58(), destination: ata.toBase58(), amount: '1', authority: me.toBase58() },
  });
  const post = Object.fromEntries(tx2.meta.postTokenBalances.map((b) => [tx2.transaction.message.accountKeys[b.accountIndex].pubkey.toBase58(), b]));
  assert.equal(post[account.publicKey.toBase58()].uiTokenAmount.amount, '749499999');
  assert.equal(post[ata.toBase58()].uiTokenAmount.amount, '250500006');
  assert.equal(post[ata.toBase58()].owner, wallet.toBase58());
  assert.equal(post[ata.toBase58()].programId, TOKEN.toBase58());

  const delegate = Keypair.generate().publicKey;
  const newAuthority = Keypair.generate().publicKey;
  const empty = Keypair.generate();
  const sig3 = await send([
    tokenIx([[account.publicKey, false, true], [delegate, false, false], [me, true, false]], [4, ...u64(10)]),
    tokenIx([[account.publicKey, false, true], [me, true, false]], [5]),
    tokenIx([[account.publicKey, false, true], [mint.publicKey, false, true], [me, true, false]], [15, ...u64(1), 6]),
    tokenIx([[account.publicKey, false, true], [mint.publicKey, false, true], [me, true, false]], [8, ...u64(2)]),
    await createTokenAccountIxs(empty, 165),
    tokenIx([[empty.publicKey, false, true], [mint.publicKey, false, false]], [18, ...me.toBuffer()]),
    tokenIx([[empty.publicKey, false, true], [me, false, true], [me, true, false]], [9]),
    tokenIx([[mint.publicKey, false, true], [me, true, false]], [6, 0, 1, ...newAuthority.toBuffer()]),
  ], [empty]);
  const tx3 = await conn.getParsedTransaction(sig3, { maxSupportedTransactionVersion: 0 });
  const p3 = tx3.transaction.message.instructions.map((i) => i.parsed);
  assert.deepEqual(p3[0], { type: 'approve', info: { source: account.publicKey.toBase58(), delegate: delegate.toBase58(), amount: '10', owner: me.toBase58() } });
  assert.deepEqual(p3[1], { type: 'revoke', info: { source: account.publicKey.toBase58(), owner: me.toBase58() } });
  assert.equal(p3[2].type, 'burnChecked');
  assert.deepEqual(p3[3], { type: 'burn', info: { account: account.publicKey.toBase58(), mint: mint.publicKey.toBase58(), amount: '2', authority: me.toBase58() } });
  assert.deepEqual(p3[6], { type: 'closeAccount', info: { account: empty.publicKey.toBase58(), destination: me.toBase58(), owner: me.toBase58() } });
  assert.deepEqual(p3[7], {
    type: 'setAuthority',
    info: { mint: mint.publicKey.toBase58(), authorityType: 'mintTokens', newAuthority: newAuthority.toBase58(), authority: me.toBase58() },
  });

  // getTokenLargestAccounts: the mint's accounts, largest first.
  const largest = await conn.getTokenLargestAccounts(mint.publicKey);
  assert.deepEqual(largest.value.map((a) => [a.address.toBase58(), a.amount, a.decimals]), [
    [account.publicKey.toBase58(), '749499996', 6], [ata.toBase58(), '250500006', 6],
  ]);
  assert.equal(largest.value[0].uiAmountString, '749.499996');
  const notMint = await call('getTokenLargestAccounts', [account.publicKey.toBase58()]);
  assert.equal(notMint.error?.code, -32602);
});

test('getParsedTransaction: a v0 transaction with an address lookup table', async () => {
  const recipient = Keypair.generate().publicKey;
  const [createIx, table] = AddressLookupTableProgram.createLookupTable({
    authority: payer.publicKey, payer: payer.publicKey, recentSlot: await conn.getSlot(),
  });
  await send([createIx, AddressLookupTableProgram.extendLookupTable({
    lookupTable: table, authority: payer.publicKey, payer: payer.publicKey, addresses: [recipient],
  })]);
  await sleep(300); // addresses are usable from the slot after the one that added them
  const lookup = (await conn.getAddressLookupTable(table)).value;
  const { blockhash } = await conn.getLatestBlockhash();
  const message = new TransactionMessage({
    payerKey: payer.publicKey, recentBlockhash: blockhash,
    instructions: [SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: LAMPORTS_PER_SOL })],
  }).compileToV0Message([lookup]);
  const vtx = new VersionedTransaction(message);
  vtx.sign([payer]);
  const sig = await conn.sendTransaction(vtx);
  await conn.confirmTransaction(sig);
  const tx = await conn.getParsedTransaction(sig, { maxSupportedTransactionVersion: 0 });
  assert.equal(tx.version, 0);
  const keys = tx.transaction.message.accountKeys;
  const loaded = keys[keys.length - 1];
  assert.ok(loaded.pubkey.equals(recipient));
  assert.deepEqual([loaded.source, loaded.writable, loaded.signer], ['lookupTable', true, false]);
  assert.equal(keys.filter((k) => k.source === 'transaction').length, 2);
  assert.ok(tx.transaction.message.addressTableLookups[0].accountKey.equals(table));
  assert.deepEqual(tx.transaction.message.instructions[0].parsed.info.destination, recipient.toBase58());

  // Without maxSupportedTransactionVersion a v0 transaction is refused.
  const refused = await call('getTransaction', [sig, { encoding: 'jsonParsed' }]);
  assert.equal(refused.error?.code, -32015);
  // Below confirmed is refused too, as Agave does.
  const processed = await call('getTransaction', [sig, { commitment: 'processed', maxSupportedTransactionVersion: 0 }]);
  assert.equal(processed.error?.code, -32602);

  // The block holding it: full, accounts and none detail levels.
  const block = await conn.getParsedBlock(tx.slot, { maxSupportedTransactionVersion: 0 });
  assert.ok(block.transactions.some((t) => t.transaction.signatures[0] === sig && t.version === 0));
  const accounts = await conn.getParsedBlock(tx.slot, { maxSupportedTransactionVersion: 0, transactionDetails: 'accounts' });
  const mine = accounts.transactions.find((t) => t.transaction.signatures[0] === sig);
  assert.deepEqual(mine.transaction.accountKeys.map((k) => k.source), ['transaction', 'transaction', 'lookupTable']);
  const noVersion = await call('getBlock', [tx.slot, { encoding: 'json' }]);
  assert.equal(noVersion.error?.code, -32015);
});

test('getBlock, getParsedBlock, getBlocks, getBlockTime and getBlockSignatures', async () => {
  const to = Keypair.generate().publicKey;
  const sig = await send([SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: LAMPORTS_PER_SOL })]);
  const tx = await conn.getTransaction(sig, { maxSupportedTransactionVersion: 0 });

  // At once: the block may still be the current one; it is complete from now on.
  const block = await conn.getBlock(tx.slot, { maxSupportedTransactionVersion: 0 });
  const entry = block.transactions.find((t) => t.transaction.signatures[0] === sig);
  assert.ok(entry, 'the block holds the transaction');
  assert.equal(entry.meta.fee, 5000);
  assert.equal(block.blockTime, tx.blockTime);
  assert.equal(block.blockHeight, tx.slot);
  assert.deepEqual(block.rewards, []);
  const later = await send([SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 1 })]);
  const laterTx = await conn.getTransaction(later, { maxSupportedTransactionVersion: 0 });
  assert.ok(laterTx.slot > tx.slot, 'a block reported complete gets no more transactions');
  const again = await conn.getBlock(tx.slot, { maxSupportedTransactionVersion: 0 });
  assert.equal(again.transactions.length, block.transactions.length);

  const parsed = await conn.getParsedBlock(tx.slot, { maxSupportedTransactionVersion: 0 });
  assert.equal(parsed.blockhash, block.blockhash);
  assert.ok(parsed.transactions.some((t) => t.transaction.message.instructions[0].parsed?.type === 'transfer'));
  const none = await conn.getParsedBlock(tx.slot, { maxSupportedTransactionVersion: 0, transactionDetails: 'none', rewards: false });
  assert.equal(none.transactions, undefined);
  assert.equal(none.rewards, undefined);
  const signatures = await conn.getBlockSignatures(tx.slot);
  assert.ok(signatures.signatures.includes(sig));
  for (const encoding of ['base64', 'base58']) {
    const raw = await call('getBlock', [tx.slot, { encoding, maxSupportedTransactionVersion: 0 }]);
    const t = raw.result.transactions.find((x) => x.meta.fee === 5000 && x.transaction[1] === encoding);
    assert.ok(t, encoding);
  }

  // Blocks chain: each names its parent's slot and blockhash.
  const parent = await conn.getBlock(block.parentSlot, { maxSupportedTransactionVersion: 0 });
  assert.equal(block.previousBlockhash, parent.blockhash);
  const slots = await conn.getBlocks(block.parentSlot, tx.slot);
  assert.deepEqual(slots, [block.parentSlot, tx.slot].filter((v, i, a) => a.indexOf(v) === i));
  const withLimit = await call('getBlocksWithLimit', [block.parentSlot, 2]);
  assert.deepEqual(withLimit.result, [block.parentSlot, block.parentSlot + 1]);
  assert.equal(await conn.getBlockTime(tx.slot), tx.blockTime);

  // Genesis: slot 0 is the first block; its blockhash is the genesis hash.
  assert.equal(await conn.getFirstAvailableBlock(), 0);
  assert.equal(await conn.getMinimumLedgerSlot(), 0);
  const genesis = await conn.getBlock(0, { maxSupportedTransactionVersion: 0 });
  assert.equal(genesis.blockhash, await conn.getGenesisHash());
  assert.equal(genesis.parentSlot, 0);
  assert.equal(genesis.previousBlockhash, '11111111111111111111111111111111');

  // Errors as Agave answers them.
  const slot = await conn.getSlot();
  assert.equal((await call('getBlock', [slot + 1000])).error?.code, -32004);
  assert.equal((await call('getBlockTime', [slot + 1000])).error?.code, -32004);
  assert.equal((await call('getBlock', [tx.slot, { commitment: 'processed' }])).error?.code, -32602);
  assert.equal((await call('getBlock', [tx.slot, { encoding: 'hex' }])).error?.code, -32602);
  assert.equal((await call('getBlock', [tx.slot, { transactionDetails: 'some' }])).error?.code, -32602);
  assert.equal((await call('getBlock', [tx.slot, { rewards: 'yes' }])).error?.code, -32602);
  assert.equal((await call('getBlock', [-1])).error?.code, -32602);
  assert.equal((await call('getBlocks', [0, { commitment: 'processed' }])).error?.code, -32602);
  assert.equal((await call('getBlocksWithLimit', [0, 500_001])).error?.code, -32602);
  await assert.rejects(conn.getBlock(slot + 1000), /Block not available/);
});

test('getSupply agrees with the lamports on accounts: a transfer burns its fee', async () => {
  const supply = await conn.getSupply(); // as web3.js reads it (a JS number, rounded above 2^53)
  assert.equal(supply.value.circulating, supply.value.total);
  assert.equal(supply.value.nonCirculating, 0);
  assert.deepEqual(supply.value.nonCirculatingAccounts, []);
  // Exactly: the supply falls by the fee the runtime burns, and by nothing else.
  const before = (await call('getSupply', [])).result.value.total;
  const to = Keypair.generate().publicKey;
  await send([SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: LAMPORTS_PER_SOL })]);
  const after = (await call('getSupply', [{ excludeNonCirculatingAccountsList: true }])).result.value.total;
  assert.equal(BigInt(before) - BigInt(after), 5000n);
  assert.equal((await call('getSupply', [{ excludeNonCirculatingAccountsList: 1 }])).error?.code, -32602);
});

test('getVoteAccounts, getClusterNodes, slot leaders and the leader schedule name the node', async () => {
  const identity = (await call('getIdentity', [])).result.identity;
  await sleep(300); // the node votes for each slot it completes
  const votes = await conn.getVoteAccounts();
  assert.equal(votes.current.length, 1);
  assert.deepEqual(votes.delinquent, []);
  const [vote] = votes.current;
  assert.equal(vote.nodePubkey, identity);
  const slot = await conn.getSlot();
  assert.ok(vote.lastVote >= slot - 20 && vote.lastVote < slot, `lastVote ${vote.lastVote}, slot ${slot}`);
  assert.ok(vote.rootSlot < vote.lastVote);
  assert.equal(vote.epochVoteAccount, true);
  const voteAccount = await conn.getAccountInfo(new PublicKey(vote.votePubkey));
  assert.ok(voteAccount.owner.equals(VOTE));
  assert.equal(voteAccount.data.length, 3762);
  // The stake behind it is a real stake account delegated to it.
  const stakes = await conn.getProgramAccounts(StakeProgram.programId);
  assert.equal(stakes.length, 1);
  assert.equal(new PublicKey(stakes[0].account.data.subarray(124, 156)).toBase58(), vote.votePubkey);
  assert.equal(vote.activatedStake, Number(stakes[0].account.data.readBigUInt64LE(156)));
  const filtered = await call('getVoteAccounts', [{ votePubkey: Keypair.generate().publicKey.toBase58() }]);
  assert.deepEqual(filtered.result, { current: [], delinquent: [] });
  assert.equal((await call('getVoteAccounts', [{ votePubkey: 'nope' }])).error?.code, -32602);

  const nodes = await conn.getClusterNodes();
  assert.deepEqual(nodes.map((n) => [n.pubkey, n.rpc]), [[identity, `127.0.0.1:${rpcPort}`]]);
  assert.equal(nodes[0].version, (await conn.getVersion())['solana-core']);

  assert.equal(await conn.getSlotLeader(), identity);
  const leaders = await conn.getSlotLeaders(slot, 10);
  assert.equal(leaders.length, 10);
  assert.ok(leaders.every((l) => l.toBase58() === identity));
  assert.equal((await call('getSlotLeaders', [slot, 5001])).error?.code, -32602);
  assert.equal((await call('getSlotLeaders', [3 * 432_000, 1])).error?.code, -32602);

  const schedule = await conn.getLeaderSchedule();
  const { slotsPerEpoch } = await conn.getEpochSchedule();
  assert.deepEqual(Object.keys(schedule), [identity]);
  assert.equal(schedule[identity].length, slotsPerEpoch);
  assert.equal(schedule[identity][slotsPerEpoch - 1], slotsPerEpoch - 1);
  assert.deepEqual((await call('getLeaderSchedule', [null, { identity: Keypair.generate().publicKey.toBase58() }])).result, {});
  assert.equal((await call('getLeaderSchedule', [10 * slotsPerEpoch])).result, null);
});

test('getEpochSchedule, getInflationRate, getStakeMinimumDelegation, getRecentPerformanceSamples', async () => {
  const schedule = await conn.getEpochSchedule();
  assert.deepEqual({ ...schedule }, {
    slotsPerEpoch: 432_000, leaderScheduleSlotOffset: 432_000, warmup: false, firstNormalEpoch: 0, firstNormalSlot: 0,
  });
  const epoch = (await conn.getEpochInfo()).epoch;
  assert.deepEqual(await conn.getInflationRate(), { total: 0, validator: 0, foundation: 0, epoch });
  const min = await conn.getStakeMinimumDelegation();
  assert.equal(min.value, LAMPORTS_PER_SOL); // what the stake program answers

  await sleep(1200); // samples are taken every --perf-sample-secs (1 s here)
  const samples = await conn.getRecentPerformanceSamples(3);
  assert.ok(samples.length >= 1);
  assert.ok(samples.every((s) => s.samplePeriodSecs === 1 && s.numSlots > 0));
  assert.ok(samples.length < 2 || samples[0].slot > samples[1].slot, 'newest first');
  const total = (await call('getRecentPerformanceSamples', [])).result.reduce((n, s) => n + s.numTransactions, 0);
  assert.ok(total > 0, 'transactions counted');
  assert.equal((await call('getRecentPerformanceSamples', [721])).error?.code, -32602);
});

test('getBlockProduction, getLargestAccounts, getInflationReward and getHighestSnapshotSlot', async () => {
  const identity = (await call('getIdentity', [])).result.identity;
  const production = await conn.getBlockProduction();
  const { firstSlot, lastSlot } = production.value.range;
  assert.equal(firstSlot, 0); // epoch 0
  assert.equal(lastSlot, production.context.slot);
  assert.deepEqual(production.value.byIdentity, { [identity]: [lastSlot + 1, lastSlot + 1] });

  const largest = await conn.getLargestAccounts({ filter: 'circulating' });
  assert.equal(largest.value.length, 20);
  assert.ok(largest.value.every((a, i) => a.lamports > 0 && (i === 0 || a.lamports <= largest.value[i - 1].lamports)));
  assert.deepEqual((await conn.getLargestAccounts({ filter: 'nonCirculating' })).value, []);

  // Epoch 0's rewards would be paid in the first block of epoch 1.
  await assert.rejects(conn.getInflationReward([payer.publicKey]), /Block not available for slot 432000/);
  assert.equal((await call('getInflationReward', ['nope'])).error?.code, -32602);

  // This server runs without --ledger: it keeps no snapshot.
  assert.deepEqual((await call('getHighestSnapshotSlot', [])).error, { code: -32008, message: 'No snapshot' });
  const commitment = (await call('getBlockCommitment', [0])).result;
  assert.equal(commitment.totalStake, BigInt((await conn.getVoteAccounts()).current[0].activatedStake));
  assert.equal((await call('getMaxShredInsertSlot', [])).result >= lastSlot, true);
});

test('onSlotUpdate: slotsUpdatesSubscribe notifications', async () => {
  const seen = [];
  const id = conn.onSlotUpdate((u) => seen.push(u));
  try {
    for (let i = 0; i < 100 && !['createdBank', 'completed', 'frozen', 'optimisticConfirmation', 'root'].every((t) => seen.some((u) => u.type === t)); i++) {
      await sleep(50);
    }
  } finally {
    await conn.removeSlotUpdateListener(id);
  }
  const created = seen.find((u) => u.type === 'createdBank');
  assert.ok(created, JSON.stringify(seen));
  assert.ok(created.parent < created.slot);
  const frozen = seen.find((u) => u.type === 'frozen');
  assert.ok(frozen && typeof frozen.stats.numSuccessfulTransactions === 'number', JSON.stringify(seen));
  assert.ok(seen.some((u) => u.type === 'root'));
});
