#!/usr/bin/env node
// psyche localnet: a Solana JSON-RPC (HTTP) and PubSub (websocket) server
// around the Agave SVM from litesvm. See ../README.md for flags and methods.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { WebSocketServer } from 'ws';

import * as bs58 from './base58.js';
import { Chain, MIN_SLOTS_PER_EPOCH } from './chain.js';
import { INVALID_REQUEST, PARSE_ERROR } from './errors.js';
import { parseJSON, stringifyJSON } from './json.js';
import { PubSub } from './pubsub.js';
import { Rpc } from './rpc.js';

const USAGE = `usage: node src/server.js [flags]
  --bind-address HOST          listen address (default 127.0.0.1)
  --rpc-port N                 JSON-RPC port (default 8899; 0 = any free port)
  --ws-port N                  PubSub port (default rpc port + 1; 0 = any free port)
  --ledger DIR                 keep state in DIR across restarts (default: memory only)
  --reset                      discard the state in --ledger and start from genesis
  --bpf-program ID PATH        genesis program, not upgradeable (repeatable)
  --upgradeable-program ID PATH AUTHORITY
                               genesis program with an upgrade authority ("none" = none)
  --slot-ms N                  slot duration in milliseconds (default 400)
  --slots-per-epoch N          epoch length at genesis (default 432000, min 32)
  --snapshot-interval-ms N     snapshot interval while state changes (default 500)
  --max-tx-records N           transactions kept for queries (default 200000)
  --persist-tx-records N       newest transactions kept across restarts (default 5000)
  --max-body-bytes N           largest HTTP request body (default 51200)
  --perf-sample-secs N         getRecentPerformanceSamples period (default 60)
  --log-level LEVEL            error, warn, info or debug (default info)
  --quiet                      same as --log-level warn
  --ready-file PATH            write {"rpcPort","wsPort"} as JSON here once serving
  --help`;

const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 };

function makeLogger(level) {
  const at = LEVELS[level];
  const line = (name) => (LEVELS[name] <= at
    ? (msg) => process.stderr.write(`${new Date().toISOString()} ${name.toUpperCase()} localnet: ${msg}\n`)
    : () => {});
  return { error: line('error'), warn: line('warn'), info: line('info'), debug: line('debug') };
}

class UsageError extends Error {}

function parseFlags(argv) {
  const o = {
    host: '127.0.0.1', rpcPort: 8899, wsPort: null, ledger: null, reset: false, programs: [], slotMs: 400,
    slotsPerEpoch: null, snapshotMs: 500, maxRecords: 200_000, persistRecords: 5000, maxBody: 51_200, logLevel: 'info', readyFile: null,
    perfSampleSecs: 60,
  };
  const take = (i, n, flag) => {
    if (argv.length - i - 1 < n) throw new UsageError(`${flag} needs ${n} argument(s)`);
    return argv.slice(i + 1, i + 1 + n);
  };
  const num = (v, flag, min, max, pattern = /^\d+(\.\d+)?$/) => {
    if (!pattern.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`${flag}: ${v} is not a number in [${min}, ${max}]`);
    return Number(v);
  };
  const int = (v, flag, min, max) => num(v, flag, min, max, /^\d+$/);
  const key = (v, flag) => {
    const b = bs58.decodeAddress(v);
    if (!b) throw new UsageError(`${flag}: ${v} is not a base58 public key`);
    return b;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    switch (flag) {
      case '--bind-address': [o.host] = take(i, 1, flag); i++; break;
      case '--rpc-port': o.rpcPort = int(take(i, 1, flag)[0], flag, 0, 65535); i++; break;
      case '--ws-port': o.wsPort = int(take(i, 1, flag)[0], flag, 0, 65535); i++; break;
      case '--ledger': [o.ledger] = take(i, 1, flag); i++; break;
      case '--reset': o.reset = true; break;
      case '--bpf-program': {
        const [id, file] = take(i, 2, flag);
        o.programs.push({ id: key(id, flag), path: file, authority: null });
        i += 2;
        break;
      }
      case '--upgradeable-program': {
        const [id, file, auth] = take(i, 3, flag);
        o.programs.push({ id: key(id, flag), path: file, authority: auth === 'none' ? null : key(auth, flag) });
        i += 3;
        break;
      }
      case '--slot-ms': o.slotMs = num(take(i, 1, flag)[0], flag, 1, 60_000); i++; break;
      case '--slots-per-epoch': o.slotsPerEpoch = int(take(i, 1, flag)[0], flag, MIN_SLOTS_PER_EPOCH, 1e12); i++; break;
      case '--snapshot-interval-ms': o.snapshotMs = int(take(i, 1, flag)[0], flag, 10, 60_000); i++; break;
      case '--max-tx-records': o.maxRecords = int(take(i, 1, flag)[0], flag, 1000, 1e9); i++; break;
      case '--persist-tx-records': o.persistRecords = int(take(i, 1, flag)[0], flag, 0, 1e7); i++; break;
      case '--max-body-bytes': o.maxBody = int(take(i, 1, flag)[0], flag, 1024, 1 << 30); i++; break;
      case '--perf-sample-secs': o.perfSampleSecs = int(take(i, 1, flag)[0], flag, 1, 3600); i++; break;
      case '--log-level': {
        [o.logLevel] = take(i, 1, flag);
        if (!(o.logLevel in LEVELS)) throw new UsageError(`--log-level: ${o.logLevel} is not one of ${Object.keys(LEVELS).join(', ')}`);
        i++;
        break;
      }
      case '--quiet': o.logLevel = 'warn'; break;
      case '--ready-file': [o.readyFile] = take(i, 1, flag); i++; break;
      case '--help': case '-h': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      default: throw new UsageError(`unknown flag ${flag}`);
    }
  }
  if (o.wsPort === null) o.wsPort = o.rpcPort === 0 ? 0 : o.rpcPort + 1;
  return o;
}

