//! Deterministic per-round selection, identical in Rust (on-chain) and Go
//! (clients compute their own roles): round seed, swap-or-not shuffle, witness
//! election, quorum, batch-size ramp and per-client batch assignment.
//!
//! Everything here is a pure function of on-chain round state, so any client can
//! recompute any other client's role and the chain can verify a claimed one with a
//! single shuffle evaluation (180 hashes) instead of shuffling the whole list.

use core::num::NonZeroU64;

use psyche_sdk::hash::hashv;

use crate::state::COMMITTEE_SIZE;

/// A 32-byte round seed.
pub type Seed = [u8; 32];

/// Rounds of the swap-or-not network. 90 is Ethereum's choice for the same
/// shuffle; the bias after that many rounds is negligible for lists this small.
pub const SHUFFLE_ROUNDS: u8 = 90;

/// Witnesses elected per round when `witness_nodes` is 0 ("as many as fit").
pub const MAX_WITNESSES: u16 = 32;

const ROUND_SEED_DOMAIN: &[u8] = b"psyche:round-seed:v1";
const WITNESS_DOMAIN: &[u8] = b"psyche:witness";
const DATA_DOMAIN: &[u8] = b"psyche:data";
const VERIFY_SEED_DOMAIN: &[u8] = b"psyche:verify-seed:v1";
const SAMPLE_DOMAIN: &[u8] = b"psyche:sample";
const VERIFIER_DOMAIN: &[u8] = b"psyche:verifier";
const COMMITTEE_DOMAIN: &[u8] = b"psyche:committee";

/// Chain entropy read at the tick that starts a round: the most recent entry of
/// the SlotHashes sysvar (the bank hash of an already-finished slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entropy {
    pub slot: u64,
    pub slot_hash: [u8; 32],
}

/// Seed of the round that trains `step`: a hash of the previous round's seed (so
/// the chain of seeds is fixed by history) and the latest SlotHashes entry (so it
/// is unknown until that slot is finished). Nothing the ticker passes in enters it.
pub fn round_seed(prev: &Seed, entropy: &Entropy, step: u32) -> Seed {
    hashv(&[
        ROUND_SEED_DOMAIN,
        prev,
        &entropy.slot.to_le_bytes(),
        &entropy.slot_hash,
        &step.to_le_bytes(),
    ])
}

/// The seed a run starts its seed chain from.
pub fn genesis_seed(run_id: &[u8]) -> Seed {
    hashv(&[ROUND_SEED_DOMAIN, b"genesis", run_id])
}

/// Seed of the witness election, domain-separated from the data shuffle so that
/// being a witness says nothing about which batch a client trains.
pub fn witness_seed(round: &Seed) -> Seed {
    hashv(&[round, WITNESS_DOMAIN])
}

/// Seed of the data-order shuffle.
pub fn data_seed(round: &Seed) -> Seed {
    hashv(&[round, DATA_DOMAIN])
}

/// Seed of a round's verification sampling: sha256(domain ‖ round seed ‖
/// slot ‖ slot hash), with the SlotHashes entry of the first slot after the
/// one RoundTrain ended in, so it is unknown while members commit and to
/// whoever chose when RoundTrain ended.
pub fn verify_seed(round: &Seed, entropy: &Entropy) -> Seed {
    hashv(&[VERIFY_SEED_DOMAIN, round, &entropy.slot.to_le_bytes(), &entropy.slot_hash])
}

/// The first 8 bytes of sha256(seed ‖ domain ‖ le16(index)), as a u64.
fn draw(seed: &Seed, domain: &[u8], index: u16) -> u64 {
    u64::from_le_bytes(first8(&hashv(&[seed, domain, &index.to_le_bytes()])))
}

/// Whether the commitment of round member `index` is sampled for
/// verification at `percent` (0: never, 100 and above: always).
pub fn sampled(verify_seed: &Seed, index: u16, percent: u8) -> bool {
    match percent {
        0 => false,
        p if p >= 100 => true,
        p => draw(verify_seed, SAMPLE_DOMAIN, index) % 100 < u64::from(p),
    }
}

