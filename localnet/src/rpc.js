// JSON-RPC methods with the params and result shapes of the real Solana RPC.
import * as bs58 from './base58.js';
import {
  BLOCKHASH_VALID_SLOTS, PERF_SAMPLES_LIMIT, addressKey, TOKEN_PROGRAMS, isMintData, isTokenAccountData,
  isTokenProgram, uiTokenAmount,
} from './chain.js';
import {
  BLOCK_CLEANED_UP, BLOCK_NOT_AVAILABLE, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, NO_SNAPSHOT, RpcError, SLOT_NOT_EPOCH_BOUNDARY,
  SLOT_SKIPPED, TRANSACTION_SIGNATURE_VERIFICATION_FAILURE, UNSUPPORTED_TRANSACTION_VERSION, invalidParams,
} from './errors.js';
import { u64JSON } from './json.js';
import { STAKE_PROGRAM, U64_MAX, VOTE_PROGRAM, parseStakeDelegation, parseVoteState, stakeEffective } from './node.js';
import { parseInstruction, parsedAccountKeys } from './parse.js';
import { MAX_TX_BYTES, messageFee, parseMessage, WireError, zstdFrame } from './wire.js';

export const API_VERSION = '2.2.0';
const SOLANA_CORE_VERSION = '2.2.0';
const FEATURE_SET = 3640012085;
const MAX_SIGNATURE_STATUSES = 256;
const MAX_MULTIPLE_ACCOUNTS = 100;
const MAX_SIGNATURES_FOR_ADDRESS = 1000;
const MAX_PRIORITIZATION_FEE_ACCOUNTS = 128;
const MAX_BASE58_ACCOUNT_BYTES = 128;
const MIN_CONTEXT_SLOT_NOT_REACHED = -32016;
const COMMITMENTS = new Set(['processed', 'confirmed', 'finalized', 'recent', 'single', 'singleGossip', 'root', 'max']);
const BELOW_CONFIRMED = new Set(['processed', 'recent']);
// Agave's limits (rpc-client-api request.rs, rpc.rs).
const MAX_GET_CONFIRMED_BLOCKS_RANGE = 500_000;
const MAX_GET_SLOT_LEADERS = 5000;
const NUM_LARGEST_ACCOUNTS = 20;
// Slots the SlotHistory sysvar covers (slot_history::MAX_ENTRIES), one bit each.
const SLOT_HISTORY_MAX = 1024 * 1024;
// Block commitment: a vote's confirmation count c counts at index c - 1,
// rooted stake at MAX_LOCKOUT_HISTORY (the array has 32 entries). Only the
// bank's ancestors in the status cache (its newest 300 roots and the slots
// above them) have an entry.
const MAX_LOCKOUT_HISTORY = 31;
const STATUS_CACHE_ROOTS = 300;
const DELINQUENT_VALIDATOR_SLOT_DISTANCE = 128;
const MAX_RPC_VOTE_ACCOUNT_INFO_EPOCH_CREDITS_HISTORY = 5;
const TX_ENCODINGS = ['binary', 'base64', 'base58', 'json', 'jsonParsed'];
const TRANSACTION_DETAILS = ['full', 'signatures', 'none', 'accounts'];
const DEFAULT_HASH = '11111111111111111111111111111111';
const NATIVE_MINT = bs58.decodeAddress('So11111111111111111111111111111111111111112');
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// ---- parameter readers: each throws -32602 with what was wrong ----

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'sequence';
  if (typeof v === 'bigint') return 'integer';
  return typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'floating point') : typeof v;
}

const wrongType = (v, expected) => invalidParams(`Invalid params: invalid type: ${typeName(v)}, expected ${expected}.`);

function str(v, expected = 'a string') {
  if (typeof v !== 'string') throw wrongType(v, expected);
  return v;
}

export function pubkey(v) {
  str(v, 'a base58 public key string');
  const b = bs58.decodeAddress(v);
  if (!b) throw invalidParams('Invalid param: Invalid');
  return b;
}

function u64(v, what = 'u64') {
  if (typeof v === 'bigint') {
    if (v >= 0n && v < 2n ** 64n) return v;
  } else if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) {
    return BigInt(v);
  }
  throw wrongType(v, what);
}

function usize(v, what = 'usize') {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  throw wrongType(v, what);
}

function config(v) {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw wrongType(v, 'a config object');
  if (v.commitment !== undefined && !COMMITMENTS.has(v.commitment)) {
    throw invalidParams(`Invalid params: unknown commitment ${JSON.stringify(v.commitment)}.`);
  }
  return v;
}

function args(params, min, max) {
  if (params === undefined || params === null) params = [];
  if (!Array.isArray(params)) throw invalidParams('Invalid params: expected an array of parameters.');
  if (params.length < min) throw invalidParams(`Invalid params: expected at least ${min} parameter(s), got ${params.length}.`);
  if (params.length > max) throw invalidParams(`Invalid params: expected at most ${max} parameter(s), got ${params.length}.`);
  return params;
}

// A slot parameter (u64) as a Number; slots beyond 2^53 are far in the future.
function slotParam(v) {
  return Number(u64(v));
}

function bool(v) {
  if (typeof v !== 'boolean') throw wrongType(v, 'a boolean');
  return v;
}

// One of the names a serde enum accepts.
function variant(v, allowed) {
  str(v, 'a string');
  if (!allowed.includes(v)) {
    const names = allowed.map((a) => `\`${a}\``);
    const expected = names.length === 2 ? `${names[0]} or ${names[1]}` : `one of ${names.join(', ')}`;
    throw invalidParams(`Invalid params: unknown variant \`${v}\`, expected ${expected}.`);
  }
  return v;
}

// maxSupportedTransactionVersion: a u8, or absent (legacy transactions only).
function maxVersionParam(v) {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 255) throw wrongType(v, 'u8');
  return v;
}

const unsupportedVersion = (version) => new RpcError(UNSUPPORTED_TRANSACTION_VERSION,
  `Transaction version (${version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${version}`);

// The shred version a node derives from the genesis hash (no hard forks):
// the hash's bytes folded by XOR into two, plus one.
function shredVersion(genesisHash) {
  const h = bs58.decode(genesisHash);
  const acc = [0, 0];
  for (let i = 0; i < h.length; i++) acc[i % 2] ^= h[i];
  return Math.min(0xffff, ((acc[0] << 8) | acc[1]) + 1);
}

// getBlock, getBlocks, getTransaction and getSignaturesForAddress answer
// only from confirmed blocks on Agave and refuse a lower commitment.
function atLeastConfirmed(cfg) {
  if (cfg.commitment !== undefined && BELOW_CONFIRMED.has(cfg.commitment)) {
    throw invalidParams('Method does not support commitment below `confirmed`');
  }
}

// The version a recorded transaction is reported with (undefined: the field
// is left out, for clients that predate versioned transactions).
function checkVersion(r, maxVersion) {
  const version = r.tx.message.version;
  if (version !== 'legacy' && (maxVersion === null || version > maxVersion)) throw unsupportedVersion(version);
  return maxVersion === null ? undefined : version;
}

