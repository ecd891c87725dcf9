// The ledger: a litesvm instance plus what a validator has and litesvm does
// not: slots on a timer with the Clock sysvar following wall time, a window of
// recent blockhashes, the blocks produced (a header per slot, the transaction
// records of each), the node's vote and stake accounts, performance samples,
// a faucet, and persistence to a ledger directory.
import { EventEmitter } from 'node:events';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import * as bs58 from './base58.js';
import { BlockLog } from './blocks.js';
import { stringifyJSON } from './json.js';
import {
  STAKE_PROGRAM, STAKE_STATE_SIZE, U64_MAX, VOTE_PROGRAM, VOTE_STATE_SIZE, parseVoteState, stakeStateBytes, voteStateBytes,
} from './node.js';
import { Account, FailedTransactionMetadata, LiteSvm, SlotHistory } from './svm.js';
import { txErrorJSON, txErrorMessage } from './txerror.js';
import {
  computeUnitPrice, isStaticWritable, loadedAddresses, messageFee, parseTransaction, WireError,
} from './wire.js';
import {
  RpcError, invalidParams, SEND_TRANSACTION_PREFLIGHT_FAILURE, TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
} from './errors.js';

/** Slots a blockhash stays valid for (MAX_PROCESSING_AGE on a real cluster). */
export const BLOCKHASH_VALID_SLOTS = 150;
/** Slots per epoch unless --slots-per-epoch says otherwise (a cluster's default). */
export const DEFAULT_SLOTS_PER_EPOCH = 432_000;
/** The fewest slots an epoch may have (Agave's MINIMUM_SLOTS_PER_EPOCH). */
export const MIN_SLOTS_PER_EPOCH = 32;
const FAUCET_LAMPORTS = 500_000_000n * 1_000_000_000n;
const SNAPSHOT_MAGIC = Buffer.from('PSYLNET1');
const SNAPSHOT_VERSION = 1;
/** Slots getRecentPrioritizationFees covers (Agave's fee cache holds 150). */
const RECENT_FEE_SLOTS = 150;
/** Block headers kept (an epoch: ~2 days at 400 ms slots); older blocks are cleaned up. */
export const MAX_BLOCKS = 432_000;
/** Newest block headers written to snapshots: the blocks that survive a restart. */
const PERSIST_BLOCKS = 10_000;
/** Entries in the SlotHashes sysvar (Agave's slot_hashes::MAX_ENTRIES). */
export const SLOT_HASHES_MAX = 512;
/** Performance samples kept (Agave's PERFORMANCE_SAMPLES_LIMIT). */
export const PERF_SAMPLES_LIMIT = 720;
/** Stake delegated at genesis to the node's vote account. */
const BOOTSTRAP_STAKE = 1_000_000n * 1_000_000_000n;
// Owners of the accounts litesvm and genesis create. getSupply sums the
// accounts of every owner the server has seen: these, and the owners of
// every account a transaction wrote.
const GENESIS_OWNERS = [
  '11111111111111111111111111111111', 'Sysvar1111111111111111111111111111111111111',
  'NativeLoader1111111111111111111111111111111', 'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111', 'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111', 'Feature111111111111111111111111111111111111',
  'Config1111111111111111111111111111111111111', 'Stake11111111111111111111111111111111111111',
  'Vote111111111111111111111111111111111111111', 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA',
  'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb',
];

const addr = (s) => bs58.decodeAddress(s);
export const SYSTEM_PROGRAM = Buffer.alloc(32);
export const UPGRADEABLE_LOADER = addr('BPFLoaderUpgradeab1e11111111111111111111111');
export const TOKEN_PROGRAMS = [addr('TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA'),
  addr('TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb')];
/** A cheap Map key for a 32-byte address (base58 costs far more to compute). */
export const addressKey = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64');
export const isTokenProgram = (owner) => TOKEN_PROGRAMS.some((p) => p.equals(owner));

// SPL token account layout: mint, owner, amount; Token-2022 accounts with
// extensions are longer and tag their type at byte 165 (2 = account).
const TOKEN_ACCOUNT_LEN = 165;
const MINT_LEN = 82;
const MINT_DECIMALS_OFFSET = 44;
export function isTokenAccountData(data) {
  return data.length === TOKEN_ACCOUNT_LEN || (data.length > TOKEN_ACCOUNT_LEN && data[TOKEN_ACCOUNT_LEN] === 2);
}
export function isMintData(data) {
  return data.length === MINT_LEN || (data.length > TOKEN_ACCOUNT_LEN && data[TOKEN_ACCOUNT_LEN] === 1);
}

/** A token amount in the RPC's UiTokenAmount shape. */
export function uiTokenAmount(amount, decimals) {
  const digits = amount.toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const frac = digits.slice(digits.length - decimals).replace(/0+$/, '');
  const uiAmountString = frac ? `${whole}.${frac}` : whole;
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString };
}

// PKCS#8 DER prefix for a raw 32-byte Ed25519 seed (RFC 8410).
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
function keypairFromSeed(seed) {
  const privateKey = crypto.createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const spki = crypto.createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  return { seed, privateKey, publicKey: Buffer.from(spki.subarray(spki.length - 32)) };
}

function shortVec(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Buffer.from(out);
}

