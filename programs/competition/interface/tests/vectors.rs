//! Writes the arithmetic test vectors that clients/competition/rules (Go)
//! checks, so the two implementations cannot drift. The test fails when the
//! committed file differs from a fresh computation; `UPDATE_VECTORS=1 cargo
//! test -p psyche-competition-interface --test vectors` rewrites it.
//!
//! f32 losses are written as their u32 bit patterns in hex ("3f800000"), so
//! no JSON float parser can alter them; u64 values as JSON integers (Go's
//! encoding/json reads them into a uint64 exactly).

// Test code: an overflow panics the test (debug build).
#![allow(clippy::arithmetic_side_effects)]

use psyche_competition_interface::rules::{self, Epsilon, LN2_Q32, MAX_ENTRIES, PPM, WEIGHT_ONE};
use psyche_sdk::hash::hashv;
use psyche_sdk::Address;
use std::fmt::Write;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/competition_vectors.json");

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn seed(label: &str, i: u32) -> [u8; 32] {
    hashv(&[label.as_bytes(), &i.to_le_bytes()])
}

fn list<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> String) -> String {
    items.into_iter().map(f).collect::<Vec<_>>().join(", ")
}

fn bits(f: f32) -> String {
    format!("\"{:08x}\"", f.to_bits())
}

fn eps_json(e: &Epsilon) -> String {
    format!("{{\"start_ppm\": {}, \"end_ppm\": {}, \"decay_slots\": {}}}", e.start_ppm, e.end_ppm, e.decay_slots)
}

/// Objects, one per line, inside a named JSON array.
fn section(out: &mut String, name: &str, rows: Vec<String>, last: bool) {
    writeln!(out, "  \"{name}\": [").unwrap();
    let n = rows.len();
    for (i, r) in rows.into_iter().enumerate() {
        writeln!(out, "    {{{r}}}{}", if i + 1 < n { "," } else { "" }).unwrap();
    }
    writeln!(out, "  ]{}", if last { "" } else { "," }).unwrap();
}

/// splitmix64, for the random rows.
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

fn bitmap(n: usize, mut valid: impl FnMut(usize) -> bool) -> [u8; 32] {
    let mut b = [0u8; 32];
    for i in (0..n).filter(|&i| valid(i)) {
        b[i / 8] |= 1 << (i % 8);
    }
    b
}

fn epsilon_rows() -> Vec<String> {
    let mut cases: Vec<(u32, u32, u64, u64)> = vec![
        (10_000, 2_000, 1000, 0),
        (10_000, 2_000, 1000, 1),
        (10_000, 2_000, 1000, 500),
        (10_000, 2_000, 1000, 999),
        (10_000, 2_000, 1000, 1000),
        (10_000, 2_000, 1000, u64::MAX),
        (10_000, 2_000, 0, 0),
        (10_000, 2_000, 0, 5),
        (10_000, 0, 3, 1),
        (10_000, 0, 3, 2),
        (5, 5, 100, 50),
        (0, 0, 100, 50),
        (PPM, 0, 7, 3),
        (PPM, PPM, 0, 0),
        (u32::MAX, 0, u64::MAX, 1),
        (u32::MAX, 0, u64::MAX, 1 << 63),
        (u32::MAX, 0, u64::MAX, u64::MAX - 1),
        (u32::MAX, 1, u64::MAX - 1, u64::MAX - 2),
        (1_000_000, 999_999, 1 << 40, (1 << 40) - 1),
        // Rising (refused by competition_create): start + ceil(...).
        (0, 10_000, 3, 1),
        (0, 10_000, 3, 3),
        (7, u32::MAX, u64::MAX, 1),
        (1, 2, 1000, 999),
    ];
    let mut rng = Rng(1);
    for n in 0..24 {
        let start = rng.below(u64::from(PPM) + 1) as u32;
        let end = rng.below(u64::from(start) + 1) as u32;
        let decay = if n % 2 == 0 { rng.below(1 << 20) + 1 } else { rng.next() };
        let age = rng.below(decay);
        cases.push((start, end, decay, age));
    }
    cases
        .into_iter()
        .map(|(s, e, d, a)| {
            format!(
                "\"start\": {s}, \"end\": {e}, \"decay_slots\": {d}, \"age_slots\": {a}, \"epsilon\": {}",
                rules::epsilon_ppm(s, e, d, a)
            )
        })
        .collect()
}