function signature(v) {
  str(v, 'a base58 signature string');
  const b = v.length <= 88 ? bs58.decode(v) : null;
  if (!b || b.length !== 64) throw invalidParams('Invalid param: Invalid');
  return v;
}

export class Rpc {
  /** @param {import('./chain.js').Chain} chain */
  constructor(chain, log) {
    this.chain = chain;
    this.log = log;
    this.addresses = { rpc: null, pubsub: null };
    this.scheduleCache = null;
    this.methods = {
      getVersion: () => ({ 'solana-core': SOLANA_CORE_VERSION, 'feature-set': FEATURE_SET }),
      getHealth: () => 'ok',
      getIdentity: () => ({ identity: chain.identity }),
      getGenesisHash: () => chain.genesisHash,
      getSlot: (p) => this.withCfg(p, 0, () => chain.slot),
      getBlockHeight: (p) => this.withCfg(p, 0, () => chain.slot),
      getTransactionCount: (p) => this.withCfg(p, 0, () => chain.txCount),
      getFirstAvailableBlock: (p) => { args(p, 0, 0); return chain.firstAvailableBlock; },
      minimumLedgerSlot: (p) => { args(p, 0, 0); return chain.firstAvailableBlock; },
      getEpochSchedule: (p) => {
        args(p, 0, 0);
        const e = chain.svm.getEpochSchedule();
        return {
          slotsPerEpoch: u64JSON(e.slotsPerEpoch), leaderScheduleSlotOffset: u64JSON(e.leaderScheduleSlotOffset), warmup: e.warmup,
          firstNormalEpoch: u64JSON(e.firstNormalEpoch), firstNormalSlot: u64JSON(e.firstNormalSlot),
        };
      },
      getEpochInfo: (p) => this.withCfg(p, 0, () => ({
        absoluteSlot: chain.slot, blockHeight: chain.slot, epoch: Math.floor(chain.slot / chain.slotsPerEpoch),
        slotIndex: chain.slot % chain.slotsPerEpoch, slotsInEpoch: chain.slotsPerEpoch, transactionCount: chain.txCount,
      })),
      getLatestBlockhash: (p) => this.withCfg(p, 0, () => this.ctx({
        blockhash: chain.latest.hash, lastValidBlockHeight: chain.latest.slot + BLOCKHASH_VALID_SLOTS,
      })),
      isBlockhashValid: (p) => {
        const [hash, cfg] = args(p, 1, 2);
        str(hash, 'a base58 blockhash string');
        this.checkCfg(cfg);
        const last = chain.lastValidSlot(hash);
        return this.ctx(last !== null && chain.slot <= last);
      },
      getFeeForMessage: (p) => {
        const [msg, cfg] = args(p, 1, 2);
        this.checkCfg(cfg);
        let parsed;
        try {
          parsed = parseMessage(this.bytes(msg, 'base64'));
        } catch (e) {
          if (e instanceof WireError) throw invalidParams(`invalid message: ${e.message}`);
          throw e;
        }
        const valid = chain.lastValidSlot(bs58.encode(parsed.recentBlockhash)) !== null;
        return this.ctx(valid ? u64JSON(messageFee(parsed)) : null);
      },
      getBalance: (p) => {
        const [key, cfg] = args(p, 1, 2);
        const k = pubkey(key);
        this.checkCfg(cfg);
        return this.ctx(u64JSON(chain.svm.getBalance(k) ?? 0n));
      },
      getMinimumBalanceForRentExemption: (p) => {
        const [len, cfg] = args(p, 1, 2);
        config(cfg);
        return u64JSON(chain.svm.minimumBalanceForRentExemption(BigInt(usize(len))));
      },
      getAccountInfo: (p) => {
        const [key, c] = args(p, 1, 2);
        const k = pubkey(key);
        const cfg = this.checkCfg(c);
        return this.ctx(this.account(chain.getAccount(k), cfg));
      },
      getMultipleAccounts: (p) => {
        const [keys, c] = args(p, 1, 2);
        if (!Array.isArray(keys)) throw wrongType(keys, 'a sequence of public keys');
        if (keys.length > MAX_MULTIPLE_ACCOUNTS) throw invalidParams(`Too many inputs provided; max ${MAX_MULTIPLE_ACCOUNTS}`);
        const ks = keys.map(pubkey);
        const cfg = this.checkCfg(c);
        return this.ctx(ks.map((k) => this.account(chain.getAccount(k), cfg)));
      },
      getProgramAccounts: (p) => {
        const [key, c] = args(p, 1, 2);
        const program = pubkey(key);
        const cfg = this.checkCfg(c);
        const filters = this.filters(cfg.filters);
        const out = [];
        for (const item of chain.svm.getProgramAccounts(program)) {
          const acc = item.account();
          const data = acc.data();
          if (!filters.every((f) => f(data))) continue;
          out.push({ pubkey: bs58.encode(item.address), account: this.account(acc, cfg) });
        }
        return cfg.withContext ? this.ctx(out) : out;
      },
      requestAirdrop: (p) => {
        const [key, lamports, cfg] = args(p, 2, 3);
        const k = pubkey(key);
        const amount = u64(lamports);
        this.checkCfg(cfg);
        return chain.requestAirdrop(k, amount);
      },
      sendTransaction: (p) => {
        const [tx, c] = args(p, 1, 2);
        const cfg = this.checkCfg(c);
        const raw = this.txBytes(tx, cfg.encoding);
        if (cfg.skipPreflight !== undefined && typeof cfg.skipPreflight !== 'boolean') throw wrongType(cfg.skipPreflight, 'a boolean');
        return chain.sendTransaction(raw, { skipPreflight: cfg.skipPreflight === true });
      },
      simulateTransaction: (p) => this.simulateTransaction(p),
      getSignatureStatuses: (p) => {
        const [sigs, cfg] = args(p, 1, 2);
        if (!Array.isArray(sigs)) throw wrongType(sigs, 'a sequence of signatures');
        if (sigs.length > MAX_SIGNATURE_STATUSES) throw invalidParams(`Too many inputs provided; max ${MAX_SIGNATURE_STATUSES}`);
        sigs.forEach(signature);
        config(cfg);
        return this.ctx(sigs.map((s) => {
          const r = chain.records.get(s);
          return r ? this.status(r) : null;
        }));
      },
      getTransaction: (p) => this.getTransaction(p),
      getSignaturesForAddress: (p) => {
        const [key, c] = args(p, 1, 2);
        const address = addressKey(pubkey(key));
        const cfg = this.checkCfg(c);
        atLeastConfirmed(cfg);
        const limit = cfg.limit === undefined || cfg.limit === null ? MAX_SIGNATURES_FOR_ADDRESS : usize(cfg.limit);
        if (limit < 1 || limit > MAX_SIGNATURES_FOR_ADDRESS) throw invalidParams(`Invalid limit; max ${MAX_SIGNATURES_FOR_ADDRESS}`);
        if (cfg.before) signature(cfg.before);
        if (cfg.until) signature(cfg.until);
        const list = chain.byAddress.get(address) ?? [];
        const out = [];
        let i = list.length - 1;
        if (cfg.before) {
          const b = chain.records.get(cfg.before);
          if (!b) return [];
          while (i >= 0 && list[i].seq >= b.seq) i--;
        }
        for (; i >= 0 && out.length < limit; i--) {
          const r = list[i];
          if (r.signature === cfg.until) break;
          out.push({ signature: r.signature, slot: r.slot, err: r.err, memo: null, blockTime: r.blockTime, confirmationStatus: 'finalized' });
        }
        return out;
      },
      getTokenAccountBalance: (p) => {
        const [key, cfg] = args(p, 1, 2);
        const data = this.tokenData(pubkey(key), isTokenAccountData, 'Token account');
        this.checkCfg(cfg);
        return this.ctx(uiTokenAmount(data.readBigUInt64LE(64), this.decimals(data.subarray(0, 32))));
      },
      getTokenSupply: (p) => {
        const [key, cfg] = args(p, 1, 2);
        const data = this.tokenData(pubkey(key), isMintData, 'Token mint');
        this.checkCfg(cfg);
        return this.ctx(uiTokenAmount(data.readBigUInt64LE(36), data[44]));
      },
      getTokenAccountsByOwner: (p) => {
        const [key, filter, c] = args(p, 2, 3);
        const owner = pubkey(key);
        if (!filter || typeof filter !== 'object' || Array.isArray(filter)) throw wrongType(filter, 'a mint or programId filter');
        const cfg = this.checkCfg(c);
        let programs = TOKEN_PROGRAMS;
        let mint = null;
        if (filter.mint !== undefined) {
          mint = pubkey(filter.mint);
          const m = chain.getAccount(mint);
          if (!m) throw invalidParams('Invalid param: could not find mint');
          programs = [Buffer.from(m.owner())];
        } else if (filter.programId !== undefined) {
          const prog = pubkey(filter.programId);
          if (!isTokenProgram(prog)) throw invalidParams('Invalid param: unrecognized Token program id');
          programs = [prog];
        } else {
          throw invalidParams('Invalid params: expected a mint or programId filter.');
        }
        const out = [];
        for (const prog of programs) {
          for (const item of chain.svm.getProgramAccounts(prog)) {
            const acc = item.account();
            const data = Buffer.from(acc.data());
            if (!isTokenAccountData(data) || !data.subarray(32, 64).equals(owner)) continue;
            if (mint && !data.subarray(0, 32).equals(mint)) continue;
            out.push({ pubkey: bs58.encode(item.address), account: this.account(acc, cfg) });
          }
        }
        return this.ctx(out);
      },
      getRecentPrioritizationFees: (p) => {
        const [keys] = args(p, 0, 1);
        let accounts = [];
        if (keys !== undefined && keys !== null) {
          if (!Array.isArray(keys)) throw wrongType(keys, 'a sequence of public keys');
          if (keys.length > MAX_PRIORITIZATION_FEE_ACCOUNTS) throw invalidParams(`Too many inputs provided; max ${MAX_PRIORITIZATION_FEE_ACCOUNTS}`);
          accounts = keys.map(pubkey);
        }
        return chain.recentPrioritizationFees(accounts).map((f) => ({ slot: f.slot, prioritizationFee: u64JSON(f.prioritizationFee) }));
      },
      getBlock: (p) => this.getBlock(p),
      getBlockTime: (p) => {
        const [s] = args(p, 1, 1);
        const slot = slotParam(s);
        if (slot === 0 && chain.genesisTime !== null) return chain.genesisTime;
        const i = this.blockIndex(slot);
        return chain.blocks.timeAt(i);
      },
      getBlocks: (p) => {
        const [s, e, c] = args(p, 1, 3);
        const start = slotParam(s);
        let end = null;
        let cfgParam = c;
        if (e !== null && typeof e === 'object' && !Array.isArray(e)) {
          if (c === undefined || c === null) cfgParam = e; // [start, config]
        } else if (e !== undefined && e !== null) {
          end = slotParam(e);
        }
        const cfg = this.checkCfg(cfgParam);
        atLeastConfirmed(cfg);
        end = Math.min(end ?? start + MAX_GET_CONFIRMED_BLOCKS_RANGE, chain.slot);
        if (end < start) return [];
        if (end - start > MAX_GET_CONFIRMED_BLOCKS_RANGE) {
          throw invalidParams(`Slot range too large; max ${MAX_GET_CONFIRMED_BLOCKS_RANGE}`);
        }
        return this.sealing(chain.blockSlots(start, end));
      },
      getBlocksWithLimit: (p) => {
        const [s, l, c] = args(p, 2, 3);
        const start = slotParam(s);
        const limit = usize(l);
        const cfg = this.checkCfg(c);
        atLeastConfirmed(cfg);
        if (limit > MAX_GET_CONFIRMED_BLOCKS_RANGE) throw invalidParams(`Limit too large; max ${MAX_GET_CONFIRMED_BLOCKS_RANGE}`);
        return this.sealing(chain.blockSlots(start, chain.slot, limit));
      },
      getRecentPerformanceSamples: (p) => {
        const [l] = args(p, 0, 1);
        const limit = l === undefined || l === null ? PERF_SAMPLES_LIMIT : usize(l);
        if (limit > PERF_SAMPLES_LIMIT) throw invalidParams(`Invalid limit; max ${PERF_SAMPLES_LIMIT}`);
        if (limit === 0) return [];
        return chain.perfSamples.slice(-limit).reverse().map((x) => ({
          slot: x.slot, numTransactions: x.numTransactions, numNonVoteTransactions: x.numTransactions,
          numSlots: x.numSlots, samplePeriodSecs: x.samplePeriodSecs,
        }));
      },
      // No account is non-circulating on a localnet (Agave's list names
      // mainnet accounts and locked-up stake): all of the supply circulates.
      getSupply: (p) => {
        const [c] = args(p, 0, 1);
        const cfg = config(c);
        if (cfg.excludeNonCirculatingAccountsList !== undefined && cfg.excludeNonCirculatingAccountsList !== null) {
          bool(cfg.excludeNonCirculatingAccountsList);
        }
        const total = u64JSON(chain.totalSupply());
        return this.ctx({ total, circulating: total, nonCirculating: 0, nonCirculatingAccounts: [] });
      },
      // The one node of the cluster: this server. It has no gossip, TPU or
      // repair sockets; JSON-RPC and PubSub are where it listens.
      getClusterNodes: (p) => {
        args(p, 0, 0);
        return [{
          pubkey: chain.identity, gossip: null, tvu: null, tpu: null, tpuQuic: null, tpuForwards: null, tpuForwardsQuic: null,
          tpuVote: null, serveRepair: null, rpc: this.addresses.rpc, pubsub: this.addresses.pubsub,
          version: SOLANA_CORE_VERSION, featureSet: FEATURE_SET, shredVersion: shredVersion(chain.genesisHash),
        }];
      },
      getVoteAccounts: (p) => this.getVoteAccounts(p),
      // The node is the leader of every slot.
      getSlotLeader: (p) => this.withCfg(p, 0, () => chain.identity),
      getSlotLeaders: (p) => {
        const [s, l] = args(p, 2, 2);
        const start = slotParam(s);
        const limit = slotParam(l);
        if (limit > MAX_GET_SLOT_LEADERS) throw invalidParams(`Invalid limit; max ${MAX_GET_SLOT_LEADERS}`);
        if (limit === 0) return [];
        const spe = this.slotsPerEpoch();
        const known = Math.floor(chain.slot / spe) + 1; // the leader schedule epoch
        if (Math.floor((start + limit - 1) / spe) > known) {
          const epoch = Math.max(Math.floor(start / spe), known + 1);
          throw invalidParams(`Invalid slot range: leader schedule for epoch ${epoch} is unavailable`);
        }
        return new Array(limit).fill(chain.identity);
      },
      getLeaderSchedule: (p) => {
        const [a, b] = args(p, 0, 2);
        let slot = null;
        let c = b;
        if (a !== null && typeof a === 'object' && !Array.isArray(a)) c = a;
        else if (a !== undefined && a !== null) slot = slotParam(a);
        const cfg = config(c);
        if (cfg.identity !== undefined && cfg.identity !== null) pubkey(cfg.identity);
        const spe = this.slotsPerEpoch();
        if (Math.floor((slot ?? chain.slot) / spe) > Math.floor(chain.slot / spe) + 1) return null;
        const schedule = {};
        if (cfg.identity === undefined || cfg.identity === null || cfg.identity === chain.identity) {
          schedule[chain.identity] = this.scheduleIndices(spe);
        }
        return schedule;
      },
      getTokenLargestAccounts: (p) => this.getTokenLargestAccounts(p),
      // Inflation is disabled (Agave's Inflation::new_disabled()): no
      // rewards are ever paid, as getBlock's empty rewards and getSupply show.
      getInflationRate: (p) => {
        args(p, 0, 0);
        return { total: 0, validator: 0, foundation: 0, epoch: Math.floor(chain.slot / this.slotsPerEpoch()) };
      },
      getInflationGovernor: (p) => this.withCfg(p, 0, () => ({ initial: 0, terminal: 0, taper: 0, foundation: 0, foundationTerm: 0 })),
      getStakeMinimumDelegation: (p) => this.withCfg(p, 0, () => this.ctx(u64JSON(chain.stakeMinimumDelegation()))),
      getBlockProduction: (p) => this.getBlockProduction(p),
      getBlockCommitment: (p) => {
        const [s] = args(p, 1, 1);
        return this.blockCommitment(slotParam(s));
      },
      getLargestAccounts: (p) => this.getLargestAccounts(p),
      getInflationReward: (p) => this.getInflationReward(p),
      // The snapshot a restart resumes from (--ledger DIR/state.bin): always
      // a full one. Without --ledger the server keeps no snapshot.
      getHighestSnapshotSlot: (p) => {
        args(p, 0, 0);
        if (chain.snapshotSlot === null) throw new RpcError(NO_SNAPSHOT, 'No snapshot');
        return { full: chain.snapshotSlot, incremental: null };
      },
      // The one node receives no shreds from others: its highest slot with
      // shreds is the one it is producing, so catch-up checks (these against
      // getSlot) see it current.
      getMaxRetransmitSlot: (p) => { args(p, 0, 0); return chain.slot; },
      getMaxShredInsertSlot: (p) => { args(p, 0, 0); return chain.slot; },
    };
  }