/** Writes data to file atomically: temp file, fsync, rename, fsync dir. */
async function writeAtomic(file, chunks) {
  const tmp = `${file}.tmp`;
  const fh = await fs.promises.open(tmp, 'w');
  try {
    await fh.writev(chunks);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fs.promises.rename(tmp, file);
  const dir = await fs.promises.open(path.dirname(file), 'r');
  try { await dir.sync(); } finally { await dir.close(); }
}

function writeAtomicSync(file, chunks) {
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writevSync(fd, chunks);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  const dir = fs.openSync(path.dirname(file), 'r');
  try { fs.fsyncSync(dir); } finally { fs.closeSync(dir); }
}

export class Chain extends EventEmitter {
  /**
   * @param {object} opts
   * @param {string} [opts.ledgerDir] - where snapshots live; none = memory only
   * @param {boolean} [opts.reset] - discard the ledger's state
   * @param {number} opts.slotMs - slot duration
   * @param {number} [opts.slotsPerEpoch] - epoch length at genesis (default DEFAULT_SLOTS_PER_EPOCH)
   * @param {number} opts.snapshotMs - snapshot interval while state changes
   * @param {Array<{id: Buffer, path: string, authority: Buffer|null}>} opts.programs - genesis programs
   * @param {number} opts.maxRecords - transactions kept for queries
   * @param {number} opts.persistRecords - newest transactions written to snapshots
   * @param {object} opts.log
   */
  constructor(opts) {
    super();
    this.setMaxListeners(0);
    this.opts = opts;
    this.log = opts.log;
    this.records = new Map(); // signature -> record
    this.order = []; // records, oldest first
    this.byAddress = new Map(); // addressKey(address) -> records, oldest first
    this.seq = 0;
    this.window = []; // {slot, hash}, oldest first
    this.slotHashes = []; // {slot, hash}: the bank hash of each produced slot, newest first (the SlotHashes sysvar)
    this.blockhashSlot = new Map(); // hash -> slot
    this.dirty = false;
    this.saving = null;
    this.lastSavedSlot = 0;
    this.snapshotSlot = null; // slot of the snapshot on disk (getHighestSnapshotSlot); null: none
    this.blocks = new BlockLog(MAX_BLOCKS);
    this.bySlot = new Map(); // slot -> records, in order
    this.lastBlockSlot = null; // newest slot with a block
    this.blockTime = Math.floor(Date.now() / 1000); // the current block's time
    this.sealed = false; // the current block was reported complete: the next transaction starts a new slot
    this.perfSamples = []; // oldest first
    this.owners = new Set(GENESIS_OWNERS.map((o) => addressKey(addr(o))));
    this.supplyCache = null;
    this.stakeMinCache = null;
    this.genesisTime = null;
  }

  /** Loads the ledger or creates genesis. Throws with a user-facing message. */
  open() {
    const { ledgerDir } = this.opts;
    if (ledgerDir) {
      fs.mkdirSync(ledgerDir, { recursive: true });
      this.lock();
      this.stateFile = path.join(ledgerDir, 'state.bin');
      if (this.opts.reset) fs.rmSync(this.stateFile, { force: true });
    }
    if (this.stateFile && fs.existsSync(this.stateFile)) {
      this.load();
      if (this.opts.programs.length) this.log.warn('ledger already exists: genesis programs not reloaded (use --reset)');
      if (this.opts.slotsPerEpoch && this.opts.slotsPerEpoch !== this.slotsPerEpoch) {
        this.log.warn(`ledger already exists: its epochs keep ${this.slotsPerEpoch} slots (use --reset)`);
      }
    } else {
      this.genesis();
      if (this.stateFile) this.saveSync();
    }
  }

  lock() {
    const lockFile = path.join(this.opts.ledgerDir, 'LOCK');
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
        this.lockFile = lockFile;
        return;
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
      }
      const pid = Number(fs.readFileSync(lockFile, 'utf8'));
      let alive = false;
      try { alive = pid > 0 && pid !== process.pid && process.kill(pid, 0); } catch { alive = false; }
      if (alive) throw new Error(`ledger ${this.opts.ledgerDir} is in use by process ${pid}`);
      fs.rmSync(lockFile, { force: true }); // left by a crashed server
    }
    throw new Error(`cannot lock ledger ${this.opts.ledgerDir}`);
  }

  configure() {
    // History 0: we keep our own records and reject duplicates over the whole
    // blockhash window, which litesvm's bounded history cannot. The blockhash
    // check is ours too, since litesvm only accepts its latest blockhash.
    this.svm.setTransactionHistory(0n);
    this.svm.setBlockhashCheck(false);
    this.svm.setSigverify(true);
  }

  genesis() {
    this.svm = new LiteSvm();
    this.configure();
    this.slotsPerEpoch = this.opts.slotsPerEpoch ?? DEFAULT_SLOTS_PER_EPOCH;
    const sched = this.svm.getEpochSchedule();
    sched.slotsPerEpoch = BigInt(this.slotsPerEpoch);
    sched.leaderScheduleSlotOffset = BigInt(this.slotsPerEpoch);
    sched.warmup = false;
    sched.firstNormalEpoch = 0n;
    sched.firstNormalSlot = 0n;
    this.svm.setEpochSchedule(sched);
    this.faucet = keypairFromSeed(crypto.randomBytes(32));
    this.identity = bs58.encode(crypto.randomBytes(32));
    this.svm.setAccount(this.faucet.publicKey, new Account(FAUCET_LAMPORTS, new Uint8Array(0), SYSTEM_PROGRAM, false, 0n));
    for (const p of this.opts.programs) this.addGenesisProgram(p);
    this.slot = 0;
    this.txCount = 0;
    this.genesisHash = this.svm.latestBlockhash();
    this.genesisTime = this.blockTime;
    this.pushBlockhash(this.slot, this.genesisHash);
    this.pushSlotHash(this.slot, this.genesisHash);
    this.blocks.push(0, bs58.decode(this.genesisHash), this.blockTime);
    this.lastBlockSlot = 0;
    this.createNodeAccounts();
    this.setClock();
    this.log.info(`genesis: faucet ${bs58.encode(this.faucet.publicKey)}, ${this.opts.programs.length} program(s)`);
  }

  /**
   * The validator's own accounts, as a cluster's genesis creates them for
   * its bootstrap validator: a vote account (node and withdraw authority:
   * the identity) and a stake account delegated to it, active from genesis.
   * The identity has no private key here, so neither can be changed by a
   * transaction; the node records a vote for each slot it completes.
   */
  createNodeAccounts() {
    const identity = bs58.decode(this.identity);
    this.voteAccount = crypto.randomBytes(32);
    this.stakeAccount = crypto.randomBytes(32);
    const rentVote = this.svm.minimumBalanceForRentExemption(BigInt(VOTE_STATE_SIZE));
    this.voteState = {
      node: identity, withdrawer: identity, commission: 100, votes: [], root: null,
      authorizedVoters: [[Math.floor(this.slot / this.slotsPerEpoch), identity]], epochCredits: [],
      lastTimestamp: { slot: 0, timestamp: 0 },
    };
    this.svm.setAccount(this.voteAccount, new Account(rentVote, voteStateBytes(this.voteState), VOTE_PROGRAM, false, U64_MAX));
    const rentStake = this.svm.minimumBalanceForRentExemption(BigInt(STAKE_STATE_SIZE));
    const stake = stakeStateBytes({
      rentExemptReserve: rentStake, staker: identity, withdrawer: identity, voter: this.voteAccount, stake: BOOTSTRAP_STAKE,
      activationEpoch: U64_MAX, deactivationEpoch: U64_MAX,
    });
    this.svm.setAccount(this.stakeAccount, new Account(rentStake + BOOTSTRAP_STAKE, stake, STAKE_PROGRAM, false, U64_MAX));
  }

  /**
   * The node votes for slot, a block it completed: the vote account's state
   * gets the vote (its previous vote becomes the root, earning a credit),
   * as a vote transaction would record it. Lamports are left as they are.
   */
  castVote(slot) {
    const acc = this.voteAccount && this.svm.getAccount(this.voteAccount);
    if (!acc || !Buffer.from(acc.owner()).equals(VOTE_PROGRAM)) return;
    const s = this.voteState;
    const last = s.votes.length ? s.votes[s.votes.length - 1].slot : null;
    if (last !== null && slot <= last) return;
    if (last !== null) {
      s.root = last;
      const epoch = Math.floor(last / this.slotsPerEpoch);
      const prev = s.epochCredits.length ? s.epochCredits[s.epochCredits.length - 1] : null;
      if (prev && prev[0] === epoch) prev[1] += 1;
      else s.epochCredits.push([epoch, (prev ? prev[1] : 0) + 1, prev ? prev[1] : 0]);
    }
    s.votes = [{ slot, confirmationCount: 1, latency: 1 }];
    s.lastTimestamp = { slot, timestamp: this.blockTime };
    this.svm.setAccount(this.voteAccount, new Account(acc.lamports(), voteStateBytes(s), VOTE_PROGRAM, false, acc.rentEpoch()));
  }

  /**
   * Installs a program owned by the upgradeable loader, like
   * solana-test-validator: authority null means not upgradeable.
   */
  addGenesisProgram({ id, path: file, authority }) {
    let elf;
    try {
      elf = fs.readFileSync(file);
    } catch (e) {
      throw new Error(`program ${bs58.encode(id)}: cannot read ${file}: ${e.message}`);
    }
    if (elf.length < 4 || elf.readUInt32BE(0) !== 0x7f454c46) {
      throw new Error(`program ${bs58.encode(id)}: ${file} is not an ELF file`);
    }
    // addProgram verifies the ELF and loads it into the program cache;
    // then the accounts are rewritten to carry the requested authority.
    try {
      this.svm.addProgram(id, elf);
    } catch (e) {
      throw new Error(`program ${bs58.encode(id)}: ${file} does not load: ${e.message}`);
    }
    const [programData] = findProgramAddress([id], UPGRADEABLE_LOADER);
    // UpgradeableLoaderState::ProgramData { slot, upgrade_authority_address }.
    const meta = Buffer.alloc(45);
    meta.writeUInt32LE(3, 0);
    meta.writeBigUInt64LE(0n, 4);
    if (authority) {
      meta[12] = 1;
      authority.copy(meta, 13);
    }
    const pdData = Buffer.concat([meta, elf]);
    this.svm.setAccount(programData, new Account(this.svm.minimumBalanceForRentExemption(BigInt(pdData.length)), pdData, UPGRADEABLE_LOADER, false, 0n));
    // UpgradeableLoaderState::Program { programdata_address }.
    const progData = Buffer.alloc(36);
    progData.writeUInt32LE(2, 0);
    programData.copy(progData, 4);
    this.svm.setAccount(id, new Account(this.svm.minimumBalanceForRentExemption(36n), progData, UPGRADEABLE_LOADER, true, 0n));
  }

  pushBlockhash(slot, hash) {
    this.window.push({ slot, hash });
    this.blockhashSlot.set(hash, slot);
    while (this.window.length > BLOCKHASH_VALID_SLOTS + 1) {
      this.blockhashSlot.delete(this.window.shift().hash);
    }
  }

  /**
   * Records the bank hash of slot, a slot being produced: its blockhash
   * hashed with 32 random bytes drawn now. On a cluster a slot's bank hash
   * (what SlotHashes holds) commits to everything the slot processed, so
   * nobody knows it before the slot exists; litesvm's blockhashes follow
   * from each other (anyone can compute the next one), so they cannot
   * stand in for it. Kept in the SlotHashes sysvar, and so in snapshots.
   */
  pushSlotHash(slot, blockhash) {
    const hash = crypto.createHash('sha256').update(bs58.decode(blockhash)).update(crypto.randomBytes(32)).digest();
    this.slotHashes.unshift({ slot, hash: bs58.encode(hash) });
    if (this.slotHashes.length > SLOT_HASHES_MAX) this.slotHashes.length = SLOT_HASHES_MAX;
  }

  // A snapshot from before the SlotHistory sysvar was kept: it is rebuilt
  // from the blocks kept (older slots read as skipped).
  rebuildSlotHistory() {
    const history = SlotHistory.default();
    for (let i = 0; i < this.blocks.length; i++) history.add(BigInt(this.blocks.slotAt(i)));
    history.add(BigInt(this.slot));
    this.svm.setSlotHistory(history);
  }

  setClock() {
    const c = this.svm.getClock();
    const epoch = BigInt(Math.floor(this.slot / this.slotsPerEpoch));
    if (c.epoch !== epoch) c.epochStartTimestamp = BigInt(this.blockTime);
    c.slot = BigInt(this.slot);
    c.epoch = epoch;
    c.leaderScheduleEpoch = epoch + 1n;
    c.unixTimestamp = BigInt(this.blockTime); // the block's time, as blockTime reports it
    this.svm.setClock(c);
    // SlotHashes, newest first: programs such as the address lookup table
    // program accept only a recent slot found there. It includes the slot in
    // progress (Agave's starts at its parent): getSlot reports that slot at
    // every commitment, and clients create lookup tables with it.
    this.svm.setSlotHashes(this.slotHashes.map((e) => ({ slot: BigInt(e.slot), hash: e.hash })));
  }

  get latest() {
    return this.window[this.window.length - 1];
  }

  /** Slot up to which blockhash (base58) is valid, or null if unknown/expired. */
  lastValidSlot(hash) {
    const s = this.blockhashSlot.get(hash);
    return s === undefined ? null : s + BLOCKHASH_VALID_SLOTS;
  }

  /** Starts the slot timer, performance samples and periodic snapshots. */
  start() {
    this.slotStarted = performance.now();
    this.slotBase = this.slot;
    this.slotTimer = setInterval(() => this.tick(), this.opts.slotMs);
    this.perfLast = { slot: this.slot, txCount: this.txCount };
    this.perfTimer = setInterval(() => this.samplePerformance(), (this.opts.perfSampleSecs ?? 60) * 1000);
    if (this.stateFile) {
      this.snapshotTimer = setInterval(() => this.maybeSnapshot(), this.opts.snapshotMs);
    }
  }

  // Advances to the slot wall time says we are in, so that a stalled event
  // loop does not make blockhashes live longer than ~150 slot durations.
  tick() {
    const target = this.slotBase + Math.floor((performance.now() - this.slotStarted) / this.opts.slotMs);
    if (target > this.slot) this.advanceTo(target);
  }

  /**
   * Completes the current block and produces blocks up to slot target. Slots
   * older than the blockhash window (after a long stall) get no block: they
   * are skipped, as a leader that missed its slots skips them.
   */
  advanceTo(target) {
    this.finishBlock(this.slot);
    const skipTo = target - BLOCKHASH_VALID_SLOTS - 1;
    if (skipTo > this.slot) this.slot = skipTo;
    this.blockTime = Math.floor(Date.now() / 1000);
    let dropped = false;
    // The SlotHistory sysvar marks each slot that has a block, as a bank
    // adds its own slot when it starts (getBlockProduction reads it).
    const history = this.svm.getSlotHistory();
    while (this.slot < target) {
      this.slot++;
      this.svm.expireBlockhash();
      const hash = this.svm.latestBlockhash();
      this.pushBlockhash(this.slot, hash);
      this.pushSlotHash(this.slot, hash);
      history.add(BigInt(this.slot));
      dropped = this.blocks.push(this.slot, bs58.decode(hash), this.blockTime) || dropped;
      this.emit('slotUpdate', { type: 'createdBank', slot: this.slot, parent: this.lastBlockSlot ?? this.slot - 1, timestamp: Date.now() });
      this.lastBlockSlot = this.slot;
      if (this.slot < target) this.finishBlock(this.slot);
    }
    this.svm.setSlotHistory(history);
    this.sealed = false;
    if (dropped) this.prune();
    if (this.blocks.length > 1) this.castVote(this.blocks.slotAt(this.blocks.length - 2));
    this.setClock();
    this.emit('slot', this.slot);
  }

  // The node completed the block of slot: slotsUpdates notifications.
  finishBlock(slot) {
    if (this.lastBlockSlot !== slot) return;
    const recs = this.bySlot.get(slot) ?? [];
    const failed = recs.filter((r) => r.err).length;
    const timestamp = Date.now();
    this.emit('slotUpdate', { type: 'completed', slot, timestamp });
    this.emit('slotUpdate', {
      type: 'frozen', slot, timestamp,
      stats: {
        numTransactionEntries: recs.length, numSuccessfulTransactions: recs.length - failed,
        numFailedTransactions: failed, maxTransactionsPerEntry: recs.length ? 1 : 0,
      },
    });
    this.emit('slotUpdate', { type: 'optimisticConfirmation', slot, timestamp });
    this.emit('slotUpdate', { type: 'root', slot, timestamp });
  }

  /**
   * Marks the current slot's block as reported complete (getBlock or
   * getBlocks returned it): the next transaction starts a new slot, so a
   * block never changes once a client has seen it.
   */
  seal() {
    this.sealed = true;
  }

  // Every --perf-sample-secs: transactions and slots since the last sample.
  samplePerformance() {
    const period = this.opts.perfSampleSecs ?? 60;
    this.perfSamples.push({
      slot: this.slot, numTransactions: this.txCount - this.perfLast.txCount, numSlots: this.slot - this.perfLast.slot,
      samplePeriodSecs: period,
    });
    if (this.perfSamples.length > PERF_SAMPLES_LIMIT) this.perfSamples.shift();
    this.perfLast = { slot: this.slot, txCount: this.txCount };
  }

  // ---- blocks ----

  /** The block of slot: {slot, blockhash, time, parent: {slot, hash}|null, transactions}, or null. */
  block(slot) {
    const i = this.blocks.find(slot);
    if (i < 0) return null;
    return {
      slot, blockhash: this.blocks.hashAt(i), time: this.blocks.timeAt(i), parent: this.blocks.parentOf(i),
      transactions: this.bySlot.get(slot) ?? [],
    };
  }

  /** The slots with blocks in [start, end], ascending, at most limit of them. */
  blockSlots(start, end, limit = Infinity) {
    const out = [];
    for (let i = this.blocks.lowerBound(start); i < this.blocks.length && out.length < limit; i++) {
      const s = this.blocks.slotAt(i);
      if (s > end) break;
      out.push(s);
    }
    return out;
  }

  /** The first slot whose block is kept. */
  get firstAvailableBlock() {
    return this.blocks.firstSlot ?? this.slot;
  }

  // ---- supply, stake ----

  /**
   * Lamports on all accounts: the sum over every owner the server has seen
   * (those litesvm and genesis create accounts for, and the owner of every
   * account a transaction wrote), computed again after each transaction.
   * Transactions neither create nor destroy lamports except the fees the
   * runtime burns, so this is the whole supply.
   */
  totalSupply() {
    if (this.supplyCache && this.supplyCache.seq === this.seq) return this.supplyCache.total;
    let total = 0n;
    for (const o of this.owners) {
      for (const item of this.svm.getProgramAccounts(Buffer.from(o, 'base64'))) total += item.account().lamports();
    }
    this.supplyCache = { seq: this.seq, total };
    return total;
  }

  /**
   * The n accounts with the most lamports, largest first; equal balances by
   * address, highest first (Agave's order). Zero-lamport accounts do not
   * exist. Scans the accounts of every owner seen, as totalSupply does.
   */
  largestAccounts(n) {
    const top = []; // {lamports, address}, largest first
    const below = (a, b) => a.lamports < b.lamports || (a.lamports === b.lamports && Buffer.compare(a.address, b.address) < 0);
    for (const o of this.owners) {
      for (const item of this.svm.getProgramAccounts(Buffer.from(o, 'base64'))) {
        const e = { lamports: item.account().lamports(), address: Buffer.from(item.address) };
        if (e.lamports === 0n || (top.length === n && !below(top[n - 1], e))) continue;
        let i = top.length;
        while (i > 0 && below(top[i - 1], e)) i--;
        top.splice(i, 0, e);
        if (top.length > n) top.pop();
      }
    }
    return top;
  }

  /**
   * The stake program's minimum delegation, asked of the program itself
   * (its GetMinimumDelegation instruction, simulated): what a delegation
   * transaction would be held to.
   */
  stakeMinimumDelegation() {
    if (this.stakeMinCache && this.stakeMinCache.seq === this.seq) return this.stakeMinCache.value;
    const data = Buffer.alloc(4);
    data.writeUInt32LE(13, 0); // StakeInstruction::GetMinimumDelegation
    const msg = Buffer.concat([
      Buffer.from([1, 0, 1]), shortVec(2), this.faucet.publicKey, STAKE_PROGRAM, bs58.decode(this.latest.hash),
      shortVec(1), Buffer.from([1]), shortVec(0), shortVec(data.length), data,
    ]);
    const raw = Buffer.concat([shortVec(1), crypto.sign(null, msg, this.faucet.privateKey), msg]);
    const sim = this.simulate(raw, false, { sigVerify: false });
    const rd = sim.err ? null : sim.meta.returnData();
    if (!rd || rd.data().length < 8) {
      throw new RpcError(-32603, `Internal error: the stake program did not return its minimum delegation (${JSON.stringify(sim.err)})`);
    }
    const value = Buffer.from(rd.data()).readBigUInt64LE(0);
    this.stakeMinCache = { seq: this.seq, value };
    return value;
  }

  async stop() {
    clearInterval(this.slotTimer);
    clearInterval(this.perfTimer);
    clearInterval(this.snapshotTimer);
    if (this.saving) await this.saving;
    if (this.stateFile) this.saveSync();
    if (this.lockFile) fs.rmSync(this.lockFile, { force: true });
  }

  // ---- accounts ----

  getAccount(key) {
    return this.svm.getAccount(key);
  }

  // ---- transactions ----

  /** Account keys a transaction touches, static then loaded, with writability. */
  accountKeys(tx) {
    const msg = tx.message;
    const keys = msg.accountKeys.map((k, i) => ({ key: k, writable: isStaticWritable(msg, i) }));
    if (msg.version === 0) {
      const loaded = loadedAddresses(msg, (a) => {
        const acc = this.svm.getAccount(a);
        return acc ? Buffer.from(acc.data()) : null;
      });
      for (const k of loaded.writable) keys.push({ key: k, writable: true });
      for (const k of loaded.readonly) keys.push({ key: k, writable: false });
      tx.loaded = loaded;
    }
    return keys;
  }

  snapshotKeys(keys) {
    return keys.map(({ key, writable }) => {
      if (!writable) return { lamports: this.svm.getBalance(key) ?? 0n };
      const acc = this.svm.getAccount(key);
      if (!acc) return { lamports: 0n, account: null };
      return { lamports: acc.lamports(), account: acc };
    });
  }

  tokenBalances(keys, states) {
    const out = [];
    states.forEach((st, i) => {
      const acc = st.account;
      if (!acc) return;
      const owner = Buffer.from(acc.owner());
      if (!isTokenProgram(owner)) return;
      const data = Buffer.from(acc.data());
      if (!isTokenAccountData(data)) return;
      const mint = data.subarray(0, 32);
      const mintAcc = this.svm.getAccount(mint);
      const decimals = mintAcc ? mintAcc.data()[MINT_DECIMALS_OFFSET] ?? 0 : 0;
      out.push({
        accountIndex: i,
        mint: bs58.encode(mint),
        owner: bs58.encode(data.subarray(32, 64)),
        programId: bs58.encode(owner),
        uiTokenAmount: uiTokenAmount(data.readBigUInt64LE(64), decimals),
      });
    });
    return out;
  }

  rawSignature(tx) {
    return bs58.encode(tx.signatures[0]);
  }

  /** Decodes raw bytes or throws -32602 with the reason. */
  decode(raw) {
    try {
      return parseTransaction(raw);
    } catch (e) {
      if (e instanceof WireError) throw invalidParams(`invalid transaction: ${e.message}`);
      throw e;
    }
  }

  /**
   * Executes a transaction. With preflight, a failing transaction is
   * simulated, rejected with -32002 and not recorded; without, it lands as
   * failed (fee charged) if the runtime includes it, else it is dropped.
   * Returns the signature.
   */
  sendTransaction(raw, { skipPreflight = false } = {}) {
    const tx = this.decode(raw);
    const signature = this.rawSignature(tx);
    const preflight = (err, logs = [], unitsConsumed = 0n) => new RpcError(SEND_TRANSACTION_PREFLIGHT_FAILURE,
      `Transaction simulation failed: ${txErrorMessage(err)}`,
      { accounts: null, err, innerInstructions: null, logs, replacementBlockhash: null, returnData: null, unitsConsumed });

    if (this.records.has(signature)) {
      if (skipPreflight) return signature;
      throw preflight('AlreadyProcessed');
    }
    // A client has seen the current block as complete: start the next one.
    if (this.sealed) this.advanceTo(this.slot + 1);
    const blockhash = bs58.encode(tx.message.recentBlockhash);
    if (!this.blockhashSlot.has(blockhash)) {
      if (skipPreflight) {
        this.log.debug(`tx ${signature} dropped: blockhash ${blockhash} not found`);
        return signature;
      }
      throw preflight('BlockhashNotFound');
    }
    const versioned = tx.message.version !== 'legacy';
    if (!skipPreflight) {
      const sim = versioned ? this.svm.simulateVersionedTransaction(raw) : this.svm.simulateLegacyTransaction(raw);
      if (sim instanceof FailedTransactionMetadata) {
        const err = txErrorJSON(sim.err());
        if (err === 'SignatureFailure') throw sigFailure();
        const meta = sim.meta();
        throw preflight(err, meta.logs(), meta.computeUnitsConsumed());
      }
    }
    const keys = this.accountKeys(tx);
    const pre = this.snapshotKeys(keys);
    const res = versioned ? this.svm.sendVersionedTransaction(raw) : this.svm.sendLegacyTransaction(raw);
    const failed = res instanceof FailedTransactionMetadata;
    const payerAfter = this.svm.getBalance(keys[0].key) ?? 0n;
    if (failed && payerAfter === pre[0].lamports) {
      // Not included (e.g. fee payer cannot pay): nothing changed, no record.
      const err = txErrorJSON(res.err());
      if (err === 'SignatureFailure') throw sigFailure();
      this.log.debug(`tx ${signature} dropped: ${txErrorMessage(err)}`);
      return signature;
    }
    const post = this.snapshotKeys(keys);
    const meta = failed ? res.meta() : res;
    this.record(tx, signature, keys, pre, post, meta, failed ? txErrorJSON(res.err()) : null);
    return signature;
  }

  record(tx, signature, keys, pre, post, meta, err) {
    const innerInstructions = [];
    meta.innerInstructions().forEach((list, index) => {
      if (!list.length) return;
      innerInstructions.push({
        index,
        instructions: list.map((inner) => {
          const ci = inner.instruction();
          return {
            programIdIndex: ci.programIdIndex(),
            accounts: Array.from(ci.accounts()),
            data: bs58.encode(ci.data()),
            stackHeight: inner.stackHeight(),
          };
        }),
      });
    });
    const rd = meta.returnData();
    const rdData = rd.data();
    const rec = {
      seq: ++this.seq,
      signature,
      slot: this.slot,
      blockTime: this.blockTime,
      raw: tx.raw,
      tx,
      keys: keys.map((k) => k.key),
      writable: keys.filter((k) => k.writable).map((k) => k.key),
      price: computeUnitPrice(tx.message),
      err,
      fee: messageFee(tx.message),
      preBalances: pre.map((s) => s.lamports),
      postBalances: post.map((s) => s.lamports),
      preTokenBalances: this.tokenBalances(keys, pre),
      postTokenBalances: this.tokenBalances(keys, post),
      logs: meta.logs(),
      innerInstructions,
      computeUnitsConsumed: meta.computeUnitsConsumed(),
      returnData: rdData.length ? { programId: bs58.encode(rd.programId()), data: [Buffer.from(rdData).toString('base64'), 'base64'] } : null,
    };
    this.addRecord(rec);
    this.txCount++;
    this.dirty = true;
    this.log.debug(`tx ${signature} slot ${rec.slot} ${err ? `failed: ${txErrorMessage(err)}` : 'ok'}`);
    const changed = [];
    keys.forEach((k, i) => {
      if (!k.writable) return;
      changed.push({ key: k.key, account: post[i].account });
      if (post[i].account) this.owners.add(addressKey(post[i].account.owner()));
    });
    this.emit('transaction', rec, changed);
  }

  /**
   * getRecentPrioritizationFees: for each of the last 150 slots, the lowest
   * compute-unit price of its transactions, raised to the lowest price among
   * those that write each given account (as Agave's fee cache answers:
   * what it took to land a transaction locking all of them); 0 for a slot
   * without transactions.
   */
  recentPrioritizationFees(accounts) {
    const first = Math.max(0, this.slot - RECENT_FEE_SLOTS + 1);
    const slots = new Map();
    for (let i = this.order.length - 1; i >= 0 && this.order[i].slot >= first; i--) {
      const r = this.order[i];
      let s = slots.get(r.slot);
      if (!s) slots.set(r.slot, (s = { min: r.price, accounts: new Map() }));
      if (r.price < s.min) s.min = r.price;
      for (const k of r.writable) {
        const a = addressKey(k);
        const m = s.accounts.get(a);
        if (m === undefined || r.price < m) s.accounts.set(a, r.price);
      }
    }
    const keys = accounts.map(addressKey);
    const out = [];
    for (let slot = first; slot <= this.slot; slot++) {
      const s = slots.get(slot);
      let fee = s ? s.min : 0n;
      for (const a of keys) {
        const m = s?.accounts.get(a);
        if (m !== undefined && m > fee) fee = m;
      }
      out.push({ slot, prioritizationFee: fee });
    }
    return out;
  }

  addRecord(rec) {
    this.records.set(rec.signature, rec);
    this.order.push(rec);
    let inSlot = this.bySlot.get(rec.slot);
    if (!inSlot) this.bySlot.set(rec.slot, (inSlot = []));
    inSlot.push(rec);
    for (const k of rec.keys) {
      const a = addressKey(k);
      let list = this.byAddress.get(a);
      if (!list) this.byAddress.set(a, (list = []));
      list.push(rec);
    }
    if (this.order.length - this.opts.maxRecords >= 1024) this.prune();
  }

  // Drops the oldest records beyond maxRecords (in batches), but never one
  // whose blockhash could still be valid: those are what rejects duplicates.
  // A block keeps all its transactions or none: the rest of the last slot
  // dropped goes too, and blocks up to it are no longer available. Records
  // older than the first block kept go as well.
  prune() {
    const excess = this.order.length - this.opts.maxRecords;
    let n = 0;
    if (excess >= 1024) {
      const minSlot = this.slot - BLOCKHASH_VALID_SLOTS - 1;
      while (n < excess && this.order[n].slot < minSlot) n++;
      if (n > 0) {
        const last = this.order[n - 1].slot;
        while (n < this.order.length && this.order[n].slot === last) n++;
      }
    }
    const first = this.blocks.firstSlot;
    if (first !== null) while (n < this.order.length && this.order[n].slot < first) n++;
    if (n === 0) return;
    const dropped = this.order.splice(0, n);
    this.blocks.dropBefore(dropped[dropped.length - 1].slot + 1);
    const lastSeq = dropped[dropped.length - 1].seq;
    for (const rec of dropped) {
      this.records.delete(rec.signature);
      this.bySlot.delete(rec.slot);
      for (const k of rec.keys) {
        const a = addressKey(k);
        const list = this.byAddress.get(a);
        if (!list) continue;
        let i = 0;
        while (i < list.length && list[i].seq <= lastSeq) i++;
        if (i === list.length) this.byAddress.delete(a);
        else if (i) list.splice(0, i);
      }
    }
  }

  /** Simulates without changing state; returns {failed, err, meta, info}. */
  simulate(raw, versioned, { sigVerify }) {
    if (!sigVerify) this.svm.setSigverify(false);
    try {
      const res = versioned ? this.svm.simulateVersionedTransaction(raw) : this.svm.simulateLegacyTransaction(raw);
      if (res instanceof FailedTransactionMetadata) return { err: txErrorJSON(res.err()), meta: res.meta(), info: null };
      return { err: null, meta: res.meta(), info: res };
    } finally {
      if (!sigVerify) this.svm.setSigverify(true);
    }
  }

  // ---- faucet ----

  /** Transfers lamports from the faucet; returns the signature. */
  requestAirdrop(to, lamports) {
    if (to.equals(this.faucet.publicKey)) throw invalidParams('Invalid request: cannot airdrop to the faucet');
    const data = Buffer.alloc(12);
    data.writeUInt32LE(2, 0); // SystemInstruction::Transfer
    data.writeBigUInt64LE(lamports, 4);
    // Identical airdrops would produce identical transactions; an older
    // (still valid) blockhash makes each one distinct, as repeated faucet
    // requests are on a real cluster.
    for (let i = this.window.length - 1; i >= 0; i--) {
      const msg = Buffer.concat([
        Buffer.from([1, 0, 1]), shortVec(3), this.faucet.publicKey, to, SYSTEM_PROGRAM,
        bs58.decode(this.window[i].hash), shortVec(1), Buffer.from([2]), shortVec(2), Buffer.from([0, 1]),
        shortVec(data.length), data,
      ]);
      const sig = crypto.sign(null, msg, this.faucet.privateKey);
      if (this.records.has(bs58.encode(sig))) continue;
      return this.sendTransaction(Buffer.concat([shortVec(1), sig, msg]), { skipPreflight: false });
    }
    throw new RpcError(SEND_TRANSACTION_PREFLIGHT_FAILURE, 'airdrop request limit reached for this slot; retry in the next slot');
  }

  // ---- persistence ----

  // What survives a restart: the newest --persist-tx-records transactions
  // and the newest PERSIST_BLOCKS blocks, whole blocks only (a block whose
  // transactions are not all kept is left out, with every block before it).
  snapshotChunks() {
    const keep = Math.min(this.opts.persistRecords, this.order.length);
    let from = Math.max(this.blocks.firstSlot ?? 0, this.slot - PERSIST_BLOCKS + 1);
    if (keep < this.order.length) from = Math.max(from, this.order[this.order.length - keep - 1].slot + 1);
    let start = this.order.length - keep;
    while (start < this.order.length && this.order[start].slot < from) start++;
    const records = this.order.slice(start).map((r) => ({
      slot: r.slot, blockTime: r.blockTime, raw: r.raw.toString('base64'), err: r.err, fee: r.fee,
      preBalances: r.preBalances, postBalances: r.postBalances, preTokenBalances: r.preTokenBalances,
      postTokenBalances: r.postTokenBalances, logs: r.logs, innerInstructions: r.innerInstructions,
      computeUnitsConsumed: r.computeUnitsConsumed, returnData: r.returnData,
    }));
    const meta = Buffer.from(stringifyJSON({
      version: SNAPSHOT_VERSION, slot: this.slot, window: this.window, genesisHash: this.genesisHash,
      identity: this.identity, faucetSeed: this.faucet.seed.toString('base64'), txCount: this.txCount, records,
      genesisTime: this.genesisTime, blocks: this.blocks.serialize(from), perfSamples: this.perfSamples,
      voteAccount: bs58.encode(this.voteAccount), stakeAccount: bs58.encode(this.stakeAccount),
      owners: [...this.owners].map((o) => bs58.encode(Buffer.from(o, 'base64'))),
    }));
    const svmBytes = this.svm.toBytes();
    const header = Buffer.alloc(SNAPSHOT_MAGIC.length + 8);
    SNAPSHOT_MAGIC.copy(header);
    header.writeUInt32LE(meta.length, 8);
    header.writeUInt32LE(svmBytes.length, 12);
    const digest = crypto.createHash('sha256').update(header).update(meta).update(svmBytes).digest();
    this.lastSavedSlot = this.slot;
    this.dirty = false;
    return [header, meta, svmBytes, digest];
  }

  // Snapshots when transactions changed state, and every 25 slots so the
  // blockhash window survives a restart reasonably fresh.
  maybeSnapshot() {
    if (this.saving || (!this.dirty && this.slot - this.lastSavedSlot < 25)) return;
    const started = performance.now();
    const chunks = this.snapshotChunks();
    const slot = this.slot;
    this.saving = writeAtomic(this.stateFile, chunks)
      .then(() => {
        this.snapshotSlot = slot;
        this.log.debug(`snapshot at slot ${slot} (${Math.round(performance.now() - started)} ms)`);
      })
      .catch((e) => {
        this.dirty = true;
        this.log.error(`snapshot failed: ${e.message}`);
      })
      .finally(() => { this.saving = null; });
  }

  saveSync() {
    writeAtomicSync(this.stateFile, this.snapshotChunks());
    this.snapshotSlot = this.slot;
  }

  load() {
    const buf = fs.readFileSync(this.stateFile);
    const bad = (why) => new Error(`ledger snapshot ${this.stateFile} is unusable (${why}); start with --reset to discard it`);
    if (buf.length < SNAPSHOT_MAGIC.length + 8 + 32 || !buf.subarray(0, 8).equals(SNAPSHOT_MAGIC)) throw bad('not a localnet snapshot');
    const metaLen = buf.readUInt32LE(8);
    const svmLen = buf.readUInt32LE(12);
    if (16 + metaLen + svmLen + 32 !== buf.length) throw bad('wrong length');
    const body = buf.subarray(0, 16 + metaLen + svmLen);
    const digest = crypto.createHash('sha256').update(body).digest();
    if (!digest.equals(buf.subarray(body.length))) throw bad('checksum mismatch');
    const meta = JSON.parse(buf.subarray(16, 16 + metaLen).toString());
    if (meta.version !== SNAPSHOT_VERSION) throw bad(`version ${meta.version}`);
    this.svm = LiteSvm.fromBytes(buf.subarray(16 + metaLen));
    this.configure();
    this.slotsPerEpoch = Number(this.svm.getEpochSchedule().slotsPerEpoch);
    this.faucet = keypairFromSeed(Buffer.from(meta.faucetSeed, 'base64'));
    this.identity = meta.identity;
    this.genesisHash = meta.genesisHash;
    this.txCount = meta.txCount;
    for (const w of meta.window) this.pushBlockhash(w.slot, w.hash);
    this.slotHashes = this.svm.getSlotHashes().map((e) => ({ slot: Number(e.slot), hash: e.hash }));
    this.slot = meta.slot;
    this.snapshotSlot = meta.slot;
    this.genesisTime = meta.genesisTime ?? null;
    this.perfSamples = meta.perfSamples ?? [];
    for (const o of meta.owners ?? []) this.owners.add(addressKey(addr(o)));
    if (meta.blocks) {
      this.blocks = BlockLog.deserialize(MAX_BLOCKS, meta.blocks);
    } else {
      // A snapshot from before blocks were kept: history starts after it.
      this.blocks.base = { slot: this.slot, hash: this.latest.hash };
    }
    this.lastBlockSlot = this.blocks.lastSlot ?? this.blocks.base?.slot ?? this.slot;
    if (this.svm.getSlotHistory().nextSlot <= BigInt(this.slot)) this.rebuildSlotHistory();
    let dropped = 0;
    for (const r of meta.records) {
      const tx = parseTransaction(Buffer.from(r.raw, 'base64'));
      if (this.blocks.find(r.slot) < 0) { // its block is not kept: neither is it
        dropped++;
        continue;
      }
      const all = this.accountKeys(tx);
      for (const k of all) {
        const acc = k.writable && this.svm.getAccount(k.key);
        if (acc) this.owners.add(addressKey(acc.owner()));
      }
      this.addRecord({
        ...r, seq: ++this.seq, signature: this.rawSignature(tx), raw: tx.raw, tx, fee: BigInt(r.fee),
        keys: all.map((k) => k.key), writable: all.filter((k) => k.writable).map((k) => k.key), price: computeUnitPrice(tx.message),
        preBalances: r.preBalances.map(BigInt), postBalances: r.postBalances.map(BigInt),
        computeUnitsConsumed: BigInt(r.computeUnitsConsumed),
      });
    }
    if (dropped) this.log.info(`${dropped} transaction record(s) from before the blocks kept were dropped`);
    if (meta.voteAccount) {
      this.voteAccount = addr(meta.voteAccount);
      this.stakeAccount = addr(meta.stakeAccount);
      const acc = this.svm.getAccount(this.voteAccount);
      this.voteState = acc ? parseVoteState(acc.data()) : null;
      if (!this.voteState) throw bad('the node vote account is missing or unreadable');
    } else {
      this.createNodeAccounts(); // a ledger from before the node had them
    }
    // A fresh slot after the restart, like a validator starting from a snapshot.
    this.advanceTo(this.slot + 1);
    this.lastSavedSlot = this.slot;
    this.log.info(`loaded ledger at slot ${meta.slot} with ${meta.records.length - dropped} transaction record(s)`);
  }
}

