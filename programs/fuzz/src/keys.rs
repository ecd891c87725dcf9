//! Well-known addresses and deterministic test keys.

use crate::runtime::Key;

const fn addr(s: &str) -> Key {
    psyche_sdk::base58::address(s).to_bytes()
}

pub const NATIVE_LOADER: Key = addr("NativeLoader1111111111111111111111111111111");
pub const UPGRADEABLE_LOADER: Key = addr("BPFLoaderUpgradeab1e11111111111111111111111");
pub const CLOCK_SYSVAR: Key = addr("SysvarC1ock11111111111111111111111111111111");
pub const RENT_SYSVAR: Key = addr("SysvarRent111111111111111111111111111111111");
pub const SLOT_HASHES_SYSVAR: Key = addr("SysvarS1otHashes111111111111111111111111111");
pub const INSTRUCTIONS_SYSVAR: Key = addr("Sysvar1nstructions1111111111111111111111111");
pub const SYSVAR_OWNER: Key = addr("Sysvar1111111111111111111111111111111111111");
pub const ED25519_PROGRAM: Key = addr("Ed25519SigVerify111111111111111111111111111");

pub const COORDINATOR: Key = psyche_coordinator::ID.to_bytes();
pub const AUTHORIZER: Key = psyche_authorizer_interface::ID.to_bytes();
pub const TREASURER: Key = psyche_treasurer_interface::ID.to_bytes();
pub const COMPETITION: Key = psyche_competition_interface::ID.to_bytes();

/// A deterministic wallet key for a role and index: a point of the curve, as
/// a keypair's public key is (off-curve addresses are PDAs, which cannot sign
/// a transaction).
pub fn key(role: &str, i: u64) -> Key {
    (0u32..)
        .map(|n| psyche_sdk::hash::hashv(&[b"psyche-fuzz:key:", role.as_bytes(), &i.to_le_bytes(), &n.to_le_bytes()]))
        .find(on_curve)
        .unwrap()
}

pub fn on_curve(k: &Key) -> bool {
    curve25519_dalek::edwards::CompressedEdwardsY(*k).decompress().is_some()
}

/// The first 4 bytes in hex, for names in reports.
pub fn short(k: &Key) -> String {
    k[..4].iter().map(|b| format!("{b:02x}")).collect()
}