  /** Where this node listens, for getClusterNodes ("host:port"). */
  setAddresses(rpc, pubsub) {
    this.addresses = { rpc, pubsub };
  }

  slotsPerEpoch() {
    return this.chain.slotsPerEpoch;
  }

  scheduleIndices(spe) {
    if (!this.scheduleCache || this.scheduleCache.length !== spe) this.scheduleCache = Array.from({ length: spe }, (_, i) => i);
    return this.scheduleCache;
  }

  // Block slots reported to a client: if they include the current slot, its
  // block is complete from now on.
  sealing(slots) {
    if (slots.length && slots[slots.length - 1] === this.chain.slot) this.chain.seal();
    return slots;
  }

  /** The index of slot's block, or the error Agave answers for a slot without one. */
  blockIndex(slot) {
    const { chain } = this;
    if (slot > chain.slot) throw new RpcError(BLOCK_NOT_AVAILABLE, `Block not available for slot ${slot}`);
    const first = chain.firstAvailableBlock;
    if (slot < first) {
      throw new RpcError(BLOCK_CLEANED_UP, `Block ${slot} cleaned up, does not exist on node. First available block: ${first}`);
    }
    const i = chain.blocks.find(slot);
    if (i < 0) throw new RpcError(SLOT_SKIPPED, `Slot ${slot} was skipped, or missing due to ledger jump to recent snapshot`);
    return i;
  }

