use super::*;

extern crate std;
use std::boxed::Box;
use std::vec;

use psyche_coordinator_logic::state::{ClientSlot, ACCOUNT_SIZE};

fn addr(b: u8) -> Address {
    Address::new_from_array([b; 32])
}

fn run() -> Run {
    Run {
        bump: 253,
        index: 0x0102_0304_0506_0708,
        main_authority: addr(1),
        join_authority: addr(2),
        coordinator_instance: addr(3),
        coordinator_account: addr(4),
        collateral_mint: addr(5),
        token_program: addr(6),
        total_claimed_points: 77,
        closed: true,
    }
}

#[test]
fn run_round_trip_and_size() {
    let mut data = [0u8; RUN_SPACE];
    run().encode(&mut data).unwrap();
    assert_eq!(Run::decode(&data).unwrap(), run());
    assert_eq!(&data[9..17], &0x0102_0304_0506_0708u64.to_le_bytes());
    let mut short = [0u8; RUN_SPACE - 1];
    assert!(run().encode(&mut short).is_err(), "a short buffer must not hold a run");
}

#[test]
fn participant_round_trip_and_size() {
    let p = Participant { bump: 7, run: addr(1), user: addr(2), earned_points: 3, slashed_points: 4, claimed_points: 5 };
    let mut data = [0u8; PARTICIPANT_SPACE];
    p.encode(&mut data).unwrap();
    assert_eq!(Participant::decode(&data).unwrap(), p);
}

#[test]
fn decode_rejects_malformed_data() {
    let mut good = [0u8; RUN_SPACE];
    run().encode(&mut good).unwrap();
    let mut wrong_disc = good;
    wrong_disc[0] ^= 1;
    let mut bad_bool = good;
    bad_bool[RUN_SPACE - 1] = 2;
    let mut trailing = vec![0u8; RUN_SPACE + 1];
    trailing[..RUN_SPACE].copy_from_slice(&good);
    let mut as_participant = [0u8; RUN_SPACE];
    as_participant.copy_from_slice(&good);
    as_participant[..8].copy_from_slice(&PARTICIPANT_ACCOUNT);
    for (name, data) in [
        ("empty", &[][..]),
        ("truncated", &good[..RUN_SPACE - 1]),
        ("wrong discriminator", &wrong_disc[..]),
        ("bool tag 2", &bad_bool[..]),
        ("trailing byte", &trailing[..]),
        ("participant discriminator", &as_participant[..]),
    ] {
        assert!(Run::decode(data).is_err(), "{name} decoded");
    }
    assert!(Participant::decode(&good).is_err(), "a run decoded as a participant");
}

#[test]
fn claims_pay_earned_minus_slashed_once() {
    struct Case {
        name: &'static str,
        start: (u64, u64, u64),
        settle: (u64, u64),
        pays: u64,
        after: (u64, u64, u64),
    }
    let cases = [
        Case { name: "first claim", start: (0, 0, 0), settle: (100, 0), pays: 100, after: (100, 0, 100) },
        Case { name: "second claim", start: (100, 0, 100), settle: (0, 0), pays: 0, after: (100, 0, 100) },
        Case { name: "new points", start: (100, 0, 100), settle: (30, 0), pays: 30, after: (130, 0, 130) },
        Case { name: "slashed", start: (0, 0, 0), settle: (100, 40), pays: 60, after: (100, 40, 60) },
        Case { name: "slash after a claim is a debt", start: (100, 0, 100), settle: (0, 25), pays: 0, after: (100, 25, 100) },
        Case { name: "debt repaid from new points", start: (100, 25, 100), settle: (40, 0), pays: 15, after: (140, 25, 115) },
        Case { name: "slash over earned", start: (0, 0, 0), settle: (5, 9), pays: 0, after: (5, 9, 0) },
    ];
    for c in cases {
        let mut p = Participant {
            bump: 1,
            run: addr(1),
            user: addr(2),
            earned_points: c.start.0,
            slashed_points: c.start.1,
            claimed_points: c.start.2,
        };
        assert_eq!(p.settle_and_claim(c.settle.0, c.settle.1), Ok(c.pays), "{}", c.name);
        assert_eq!((p.earned_points, p.slashed_points, p.claimed_points), c.after, "{}", c.name);
        assert!(p.claimed_points <= p.earned_points, "{}: claimed more than earned", c.name);
    }
}

