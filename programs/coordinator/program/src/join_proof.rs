//! Proof that join_run's signer holds the p2p key it registers: an Ed25519
//! signature-verify instruction in the same transaction, checked by the
//! runtime, over `JOIN_PROOF_DOMAIN || program || coordinator_account ||
//! signer` by the p2p key. Without it anyone could register a member's p2p
//! identity first and lock the member out (`P2pIdentityTaken`).
//!
//! The program finds that instruction through the Instructions sysvar. Only
//! signatures whose key, message and signature all lie in the Ed25519
//! instruction's own data count: the runtime verified exactly those bytes.

use psyche_sdk::{base58, Address};

/// The Instructions sysvar, passed to join_run as an account.
pub const INSTRUCTIONS_SYSVAR: Address = base58::address("Sysvar1nstructions1111111111111111111111111");
/// The Ed25519 signature-verify precompile.
pub const ED25519_PROGRAM: Address = base58::address("Ed25519SigVerify111111111111111111111111111");
/// The message's first bytes, naming what is signed and its version.
pub const JOIN_PROOF_DOMAIN: &[u8; 18] = b"psyche:join_run:v1";
/// The signed message's length.
pub const JOIN_PROOF_LEN: usize = 18 + 3 * 32;

/// The message the p2p key signs for `signer` joining the run whose account
/// is `account`, in `program`.
pub fn join_message(program: &[u8; 32], account: &[u8; 32], signer: &[u8; 32]) -> [u8; JOIN_PROOF_LEN] {
    let mut m = [0u8; JOIN_PROOF_LEN];
    m[..18].copy_from_slice(JOIN_PROOF_DOMAIN);
    m[18..50].copy_from_slice(program);
    m[50..82].copy_from_slice(account);
    m[82..].copy_from_slice(signer);
    m
}

/// Ed25519 instruction offsets that point into the instruction itself.
const THIS_INSTRUCTION: u16 = u16::MAX;

/// Whether the Instructions sysvar data `ix` holds an Ed25519 instruction
/// that verified a signature by `key` over `message`. Malformed data is no
/// proof.
pub fn proven(ix: &[u8], key: &[u8; 32], message: &[u8]) -> bool {
    let Some(count) = u16_at(ix, 0) else { return false };
    (0..count).any(|i| {
        // Note: i < count <= u16::MAX, so 2 + 2i fits in usize.
        #[allow(clippy::arithmetic_side_effects)]
        let at = 2 + 2 * usize::from(i);
        u16_at(ix, at).and_then(|off| ed25519_data(ix, usize::from(off))).is_some_and(|d| signs(d, key, message))
    })
}

/// The data of the instruction serialized at `off`, if it is the Ed25519
/// program's: u16 account count, (u8 flags, [32] key) per account, [32]
/// program id, u16 data length, data.
fn ed25519_data(ix: &[u8], off: usize) -> Option<&[u8]> {
    let accounts = usize::from(u16_at(ix, off)?);
    let program_at = off.checked_add(2)?.checked_add(accounts.checked_mul(33)?)?;
    let program = ix.get(program_at..program_at.checked_add(32)?)?;
    if program != ED25519_PROGRAM.as_ref() {
        return None;
    }
    let len_at = program_at.checked_add(32)?;
    let len = usize::from(u16_at(ix, len_at)?);
    let start = len_at.checked_add(2)?;
    ix.get(start..start.checked_add(len)?)
}