/// The round member that verifies member `index` of a round of `n`: uniform
/// over the other `n - 1` members, never `index` itself; None below 2 members.
pub fn verifier(verify_seed: &Seed, index: u16, n: u16) -> Option<u16> {
    let others = NonZeroU64::new(u64::from(n).checked_sub(1)?)?;
    let off = draw(verify_seed, VERIFIER_DOMAIN, index) % others;
    // Note: index <= u16::MAX and off < n - 1, so the sum fits in u64, and the
    // result is below n <= u16::MAX.
    #[allow(clippy::arithmetic_side_effects)]
    let v = (u64::from(index) + 1 + off) % u64::from(n);
    Some(v as u16)
}

/// The verifier of member `index`'s commitment once the drawn one (`drawn`)
/// is no longer healthy (faulted, dropped or gone in the round): the first
/// member other than the trainer and `drawn` for which `healthy` holds,
/// walking the indices of a round of `n` from sha256(verify_seed ‖
/// "psyche:committee" ‖ le16(index)) mod n, as the committee walk does (with
/// everyone healthy, the first member of `committee(seed, index, drawn, n)`).
/// Nobody chooses it: the seed fixes the walk, and a member leaves the
/// healthy set only by a fault, a health check or leaving.
pub fn fallback_verifier(verify_seed: &Seed, index: u16, drawn: u16, n: u16, healthy: impl Fn(u16) -> bool) -> Option<u16> {
    let n64 = NonZeroU64::new(u64::from(n))?;
    // start < n <= u16::MAX.
    let mut i = (draw(verify_seed, COMMITTEE_DOMAIN, index) % n64) as u16;
    for _ in 0..n {
        if i != index && i != drawn && healthy(i) {
            return Some(i);
        }
        // Note: i < n <= u16::MAX, so i + 1 fits in u32.
        #[allow(clippy::arithmetic_side_effects)]
        let next = ((u32::from(i) + 1) % u32::from(n)) as u16;
        i = next;
    }
    None
}

/// A dispute's committee: up to `COMMITTEE_SIZE` round members other than the
/// trainer and the accuser, walking the indices of a round of `n` from
/// sha256(verify_seed ‖ domain ‖ le16(trainer)) mod n. Returns the indices and
/// how many there are (fewer than 3 in small rounds).
pub fn committee(verify_seed: &Seed, trainer: u16, accuser: u16, n: u16) -> ([u16; COMMITTEE_SIZE], usize) {
    let mut out = [0u16; COMMITTEE_SIZE];
    let mut len = 0usize;
    let Some(n64) = NonZeroU64::new(u64::from(n)) else {
        return (out, 0);
    };
    // start < n <= u16::MAX.
    let mut i = (draw(verify_seed, COMMITTEE_DOMAIN, trainer) % n64) as u16;
    for _ in 0..n {
        if len == COMMITTEE_SIZE {
            break;
        }
        if i != trainer && i != accuser {
            out[len] = i;
            // Note: len < COMMITTEE_SIZE, checked above.
            #[allow(clippy::arithmetic_side_effects)]
            let next = len + 1;
            len = next;
        }
        // Note: i < n <= u16::MAX, so i + 1 fits in u32.
        #[allow(clippy::arithmetic_side_effects)]
        let next = ((u32::from(i) + 1) % u32::from(n)) as u16;
        i = next;
    }
    (out, len)
}

/// Position of `index` in a swap-or-not permutation of `0..n` keyed by `seed`
/// (the construction of Ethereum's `compute_shuffled_index`). `None` when
/// `index >= n`.
pub fn shuffled_position(index: u32, n: u32, seed: &Seed) -> Option<u32> {
    if index >= n {
        return None;
    }
    // n > index >= 0.
    let n64 = NonZeroU64::new(u64::from(n))?;
    let mut index = u64::from(index);
    for round in 0..SHUFFLE_ROUNDS {
        let pivot_hash = hashv(&[seed, &[round]]);
        let pivot = u64::from_le_bytes(first8(&pivot_hash)) % n64;
        // Note: pivot < n and index < n <= u32::MAX: no overflow, no underflow.
        #[allow(clippy::arithmetic_side_effects)]
        let flip = (pivot + n64.get() - index) % n64;
        let position = if index > flip { index } else { flip };
        // position < n <= u32::MAX, so the block number fits in u32.
        let block = (position / 256) as u32;
        let source = hashv(&[seed, &[round], &block.to_le_bytes()]);
        let byte = source[((position % 256) / 8) as usize];
        if (byte >> (position % 8)) & 1 == 1 {
            index = flip;
        }
    }
    // index < n <= u32::MAX.
    Some(index as u32)
}

