// PubSub over websockets: account, program, signature, logs, slot, root and
// slot-update subscriptions, notified as the chain processes transactions and
// slots.
import * as bs58 from './base58.js';
import { parseJSON, stringifyJSON } from './json.js';
import { INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError, invalidParams } from './errors.js';
import { pubkey } from './rpc.js';

const ENCODINGS = new Set(['binary', 'base58', 'base64', 'base64+zstd', 'jsonParsed']);
const EMPTY = new Uint8Array(0);
const SYSTEM_PROGRAM = new Uint8Array(32);

/** The gap between a subscription's reply and the notifications it owes at once. */
const NOTIFY_AFTER_REPLY_MS = 10;

export class PubSub {
  /**
   * @param {import('./chain.js').Chain} chain
   * @param {import('./rpc.js').Rpc} rpc - for account encoding and filters
   */
  constructor(chain, rpc, log) {
    this.chain = chain;
    this.rpc = rpc;
    this.log = log;
    this.nextId = 0;
    this.subs = new Map(); // id -> sub
    this.byAccount = new Map(); // address -> Set(sub)
    this.byProgram = new Map(); // owner address -> Set(sub)
    this.bySignature = new Map(); // signature -> Set(sub)
    this.logs = new Set();
    this.slots = new Set();
    this.roots = new Set();
    this.slotsUpdates = new Set();
    chain.on('transaction', (rec, changed) => this.onTransaction(rec, changed));
    chain.on('slot', (slot) => this.onSlot(slot));
    chain.on('slotUpdate', (update) => {
      for (const sub of this.slotsUpdates) this.notify(sub, 'slotsUpdatesNotification', update);
    });
  }

  /** Serves one websocket connection. */
  connection(ws) {
    ws.subs = new Set();
    ws.on('message', (data) => this.onMessage(ws, data.toString()));
    ws.on('close', () => {
      for (const sub of ws.subs) this.remove(sub);
    });
    ws.on('error', (e) => this.log.debug(`websocket error: ${e.message}`));
  }

  send(ws, obj, done) {
    if (ws.readyState === ws.OPEN) ws.send(stringifyJSON(obj), done);
  }

  onMessage(ws, text) {
    let req;
    try {
      req = parseJSON(text);
    } catch {
      this.send(ws, { jsonrpc: '2.0', error: { code: PARSE_ERROR, message: 'Parse error' }, id: null });
      return;
    }
    const reqs = Array.isArray(req) ? req : [req];
    if (reqs.length === 0) {
      this.send(ws, { jsonrpc: '2.0', error: { code: INVALID_REQUEST, message: 'Invalid request' }, id: null });
      return;
    }
    const after = [];
    const responses = reqs.map((r) => this.handle(ws, r, after));
    // Notifications owed at once (signature already processed) follow the
    // response that tells the client its subscription id, in a write of
    // their own a moment later, as from Agave's notification thread: a
    // client that registers its listener on the response (@solana/kit)
    // misses a notification read together with it.
    const notify = after.length === 0 ? undefined : () => setTimeout(() => after.forEach((fn) => fn()), NOTIFY_AFTER_REPLY_MS);
    this.send(ws, Array.isArray(req) ? responses : responses[0], notify);
  }

  handle(ws, req, after) {
    const id = req && typeof req === 'object' && !Array.isArray(req) && req.id !== undefined ? req.id : null;
    try {
      if (!req || typeof req !== 'object' || Array.isArray(req) || req.jsonrpc !== '2.0' || typeof req.method !== 'string') {
        throw new RpcError(INVALID_REQUEST, 'Invalid request');
      }
      const params = req.params ?? [];
      if (!Array.isArray(params)) throw invalidParams('Invalid params: expected an array of parameters.');
      const { method } = req;
      if (method.endsWith('Unsubscribe') && method !== 'Unsubscribe') {
        return { jsonrpc: '2.0', result: this.unsubscribe(ws, method.slice(0, -'Unsubscribe'.length), params), id };
      }
      return { jsonrpc: '2.0', result: this.subscribe(ws, method, params, after), id };
    } catch (e) {
      if (e instanceof RpcError) return { jsonrpc: '2.0', error: e.toJSON(), id };
      this.log.error(`internal error in websocket ${req && req.method}: ${e.stack ?? e}`);
      return { jsonrpc: '2.0', error: { code: INTERNAL_ERROR, message: `Internal error: ${e.message}` }, id };
    }
  }

