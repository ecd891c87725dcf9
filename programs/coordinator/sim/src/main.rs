//! psyche-coordinator-sim: one Coordinator account driven by the real run
//! state machine (`psyche-coordinator-logic`) over stdin/stdout, so client
//! tests run whole runs without a validator. Host only; the Go side is
//! `clients/coordinator/coordsim`.
//!
//! Protocol: every message is a little-endian u32 length followed by that
//! many bytes; one response per request, in order; EOF on stdin ends it.
//!
//! ```text
//! request:  signer [32] | unix_timestamp i64 | slot u64 | slot_hash [32] | instruction data
//! response: 0 | account data [ACCOUNT_SIZE]   the instruction succeeded; the account after it
//!           1 | code u32 | name (UTF-8)       the program would fail with this error
//!           2 | message (UTF-8)               the request is malformed or not simulated
//! ```
//!
//! The instruction data is what the program receives (the 8-byte Anchor
//! discriminator and the Borsh arguments, as the IDL bindings encode them),
//! decoded by the program's own decoder (`psyche_coordinator::instruction`). The
//! signer is the transaction's signing user (authority, payer); `unix_timestamp`
//! and (`slot`, `slot_hash`) are what the program reads from the Clock and
//! SlotHashes sysvars: the request's slot is the Clock's, and its
//! (slot, hash) the newest SlotHashes entry. The simulator keeps the entries
//! of the requests it saw (up to 512, as SlotHashes does), so a round waiting
//! for its verify seed draws it from the oldest one after the slot its
//! RoundTrain ended in, as the program's glue does. The account data is the on-chain CoordinatorAccount:
//! the 8-byte discriminator, then the state.
//!
//! What the glue checks and the simulator does too: argument decoding
//! (InstructionMissing, InstructionFallbackNotFound, InstructionDidNotDeserialize),
//! an account not yet initialised (AccountNotInitialized), `init_coordinator`
//! twice (AlreadyInitialized) and its run id length (InvalidRunId), the main
//! authority of authority instructions (Unauthorized, against the
//! `main_authority` given to `init_coordinator`), `join_run`'s signer argument
//! (SignerMismatch) and `checkpoint`'s string lengths (InvalidCheckpoint).
//! What it does not: the Authorizer's join authorization (JoinNotAuthorized,
//! ConstraintSeeds), account metas (signer, writable, owner, PDA, size, rent),
//! transaction limits, events, and `free_coordinator` (answered as not simulated).

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use psyche_coordinator::args::{
    InitCoordinatorParams, JoinRunParams, SetFutureEpochRatesParams, SetPausedParams, SettlePointsParams, TakeBurnedParams,
    UpdateClientVersionParams,
};
use psyche_coordinator::instruction::Instruction;
use psyche_coordinator::COORDINATOR_ACCOUNT;
use psyche_coordinator_logic::error::CoordinatorError;
use psyche_coordinator_logic::machine::Clock;
use psyche_coordinator_logic::selection::Entropy;
use psyche_coordinator_logic::state::{CoordinatorState, ACCOUNT_SIZE, RUN_ID_LEN};
use psyche_sdk::{ErrorCode, ProgramError};

/// signer, unix_timestamp, slot, slot_hash.
const HEADER_LEN: usize = 32 + 8 + 8 + 32;
/// Far above any instruction (a transaction is at most 1232 bytes).
const MAX_REQUEST: usize = 64 * 1024;

const OK: u8 = 0;
const PROGRAM_ERROR: u8 = 1;
const BAD_REQUEST: u8 = 2;

type Key = [u8; 32];

/// A program error, as a failed transaction reports it: code and IDL name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Failure {
    code: u32,
    name: &'static str,
}

impl From<CoordinatorError> for Failure {
    fn from(e: CoordinatorError) -> Self {
        Failure { code: e.code(), name: e.name() }
    }
}

impl From<ErrorCode> for Failure {
    fn from(e: ErrorCode) -> Self {
        Failure { code: e as u32, name: e.name() }
    }
}