fn first8(h: &[u8; 32]) -> [u8; 8] {
    [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]
}

/// Number of witnesses elected in a round of `n` clients.
pub fn witness_count(witness_nodes: u16, n: u16) -> u16 {
    let wanted = if witness_nodes == 0 { MAX_WITNESSES } else { witness_nodes };
    if wanted < n {
        wanted
    } else {
        n
    }
}

/// Whether client `index` of a round of `n` clients is one of its witnesses.
pub fn is_witness(index: u16, n: u16, witness_nodes: u16, round: &Seed) -> bool {
    let seed = witness_seed(round);
    match shuffled_position(u32::from(index), u32::from(n), &seed) {
        Some(p) => p < u32::from(witness_count(witness_nodes, n)),
        None => false,
    }
}

/// Witness reports needed for a round with `elected` witnesses: ceil(2/3 of the
/// elected ones), counted against the election, never against what arrived, so it
/// cannot be met vacuously. With nobody elected it is 1, which cannot be met.
pub fn quorum(elected: u16) -> u16 {
    if elected == 0 {
        return 1;
    }
    // ceil(2e / 3) = floor((2e + 2) / 3). Note: elected <= u16::MAX, so
    // 2 * (elected + 1) fits in u32, and the quotient in u16.
    #[allow(clippy::arithmetic_side_effects)]
    let q = 2 * (u32::from(elected) + 1) / 3;
    q as u16
}

/// Largest `global_batch_size_warmup_tokens` accepted, so that the ramp's
/// product (end - start) * tokens stays below 2^63 without 128-bit arithmetic.
pub const MAX_WARMUP_TOKENS: u64 = 1 << 47;

/// Global batch size (sequences) once `tokens` tokens have been trained: a linear
/// ramp from `start` to `end` over the first `warmup_tokens`, then `end`.
/// Callers guarantee start <= end and warmup_tokens <= MAX_WARMUP_TOKENS.
// Note: the early return leaves start < end and tokens < warmup_tokens <=
// MAX_WARMUP_TOKENS, so end - start does not underflow, the divisor is
// nonzero, the product fits (below), and start + grown < end.
#[allow(clippy::arithmetic_side_effects)]
pub fn batch_size(start: u16, end: u16, warmup_tokens: u64, tokens: u64) -> u16 {
    if end <= start || tokens >= warmup_tokens || warmup_tokens > MAX_WARMUP_TOKENS {
        return end;
    }
    let span = u64::from(end - start);
    // span < 2^16 and tokens < warmup_tokens <= 2^47: the product fits in u64.
    let grown = span * tokens / warmup_tokens;
    start + grown as u16
}

/// Tokens trained before sequence `data_index` with sequences of `seq_len`
/// tokens (`seq_len` is clamped to 2^16). Past 2^47 sequences any ramp (at most
/// MAX_WARMUP_TOKENS long) is over, so the product is only formed below that, where
/// it cannot overflow. No checked multiply: LLVM lowers it to a 128-bit multiply,
/// which the BPF backend rejects.
// Note: data_index <= 2^47 past the early return and seq_len <= 2^16: the
// product is below 2^63.
#[allow(clippy::arithmetic_side_effects)]
pub fn tokens_before(data_index: u64, seq_len: u32) -> u64 {
    if data_index > MAX_WARMUP_TOKENS {
        return u64::MAX;
    }
    data_index * u64::from(seq_len.min(1 << 16))
}

/// A run's batch schedule, for `data_index_for_step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSchedule {
    /// `global_batch_size_start`, `global_batch_size_end` and
    /// `global_batch_size_warmup_tokens` of the config.
    pub start: u16,
    pub end: u16,
    pub warmup_tokens: u64,
    /// The model's `max_seq_len`.
    pub seq_len: u32,
    /// Inner steps per round (the model's `inner_steps`; 0 counts as 1).
    pub inner_steps: u16,
}

