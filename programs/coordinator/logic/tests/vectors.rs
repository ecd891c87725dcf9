//! Writes the selection test vectors that clients/schedule (Go) checks, so the
//! two implementations cannot drift. The test fails when the committed file
//! differs from a fresh computation; `UPDATE_VECTORS=1 cargo test` rewrites it.

// Test code: an overflow panics the test (debug build).
#![allow(clippy::arithmetic_side_effects)]

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::selection::{self, Entropy, Seed};
use psyche_sdk::hash::hashv;
use std::fmt::Write;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/selection_vectors.json");

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn seed(label: &str, i: u32) -> Seed {
    hashv(&[label.as_bytes(), &i.to_le_bytes()])
}

fn list<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> String) -> String {
    items.into_iter().map(f).collect::<Vec<_>>().join(", ")
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

fn generate() -> String {
    let mut out = String::from("{\n");

    let mut rows = Vec::new();
    for i in 0..4u32 {
        let prev = seed("prev", i);
        let entropy = Entropy { slot: 1000 + u64::from(i) * 7919, slot_hash: seed("slot-hash", i) };
        let step = i * 1000 + 1;
        let s = selection::round_seed(&prev, &entropy, step);
        rows.push(format!(
            "\"prev\": \"{}\", \"slot\": {}, \"slot_hash\": \"{}\", \"step\": {step}, \"seed\": \"{}\", \"witness_seed\": \"{}\", \"data_seed\": \"{}\"",
            hex(&prev), entropy.slot, hex(&entropy.slot_hash), hex(&s), hex(&selection::witness_seed(&s)), hex(&selection::data_seed(&s))
        ));
    }
    section(&mut out, "round_seeds", rows, false);

    let rows = ["test-run", "a", "run-with-a-32-byte-long-identifi"]
        .iter()
        .map(|id| format!("\"run_id\": \"{id}\", \"seed\": \"{}\"", hex(&selection::genesis_seed(id.as_bytes()))))
        .collect();
    section(&mut out, "genesis_seeds", rows, false);

    let mut rows = Vec::new();
    for (i, n) in [1u32, 2, 3, 10, 33, 256, 300].into_iter().enumerate() {
        let s = seed("shuffle", i as u32);
        let positions = list(0..n, |k| selection::shuffled_position(k, n, &s).unwrap().to_string());
        rows.push(format!("\"seed\": \"{}\", \"n\": {n}, \"positions\": [{positions}]", hex(&s)));
    }
    section(&mut out, "shuffles", rows, false);

    let mut rows = Vec::new();
    for (i, (nodes, n)) in [(0u16, 1u16), (0, 7), (0, 40), (2, 5), (3, 3), (5, 100), (32, 256)].into_iter().enumerate() {
        let s = seed("witness-round", i as u32);
        let w = list((0..n).filter(|&k| selection::is_witness(k, n, nodes, &s)), |k| k.to_string());
        rows.push(format!("\"round_seed\": \"{}\", \"n\": {n}, \"witness_nodes\": {nodes}, \"witnesses\": [{w}]", hex(&s)));
    }
    section(&mut out, "witnesses", rows, false);

    let mut rows = Vec::new();
    let cases = [
        (1u16, 1u16, 0u64, 1u16),
        (3, 10, 57, 1),
        (5, 5, 1 << 40, 1),
        (7, 100, 12345, 1),
        (64, 1000, 0, 1),
        (256, 256, 99, 1),
        (256, 4099, 7, 1),
        // Inner steps (SparseLoCo): each client's share of every inner step.
        (1, 7, 3, 10),
        (3, 10, 57, 2),
        (7, 100, 12345, 10),
        (10, 3, 0, 4),
        (64, 1000, 1 << 40, 1000),
        (256, 4099, 7, 7),
    ];
    for (i, (n, b, data_index, h)) in cases.into_iter().enumerate() {
        let s = seed("assign-round", i as u32);
        let round = selection::DataRound { seed: s, data_index, batch_size: b, clients: n, inner_steps: h };
        let a = list(0..n, |k| {
            let a = selection::assignment(&round, k).unwrap();
            format!("[{}, {}]", a.start, a.len)
        });
        rows.push(format!(
            "\"round_seed\": \"{}\", \"n\": {n}, \"batch_size\": {b}, \"inner_steps\": {h}, \"data_index\": {data_index}, \"assignments\": [{a}]",
            hex(&s)
        ));
    }
    section(&mut out, "assignments", rows, false);

    let mut rows = Vec::new();
    let cases = [(8u16, 8u16, 0u64, 0u64), (2, 10, 800, 0), (2, 10, 800, 100), (2, 10, 800, 799), (2, 10, 800, 800), (1, 65535, 1 << 47, (1 << 47) - 1), (3, 11, 10240, 7680)];
    for (start, end, warm, tokens) in cases {
        let size = selection::batch_size(start, end, warm, tokens);
        rows.push(format!("\"start\": {start}, \"end\": {end}, \"warmup_tokens\": {warm}, \"tokens\": {tokens}, \"size\": {size}"));
    }
    section(&mut out, "batch_sizes", rows, false);

    let mut rows = Vec::new();
    let cases = [
        (8u16, 8u16, 0u64, 256u32, 1u16, 1u32),
        (8, 8, 0, 256, 1, 1000),
        (3, 11, 10240, 256, 1, 9),
        (3, 11, 10240, 256, 1, 500),
        (1, 5, 1000, 7, 1, 77),
        (16, 1024, 1 << 30, 2048, 1, 100_000),
        // Inner steps: every round moves the cursor by its batch size times H.
        (8, 8, 0, 256, 10, 1000),
        (3, 11, 10240, 256, 4, 9),
        (3, 11, 10240, 256, 10, 500),
        (1, 5, 1000, 7, 3, 77),
        (16, 1024, 1 << 30, 2048, 1000, 100_000),
        (1, 65535, 0, 1, 1000, u32::MAX),
    ];
    for (start, end, warm, seq_len, h, step) in cases {
        let sched = selection::BatchSchedule { start, end, warmup_tokens: warm, seq_len, inner_steps: h };
        let index = selection::data_index_for_step(&sched, step);
        rows.push(format!(
            "\"start\": {start}, \"end\": {end}, \"warmup_tokens\": {warm}, \"seq_len\": {seq_len}, \"inner_steps\": {h}, \"step\": {step}, \"data_index\": {index}"
        ));
    }
    section(&mut out, "data_index_for_step", rows, false);

    let rows = (0..=34u16).map(|e| format!("\"elected\": {e}, \"quorum\": {}", selection::quorum(e))).collect();
    section(&mut out, "quorums", rows, false);

    let mut rows = Vec::new();
    for (i, (bits, hashes, count)) in [(64u16, 1u8, 3u32), (512, 4, 20), (1024, 7, 100), (1024, 16, 256)].into_iter().enumerate() {
        let salt: [u8; 8] = seed("salt", i as u32)[..8].try_into().unwrap();
        let mut b = Bloom::new(bits, hashes, salt).unwrap();
        let items: Vec<[u8; 32]> = (0..count).map(|k| seed("member", k)).collect();
        for it in &items {
            b.add(it);
        }
        let probes: Vec<[u8; 32]> = (0..8).map(|k| seed("probe", k + 100 * i as u32)).collect();
        rows.push(format!(
            "\"num_bits\": {bits}, \"num_hashes\": {hashes}, \"salt\": \"{}\", \"items\": [{}], \"words\": [{}], \"probes\": [{}], \"probe_contains\": [{}]",
            hex(&salt),
            list(&items, |x| format!("\"{}\"", hex(x))),
            list(b.bits, |w| format!("\"{w:016x}\"")),
            list(&probes, |x| format!("\"{}\"", hex(x))),
            list(&probes, |x| b.contains(x).to_string()),
        ));
    }
    section(&mut out, "blooms", rows, false);

    let mut rows = Vec::new();
    for i in 0..4u32 {
        let round = seed("verify-round", i);
        let entropy = Entropy { slot: 77 + u64::from(i) * 1009, slot_hash: seed("verify-slot-hash", i) };
        let v = selection::verify_seed(&round, &entropy);
        rows.push(format!(
            "\"round_seed\": \"{}\", \"slot\": {}, \"slot_hash\": \"{}\", \"verify_seed\": \"{}\"",
            hex(&round), entropy.slot, hex(&entropy.slot_hash), hex(&v)
        ));
    }
    section(&mut out, "verify_seeds", rows, false);

    // Sampling, verifier and committee of every index of a few rounds.
    let mut rows = Vec::new();
    for (i, (n, percent)) in [(1u16, 50u8), (2, 0), (3, 100), (10, 25), (64, 10), (257, 33)].into_iter().enumerate() {
        let v = seed("verify-seed", i as u32);
        let sampled = list(0..n, |k| selection::sampled(&v, k, percent).to_string());
        let verifiers = list(0..n, |k| selection::verifier(&v, k, n).map_or("null".to_string(), |x| x.to_string()));
        let committees = list(0..n, |k| {
            let accuser = selection::verifier(&v, k, n).unwrap_or(k);
            let (c, len) = selection::committee(&v, k, accuser, n);
            format!("[{accuser}, [{}]]", list(&c[..len], |x| x.to_string()))
        });
        rows.push(format!(
            "\"verify_seed\": \"{}\", \"n\": {n}, \"percent\": {percent}, \"sampled\": [{sampled}], \"verifiers\": [{verifiers}], \"committees\": [{committees}]",
            hex(&v)
        ));
    }
    section(&mut out, "verification", rows, true);

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
        "{PATH} is stale or missing: rerun with UPDATE_VECTORS=1 and commit it (Go's clients/schedule checks it)"
    );
}