fn is_win_rows() -> Vec<String> {
    let one = Epsilon { start_ppm: 10_000, end_ppm: 10_000, decay_slots: 0 };
    let decay = Epsilon { start_ppm: 10_000, end_ppm: 0, decay_slots: 100 };
    let none = Epsilon { start_ppm: 0, end_ppm: 0, decay_slots: 0 };
    let all = Epsilon { start_ppm: PPM, end_ppm: PPM, decay_slots: 0 };
    let over = Epsilon { start_ppm: u32::MAX, end_ppm: u32::MAX, decay_slots: 0 };
    let up = |f: f32| f32::from_bits(f.to_bits() + 1);
    let down = |f: f32| f32::from_bits(f.to_bits() - 1);
    let nan = f32::NAN;
    let neg_nan = f32::from_bits(0xffc0_0000);
    let snan = f32::from_bits(0x7f80_0001);
    let inf = f32::INFINITY;
    let tiny = f32::from_bits(1); // the smallest subnormal
    let mut cases: Vec<(f32, f32, u64, u64, u64, Epsilon)> = vec![
        // Equal losses: the older wins, the newer and equal slots do not.
        (2.0, 2.0, 5, 6, 100, one),
        (2.0, 2.0, 6, 5, 100, one),
        (2.0, 2.0, 5, 5, 100, one),
        (1.5, 2.0, 5, 5, 100, one),
        (2.0, 1.5, 5, 5, 100, one),
        // The exact boundary la == lb: 99 · 1e6 == 100 · 990000.
        (99.0, 100.0, 9, 5, 100, one),
        (100.0, 99.0, 5, 9, 100, one),
        (down(99.0), 100.0, 9, 5, 100, one),
        (100.0, down(99.0), 5, 9, 100, one),
        (up(99.0), 100.0, 9, 5, 100, one),
        (100.0, up(99.0), 5, 9, 100, one),
        // ε by the older model's age (open_slot − its slot), saturating.
        (99.5, 100.0, 60, 50, 50, decay),
        (99.5, 100.0, 60, 50, 99, decay),
        (99.5, 100.0, 60, 50, 100, decay),
        (100.0, 99.5, 50, 60, 100, decay),
        (99.5, 100.0, 60, 50, 101, decay),
        (99.999, 100.0, 60, 50, 150, decay),
        (99.5, 100.0, 300, 200, 100, decay),
        (100.0, 100.0, 50, 60, 150, decay),
        (100.0, 100.0, 50, 60, 149, decay),
        // No ε at all: plain comparison.
        (1.0, 2.0, 1, 2, 3, none),
        (2.0, 1.0, 1, 2, 3, none),
        (2.0, 2.0, 1, 2, 3, none),
        // NaN never wins nor loses.
        (nan, 1.0, 1, 2, 10, decay),
        (1.0, nan, 1, 2, 10, decay),
        (nan, 1.0, 2, 1, 10, decay),
        (1.0, nan, 2, 1, 10, decay),
        (neg_nan, 1.0, 1, 1, 10, decay),
        (1.0, snan, 1, 1, 10, decay),
        (nan, nan, 1, 1, 10, decay),
        // +Inf (an invalid model) never wins; everything finite beats it.
        (inf, 1.0, 1, 2, 10, decay),
        (inf, 1.0, 2, 1, 10, decay),
        (1.0, inf, 1, 2, 10, decay),
        (1.0, inf, 2, 1, 10, decay),
        (f32::MAX, inf, 1, 1, 10, decay),
        (inf, inf, 1, 2, 10, decay),
        (inf, inf, 1, 1, 10, decay),
        (f32::NEG_INFINITY, 1.0, 1, 1, 10, decay),
        (f32::NEG_INFINITY, 1.0, 1, 2, 10, all),
        // ε = 100%: the older loss counts as 0, but Inf · 0 is NaN.
        (5.0, 1.0, 1, 2, 10, all),
        (1.0, 5.0, 2, 1, 10, all),
        (inf, 1.0, 1, 2, 10, all),
        (1.0, inf, 2, 1, 10, all),
        (0.0, 0.0, 1, 2, 10, all),
        // ε above 100% counts as 100%.
        (5.0, 1.0, 1, 2, 10, over),
        (-1.0, -2.0, 1, 2, 10, over),
        (-2.0, 0.0, 2, 1, 10, over),
        // Zeros, negatives, extremes.
        (0.0, -0.0, 1, 1, 10, one),
        (-0.0, 0.0, 1, 2, 10, one),
        (-1.0, -1.0, 1, 2, 10, one),
        (-1.0, -1.0, 2, 1, 10, one),
        (tiny, 0.0, 1, 1, 10, one),
        (0.0, tiny, 2, 1, 10, one),
        (tiny, up(tiny), 1, 2, 10, one),
        (f32::MAX, f32::MAX, 1, 2, 10, one),
        (f32::MIN_POSITIVE, f32::MIN_POSITIVE, 1, 2, 10, one),
        (1.0, 1.0, u64::MAX, 0, u64::MAX, decay),
        (1.0, 1.0, 0, u64::MAX, 0, decay),
    ];
    // Products that need every bit of f64: an f32 computation, or one with
    // (1 − ε) as a float, decides these differently.
    let mut rng = Rng(7);
    let (mut f32_rows, mut ratio_rows) = (0, 0);
    for _ in 0..1_000_000 {
        if f32_rows == 8 && ratio_rows == 8 {
            break;
        }
        let la = f32::from_bits(0x3f80_0000 + rng.below(0x0180_0000) as u32);
        let e = rng.below(50_000) as u32 + 1;
        let ep = Epsilon { start_ppm: e, end_ppm: e, decay_slots: 0 };
        let target = f64::from(la) * f64::from(PPM - e) / f64::from(PPM);
        let near = target as f32;
        for lb in [down(near), near, up(near)] {
            let exact = rules::is_win(la, lb, 1, 2, 3, &ep);
            let naive32 = la * (1.0 - e as f32 / 1e6) < lb;
            if exact != naive32 && f32_rows < 8 {
                f32_rows += 1;
                cases.push((la, lb, 1, 2, 3, ep));
                cases.push((lb, la, 2, 1, 3, ep));
            }
        }
        // Exact ties, la·(1 − p/q) == lb: (1 − ε) as an f64 rounds them
        // either way; the integer products keep them ties (no win).
        let q = [100u32, 1000, 10_000][ratio_rows % 3];
        let p = 1 + rng.below(u64::from(q) / 2) as u32;
        let j = 1 + rng.below((1 << 24) / u64::from(q)) as u32;
        let (la, lb) = ((j * q) as f32, (j * (q - p)) as f32);
        let e = p * (PPM / q);
        let ep = Epsilon { start_ppm: e, end_ppm: e, decay_slots: 0 };
        let ratio64 = f64::from(la) * (1.0 - f64::from(e) / 1e6) < f64::from(lb);
        let ratio64_back = f64::from(lb) < f64::from(la) * (1.0 - f64::from(e) / 1e6);
        if (ratio64 || ratio64_back) && ratio_rows < 8 {
            assert!(!rules::is_win(la, lb, 1, 2, 3, &ep) && !rules::is_win(lb, la, 2, 1, 3, &ep));
            ratio_rows += 1;
            cases.push((la, lb, 1, 2, 3, ep));
            cases.push((lb, la, 2, 1, 3, ep));
        }
    }
    assert!(f32_rows == 8 && ratio_rows == 8, "found {f32_rows} f32 and {ratio_rows} ratio rows");
    cases
        .into_iter()
        .map(|(la, lb, sa, sb, open, e)| {
            format!(
                "\"loss_a\": {}, \"loss_b\": {}, \"slot_a\": {sa}, \"slot_b\": {sb}, \"open_slot\": {open}, \"eps\": {}, \"win\": {}",
                bits(la),
                bits(lb),
                eps_json(&e),
                rules::is_win(la, lb, sa, sb, open, &e)
            )
        })
        .collect()
}

