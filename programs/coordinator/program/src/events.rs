//! The logic's events, logged as Anchor events (discriminator + Borsh payload
//! in one "Program data:" field). Enum tags (`RunState`) travel as u8.

use psyche_coordinator_logic::event::{Event, Events};
use psyche_sdk::anchor;
use psyche_sdk::borsh::{BorshError, Writer};
use psyche_sdk::{ErrorCode, ProgramResult};

/// Event names in IDL order, with their discriminators.
pub const EVENTS: [(&str, [u8; 8]); 11] = [
    ("StateChanged", anchor::event("StateChanged")),
    ("RoundStarted", anchor::event("RoundStarted")),
    ("EpochEnded", anchor::event("EpochEnded")),
    ("PauseRequested", anchor::event("PauseRequested")),
    ("PauseCancelled", anchor::event("PauseCancelled")),
    ("ClientJoined", anchor::event("ClientJoined")),
    ("ClientLeft", anchor::event("ClientLeft")),
    ("WarmupWitnessed", anchor::event("WarmupWitnessed")),
    ("WitnessReported", anchor::event("WitnessReported")),
    ("ClientDropped", anchor::event("ClientDropped")),
    ("CheckpointUpdated", anchor::event("CheckpointUpdated")),
];

/// Logs every event of one instruction, in order.
pub fn emit_all(events: &Events) -> ProgramResult {
    for e in events.iter() {
        emit(e)?;
    }
    Ok(())
}

fn emit(e: &Event) -> ProgramResult {
    let mut buf = [0u8; 96];
    let mut w = Writer::new(&mut buf);
    let kind = encode(e, &mut w).map_err(|_| ErrorCode::InstructionDidNotSerialize.fail())?;
    let n = w.len();
    anchor::emit(&EVENTS[kind].1, &buf[..n])
}

/// Writes the payload and returns the event's index in `EVENTS`.
pub(crate) fn encode(e: &Event, w: &mut Writer<'_>) -> Result<usize, BorshError> {
    Ok(match *e {
        Event::StateChanged { from, to, epoch, step } => {
            w.u8(from as u8)?.u8(to as u8)?.u32(epoch)?.u32(step)?;
            0
        }
        Event::RoundStarted { step, height, data_index, batch_size, clients, seed } => {
            w.u32(step)?.u32(height)?.u64(data_index)?.u16(batch_size)?.u16(clients)?.bytes(&seed)?;
            1
        }
        Event::EpochEnded { epoch, success, rewarded } => {
            w.u32(epoch)?.bool(success)?.u16(rewarded)?;
            2
        }
        Event::PauseRequested { step } => {
            w.u32(step)?;
            3
        }
        Event::PauseCancelled { step } => {
            w.u32(step)?;
            4
        }
        Event::ClientJoined { signer, slot } => {
            w.bytes(&signer)?.u16(slot)?;
            5
        }
        Event::ClientLeft { signer } => {
            w.bytes(&signer)?;
            6
        }
        Event::WarmupWitnessed { signer } => {
            w.bytes(&signer)?;
            7
        }
        Event::WitnessReported { signer, step, index } => {
            w.bytes(&signer)?.u32(step)?.u16(index)?;
            8
        }
        Event::ClientDropped { client, reporter, step } => {
            w.bytes(&client)?.bytes(&reporter)?.u32(step)?;
            9
        }
        Event::CheckpointUpdated { signer } => {
            w.bytes(&signer)?;
            10
        }
    })
}
