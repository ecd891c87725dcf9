// The block headers the server produced: for each slot that had a block, its
// blockhash and time, oldest first, in typed arrays (48 bytes a block, no
// object per slot). Slots without a header (skipped while the event loop
// stalled, or before the first one kept) have no block.
import * as bs58 from './base58.js';

const RECORD_BYTES = 48; // slot f64, time f64, hash 32

export class BlockLog {
  /** @param {number} cap - most headers kept; the oldest go first */
  constructor(cap) {
    this.cap = cap;
    this.capacity = Math.min(cap, 1024);
    this.slots = new Float64Array(this.capacity);
    this.times = new Float64Array(this.capacity);
    this.hashes = Buffer.alloc(32 * this.capacity);
    this.head = 0;
    this.length = 0;
    // The block before the first one kept, once older ones are dropped:
    // the parent of the first block.
    this.base = null;
  }

  idx(i) {
    return (this.head + i) % this.capacity;
  }

  grow() {
    const capacity = Math.min(this.cap, this.capacity * 2);
    const slots = new Float64Array(capacity);
    const times = new Float64Array(capacity);
    const hashes = Buffer.alloc(32 * capacity);
    for (let i = 0; i < this.length; i++) {
      const j = this.idx(i);
      slots[i] = this.slots[j];
      times[i] = this.times[j];
      this.hashes.copy(hashes, 32 * i, 32 * j, 32 * j + 32);
    }
    Object.assign(this, { capacity, slots, times, hashes, head: 0 });
  }

  /** Appends the block of slot (above every kept one). Returns whether an old one was dropped. */
  push(slot, hash, time) {
    let dropped = false;
    if (this.length === this.cap) {
      this.shift();
      dropped = true;
    } else if (this.length === this.capacity) {
      this.grow();
    }
    const j = this.idx(this.length);
    this.slots[j] = slot;
    this.times[j] = time;
    hash.copy(this.hashes, 32 * j, 0, 32);
    this.length++;
    return dropped;
  }

  shift() {
    this.base = { slot: this.slotAt(0), hash: this.hashAt(0) };
    this.head = this.idx(1);
    this.length--;
  }

  slotAt(i) { return this.slots[this.idx(i)]; }
  timeAt(i) { return this.times[this.idx(i)]; }
  hashAt(i) {
    const j = this.idx(i);
    return bs58.encode(this.hashes.subarray(32 * j, 32 * j + 32));
  }

  get firstSlot() { return this.length ? this.slotAt(0) : null; }
  get lastSlot() { return this.length ? this.slotAt(this.length - 1) : null; }

  /** Index of the first block at or above slot (length if none). */
  lowerBound(slot) {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.slotAt(mid) < slot) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Index of slot's block, or -1 if it has none. */
  find(slot) {
    const i = this.lowerBound(slot);
    return i < this.length && this.slotAt(i) === slot ? i : -1;
  }

  /** The parent of the block at index i: {slot, hash}, or null if unknown. */
  parentOf(i) {
    if (i > 0) return { slot: this.slotAt(i - 1), hash: this.hashAt(i - 1) };
    return this.base;
  }

  /** Drops the blocks below slot. */
  dropBefore(slot) {
    while (this.length && this.slotAt(0) < slot) this.shift();
  }

  /** The blocks from slot on, for a snapshot: {base, data (base64)}. */
  serialize(fromSlot) {
    const start = this.lowerBound(fromSlot);
    const buf = Buffer.alloc(RECORD_BYTES * (this.length - start));
    for (let i = start; i < this.length; i++) {
      const o = RECORD_BYTES * (i - start);
      const j = this.idx(i);
      buf.writeDoubleLE(this.slots[j], o);
      buf.writeDoubleLE(this.times[j], o + 8);
      this.hashes.copy(buf, o + 16, 32 * j, 32 * j + 32);
    }
    return { base: this.parentOf(start), data: buf.toString('base64') };
  }

  static deserialize(cap, { base, data }) {
    const log = new BlockLog(cap);
    const buf = Buffer.from(data, 'base64');
    if (buf.length % RECORD_BYTES) throw new Error('block headers have a partial record');
    for (let o = 0; o < buf.length; o += RECORD_BYTES) {
      log.push(buf.readDoubleLE(o), buf.subarray(o + 16, o + 48), buf.readDoubleLE(o + 8));
    }
    if (log.base === null) log.base = base ?? null;
    return log;
  }
}