fn wins_row(losses: &[f32], models: usize, pages: usize, slots: &[u64], open: u64, e: &Epsilon) -> String {
    let mut out = vec![0u16; models];
    rules::wins(losses, models, pages, slots, open, e, &mut out);
    format!(
        "\"models\": {models}, \"pages\": {pages}, \"losses\": [{}], \"slots\": [{}], \"open_slot\": {open}, \"eps\": {}, \"wins\": [{}]",
        list(losses, |&l| bits(l)),
        list(slots, |s| s.to_string()),
        eps_json(e),
        list(&out, |w| w.to_string())
    )
}

fn wins_rows() -> Vec<String> {
    let mut rows = Vec::new();
    let none = Epsilon { start_ppm: 0, end_ppm: 0, decay_slots: 0 };
    let all = Epsilon { start_ppm: PPM, end_ppm: PPM, decay_slots: 0 };
    rows.push(wins_row(&[1.0, 3.0, 2.0, 2.0, 3.0, 1.0], 3, 2, &[1, 1, 1], 10, &none));
    rows.push(wins_row(&[1.0, 3.0, 2.0, 2.0, 3.0, 1.0], 3, 2, &[1, 1, 2], 10, &all));
    rows.push(wins_row(&[], 0, 0, &[], 10, &none));
    rows.push(wins_row(&[1.0, 2.0, 3.0], 1, 3, &[5], 10, &none));
    rows.push(wins_row(&[], 4, 0, &[1, 2, 3, 4], 10, &none));
    // A copy: the original (slot 100), its copy δ_p better on page p
    // (slot 200), an exact copy (slot 300) and an invalid model (slot 150).
    let pages = 20;
    let orig: Vec<f32> = (0..pages).map(|p| 2.0 + p as f32 / 64.0).collect();
    let copy: Vec<f32> = orig
        .iter()
        .enumerate()
        .map(|(p, &l)| (f64::from(l) * f64::from(PPM - (p as u32 * 1000 + 500)) / 1e6) as f32)
        .collect();
    let losses: Vec<f32> = [orig.clone(), copy, orig, vec![f32::INFINITY; pages]].concat();
    let decay = Epsilon { start_ppm: 10_000, end_ppm: 0, decay_slots: 1000 };
    for open in [100, 200, 600, 1099, 1100] {
        rows.push(wins_row(&losses, 4, pages, &[100, 200, 300, 150], open, &decay));
    }
    // Random tables over a few loss values (ties), slots and NaN/Inf.
    let mut rng = Rng(3);
    for (models, pages) in [(5usize, 7usize), (9, 13), (16, 33), (2, 1)] {
        let values = [1.0f32, 1.25, 1.5, 2.0, 2.0 * 0.99, f32::INFINITY, f32::NAN, 0.5];
        let losses: Vec<f32> = (0..models * pages).map(|_| values[rng.below(values.len() as u64) as usize]).collect();
        let slots: Vec<u64> = (0..models).map(|_| 1000 + rng.below(6) * 50).collect();
        let e = Epsilon { start_ppm: 20_000, end_ppm: 5_000, decay_slots: 200 };
        rows.push(wins_row(&losses, models, pages, &slots, 1200, &e));
    }
    rows
}

