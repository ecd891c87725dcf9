//! Hand-built reproducers for what the fuzzer found, as corpus entries
//! (`psyche-fuzz --repro FILE` runs one).
//!
//! `cooldown_tick(n)`: a Coordinator run of `n` members at the end of
//! Cooldown (every round met quorum), and the `tick` that ends the epoch.
//! Ending an epoch elects each member's checkpointer flag with one
//! swap-or-not position (`elected_checkpointer`: 90 rounds, 180 SHA-256), so
//! the tick costs about 21,000 CU per member.

use psyche_coordinator_logic::bloom::Bloom;
use psyche_coordinator_logic::machine::{Clock, Update, WitnessReport};
use psyche_coordinator_logic::selection::{self, Entropy};
use psyche_coordinator_logic::state::{client_state, CoordinatorState, RunState, ACCOUNT_SIZE};

use crate::coord;
use crate::fuzz::Entry;
use crate::keys::{self, key};
use crate::runtime::{Account, Instr, Meta, Sysvars};
use crate::worlds::Program;

pub fn cooldown_tick(n: u16) -> Entry {
    let mut words = vec![0u64; ACCOUNT_SIZE / 8];
    // SAFETY: a u64 buffer viewed as bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, ACCOUNT_SIZE) };
    let run_id = b"cu-repro".to_vec();
    let (authority, join_authority) = (key("authority", 0), key("join-authority", 0));
    let mut now = 1_700_000_000i64;
    let mut slot = 1000u64;
    {
        let s = CoordinatorState::from_bytes_mut(&mut bytes[8..]).unwrap();
        let clock = |now: i64, slot: u64| Clock { unix_timestamp: now, slot, entropy: Entropy { slot, slot_hash: psyche_sdk::hash::hashv(&[&slot.to_le_bytes()]) }, drawn: None };
        s.init(&run_id, b"v1").unwrap();
        let batch = n.max(8);
        let config = psyche_coordinator_logic::state::CoordinatorConfig {
            init_min_clients: n,
            global_batch_size_start: batch,
            global_batch_size_end: batch,
            epoch_time: 100,
            warmup_time: 30,
            ..coord::base_config()
        };
        let model = coord::valid_model(false);
        s.update(&Update { config: Some(&config), model: Some(&model), ..Default::default() }).unwrap();
        s.set_paused(false, &clock(now, slot)).unwrap();
        for i in 0..u64::from(n) {
            s.join(&key("user", i), &key("p2p", i), &clock(now, slot)).unwrap();
        }
        for _ in 0..10_000 {
            now += 1;
            slot += 2;
            let c = clock(now, slot);
            match s.run_state().unwrap() {
                RunState::Cooldown => break,
                RunState::Warmup => {
                    let members: Vec<[u8; 32]> = (0..s.epoch.clients_len as usize).map(|i| s.epoch_client(i).unwrap().1.signer).collect();
                    for m in members {
                        if s.run_state().unwrap() == RunState::Warmup {
                            let _ = s.warmup_witness(&m, &c);
                        }
                    }
                }
                RunState::RoundTrain => {
                    let r = *s.current_round();
                    let healthy: Vec<[u8; 32]> = (0..r.clients_len as usize)
                        .filter(|&i| s.epoch.clients[i].state == client_state::HEALTHY)
                        .map(|i| s.epoch_client(i).unwrap().1.signer)
                        .collect();
                    for i in 0..r.clients_len {
                        if !selection::is_witness(i, r.clients_len, s.config.witness_nodes, &r.seed) {
                            continue;
                        }
                        let mut participant = Bloom::new(1024, 6, [i as u8; 8]).unwrap();
                        for k in &healthy {
                            participant.add(k);
                        }
                        let report = WitnessReport {
                            step: s.progress.step,
                            index: i,
                            participant_bloom: participant,
                            broadcast_bloom: Bloom::new(512, 4, [9; 8]).unwrap(),
                            broadcast_merkle: [3; 32],
                        };
                        let signer = s.epoch_client(i as usize).unwrap().1.signer;
                        if s.run_state().unwrap() == RunState::RoundTrain {
                            s.witness(&signer, &report, &c).unwrap();
                        }
                    }
                }
                _ => {
                    let _ = s.tick(&c);
                }
            }
        }
        assert_eq!(s.run_state().unwrap(), RunState::Cooldown, "the run reaches Cooldown");
        now = s.run_state_start + s.config.cooldown_time as i64;
    }
    bytes[..8].copy_from_slice(&psyche_coordinator::COORDINATOR_ACCOUNT);
    let account = key("coordinator-account", 0);
    let (instance, bump) = crate::pda::find_program_address(&[b"coordinator", &run_id], &keys::COORDINATOR).unwrap();
    let mut inst = psyche_coordinator::COORDINATOR_INSTANCE.to_vec();
    inst.push(bump);
    inst.extend_from_slice(&authority);
    inst.extend_from_slice(&join_authority);
    inst.extend_from_slice(&account);
    inst.extend_from_slice(&(run_id.len() as u32).to_le_bytes());
    inst.extend_from_slice(&run_id);
    let sv = Sysvars::default();
    let user = key("user", 0);
    Entry {
        program: Program::Coordinator,
        sysvars: Sysvars { unix_timestamp: now + 1, slot: slot + 2, ..sv },
        accounts: vec![
            (user, Account { lamports: 1_000_000_000, data: vec![], owner: [0; 32], executable: false }),
            (instance, Account { lamports: sv.rent_minimum(inst.len()), data: inst, owner: keys::COORDINATOR, executable: false }),
            (account, Account { lamports: sv.rent_minimum(ACCOUNT_SIZE), data: bytes.to_vec(), owner: keys::COORDINATOR, executable: false }),
        ],
        ix: Instr {
            program: keys::COORDINATOR,
            metas: vec![Meta::s(user), Meta::ro(instance), Meta::w(account)],
            data: psyche_coordinator::TICK.to_vec(),
        },
        label: format!("coordinator tick ending the epoch of {n} members (Cooldown -> WaitingForMembers)"),
    }
}
