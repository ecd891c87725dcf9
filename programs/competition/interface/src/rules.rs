//! Win, weight and payout arithmetic (the program README's "Arithmetic"), the one
//! definition every validator and the program agree on bit for bit. The Go
//! mirror is `clients/competition/rules`; `tests/vectors.rs` writes the shared
//! vectors (`testdata/competition_vectors.json`) that its tests check.
//!
//! Where each part runs:
//! - [`is_win`] and [`wins`] compare `f32` losses in `f64`: validators only
//!   (host and Go). The BPF build rejects floating point, so the program must
//!   not call them (the link keeps only what it references).
//! - [`epsilon_ppm`], [`exp_neg_q32`], [`weights`], [`payouts`],
//!   [`vote_digest`], [`round_seed`] are integer-only and inside the BPF
//!   subset: no `u128` multiply or divide, no heap, no large stack arrays;
//!   [`weights`] and [`vote_digest`] take more than five argument registers
//!   and are `#[inline(always)]`.

use psyche_sdk::hash::hashv;
use psyche_sdk::Address;

/// 1.0 in the Q24 fixed point of [`weights`].
pub const WEIGHT_ONE: u32 = 1 << 24;
/// floor(ln 2 · 2^32).
pub const LN2_Q32: u64 = 2977044471;
/// Parts per million: epsilon and temperature are in ppm.
pub const PPM: u32 = 1_000_000;
/// Entries a round can have (a bitmap of 32 bytes).
pub const MAX_ENTRIES: usize = 256;
/// The domain of [`round_seed`].
pub const ROUND_SEED_DOMAIN: &[u8] = b"psyche-competition-round";

/// The advantage of the older model, decaying linearly with its age
/// (the competition's `epsilon_*` fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epsilon {
    pub start_ppm: u32,
    pub end_ppm: u32,
    pub decay_slots: u64,
}

/// Bit `i` of a 256-bit bitmap: `bitmap[i / 8] >> (i % 8) & 1`; false for
/// `i >= 256`.
pub fn bit(bitmap: &[u8; 32], i: usize) -> bool {
    // Note: i >> 3 < 32 is checked by get; i & 7 < 8.
    bitmap.get(i >> 3).is_some_and(|b| b >> (i & 7) & 1 == 1)
}

/// floor(a·b / c) and whether it left a remainder, for b < c (so the
/// quotient is below a < 2^32), in u64 alone (the BPF build has no u128
/// multiply, divide or variable shift): the 96-bit product from two 32x32
/// halves, its top 64 bits as the first remainder, then 32 steps of binary
/// long division over its low 32 bits.
// Note: a < 2^32 and each half of b < 2^32, so both products fit a u64;
// hi + (lo >> 32) = floor(a·b / 2^32) < c (a·b < c·2^32 as b < c), so it fits
// too and every remainder stays below c; i < 32. A remainder doubled past
// 2^64 (carry) is >= c, and the wrapping subtraction gives the true
// remainder (< c) back.
#[allow(clippy::arithmetic_side_effects)]
fn mul_div_below(a: u32, b: u64, c: u64) -> (u32, bool) {
    let a = u64::from(a);
    let lo = a * (b & 0xffff_ffff);
    let hi = a * (b >> 32);
    let mut rem = hi + (lo >> 32);
    let mut q = 0u32;
    let mut i = 32;
    while i > 0 {
        i -= 1;
        let carry = rem >> 63;
        rem = (rem << 1) | ((lo >> i) & 1);
        q <<= 1;
        if carry == 1 || rem >= c {
            rem = rem.wrapping_sub(c);
            q |= 1;
        }
    }
    (q, rem != 0)
}

/// ε in ppm after `age_slots` of the older model's age: `end` when
/// `decay_slots == 0` or `age_slots >= decay_slots`, else
/// `start - floor((start - end)·age / decay_slots)` in exact integers.
/// (With `end > start`, which competition_create refuses, the same formula
/// in exact integers is `start + ceil((end - start)·age / decay_slots)`.)
pub fn epsilon_ppm(start: u32, end: u32, decay_slots: u64, age_slots: u64) -> u32 {
    if decay_slots == 0 || age_slots >= decay_slots {
        return end;
    }
    if let Some(drop) = start.checked_sub(end) {
        let (q, _) = mul_div_below(drop, age_slots, decay_slots);
        // Note: q <= drop = start - end <= start (age < decay).
        start.saturating_sub(q)
    } else {
        let (q, rem) = mul_div_below(end.wrapping_sub(start), age_slots, decay_slots);
        // Note: q < end - start, so start + q + 1 <= end.
        start.saturating_add(q).saturating_add(u32::from(rem))
    }
}

/// ε of a model committed at `slot`, for a round opened at `open_slot`.
fn epsilon_at(eps: &Epsilon, slot: u64, open_slot: u64) -> u32 {
    epsilon_ppm(eps.start_ppm, eps.end_ppm, eps.decay_slots, open_slot.saturating_sub(slot))
}

/// Whether model a beats model b on one page. The older model (strictly
/// smaller slot) has its loss multiplied by (1 − ε), ε = ε at its age: in
/// f64, `loss_a · (1e6 − ε_a) < loss_b · 1e6` (or the other way round;
/// equal slots: both times 1e6). Both products are exact (a 24-bit
/// significand times an integer below 2^20), so every implementation agrees.
/// NaN never wins nor loses; +Inf (an invalid model) never wins. ε above
/// 1e6 counts as 1e6.
pub fn is_win(loss_a: f32, loss_b: f32, slot_a: u64, slot_b: u64, open_slot: u64, eps: &Epsilon) -> bool {
    let full = f64::from(PPM);
    let (ma, mb) = if slot_a < slot_b {
        (f64::from(PPM.saturating_sub(epsilon_at(eps, slot_a, open_slot))), full)
    } else if slot_b < slot_a {
        (full, f64::from(PPM.saturating_sub(epsilon_at(eps, slot_b, open_slot))))
    } else {
        (full, full)
    };
    f64::from(loss_a) * ma < f64::from(loss_b) * mb
}