#[test]
fn claim_overflow_is_an_error() {
    let mut p = Participant { bump: 1, run: addr(1), user: addr(2), earned_points: u64::MAX, slashed_points: 0, claimed_points: 0 };
    assert_eq!(p.settle_and_claim(1, 0), Err(TreasurerError::MathOverflow));
    let mut p = Participant { bump: 1, run: addr(1), user: addr(2), earned_points: 0, slashed_points: u64::MAX, claimed_points: 0 };
    assert_eq!(p.settle_and_claim(0, 1), Err(TreasurerError::MathOverflow));
}

/// A zeroed state on the heap (8-aligned, like the account data after its discriminator).
fn state() -> Box<[u64]> {
    vec![0u64; (ACCOUNT_SIZE - 8) / 8].into_boxed_slice()
}

fn view(words: &mut [u64]) -> &mut CoordinatorState {
    // SAFETY: a u64 slice is 8-aligned and the length matches the state.
    let bytes = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) };
    CoordinatorState::from_bytes_mut(bytes).unwrap()
}

fn slot(signer: u8, earned: u64, slashed: u64) -> ClientSlot {
    ClientSlot {
        signer: [signer; 32],
        p2p_identity: [0; 32],
        earned,
        slashed,
        last_finished_epoch: 0,
        occupied: 1,
        pending: 0,
        in_epoch: 0,
        has_finished: 0,
        state_after: [0; 32],
        unvested: [0; 4],
        burned: 0,
        last_fault_epoch: 0,
        has_fault: 0,
        transients: 0,
        open_disputes: 0,
        _padding: 0,
    }
}

#[test]
fn points_and_reserve_read_from_the_coordinator() {
    let mut words = state();
    let s = view(&mut words);
    s.clients[0] = slot(10, 50, 0);
    s.clients[1] = slot(11, 30, 40);
    s.clients[2] = slot(12, 20, 5);
    // An unoccupied slot's leftovers never count.
    s.clients[3] = ClientSlot { occupied: 0, ..slot(13, 1000, 0) };
    assert_eq!(client_points(s, &addr(11)), Some((30, 40)));
    assert_eq!(client_points(s, &addr(13)), None);
    assert_eq!(client_points(s, &addr(99)), None);
    assert_eq!(reserved_points(s), Ok(50 + 15));
    s.clients[4] = slot(14, u64::MAX, 0);
    assert_eq!(reserved_points(s), Err(TreasurerError::MathOverflow));
}

#[test]
fn only_a_finished_run_is_withdrawable() {
    let mut words = state();
    let s = view(&mut words);
    for (tag, ok) in [(0u8, false), (1, false), (2, false), (3, false), (4, false), (5, false), (6, true), (7, false), (200, false)] {
        s.run_state = tag;
        assert_eq!(withdrawable(s), ok, "run state {tag}");
    }
}

/// The program, its IDL and the Go bindings must agree; this side checks the
/// constants against idl/psyche_treasurer.json and idl/psyche_coordinator.json.
#[test]
fn matches_idl() {
    let idl = psyche_idl::committed("psyche_treasurer");
    assert_eq!(base58::decode_32(idl["address"].as_str().unwrap()), Some(ID.to_bytes()));
    let coordinator = psyche_idl::committed("psyche_coordinator");
    assert_eq!(base58::decode_32(coordinator["address"].as_str().unwrap()), Some(COORDINATOR_ID.to_bytes()));
    let errors = idl["errors"].as_array().unwrap();
    assert_eq!(errors.len(), ERRORS.len());
    for (e, o) in errors.iter().zip(ERRORS) {
        assert_eq!(e["code"].as_u64(), Some(o.code() as u64));
        assert_eq!(e["name"].as_str(), Some(o.name()));
        assert_eq!(e["msg"].as_str(), Some(o.message()));
    }
}

#[test]
fn errors_are_numbered_in_order() {
    for (i, e) in ERRORS.iter().enumerate() {
        assert_eq!(e.code(), 6000 + i as u32, "{}", e.name());
    }
}