fn exp_rows() -> Vec<String> {
    let mut zs: Vec<u64> =
        vec![0, 1, 2, 3, 1000, 1 << 31, LN2_Q32 - 1, LN2_Q32, LN2_Q32 + 1, 1 << 32, 2 * LN2_Q32, 3 << 32];
    for k in [5u64, 31, 32, 33, 40, 63] {
        zs.extend([k * LN2_Q32 - 1, k * LN2_Q32, k * LN2_Q32 + 1]);
    }
    zs.extend([64 * LN2_Q32 - 1, 64 * LN2_Q32, 64 * LN2_Q32 + 1, 1 << 52, u64::MAX - 1, u64::MAX]);
    let mut rng = Rng(11);
    for _ in 0..48 {
        zs.push(rng.below(64 * LN2_Q32));
    }
    // Where the series' floors make it rise by one unit: pins the rounding.
    let mut rises = 0;
    while rises < 4 {
        let z = rng.below(LN2_Q32 - 1);
        if rules::exp_neg_q32(z + 1) > rules::exp_neg_q32(z) {
            zs.extend([z, z + 1]);
            rises += 1;
        }
    }
    zs.into_iter().map(|z| format!("\"z\": {z}, \"e\": {}", rules::exp_neg_q32(z))).collect()
}

