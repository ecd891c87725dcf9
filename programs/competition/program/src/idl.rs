//! Generates idl/psyche_competition.json with the shared generator
//! (programs/idl) from the program's constants and the interface's layouts,
//! and fails when the committed file differs (`UPDATE_IDL=1 cargo test -p
//! psyche-competition` rewrites it). The Board's fixed layout is described
//! field by field, each descriptor checked against `offset_of!`/`size_of`.

extern crate std;

use core::mem::{offset_of, size_of};
use std::vec;
use std::vec::Vec;

use psyche_competition_interface::*;
use psyche_idl::{
    account as acc, address, array, bytes, defined, fixed_account, json, option, seed_account, seed_arg, seed_const, vec, with_pda,
    zero_copy as zc, Idl, Instruction, Types, Value, SYSTEM_PROGRAM,
};
use psyche_sdk::cpi::ata::ASSOCIATED_TOKEN_PROGRAM_ID;

use crate::{EVENTS, INSTRUCTIONS};

fn types() -> Types {
    let mut t = Types::default();
    t.borsh("Competition", &[
        ("bump", json!("u8")),
        ("id", json!("string")),
        ("authority", json!("pubkey")),
        ("board", json!("pubkey")),
        ("architecture", json!("u8")),
        ("max_params", json!("u64")),
        ("tokenizer_hash", bytes(32)),
        ("seq_len", json!("u32")),
        ("precision", json!("u8")),
        ("data_root", bytes(32)),
        ("data_location", json!("string")),
        ("sequences_per_page", json!("u32")),
        ("epsilon_start_ppm", json!("u32")),
        ("epsilon_end_ppm", json!("u32")),
        ("epsilon_decay_slots", json!("u64")),
        ("pages_per_round", json!("u16")),
        ("temperature_ppm", json!("u32")),
        ("round_slots", json!("u64")),
        ("reward_mint", json!("pubkey")),
        ("token_program", json!("pubkey")),
        ("pool", json!("pubkey")),
        ("reward_per_round", json!("u64")),
        ("validator_stake", json!("u64")),
        ("permissioned", json!("bool")),
        ("quorum", json!("u8")),
        ("created_slot", json!("u64")),
        ("paused", json!("bool")),
        ("closed", json!("bool")),
        ("unclaimed", json!("u64")),
        ("stakes", json!("u64")),
        ("forfeited", json!("u64")),
        ("total_paid", json!("u64")),
        ("total_burned", json!("u64")),
    ]);
    t.borsh("Model", &[
        ("commitment", bytes(32)),
        ("revision", bytes(32)),
        ("params", json!("u64")),
        ("slot", json!("u64")),
        ("repo", json!("string")),
    ]);
    t.borsh("Submission", &[
        ("bump", json!("u8")),
        ("competition", json!("pubkey")),
        ("miner", json!("pubkey")),
        ("index", json!("u16")),
        ("current", defined("Model")),
        ("prev", defined("Model")),
    ]);
    // The Board's layout (little endian, alignment 1: no padding anywhere).
    zc!(t, Vote, "Vote", validator: json!("u8"), digest: bytes(32));
    zc!(t, Round, "Round", number: json!("u64"), state: json!("u8"), open_slot: json!("u64"), seed_slot: json!("u64"),
        seed: bytes(32), deadline_slot: json!("u64"), entries: json!("u16"), eligible: bytes(32), quorum: json!("u8"),
        pages: json!("u16"), epsilon_start_ppm: json!("u32"), epsilon_end_ppm: json!("u32"),
        epsilon_decay_slots: json!("u64"), vote_count: json!("u8"), votes: array(defined("Vote"), MAX_VALIDATORS),
        final_digest: bytes(32), agreeing: json!("u8"), paid: json!("u64"));
    zc!(t, Entry, "Entry", miner: json!("pubkey"), slot: json!("u64"), prev_slot: json!("u64"), status: json!("u8"),
        earned: json!("u64"), claimed: json!("u64"), wins: json!("u16"), weight: json!("u32"));
    zc!(t, Validator, "Validator", key: json!("pubkey"), stake: json!("u64"), status: json!("u8"), votes: json!("u32"),
        faults: json!("u32"));
    // The account: its discriminator, then the rest of the struct.
    let at = |offset: usize| offset - offset_of!(Board, competition);
    t.zero_copy("Board", size_of::<Board>() - offset_of!(Board, competition), &[
        ("competition", at(offset_of!(Board, competition)), json!("pubkey")),
        ("submission_count", at(offset_of!(Board, submission_count)), json!("u16")),
        ("validator_count", at(offset_of!(Board, validator_count)), json!("u8")),
        ("round", at(offset_of!(Board, round)), defined("Round")),
        ("submissions", at(offset_of!(Board, submissions)), array(defined("Entry"), MAX_SUBMISSIONS)),
        ("validators", at(offset_of!(Board, validators)), array(defined("Validator"), MAX_VALIDATORS)),
    ]);
    t.borsh("CompetitionCreateParams", &[
        ("id", json!("string")),
        ("architecture", json!("u8")),
        ("max_params", json!("u64")),
        ("tokenizer_hash", bytes(32)),
        ("seq_len", json!("u32")),
        ("precision", json!("u8")),
        ("data_root", bytes(32)),
        ("data_location", json!("string")),
        ("sequences_per_page", json!("u32")),
        ("epsilon_start_ppm", json!("u32")),
        ("epsilon_end_ppm", json!("u32")),
        ("epsilon_decay_slots", json!("u64")),
        ("pages_per_round", json!("u16")),
        ("temperature_ppm", json!("u32")),
        ("round_slots", json!("u64")),
        ("reward_per_round", json!("u64")),
        ("validator_stake", json!("u64")),
        ("permissioned", json!("bool")),
        ("quorum", json!("u8")),
    ]);
    t.borsh("CompetitionUpdateParams", &[
        ("epsilon_start_ppm", option(json!("u32"))),
        ("epsilon_end_ppm", option(json!("u32"))),
        ("epsilon_decay_slots", option(json!("u64"))),
        ("pages_per_round", option(json!("u16"))),
        ("temperature_ppm", option(json!("u32"))),
        ("round_slots", option(json!("u64"))),
        ("reward_per_round", option(json!("u64"))),
        ("validator_stake", option(json!("u64"))),
        ("quorum", option(json!("u8"))),
        ("paused", option(json!("bool"))),
    ]);
    t.borsh("ValidatorJoinParams", &[]);
    t.borsh("ValidatorLeaveParams", &[]);
    t.borsh("SubmissionCommitParams", &[
        ("commitment", bytes(32)),
        ("revision", bytes(32)),
        ("params", json!("u64")),
        ("repo", json!("string")),
    ]);
    t.borsh("RoundTickParams", &[]);
    t.borsh("RoundVoteParams", &[
        ("round", json!("u64")),
        ("table_hash", bytes(32)),
        ("wins", vec(json!("u16"))),
        ("invalid", bytes(32)),
    ]);
    t.borsh("SubmissionClaimParams", &[]);
    t.borsh("StakeBurnParams", &[]);
    t.borsh("CompetitionWithdrawParams", &[("amount", json!("u64"))]);
    t.borsh("CompetitionCloseParams", &[]);
    t.borsh("CompetitionCreated", &[
        ("competition", json!("pubkey")),
        ("authority", json!("pubkey")),
        ("board", json!("pubkey")),
        ("id", json!("string")),
    ]);
    t.borsh("SubmissionCommitted", &[
        ("competition", json!("pubkey")),
        ("miner", json!("pubkey")),
        ("index", json!("u16")),
        ("commitment", bytes(32)),
        ("revision", bytes(32)),
        ("params", json!("u64")),
        ("slot", json!("u64")),
    ]);
    for name in ["ValidatorJoined", "ValidatorLeft"] {
        t.borsh(name, &[
            ("competition", json!("pubkey")),
            ("validator", json!("pubkey")),
            ("index", json!("u8")),
            ("stake", json!("u64")),
        ]);
    }
    t.borsh("RoundOpened", &[
        ("competition", json!("pubkey")),
        ("round", json!("u64")),
        ("open_slot", json!("u64")),
        ("entries", json!("u16")),
        ("eligible", json!("u16")),
    ]);
    t.borsh("RoundSeeded", &[
        ("competition", json!("pubkey")),
        ("round", json!("u64")),
        ("seed", bytes(32)),
        ("seed_slot", json!("u64")),
        ("deadline_slot", json!("u64")),
    ]);
    t.borsh("RoundExpired", &[("competition", json!("pubkey")), ("round", json!("u64"))]);
    t.borsh("VoteCast", &[
        ("competition", json!("pubkey")),
        ("round", json!("u64")),
        ("validator", json!("pubkey")),
        ("digest", bytes(32)),
    ]);
    t.borsh("RoundFinalized", &[
        ("competition", json!("pubkey")),
        ("round", json!("u64")),
        ("digest", bytes(32)),
        ("paid", json!("u64")),
        ("credited", json!("u64")),
        ("agreeing", json!("u8")),
    ]);
    t.borsh("ValidatorFaulted", &[
        ("competition", json!("pubkey")),
        ("round", json!("u64")),
        ("validator", json!("pubkey")),
        ("forfeited", json!("u64")),
    ]);
    t.borsh("RewardsClaimed", &[("competition", json!("pubkey")), ("miner", json!("pubkey")), ("amount", json!("u64"))]);
    t.borsh("StakesBurned", &[("competition", json!("pubkey")), ("amount", json!("u64"))]);
    t.borsh("RewardsWithdrawn", &[
        ("competition", json!("pubkey")),
        ("destination", json!("pubkey")),
        ("amount", json!("u64")),
    ]);
    t.borsh("CompetitionClosed", &[("competition", json!("pubkey"))]);
    t
}

