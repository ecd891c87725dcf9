//! Weight, payout and digest arithmetic (../../README.md, "The arithmetic"): the parts
//! the program runs on chain. Integer only, no u128 multiply or divide and
//! no large stack buffers, so that it builds for upstream BPF and fits the
//! vote instruction's frame.

use psyche_sdk::hash::hashv;
use psyche_sdk::Address;

/// A weight of 1 in Q24.
pub const WEIGHT_ONE: u32 = 1 << 24;
/// floor(ln 2 * 2^32).
pub const LN2_Q32: u64 = 2977044471;

/// floor(2^32 * e^(-z / 2^32)), computed as z = k ln2 + r, e^-r by 13 Taylor
/// terms, then >> k (0 from k >= 64).
// Note: r < LN2_Q32 < 2^32 and t <= 2^32, so t * r < 2^64; i <= 13; the
// partial sums of e^-r (r < ln 2) stay in (0.3, 1] * 2^32: sum - t never
// underflows.
#[allow(clippy::arithmetic_side_effects)]
pub fn exp_neg_q32(z: u64) -> u64 {
    let k = z / LN2_Q32;
    if k >= 64 {
        return 0;
    }
    let r = z - k * LN2_Q32;
    let mut sum: u64 = 1 << 32;
    let mut t: u64 = 1 << 32;
    for i in 1..=13u64 {
        t = (t * r) >> 32;
        t /= i;
        sum = if i % 2 == 1 { sum - t } else { sum + t };
    }
    sum >> k
}

fn bit(bitmap: &[u8; 32], i: usize) -> bool {
    bitmap.get(i / 8).is_some_and(|b| (b >> (i % 8)) & 1 == 1)
}

/// The Q32 score x_i of an entry with `wins` of `total` valid wins:
/// floor(floor((wins << 32) / total) * 1e6 / temperature_ppm).
// Note: wins <= total (a part of the sum) so s <= 2^32 and s * 1e6 < 2^52;
// total and temperature_ppm are above 0 (callers check).
#[allow(clippy::arithmetic_side_effects)]
fn score(wins: u16, total: u64, temperature_ppm: u32) -> u64 {
    let s = (u64::from(wins) << 32) / total;
    s * 1_000_000 / u64::from(temperature_ppm)
}

/// Softmax weights (Q24) of the valid entries' win shares at
/// `temperature_ppm`; invalid entries weigh 0, and all weigh 0 when no entry
/// is valid. `valid` bit i is `valid[i / 8] >> (i % 8) & 1`; out.len() ==
/// wins.len() <= 256.
// Six argument registers (two slices): inlined for the BPF subset.
#[inline(always)]
pub fn weights(wins: &[u16], valid: &[u8; 32], temperature_ppm: u32, out: &mut [u32]) {
    out.fill(0);
    let is_valid = |i: usize| bit(valid, i);
    let total: u64 = wins.iter().enumerate().filter(|&(i, _)| is_valid(i)).map(|(_, &w)| u64::from(w)).sum();
    if !wins.iter().enumerate().any(|(i, _)| is_valid(i)) || temperature_ppm == 0 {
        return;
    }
    let x = |w: u16| if total == 0 { 0 } else { score(w, total, temperature_ppm) };
    let x_max = wins.iter().enumerate().filter(|&(i, _)| is_valid(i)).map(|(_, &w)| x(w)).max().unwrap_or(0);
    // e_i <= 2^32, equal to it only where z_i = 0 (x_i = x_max): out keeps
    // e_i's low 32 bits, and the last pass restores 2^32 there.
    let mut sum = 0u64;
    for (i, (&w, o)) in wins.iter().zip(out.iter_mut()).enumerate() {
        if is_valid(i) {
            let e = exp_neg_q32(x_max.saturating_sub(x(w)));
            sum = sum.saturating_add(e);
            *o = e as u32;
        }
    }
    for (i, (&w, o)) in wins.iter().zip(out.iter_mut()).enumerate() {
        if is_valid(i) {
            let e = if x(w) == x_max { 1u64 << 32 } else { u64::from(*o) };
            // Note: e <= 2^32 so e << 24 <= 2^56; sum >= e_max = 2^32 > 0;
            // the quotient is at most 2^24.
            #[allow(clippy::arithmetic_side_effects)]
            let q = (e << 24) / sum;
            *o = q as u32;
        }
    }
}

/// What each entry earns of `paid`: floor(paid * w_i / 2^24). The sum is at
/// most `paid` when the weights sum to at most WEIGHT_ONE.
pub fn payouts(paid: u64, weights: &[u32], out: &mut [u64]) {
    // paid = hi * 2^24 + lo, so floor(paid * w / 2^24) = hi * w + floor(lo *
    // w / 2^24) exactly (hi * w * 2^24 is a multiple of 2^24), without the
    // u128 multiply BPF lacks. lo * w < 2^56; hi * w < 2^64 for the weights
    // weights() returns (at most 2^24); larger ones saturate.
    let (hi, lo) = (paid >> 24, paid & u64::from(WEIGHT_ONE - 1));
    for (&w, o) in weights.iter().zip(out.iter_mut()) {
        let w = u64::from(w);
        // Note: lo < 2^24 and w < 2^32.
        #[allow(clippy::arithmetic_side_effects)]
        let low = (lo * w) >> 24;
        *o = hi.saturating_mul(w).saturating_add(low);
    }
}

/// sha256(round u64 LE ‖ seed ‖ table_hash ‖ each win u16 LE ‖ invalid).
// Seven argument registers (a slice and the returned array): inlined.
#[inline(always)]
pub fn vote_digest(round: u64, seed: &[u8; 32], table_hash: &[u8; 32], wins: &[u16], invalid: &[u8; 32]) -> [u8; 32] {
    // SAFETY: u16 has no padding and every byte is a valid u8; on a
    // little-endian target (bpfel and the hosts we test on; asserted below)
    // its bytes are its LE encoding.
    let wins_le = unsafe { core::slice::from_raw_parts(wins.as_ptr() as *const u8, core::mem::size_of_val(wins)) };
    hashv(&[&round.to_le_bytes(), seed, table_hash, wins_le, invalid])
}

const _: () = assert!(cfg!(target_endian = "little"), "vote_digest hashes u16s as their in-memory bytes");

/// The round seed: sha256("psyche-competition-round" ‖ competition ‖ number
/// u64 LE ‖ slot u64 LE ‖ slot_hash), from the SlotHashes entry round_tick
/// took.
pub fn round_seed(competition: &Address, number: u64, slot: u64, slot_hash: &[u8; 32]) -> [u8; 32] {
    hashv(&[b"psyche-competition-round", competition.as_ref(), &number.to_le_bytes(), &slot.to_le_bytes(), slot_hash])
}