/// The data cursor at the start of `step` for a run that began at step 1 with
/// cursor 0 and kept this batch schedule (each step is one round and moves the
/// cursor by that round's batch size times its inner steps; the batch size
/// follows the ramp at the tokens before the round's cursor). For restarting a
/// run from a given step. Saturates at u64::MAX (far beyond any data set).
pub fn data_index_for_step(schedule: &BatchSchedule, step: u32) -> u64 {
    let BatchSchedule { start, end, warmup_tokens, seq_len, .. } = *schedule;
    let h = u64::from(schedule.inner_steps.max(1));
    let mut index = 0u64;
    let mut s = 1u32;
    while s < step {
        let tokens = tokens_before(index, seq_len);
        if tokens >= warmup_tokens {
            // Past the ramp every round has the end size.
            let rest = u64::from(step.saturating_sub(s)).saturating_mul(u64::from(end)).saturating_mul(h);
            return index.saturating_add(rest);
        }
        let round = u64::from(batch_size(start, end, warmup_tokens, tokens)).saturating_mul(h);
        index = index.saturating_add(round);
        s = s.saturating_add(1);
    }
    index
}

/// A half-open range of global sequence indices `[start, start + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub start: u64,
    pub len: u64,
}

/// What batch assignment needs from a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRound {
    pub seed: Seed,
    /// Global index of the round's first sequence.
    pub data_index: u64,
    /// Sequences per inner step.
    pub batch_size: u16,
    /// Clients in the round.
    pub clients: u16,
    /// Inner steps of the round (0 counts as 1): the round covers
    /// `batch_size * inner_steps` sequences from `data_index`.
    pub inner_steps: u16,
}