/// Wins of each model: `out[a] = Σ_{b≠a} Σ_p is_win(losses[a][p], losses[b][p])`.
/// `losses` is row-major `[model][page]`, `slots[m]` the slot of model m's
/// commit.
///
/// Panics unless `losses.len() == models · pages`, `slots.len() == out.len()
/// == models` and `pages · (models − 1) <= 65535` (so no count can overflow
/// its u16; competition_create bounds pages_per_round for MAX_ENTRIES).
pub fn wins(
    losses: &[f32],
    models: usize,
    pages: usize,
    slots: &[u64],
    open_slot: u64,
    eps: &Epsilon,
    out: &mut [u16],
) {
    assert!(slots.len() == models && out.len() == models, "wins: one slot and one output per model");
    assert!(models.checked_mul(pages) == Some(losses.len()), "wins: losses must be models x pages");
    assert!(
        pages.checked_mul(models.saturating_sub(1)).is_some_and(|n| n <= usize::from(u16::MAX)),
        "wins: pages * (models - 1) must fit a u16"
    );
    if pages == 0 {
        out.fill(0);
        return;
    }
    for (a, (row_a, o)) in losses.chunks_exact(pages).zip(out.iter_mut()).enumerate() {
        let mut n = 0u16;
        for (b, row_b) in losses.chunks_exact(pages).enumerate() {
            if a == b {
                continue;
            }
            for (&la, &lb) in row_a.iter().zip(row_b) {
                if is_win(la, lb, slots[a], slots[b], open_slot, eps) {
                    // Note: at most pages · (models − 1) <= 65535 wins (asserted).
                    n = n.saturating_add(1);
                }
            }
        }
        *o = n;
    }
}

/// floor(2^32 · e^(−z / 2^32)), approximately, by exactly this recipe:
/// k = z / LN2_Q32 (0 when k >= 64), r = z − k·LN2_Q32, the Taylor series of
/// e^(−r) to the 13th term in Q32 (t = (t·r >> 32) / i, alternating signs),
/// shifted right by k. Within 1 + 1e-8 relative units of the exact value;
/// non-increasing in z except for rises of one unit between z values less
/// than 4 apart (the terms' floors). (Terms 12 and 13 are always 0 for
/// r < LN2_Q32; the loop keeps them, as programs/competition/README.md states the recipe.)
pub fn exp_neg_q32(z: u64) -> u64 {
    // Note: LN2_Q32 is a nonzero constant.
    #[allow(clippy::arithmetic_side_effects)]
    let k = z / LN2_Q32;
    if k >= 64 {
        return 0;
    }
    // Note: k·LN2_Q32 <= z (k = floor(z / LN2_Q32)), so r < LN2_Q32 < 2^32.
    #[allow(clippy::arithmetic_side_effects)]
    let r = z - k * LN2_Q32;
    let mut sum = 1u64 << 32;
    let mut t = 1u64 << 32;
    let mut i = 1u64;
    while i <= 13 {
        // Note: t <= 2^32 and r < 2^32, so t·r < 2^64; i >= 1. The terms
        // shrink (r < 1 in Q32) so the alternating partial sums stay within
        // (0, 2^32]: wrapping never wraps.
        #[allow(clippy::arithmetic_side_effects)]
        {
            t = ((t * r) >> 32) / i;
        }
        sum = if i & 1 == 1 { sum.wrapping_sub(t) } else { sum.wrapping_add(t) };
        i = i.wrapping_add(1);
    }
    // Note: k < 64.
    #[allow(clippy::arithmetic_side_effects)]
    {
        sum >> k
    }
}

/// The softmax weights (Q24, sum <= WEIGHT_ONE) of a final round's wins:
/// entry i counts when bit i of `valid` is set, the rest get 0. W = Σ valid
/// wins; s_i = W == 0 ? 0 : floor(wins_i·2^32 / W); x_i = floor(s_i·1e6 /
/// temperature_ppm); e_i = exp_neg_q32(x_max − x_i); w_i = floor(e_i·2^24 /
/// Σ e). No valid entry: all 0. A temperature_ppm of 0 (refused by
/// competition_create) counts as 1.
///
/// Four passes and no array of its own (the BPF stack is 4 KiB): the e_i are
/// kept in `out` between the last two (e_i = 2^32, at the maximum, is kept
/// as 0 and recomputed).
///
/// Panics unless `out.len() == wins.len() <= MAX_ENTRIES`.
#[inline(always)]
pub fn weights(wins: &[u16], valid: &[u8; 32], temperature_ppm: u32, out: &mut [u32]) {
    assert!(out.len() == wins.len() && wins.len() <= MAX_ENTRIES, "weights: one output per entry, at most 256");
    let mut total = 0u64;
    for (i, &w) in wins.iter().enumerate() {
        if bit(valid, i) {
            // Note: at most 256 · 65535 < 2^24.
            total = total.saturating_add(u64::from(w));
        }
    }
    let temperature = u64::from(temperature_ppm.max(1));
    // Note: w << 32 < 2^48, divided by total > 0; the share s <= 2^32, so
    // s · 1e6 < 2^52, divided by temperature >= 1.
    #[allow(clippy::arithmetic_side_effects)]
    let x = |w: u16| -> u64 { (u64::from(w) << 32).checked_div(total).map_or(0, |s| s * u64::from(PPM) / temperature) };
    let mut x_max = None;
    for (i, &w) in wins.iter().enumerate() {
        if bit(valid, i) {
            let xi = x(w);
            x_max = Some(x_max.map_or(xi, |m: u64| m.max(xi)));
        }
    }
    let Some(x_max) = x_max else {
        out.fill(0);
        return;
    };
    // Note: x_max >= every valid x_i.
    #[allow(clippy::arithmetic_side_effects)]
    let e = |w: u16| exp_neg_q32(x_max - x(w));
    let mut sum = 0u64;
    for (i, (&w, o)) in wins.iter().zip(out.iter_mut()).enumerate() {
        if bit(valid, i) {
            let ei = e(w);
            // Note: each e_i <= 2^32 and there are at most 256: sum <= 2^40.
            sum = sum.saturating_add(ei);
            *o = u32::try_from(ei).unwrap_or(0);
        } else {
            *o = 0;
        }
    }
    // sum >= 2^32: the entry at x_max has e = exp_neg_q32(0) = 2^32.
    for (i, (&w, o)) in wins.iter().zip(out.iter_mut()).enumerate() {
        if bit(valid, i) {
            let ei = if *o == 0 { e(w) } else { u64::from(*o) };
            // Note: e_i << 24 <= 2^56 and sum >= 2^32 > 0; the quotient is
            // at most 2^24 (e_i <= sum).
            #[allow(clippy::arithmetic_side_effects)]
            let wi = (ei << 24) / sum;
            *o = u32::try_from(wi).unwrap_or(WEIGHT_ONE);
        }
    }
}