/// Accounts and argument type of each instruction, in INSTRUCTIONS order
/// (an empty params struct where there are no arguments: anchor-go v1.0.0
/// omits the discriminator of an instruction without arguments).
fn instruction_shapes() -> Vec<Instruction> {
    let system = || fixed_account("system_program", SYSTEM_PROGRAM);
    let mint = || acc("reward_mint", false, false);
    let tokens = || acc("token_program", false, false);
    let shapes: Vec<(Vec<Value>, &'static str)> = vec![
        (
            vec![acc("payer", true, true), acc("authority", false, true),
                 with_pda(acc("competition", true, false), &[seed_const(COMPETITION_SEED), seed_arg("params.id")]),
                 acc("board", true, false), mint(), acc("pool", true, false), tokens(),
                 fixed_account("associated_token_program", &address(&ASSOCIATED_TOKEN_PROGRAM_ID.to_bytes())), system()],
            "CompetitionCreateParams",
        ),
        (vec![acc("authority", false, true), acc("competition", true, false)], "CompetitionUpdateParams"),
        (
            vec![acc("validator", true, true), acc("competition", true, false), acc("board", true, false),
                 acc("authorization", false, false), acc("validator_tokens", true, false), acc("pool", true, false), mint(),
                 tokens()],
            "ValidatorJoinParams",
        ),
        (
            vec![acc("validator", false, true), acc("competition", true, false), acc("board", true, false),
                 acc("validator_tokens", true, false), acc("pool", true, false), mint(), tokens()],
            "ValidatorLeaveParams",
        ),
        (
            vec![acc("miner", true, true), acc("competition", false, false), acc("board", true, false),
                 with_pda(acc("submission", true, false),
                          &[seed_const(SUBMISSION_SEED), seed_account("competition"), seed_account("miner")]),
                 system()],
            "SubmissionCommitParams",
        ),
        (vec![acc("competition", false, false), acc("board", true, false)], "RoundTickParams"),
        (
            vec![acc("validator", false, true), acc("competition", true, false), acc("board", true, false),
                 acc("pool", false, false)],
            "RoundVoteParams",
        ),
        (
            vec![acc("miner", false, true), acc("competition", true, false), acc("board", true, false),
                 with_pda(acc("submission", false, false),
                          &[seed_const(SUBMISSION_SEED), seed_account("competition"), seed_account("miner")]),
                 acc("pool", true, false), acc("miner_tokens", true, false), mint(), tokens()],
            "SubmissionClaimParams",
        ),
        (
            vec![acc("competition", true, false), acc("pool", true, false), acc("reward_mint", true, false), tokens()],
            "StakeBurnParams",
        ),
        (
            vec![acc("authority", false, true), acc("competition", false, false), acc("pool", true, false),
                 acc("destination", true, false), mint(), tokens()],
            "CompetitionWithdrawParams",
        ),
        (
            vec![acc("authority", false, true), acc("spill", true, false), acc("competition", true, false),
                 acc("board", true, false)],
            "CompetitionCloseParams",
        ),
    ];
    shapes.into_iter().map(|(accounts, params)| Instruction { accounts, params }).collect()
}