  getBlock(p) {
    const { chain } = this;
    const [s, c] = args(p, 1, 2);
    const slot = slotParam(s);
    const cfg = typeof c === 'string' ? { encoding: c } : config(c);
    atLeastConfirmed(cfg);
    const encoding = cfg.encoding === undefined || cfg.encoding === null ? 'json' : variant(cfg.encoding, TX_ENCODINGS);
    const details = cfg.transactionDetails === undefined || cfg.transactionDetails === null
      ? 'full' : variant(cfg.transactionDetails, TRANSACTION_DETAILS);
    const showRewards = cfg.rewards === undefined || cfg.rewards === null ? true : bool(cfg.rewards);
    const maxVersion = maxVersionParam(cfg.maxSupportedTransactionVersion);
    this.blockIndex(slot);
    const b = chain.block(slot);
    if (slot === chain.slot) chain.seal();
    const out = {
      previousBlockhash: b.parent ? b.parent.hash : DEFAULT_HASH,
      blockhash: b.blockhash,
      parentSlot: b.parent ? b.parent.slot : slot,
    };
    switch (details) {
      case 'full':
        out.transactions = b.transactions.map((r) => this.encodeTx(r, encoding, maxVersion, showRewards));
        break;
      case 'accounts':
        out.transactions = b.transactions.map((r) => this.encodeAccounts(r, maxVersion, showRewards));
        break;
      case 'signatures':
        out.signatures = b.transactions.map((r) => r.signature);
        break;
      default:
        break;
    }
    // Fees are burned whole (litesvm pays the leader nothing) and inflation
    // is off: no block has rewards.
    if (showRewards) out.rewards = [];
    out.blockTime = slot === 0 && chain.genesisTime !== null ? chain.genesisTime : b.time;
    out.blockHeight = slot;
    return out;
  }