fn weights_row(wins: &[u16], valid: &[u8; 32], t: u32) -> String {
    let mut out = vec![0u32; wins.len()];
    rules::weights(wins, valid, t, &mut out);
    format!(
        "\"wins\": [{}], \"valid\": \"{}\", \"temperature_ppm\": {t}, \"weights\": [{}]",
        list(wins, |w| w.to_string()),
        hex(valid),
        list(&out, |w| w.to_string())
    )
}

fn weights_rows() -> Vec<String> {
    let all = [0xffu8; 32];
    let mut rows = vec![
        weights_row(&[], &all, 1000),
        weights_row(&[5, 7, 0], &[0; 32], 1000),
        weights_row(&[5, 7, 0], &bitmap(3, |i| i == 1), 1000),
        weights_row(&[0, 0, 3], &bitmap(3, |i| i == 0), 100_000_000),
        weights_row(&[0, 0, 0, 0], &bitmap(4, |i| i != 2), 5000),
        weights_row(&[0, 0, 0], &all, 1000),
        weights_row(&[9, 9], &all, 1000),
        weights_row(&[4, 4, 60_000], &bitmap(3, |i| i < 2), 1000),
        weights_row(&[10, 9], &all, 1000),
        weights_row(&[10, 9], &all, 0),
        weights_row(&[10, 9], &all, 1),
        weights_row(&[10, 9], &all, u32::MAX),
        weights_row(&[100, 90, 50, 10, 0], &all, 100_000_000),
        weights_row(&[100, 90, 50, 10, 0], &all, 1_000_000),
        weights_row(&[100, 90, 50, 10, 0], &all, 1000),
        weights_row(&[u16::MAX; MAX_ENTRIES], &all, 100_000_000),
        weights_row(&[0; MAX_ENTRIES], &all, 1000),
    ];
    // 256 entries, random wins and validity, at every temperature decade.
    let mut rng = Rng(13);
    for (i, t) in
        [1000u32, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 50_000_000, 3_333].into_iter().enumerate()
    {
        let n = if i % 2 == 0 { MAX_ENTRIES } else { 1 + rng.below(MAX_ENTRIES as u64) as usize };
        let max_win = [65_536u64, 1000, 10, 257][i % 4];
        let wins: Vec<u16> = (0..n).map(|_| rng.below(max_win) as u16).collect();
        let valid = bitmap(MAX_ENTRIES, |_| rng.below(4) != 0);
        rows.push(weights_row(&wins, &valid, t));
    }
    // The leaders close together near W = 2^24, at the warmest temperature.
    let wins: Vec<u16> = (0..MAX_ENTRIES).map(|i| u16::MAX - (i as u16 % 7)).collect();
    rows.push(weights_row(&wins, &all, 100_000_000));
    rows
}