/// floor(paid · w / 2^24), saturating at u64::MAX (only reachable with a
/// weight above WEIGHT_ONE), computed as (paid >> 24)·w + ((paid mod 2^24)·w
/// >> 24) (exact: the low part's product has no bits above 2^24 to carry).
fn share(paid: u64, weight: u32) -> u64 {
    let w = u64::from(weight);
    // Note: (paid mod 2^24) · w < 2^24 · 2^32.
    #[allow(clippy::arithmetic_side_effects)]
    let low = ((paid & 0xff_ffff) * w) >> 24;
    (paid >> 24).saturating_mul(w).saturating_add(low)
}

/// Each entry's payout from `paid`: `out[i] = floor(paid · weights[i] >> 24)`
/// (exact; saturating at u64::MAX for a weight above WEIGHT_ONE). With
/// weights summing to at most WEIGHT_ONE the payouts sum to at most `paid`.
///
/// Panics unless `out.len() == weights.len()`.
pub fn payouts(paid: u64, weights: &[u32], out: &mut [u64]) {
    assert!(out.len() == weights.len(), "payouts: one output per weight");
    for (o, &w) in out.iter_mut().zip(weights) {
        *o = share(paid, w);
    }
}

/// The wins as their little-endian bytes, without a copy: a u16 slice read
/// as bytes is exactly that on a little-endian target (BPF, x86, ARM).
#[cfg(target_endian = "little")]
fn wins_le_bytes(wins: &[u16]) -> &[u8] {
    // SAFETY: the bytes of `wins` are initialized, u8 has alignment 1, and
    // size_of_val is the slice's length in bytes; the borrow keeps it alive.
    unsafe { core::slice::from_raw_parts(wins.as_ptr().cast::<u8>(), core::mem::size_of_val(wins)) }
}

/// [`vote_digest`] fed win by win, for targets where the bytes of a u16
/// are not little-endian (and the test that the two agree).
#[cfg_attr(target_endian = "little", allow(dead_code))]
fn vote_digest_incremental(
    round: u64,
    seed: &[u8; 32],
    table_hash: &[u8; 32],
    wins: &[u16],
    invalid: &[u8; 32],
) -> [u8; 32] {
    let mut h = psyche_sdk::hash::Sha256::new().update(&round.to_le_bytes()).update(seed).update(table_hash);
    for w in wins {
        h = h.update(&w.to_le_bytes());
    }
    h.update(invalid).finalize()
}

/// A validator's vote: sha256(round u64 LE ‖ seed ‖ table_hash ‖ each win
/// u16 LE ‖ invalid).
#[inline(always)]
pub fn vote_digest(round: u64, seed: &[u8; 32], table_hash: &[u8; 32], wins: &[u16], invalid: &[u8; 32]) -> [u8; 32] {
    #[cfg(target_endian = "little")]
    {
        hashv(&[&round.to_le_bytes(), seed, table_hash, wins_le_bytes(wins), invalid])
    }
    #[cfg(not(target_endian = "little"))]
    {
        vote_digest_incremental(round, seed, table_hash, wins, invalid)
    }
}

/// A round's seed (round_tick): sha256("psyche-competition-round" ‖
/// competition ‖ number u64 LE ‖ slot u64 LE ‖ slot_hash), slot and
/// slot_hash from the SlotHashes entry.
pub fn round_seed(competition: &Address, number: u64, slot: u64, slot_hash: &[u8; 32]) -> [u8; 32] {
    hashv(&[ROUND_SEED_DOMAIN, competition.as_ref(), &number.to_le_bytes(), &slot.to_le_bytes(), slot_hash])
}