  getVoteAccounts(p) {
    const { chain } = this;
    const [c] = args(p, 0, 1);
    const cfg = config(c);
    const only = cfg.votePubkey === undefined || cfg.votePubkey === null ? null : pubkey(cfg.votePubkey);
    const keepUnstaked = cfg.keepUnstakedDelinquents === undefined || cfg.keepUnstakedDelinquents === null
      ? false : bool(cfg.keepUnstakedDelinquents);
    const distance = cfg.delinquentSlotDistance === undefined || cfg.delinquentSlotDistance === null
      ? DELINQUENT_VALIDATOR_SLOT_DISTANCE : slotParam(cfg.delinquentSlotDistance);
    const stakes = this.voteStakes();
    const current = [];
    let delinquent = [];
    for (const item of chain.svm.getProgramAccounts(VOTE_PROGRAM)) {
      const address = Buffer.from(item.address);
      if (only && !address.equals(only)) continue;
      const st = parseVoteState(item.account().data());
      if (!st) continue;
      const lastVote = st.votes.length ? st.votes[st.votes.length - 1].slot : 0;
      const stake = stakes.get(addressKey(address)) ?? 0n;
      const info = {
        votePubkey: bs58.encode(address), nodePubkey: bs58.encode(st.node), activatedStake: u64JSON(stake),
        epochVoteAccount: true, commission: st.commission,
        epochCredits: st.epochCredits.slice(-MAX_RPC_VOTE_ACCOUNT_INFO_EPOCH_CREDITS_HISTORY), lastVote,
        rootSlot: st.root ?? 0,
      };
      const isCurrent = chain.slot >= distance ? lastVote > chain.slot - distance : lastVote > 0;
      (isCurrent ? current : delinquent).push(info);
    }
    if (!keepUnstaked) delinquent = delinquent.filter((i) => i.activatedStake > 0);
    return { current, delinquent };
  }

  /** The stake delegated to each vote account this epoch: addressKey(vote account) -> lamports. */
  voteStakes() {
    const epoch = Math.floor(this.chain.slot / this.slotsPerEpoch());
    const stakes = new Map();
    for (const item of this.chain.svm.getProgramAccounts(STAKE_PROGRAM)) {
      const d = parseStakeDelegation(item.account().data());
      if (!d || !stakeEffective(d, epoch)) continue;
      const k = addressKey(d.voter);
      stakes.set(k, (stakes.get(k) ?? 0n) + d.stake);
    }
    return stakes;
  }

  /**
   * getBlockProduction, from the SlotHistory sysvar as Agave reads it: the
   * node leads every slot of the range; a slot with a block was produced.
   */
  getBlockProduction(p) {
    const { chain } = this;
    const [c] = args(p, 0, 1);
    const cfg = config(c);
    const identity = cfg.identity === undefined || cfg.identity === null ? null : bs58.encode(pubkey(cfg.identity));
    let first;
    let last;
    if (cfg.range === undefined || cfg.range === null) {
      const spe = this.slotsPerEpoch();
      first = BigInt(Math.floor(chain.slot / spe) * spe);
      last = BigInt(chain.slot);
    } else {
      const r = cfg.range;
      if (typeof r !== 'object' || Array.isArray(r)) throw wrongType(r, 'struct RpcBlockProductionConfigRange');
      if (r.firstSlot === undefined) throw invalidParams('Invalid params: missing field `firstSlot`.');
      first = u64(r.firstSlot);
      last = r.lastSlot === undefined || r.lastSlot === null ? BigInt(chain.slot) : u64(r.lastSlot);
      if (last < first) throw invalidParams(`lastSlot, ${last}, cannot be less than firstSlot, ${first}`);
    }
    const history = chain.svm.getSlotHistory();
    const oldest = history.oldest();
    const newest = history.newest();
    if (first < oldest) throw invalidParams(`firstSlot, ${first}, is too small; min ${oldest}`);
    if (last > newest) throw invalidParams(`lastSlot, ${last}, is too large; max ${newest}`);
    const byIdentity = {};
    if (identity === null || identity === chain.identity) {
      const bits = history.bits;
      const words = new Uint32Array(bits.buffer, bits.byteOffset, bits.length * 2);
      let produced = 0;
      for (let s = Number(first); s <= Number(last); s++) {
        const i = s % SLOT_HISTORY_MAX;
        produced += (words[i >>> 5] >>> (i & 31)) & 1;
      }
      byIdentity[chain.identity] = [Number(last - first) + 1, produced];
    }
    return this.ctx({ byIdentity, range: { firstSlot: Number(first), lastSlot: Number(last) } });
  }

  /**
   * getBlockCommitment as Agave's commitment service aggregates it: each
   * staked vote account adds its stake to the blocks at or below its root
   * (rooted) and to those up to each of its votes (at the vote's
   * confirmation count). A block no vote covers yet (the one in progress)
   * or outside the status cache has none.
   */
  blockCommitment(slot) {
    const { chain } = this;
    const stakes = this.voteStakes();
    let totalStake = 0n;
    for (const s of stakes.values()) totalStake += s;
    const i = chain.blocks.find(slot);
    let commitment = null;
    if (i >= 0 && this.inStatusCache(i)) {
      const array = new Array(MAX_LOCKOUT_HISTORY + 1).fill(0n);
      let counted = false;
      for (const item of chain.svm.getProgramAccounts(VOTE_PROGRAM)) {
        const stake = stakes.get(addressKey(item.address)) ?? 0n;
        const st = stake > 0n ? parseVoteState(item.account().data()) : null;
        if (!st) continue;
        if (st.root !== null && slot <= st.root) {
          array[MAX_LOCKOUT_HISTORY] += stake;
          counted = true;
          continue;
        }
        const vote = st.votes.find((v) => slot <= v.slot);
        if (vote) {
          array[vote.confirmationCount - 1] += stake;
          counted = true;
        }
      }
      if (counted) commitment = array.map(u64JSON);
    }
    return { commitment, totalStake: u64JSON(totalStake) };
  }

  // Whether the block at index i is among the bank's status cache
  // ancestors: above the node's root, or among the newest
  // STATUS_CACHE_ROOTS blocks at or below it.
  inStatusCache(i) {
    const root = this.chain.voteState?.root ?? null;
    if (root === null) return true;
    const rootIndex = this.chain.blocks.lowerBound(root + 1) - 1;
    return i > rootIndex || rootIndex - i < STATUS_CACHE_ROOTS;
  }

  /**
   * getLargestAccounts: the 20 accounts with the most lamports, largest
   * first (equal balances by address, highest first, as Agave orders them).
   * Nothing is non-circulating on a localnet (see getSupply).
   */
  getLargestAccounts(p) {
    const [c] = args(p, 0, 1);
    const cfg = config(c);
    const filter = cfg.filter === undefined || cfg.filter === null ? null : variant(cfg.filter, ['circulating', 'nonCirculating']);
    if (cfg.sortResults !== undefined && cfg.sortResults !== null) bool(cfg.sortResults);
    const list = filter === 'nonCirculating' ? [] : this.chain.largestAccounts(NUM_LARGEST_ACCOUNTS);
    return this.ctx(list.map((e) => ({ lamports: u64JSON(e.lamports), address: bs58.encode(e.address) })));
  }