fn payouts_rows() -> Vec<String> {
    let mut cases: Vec<(u64, Vec<u32>)> = vec![
        (u64::MAX, vec![WEIGHT_ONE, 0, 1]),
        (u64::MAX, vec![WEIGHT_ONE / 3, WEIGHT_ONE / 3, WEIGHT_ONE / 3 + 1]),
        (100, vec![WEIGHT_ONE / 3, WEIGHT_ONE / 3, WEIGHT_ONE / 3 + 1]),
        (0, vec![WEIGHT_ONE, 0]),
        (1, vec![WEIGHT_ONE, WEIGHT_ONE - 1]),
        (u64::MAX, vec![u32::MAX, WEIGHT_ONE + 1, 2]),
        ((1 << 24) - 1, vec![1, WEIGHT_ONE - 1]),
        (1_000_000_000, vec![]),
    ];
    let mut rng = Rng(17);
    for (i, t) in [1000u32, 1_000_000, 100_000_000, 37_000].into_iter().enumerate() {
        let n = 1 + rng.below(40) as usize;
        let wins: Vec<u16> = (0..n).map(|_| rng.below(500) as u16).collect();
        let mut w = vec![0u32; n];
        rules::weights(&wins, &[0xff; 32], t, &mut w);
        let paid = [u64::MAX, rng.next(), rng.below(1_000_000_000), 12_345][i];
        cases.push((paid, w));
    }
    cases
        .into_iter()
        .map(|(paid, w)| {
            let mut out = vec![0u64; w.len()];
            rules::payouts(paid, &w, &mut out);
            format!(
                "\"paid\": {paid}, \"weights\": [{}], \"payouts\": [{}]",
                list(&w, |x| x.to_string()),
                list(&out, |x| x.to_string())
            )
        })
        .collect()
}

fn vote_digest_rows() -> Vec<String> {
    let mut rng = Rng(19);
    let cases: Vec<(u64, Vec<u16>)> = vec![
        (0, vec![]),
        (1, vec![0]),
        (2, vec![0x0102, 0xfffe, 0, 7]),
        (u64::MAX, (0..MAX_ENTRIES).map(|_| rng.next() as u16).collect()),
        (12_345, (0..33).map(|i| i * 1000).collect()),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (round, wins))| {
            let i = i as u32;
            let (s, t, inv) = (seed("vote-seed", i), seed("table-hash", i), seed("invalid", i));
            format!(
                "\"round\": {round}, \"seed\": \"{}\", \"table_hash\": \"{}\", \"wins\": [{}], \"invalid\": \"{}\", \"digest\": \"{}\"",
                hex(&s),
                hex(&t),
                list(&wins, |w| w.to_string()),
                hex(&inv),
                hex(&rules::vote_digest(round, &s, &t, &wins, &inv))
            )
        })
        .collect()
}

fn round_seed_rows() -> Vec<String> {
    [(1u64, 77u64), (2, 1 << 40), (u64::MAX, u64::MAX), (0, 0)]
        .into_iter()
        .enumerate()
        .map(|(i, (number, slot))| {
            let i = i as u32;
            let competition = Address::new_from_array(seed("competition", i));
            let slot_hash = seed("slot-hash", i);
            format!(
                "\"competition\": \"{}\", \"number\": {number}, \"slot\": {slot}, \"slot_hash\": \"{}\", \"seed\": \"{}\"",
                hex(competition.as_ref()),
                hex(&slot_hash),
                hex(&rules::round_seed(&competition, number, slot, &slot_hash))
            )
        })
        .collect()
}

fn generate() -> String {
    let mut out = String::from("{\n");
    section(&mut out, "epsilon", epsilon_rows(), false);
    section(&mut out, "is_win", is_win_rows(), false);
    section(&mut out, "wins", wins_rows(), false);
    section(&mut out, "exp", exp_rows(), false);
    section(&mut out, "weights", weights_rows(), false);
    section(&mut out, "payouts", payouts_rows(), false);
    section(&mut out, "vote_digest", vote_digest_rows(), false);
    section(&mut out, "round_seed", round_seed_rows(), true);
    out.push_str("}\n");
    out
}

#[test]
fn vectors_match_the_committed_file() {
    let fresh = generate();
    if std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(PATH, &fresh).expect("write test vectors");
        return;
    }
    let committed = std::fs::read_to_string(PATH).unwrap_or_default();
    assert!(
        committed == fresh,
        "{PATH} is stale or missing: rerun with UPDATE_VECTORS=1 and commit it (Go's clients/competition/rules checks it)"
    );
}