  subscribe(ws, method, params, after) {
    const cfg = (i) => {
      const c = params[i];
      if (c === undefined || c === null) return {};
      if (typeof c !== 'object' || Array.isArray(c)) throw invalidParams('Invalid params: expected a config object.');
      if (c.encoding !== undefined && !ENCODINGS.has(c.encoding)) throw invalidParams(`Invalid params: unknown encoding ${JSON.stringify(c.encoding)}.`);
      return c;
    };
    let sub;
    switch (method) {
      case 'accountSubscribe': {
        const key = bs58.encode(pubkey(params[0]));
        sub = this.add(ws, 'account', { key, cfg: cfg(1) }, this.byAccount, key);
        break;
      }
      case 'programSubscribe': {
        const key = bs58.encode(pubkey(params[0]));
        const c = cfg(1);
        sub = this.add(ws, 'program', { key, cfg: c, filters: this.rpc.filters(c.filters) }, this.byProgram, key);
        break;
      }
      case 'signatureSubscribe': {
        const sig = params[0];
        const b = typeof sig === 'string' && sig.length <= 88 ? bs58.decode(sig) : null;
        if (!b || b.length !== 64) throw invalidParams('Invalid param: Invalid');
        sub = this.add(ws, 'signature', { key: sig, cfg: cfg(1) }, this.bySignature, sig);
        const rec = this.chain.records.get(sig);
        if (rec) after.push(() => this.notifySignature(sub, rec));
        break;
      }
      case 'logsSubscribe': {
        const f = params[0];
        let mentions = null;
        if (f === 'all' || f === 'allWithVotes') {
          mentions = null;
        } else if (f && typeof f === 'object' && Array.isArray(f.mentions) && f.mentions.length === 1) {
          mentions = pubkey(f.mentions[0]);
        } else {
          throw invalidParams('Invalid params: expected "all", "allWithVotes" or {"mentions": [one address]}.');
        }
        cfg(1);
        sub = this.add(ws, 'logs', { mentions }, null, null, this.logs);
        break;
      }
      case 'slotSubscribe':
        sub = this.add(ws, 'slot', {}, null, null, this.slots);
        break;
      case 'rootSubscribe':
        sub = this.add(ws, 'root', {}, null, null, this.roots);
        break;
      // The node's own blocks: createdBank when a slot starts; completed,
      // frozen (with its transaction counts), optimisticConfirmation and
      // root when it ends (a single node confirms and roots at once).
      case 'slotsUpdatesSubscribe':
        sub = this.add(ws, 'slotsUpdates', {}, null, null, this.slotsUpdates);
        break;
      default:
        throw new RpcError(METHOD_NOT_FOUND, 'Method not found');
    }
    return sub.id;
  }

  add(ws, kind, fields, index, key, set) {
    const sub = { id: this.nextId++, ws, kind, ...fields, index, set };
    if (index) {
      let s = index.get(key);
      if (!s) index.set(key, (s = new Set()));
      s.add(sub);
    } else {
      set.add(sub);
    }
    this.subs.set(sub.id, sub);
    ws.subs.add(sub);
    return sub;
  }

  remove(sub) {
    this.subs.delete(sub.id);
    sub.ws.subs.delete(sub);
    if (sub.index) {
      const s = sub.index.get(sub.key);
      if (s) {
        s.delete(sub);
        if (!s.size) sub.index.delete(sub.key);
      }
    } else {
      sub.set.delete(sub);
    }
  }

  unsubscribe(ws, kind, params) {
    const id = params[0];
    const sub = typeof id === 'number' ? this.subs.get(id) : undefined;
    if (!sub || sub.ws !== ws || sub.kind !== kind) {
      throw invalidParams('Invalid subscription id.');
    }
    this.remove(sub);
    return true;
  }

  notify(sub, method, result) {
    this.send(sub.ws, { jsonrpc: '2.0', method, params: { result, subscription: sub.id } });
  }

  ctx(value) {
    return { context: { slot: this.chain.slot }, value };
  }

  notifySignature(sub, rec) {
    this.notify(sub, 'signatureNotification', this.ctx({ err: rec.err }));
    this.remove(sub); // signature subscriptions end with their notification
  }

  onTransaction(rec, changed) {
    const sigSubs = this.bySignature.get(rec.signature);
    if (sigSubs) for (const sub of [...sigSubs]) this.notifySignature(sub, rec);
    if (this.byAccount.size || this.byProgram.size) {
      for (const { key, account } of changed) {
        const address = bs58.encode(key);
        const acc = account ?? closedAccount();
        // Encoded once per encoding and slice, not once per subscriber: a
        // run's clients all follow its 201 KB account, and encoding it for
        // each of 128 of them kept the event loop from answering (wan-harness scale).
        const encoded = new Map();
        const encode = (cfg) => {
          const k = `${cfg.encoding ?? 'base64'}|${JSON.stringify(cfg.dataSlice ?? null)}`;
          if (!encoded.has(k)) encoded.set(k, this.encode(acc, cfg));
          return encoded.get(k);
        };
        const accSubs = this.byAccount.get(address);
        if (accSubs) {
          for (const sub of accSubs) this.notify(sub, 'accountNotification', this.ctx(encode(sub.cfg)));
        }
        const progSubs = this.byProgram.get(bs58.encode(acc.owner()));
        if (progSubs) {
          const data = acc.data();
          for (const sub of progSubs) {
            if (!sub.filters.every((f) => f(data))) continue;
            this.notify(sub, 'programNotification', this.ctx({ pubkey: address, account: encode(sub.cfg) }));
          }
        }
      }
    }
    if (this.logs.size) {
      const value = { signature: rec.signature, err: rec.err, logs: rec.logs };
      for (const sub of this.logs) {
        if (sub.mentions && !rec.keys.some((k) => k.equals(sub.mentions))) continue;
        this.notify(sub, 'logsNotification', this.ctx(value));
      }
    }
  }

  // Subscriptions validated their encoding; only base58's 128-byte limit can
  // still refuse an account, and then base64 is sent rather than nothing.
  encode(acc, cfg) {
    try {
      return this.rpc.account(acc, cfg);
    } catch {
      return this.rpc.account(acc, { ...cfg, encoding: 'base64' });
    }
  }

  onSlot(slot) {
    for (const sub of this.slots) this.notify(sub, 'slotNotification', { parent: slot - 1, root: slot, slot });
    for (const sub of this.roots) this.notify(sub, 'rootNotification', slot);
  }
}

// What subscribers see for an account deleted by a transaction.
function closedAccount() {
  return {
    data: () => EMPTY, owner: () => SYSTEM_PROGRAM, lamports: () => 0n, executable: () => false, rentEpoch: () => 0n,
  };
}