/// What the program's decoder returns (Anchor's codes and the logic's).
impl From<ProgramError> for Failure {
    fn from(e: ProgramError) -> Self {
        // The decoder fails with custom codes only.
        let ProgramError::Custom(code) = e else {
            return Failure { code: u32::MAX, name: "UnknownError" };
        };
        let name = CoordinatorError::ALL
            .iter()
            .find(|e| e.code() == code)
            .map(|e| e.name())
            .or_else(|| ErrorCode::from_code(code).map(ErrorCode::name))
            .unwrap_or("UnknownError");
        Failure { code, name }
    }
}

/// The coordinator account and what the instance PDA would hold for the glue.
struct Sim {
    /// ACCOUNT_SIZE bytes from `off`, placed so that the state after the
    /// discriminator is 8-byte aligned, as the loader places it on-chain.
    buf: Vec<u8>,
    off: usize,
    /// Set by init_coordinator (the instance's main authority).
    main_authority: Option<Key>,
    /// The SlotHashes entries of the requests so far, oldest first.
    slot_hashes: VecDeque<Entropy>,
}

/// Entries SlotHashes keeps.
const SLOT_HASHES_LEN: usize = 512;

impl Sim {
    fn new() -> Self {
        let buf = vec![0u8; ACCOUNT_SIZE + 8];
        let off = buf.as_ptr().wrapping_add(8).align_offset(8);
        Sim { buf, off, main_authority: None, slot_hashes: VecDeque::new() }
    }

    fn account(&self) -> &[u8] {
        &self.buf[self.off..self.off + ACCOUNT_SIZE]
    }

    fn state(&mut self) -> &mut CoordinatorState {
        let data = &mut self.buf[self.off + 8..self.off + ACCOUNT_SIZE];
        CoordinatorState::from_bytes_mut(data).expect("the state is 8-aligned and ACCOUNT_SIZE - 8 bytes")
    }

    /// load_instance + require_main_authority + with_state.
    fn as_authority(&mut self, signer: &Key) -> Result<&mut CoordinatorState, Failure> {
        match self.main_authority {
            None => Err(ErrorCode::AccountNotInitialized.into()),
            Some(a) if a != *signer => Err(CoordinatorError::Unauthorized.into()),
            Some(_) => Ok(self.state()),
        }
    }

    /// load_instance + with_state.
    fn as_client(&mut self) -> Result<&mut CoordinatorState, Failure> {
        match self.main_authority {
            None => Err(ErrorCode::AccountNotInitialized.into()),
            Some(_) => Ok(self.state()),
        }
    }

