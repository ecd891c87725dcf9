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
        join_deposit: 88,
        total_deposits: 99,
        total_burned: 111,
        unclaimed_settled_points: 122,
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
    let p = Participant {
        earned_points: 3,
        slashed_points: 4,
        claimed_points: 5,
        deposit: 6,
        deposit_epoch: 7,
        deposited: true,
        has_fault: true,
        last_fault_epoch: 8,
        burned_points: 9,
        burned_deposit: 10,
        ..Participant::new(7, addr(1), addr(2))
    };
    let mut data = [0u8; PARTICIPANT_SPACE];
    p.encode(&mut data).unwrap();
    assert_eq!(Participant::decode(&data).unwrap(), p);
    assert!(p.encode(&mut [0u8; PARTICIPANT_SPACE - 1]).is_err(), "a short buffer must not hold a participant");
    assert!(Participant::decode(&data[..PARTICIPANT_SPACE - 1]).is_err());
}

#[test]
fn decode_rejects_malformed_data() {
    let mut good = [0u8; RUN_SPACE];
    run().encode(&mut good).unwrap();
    let mut wrong_disc = good;
    wrong_disc[0] ^= 1;
    let mut bad_bool = good;
    bad_bool[RUN_SPACE - 33] = 2;
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

/// A run with nothing claimed or settled yet.
fn fresh_run() -> Run {
    Run { total_claimed_points: 0, unclaimed_settled_points: 0, ..run() }
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
            earned_points: c.start.0,
            slashed_points: c.start.1,
            claimed_points: c.start.2,
            ..Participant::new(1, addr(1), addr(2))
        };
        let mut r = fresh_run();
        assert_eq!(r.claim(&mut p, c.settle.0, c.settle.1), Ok(c.pays), "{}", c.name);
        assert_eq!((p.earned_points, p.slashed_points, p.claimed_points), c.after, "{}", c.name);
        assert!(p.claimed_points <= p.earned_points, "{}: claimed more than earned", c.name);
        assert_eq!((r.total_claimed_points, r.unclaimed_settled_points), (c.pays, 0), "{}", c.name);
        assert_eq!(p.owed(), 0, "{}: a claim leaves nothing owed", c.name);
    }
}

#[test]
fn claim_overflow_is_an_error() {
    let mut r = fresh_run();
    for mut p in [
        Participant { earned_points: u64::MAX, ..Participant::new(1, addr(1), addr(2)) },
        Participant { slashed_points: u64::MAX, ..Participant::new(1, addr(1), addr(2)) },
    ] {
        let before = p.clone();
        assert_eq!(r.claim(&mut p, 1, 1), Err(TreasurerError::MathOverflow));
        assert_eq!(r.settle(&mut p, 1, 1), Err(TreasurerError::MathOverflow));
        assert_eq!(p, before, "a failed claim or settle changed the record");
    }
    let mut p = Participant::new(1, addr(1), addr(2));
    let mut full = Run { total_claimed_points: u64::MAX, ..fresh_run() };
    assert_eq!(full.claim(&mut p, 1, 0), Err(TreasurerError::MathOverflow));
    assert_eq!((p.earned_points, full.total_claimed_points), (0, u64::MAX), "nothing changes on an error");
    assert_eq!(r, fresh_run());
}