fn render() -> std::string::String {
    Idl {
        name: "psyche_competition",
        description: "Model competitions (SN9's mechanism): miners commit checkpoints, validators vote bit-exact win tables, a quorum pays the pool by the softmax of wins and forfeits the dissenters' stakes",
        address: ID.to_bytes(),
        instructions: &INSTRUCTIONS,
        shapes: instruction_shapes(),
        accounts: &[("Competition", COMPETITION_ACCOUNT), ("Submission", SUBMISSION_ACCOUNT), ("Board", BOARD_ACCOUNT)],
        events: &EVENTS,
        errors: ERRORS.iter().map(|e| (e.code(), e.name(), e.message())).collect(),
        types: types(),
    }
    .render()
}

#[test]
fn committed_idl_is_generated() {
    psyche_idl::check_committed("psyche_competition", &render(), "psyche-competition");
}

#[test]
fn program_id_renders_as_declared() {
    assert_eq!(address(&ID.to_bytes()), "7AKGYWqtB5jAEBjU17KLdk4djKnYutkz1kmLdkyUvcTP");
    assert_eq!(address(&AUTHORIZER_ID.to_bytes()), psyche_idl::committed("psyche_authorizer")["address"].as_str().unwrap());
}

/// The Borsh types' fixed parts add up to the account sizes the program
/// allocates.
#[test]
fn account_sizes_match_the_types() {
    let t = types();
    let repo = |n: usize| 4 + n;
    let model = 32 + 32 + 8 + 8;
    assert_eq!(SUBMISSION_SPACE, 8 + 1 + 32 + 32 + 2 + 2 * (model + repo(MAX_REPO_LEN)));
    assert_eq!(t.size(&defined("Board")) + 8, BOARD_SPACE);
    assert_eq!(t.size(&defined("Vote")), 33);
}