/// Whether Ed25519 instruction data `d` (u8 count, u8 padding, then per
/// signature 7 u16: signature offset and instruction, key offset and
/// instruction, message offset, size and instruction) verifies `key` over
/// `message` from its own bytes.
fn signs(d: &[u8], key: &[u8; 32], message: &[u8]) -> bool {
    let Some(&count) = d.first() else { return false };
    (0..usize::from(count)).any(|j| {
        // Note: j < 256, so the header offset is small.
        #[allow(clippy::arithmetic_side_effects)]
        let h = 2 + 14 * j;
        let f = |k: usize| k.checked_mul(2).and_then(|o| h.checked_add(o)).and_then(|at| u16_at(d, at));
        let (Some(_sig), Some(sig_ix), Some(key_off), Some(key_ix), Some(msg_off), Some(msg_len), Some(msg_ix)) =
            (f(0), f(1), f(2), f(3), f(4), f(5), f(6))
        else {
            return false;
        };
        if sig_ix != THIS_INSTRUCTION || key_ix != THIS_INSTRUCTION || msg_ix != THIS_INSTRUCTION {
            return false;
        }
        let (key_off, msg_off, msg_len) = (usize::from(key_off), usize::from(msg_off), usize::from(msg_len));
        let signed_key = key_off.checked_add(32).and_then(|end| d.get(key_off..end));
        let signed_msg = msg_off.checked_add(msg_len).and_then(|end| d.get(msg_off..end));
        signed_key == Some(key.as_slice()) && signed_msg == Some(message)
    })
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    /// Ed25519 instruction data for one signature, its key, signature and
    /// message inside it (offsets as solana-sdk's builder lays them out).
    pub(crate) fn ed25519_ix(key: &[u8; 32], message: &[u8], ix_index: u16) -> Vec<u8> {
        let (key_off, sig_off, msg_off) = (16u16, 48u16, 112u16);
        let mut d = vec![1u8, 0];
        for v in [sig_off, ix_index, key_off, ix_index, msg_off, message.len() as u16, ix_index] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(key);
        d.extend_from_slice(&[7u8; 64]); // the runtime checked it; the program does not look
        d.extend_from_slice(message);
        d
    }

    /// Instructions sysvar data: the instructions (program, data), then the
    /// current index.
    fn sysvar(ixs: &[(&Address, Vec<u8>)], current: u16) -> Vec<u8> {
        let mut head = (ixs.len() as u16).to_le_bytes().to_vec();
        let mut body = Vec::new();
        let base = 2 + 2 * ixs.len();
        for (program, data) in ixs {
            head.extend_from_slice(&((base + body.len()) as u16).to_le_bytes());
            body.extend_from_slice(&1u16.to_le_bytes()); // one account
            body.push(0);
            body.extend_from_slice(&[9u8; 32]);
            body.extend_from_slice(program.as_ref());
            body.extend_from_slice(&(data.len() as u16).to_le_bytes());
            body.extend_from_slice(data);
        }
        head.extend_from_slice(&body);
        head.extend_from_slice(&current.to_le_bytes());
        head
    }

    #[test]
    fn finds_the_proof_and_nothing_else() {
        let (key, other) = ([1u8; 32], [2u8; 32]);
        let msg = join_message(&[3; 32], &[4; 32], &[5; 32]);
        let join = Address::new_from_array([6; 32]);
        let good = sysvar(&[(&ED25519_PROGRAM, ed25519_ix(&key, &msg, THIS_INSTRUCTION)), (&join, vec![1, 2])], 1);
        assert!(proven(&good, &key, &msg));
        assert!(!proven(&good, &other, &msg), "another key");
        let mut msg2 = msg;
        msg2[JOIN_PROOF_LEN - 1] ^= 1;
        assert!(!proven(&good, &key, &msg2), "another signer");
        // Offsets into another instruction: the runtime verified other bytes.
        let elsewhere = sysvar(&[(&ED25519_PROGRAM, ed25519_ix(&key, &msg, 1)), (&join, vec![])], 1);
        assert!(!proven(&elsewhere, &key, &msg));
        // The same data under another program id proves nothing.
        let fake = sysvar(&[(&join, ed25519_ix(&key, &msg, THIS_INSTRUCTION))], 0);
        assert!(!proven(&fake, &key, &msg));
        // Truncations anywhere are no proof, and never panic.
        for n in 0..good.len() {
            let _ = proven(&good[..n], &key, &msg);
        }
        assert!(!proven(&[], &key, &msg));
        let mut short = ed25519_ix(&key, &msg, THIS_INSTRUCTION);
        short.truncate(short.len() - 1);
        assert!(!proven(&sysvar(&[(&ED25519_PROGRAM, short)], 0), &key, &msg));
    }
}