#[test]
fn a_settle_pays_nothing_and_reserves_what_the_record_owes() {
    let mut r = fresh_run();
    let mut p = Participant::new(1, addr(1), addr(2));
    assert_eq!(r.settle(&mut p, 0, 0), Err(TreasurerError::NothingToSettle));
    assert_eq!(r.settle(&mut p, 100, 30), Ok(70));
    assert_eq!((p.earned_points, p.slashed_points, p.claimed_points, r.unclaimed_settled_points), (100, 30, 0, 70));
    assert_eq!(r.total_claimed_points, 0, "a settle pays nothing");
    // A slash alone lowers what is owed, and the reserve with it.
    assert_eq!(r.settle(&mut p, 0, 50), Ok(20));
    assert_eq!(r.unclaimed_settled_points, 20);
    // More slashes than the rest: a debt, nothing owed or reserved.
    assert_eq!(r.settle(&mut p, 0, 45), Ok(0));
    assert_eq!(r.unclaimed_settled_points, 0);
    assert_eq!(r.settle(&mut p, 40, 0), Ok(15), "new points repay the debt first");
    // The claim pays what the record owes and releases its reserve.
    assert_eq!(r.claim(&mut p, 0, 0), Ok(15));
    assert_eq!((p.claimed_points, r.unclaimed_settled_points, r.total_claimed_points), (15, 0, 15));
    assert_eq!(r.claim(&mut p, 0, 0), Ok(0));
    // Two users' records add up in the run.
    let mut q = Participant::new(1, addr(1), addr(3));
    assert_eq!(r.settle(&mut p, 10, 0), Ok(10));
    assert_eq!(r.settle(&mut q, 7, 2), Ok(5));
    assert_eq!(r.unclaimed_settled_points, 15);
    assert_eq!(r.claim(&mut q, 1, 0), Ok(6), "a claim pays the settled points and the slot's new ones");
    assert_eq!(r.unclaimed_settled_points, 10);
    // A run that reserves less than a record owes is inconsistent: refused, nothing changes.
    let mut broken = Run { unclaimed_settled_points: 3, ..fresh_run() };
    let before = (broken.clone(), p.clone());
    assert_eq!(broken.claim(&mut p, 0, 0), Err(TreasurerError::MathOverflow));
    assert_eq!(broken.settle(&mut p, 1, 0), Err(TreasurerError::MathOverflow));
    assert_eq!((broken, p), before);
    let mut p = Participant::new(1, addr(1), addr(2));
    let mut full = Run { unclaimed_settled_points: u64::MAX, ..fresh_run() };
    assert_eq!(full.settle(&mut p, 1, 0), Err(TreasurerError::MathOverflow));
    assert_eq!(p.earned_points, 0);
}

/// Points reach a slot over time; the user claims now and then. In one
/// world nobody else acts; in the other third parties settle the slot at
/// random times. Every claim pays the same in both, the records agree after
/// each claim, and the run always reserves what a claim would pay.
#[test]
fn settles_pay_nothing_and_keep_every_later_claim_exact() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..3000 {
        let (mut plain_run, mut settled_run) = (fresh_run(), fresh_run());
        let mut plain = Participant::new(1, addr(1), addr(2));
        let mut settled = plain.clone();
        let (mut plain_slot, mut settled_slot) = ((0u64, 0u64), (0u64, 0u64));
        let mut settles = 0;
        for step in 0..16 {
            match next(5) {
                0 | 1 => {
                    let earned = next(100);
                    let slashed = if next(3) == 0 { next(120) } else { 0 };
                    for s in [&mut plain_slot, &mut settled_slot] {
                        s.0 += earned;
                        s.1 += slashed;
                    }
                }
                2 | 3 => {
                    let got = settled_run.settle(&mut settled, settled_slot.0, settled_slot.1);
                    if settled_slot == (0, 0) {
                        assert_eq!(got, Err(TreasurerError::NothingToSettle));
                    } else {
                        assert_eq!(got, Ok(settled.owed()));
                        settled_slot = (0, 0);
                        settles += 1;
                    }
                }
                _ => {
                    let a = plain_run.claim(&mut plain, plain_slot.0, plain_slot.1).unwrap();
                    let b = settled_run.claim(&mut settled, settled_slot.0, settled_slot.1).unwrap();
                    assert_eq!(a, b, "step {step}: a claim after settles paid {b}, without them {a}");
                    assert_eq!(plain, settled, "step {step}");
                    plain_slot = (0, 0);
                    settled_slot = (0, 0);
                }
            }
            assert_eq!(settled_run.unclaimed_settled_points, settled.owed(), "step {step}");
            assert_eq!(plain_run.unclaimed_settled_points, 0);
            // The reserve (the run's settled points + the slot's earned -
            // slashed) covers what a claim would pay now.
            let would_pay = settled_run.clone().claim(&mut settled.clone(), settled_slot.0, settled_slot.1).unwrap();
            assert!(would_pay <= settled_run.unclaimed_settled_points + settled_slot.0.saturating_sub(settled_slot.1), "step {step}");
        }
        let a = plain_run.claim(&mut plain, plain_slot.0, plain_slot.1).unwrap();
        let b = settled_run.claim(&mut settled, settled_slot.0, settled_slot.1).unwrap();
        assert_eq!(a, b);
        assert_eq!(plain, settled);
        assert_eq!(plain_run, settled_run, "after {settles} settles");
        assert_eq!((settled.owed(), settled_run.unclaimed_settled_points), (0, 0), "the last claim paid everything");
    }
}