  /**
   * getInflationReward, following Agave's steps: an epoch's rewards are
   * paid in the first block of the next epoch, so an epoch that has not
   * ended is -32004 for that slot (the default epoch, the previous one, is
   * epoch 0 throughout epoch 0 too). Inflation is off and blocks carry no
   * rewards: every address gets null.
   */
  getInflationReward(p) {
    const { chain } = this;
    const [list, c] = args(p, 1, 2);
    if (!Array.isArray(list)) throw wrongType(list, 'a sequence');
    const cfg = config(c);
    const epochParam = cfg.epoch === undefined || cfg.epoch === null ? null : u64(cfg.epoch);
    const addresses = list.map(pubkey);
    const spe = BigInt(this.slotsPerEpoch());
    let epoch = epochParam;
    if (epoch === null) {
      this.checkCfg(cfg);
      epoch = BigInt(chain.slot) / spe;
      if (epoch > 0n) epoch -= 1n;
    }
    const next = epoch < U64_MAX ? epoch + 1n : epoch;
    const firstSlot = next * spe < U64_MAX ? next * spe : U64_MAX; // a u64, saturating
    const firstAvailable = chain.firstAvailableBlock;
    if (firstSlot < BigInt(firstAvailable)) {
      throw new RpcError(BLOCK_CLEANED_UP, `Block ${firstSlot} cleaned up, does not exist on node. First available block: ${firstAvailable}`);
    }
    atLeastConfirmed(cfg);
    this.checkCfg(cfg);
    const [boundary] = firstSlot > BigInt(chain.slot) ? [] : chain.blockSlots(Number(firstSlot), chain.slot, 1);
    if (boundary === undefined) throw new RpcError(BLOCK_NOT_AVAILABLE, `Block not available for slot ${firstSlot}`);
    const b = chain.block(boundary);
    const parentSlot = b.parent ? b.parent.slot : boundary;
    if (parentSlot >= Number(firstSlot)) {
      throw new RpcError(SLOT_NOT_EPOCH_BOUNDARY, `Rewards cannot be found because slot ${boundary} is not the epoch boundary. This may be due to gap in the queried node's local ledger or long-term storage`, { slot: boundary });
    }
    return addresses.map(() => null);
  }

  getTokenLargestAccounts(p) {
    const { chain } = this;
    const [key, c] = args(p, 1, 2);
    const mint = pubkey(key);
    config(c);
    let owner;
    let decimals;
    if (mint.equals(NATIVE_MINT)) {
      [owner] = TOKEN_PROGRAMS;
      decimals = 9;
    } else {
      const acc = chain.getAccount(mint);
      if (!acc) throw invalidParams('Invalid param: could not find mint');
      const data = Buffer.from(acc.data());
      if (!isMintData(data)) throw invalidParams('Invalid param: Token mint could not be unpacked');
      owner = Buffer.from(acc.owner());
      decimals = data[44];
    }
    if (!isTokenProgram(owner)) throw invalidParams('Invalid param: not a Token mint');
    const list = [];
    for (const item of chain.svm.getProgramAccounts(owner)) {
      const data = Buffer.from(item.account().data());
      if (!isTokenAccountData(data) || !data.subarray(0, 32).equals(mint)) continue;
      list.push({ amount: data.readBigUInt64LE(64), address: Buffer.from(item.address) });
    }
    // Largest first; equal amounts by address, highest first (Agave's heap order).
    list.sort((x, y) => (x.amount === y.amount ? Buffer.compare(y.address, x.address) : (x.amount < y.amount ? 1 : -1)));
    return this.ctx(list.slice(0, NUM_LARGEST_ACCOUNTS).map((e) => ({ address: bs58.encode(e.address), ...uiTokenAmount(e.amount, decimals) })));
  }

  /** Answers one request object; returns the response object. */
  handle(req) {
    const id = req && typeof req === 'object' && !Array.isArray(req) && req.id !== undefined ? req.id : null;
    try {
      if (!req || typeof req !== 'object' || Array.isArray(req) || req.jsonrpc !== '2.0' || typeof req.method !== 'string') {
        throw new RpcError(INVALID_REQUEST, 'Invalid request');
      }
      const fn = Object.hasOwn(this.methods, req.method) ? this.methods[req.method] : null;
      if (!fn) throw new RpcError(METHOD_NOT_FOUND, 'Method not found');
      return { jsonrpc: '2.0', result: fn(req.params), id };
    } catch (e) {
      if (e instanceof RpcError) return { jsonrpc: '2.0', error: e.toJSON(), id };
      this.log.error(`internal error in ${req && req.method}: ${e.stack ?? e}`);
      return { jsonrpc: '2.0', error: { code: INTERNAL_ERROR, message: `Internal error: ${e.message}` }, id };
    }
  }

  ctx(value) {
    return { context: { slot: this.chain.slot, apiVersion: API_VERSION }, value };
  }

  checkCfg(c) {
    const cfg = config(c);
    if (cfg.minContextSlot !== undefined && cfg.minContextSlot !== null && usize(cfg.minContextSlot) > this.chain.slot) {
      throw new RpcError(MIN_CONTEXT_SLOT_NOT_REACHED, 'Minimum context slot has not been reached', { contextSlot: this.chain.slot });
    }
    return cfg;
  }

  withCfg(p, min, fn) {
    const [cfg] = args(p, min, 1);
    this.checkCfg(cfg);
    return fn();
  }

  bytes(v, encoding) {
    str(v);
    if (encoding === 'base58') {
      const b = bs58.decode(v);
      if (!b) throw invalidParams('invalid base58 encoding');
      return b;
    }
    if (v.length % 4 !== 0 || !BASE64.test(v)) throw invalidParams('invalid base64 encoding');
    return Buffer.from(v, 'base64');
  }

  txBytes(v, encoding = 'base58') {
    if (encoding !== 'base58' && encoding !== 'base64') {
      throw invalidParams(`unsupported encoding: ${encoding}. Supported encodings: base58, base64`);
    }
    str(v, 'an encoded transaction string');
    // The encoded length of MAX_TX_BYTES, as a real validator checks it.
    const maxLen = encoding === 'base58' ? 1683 : 4 * Math.ceil(MAX_TX_BYTES / 3);
    if (v.length > maxLen) {
      throw invalidParams(`${encoding} encoded solana_transaction::versioned::VersionedTransaction too large: ${v.length} bytes (max: encoded/raw ${maxLen}/${MAX_TX_BYTES})`);
    }
    return this.bytes(v, encoding);
  }

