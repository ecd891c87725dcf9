//! Program derived addresses, natively: sha256(seeds || program || marker),
//! valid when the hash is not an Ed25519 point.

use curve25519_dalek::edwards::CompressedEdwardsY;

use crate::runtime::Key;

/// The address for `seeds` (bump included) under `program`, or None when it
/// lies on the curve or the seeds exceed the runtime's limits.
pub fn create_program_address(seeds: &[&[u8]], program: &Key) -> Option<Key> {
    if seeds.len() > 16 || seeds.iter().any(|s| s.len() > 32) {
        return None;
    }
    let mut parts: Vec<&[u8]> = seeds.to_vec();
    parts.push(program);
    parts.push(b"ProgramDerivedAddress");
    let h = psyche_sdk::hash::hashv(&parts);
    if CompressedEdwardsY(h).decompress().is_some() {
        return None;
    }
    Some(h)
}

/// The canonical (highest) bump's address.
pub fn find_program_address(seeds: &[&[u8]], program: &Key) -> Option<(Key, u8)> {
    (0..=255u8).rev().find_map(|b| {
        let bump = [b];
        let mut all = seeds.to_vec();
        all.push(&bump);
        create_program_address(&all, program).map(|k| (k, b))
    })
}
