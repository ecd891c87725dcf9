//! Mutations of a well-formed instruction: its bytes (bit flips, interesting
//! values, integer overwrites, truncation, extension, another discriminator
//! of the same program, random data) and its accounts (a signature dropped,
//! an attacker signing instead, writability flipped, accounts swapped,
//! duplicated, replaced by another account of the bank, dropped or added,
//! look-alikes: the same bytes at a new address under another owner, and
//! no signature at all).

use crate::builtins::TOKEN_PROGRAM;
use crate::coord::Step;
use crate::gen::Rng;
use crate::keys;
use crate::runtime::{Account, Env, Meta, SYSTEM_PROGRAM};

fn discriminators(program: &[u8; 32]) -> Vec<[u8; 8]> {
    let t: &[(&str, [u8; 8])] = if *program == keys::COORDINATOR {
        &psyche_coordinator::INSTRUCTIONS
    } else if *program == keys::AUTHORIZER {
        &psyche_authorizer::INSTRUCTIONS
    } else if *program == keys::COMPETITION {
        &psyche_competition::INSTRUCTIONS
    } else {
        &psyche_treasurer::INSTRUCTIONS
    };
    t.iter().map(|(_, d)| *d).collect()
}

pub fn mutate(step: &mut Step, env: &Env, rng: &mut Rng) {
    let n = 1 + if rng.one_in(3) { rng.below(3) } else { 0 };
    for _ in 0..n {
        one(step, env, rng);
    }
}

fn one(step: &mut Step, env: &Env, rng: &mut Rng) {
    let ix = &mut step.ix;
    let d = &mut ix.data;
    match rng.below(17) {
        0 if !d.is_empty() => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(d.len() as u64) as usize;
                d[i] ^= 1 << rng.below(8);
            }
        }
        1 if !d.is_empty() => {
            let i = rng.below(d.len() as u64) as usize;
            d[i] = *rng.pick(&[0u8, 1, 2, 0x7f, 0x80, 0xfe, 0xff]);
        }
        2 if d.len() > 8 => {
            // An integer field overwritten in the arguments.
            let w = *rng.pick(&[1usize, 2, 4, 8]);
            let i = 8 + rng.below((d.len() - 8) as u64) as usize;
            let v = rng.interesting_u64().to_le_bytes();
            for (j, b) in v.iter().take(w).enumerate() {
                if let Some(x) = d.get_mut(i + j) {
                    *x = *b;
                }
            }
        }
        3 => {
            let l = rng.below(d.len() as u64 + 1) as usize;
            d.truncate(l);
        }
        4 => {
            for _ in 0..1 + rng.below(64) {
                d.push(rng.next() as u8);
            }
        }
        5 if d.len() >= 8 => {
            let ds = discriminators(&ix.program);
            d[..8].copy_from_slice(&rng.pick(&ds)[..]);
        }
        6 => {
            let l = rng.below(80) as usize;
            *d = (0..l).map(|_| rng.next() as u8).collect();
            if rng.one_in(2) && d.len() >= 8 {
                let ds = discriminators(&ix.program);
                d[..8].copy_from_slice(&rng.pick(&ds)[..]);
            }
        }
        7 => {
            let signers: Vec<usize> = (0..ix.metas.len()).filter(|&i| ix.metas[i].signer).collect();
            if !signers.is_empty() {
                let i = *rng.pick(&signers);
                ix.metas[i].signer = false;
            }
        }
        8 => {
            let signers: Vec<usize> = (0..ix.metas.len()).filter(|&i| ix.metas[i].signer).collect();
            if !signers.is_empty() {
                let i = *rng.pick(&signers);
                let attacker = keys::key("attacker", rng.below(2));
                ix.metas[i].key = attacker;
                step.setup.push((attacker, Account { lamports: 1_000_000_000_000, data: vec![], owner: SYSTEM_PROGRAM, executable: false }));
            }
        }
        9 if !ix.metas.is_empty() => {
            let i = rng.below(ix.metas.len() as u64) as usize;
            ix.metas[i].writable ^= true;
        }
        10 if ix.metas.len() >= 2 => {
            let i = rng.below(ix.metas.len() as u64) as usize;
            let j = rng.below(ix.metas.len() as u64) as usize;
            ix.metas.swap(i, j);
        }
        11 if ix.metas.len() >= 2 => {
            let i = rng.below(ix.metas.len() as u64) as usize;
            let j = rng.below(ix.metas.len() as u64) as usize;
            ix.metas[i].key = ix.metas[j].key;
        }
        12 if !ix.metas.is_empty() => {
            // Another account of the bank in this position.
            let n = env.accounts.len() as u64;
            if let Some(k) = env.accounts.keys().nth(rng.below(n) as usize) {
                let i = rng.below(ix.metas.len() as u64) as usize;
                ix.metas[i].key = *k;
            }
        }
        13 if !ix.metas.is_empty() => {
            // A look-alike: same lamports and data at a fresh address, owned
            // by someone else (anyone can make such an account).
            let i = rng.below(ix.metas.len() as u64) as usize;
            let orig = env.get(&ix.metas[i].key);
            let owner = *rng.pick(&[SYSTEM_PROGRAM, TOKEN_PROGRAM, keys::key("attacker-program", 0), keys::COORDINATOR, keys::AUTHORIZER, keys::TREASURER, keys::COMPETITION]);
            if owner == orig.owner {
                return;
            }
            let fake = keys::key("lookalike", rng.below(1 << 20));
            step.setup.push((fake, Account { lamports: orig.lamports.max(1), data: orig.data, owner, executable: rng.one_in(10) }));
            ix.metas[i].key = fake;
        }
        14 if !ix.metas.is_empty() => {
            let l = rng.below(ix.metas.len() as u64) as usize;
            ix.metas.truncate(l);
        }
        15 => {
            let k = if rng.one_in(2) { keys::key("stranger", rng.below(4)) } else { *rng.pick(&[SYSTEM_PROGRAM, keys::COORDINATOR, keys::CLOCK_SYSVAR]) };
            let at = rng.below(ix.metas.len() as u64 + 1) as usize;
            ix.metas.insert(at, Meta { key: k, signer: false, writable: rng.one_in(2) });
        }
        _ => {
            // Nobody signs.
            for m in ix.metas.iter_mut() {
                m.signer = false;
            }
        }
    }
}
