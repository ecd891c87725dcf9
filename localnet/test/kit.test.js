// The server driven by a standard client library, @solana/kit, as users
// drive it: a real server process on free ports.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { createSolanaRpc, createSolanaRpcSubscriptions, generateKeyPairSigner, lamports } from '@solana/kit';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
let server;
let rpc;
let subs;

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'localnet-kit-'));
  const ready = path.join(dir, 'ready.json');
  server = spawn(process.execPath, [path.join(root, 'src/server.js'), '--rpc-port', '0', '--ws-port', '0', '--slot-ms', '100',
    '--ready-file', ready, '--quiet'], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; !fs.existsSync(ready); i++) {
    if (i > 300) throw new Error('localnet did not start in 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const { rpcPort, wsPort } = JSON.parse(fs.readFileSync(ready, 'utf8'));
  rpc = createSolanaRpc(`http://127.0.0.1:${rpcPort}`);
  subs = createSolanaRpcSubscriptions(`ws://127.0.0.1:${wsPort}`);
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
