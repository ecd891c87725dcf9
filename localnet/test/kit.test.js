// The server driven by a standard client library, @solana/kit, as users
// drive it: a real server process on free ports.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  createSolanaRpc, createSolanaRpcSubscriptions, createSolanaRpcSubscriptions_UNSTABLE, generateKeyPairSigner, lamports,
} from '@solana/kit';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
let server;
let rpc;
let subs;
let wsUrl;

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'localnet-kit-'));
  const ready = path.join(dir, 'ready.json');
  server = spawn(process.execPath, [path.join(root, 'src/server.js'), '--rpc-port', '0', '--ws-port', '0', '--slot-ms', '100',
    '--perf-sample-secs', '1', '--ready-file', ready, '--quiet'], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; !fs.existsSync(ready); i++) {
    if (i > 300) throw new Error('localnet did not start in 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const { rpcPort, wsPort } = JSON.parse(fs.readFileSync(ready, 'utf8'));
  rpc = createSolanaRpc(`http://127.0.0.1:${rpcPort}`);
  wsUrl = `ws://127.0.0.1:${wsPort}`;
  subs = createSolanaRpcSubscriptions(wsUrl);
});

after(() => server?.kill());

// A signatureSubscribe for a signature already confirmed is answered by
// one notification, sent after the reply that carries the subscription id:
// kit registers its listener on that reply and misses a notification that
// arrives in the same read.
test('signatureNotifications for an already-confirmed signature', async () => {
  const who = await generateKeyPairSigner();
  const sig = await rpc.requestAirdrop(who.address, lamports(1_000_000_000n), { commitment: 'confirmed' }).send();
  for (let i = 0; ; i++) {
    const { value } = await rpc.getSignatureStatuses([sig]).send();
    if (value[0]?.confirmationStatus === 'confirmed' || value[0]?.confirmationStatus === 'finalized') break;
    assert.ok(i < 100, 'airdrop not confirmed in 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const notifications = await subs.signatureNotifications(sig, { commitment: 'confirmed' }).subscribe({ abortSignal: abort.signal });
    for await (const n of notifications) {
      assert.equal(n.value.err, null);
      return;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  assert.fail('no notification within 5 s for an already-confirmed signature');
});

async function confirmed(sig) {
  for (let i = 0; ; i++) {
    const { value } = await rpc.getSignatureStatuses([sig]).send();
    if (value[0]?.confirmationStatus === 'confirmed' || value[0]?.confirmationStatus === 'finalized') return;
    assert.ok(i < 100, 'not confirmed in 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

// getTransaction (jsonParsed) and the block, supply and cluster methods, as
// kit calls them (bigints throughout, exact above 2^53).
test('jsonParsed transactions, blocks, supply and cluster methods', async () => {
  const { value: before } = await rpc.getSupply({ commitment: 'confirmed' }).send();
  const who = await generateKeyPairSigner();
  const sig = await rpc.requestAirdrop(who.address, lamports(2_000_000_000n), { commitment: 'confirmed' }).send();
  await confirmed(sig);
  const { value: afterAirdrop } = await rpc.getSupply({ commitment: 'confirmed', excludeNonCirculatingAccountsList: true }).send();
  assert.equal(before.total - afterAirdrop.total, 5000n, 'the airdrop burned its fee, nothing else changed');
  assert.equal(afterAirdrop.circulating, afterAirdrop.total);

  const tx = await rpc.getTransaction(sig, { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0, commitment: 'confirmed' }).send();
  const [faucet, recipient, system] = tx.transaction.message.accountKeys;
  assert.deepEqual([faucet.signer, faucet.writable, faucet.source], [true, true, 'transaction']);
  assert.equal(recipient.pubkey, who.address);
  assert.deepEqual([system.pubkey, system.writable], ['11111111111111111111111111111111', false]);
  const [ix] = tx.transaction.message.instructions;
  assert.equal(ix.program, 'system');
  assert.deepEqual(ix.parsed, { type: 'transfer', info: { source: faucet.pubkey, destination: who.address, lamports: 2_000_000_000n } });

  const block = await rpc.getBlock(tx.slot, { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0, commitment: 'confirmed' }).send();
  assert.ok(block.transactions.some((t) => t.transaction.signatures[0] === sig));
  assert.equal(block.blockTime, tx.blockTime);
  assert.equal(block.blockHeight, tx.slot);
  const sigs = await rpc.getBlock(tx.slot, { transactionDetails: 'signatures', rewards: false }).send();
  assert.ok(sigs.signatures.includes(sig));
  assert.equal(await rpc.getBlockTime(tx.slot).send(), tx.blockTime);
  const blocks = await rpc.getBlocks(block.parentSlot, tx.slot).send();
  assert.deepEqual(blocks, [block.parentSlot, tx.slot].filter((v, i, a) => a.indexOf(v) === i));
  // The airdrop may have landed in slot 0: wait for a second block.
  while ((await rpc.getSlot({ commitment: 'finalized' }).send()) < 1n) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(await rpc.getBlocksWithLimit(0n, 2).send(), [0n, 1n]);
  assert.equal(await rpc.getFirstAvailableBlock().send(), 0n);

  const { identity } = await rpc.getIdentity().send();
  const nodes = await rpc.getClusterNodes().send();
  assert.deepEqual(nodes.map((n) => n.pubkey), [identity]);
  assert.equal(await rpc.getSlotLeader().send(), identity);
  assert.deepEqual(await rpc.getSlotLeaders(tx.slot, 3).send(), [identity, identity, identity]);
  const schedule = await rpc.getLeaderSchedule().send();
  assert.deepEqual(Object.keys(schedule), [identity]);
  const votes = await rpc.getVoteAccounts().send();
  assert.equal(votes.current.length + votes.delinquent.length, 1);
  const [vote] = [...votes.current, ...votes.delinquent];
  assert.equal(vote.nodePubkey, identity);
  assert.ok(vote.activatedStake > 0n);
  const rate = await rpc.getInflationRate().send();
  assert.deepEqual([rate.total, rate.validator, rate.foundation], [0, 0, 0]);
  assert.equal((await rpc.getStakeMinimumDelegation().send()).value, 1_000_000_000n);
  const epochSchedule = await rpc.getEpochSchedule().send();
  assert.equal(epochSchedule.slotsPerEpoch, 432_000n);

  await new Promise((r) => setTimeout(r, 1200)); // a performance sample each second here
  const samples = await rpc.getRecentPerformanceSamples(5).send();
  assert.ok(samples.length >= 1 && samples[0].samplePeriodSecs === 1);
});

test('slotsUpdatesNotifications', async () => {
  const unstable = createSolanaRpcSubscriptions_UNSTABLE(wsUrl);
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  const seen = new Set();
  try {
    const updates = await unstable.slotsUpdatesNotifications().subscribe({ abortSignal: abort.signal });
    for await (const u of updates) {
      seen.add(u.type);
      if (u.type === 'frozen') assert.equal(typeof u.stats.numSuccessfulTransactions, 'bigint');
      if (u.type === 'createdBank') assert.ok(u.parent < u.slot);
      if (seen.has('createdBank') && seen.has('frozen') && seen.has('root')) break;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  assert.ok(seen.has('createdBank') && seen.has('frozen') && seen.has('root'), [...seen].join(' '));
});
