//! Coordinator instruction data: the 8-byte Anchor discriminator, then the
//! Borsh arguments ([`crate::args`]). [`Kind::split`] is the one mapping from
//! discriminator to instruction (the dispatcher's); [`Instruction::decode`]
//! decodes a whole instruction with the same argument decoders the processors
//! use, for host tools (the simulator in programs/coordinator/sim).

use psyche_coordinator_logic::machine::{
    CheckpointRepo, CommitArgs, DisputeAnswer, DisputeVote, EvalReport, HealthCheck, PromptReport, VerifyArgs, WitnessReport,
};
use psyche_sdk::anchor::split_instruction;
use psyche_sdk::{ErrorCode, ProgramError};

use crate::args::{
    Decode, InitCoordinatorParams, JoinRunParams, NoParams, SetFutureEpochRatesParams, SetPausedParams,
    SettlePointsParams, TakeBurnedParams, UpdateClientVersionParams, UpdateParams,
};
use crate::{
    ANSWER_DISPUTE, CHECKPOINT, COMMIT, FREE_COORDINATOR, JUDGE_DISPUTE, HEALTH_CHECK, INIT_COORDINATOR, JOIN_RUN, LEAVE_RUN,
    REPORT_EVAL, REPORT_PROMPT, SETTLE_POINTS, SET_FUTURE_EPOCH_RATES, SET_PAUSED, TAKE_BURNED, TICK, UPDATE, UPDATE_CLIENT_VERSION, VERIFY,
    WARMUP_WITNESS, WITNESS,
};

/// The instructions, in IDL order (`Kind as usize` indexes [`crate::INSTRUCTIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    InitCoordinator,
    Update,
    UpdateClientVersion,
    SetFutureEpochRates,
    SetPaused,
    JoinRun,
    LeaveRun,
    Tick,
    Witness,
    WarmupWitness,
    HealthCheck,
    Checkpoint,
    FreeCoordinator,
    SettlePoints,
    Commit,
    Verify,
    AnswerDispute,
    JudgeDispute,
    TakeBurned,
    ReportEval,
    ReportPrompt,
}

impl Kind {
    /// Splits instruction data into its instruction and argument bytes:
    /// InstructionMissing below 8 bytes, InstructionFallbackNotFound for an
    /// unknown discriminator.
    #[inline(always)]
    pub fn split(data: &[u8]) -> Result<(Kind, &[u8]), ProgramError> {
        let (disc, args) = split_instruction(data)?;
        // Guards compare the 8 bytes as one word; constant patterns would
        // compile to a byte-by-byte decision tree (about 2 KB more code).
        let kind = match disc {
            d if d == INIT_COORDINATOR => Kind::InitCoordinator,
            d if d == UPDATE => Kind::Update,
            d if d == UPDATE_CLIENT_VERSION => Kind::UpdateClientVersion,
            d if d == SET_FUTURE_EPOCH_RATES => Kind::SetFutureEpochRates,
            d if d == SET_PAUSED => Kind::SetPaused,
            d if d == JOIN_RUN => Kind::JoinRun,
            d if d == LEAVE_RUN => Kind::LeaveRun,
            d if d == TICK => Kind::Tick,
            d if d == WITNESS => Kind::Witness,
            d if d == WARMUP_WITNESS => Kind::WarmupWitness,
            d if d == HEALTH_CHECK => Kind::HealthCheck,
            d if d == CHECKPOINT => Kind::Checkpoint,
            d if d == FREE_COORDINATOR => Kind::FreeCoordinator,
            d if d == SETTLE_POINTS => Kind::SettlePoints,
            d if d == COMMIT => Kind::Commit,
            d if d == VERIFY => Kind::Verify,
            d if d == ANSWER_DISPUTE => Kind::AnswerDispute,
            d if d == JUDGE_DISPUTE => Kind::JudgeDispute,
            d if d == TAKE_BURNED => Kind::TakeBurned,
            d if d == REPORT_EVAL => Kind::ReportEval,
            d if d == REPORT_PROMPT => Kind::ReportPrompt,
            _ => return Err(ErrorCode::InstructionFallbackNotFound.fail()),
        };
        Ok((kind, args))
    }
}