    /// One decoded instruction, checked in the order of the program's
    /// processor (programs/coordinator/program/src/processor). A failure leaves
    /// the account as it was (the logic validates before it changes anything).
    fn execute(&mut self, signer: &Key, clock: &Clock, ix: &Instruction<'_>) -> Result<(), Failure> {
        match ix {
            Instruction::InitCoordinator(InitCoordinatorParams { main_authority, run_id, client_version, .. }) => {
                if run_id.is_empty() || run_id.len() > RUN_ID_LEN {
                    return Err(CoordinatorError::InvalidRunId.into());
                }
                if self.main_authority.is_some() {
                    return Err(CoordinatorError::AlreadyInitialized.into());
                }
                self.state().init(run_id, client_version)?;
                let off = self.off;
                self.buf[off..off + 8].copy_from_slice(&COORDINATOR_ACCOUNT);
                self.main_authority = Some(main_authority.to_bytes());
            }
            Instruction::Update(params) => self.as_authority(signer)?.update(&params.update())?,
            Instruction::UpdateClientVersion(UpdateClientVersionParams { client_version }) => {
                self.as_authority(signer)?.update_client_version(client_version)?
            }
            Instruction::SetFutureEpochRates(SetFutureEpochRatesParams {
                earning_rate_total_shared,
                slashing_rate_per_client,
            }) => self.as_authority(signer)?.set_future_epoch_rates(*earning_rate_total_shared, *slashing_rate_per_client)?,
            Instruction::SetPaused(SetPausedParams { paused }) => {
                self.as_authority(signer)?.set_paused(*paused, clock)?;
            }
            Instruction::SettlePoints(SettlePointsParams { user }) => {
                self.as_authority(signer)?.settle_points(user)?;
            }
            Instruction::TakeBurned(TakeBurnedParams { user }) => {
                self.as_authority(signer)?.take_burned(user)?;
            }
            Instruction::JoinRun(JoinRunParams { signer: who, p2p_identity }) => {
                if who.to_bytes() != *signer {
                    return Err(CoordinatorError::SignerMismatch.into());
                }
                self.as_client()?.join(signer, p2p_identity, clock)?;
            }
            Instruction::LeaveRun => {
                self.as_client()?.leave(signer, clock)?;
            }
            Instruction::Tick => {
                self.as_client()?.tick(clock)?;
            }
            Instruction::WarmupWitness => {
                self.as_client()?.warmup_witness(signer, clock)?;
            }
            Instruction::Witness(report) => {
                self.as_client()?.witness(signer, report, clock)?;
            }
            Instruction::HealthCheck(check) => {
                self.as_client()?.health_check(signer, check, clock)?;
            }
            Instruction::Checkpoint(repo) => {
                self.as_client()?.checkpoint(signer, repo, clock)?;
            }
            Instruction::Commit(c) => {
                self.as_client()?.commit(signer, c, clock)?;
            }
            Instruction::Verify(v) => {
                self.as_client()?.verify(signer, v, clock)?;
            }
            Instruction::AnswerDispute(a) => {
                self.as_client()?.answer_dispute(signer, a, clock)?;
            }
            Instruction::JudgeDispute(v) => {
                self.as_client()?.judge_dispute(signer, v, clock)?;
            }
            Instruction::ReportEval(r) => {
                self.as_client()?.report_eval(signer, r)?;
            }
            Instruction::ReportPrompt(r) => {
                self.as_client()?.report_prompt(signer, r)?;
            }
            Instruction::FreeCoordinator => unreachable!("handle answers free_coordinator"),
        }
        Ok(())
    }

    /// One request body to one response body.
    fn handle(&mut self, req: &[u8]) -> Vec<u8> {
        let Some((head, data)) = req.split_first_chunk::<HEADER_LEN>() else {
            return bad_request("request shorter than its 80-byte header");
        };
        let signer = word::<32>(head, 0);
        let entropy = Entropy { slot: u64::from_le_bytes(word(head, 40)), slot_hash: word(head, 48) };
        if self.slot_hashes.back().is_none_or(|e| e.slot < entropy.slot) {
            if self.slot_hashes.len() == SLOT_HASHES_LEN {
                self.slot_hashes.pop_front();
            }
            self.slot_hashes.push_back(entropy);
        }
        let draw_after = if self.main_authority.is_some() { self.state().draw_after() } else { None };
        let drawn = draw_after.and_then(|after| self.slot_hashes.iter().find(|e| e.slot > after).copied());
        let clock = Clock { unix_timestamp: i64::from_le_bytes(word(head, 32)), slot: entropy.slot, entropy, drawn };
        let result = match Instruction::decode(data) {
            Ok(Instruction::FreeCoordinator) => return bad_request("free_coordinator is not simulated"),
            Ok(ix) => self.execute(&signer, &clock, &ix),
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(()) => {
                let mut out = Vec::with_capacity(1 + ACCOUNT_SIZE);
                out.push(OK);
                out.extend_from_slice(self.account());
                out
            }
            Err(f) => {
                let mut out = vec![PROGRAM_ERROR];
                out.extend_from_slice(&f.code.to_le_bytes());
                out.extend_from_slice(f.name.as_bytes());
                out
            }
        }
    }
}

fn word<const N: usize>(b: &[u8; HEADER_LEN], at: usize) -> [u8; N] {
    let mut w = [0u8; N];
    w.copy_from_slice(&b[at..at + N]);
    w
}

fn bad_request(msg: &str) -> Vec<u8> {
    let mut out = vec![BAD_REQUEST];
    out.extend_from_slice(msg.as_bytes());
    out
}

