// The account layouts of the validator's own accounts: a vote account
// (bincode VoteStateVersions::Current, the V3 vote state) and a stake
// account (StakeStateV2::Stake) delegated to it, as a real genesis creates
// for the bootstrap validator. Parsers read them back for getVoteAccounts.
import * as bs58 from './base58.js';

export const VOTE_PROGRAM = bs58.decodeAddress('Vote111111111111111111111111111111111111111');
export const STAKE_PROGRAM = bs58.decodeAddress('Stake11111111111111111111111111111111111111');

/** VoteState::size_of(): the V3 state at its largest. */
export const VOTE_STATE_SIZE = 3762;
/** StakeStateV2::size_of(). */
export const STAKE_STATE_SIZE = 200;
export const U64_MAX = 2n ** 64n - 1n;
const MAX_LOCKOUT_HISTORY = 31;
const MAX_EPOCH_CREDITS_HISTORY = 64;
const PRIOR_VOTERS_BYTES = 32 * 48 + 8 + 1; // CircBuf<(Pubkey, Epoch, Epoch)>: buf, idx, is_empty

class Writer {
  constructor(size) {
    this.buf = Buffer.alloc(size);
    this.off = 0;
  }
  u8(v) { this.buf[this.off++] = v; }
  u32(v) { this.buf.writeUInt32LE(v, this.off); this.off += 4; }
  u64(v) { this.buf.writeBigUInt64LE(BigInt(v), this.off); this.off += 8; }
  i64(v) { this.buf.writeBigInt64LE(BigInt(v), this.off); this.off += 8; }
  f64(v) { this.buf.writeDoubleLE(v, this.off); this.off += 8; }
  key(k) { Buffer.from(k).copy(this.buf, this.off); this.off += 32; }
  skip(n) { this.off += n; }
}

/**
 * Serializes a vote state: {node, withdrawer, commission, votes: [{slot,
 * confirmationCount, latency}], root (slot or null), authorizedVoters:
 * [[epoch, key]], epochCredits: [[epoch, credits, prevCredits]],
 * lastTimestamp: {slot, timestamp}}. Keys are 32-byte buffers.
 */
export function voteStateBytes(s) {
  const w = new Writer(VOTE_STATE_SIZE);
  w.u32(2); // VoteStateVersions::Current
  w.key(s.node);
  w.key(s.withdrawer);
  w.u8(s.commission);
  const votes = s.votes.slice(-MAX_LOCKOUT_HISTORY);
  w.u64(votes.length);
  for (const v of votes) {
    w.u8(v.latency);
    w.u64(v.slot);
    w.u32(v.confirmationCount);
  }
  if (s.root === null) {
    w.u8(0);
  } else {
    w.u8(1);
    w.u64(s.root);
  }
  w.u64(s.authorizedVoters.length);
  for (const [epoch, key] of s.authorizedVoters) {
    w.u64(epoch);
    w.key(key);
  }
  w.skip(PRIOR_VOTERS_BYTES - 1);
  w.u8(1); // prior voters: empty
  const credits = s.epochCredits.slice(-MAX_EPOCH_CREDITS_HISTORY);
  w.u64(credits.length);
  for (const [epoch, c, prev] of credits) {
    w.u64(epoch);
    w.u64(c);
    w.u64(prev);
  }
  w.u64(s.lastTimestamp.slot);
  w.i64(s.lastTimestamp.timestamp);
  return w.buf;
}

/**
 * Reads a vote account's state (V1_14_11 or V3 layout); null for anything
 * else. Slots and credits come back as Numbers (exact below 2^53).
 */
export function parseVoteState(data) {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.length);
  let off = 0;
  const need = (n) => {
    if (off + n > buf.length) throw new RangeError('short vote state');
  };
  const u8 = () => { need(1); return buf[off++]; };
  const u32 = () => { need(4); const v = buf.readUInt32LE(off); off += 4; return v; };
  const u64 = () => { need(8); const v = buf.readBigUInt64LE(off); off += 8; return v; };
  const key = () => { need(32); const v = buf.subarray(off, off + 32); off += 32; return v; };
  try {
    const version = u32();
    if (version !== 1 && version !== 2) return null;
    const node = key();
    const withdrawer = key();
    const commission = u8();
    const nVotes = Number(u64());
    if (nVotes > 1000) return null;
    const votes = [];
    for (let i = 0; i < nVotes; i++) {
      const latency = version === 2 ? u8() : 0;
      votes.push({ slot: Number(u64()), confirmationCount: u32(), latency });
    }
    const root = u8() === 1 ? Number(u64()) : null;
    const nVoters = Number(u64());
    if (nVoters > 1000) return null;
    const authorizedVoters = [];
    for (let i = 0; i < nVoters; i++) authorizedVoters.push([Number(u64()), key()]);
    need(PRIOR_VOTERS_BYTES);
    off += PRIOR_VOTERS_BYTES;
    const nCredits = Number(u64());
    if (nCredits > 1000) return null;
    const epochCredits = [];
    for (let i = 0; i < nCredits; i++) epochCredits.push([Number(u64()), Number(u64()), Number(u64())]);
    const tsSlot = Number(u64());
    need(8);
    const lastTimestamp = { slot: tsSlot, timestamp: Number(buf.readBigInt64LE(off)) };
    return { node, withdrawer, commission, votes, root, authorizedVoters, epochCredits, lastTimestamp };
  } catch (e) {
    if (e instanceof RangeError) return null;
    throw e;
  }
}

/**
 * Serializes a delegated stake account: {rentExemptReserve, staker,
 * withdrawer, voter, stake, activationEpoch, deactivationEpoch}
 * (activationEpoch U64_MAX: a bootstrap stake, active from genesis).
 */
export function stakeStateBytes(s) {
  const w = new Writer(STAKE_STATE_SIZE);
  w.u32(2); // StakeStateV2::Stake
  w.u64(s.rentExemptReserve);
  w.key(s.staker);
  w.key(s.withdrawer);
  w.i64(0); // lockup: unix_timestamp, epoch, custodian
  w.u64(0);
  w.skip(32);
  w.key(s.voter);
  w.u64(s.stake);
  w.u64(s.activationEpoch);
  w.u64(s.deactivationEpoch);
  w.f64(0.25); // warmup_cooldown_rate (deprecated, the default)
  w.u64(0); // credits_observed
  w.u8(0); // stake flags
  return w.buf;
}

/** A stake account's delegation: {voter, stake, activationEpoch, deactivationEpoch} (BigInt), or null. */
export function parseStakeDelegation(data) {
  if (data.length < 197) return null;
  const buf = Buffer.from(data.buffer, data.byteOffset, data.length);
  if (buf.readUInt32LE(0) !== 2) return null;
  return {
    voter: buf.subarray(124, 156),
    stake: buf.readBigUInt64LE(156),
    activationEpoch: buf.readBigUInt64LE(164),
    deactivationEpoch: buf.readBigUInt64LE(172),
  };
}

/**
 * Whether a delegation counts in epoch: a bootstrap stake always, others
 * from the epoch after their activation until their deactivation epoch
 * ends. Warmup and cooldown rate limits are not modelled.
 */
export function stakeEffective(d, epoch) {
  const e = BigInt(epoch);
  const deactivated = d.deactivationEpoch !== U64_MAX && d.deactivationEpoch < e;
  if (d.activationEpoch === U64_MAX) return !deactivated; // bootstrap
  return d.activationEpoch < e && !deactivated && d.activationEpoch !== d.deactivationEpoch;
}