/// The sequences client `index` trains in `round`. Clients are put in the order
/// of a swap-or-not shuffle keyed by the round's data seed; each inner step's
/// batch is cut into `clients` contiguous shares, the first `batch_size %
/// clients` one sequence longer, and a client's share of every inner step is
/// taken from one contiguous range: with share (offset, len) and H inner steps
/// the client trains `[data_index + offset*H, … + len*H)`, inner step j the
/// sequences `[start + j*len, start + (j+1)*len)`. Every sequence of the round
/// goes to exactly one client.
pub fn assignment(round: &DataRound, index: u16) -> Option<Assignment> {
    let seed = data_seed(&round.seed);
    let p = u64::from(shuffled_position(u32::from(index), u32::from(round.clients), &seed)?);
    // clients > index >= 0 (or shuffled_position returned None).
    let n = NonZeroU64::new(u64::from(round.clients))?;
    let b = u64::from(round.batch_size);
    let h = u64::from(round.inner_steps.max(1));
    let (q, r) = (b / n, b % n);
    // Note: p < n <= u16::MAX and q <= b <= u16::MAX: below 2^32; times
    // h <= u16::MAX, below 2^48.
    #[allow(clippy::arithmetic_side_effects)]
    let (offset, len) = ((p * q + if p < r { p } else { r }) * h, (q + u64::from(p < r)) * h);
    Some(Assignment { start: round.data_index.checked_add(offset)?, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(i: u8) -> Seed {
        hashv(&[b"test-seed", &[i]])
    }

    #[test]
    fn shuffle_is_a_permutation_for_every_size() {
        for n in [1u32, 2, 3, 7, 32, 33, 100, 257] {
            let s = seed(n as u8);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let p = shuffled_position(i, n, &s).unwrap() as usize;
                assert!(!seen[p], "n={n}: position {p} hit twice");
                seen[p] = true;
            }
            assert_eq!(shuffled_position(n, n, &s), None);
        }
        assert_eq!(shuffled_position(0, 0, &seed(0)), None);
    }

    #[test]
    fn shuffle_depends_on_the_seed_and_moves_elements() {
        let n = 64;
        let perm = |s: &Seed| (0..n).map(|i| shuffled_position(i, n, s).unwrap()).collect::<Vec<_>>();
        let (a, b) = (perm(&seed(1)), perm(&seed(2)));
        assert_ne!(a, b);
        let fixed_points = a.iter().enumerate().filter(|(i, p)| *i as u32 == **p).count();
        assert!(fixed_points < 10, "{fixed_points} fixed points of 64 is not a shuffle");
    }

    #[test]
    fn shuffle_spreads_positions_evenly() {
        // Over many seeds, client 0 should land in each of 8 positions about 1/8 of
        // the time; 1500 trials give a standard deviation of ~13 around 187.
        let n = 8u32;
        let mut counts = [0u32; 8];
        for t in 0..1500u32 {
            let s = hashv(&[b"spread", &t.to_le_bytes()]);
            counts[shuffled_position(0, n, &s).unwrap() as usize] += 1;
        }
        for c in counts {
            assert!((130..245).contains(&c), "position counts {counts:?}");
        }
    }

    #[test]
    fn witness_count_table() {
        let cases = [(0, 0, 0), (0, 5, 5), (0, 32, 32), (0, 256, 32), (3, 2, 2), (3, 10, 3), (32, 256, 32), (1, 1, 1)];
        for (nodes, n, want) in cases {
            assert_eq!(witness_count(nodes, n), want, "witness_nodes={nodes} n={n}");
        }
    }

    #[test]
    fn exactly_witness_count_clients_are_witnesses() {
        for (nodes, n) in [(0u16, 1u16), (0, 10), (0, 40), (3, 10), (5, 5), (32, 256)] {
            let s = seed(n as u8 ^ nodes as u8);
            let w = (0..n).filter(|&i| is_witness(i, n, nodes, &s)).count();
            assert_eq!(w, witness_count(nodes, n) as usize, "witness_nodes={nodes} n={n}");
            assert!(!is_witness(n, n, nodes, &s), "index n is out of the round");
        }
    }

    #[test]
    fn quorum_is_two_thirds_rounded_up_and_never_zero() {
        let cases = [(0, 1), (1, 1), (2, 2), (3, 2), (4, 3), (5, 4), (6, 4), (9, 6), (10, 7), (32, 22)];
        for (elected, want) in cases {
            assert_eq!(quorum(elected), want, "elected={elected}");
        }
        for e in 1..=300u16 {
            let q = u32::from(quorum(e));
            assert!(3 * q >= 2 * u32::from(e) && 3 * (q - 1) < 2 * u32::from(e), "elected={e}");
        }
    }

    #[test]
    fn batch_size_ramps_linearly_then_stays_at_end() {
        let cases = [
            (8, 8, 1000, 0, 8),
            (2, 10, 0, 0, 10),
            (2, 10, 800, 0, 2),
            (2, 10, 800, 99, 2),
            (2, 10, 800, 100, 3),
            (2, 10, 800, 400, 6),
            (2, 10, 800, 799, 9),
            (2, 10, 800, 800, 10),
            (2, 10, 800, u64::MAX, 10),
            (1, u16::MAX, MAX_WARMUP_TOKENS, MAX_WARMUP_TOKENS - 1, u16::MAX - 1),
            (1, 100, MAX_WARMUP_TOKENS + 1, 5, 100),
        ];
        for (start, end, warm, tokens, want) in cases {
            assert_eq!(batch_size(start, end, warm, tokens), want, "start={start} end={end} warm={warm} tokens={tokens}");
        }
    }

    #[test]
    fn data_index_for_step_sums_the_ramp() {
        // Brute force: run the ramp round by round.
        for (start, end, warm, seq) in [(8u16, 8u16, 0u64, 256u32), (3, 11, 10240, 256), (1, 5, 1000, 7), (2, 2, 50, 1)] {
            for h in [0u16, 1, 2, 10] {
                let sched = BatchSchedule { start, end, warmup_tokens: warm, seq_len: seq, inner_steps: h };
                let mut index = 0u64;
                for step in 1..200u32 {
                    assert_eq!(data_index_for_step(&sched, step), index, "start={start} end={end} h={h} step={step}");
                    index += u64::from(batch_size(start, end, warm, tokens_before(index, seq))) * u64::from(h.max(1));
                }
            }
        }
        let sched = |start, end, warmup_tokens, seq_len, inner_steps| BatchSchedule { start, end, warmup_tokens, seq_len, inner_steps };
        assert_eq!(data_index_for_step(&sched(8, 8, 0, 256, 1), 0), 0);
        assert_eq!(data_index_for_step(&sched(1, 65535, 0, 1, 1), u32::MAX), u64::from(u32::MAX - 1) * 65535);
        assert_eq!(data_index_for_step(&sched(1, 65535, 0, 1, 1000), u32::MAX), u64::from(u32::MAX - 1) * 65535 * 1000);
        // The largest product still fits: (2^32 - 2) * (2^16 - 1)^2 < 2^64.
        assert_eq!(data_index_for_step(&sched(1, 65535, 0, 1, 65535), u32::MAX), u64::from(u32::MAX - 1) * 65535 * 65535);
        assert_eq!(tokens_before(MAX_WARMUP_TOKENS + 1, 1), u64::MAX);
        assert_eq!(tokens_before(10, 1 << 20), 10 << 16);
    }

    #[test]
    fn assignment_covers_the_batch_exactly_once() {
        for (n, b) in [(1u16, 1u16), (1, 7), (3, 3), (3, 10), (7, 100), (64, 64), (100, 1000), (256, 4099), (10, 3)] {
            let s = seed(b as u8);
            let data_index = 1_000_000u64;
            let mut covered = vec![0u8; b as usize];
            let mut total = 0;
            for i in 0..n {
                let a = assignment(&DataRound { seed: s, data_index, batch_size: b, clients: n, inner_steps: 1 }, i).unwrap();
                let q = u64::from(b / n);
                assert!(a.len == q || (a.len == q + 1 && b % n != 0), "n={n} b={b} client {i}: len {}", a.len);
                for seq in a.start..a.start + a.len {
                    covered[(seq - data_index) as usize] += 1;
                }
                total += a.len;
            }
            assert_eq!(total, u64::from(b));
            assert!(covered.iter().all(|&c| c == 1), "n={n} b={b}: {covered:?}");
            assert_eq!(assignment(&DataRound { seed: s, data_index, batch_size: b, clients: n, inner_steps: 1 }, n), None);
        }
    }

    #[test]
    fn assignment_with_inner_steps_covers_the_round_exactly_once() {
        for (n, b, h) in [(1u16, 1u16, 1u16), (1, 7, 3), (3, 10, 2), (7, 100, 10), (10, 3, 4), (64, 64, 1000), (256, 4099, 7)] {
            let s = seed(b as u8 ^ h as u8);
            let data_index = 5_000u64;
            let round = DataRound { seed: s, data_index, batch_size: b, clients: n, inner_steps: h };
            let flat = DataRound { inner_steps: 1, ..round };
            let total = u64::from(b) * u64::from(h);
            let mut covered = vec![0u8; total as usize];
            let mut shares = 0u64;
            for i in 0..n {
                let a = assignment(&round, i).unwrap();
                let share = assignment(&flat, i).unwrap();
                assert_eq!(a.start, data_index + (share.start - data_index) * u64::from(h), "n={n} b={b} h={h} client {i}");
                assert_eq!(a.len, share.len * u64::from(h));
                for seq in a.start..a.start + a.len {
                    covered[(seq - data_index) as usize] += 1;
                }
                shares += share.len;
            }
            assert!(covered.iter().all(|&c| c == 1), "n={n} b={b} h={h}");
            // One inner step of every client trains one global batch.
            assert_eq!(shares, u64::from(b), "n={n} b={b} h={h}");
            assert_eq!(assignment(&round, n), None);
        }
        // 0 inner steps counts as 1.
        let r = DataRound { seed: seed(1), data_index: 3, batch_size: 10, clients: 3, inner_steps: 0 };
        assert_eq!(assignment(&r, 1), assignment(&DataRound { inner_steps: 1, ..r }, 1));
        // The start overflows: None.
        let r = DataRound { seed: seed(1), data_index: u64::MAX - 5, batch_size: 100, clients: 3, inner_steps: 10 };
        assert!((0..3).any(|i| assignment(&r, i).is_none()));
    }

    #[test]
    fn assignment_order_changes_with_the_seed() {
        let round = |s| DataRound { seed: s, data_index: 0, batch_size: 64, clients: 16, inner_steps: 1 };
        let a: Vec<_> = (0..16).map(|i| assignment(&round(seed(1)), i).unwrap().start).collect();
        let b: Vec<_> = (0..16).map(|i| assignment(&round(seed(2)), i).unwrap().start).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn sampling_hits_the_percent() {
        assert!((0..200u16).all(|i| !sampled(&seed(1), i, 0)));
        assert!((0..200u16).all(|i| sampled(&seed(1), i, 100) && sampled(&seed(1), i, 255)));
        // 25% over 40 seeds x 256 indices: 10240 draws, sd ~44 around 2560.
        let mut hits = 0;
        for t in 0..40u8 {
            let s = seed(t);
            hits += (0..256u16).filter(|&i| sampled(&s, i, 25)).count();
        }
        assert!((2380..2740).contains(&hits), "{hits} of 10240 sampled at 25%");
        // Monotone in the percent: sampled at p means sampled at every q > p.
        for i in 0..500u16 {
            let first = (1..=100u8).find(|&p| sampled(&seed(3), i, p)).unwrap();
            assert!((first..=100).all(|p| sampled(&seed(3), i, p)));
        }
    }

    #[test]
    fn verifiers_are_never_the_trainer_and_spread_evenly() {
        assert_eq!(verifier(&seed(1), 0, 0), None);
        assert_eq!(verifier(&seed(1), 0, 1), None);
        for n in [2u16, 3, 7, 64, 256] {
            for i in 0..n {
                let v = verifier(&seed(n as u8), i, n).unwrap();
                assert!(v < n && v != i, "n={n} i={i}: {v}");
            }
        }
        assert_eq!(verifier(&seed(9), 0, 2), Some(1));
        assert_eq!(verifier(&seed(9), 1, 2), Some(0));
        // Trainer 0 of 5: each of the 4 others about 1/4 of 2000 seeds (sd ~19).
        let mut counts = [0u32; 5];
        for t in 0..2000u32 {
            let s = hashv(&[b"verifier", &t.to_le_bytes()]);
            counts[verifier(&s, 0, 5).unwrap() as usize] += 1;
        }
        assert_eq!(counts[0], 0);
        for c in &counts[1..] {
            assert!((420..580).contains(c), "verifier counts {counts:?}");
        }
    }

    #[test]
    fn committees_skip_trainer_and_accuser() {
        for n in 0..12u16 {
            for (t, a) in [(0u16, 1u16), (1, 0), (2, 5), (5, 5)] {
                let (c, len) = committee(&seed(n as u8), t, a, n);
                let others = (0..n).filter(|&i| i != t && i != a).count();
                assert_eq!(len, others.min(COMMITTEE_SIZE), "n={n} t={t} a={a}");
                let c = &c[..len];
                assert!(c.iter().all(|&i| i < n && i != t && i != a), "n={n}: {c:?}");
                let mut sorted = c.to_vec();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), len, "n={n}: distinct {c:?}");
            }
        }
        // Consecutive indices from the drawn start.
        let (c, len) = committee(&seed(1), 100, 200, 256);
        assert_eq!(len, 3);
        assert!(c[1] == (c[0] + 1) % 256 || c[1] == (c[0] + 2) % 256);
    }

    #[test]
    fn the_fallback_verifier_walks_like_the_committee_and_skips_the_unhealthy() {
        for n in 3..12u16 {
            for t in 0..n {
                let d = verifier(&seed(n as u8), t, n).unwrap();
                let all = fallback_verifier(&seed(n as u8), t, d, n, |_| true);
                assert_eq!(all, Some(committee(&seed(n as u8), t, d, n).0[0]));
                let first = all.unwrap();
                let next = fallback_verifier(&seed(n as u8), t, d, n, |i| i != first);
                if n > 3 {
                    assert!(next.is_some_and(|x| x != first && x != t && x != d));
                } else {
                    assert_eq!(next, None, "n = 3 has no third member");
                }
                assert_eq!(fallback_verifier(&seed(n as u8), t, d, n, |_| false), None);
            }
        }
        assert_eq!(fallback_verifier(&seed(1), 0, 1, 2, |_| true), None);
    }

    #[test]
    fn verify_seed_depends_on_round_and_entropy() {
        let e = Entropy { slot: 10, slot_hash: [7; 32] };
        let base = verify_seed(&seed(1), &e);
        assert_ne!(base, verify_seed(&seed(2), &e));
        assert_ne!(base, verify_seed(&seed(1), &Entropy { slot: 11, ..e }));
        assert_ne!(base, verify_seed(&seed(1), &Entropy { slot_hash: [8; 32], ..e }));
        assert_ne!(base, round_seed(&seed(1), &e, 0));
    }

    #[test]
    fn round_seed_depends_on_every_input() {
        let e = Entropy { slot: 10, slot_hash: [7; 32] };
        let base = round_seed(&seed(1), &e, 5);
        assert_ne!(base, round_seed(&seed(2), &e, 5));
        assert_ne!(base, round_seed(&seed(1), &Entropy { slot: 11, ..e }, 5));
        assert_ne!(base, round_seed(&seed(1), &Entropy { slot_hash: [8; 32], ..e }, 5));
        assert_ne!(base, round_seed(&seed(1), &e, 6));
        assert_eq!(base, round_seed(&seed(1), &e, 5));
        assert_ne!(witness_seed(&base), data_seed(&base));
    }
}