  filters(list) {
    if (list === undefined || list === null) return [];
    if (!Array.isArray(list)) throw wrongType(list, 'a sequence of filters');
    if (list.length > 4) throw invalidParams('Too many filters provided; max 4');
    return list.map((f) => {
      if (f && typeof f === 'object' && f.dataSize !== undefined) {
        const size = usize(f.dataSize);
        return (data) => data.length === size;
      }
      if (f && typeof f === 'object' && f.memcmp && typeof f.memcmp === 'object') {
        const offset = usize(f.memcmp.offset);
        const enc = f.memcmp.encoding ?? 'base58';
        if (enc !== 'base58' && enc !== 'base64') throw invalidParams(`Invalid param: unsupported memcmp encoding ${enc}`);
        const bytes = this.bytes(f.memcmp.bytes, enc);
        if (bytes.length > 128) throw invalidParams('Invalid param: memcmp bytes longer than 128');
        return (data) => {
          if (offset + bytes.length > data.length) return false;
          for (let i = 0; i < bytes.length; i++) if (data[offset + i] !== bytes[i]) return false;
          return true;
        };
      }
      throw invalidParams(`Invalid param: unsupported filter ${JSON.stringify(f)}`);
    });
  }

  /** An account in the RPC's UiAccount shape, or null. */
  account(acc, cfg) {
    if (!acc) return null;
    let data = Buffer.from(acc.data());
    const owner = Buffer.from(acc.owner());
    const space = data.length;
    const encoding = cfg.encoding ?? 'base64';
    if (cfg.dataSlice !== undefined && cfg.dataSlice !== null) {
      if (encoding === 'jsonParsed') throw invalidParams('Invalid param: dataSlice cannot be used with jsonParsed');
      const { offset, length } = cfg.dataSlice;
      const o = usize(offset);
      data = data.subarray(o, o + usize(length));
    }
    let encoded;
    switch (encoding) {
      case 'binary':
      case 'base58':
        if (data.length > MAX_BASE58_ACCOUNT_BYTES) {
          throw new RpcError(INVALID_REQUEST, `Encoded binary (base 58) data should be less than ${MAX_BASE58_ACCOUNT_BYTES} bytes, please use Base64 encoding.`);
        }
        encoded = encoding === 'binary' ? bs58.encode(data) : [bs58.encode(data), 'base58'];
        break;
      case 'base64':
        encoded = [data.toString('base64'), 'base64'];
        break;
      case 'base64+zstd':
        encoded = [zstdFrame(data).toString('base64'), 'base64+zstd'];
        break;
      case 'jsonParsed':
        encoded = this.parsed(owner, data) ?? [data.toString('base64'), 'base64'];
        break;
      default:
        throw invalidParams(`Invalid params: unknown encoding ${JSON.stringify(encoding)}.`);
    }
    return { data: encoded, executable: acc.executable(), lamports: u64JSON(acc.lamports()), owner: bs58.encode(owner), rentEpoch: u64JSON(acc.rentEpoch()), space };
  }

  /** jsonParsed for SPL token accounts and mints; null for everything else. */
  parsed(owner, data) {
    if (!isTokenProgram(owner)) return null;
    const program = owner.equals(TOKEN_PROGRAMS[0]) ? 'spl-token' : 'spl-token-2022';
    const coption = (off) => (data.readUInt32LE(off) === 1 ? bs58.encode(data.subarray(off + 4, off + 36)) : null);
    if (isTokenAccountData(data)) {
      const state = ['uninitialized', 'initialized', 'frozen'][data[108]] ?? 'uninitialized';
      const info = {
        isNative: data.readUInt32LE(109) === 1, mint: bs58.encode(data.subarray(0, 32)), owner: bs58.encode(data.subarray(32, 64)),
        state, tokenAmount: uiTokenAmount(data.readBigUInt64LE(64), this.decimals(data.subarray(0, 32))),
      };
      const delegate = coption(72);
      if (delegate) {
        info.delegate = delegate;
        info.delegatedAmount = uiTokenAmount(data.readBigUInt64LE(121), info.tokenAmount.decimals);
      }
      return { program, parsed: { info, type: 'account' }, space: data.length };
    }
    if (isMintData(data)) {
      return {
        program,
        parsed: {
          info: {
            decimals: data[44], freezeAuthority: coption(46), isInitialized: data[45] === 1,
            mintAuthority: coption(0), supply: data.readBigUInt64LE(36).toString(),
          },
          type: 'mint',
        },
        space: data.length,
      };
    }
    return null;
  }

  decimals(mint) {
    const m = this.chain.getAccount(mint);
    return m ? m.data()[44] ?? 0 : 0;
  }

  tokenData(key, isKind, kind) {
    const acc = this.chain.getAccount(key);
    const data = acc ? Buffer.from(acc.data()) : null;
    if (!acc || !isTokenProgram(Buffer.from(acc.owner())) || !isKind(data)) {
      throw invalidParams(`Invalid param: not a ${kind}`);
    }
    return data;
  }

  status(r) {
    return { slot: r.slot, confirmations: null, err: r.err, status: r.err ? { Err: r.err } : { Ok: null }, confirmationStatus: 'finalized' };
  }

  simulateTransaction(p) {
    const { chain } = this;
    const [tx, c] = args(p, 1, 2);
    const cfg = this.checkCfg(c);
    const sigVerify = cfg.sigVerify === true;
    const replace = cfg.replaceRecentBlockhash === true;
    if (sigVerify && replace) throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
    let raw = this.txBytes(tx, cfg.encoding);
    const parsed = chain.decode(raw);
    let replacementBlockhash = null;
    const value = {
      err: null, logs: [], accounts: null, unitsConsumed: 0, returnData: null, innerInstructions: null, replacementBlockhash,
    };
    if (replace) {
      raw = Buffer.from(raw);
      const off = parsed.message.recentBlockhash.byteOffset - parsed.raw.byteOffset;
      bs58.decode(chain.latest.hash).copy(raw, off);
      replacementBlockhash = { blockhash: chain.latest.hash, lastValidBlockHeight: chain.latest.slot + BLOCKHASH_VALID_SLOTS };
      value.replacementBlockhash = replacementBlockhash;
    } else if (chain.lastValidSlot(bs58.encode(parsed.message.recentBlockhash)) === null) {
      return this.ctx({ ...value, err: 'BlockhashNotFound' });
    }
    let addresses = null;
    if (cfg.accounts !== undefined && cfg.accounts !== null) {
      if (typeof cfg.accounts !== 'object' || !Array.isArray(cfg.accounts.addresses)) throw wrongType(cfg.accounts, 'an accounts config');
      addresses = cfg.accounts.addresses.map(pubkey);
    }
    const sim = chain.simulate(raw, parsed.message.version !== 'legacy', { sigVerify });
    if (sim.err === 'SignatureFailure' && sigVerify) {
      throw new RpcError(TRANSACTION_SIGNATURE_VERIFICATION_FAILURE, 'Transaction signature verification failure');
    }
    const meta = sim.meta;
    value.err = sim.err;
    value.logs = meta.logs();
    value.unitsConsumed = u64JSON(meta.computeUnitsConsumed());
    const rd = meta.returnData();
    if (rd.data().length) value.returnData = { programId: bs58.encode(rd.programId()), data: [Buffer.from(rd.data()).toString('base64'), 'base64'] };
    if (cfg.innerInstructions === true) {
      value.innerInstructions = [];
      meta.innerInstructions().forEach((list, index) => {
        if (list.length) {
          value.innerInstructions.push({
            index,
            instructions: list.map((inner) => {
              const ci = inner.instruction();
              return { programIdIndex: ci.programIdIndex(), accounts: Array.from(ci.accounts()), data: bs58.encode(ci.data()), stackHeight: inner.stackHeight() };
            }),
          });
        }
      });
    }
    if (addresses) {
      const acctCfg = { encoding: cfg.accounts.encoding ?? 'base64' };
      if (sim.info) {
        const post = new Map(sim.info.postAccounts().map((a) => [bs58.encode(a.address), a.account()]));
        value.accounts = addresses.map((a) => this.account(post.get(bs58.encode(a)) ?? chain.getAccount(a), acctCfg));
      } else {
        value.accounts = addresses.map(() => null);
      }
    }
    return this.ctx(value);
  }

