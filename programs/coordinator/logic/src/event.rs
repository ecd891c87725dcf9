//! Events that instructions emit (the glue logs them Anchor-style with
//! sol_log_data). A fixed buffer: no allocation on-chain.

use crate::state::{dispute_state, RunState, EVAL_TASK_LEN, MAX_DISPUTES, PROMPT_TOKENS_LEN};

/// One thing that happened, for indexers and clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    StateChanged { from: RunState, to: RunState, epoch: u32, step: u32 },
    RoundStarted { step: u32, height: u32, data_index: u64, batch_size: u16, inner_steps: u16, clients: u16, seed: [u8; 32] },
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
    /// A MISMATCH or NO_DATA verdict opened dispute `id` on the trainer's step.
    DisputeOpened { id: u64, step: u32, trainer: [u8; 32], accuser: [u8; 32] },
    /// Dispute `id` was settled with `outcome` (a `dispute_state` tag).
    DisputeSettled { id: u64, outcome: u8 },
    /// `signer` scored the model after `step` on benchmark `task` (zero-padded):
    /// accuracy and length-normalized accuracy as f32 bits, over `count` items.
    EvalReported { signer: [u8; 32], epoch: u32, step: u32, task: [u8; EVAL_TASK_LEN], acc: u32, acc_norm: u32, count: u32 },
    /// `signer` continued prompt number `prompt` with the model after `step`:
    /// the first `len` of `tokens` (the rest zero) are the generated ids.
    PromptReported { signer: [u8; 32], epoch: u32, step: u32, prompt: u16, len: u8, tokens: [u32; PROMPT_TOKENS_LEN] },
}

/// The most events one instruction emits: its own event plus a tick's
/// transition, round start or epoch end.
pub const MAX_EVENTS: usize = 4;

/// Events emitted by one instruction, in order, followed by one
/// `DisputeSettled { id, outcome: UNRESOLVED }` per dispute that ended
/// without a decision (a round end may expire up to all 32 at once, more
/// than `MAX_EVENTS`, so they are kept as ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Events {
    items: [Option<Event>; MAX_EVENTS],
    len: usize,
    unresolved: [u64; MAX_DISPUTES],
    unresolved_len: usize,
}

impl Default for Events {
    fn default() -> Self {
        Events { items: [None; MAX_EVENTS], len: 0, unresolved: [0; MAX_DISPUTES], unresolved_len: 0 }
    }
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

    /// Records that dispute `id` ended UNRESOLVED (at most one per entry of
    /// the dispute table per instruction).
    pub(crate) fn unresolved(&mut self, id: u64) {
        if let Some(slot) = self.unresolved.get_mut(self.unresolved_len) {
            *slot = id;
            // Note: unresolved_len < MAX_DISPUTES (the get_mut succeeded).
            #[allow(clippy::arithmetic_side_effects)]
            let next = self.unresolved_len + 1;
            self.unresolved_len = next;
        }
    }

    pub fn len(&self) -> usize {
        // Note: both are at most their array's length.
        #[allow(clippy::arithmetic_side_effects)]
        let n = self.len + self.unresolved_len;
        n
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        let unresolved = self.unresolved[..self.unresolved_len]
            .iter()
            .map(|&id| Event::DisputeSettled { id, outcome: dispute_state::UNRESOLVED });
        self.items[..self.len].iter().flatten().copied().chain(unresolved)
    }
}
