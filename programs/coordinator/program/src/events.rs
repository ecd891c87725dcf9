//! The logic's events, logged as Anchor events (discriminator + Borsh payload
//! in one "Program data:" field). Enum tags (`RunState`) travel as u8, f32
//! scores as their bits (the IDL's f32).

use psyche_coordinator_logic::event::{Event, Events};
use psyche_sdk::anchor;
use psyche_sdk::borsh::{BorshError, Writer};
use psyche_sdk::{ErrorCode, ProgramResult};

/// Event discriminators (Anchor's: the first 8 bytes of sha256("event:<Name>")).
pub const STATE_CHANGED: [u8; 8] = anchor::event("StateChanged");
pub const ROUND_STARTED: [u8; 8] = anchor::event("RoundStarted");
pub const EPOCH_ENDED: [u8; 8] = anchor::event("EpochEnded");
pub const PAUSE_REQUESTED: [u8; 8] = anchor::event("PauseRequested");
pub const PAUSE_CANCELLED: [u8; 8] = anchor::event("PauseCancelled");
pub const CLIENT_JOINED: [u8; 8] = anchor::event("ClientJoined");
pub const CLIENT_LEFT: [u8; 8] = anchor::event("ClientLeft");
pub const WARMUP_WITNESSED: [u8; 8] = anchor::event("WarmupWitnessed");
pub const WITNESS_REPORTED: [u8; 8] = anchor::event("WitnessReported");
pub const CLIENT_DROPPED: [u8; 8] = anchor::event("ClientDropped");
pub const CHECKPOINT_UPDATED: [u8; 8] = anchor::event("CheckpointUpdated");
pub const VERIFIED: [u8; 8] = anchor::event("Verified");
pub const DISPUTE_OPENED: [u8; 8] = anchor::event("DisputeOpened");
pub const DISPUTE_SETTLED: [u8; 8] = anchor::event("DisputeSettled");
pub const EVAL_REPORTED: [u8; 8] = anchor::event("EvalReported");
pub const PROMPT_REPORTED: [u8; 8] = anchor::event("PromptReported");

/// Event names in IDL order, with their discriminators.
pub const EVENTS: [(&str, [u8; 8]); 16] = [
    ("StateChanged", STATE_CHANGED),
    ("RoundStarted", ROUND_STARTED),
    ("EpochEnded", EPOCH_ENDED),
    ("PauseRequested", PAUSE_REQUESTED),
    ("PauseCancelled", PAUSE_CANCELLED),
    ("ClientJoined", CLIENT_JOINED),
    ("ClientLeft", CLIENT_LEFT),
    ("WarmupWitnessed", WARMUP_WITNESSED),
    ("WitnessReported", WITNESS_REPORTED),
    ("ClientDropped", CLIENT_DROPPED),
    ("CheckpointUpdated", CHECKPOINT_UPDATED),
    ("Verified", VERIFIED),
    ("DisputeOpened", DISPUTE_OPENED),
    ("DisputeSettled", DISPUTE_SETTLED),
    ("EvalReported", EVAL_REPORTED),
    ("PromptReported", PROMPT_REPORTED),
];

/// Logs every event of one instruction, in order.
pub fn emit_all(events: &Events) -> ProgramResult {
    for e in events.iter() {
        emit(&e)?;
    }
    Ok(())
}

/// The longest event payload: PromptReported's 171 bytes.
pub(crate) const MAX_PAYLOAD: usize = 171;

fn emit(e: &Event) -> ProgramResult {
    let mut buf = [0u8; MAX_PAYLOAD];
    let mut w = Writer::new(&mut buf);
    let disc = encode(e, &mut w).map_err(|_| ErrorCode::InstructionDidNotSerialize.fail())?;
    let n = w.len();
    anchor::emit(disc, &buf[..n])
}

/// Writes the payload and returns the event's discriminator.
pub(crate) fn encode(e: &Event, w: &mut Writer<'_>) -> Result<&'static [u8; 8], BorshError> {
    Ok(match *e {
        Event::StateChanged { from, to, epoch, step } => {
            w.u8(from as u8)?.u8(to as u8)?.u32(epoch)?.u32(step)?;
            &STATE_CHANGED
        }
        Event::RoundStarted { step, height, data_index, batch_size, inner_steps, clients, seed } => {
            w.u32(step)?.u32(height)?.u64(data_index)?.u16(batch_size)?.u16(inner_steps)?.u16(clients)?.bytes(&seed)?;
            &ROUND_STARTED
        }
        Event::EpochEnded { epoch, success, rewarded } => {
            w.u32(epoch)?.bool(success)?.u16(rewarded)?;
            &EPOCH_ENDED
        }
        Event::PauseRequested { step } => {
            w.u32(step)?;
            &PAUSE_REQUESTED
        }
        Event::PauseCancelled { step } => {
            w.u32(step)?;
            &PAUSE_CANCELLED
        }
        Event::ClientJoined { signer, slot } => {
            w.bytes(&signer)?.u16(slot)?;
            &CLIENT_JOINED
        }
        Event::ClientLeft { signer } => {
            w.bytes(&signer)?;
            &CLIENT_LEFT
        }
        Event::WarmupWitnessed { signer } => {
            w.bytes(&signer)?;
            &WARMUP_WITNESSED
        }
        Event::WitnessReported { signer, step, index } => {
            w.bytes(&signer)?.u32(step)?.u16(index)?;
            &WITNESS_REPORTED
        }
        Event::ClientDropped { client, reporter, step } => {
            w.bytes(&client)?.bytes(&reporter)?.u32(step)?;
            &CLIENT_DROPPED
        }
        Event::CheckpointUpdated { signer } => {
            w.bytes(&signer)?;
            &CHECKPOINT_UPDATED
        }
        Event::Verified { step, trainer, verifier, verdict } => {
            w.u32(step)?.bytes(&trainer)?.bytes(&verifier)?.u8(verdict)?;
            &VERIFIED
        }
        Event::DisputeOpened { id, step, trainer, accuser } => {
            w.u64(id)?.u32(step)?.bytes(&trainer)?.bytes(&accuser)?;
            &DISPUTE_OPENED
        }
        Event::DisputeSettled { id, outcome } => {
            w.u64(id)?.u8(outcome)?;
            &DISPUTE_SETTLED
        }
        Event::EvalReported { signer, epoch, step, task, acc, acc_norm, count } => {
            w.bytes(&signer)?.u32(epoch)?.u32(step)?.bytes(&task)?.u32(acc)?.u32(acc_norm)?.u32(count)?;
            &EVAL_REPORTED
        }
        Event::PromptReported { signer, epoch, step, prompt, len, tokens } => {
            w.bytes(&signer)?.u32(epoch)?.u32(step)?.u16(prompt)?.u8(len)?;
            for t in tokens {
                w.u32(t)?;
            }
            &PROMPT_REPORTED
        }
    })
}