  getTransaction(p) {
    const [sig, c] = args(p, 1, 2);
    signature(sig);
    const cfg = typeof c === 'string' ? { encoding: c } : this.checkCfg(c);
    atLeastConfirmed(cfg);
    const encoding = cfg.encoding === undefined || cfg.encoding === null ? 'json' : variant(cfg.encoding, TX_ENCODINGS);
    const maxVersion = maxVersionParam(cfg.maxSupportedTransactionVersion);
    const r = this.chain.records.get(sig);
    if (!r) return null;
    const { transaction, meta, version } = this.encodeTx(r, encoding, maxVersion, true);
    const out = { slot: r.slot, blockTime: r.blockTime, transaction, meta };
    if (version !== undefined) out.version = version;
    return out;
  }

  /**
   * A recorded transaction with its metadata, as getTransaction and getBlock
   * (transactionDetails "full") encode it: {transaction, meta, version?}.
   * version is present when the client gave maxSupportedTransactionVersion;
   * a versioned transaction without it (or above it) is -32015.
   */
  encodeTx(r, encoding, maxVersion, showRewards) {
    const version = checkVersion(r, maxVersion);
    let transaction;
    switch (encoding) {
      case 'json': transaction = this.txJSON(r); break;
      case 'jsonParsed': transaction = this.txParsed(r); break;
      case 'base64': transaction = [r.raw.toString('base64'), 'base64']; break;
      case 'base58': transaction = [bs58.encode(r.raw), 'base58']; break;
      default: transaction = bs58.encode(r.raw); break; // binary: the legacy base58 string
    }
    const meta = {
      err: r.err, status: r.err ? { Err: r.err } : { Ok: null }, fee: u64JSON(r.fee),
      preBalances: r.preBalances.map(u64JSON), postBalances: r.postBalances.map(u64JSON),
      innerInstructions: encoding === 'jsonParsed' ? this.innerParsed(r) : r.innerInstructions, logMessages: r.logs,
      preTokenBalances: r.preTokenBalances, postTokenBalances: r.postTokenBalances, rewards: showRewards ? [] : null,
    };
    if (encoding !== 'jsonParsed') { // jsonParsed lists loaded keys in accountKeys instead
      const loaded = r.tx.loaded ?? { writable: [], readonly: [] };
      meta.loadedAddresses = { writable: loaded.writable.map(bs58.encode), readonly: loaded.readonly.map(bs58.encode) };
    }
    if (r.returnData) meta.returnData = r.returnData;
    meta.computeUnitsConsumed = u64JSON(r.computeUnitsConsumed);
    const out = { transaction, meta };
    if (version !== undefined) out.version = version;
    return out;
  }

  /** getBlock's transactionDetails "accounts": signatures, parsed account keys, balances. */
  encodeAccounts(r, maxVersion, showRewards) {
    const version = checkVersion(r, maxVersion);
    const loaded = r.tx.loaded ?? { writable: [], readonly: [] };
    const out = {
      transaction: {
        signatures: r.tx.signatures.map(bs58.encode),
        accountKeys: parsedAccountKeys(r.tx.message, r.keys, loaded.writable.length),
      },
      meta: {
        err: r.err, status: r.err ? { Err: r.err } : { Ok: null }, fee: u64JSON(r.fee),
        preBalances: r.preBalances.map(u64JSON), postBalances: r.postBalances.map(u64JSON),
        preTokenBalances: r.preTokenBalances, postTokenBalances: r.postTokenBalances,
      },
    };
    if (showRewards) out.meta.rewards = [];
    if (version !== undefined) out.version = version;
    return out;
  }

  /** The jsonParsed transaction: annotated account keys, parsed instructions. */
  txParsed(r) {
    const m = r.tx.message;
    const loaded = r.tx.loaded ?? { writable: [], readonly: [] };
    const accountKeys = parsedAccountKeys(m, r.keys, loaded.writable.length);
    const keys = accountKeys.map((k) => k.pubkey);
    const message = {
      accountKeys,
      recentBlockhash: bs58.encode(m.recentBlockhash),
      instructions: m.instructions.map((ix) => parseInstruction(ix, keys, null)),
    };
    if (m.version !== 'legacy') {
      message.addressTableLookups = m.addressTableLookups.map((l) => ({
        accountKey: bs58.encode(l.accountKey), writableIndexes: l.writableIndexes, readonlyIndexes: l.readonlyIndexes,
      }));
    }
    return { signatures: r.tx.signatures.map(bs58.encode), message };
  }

  innerParsed(r) {
    const keys = r.keys.map(bs58.encode);
    return r.innerInstructions.map(({ index, instructions }) => ({
      index,
      instructions: instructions.map((ix) => parseInstruction(
        { programIdIndex: ix.programIdIndex, accounts: ix.accounts, data: bs58.decode(ix.data) }, keys, ix.stackHeight,
      )),
    }));
  }

  txJSON(r) {
    const m = r.tx.message;
    const message = {
      accountKeys: m.accountKeys.map(bs58.encode),
      header: m.header,
      recentBlockhash: bs58.encode(m.recentBlockhash),
      instructions: m.instructions.map((ix) => ({ programIdIndex: ix.programIdIndex, accounts: ix.accounts, data: bs58.encode(ix.data), stackHeight: null })),
    };
    if (m.version !== 'legacy') {
      message.addressTableLookups = m.addressTableLookups.map((l) => ({
        accountKey: bs58.encode(l.accountKey), writableIndexes: l.writableIndexes, readonlyIndexes: l.readonlyIndexes,
      }));
    }
    return { signatures: r.tx.signatures.map(bs58.encode), message };
  }
}