/// A decoded instruction. The program itself dispatches on [`Kind`] and each
/// processor decodes its arguments where its checks put them (some after the
/// account count); this decodes them all at once, with the same decoders.
#[derive(Clone, Debug, PartialEq, Eq)]
// Note: host-only (the program never builds one); UpdateParams is ~1 KB.
#[allow(clippy::large_enum_variant)]
pub enum Instruction<'a> {
    InitCoordinator(InitCoordinatorParams<'a>),
    Update(UpdateParams),
    UpdateClientVersion(UpdateClientVersionParams<'a>),
    SetFutureEpochRates(SetFutureEpochRatesParams),
    SetPaused(SetPausedParams),
    JoinRun(JoinRunParams),
    LeaveRun,
    Tick,
    Witness(WitnessReport),
    WarmupWitness,
    HealthCheck(HealthCheck),
    Checkpoint(CheckpointRepo),
    FreeCoordinator,
    SettlePoints(SettlePointsParams),
    Commit(CommitArgs),
    Verify(VerifyArgs),
    AnswerDispute(DisputeAnswer),
    JudgeDispute(DisputeVote),
    TakeBurned(TakeBurnedParams),
    ReportEval(EvalReport<'a>),
    ReportPrompt(PromptReport<'a>),
}

impl<'a> Instruction<'a> {
    /// Decodes instruction data, failing with the error the program returns
    /// for it before any account check would: InstructionMissing,
    /// InstructionFallbackNotFound, InstructionDidNotDeserialize or (checkpoint)
    /// InvalidCheckpoint.
    pub fn decode(data: &'a [u8]) -> Result<Self, ProgramError> {
        let (kind, args) = Kind::split(data)?;
        Ok(match kind {
            Kind::InitCoordinator => Self::InitCoordinator(Decode::decode(args)?),
            Kind::Update => Self::Update(Decode::decode(args)?),
            Kind::UpdateClientVersion => Self::UpdateClientVersion(Decode::decode(args)?),
            Kind::SetFutureEpochRates => Self::SetFutureEpochRates(Decode::decode(args)?),
            Kind::SetPaused => Self::SetPaused(Decode::decode(args)?),
            Kind::JoinRun => Self::JoinRun(Decode::decode(args)?),
            Kind::LeaveRun => NoParams::decode(args).map(|_| Self::LeaveRun)?,
            Kind::Tick => NoParams::decode(args).map(|_| Self::Tick)?,
            Kind::Witness => Self::Witness(Decode::decode(args)?),
            Kind::WarmupWitness => NoParams::decode(args).map(|_| Self::WarmupWitness)?,
            Kind::HealthCheck => Self::HealthCheck(Decode::decode(args)?),
            Kind::Checkpoint => Self::Checkpoint(Decode::decode(args)?),
            Kind::FreeCoordinator => NoParams::decode(args).map(|_| Self::FreeCoordinator)?,
            Kind::SettlePoints => Self::SettlePoints(Decode::decode(args)?),
            Kind::Commit => Self::Commit(Decode::decode(args)?),
            Kind::Verify => Self::Verify(Decode::decode(args)?),
            Kind::AnswerDispute => Self::AnswerDispute(Decode::decode(args)?),
            Kind::JudgeDispute => Self::JudgeDispute(Decode::decode(args)?),
            Kind::TakeBurned => Self::TakeBurned(Decode::decode(args)?),
            Kind::ReportEval => Self::ReportEval(Decode::decode(args)?),
            Kind::ReportPrompt => Self::ReportPrompt(Decode::decode(args)?),
        })
    }

}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use psyche_coordinator_logic::bloom::Bloom;
    use psyche_coordinator_logic::error::CoordinatorError;
    use psyche_coordinator_logic::state::{CoordinatorConfig, Model, Progress, RunMetadata, REVISION_LEN, URL_LEN};
    use psyche_sdk::borsh::Writer;
    use psyche_sdk::Address;

    use super::*;
    use crate::INSTRUCTIONS;

    const MISSING: ProgramError = ProgramError::Custom(ErrorCode::InstructionMissing as u32);
    const FALLBACK: ProgramError = ProgramError::Custom(ErrorCode::InstructionFallbackNotFound as u32);
    const DID_NOT_DESERIALIZE: ProgramError = ProgramError::Custom(ErrorCode::InstructionDidNotDeserialize as u32);

    /// Instruction data: discriminator + what `f` writes.
    fn ix(disc: [u8; 8], f: impl FnOnce(&mut Writer<'_>) -> Result<(), psyche_sdk::borsh::BorshError>) -> Vec<u8> {
        let mut buf = [0u8; 2048];
        let mut w = Writer::new(&mut buf);
        w.bytes(&disc).unwrap();
        f(&mut w).unwrap();
        w.written().to_vec()
    }

    /// `size_of::<T>()` distinct-ish bytes, and the value they encode.
    fn pod_bytes<T: Copy>(seed: u8) -> (Vec<u8>, T) {
        let bytes: Vec<u8> = (0..core::mem::size_of::<T>()).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        // SAFETY: the logic's layout structs accept any bit pattern (see args::Pod).
        let v = unsafe { core::ptr::read_unaligned(bytes.as_ptr() as *const T) };
        (bytes, v)
    }

    #[test]
    fn kinds_follow_the_idl_order() {
        for (i, (name, disc)) in INSTRUCTIONS.iter().enumerate() {
            let (kind, args) = Kind::split(disc).unwrap();
            assert_eq!(kind as usize, i, "{name}");
            assert!(args.is_empty());
            let mut data = disc.to_vec();
            data.push(7);
            assert_eq!(Kind::split(&data).unwrap(), (kind, &[7u8][..]));
        }
        for n in 0..8 {
            assert_eq!(Kind::split(&crate::TICK[..n]), Err(MISSING));
            assert_eq!(Instruction::decode(&crate::TICK[..n]), Err(MISSING));
        }
        assert_eq!(Kind::split(&[0; 8]), Err(FALLBACK));
        assert_eq!(Instruction::decode(&[0; 9]), Err(FALLBACK));
    }

    /// One encoding of every instruction and what it decodes to.
    fn samples() -> Vec<(Vec<u8>, Instruction<'static>)> {
        let key = |b: u8| -> [u8; 32] { core::array::from_fn(|i| b.wrapping_add(i as u8)) };
        let (metadata_bytes, metadata) = pod_bytes::<RunMetadata>(1);
        let (config_bytes, config) = pod_bytes::<CoordinatorConfig>(2);
        let (model_bytes, model) = pod_bytes::<Model>(3);
        let (progress_bytes, progress) = pod_bytes::<Progress>(4);
        let (bloom1_bytes, participant_bloom) = pod_bytes::<Bloom>(5);
        let (bloom2_bytes, broadcast_bloom) = pod_bytes::<Bloom>(6);
        let mut repo = [0u8; URL_LEN];
        repo[..4].copy_from_slice(b"repo");
        let revision = [b'r'; REVISION_LEN];
        let revision_str = std::string::String::from_utf8(revision.to_vec()).unwrap();
        std::vec![
            (
                ix(crate::INIT_COORDINATOR, |w| {
                    w.bytes(&key(1))?.bytes(&key(2))?.string("run")?.string("v1")?;
                    Ok(())
                }),
                Instruction::InitCoordinator(InitCoordinatorParams {
                    main_authority: Address::new_from_array(key(1)),
                    join_authority: Address::new_from_array(key(2)),
                    run_id: b"run",
                    client_version: b"v1",
                }),
            ),
            (
                ix(crate::UPDATE, |w| {
                    w.u8(1)?.bytes(&metadata_bytes)?.u8(0)?.u8(1)?.bytes(&model_bytes)?.u8(0)?;
                    Ok(())
                }),
                Instruction::Update(UpdateParams { metadata: Some(metadata), config: None, model: Some(model), progress: None }),
            ),
            (
                ix(crate::UPDATE, |w| {
                    w.u8(0)?.u8(1)?.bytes(&config_bytes)?.u8(0)?.u8(1)?.bytes(&progress_bytes)?;
                    Ok(())
                }),
                Instruction::Update(UpdateParams { metadata: None, config: Some(config), model: None, progress: Some(progress) }),
            ),
            (
                ix(crate::UPDATE_CLIENT_VERSION, |w| w.string("v2").map(|_| ())),
                Instruction::UpdateClientVersion(UpdateClientVersionParams { client_version: b"v2" }),
            ),
            (
                ix(crate::SET_FUTURE_EPOCH_RATES, |w| {
                    w.u8(1)?.u64(u64::MAX - 3)?.u8(0)?;
                    Ok(())
                }),
                Instruction::SetFutureEpochRates(SetFutureEpochRatesParams {
                    earning_rate_total_shared: Some(u64::MAX - 3),
                    slashing_rate_per_client: None,
                }),
            ),
            (ix(crate::SET_PAUSED, |w| w.bool(true).map(|_| ())), Instruction::SetPaused(SetPausedParams { paused: true })),
            (
                ix(crate::JOIN_RUN, |w| {
                    w.bytes(&key(3))?.bytes(&key(4))?;
                    Ok(())
                }),
                Instruction::JoinRun(JoinRunParams { signer: Address::new_from_array(key(3)), p2p_identity: key(4) }),
            ),
            (ix(crate::LEAVE_RUN, |_| Ok(())), Instruction::LeaveRun),
            (ix(crate::TICK, |_| Ok(())), Instruction::Tick),
            (
                ix(crate::WITNESS, |w| {
                    w.u32(9)?.u16(513)?.bytes(&bloom1_bytes)?.bytes(&bloom2_bytes)?.bytes(&key(5))?.bytes(&[0xee; 24])?;
                    Ok(())
                }),
                Instruction::Witness(WitnessReport { step: 9, index: 513, participant_bloom, broadcast_bloom, broadcast_merkle: key(5) }),
            ),
            (ix(crate::WARMUP_WITNESS, |_| Ok(())), Instruction::WarmupWitness),
            (
                ix(crate::HEALTH_CHECK, |w| {
                    w.u32(70_000)?.u16(3)?.bytes(&key(6))?;
                    Ok(())
                }),
                Instruction::HealthCheck(HealthCheck { step: 70_000, index: 3, accused: key(6) }),
            ),
            (
                ix(crate::CHECKPOINT, |w| {
                    w.string("repo")?.string(&revision_str)?;
                    Ok(())
                }),
                Instruction::Checkpoint(CheckpointRepo { repo, revision }),
            ),
            (ix(crate::FREE_COORDINATOR, |_| Ok(())), Instruction::FreeCoordinator),
            (ix(crate::SETTLE_POINTS, |w| w.bytes(&key(7)).map(|_| ())), Instruction::SettlePoints(SettlePointsParams { user: key(7) })),
            (
                ix(crate::COMMIT, |w| {
                    w.u32(0x0102_0304)?.u16(255)?.bytes(&key(8))?.bytes(&key(9))?.bytes(&key(10))?.u8(1)?;
                    Ok(())
                }),
                Instruction::Commit(CommitArgs {
                    step: 0x0102_0304,
                    index: 255,
                    payload: key(8),
                    state_before: key(9),
                    state_after: key(10),
                    fresh: 1,
                }),
            ),
            (
                ix(crate::VERIFY, |w| {
                    w.u32(12)?.u16(7)?.u16(300)?.u8(2)?.bytes(&key(11))?.bytes(&key(12))?;
                    Ok(())
                }),
                Instruction::Verify(VerifyArgs {
                    step: 12,
                    verifier_index: 7,
                    index: 300,
                    verdict: 2,
                    claimed_payload: key(11),
                    claimed_after: key(12),
                }),
            ),
            (
                ix(crate::ANSWER_DISPUTE, |w| {
                    w.u64(u64::MAX - 5)?.bytes(&key(13))?.bytes(&key(14))?;
                    Ok(())
                }),
                Instruction::AnswerDispute(DisputeAnswer { id: u64::MAX - 5, rerun_payload: key(13), rerun_after: key(14) }),
            ),
            (
                ix(crate::JUDGE_DISPUTE, |w| {
                    w.u64(77)?.u8(3)?;
                    Ok(())
                }),
                Instruction::JudgeDispute(DisputeVote { id: 77, vote: 3 }),
            ),
            (ix(crate::TAKE_BURNED, |w| w.bytes(&key(15)).map(|_| ())), Instruction::TakeBurned(TakeBurnedParams { user: key(15) })),
            (
                ix(crate::REPORT_EVAL, |w| {
                    w.u32(41)?.string("arc_easy")?.u32(0x3f00_0000)?.u32(0x3f80_0000)?.u32(2376)?;
                    Ok(())
                }),
                Instruction::ReportEval(EvalReport { step: 41, task: b"arc_easy", acc: 0x3f00_0000, acc_norm: 0x3f80_0000, count: 2376 }),
            ),
            (
                ix(crate::REPORT_PROMPT, |w| {
                    w.u32(9)?.u16(3)?.u32(2)?.u32(0x0102_0304)?.u32(50256)?;
                    Ok(())
                }),
                Instruction::ReportPrompt(PromptReport { step: 9, prompt: 3, tokens: &[[4, 3, 2, 1], [0x50, 0xc4, 0, 0]] }),
            ),
        ]
    }

    #[test]
    fn every_instruction_decodes_exactly_its_encoding() {
        let samples = samples();
        let mut seen = [false; INSTRUCTIONS.len()];
        for (data, want) in &samples {
            let (kind, _) = Kind::split(data).unwrap();
            seen[kind as usize] = true;
            assert_eq!(Instruction::decode(data).as_ref(), Ok(want), "{kind:?}");
            // Every truncation and a trailing byte are refused like the program refuses them.
            for n in 8..data.len() {
                assert_eq!(Instruction::decode(&data[..n]), Err(DID_NOT_DESERIALIZE), "{kind:?} cut at {n}");
            }
            let mut long = data.clone();
            long.push(0);
            assert_eq!(Instruction::decode(&long), Err(DID_NOT_DESERIALIZE), "{kind:?} with a trailing byte");
        }
        assert!(seen.iter().all(|s| *s), "a sample per instruction");
    }

    #[test]
    fn malformed_arguments_are_refused() {
        let bad_tag = ix(crate::SET_PAUSED, |w| w.u8(2).map(|_| ()));
        let bad_option = ix(crate::SET_FUTURE_EPOCH_RATES, |w| w.u8(2).map(|_| ()));
        let bad_utf8 = ix(crate::UPDATE_CLIENT_VERSION, |w| w.byte_vec(&[0xff]).map(|_| ()));
        for data in [bad_tag, bad_option, bad_utf8] {
            assert_eq!(Instruction::decode(&data), Err(DID_NOT_DESERIALIZE));
        }
        // report_eval's task is read as bytes: the logic refuses bad UTF-8 (EvalReport).
        let raw_task = ix(crate::REPORT_EVAL, |w| {
            w.u32(1)?.byte_vec(&[0xff])?.u32(0)?.u32(0)?.u32(1)?;
            Ok(())
        });
        assert!(matches!(Instruction::decode(&raw_task), Ok(Instruction::ReportEval(EvalReport { task: [0xff], .. }))));
        // report_prompt's token count is the logic's to refuse (PromptReport),
        // but a count the bytes cannot hold is not read.
        let many = ix(crate::REPORT_PROMPT, |w| {
            w.u32(1)?.u16(0)?.u32(33)?;
            for t in 0..33 {
                w.u32(t)?;
            }
            Ok(())
        });
        assert!(matches!(Instruction::decode(&many), Ok(Instruction::ReportPrompt(PromptReport { tokens, .. })) if tokens.len() == 33));
        let short = ix(crate::REPORT_PROMPT, |w| {
            w.u32(1)?.u16(0)?.u32(u32::MAX)?.u32(7)?;
            Ok(())
        });
        assert_eq!(Instruction::decode(&short), Err(DID_NOT_DESERIALIZE));
        let invalid_checkpoint = ProgramError::Custom(CoordinatorError::InvalidCheckpoint.code());
        let long_repo = "x".repeat(URL_LEN + 1);
        let long_revision = "x".repeat(REVISION_LEN + 1);
        let fits = "x".repeat(URL_LEN);
        for (repo, revision, want) in [
            (&long_repo[..], "", Err(invalid_checkpoint.clone())),
            ("", &long_revision[..], Err(invalid_checkpoint)),
            (&fits[..], "", Ok(())),
        ] {
            let data = ix(crate::CHECKPOINT, |w| {
                w.string(repo)?.string(revision)?;
                Ok(())
            });
            assert_eq!(Instruction::decode(&data).map(|_| ()), want, "{} / {}", repo.len(), revision.len());
        }
    }
}