#[cfg(test)]
// Parallel arrays read clearer by index.
#[allow(clippy::needless_range_loop)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// A small deterministic generator (splitmix64) for the sweeps.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn eps(start: u32, end: u32, decay: u64) -> Epsilon {
        Epsilon { start_ppm: start, end_ppm: end, decay_slots: decay }
    }

    /// programs/competition/README.md's formula with a u128 intermediate (host only).
    fn epsilon_reference(start: u32, end: u32, decay: u64, age: u64) -> u32 {
        if decay == 0 || age >= decay {
            return end;
        }
        let (s, e) = (i128::from(start), i128::from(end));
        let num = (s - e) * i128::from(age);
        let q = num.div_euclid(i128::from(decay)); // floor, negative too
        u32::try_from(s - q).unwrap()
    }

    #[test]
    fn epsilon_decay_endpoints_and_floor() {
        assert_eq!(epsilon_ppm(10_000, 2_000, 1000, 0), 10_000);
        assert_eq!(epsilon_ppm(10_000, 2_000, 1000, 999), 2_008);
        assert_eq!(epsilon_ppm(10_000, 2_000, 1000, 1000), 2_000);
        assert_eq!(epsilon_ppm(10_000, 2_000, 1000, u64::MAX), 2_000);
        assert_eq!(epsilon_ppm(10_000, 2_000, 0, 0), 2_000);
        // floor of the drop: 10000 - floor(10000 / 3) = 6667.
        assert_eq!(epsilon_ppm(10_000, 0, 3, 1), 6_667);
        assert_eq!(epsilon_ppm(10_000, 0, 3, 2), 3_334);
        // Constant when start == end.
        assert_eq!(epsilon_ppm(5, 5, 100, 50), 5);
        // The full range: a product of 96 bits.
        // (2^32 - 1) - floor((2^32 - 1)(2^64 - 2) / (2^64 - 1)) = 1.
        assert_eq!(epsilon_ppm(u32::MAX, 0, u64::MAX, u64::MAX - 1), 1);
        assert_eq!(epsilon_ppm(u32::MAX, 0, u64::MAX, 1), u32::MAX);
        assert_eq!(epsilon_ppm(u32::MAX, 0, u64::MAX, 1 << 63), epsilon_reference(u32::MAX, 0, u64::MAX, 1 << 63));
        // Rising (refused by the program): start + ceil(...).
        assert_eq!(epsilon_ppm(0, 10_000, 3, 1), 3_334);
        assert_eq!(epsilon_ppm(0, 10_000, 3, 3), 10_000);
    }

    #[test]
    fn epsilon_matches_u128_reference() {
        let mut rng = Rng(1);
        for n in 0..200_000 {
            let start = match n % 3 {
                0 => rng.below(u64::from(PPM) + 1) as u32,
                _ => rng.next() as u32,
            };
            let end = if n % 5 == 0 { rng.next() as u32 } else { rng.below(u64::from(start) + 1) as u32 };
            let decay = match n % 4 {
                0 => rng.below(1000),
                1 => rng.next(),
                _ => rng.next() >> rng.below(64),
            };
            let age = match n % 3 {
                0 => rng.below(decay.saturating_add(2)),
                1 => rng.next() >> rng.below(64),
                _ => decay.saturating_sub(rng.below(3)),
            };
            assert_eq!(
                epsilon_ppm(start, end, decay, age),
                epsilon_reference(start, end, decay, age),
                "{start} {end} {decay} {age}"
            );
        }
    }

    #[test]
    fn epsilon_is_monotone_in_age() {
        let mut prev = u32::MAX;
        for age in 0..=1100 {
            let e = epsilon_ppm(10_000, 1_000, 1000, age);
            assert!(e <= prev && (1_000..=10_000).contains(&e));
            prev = e;
        }
    }

    #[test]
    fn is_win_applies_epsilon_to_the_older_model() {
        let e = eps(10_000, 10_000, 0); // 1% always
                                        // Equal losses: the older (smaller slot) wins, the newer does not.
        assert!(is_win(2.0, 2.0, 5, 6, 100, &e));
        assert!(!is_win(2.0, 2.0, 6, 5, 100, &e));
        // Equal slots: a tie is no win either way.
        assert!(!is_win(2.0, 2.0, 5, 5, 100, &e));
        assert!(is_win(1.5, 2.0, 5, 5, 100, &e) && !is_win(2.0, 1.5, 5, 5, 100, &e));
        // A newer model 1% better exactly: 100 · 0.99e6 vs 99 · 1e6, a tie.
        assert!(!is_win(99.0, 100.0, 9, 5, 100, &e) && !is_win(100.0, 99.0, 5, 9, 100, &e));
        // Just better than 1%: the newer wins.
        let better = f32::from_bits(99.0f32.to_bits() - 1);
        assert!(is_win(better, 100.0, 9, 5, 100, &e) && !is_win(100.0, better, 5, 9, 100, &e));
        // Just worse: the older wins.
        let worse = f32::from_bits(99.0f32.to_bits() + 1);
        assert!(!is_win(worse, 100.0, 9, 5, 100, &e) && is_win(100.0, worse, 5, 9, 100, &e));
        // The age is open_slot - the older slot: 1% decaying to 0 over 100 slots.
        let d = eps(10_000, 0, 100);
        // The newer model 0.5% better wins once ε < 0.5%.
        assert!(!is_win(99.5, 100.0, 60, 50, 50, &d)); // age 0: ε 1%
        assert!(!is_win(99.5, 100.0, 60, 50, 99, &d)); // age 49: ε 0.51%
        assert!(!is_win(99.5, 100.0, 60, 50, 100, &d)); // age 50: ε 0.5%, a tie
        assert!(is_win(99.5, 100.0, 60, 50, 101, &d)); // age 51: ε 0.49%
        assert!(is_win(99.999, 100.0, 60, 50, 150, &d)); // age 100: ε 0
                                                         // An older slot than the round (a slot after open_slot) saturates: age 0.
        assert!(!is_win(99.5, 100.0, 300, 200, 100, &d));
    }

    #[test]
    fn is_win_age_fifty_is_a_tie_break_by_precision() {
        // At age 50 ε = 5000 ppm: 100 · 995000 == 99.5 · 1e6 exactly: a tie,
        // so neither wins (99.5 and 100 are exact in f32).
        let d = eps(10_000, 0, 100);
        assert_eq!(epsilon_ppm(10_000, 0, 100, 50), 5_000);
        assert!(!is_win(99.5, 100.0, 60, 50, 100, &d));
        assert!(!is_win(100.0, 99.5, 50, 60, 100, &d));
    }

    #[test]
    fn is_win_nan_and_infinity() {
        let e = eps(10_000, 0, 100);
        for (sa, sb) in [(1, 2), (2, 1), (1, 1)] {
            assert!(!is_win(f32::NAN, 1.0, sa, sb, 10, &e));
            assert!(!is_win(1.0, f32::NAN, sa, sb, 10, &e));
            assert!(!is_win(f32::INFINITY, 1.0, sa, sb, 10, &e));
            assert!(!is_win(f32::INFINITY, f32::INFINITY, sa, sb, 10, &e));
            assert!(is_win(1.0, f32::INFINITY, sa, sb, 10, &e));
            assert!(is_win(f32::MAX, f32::INFINITY, sa, sb, 10, &e));
        }
        // ε = 100%: the older model's loss counts as 0, but Inf · 0 is NaN,
        // so an invalid older model still never wins.
        let all = eps(PPM, PPM, 0);
        assert!(is_win(5.0, 1.0, 1, 2, 10, &all));
        assert!(!is_win(f32::INFINITY, 1.0, 1, 2, 10, &all));
        assert!(!is_win(1.0, f32::INFINITY, 2, 1, 10, &all));
        // ε above 100% counts as 100% (no negative multiplier).
        let over = eps(u32::MAX, u32::MAX, 0);
        assert!(is_win(5.0, 1.0, 1, 2, 10, &over) && !is_win(1.0, 5.0, 2, 1, 10, &over));
        assert!(!is_win(-1.0, -2.0, 1, 2, 10, &over) && is_win(-2.0, 0.0, 2, 1, 10, &over));
    }

    /// is_win needs the f64 products: an f32 computation of the older loss
    /// times (1 - ε) rounds differently.
    #[test]
    fn is_win_needs_full_precision() {
        let mut rng = Rng(7);
        let mut found = 0;
        for _ in 0..100_000 {
            let la = f32::from_bits(0x3f80_0000 + rng.below(0x0100_0000) as u32); // [1, 4)
            let e = rng.below(50_000) as u32 + 1;
            let ep = eps(e, e, 0);
            // The newer model b at the f32 nearest la·(1 - ε).
            let target = f64::from(la) * f64::from(PPM - e) / f64::from(PPM);
            let lb = target as f32;
            let exact = is_win(la, lb, 1, 2, 3, &ep);
            assert_eq!(exact, f64::from(la) * f64::from(PPM - e) < f64::from(lb) * 1e6);
            let naive = la * (1.0 - e as f32 / 1e6) < lb;
            if exact != naive {
                found += 1;
            }
        }
        assert!(found > 100, "only {found} cases where f32 rounding decides");
    }

    #[test]
    fn wins_counts_pages_and_pairs() {
        let e = eps(0, 0, 0);
        // 3 models, 2 pages, equal slots.
        let losses = [1.0, 3.0, 2.0, 2.0, 3.0, 1.0];
        let mut out = [0u16; 3];
        wins(&losses, 3, 2, &[1, 1, 1], 10, &e, &mut out);
        // Page 0: 1 < 2 < 3; page 1: 1 < 2 < 3 in reverse.
        // Model 0: 2 + 0, model 1: 1 + 1, model 2: 0 + 2.
        assert_eq!(out, [2, 2, 2]);
        wins(&losses, 3, 2, &[1, 1, 2], 10, &eps(PPM, PPM, 0), &mut out);
        // ε = 100% for the two older ones: each of them beats model 2.
        assert_eq!(out, [2 + 1, 1 + 2, 0]);
        // One model: nothing to beat; no pages: nothing to win.
        let mut one = [9u16; 1];
        wins(&[1.0, 2.0], 1, 2, &[1], 10, &e, &mut one);
        assert_eq!(one, [0]);
        let mut none = [9u16; 4];
        wins(&[], 4, 0, &[1, 2, 3, 4], 10, &e, &mut none);
        assert_eq!(none, [0; 4]);
    }

    #[test]
    fn wins_of_a_copy_follow_epsilon() {
        // Model 0 the original (slot 100), model 1 its copy (slot 200),
        // model 2 an invalid stranger (slot 150). On page p the copy's loss
        // is the original's times (1 - δ_p), δ_p = 500, 1500, ..., 19500 ppm
        // (never an ε below, so the copy's f32 rounding, < 0.1 ppm, never
        // decides).
        let pages = 20;
        let orig: Vec<f32> = (0..pages).map(|p| 2.0 + p as f32 / 64.0).collect();
        let delta: Vec<u32> = (0..pages).map(|p| p as u32 * 1000 + 500).collect();
        let copy: Vec<f32> =
            orig.iter().zip(&delta).map(|(&l, &d)| (f64::from(l) * f64::from(PPM - d) / 1e6) as f32).collect();
        let stranger = vec![f32::INFINITY; pages];
        let losses: Vec<f32> = [orig.clone(), copy.clone(), stranger].concat();
        let slots = [100, 200, 150];
        let e = eps(10_000, 0, 1000); // 1% decaying to 0 over 1000 slots
        for open in [100u64, 200, 600, 1099, 1100, 5000] {
            let eps_now = epsilon_ppm(10_000, 0, 1000, open - 100);
            let mut out = [0u16; 3];
            wins(&losses, 3, pages, &slots, open, &e, &mut out);
            // Against the original, the copy wins exactly the pages where
            // its loss is below the original's times (1 - ε):
            let copy_beats = (0..pages)
                .filter(|&p| f64::from(copy[p]) * 1e6 < f64::from(orig[p]) * f64::from(PPM - eps_now))
                .count() as u16;
            let orig_beats = (0..pages)
                .filter(|&p| f64::from(orig[p]) * f64::from(PPM - eps_now) < f64::from(copy[p]) * 1e6)
                .count() as u16;
            // Both beat the invalid stranger on every page.
            assert_eq!(out, [orig_beats + pages as u16, copy_beats + pages as u16, 0], "open {open}");
            // δ below ε loses, above wins; the original wins the rest.
            let expect_copy = delta.iter().filter(|&&d| d > eps_now).count() as u16;
            assert_eq!(copy_beats, expect_copy, "open {open}, ε {eps_now}");
            assert_eq!(orig_beats, pages as u16 - expect_copy, "open {open}, ε {eps_now}");
            // A byte-identical copy never wins against the original, which
            // beats it while ε > 0 and ties once ε reaches 0.
            assert!(!is_win(orig[0], orig[0], 200, 100, open, &e));
            assert_eq!(is_win(orig[0], orig[0], 100, 200, open, &e), eps_now > 0);
        }
        // The exact copy everywhere: fewer wins than the original.
        let losses: Vec<f32> = [orig.clone(), orig.clone()].concat();
        let mut out = [0u16; 2];
        wins(&losses, 2, pages, &[100, 200], 150, &e, &mut out);
        assert_eq!(out, [pages as u16, 0]);
    }

    #[test]
    fn wins_pairs_never_both_win() {
        let mut rng = Rng(3);
        let (models, pages) = (9, 13);
        let losses: Vec<f32> = (0..models * pages).map(|_| 1.0 + rng.below(8) as f32 / 4.0).collect();
        let slots: Vec<u64> = (0..models).map(|_| rng.below(5)).collect();
        let e = eps(20_000, 5_000, 10);
        let mut out = vec![0u16; models];
        wins(&losses, models, pages, &slots, 7, &e, &mut out);
        let mut total = 0u32;
        for a in 0..models {
            let mut n = 0u16;
            for b in 0..models {
                for p in 0..pages {
                    let ab = is_win(losses[a * pages + p], losses[b * pages + p], slots[a], slots[b], 7, &e);
                    let ba = is_win(losses[b * pages + p], losses[a * pages + p], slots[b], slots[a], 7, &e);
                    assert!(!(ab && ba));
                    if a != b && ab {
                        n += 1;
                    }
                }
            }
            assert_eq!(out[a], n);
            total += u32::from(n);
        }
        assert!(total <= (models * (models - 1) / 2 * pages) as u32 && total > 0);
    }

    #[test]
    fn wins_at_the_u16_bound() {
        // 256 models, 257 pages: 255 · 257 = 65535 wins for the best.
        let (models, pages) = (256, 257);
        let losses: Vec<f32> = (0..models * pages).map(|i| (i / pages) as f32).collect();
        let slots = vec![0u64; models];
        let mut out = vec![0u16; models];
        wins(&losses, models, pages, &slots, 0, &eps(0, 0, 0), &mut out);
        assert_eq!(out[0], u16::MAX);
        assert_eq!(out[255], 0);
        assert!(out.windows(2).all(|w| w[0] - w[1] == pages as u16));
    }

    #[test]
    #[should_panic(expected = "fit a u16")]
    fn wins_refuses_tables_over_the_bound() {
        let (models, pages) = (2, 65536);
        let losses = vec![1.0f32; models * pages];
        wins(&losses, models, pages, &[0, 0], 0, &eps(0, 0, 0), &mut [0, 0]);
    }

    #[test]
    #[should_panic(expected = "models x pages")]
    fn wins_refuses_a_ragged_table() {
        wins(&[1.0, 2.0, 3.0], 2, 2, &[0, 0], 0, &eps(0, 0, 0), &mut [0, 0]);
    }

    fn exp_exact(z: u64) -> f64 {
        4294967296.0 * (-(z as f64) / 4294967296.0).exp()
    }

    #[test]
    fn exp_values() {
        assert_eq!(exp_neg_q32(0), 1 << 32);
        assert_eq!(exp_neg_q32(LN2_Q32), 1 << 31);
        assert_eq!(exp_neg_q32(2 * LN2_Q32), 1 << 30);
        assert_eq!(exp_neg_q32(31 * LN2_Q32), 2);
        assert_eq!(exp_neg_q32(32 * LN2_Q32), 1);
        assert_eq!(exp_neg_q32(33 * LN2_Q32), 0);
        assert_eq!(exp_neg_q32(64 * LN2_Q32 - 1), 0);
        assert_eq!(exp_neg_q32(64 * LN2_Q32), 0);
        assert_eq!(exp_neg_q32(u64::MAX), 0);
        // e^-1 · 2^32 = 1580030168.7
        assert_eq!(exp_neg_q32(1 << 32), 1580030168);
    }

    #[test]
    fn exp_matches_f64_within_1e_8() {
        let mut worst = 0.0f64;
        let mut check = |z: u64| {
            let exact = exp_exact(z);
            let got = exp_neg_q32(z) as f64;
            let err = (got - exact).abs();
            // One unit for the final floor, 1e-8 relative for the rest.
            assert!(err <= 1.0 + 1e-8 * exact, "z {z}: {got} vs {exact}");
            if exact >= (1u64 << 27) as f64 {
                worst = worst.max(err / exact);
            }
        };
        let mut rng = Rng(11);
        for _ in 0..200_000 {
            check(rng.below(64 * LN2_Q32));
        }
        for z in (0..70 * LN2_Q32).step_by(10_007_263) {
            check(z);
        }
        for k in 0..64 {
            for d in 0..3 {
                check((k * LN2_Q32 + d).saturating_sub(1));
            }
        }
        assert!(worst < 1e-8, "worst relative error {worst}");
    }

    #[test]
    fn exp_is_monotone() {
        // Non-increasing over a sweep with steps of at least 4, and across
        // every band boundary (k changes at multiples of LN2_Q32).
        let mut prev = u64::MAX;
        for z in (0..65 * LN2_Q32).step_by(1_000_003) {
            let e = exp_neg_q32(z);
            assert!(e <= prev, "z {z}");
            prev = e;
        }
        for k in 1..=64 {
            for d in 1..=8 {
                assert!(exp_neg_q32(k * LN2_Q32 - d) >= exp_neg_q32(k * LN2_Q32), "k {k} d {d}");
            }
        }
        // Adjacent z: a rise of at most one unit (the terms' floors), rare.
        let mut rng = Rng(5);
        let mut rises = 0;
        for _ in 0..20_000 {
            let z0 = rng.below(3 * LN2_Q32);
            let mut prev = exp_neg_q32(z0);
            for z in z0 + 1..z0 + 64 {
                let e = exp_neg_q32(z);
                assert!(e <= prev + 1, "z {z}");
                if e > prev {
                    rises += 1;
                }
                prev = e;
            }
        }
        assert!(rises < 20_000 * 63 / 100, "{rises} rises");
    }

    fn bitmap(n: usize, mut valid: impl FnMut(usize) -> bool) -> [u8; 32] {
        let mut b = [0u8; 32];
        for i in (0..n).filter(|&i| valid(i)) {
            b[i / 8] |= 1 << (i % 8);
        }
        b
    }

    #[test]
    fn bit_reads_lsb_first() {
        let mut b = [0u8; 32];
        b[0] = 0b0000_0101;
        b[31] = 0x80;
        assert!(bit(&b, 0) && !bit(&b, 1) && bit(&b, 2) && bit(&b, 255) && !bit(&b, 254));
        assert!(!bit(&[0xff; 32], 256) && !bit(&[0xff; 32], usize::MAX));
    }

    fn weights_of(wins_: &[u16], valid: &[u8; 32], t: u32) -> Vec<u32> {
        let mut out = vec![u32::MAX; wins_.len()];
        weights(wins_, valid, t, &mut out);
        out
    }

    #[test]
    fn weights_edge_cases() {
        let all = [0xffu8; 32];
        // No entries, no valid entries: nothing.
        assert!(weights_of(&[], &all, 1000).is_empty());
        assert_eq!(weights_of(&[5, 7, 0], &[0; 32], 1000), [0, 0, 0]);
        // One valid: all of it.
        assert_eq!(weights_of(&[5, 7, 0], &bitmap(3, |i| i == 1), 1000), [0, WEIGHT_ONE, 0]);
        assert_eq!(weights_of(&[0, 0, 3], &bitmap(3, |i| i == 0), 100_000_000), [WEIGHT_ONE, 0, 0]);
        // All-zero wins: uniform over the valid ones, floor(2^24 / n).
        assert_eq!(weights_of(&[0, 0, 0, 0], &bitmap(4, |i| i != 2), 5000), [5592405, 5592405, 0, 5592405]);
        // Equal wins: uniform.
        assert_eq!(weights_of(&[9, 9], &all, 1000), [1 << 23, 1 << 23]);
        // Invalid entries' wins do not count in W.
        assert_eq!(weights_of(&[4, 4, 60_000], &bitmap(3, |i| i < 2), 1000), [1 << 23, 1 << 23, 0]);
        // A cold temperature: the leader takes everything.
        assert_eq!(weights_of(&[10, 9], &all, 1000), [WEIGHT_ONE, 0]);
        // Temperature 0 counts as 1 ppm.
        assert_eq!(weights_of(&[10, 9], &all, 0), weights_of(&[10, 9], &all, 1));
    }

    #[test]
    fn weights_properties() {
        let mut rng = Rng(13);
        for round in 0..3000 {
            let n = match round % 4 {
                0 => MAX_ENTRIES,
                _ => rng.below(MAX_ENTRIES as u64) as usize + 1,
            };
            let max_win = [1u64, 10, 1000, 65536][round % 4];
            let ws: Vec<u16> = (0..n).map(|_| rng.below(max_win) as u16).collect();
            let valid = bitmap(n, |_| rng.below(5) != 0);
            let t = [1000u32, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000][round % 6];
            let out = weights_of(&ws, &valid, t);
            let count = (0..n).filter(|&i| bit(&valid, i)).count() as u64;
            let sum: u64 = out.iter().map(|&w| u64::from(w)).sum();
            if count == 0 {
                assert_eq!(sum, 0);
                continue;
            }
            assert!(sum <= u64::from(WEIGHT_ONE) && sum >= u64::from(WEIGHT_ONE) - count, "sum {sum}, {count} valid");
            // Zero where invalid; more wins never fewer weight (W < 2^24:
            // far from exp_neg_q32's one-unit rises).
            let total: u64 = (0..n).filter(|&i| bit(&valid, i)).map(|i| u64::from(ws[i])).sum();
            for i in 0..n {
                if !bit(&valid, i) {
                    assert_eq!(out[i], 0);
                }
            }
            let mut by_wins: Vec<(u16, u32)> = (0..n).filter(|&i| bit(&valid, i)).map(|i| (ws[i], out[i])).collect();
            by_wins.sort();
            assert!(by_wins.windows(2).all(|p| p[0].1 <= p[1].1 && (p[0].0 != p[1].0 || p[0].1 == p[1].1)));
            // Close to the f64 softmax of s / T.
            let xs: Vec<f64> = ws
                .iter()
                .map(|&w| if total == 0 { 0.0 } else { f64::from(w) / total as f64 / (f64::from(t) / 1e6) })
                .collect();
            let xm = (0..n).filter(|&i| bit(&valid, i)).map(|i| xs[i]).fold(f64::MIN, f64::max);
            let es: Vec<f64> = (0..n).map(|i| if bit(&valid, i) { (xs[i] - xm).exp() } else { 0.0 }).collect();
            let es_sum: f64 = es.iter().sum();
            for i in 0..n {
                let want = es[i] / es_sum * f64::from(WEIGHT_ONE);
                assert!((f64::from(out[i]) - want).abs() <= 2.0 + want * 1e-6, "entry {i}: {} vs {want}", out[i]);
            }
        }
    }

    #[test]
    fn weights_colder_concentrates() {
        let ws = [100u16, 90, 50, 10, 0];
        let all = [0xffu8; 32];
        let mut prev = 0;
        for t in [100_000_000u32, 10_000_000, 1_000_000, 100_000, 10_000, 1000] {
            let w = weights_of(&ws, &all, t);
            assert!(w[0] >= prev && w[0] > w[1], "t {t}: {w:?}");
            prev = w[0];
        }
        assert_eq!(prev, WEIGHT_ONE);
    }

    #[test]
    #[should_panic(expected = "at most 256")]
    fn weights_refuses_more_than_256() {
        weights_of(&[0; 257], &[0xff; 32], 1000);
    }

    fn payout_reference(paid: u64, w: u32) -> u64 {
        u64::try_from((u128::from(paid) * u128::from(w)) >> 24).unwrap_or(u64::MAX)
    }

    #[test]
    fn payouts_floor_and_sum() {
        let mut out = [0u64; 3];
        payouts(u64::MAX, &[WEIGHT_ONE, 0, 1], &mut out);
        assert_eq!(out, [u64::MAX, 0, payout_reference(u64::MAX, 1)]);
        payouts(100, &[WEIGHT_ONE / 3, WEIGHT_ONE / 3, WEIGHT_ONE / 3 + 1], &mut out);
        assert_eq!(out, [33, 33, 33]);
        payouts(0, &[WEIGHT_ONE, 0, 0], &mut out);
        assert_eq!(out, [0, 0, 0]);
        // Above WEIGHT_ONE (not from weights): saturates.
        payouts(u64::MAX, &[u32::MAX, WEIGHT_ONE + 1, 2], &mut out);
        assert_eq!(out, [u64::MAX, u64::MAX, payout_reference(u64::MAX, 2)]);

        let mut rng = Rng(17);
        for round in 0..2000 {
            let n = rng.below(MAX_ENTRIES as u64) as usize + 1;
            let ws: Vec<u16> = (0..n).map(|_| rng.below(1000) as u16).collect();
            let w = weights_of(&ws, &[0xff; 32], [1000, 1_000_000, 100_000_000][round % 3]);
            let paid = match round % 3 {
                0 => u64::MAX - rng.below(1000),
                1 => rng.next(),
                _ => rng.below(1_000_000),
            };
            let mut out = vec![0u64; n];
            payouts(paid, &w, &mut out);
            let sum: u128 = out.iter().map(|&p| u128::from(p)).sum();
            assert!(sum <= u128::from(paid));
            for i in 0..n {
                assert_eq!(out[i], payout_reference(paid, w[i]));
            }
            // Random weights, any u32.
            let x = rng.next() as u32;
            assert_eq!(share(paid, x), payout_reference(paid, x));
        }
    }

    #[test]
    fn vote_digest_layout() {
        let seed = [1u8; 32];
        let table = [2u8; 32];
        let invalid = [3u8; 32];
        let ws = [0x0102u16, 0xfffe, 0, 7];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        bytes.extend_from_slice(&seed);
        bytes.extend_from_slice(&table);
        bytes.extend_from_slice(&[0x02, 0x01, 0xfe, 0xff, 0, 0, 7, 0]);
        bytes.extend_from_slice(&invalid);
        let want = psyche_sdk::hash::sha256(&bytes);
        assert_eq!(vote_digest(0x1122_3344_5566_7788, &seed, &table, &ws, &invalid), want);
        assert_eq!(vote_digest_incremental(0x1122_3344_5566_7788, &seed, &table, &ws, &invalid), want);
        // Every field counts.
        assert_ne!(vote_digest(1, &seed, &table, &ws, &invalid), want);
        assert_ne!(vote_digest(0x1122_3344_5566_7788, &seed, &table, &[0x0102, 0xfffe, 0, 8], &invalid), want);
        assert_ne!(vote_digest(0x1122_3344_5566_7788, &seed, &table, &ws[..3], &invalid), want);
        // No wins at all.
        assert_eq!(
            vote_digest(0, &seed, &table, &[], &invalid),
            vote_digest_incremental(0, &seed, &table, &[], &invalid)
        );
    }

    #[test]
    fn round_seed_layout() {
        let competition = Address::new_from_array([9u8; 32]);
        let slot_hash = [4u8; 32];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"psyche-competition-round");
        bytes.extend_from_slice(&[9u8; 32]);
        bytes.extend_from_slice(&5u64.to_le_bytes());
        bytes.extend_from_slice(&77u64.to_le_bytes());
        bytes.extend_from_slice(&slot_hash);
        assert_eq!(round_seed(&competition, 5, 77, &slot_hash), psyche_sdk::hash::sha256(&bytes));
        assert_ne!(round_seed(&competition, 6, 77, &slot_hash), round_seed(&competition, 5, 77, &slot_hash));
    }
}
