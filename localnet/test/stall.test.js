// A stalled server (SIGSTOP for longer than the blockhash window) skips the
// slots it missed, as a leader that missed its slots does: they have no
// block, no SlotHashes entry, and getBlockProduction counts them as leader
// slots without a block (the SlotHistory sysvar).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { parseJSON } from '../src/json.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const SLOT_MS = 5; // the blockhash window, 151 slots, is 755 ms
let server;
let rpcPort;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'localnet-stall-'));
  const ready = path.join(dir, 'ready.json');
  server = spawn(process.execPath, [path.join(root, 'src/server.js'), '--rpc-port', '0', '--ws-port', '0',
    '--slot-ms', String(SLOT_MS), '--ready-file', ready, '--quiet'], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; !fs.existsSync(ready); i++) {
    if (i > 300) throw new Error('localnet did not start in 30 s');
    await sleep(100);
  }
  ({ rpcPort } = JSON.parse(fs.readFileSync(ready, 'utf8')));
});

after(() => server?.kill('SIGKILL'));

async function call(method, params) {
  const res = await fetch(`http://127.0.0.1:${rpcPort}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = parseJSON(await res.text());
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

// SlotHashes entries' slots, newest first (u64 count, then (u64 slot, [32]u8 hash)).
async function slotHashesSlots() {
  const { value } = await call('getAccountInfo', ['SysvarS1otHashes111111111111111111111111111', { encoding: 'base64' }]);
  const data = Buffer.from(value.data[0], 'base64');
  const n = Number(data.readBigUInt64LE(0));
  return Array.from({ length: n }, (_, i) => Number(data.readBigUInt64LE(8 + 40 * i)));
}

test('slots missed while stalled are skipped: no block, no SlotHashes entry, not produced', async () => {
  const before = await call('getSlot', []);
  server.kill('SIGSTOP');
  await sleep(2000); // ~400 slots of wall time: far past the 151-slot window
  server.kill('SIGCONT');
  let now = await call('getSlot', []);
  while (now < before + 300) {
    await sleep(20);
    now = await call('getSlot', []);
  }
  const blocks = await call('getBlocks', [before, now]);
  const skipped = now - before + 1 - blocks.length;
  assert.ok(skipped > 0, `no slot was skipped between ${before} and ${now}`);

  const { value } = await call('getBlockProduction', [{ range: { firstSlot: before, lastSlot: now } }]);
  const identity = (await call('getIdentity', [])).identity;
  assert.deepEqual(value.byIdentity, { [identity]: [now - before + 1, blocks.length] });

  const produced = new Set(blocks);
  const hashed = (await slotHashesSlots()).filter((s) => s >= before && s <= now);
  assert.ok(hashed.every((s) => produced.has(s)), 'a skipped slot has a SlotHashes entry');
  const gap = [...Array(now - before + 1).keys()].map((i) => before + i).find((s) => !produced.has(s));
  assert.equal((await call('getBlockCommitment', [gap])).commitment, null);
});
