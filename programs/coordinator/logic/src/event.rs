//! Events that instructions emit (the glue logs them Anchor-style with
//! sol_log_data). A fixed buffer: no allocation on-chain.

use crate::state::RunState;

/// One thing that happened, for indexers and clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    StateChanged { from: RunState, to: RunState, epoch: u32, step: u32 },
    RoundStarted { step: u32, height: u32, data_index: u64, batch_size: u16, clients: u16, seed: [u8; 32] },
    EpochEnded { epoch: u32, success: bool, rewarded: u16 },
    PauseRequested { step: u32 },
    PauseCancelled { step: u32 },
    ClientJoined { signer: [u8; 32], slot: u16 },
    ClientLeft { signer: [u8; 32] },
    WarmupWitnessed { signer: [u8; 32] },
    WitnessReported { signer: [u8; 32], step: u32, index: u16 },
    ClientDropped { client: [u8; 32], reporter: [u8; 32], step: u32 },
    CheckpointUpdated { signer: [u8; 32] },
    Verified { step: u32, trainer: [u8; 32], verifier: [u8; 32], verdict: u8 },
}

/// The most events one instruction emits: its own event plus a tick's
/// transition, round start or epoch end.
pub const MAX_EVENTS: usize = 4;

/// Events emitted by one instruction, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    items: [Option<Event>; MAX_EVENTS],
    len: usize,
}

impl Events {
    pub(crate) fn push(&mut self, e: Event) {
        // Capacity covers every instruction path (tested); an overflow would be a
        // programming error, and dropping an event beats aborting the transaction.
        debug_assert!(self.len < MAX_EVENTS, "event buffer too small");
        if self.len < MAX_EVENTS {
            self.items[self.len] = Some(e);
            // Note: self.len < MAX_EVENTS, checked above.
            #[allow(clippy::arithmetic_side_effects)]
            let next = self.len + 1;
            self.len = next;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.items[..self.len].iter().flatten()
    }
}