#[test]
fn claims_without_a_slot_pay_from_the_record() {
    let none = Participant::new(1, addr(1), addr(2));
    assert_eq!(none.claim_points(None), Err(TreasurerError::UserNotInRun));
    assert_eq!(none.claim_points(Some(&slot(2, 7, 3))), Ok((7, 3)));
    let settled = Participant { earned_points: 5, ..none.clone() };
    assert_eq!(settled.claim_points(None), Ok((0, 0)), "its slot was settled and reused");
    let slashed = Participant { slashed_points: 5, ..none };
    assert_eq!(slashed.claim_points(None), Ok((0, 0)));
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
        forgiven: 0,
        open_disputes: 0,
        checkpointer: 0,
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
fn the_reserve_counts_claims_unvested_burned_points_and_deposits() {
    let mut words = state();
    let s = view(&mut words);
    s.clients[0] = slot(10, 50, 0);
    s.clients[1] = ClientSlot { unvested: [1, 2, 3, 4], burned: 7, ..slot(11, 30, 40) };
    s.clients[2] = ClientSlot { burned: 100, ..slot(12, 0, 0) };
    // An unoccupied slot's leftovers never count.
    s.clients[3] = ClientSlot { occupied: 0, unvested: [9; 4], burned: 9, ..slot(13, 0, 0) };
    let r = reserve(s).unwrap();
    assert_eq!(r, Reserve { claims: 50, unvested: 10, burned: 107 });
    assert_eq!(reserved_points(s), Ok(167));
    let mut closed = run();
    closed.total_deposits = 300;
    closed.unclaimed_settled_points = 0;
    assert_eq!(reserved_tokens(&closed, Some(s)), Ok(467));
    assert_eq!(reserved_tokens(&closed, None), Ok(300), "a closed run keeps only the deposits");
    closed.unclaimed_settled_points = 20;
    assert_eq!(reserved_tokens(&closed, Some(s)), Ok(487), "points settled into records stay reserved");
    closed.unclaimed_settled_points = u64::MAX;
    assert_eq!(reserved_tokens(&closed, None), Err(TreasurerError::MathOverflow));
    s.clients[4] = ClientSlot { unvested: [u64::MAX, 1, 0, 0], ..slot(14, 0, 0) };
    assert_eq!(reserve(s), Err(TreasurerError::MathOverflow));
    s.clients[4] = ClientSlot { burned: u64::MAX, ..slot(14, 0, 0) };
    assert_eq!(reserved_points(s), Err(TreasurerError::MathOverflow));
}

#[test]
fn closing_needs_nothing_reserved() {
    let mut words = state();
    let s = view(&mut words);
    let mut r = fresh_run();
    r.total_deposits = 0;
    s.clients[0] = slot(10, 5, 9); // slashes over earnings: nothing to claim
    assert_eq!(check_closable(&r, s), Ok(()));
    for (name, c, want) in [
        ("points to claim", slot(11, 5, 0), TreasurerError::UnclaimedPointsRemain),
        ("unvested points", ClientSlot { unvested: [0, 0, 1, 0], ..slot(11, 0, 0) }, TreasurerError::UnvestedPointsRemain),
        ("burned points", ClientSlot { burned: 1, ..slot(11, 0, 0) }, TreasurerError::BurnPending),
    ] {
        s.clients[1] = c;
        assert_eq!(check_closable(&r, s), Err(want), "{name}");
    }
    s.clients[1] = slot(11, 0, 0);
    r.unclaimed_settled_points = 1;
    assert_eq!(check_closable(&r, s), Err(TreasurerError::UnclaimedPointsRemain), "settled points to claim");
    r.unclaimed_settled_points = 0;
    r.total_deposits = 1;
    assert_eq!(check_closable(&r, s), Err(TreasurerError::DepositsRemain));
}

#[test]
fn only_a_run_that_grants_joins_takes_deposits() {
    let mut r = run();
    let me = addr(42);
    assert_eq!(r.set_join_deposit(&me, 5), Err(TreasurerError::JoinNotThroughTreasurer));
    assert_eq!(r.join_deposit, 88, "a refused change changes nothing");
    assert_eq!(r.set_join_deposit(&me, 0), Ok(()), "no deposit needs no join authority");
    r.join_authority = me.clone();
    assert_eq!(r.set_join_deposit(&me, 5), Ok(()));
    assert_eq!(r.join_deposit, 5);
}

fn faulted(epoch: u32) -> ClientSlot {
    ClientSlot { has_fault: 1, last_fault_epoch: epoch, ..slot(2, 0, 0) }
}

/// A run at `me` that grants joins itself and asks for a deposit of 25.
fn deposit_run(me: &Address) -> Run {
    Run { join_authority: me.clone(), join_deposit: 25, total_deposits: 0, ..run() }
}

#[test]
fn deposits_are_checked_and_recorded_with_their_epoch() {
    let me = addr(42);
    let r = deposit_run(&me);
    let at = |epoch| RunPhase { epoch, finished: false, current_slashing: 5, future_slashing: 5 };
    let slashing = |current_slashing, future_slashing| RunPhase { current_slashing, future_slashing, ..at(3) };
    let fresh = || Participant::new(1, me.clone(), addr(2));
    let held = Participant { deposit: 25, deposit_epoch: 1, deposited: true, ..fresh() };
    struct Case {
        name: &'static str,
        run: Run,
        record: Participant,
        slot: Option<ClientSlot>,
        phase: RunPhase,
        amount: u64,
        want: Result<(), TreasurerError>,
    }
    let cases = [
        Case { name: "plain", run: r.clone(), record: fresh(), slot: None, phase: at(3), amount: 25, want: Ok(()) },
        Case { name: "member", run: r.clone(), record: fresh(), slot: Some(slot(2, 0, 0)), phase: at(3), amount: 25, want: Ok(()) },
        Case { name: "an old fault", run: r.clone(), record: fresh(), slot: Some(faulted(2)), phase: at(3), amount: 25, want: Ok(()) },
        Case {
            name: "join authority elsewhere",
            run: Run { join_authority: addr(7), ..r.clone() },
            record: fresh(),
            slot: None,
            phase: at(3),
            amount: 25,
            want: Err(TreasurerError::JoinNotThroughTreasurer),
        },
        Case {
            name: "finished",
            run: r.clone(),
            record: fresh(),
            slot: None,
            phase: RunPhase { finished: true, ..at(3) },
            amount: 25,
            want: Err(TreasurerError::RunFinished),
        },
        Case { name: "other amount", run: r.clone(), record: fresh(), slot: None, phase: at(3), amount: 24, want: Err(TreasurerError::DepositMismatch) },
        Case { name: "twice", run: r.clone(), record: held.clone(), slot: None, phase: at(3), amount: 25, want: Err(TreasurerError::DepositAlreadyMade) },
        Case {
            name: "a fault this epoch (slot)",
            run: r.clone(),
            record: fresh(),
            slot: Some(faulted(3)),
            phase: at(3),
            amount: 25,
            want: Err(TreasurerError::FaultThisEpoch),
        },
        Case {
            name: "a fault this epoch (record)",
            run: r.clone(),
            record: Participant { has_fault: true, last_fault_epoch: 3, ..fresh() },
            slot: None,
            phase: at(3),
            amount: 25,
            want: Err(TreasurerError::FaultThisEpoch),
        },
        // F5: a fault that slashes nothing can leave no trace.
        Case {
            name: "no slashing in the coming epochs",
            run: r.clone(),
            record: fresh(),
            slot: None,
            phase: slashing(5, 0),
            amount: 25,
            want: Err(TreasurerError::ZeroSlashingRate),
        },
        Case { name: "no slashing now, out of the epoch", run: r.clone(), record: fresh(), slot: Some(slot(2, 0, 0)), phase: slashing(0, 5), amount: 25, want: Ok(()) },
        Case {
            name: "no slashing now, pending for the next epoch",
            run: r.clone(),
            record: fresh(),
            slot: Some(ClientSlot { pending: 1, ..slot(2, 0, 0) }),
            phase: slashing(0, 5),
            amount: 25,
            want: Ok(()),
        },
        Case {
            name: "no slashing now, in the epoch",
            run: r.clone(),
            record: fresh(),
            slot: Some(ClientSlot { in_epoch: 1, ..slot(2, 0, 0) }),
            phase: slashing(0, 5),
            amount: 25,
            want: Err(TreasurerError::ZeroSlashingRate),
        },
        Case {
            name: "no slashing now, named by an open dispute",
            run: r.clone(),
            record: fresh(),
            slot: Some(ClientSlot { open_disputes: 1, ..slot(2, 0, 0) }),
            phase: slashing(0, 5),
            amount: 25,
            want: Err(TreasurerError::ZeroSlashingRate),
        },
    ];
    for c in cases {
        let mut p = c.record.clone();
        assert_eq!(p.make_deposit(&c.run, &me, c.slot.as_ref(), c.phase, c.amount), c.want, "{}", c.name);
        if c.want.is_err() {
            assert_eq!(p, c.record, "{}: a refused deposit changed the record", c.name);
            continue;
        }
        assert_eq!((p.deposit, p.deposit_epoch, p.deposited), (25, 3, true), "{}", c.name);
        assert_eq!((p.has_fault, p.last_fault_epoch), if c.name == "an old fault" { (true, 2) } else { (false, 0) }, "{}", c.name);
    }
    // A free registration: a run that grants joins with no deposit, nothing
    // at stake, needs no slashing.
    let mut p = fresh();
    let free = Run { join_deposit: 0, ..r };
    let in_epoch = ClientSlot { in_epoch: 1, ..slot(2, 0, 0) };
    assert_eq!(p.make_deposit(&free, &me, Some(&in_epoch), RunPhase { epoch: 0, ..slashing(0, 0) }, 0), Ok(()));
    assert!(p.deposited && p.deposit == 0);
}

/// F5: a run that asks for or holds deposits keeps a slashing rate above 0
/// for the coming epochs; a run with neither may drop it to 0.
#[test]
fn deposit_runs_keep_a_slashing_rate() {
    let me = addr(42);
    let asks = deposit_run(&me);
    let holds = Run { join_deposit: 0, total_deposits: 25, ..asks.clone() };
    let free = Run { join_deposit: 0, ..asks.clone() };
    for (name, r, rate, want) in [
        ("asks, rate 0", &asks, 0, Err(TreasurerError::ZeroSlashingRate)),
        ("asks, rate 1", &asks, 1, Ok(())),
        ("holds, rate 0", &holds, 0, Err(TreasurerError::ZeroSlashingRate)),
        ("holds, rate 1", &holds, 1, Ok(())),
        ("neither, rate 0", &free, 0, Ok(())),
    ] {
        assert_eq!(r.check_slashing_rate(rate), want, "{name}");
    }
}

#[test]
fn deposits_return_only_to_users_out_of_the_run_without_a_fault_since() {
    let held = Participant { deposit: 25, deposit_epoch: 4, deposited: true, ..Participant::new(1, addr(1), addr(2)) };
    let idle = slot(2, 0, 0);
    struct Case {
        name: &'static str,
        record: Participant,
        slot: Option<ClientSlot>,
        finished: bool,
        want: Result<u64, TreasurerError>,
    }
    let cases = [
        Case { name: "idle member", record: held.clone(), slot: Some(idle), finished: false, want: Ok(25) },
        Case { name: "never joined", record: held.clone(), slot: None, finished: false, want: Ok(25) },
        Case { name: "a fault before the deposit", record: held.clone(), slot: Some(faulted(3)), finished: false, want: Ok(25) },
        Case { name: "no deposit", record: Participant { deposited: false, ..held.clone() }, slot: None, finished: false, want: Err(TreasurerError::NoDeposit) },
        Case { name: "pending", record: held.clone(), slot: Some(ClientSlot { pending: 1, ..idle }), finished: false, want: Err(TreasurerError::DepositLocked) },
        Case { name: "in the epoch", record: held.clone(), slot: Some(ClientSlot { in_epoch: 1, ..idle }), finished: false, want: Err(TreasurerError::DepositLocked) },
        Case {
            name: "named by an open dispute",
            record: held.clone(),
            slot: Some(ClientSlot { open_disputes: 1, ..idle }),
            finished: true,
            want: Err(TreasurerError::DepositLocked),
        },
        Case { name: "pending in a finished run", record: held.clone(), slot: Some(ClientSlot { pending: 1, ..idle }), finished: true, want: Ok(25) },
        Case { name: "a fault in the deposit's epoch", record: held.clone(), slot: Some(faulted(4)), finished: false, want: Err(TreasurerError::DepositForfeited) },
        Case { name: "a later fault", record: held.clone(), slot: Some(faulted(9)), finished: true, want: Err(TreasurerError::DepositForfeited) },
        Case {
            name: "a fault the slot forgot",
            record: Participant { has_fault: true, last_fault_epoch: 5, ..held.clone() },
            slot: None,
            finished: false,
            want: Err(TreasurerError::DepositForfeited),
        },
    ];
    for c in cases {
        let mut p = c.record.clone();
        assert_eq!(p.return_deposit(c.slot.as_ref(), c.finished), c.want, "{}", c.name);
        if c.want.is_err() {
            assert_eq!(p, c.record, "{}: a refused return changed the record", c.name);
        } else {
            assert_eq!((p.deposit, p.deposited), (0, false), "{}", c.name);
        }
    }
}

#[test]
fn faults_are_remembered_latest_first() {
    let mut p = Participant::new(1, addr(1), addr(2));
    p.observe_fault(Some(&slot(2, 0, 0)));
    assert!(!p.has_fault);
    p.observe_fault(Some(&faulted(6)));
    assert_eq!((p.has_fault, p.last_fault_epoch), (true, 6));
    p.observe_fault(Some(&faulted(4)));
    assert_eq!(p.last_fault_epoch, 6, "an older fault does not replace a newer one");
    p.observe_fault(None);
    assert!(p.fault_since(None, 6) && !p.fault_since(None, 7));
    assert!(p.fault_since(Some(&faulted(8)), 7));
}

#[test]
fn burns_take_burned_points_and_forfeited_deposits() {
    let held = Participant { deposit: 25, deposit_epoch: 4, deposited: true, ..Participant::new(1, addr(1), addr(2)) };
    let burned = |points, epoch| ClientSlot { burned: points, ..faulted(epoch) };
    // (record, slot) -> what is burned.
    let cases = [
        ("points only, no record", None, Some(burned(70, 4)), Forfeit { points: 70, deposit: 0, revoke: false }),
        ("points and the deposit", Some(held.clone()), Some(burned(70, 4)), Forfeit { points: 70, deposit: 25, revoke: true }),
        ("a fault before the deposit", Some(held.clone()), Some(burned(70, 3)), Forfeit { points: 70, deposit: 0, revoke: false }),
        ("the deposit only", Some(held.clone()), Some(burned(0, 5)), Forfeit { points: 0, deposit: 25, revoke: true }),
        (
            "a fault the slot forgot",
            Some(Participant { has_fault: true, last_fault_epoch: 4, ..held.clone() }),
            None,
            Forfeit { points: 0, deposit: 25, revoke: true },
        ),
        (
            "a zero deposit still revokes",
            Some(Participant { deposit: 0, ..held.clone() }),
            Some(burned(0, 4)),
            Forfeit { points: 0, deposit: 0, revoke: true },
        ),
        ("nothing", Some(held.clone()), Some(slot(2, 10, 0)), Forfeit::default()),
        ("no slot, no record", None, None, Forfeit::default()),
    ];
    for (name, p, s, want) in cases {
        assert_eq!(Forfeit::of(p.as_ref(), s.as_ref()), want, "{name}");
    }

    // The run holds 125 tokens, 25 of them deposits: 100 for points.
    let r = Run { total_deposits: 25, ..deposit_run(&addr(42)) };
    assert_eq!(Forfeit { points: 100, deposit: 25, revoke: true }.check(125, &r), Ok(125));
    assert_eq!(Forfeit { points: 100, deposit: 0, revoke: false }.check(125, &r), Ok(100));
    assert_eq!(Forfeit { points: 0, deposit: 0, revoke: true }.check(0, &r), Ok(0));
    assert_eq!(Forfeit { points: 101, deposit: 0, revoke: false }.check(125, &r), Err(TreasurerError::BurnExceedsBalance));
    assert_eq!(Forfeit { points: 1, deposit: 25, revoke: true }.check(25, &r), Err(TreasurerError::BurnExceedsBalance), "never out of deposits");
    assert_eq!(Forfeit::default().check(125, &r), Err(TreasurerError::NothingToBurn));
    assert_eq!(Forfeit { points: u64::MAX, deposit: 1, revoke: true }.check(u64::MAX, &Run { total_deposits: 0, ..r.clone() }), Err(TreasurerError::MathOverflow));

    let mut p = held.clone();
    p.apply_forfeit(&Forfeit { points: 70, deposit: 25, revoke: true }).unwrap();
    assert_eq!((p.burned_points, p.burned_deposit, p.deposit, p.deposited), (70, 25, 0, false));
    p.apply_forfeit(&Forfeit { points: 5, deposit: 0, revoke: false }).unwrap();
    assert_eq!((p.burned_points, p.burned_deposit), (75, 25));
    let mut full = Participant { burned_points: u64::MAX, ..held };
    let before = full.clone();
    assert_eq!(full.apply_forfeit(&Forfeit { points: 1, deposit: 25, revoke: true }), Err(TreasurerError::MathOverflow));
    assert_eq!(full, before);
}

/// An Authorization account's data as the Authorizer writes it.
fn authorization(grantor: &Address, grantee: &Address, scope: &[u8], delegates: &[Address]) -> std::vec::Vec<u8> {
    let mut out = psyche_authorizer_interface::AUTHORIZATION_ACCOUNT.to_vec();
    out.push(255);
    out.extend_from_slice(grantor.as_ref());
    out.extend_from_slice(grantee.as_ref());
    out.extend_from_slice(&(scope.len() as u32).to_le_bytes());
    out.extend_from_slice(scope);
    out.push(1);
    out.extend_from_slice(&(delegates.len() as u32).to_le_bytes());
    for d in delegates {
        out.extend_from_slice(d.as_ref());
    }
    out.extend_from_slice(&7i64.to_le_bytes());
    out
}

#[test]
fn join_authorizations_are_the_runs_grant_to_the_participant() {
    let (run, participant, user) = (addr(1), addr(2), addr(3));
    assert!(is_join_authorization(&authorization(&run, &participant, JOIN_RUN_SCOPE, core::slice::from_ref(&user)), &run, &participant));
    assert!(is_join_authorization(&authorization(&run, &participant, JOIN_RUN_SCOPE, &[]), &run, &participant));
    for (name, data) in [
        ("another grantor", authorization(&addr(9), &participant, JOIN_RUN_SCOPE, &[])),
        ("granted to the user", authorization(&run, &user, JOIN_RUN_SCOPE, &[])),
        ("another scope", authorization(&run, &participant, b"Other", &[])),
        ("truncated", authorization(&run, &participant, JOIN_RUN_SCOPE, &[])[..40].to_vec()),
    ] {
        assert!(!is_join_authorization(&data, &run, &participant), "{name}");
    }
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

/// A mint's data: base layout (decimals 6, initialized) and for Token-2022
/// the given (type, length) extensions.
fn mint_data(extensions: &[(u16, u16)]) -> std::vec::Vec<u8> {
    let mut d = vec![0u8; psyche_sdk::token::MINT_LEN];
    d[44] = 6;
    d[45] = 1;
    if !extensions.is_empty() {
        d.resize(165, 0);
        d.push(1); // account type: mint
        for &(kind, len) in extensions {
            d.extend_from_slice(&kind.to_le_bytes());
            d.extend_from_slice(&len.to_le_bytes());
            d.extend(core::iter::repeat_n(7u8, usize::from(len)));
        }
    }
    d
}

/// A base mint with `supply` and, when `authority`, a mint authority.
fn supply_mint(supply: u64, authority: bool) -> std::vec::Vec<u8> {
    let mut d = mint_data(&[]);
    if authority {
        d[0] = 1;
        d[4..36].fill(3);
    }
    d[36..44].copy_from_slice(&supply.to_le_bytes());
    d
}

#[test]
fn earning_rates_above_a_fixed_supply_are_refused() {
    assert_eq!(mint_supply(&supply_mint(500, false)), Some(MintSupply { supply: 500, fixed: true }));
    assert_eq!(mint_supply(&supply_mint(500, true)), Some(MintSupply { supply: 500, fixed: false }));
    // Token-2022 with extensions: the same base layout.
    let mut ext = mint_data(&[(18, 64)]);
    ext[36..44].copy_from_slice(&9u64.to_le_bytes());
    assert_eq!(mint_supply(&ext), Some(MintSupply { supply: 9, fixed: true }));
    let mut bad_tag = supply_mint(500, true);
    bad_tag[0] = 2;
    let mut uninit = supply_mint(500, false);
    uninit[45] = 0;
    for (name, d) in [("bad COption tag", bad_tag), ("uninitialized", uninit), ("short", supply_mint(500, false)[..81].to_vec())] {
        assert_eq!(mint_supply(&d), None, "{name}");
        assert_eq!(check_earning_rate(&d, 0), Err(TreasurerError::InvalidMint), "{name}");
    }
    // Fixed supply: a rate up to the supply passes, above it never can be funded.
    assert_eq!(check_earning_rate(&supply_mint(500, false), 500), Ok(()));
    assert_eq!(check_earning_rate(&supply_mint(500, false), 0), Ok(()));
    assert_eq!(check_earning_rate(&supply_mint(500, false), 501), Err(TreasurerError::UnfundableRate));
    assert_eq!(check_earning_rate(&supply_mint(0, false), 1), Err(TreasurerError::UnfundableRate));
    // With a mint authority more can be minted: any rate passes.
    assert_eq!(check_earning_rate(&supply_mint(500, true), u64::MAX), Ok(()));
}