function sigFailure() {
  return new RpcError(TRANSACTION_SIGNATURE_VERIFICATION_FAILURE, 'Transaction signature verification failure');
}

/** Finds the canonical program derived address for seeds. */
export function findProgramAddress(seeds, programId) {
  for (let bump = 255; bump >= 0; bump--) {
    const h = crypto.createHash('sha256');
    for (const s of seeds) h.update(s);
    h.update(Buffer.from([bump])).update(programId).update('ProgramDerivedAddress');
    const candidate = h.digest();
    if (!isOnCurve(candidate)) return [candidate, bump];
  }
  throw new Error('no program address found');
}

// Ed25519 field arithmetic, for the on-curve test that defines PDAs.
const P = 2n ** 255n - 19n;
const D = P - ((121665n * modPow(121666n, P - 2n)) % P);

function modPow(b, e) {
  let r = 1n;
  b = ((b % P) + P) % P;
  for (; e > 0n; e >>= 1n, b = (b * b) % P) if (e & 1n) r = (r * b) % P;
  return r;
}

// Whether 32 bytes are a compressed Edwards point that decompresses, the
// test curve25519-dalek applies (and so the runtime) when deriving PDAs.
function isOnCurve(bytes) {
  const b = Buffer.from(bytes);
  b[31] &= 0x7f;
  const y = BigInt(`0x${b.reverse().toString('hex')}`);
  if (y >= P) return false;
  const y2 = (y * y) % P;
  const u = (y2 - 1n + P) % P;
  const v = (D * y2 + 1n) % P;
  const v3 = (v * v % P) * v % P;
  const v7 = (v3 * v3 % P) * v % P;
  // Candidate root x = u v^3 (u v^7)^((p-5)/8); a root of u/v exists iff
  // v x^2 is u or -u (the latter fixed by a factor sqrt(-1)).
  const x = (u * v3 % P) * modPow(u * v7, (P - 5n) / 8n) % P;
  const vx2 = (v * x % P) * x % P;
  return vx2 === u || vx2 === (P - u) % P;
}
