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
    bad_bool[RUN_SPACE - 25] = 2;
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
            earned_points: c.start.0,
            slashed_points: c.start.1,
            claimed_points: c.start.2,
            ..Participant::new(1, addr(1), addr(2))
        };
        assert_eq!(p.settle_and_claim(c.settle.0, c.settle.1), Ok(c.pays), "{}", c.name);
        assert_eq!((p.earned_points, p.slashed_points, p.claimed_points), c.after, "{}", c.name);
        assert!(p.claimed_points <= p.earned_points, "{}: claimed more than earned", c.name);
    }
}

#[test]
fn claim_overflow_is_an_error() {
    let mut p = Participant { earned_points: u64::MAX, ..Participant::new(1, addr(1), addr(2)) };
    assert_eq!(p.settle_and_claim(1, 0), Err(TreasurerError::MathOverflow));
    let mut p = Participant { slashed_points: u64::MAX, ..Participant::new(1, addr(1), addr(2)) };
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
    assert_eq!(reserved_tokens(&closed, Some(s)), Ok(467));
    assert_eq!(reserved_tokens(&closed, None), Ok(300), "a closed run keeps only the deposits");
    s.clients[4] = ClientSlot { unvested: [u64::MAX, 1, 0, 0], ..slot(14, 0, 0) };
    assert_eq!(reserve(s), Err(TreasurerError::MathOverflow));
    s.clients[4] = ClientSlot { burned: u64::MAX, ..slot(14, 0, 0) };
    assert_eq!(reserved_points(s), Err(TreasurerError::MathOverflow));
}

#[test]
fn closing_needs_nothing_reserved() {
    let mut words = state();
    let s = view(&mut words);
    let mut r = run();
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
    let at = |epoch| RunPhase { epoch, finished: false };
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
            phase: RunPhase { epoch: 3, finished: true },
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
    // A free registration: a run that grants joins with no deposit.
    let mut p = fresh();
    let free = Run { join_deposit: 0, ..r };
    assert_eq!(p.make_deposit(&free, &me, None, at(0), 0), Ok(()));
    assert!(p.deposited && p.deposit == 0);
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

/// A mint's data: base layout (decimals 6, initialized), an optional freeze
/// authority, and for Token-2022 the given (type, length) extensions.
fn mint_data(freeze: bool, extensions: &[(u16, u16)]) -> std::vec::Vec<u8> {
    let mut d = vec![0u8; MINT_LEN];
    d[44] = 6;
    d[45] = 1;
    if freeze {
        d[46] = 1;
        d[50..82].fill(9);
    }
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

#[test]
fn collateral_mint_rule() {
    assert_eq!(check_collateral_mint(&mint_data(false, &[])), Ok(6));
    assert_eq!(check_collateral_mint(&mint_data(true, &[])), Err(MintRefusal::FreezeAuthority));
    // Every allowed extension together, then free space.
    let allowed: std::vec::Vec<(u16, u16)> = ALLOWED_MINT_EXTENSIONS.iter().map(|&k| (k, 32)).collect();
    let mut d = mint_data(false, &allowed);
    d.extend_from_slice(&[0; 12]);
    assert_eq!(check_collateral_mint(&d), Ok(6));
    // The extensions that can freeze, move, hook, tax, pause or hide tokens,
    // and one this rule has never heard of, alone and after allowed ones.
    for kind in [1u16, 4, 6, 9, 12, 14, 16, 24, 26, 999] {
        assert_eq!(check_collateral_mint(&mint_data(false, &[(kind, 32)])), Err(MintRefusal::Extension(kind)), "extension {kind}");
        assert_eq!(check_collateral_mint(&mint_data(false, &[(18, 64), (kind, 0)])), Err(MintRefusal::Extension(kind)), "extension {kind} after one allowed");
    }
    // Malformed: uninitialized, short, an overlong TLV, a wrong account type, non-zero padding.
    let mut d = mint_data(false, &[]);
    d[45] = 0;
    assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
    assert_eq!(check_collateral_mint(&mint_data(false, &[])[..81]), Err(MintRefusal::Invalid));
    let mut d = mint_data(false, &[(18, 64)]);
    d.truncate(d.len() - 1);
    assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
    let mut d = mint_data(false, &[(18, 64)]);
    d[165] = 2;
    assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
    let mut d = mint_data(false, &[(18, 64)]);
    d[100] = 1;
    assert_eq!(check_collateral_mint(&d), Err(MintRefusal::Invalid));
    assert_eq!(check_collateral_mint(&mint_data(false, &[])[..MINT_LEN].iter().copied().chain([0u8; 50]).collect::<std::vec::Vec<u8>>()), Err(MintRefusal::Invalid));
}