/** Serves JSON-RPC over HTTP: single requests and batches. */
function httpHandler(rpc, maxBody) {
  const reply = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(body);
  };
  const errorBody = (code, message) => stringifyJSON({ jsonrpc: '2.0', error: { code, message }, id: null });
  return (req, res) => {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST', 'Content-Type': 'text/plain' });
      res.end('Used HTTP Method is not allowed. POST or OPTIONS is required');
      return;
    }
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size <= maxBody) chunks.push(c);
      else if (size > 16 * maxBody) req.destroy(); // stop reading a runaway upload
    });
    req.on('end', () => {
      if (size > maxBody) {
        reply(res, 413, errorBody(INVALID_REQUEST, `Request body too large: ${size} bytes (max ${maxBody})`));
        return;
      }
      let body;
      try {
        body = parseJSON(Buffer.concat(chunks).toString('utf8'));
      } catch {
        reply(res, 200, errorBody(PARSE_ERROR, 'Parse error'));
        return;
      }
      let out;
      if (Array.isArray(body)) {
        out = body.length ? body.map((r) => rpc.handle(r)) : { jsonrpc: '2.0', error: { code: INVALID_REQUEST, message: 'Invalid request' }, id: null };
      } else {
        out = rpc.handle(body);
      }
      reply(res, 200, stringifyJSON(out));
    });
  };
}

const listen = (server, port, host) => new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, host, () => {
    server.off('error', reject);
    resolve(server.address().port);
  });
});

function writeReadyFile(file, info) {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(info));
  fs.renameSync(tmp, file);
}

async function main() {
  let flags;
  try {
    flags = parseFlags(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`localnet: ${e.message} (see --help)\n`);
    process.exit(2);
  }
  const log = makeLogger(flags.logLevel);
  const started = performance.now();
  const chain = new Chain({
    ledgerDir: flags.ledger ? path.resolve(flags.ledger) : null, reset: flags.reset, slotMs: flags.slotMs, slotsPerEpoch: flags.slotsPerEpoch,
    snapshotMs: flags.snapshotMs, programs: flags.programs, maxRecords: flags.maxRecords,
    persistRecords: flags.persistRecords, perfSampleSecs: flags.perfSampleSecs, log,
  });
  try {
    chain.open();
  } catch (e) {
    log.error(e.message);
    process.exit(1);
  }
  const rpc = new Rpc(chain, log);
  const pubsub = new PubSub(chain, rpc, log);

  const httpServer = http.createServer(httpHandler(rpc, flags.maxBody));
  httpServer.keepAliveTimeout = 60_000;
  const wsHttp = http.createServer((req, res) => {
    res.writeHead(426, { 'Content-Type': 'text/plain' });
    res.end('websocket endpoint');
  });
  const wss = new WebSocketServer({ server: wsHttp, maxPayload: flags.maxBody });
  wss.on('connection', (ws) => pubsub.connection(ws));
  let rpcPort;
  let wsPort;
  try {
    rpcPort = await listen(httpServer, flags.rpcPort, flags.host);
    wsPort = await listen(wsHttp, flags.wsPort, flags.host);
  } catch (e) {
    log.error(`cannot listen: ${e.message}`);
    await chain.stop();
    process.exit(1);
  }
  const hostPort = (port) => (flags.host.includes(':') ? `[${flags.host}]:${port}` : `${flags.host}:${port}`);
  rpc.setAddresses(hostPort(rpcPort), hostPort(wsPort));
  chain.start();

  let stopping = false;
  const shutdown = async (signal) => {
    if (stopping) {
      log.warn(`${signal} again: exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    log.info(`${signal}: shutting down`);
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    httpServer.close();
    wsHttp.close();
    httpServer.closeAllConnections();
    try {
      await chain.stop();
    } catch (e) {
      log.error(`final snapshot failed: ${e.message}`);
      process.exit(1);
    }
    log.info(`stopped at slot ${chain.slot}`);
    process.exit(0);
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  if (flags.readyFile) writeReadyFile(flags.readyFile, { rpcPort, wsPort, pid: process.pid });
  log.info(`JSON-RPC on http://${flags.host}:${rpcPort}, PubSub on ws://${flags.host}:${wsPort}, slot ${chain.slot}, ` +
    `ready in ${Math.round(performance.now() - started)} ms`);
}

main().catch((e) => {
  process.stderr.write(`localnet: ${e.stack ?? e}\n`);
  process.exit(1);
});