/// Answers framed requests until EOF.
fn serve(mut input: impl Read, mut output: impl Write) -> io::Result<()> {
    let mut sim = Sim::new();
    let mut req = Vec::new();
    loop {
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            r => r?,
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_REQUEST {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("request of {len} bytes")));
        }
        req.resize(len, 0);
        input.read_exact(&mut req)?;
        let resp = sim.handle(&req);
        let resp_len = u32::try_from(resp.len()).expect("responses are about 67 KB");
        output.write_all(&resp_len.to_le_bytes())?;
        output.write_all(&resp)?;
        output.flush()?;
    }
}

fn main() {
    let stdout = io::stdout().lock();
    if let Err(e) = serve(io::stdin().lock(), io::BufWriter::with_capacity(ACCOUNT_SIZE + 16, stdout)) {
        eprintln!("psyche-coordinator-sim: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psyche_coordinator::{CHECKPOINT, FREE_COORDINATOR, INIT_COORDINATOR, JOIN_RUN, REPORT_EVAL, REPORT_PROMPT, SET_PAUSED, TICK};
    use psyche_coordinator_logic::state::RunState;
    use psyche_sdk::borsh::{BorshError, Writer};

    const AUTHORITY: Key = [1; 32];
    const ALICE: Key = [2; 32];

    fn request(signer: &Key, now: i64, ix: &[u8]) -> Vec<u8> {
        let mut req = Vec::new();
        req.extend_from_slice(signer);
        req.extend_from_slice(&now.to_le_bytes());
        req.extend_from_slice(&7u64.to_le_bytes());
        req.extend_from_slice(&[9; 32]);
        req.extend_from_slice(ix);
        req
    }

    /// Instruction data: discriminator + Borsh arguments written by `f`.
    fn ix(disc: [u8; 8], f: impl FnOnce(&mut Writer<'_>) -> Result<(), BorshError>) -> Vec<u8> {
        let mut buf = [0u8; 256];
        let mut w = Writer::new(&mut buf);
        w.bytes(&disc).unwrap();
        f(&mut w).unwrap();
        w.written().to_vec()
    }

    fn init_ix(run_id: &str) -> Vec<u8> {
        ix(INIT_COORDINATOR, |w| {
            w.bytes(&AUTHORITY)?.bytes(&AUTHORITY)?.string(run_id)?.string("v1")?;
            Ok(())
        })
    }

    fn call(sim: &mut Sim, signer: &Key, ix: &[u8]) -> Result<Vec<u8>, (u32, String)> {
        let resp = sim.handle(&request(signer, 100, ix));
        match resp[0] {
            OK => Ok(resp[1..].to_vec()),
            PROGRAM_ERROR => Err((
                u32::from_le_bytes(resp[1..5].try_into().unwrap()),
                String::from_utf8(resp[5..].to_vec()).unwrap(),
            )),
            _ => panic!("bad request: {}", String::from_utf8_lossy(&resp[1..])),
        }
    }

    fn fails(sim: &mut Sim, signer: &Key, ix: &[u8], name: &str) {
        match call(sim, signer, ix) {
            Err((code, n)) => {
                assert_eq!(n, name);
                let want = CoordinatorError::ALL.iter().find(|e| e.name() == name).map(|e| e.code());
                if let Some(want) = want {
                    assert_eq!(code, want, "{name}");
                }
            }
            Ok(_) => panic!("expected {name}, got success"),
        }
    }

    #[test]
    fn init_writes_the_account_the_program_writes() {
        let mut sim = Sim::new();
        let tick = ix(TICK, |_| Ok(()));
        fails(&mut sim, &ALICE, &tick, "AccountNotInitialized");
        fails(&mut sim, &AUTHORITY, &init_ix(""), "InvalidRunId");
        let account = call(&mut sim, &AUTHORITY, &init_ix("run")).unwrap();
        assert_eq!(account.len(), ACCOUNT_SIZE);
        assert_eq!(account[..8], COORDINATOR_ACCOUNT);
        let state = CoordinatorState::from_bytes(sim.state().as_bytes()).unwrap();
        assert_eq!(state.run_id[..4], *b"run\0");
        assert_eq!(account[8..], *state.as_bytes());
        assert_eq!(state.run_state().unwrap(), RunState::Uninitialized);
        fails(&mut sim, &AUTHORITY, &init_ix("run"), "AlreadyInitialized");
    }

    #[test]
    fn glue_checks_and_logic_errors_are_named() {
        let mut sim = Sim::new();
        call(&mut sim, &AUTHORITY, &init_ix("run")).unwrap();
        let resume = ix(SET_PAUSED, |w| {
            w.bool(false)?;
            Ok(())
        });
        fails(&mut sim, &ALICE, &resume, "Unauthorized");
        // No config yet: the logic's validation error.
        fails(&mut sim, &AUTHORITY, &resume, "ConfigEpochTime");
        fails(&mut sim, &ALICE, &ix(TICK, |_| Ok(())), "RunHalted");
        let join = |who: &Key| {
            ix(JOIN_RUN, |w| {
                w.bytes(who)?.bytes(&[5; 32])?;
                Ok(())
            })
        };
        fails(&mut sim, &ALICE, &join(&AUTHORITY), "SignerMismatch");
        fails(&mut sim, &ALICE, &join(&ALICE), "RunUninitialized");
        let long = "x".repeat(200);
        let checkpoint = ix(CHECKPOINT, |w| {
            w.string(&long)?.string("")?;
            Ok(())
        });
        fails(&mut sim, &ALICE, &checkpoint, "InvalidCheckpoint");
        let report = ix(REPORT_EVAL, |w| {
            w.u32(1)?.string("arc_easy")?.u32(0)?.u32(0)?.u32(1)?;
            Ok(())
        });
        fails(&mut sim, &ALICE, &report, "RunUninitialized");
        let prompt = ix(REPORT_PROMPT, |w| {
            w.u32(1)?.u16(0)?.u32(1)?.u32(7)?;
            Ok(())
        });
        fails(&mut sim, &ALICE, &prompt, "RunUninitialized");
        let pause = ix(SET_PAUSED, |w| {
            w.bool(true)?;
            Ok(())
        });
        let account = call(&mut sim, &AUTHORITY, &pause).unwrap();
        assert_eq!(CoordinatorState::from_bytes(&account[8..]).unwrap().run_state().unwrap(), RunState::Paused);
    }

    #[test]
    fn malformed_instructions_fail_like_the_program() {
        let mut sim = Sim::new();
        fails(&mut sim, &ALICE, &[1, 2, 3], "InstructionMissing");
        fails(&mut sim, &ALICE, &[0; 8], "InstructionFallbackNotFound");
        fails(&mut sim, &ALICE, &ix(TICK, |w| w.u8(0).map(|_| ())), "InstructionDidNotDeserialize");
        fails(&mut sim, &ALICE, &ix(SET_PAUSED, |w| w.u8(2).map(|_| ())), "InstructionDidNotDeserialize");
        let resp = sim.handle(&request(&ALICE, 0, &FREE_COORDINATOR));
        assert_eq!(resp[0], BAD_REQUEST);
        // Arguments are decoded first, as the program does (after its account count).
        fails(&mut sim, &ALICE, &ix(FREE_COORDINATOR, |w| w.u8(0).map(|_| ())), "InstructionDidNotDeserialize");
        assert_eq!(sim.handle(&[0; 10])[0], BAD_REQUEST);
    }

    #[test]
    fn serves_framed_requests_until_eof() {
        let mut input = Vec::new();
        for body in [request(&AUTHORITY, 0, &init_ix("run")), request(&ALICE, 0, &ix(TICK, |_| Ok(())))] {
            input.extend_from_slice(&(body.len() as u32).to_le_bytes());
            input.extend_from_slice(&body);
        }
        let mut output = Vec::new();
        serve(&input[..], &mut output).unwrap();
        let (len, rest) = output.split_at(4);
        let len = u32::from_le_bytes(len.try_into().unwrap()) as usize;
        assert_eq!(len, 1 + ACCOUNT_SIZE);
        assert_eq!(rest[0], OK);
        let (len2, rest2) = rest[len..].split_at(4);
        assert_eq!(u32::from_le_bytes(len2.try_into().unwrap()) as usize, rest2.len());
        assert_eq!(rest2[0], PROGRAM_ERROR);
        assert_eq!(&rest2[5..], b"RunHalted");
        // A truncated frame is an error, not a hang.
        assert!(serve(&input[..6], &mut Vec::new()).is_err());
    }
}
