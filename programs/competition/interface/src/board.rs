//! The `Board`: one per competition, ~21 KB, so a client-allocated account
//! (over the 10 KiB a CPI can create) read and written in place: a
//! `#[repr(C)]` struct of byte arrays (alignment 1, no padding, any offset),
//! integers little endian behind `get`/`set`, viewed over the account data
//! without a copy. It holds every entry (one per miner), every validator and
//! the round under way, and decides the round's life: open, seed, expire,
//! votes, finalization.
//!
//! ```text
//! discriminator [8] | competition [32] | submission_count u16 | validator_count u8
//! | round: number u64 | state u8 | open_slot u64 | seed_slot u64 | seed [32] | deadline_slot u64
//!         | entries u16 | eligible [32] (bitmap over entries)
//!         | quorum u8 | pages u16 | epsilon_start_ppm u32 | epsilon_end_ppm u32 | epsilon_decay_slots u64
//!         | vote_count u8 | votes [32] x {validator u8 | digest [32]} | final_digest [32] | agreeing u8 | paid u64
//! | submissions [256] x {miner [32] | slot u64 | prev_slot u64 | status u8 | earned u64 | claimed u64
//!                        | wins u16 | weight u32}
//! | validators [32] x {key [32] | stake u64 | status u8 | votes u32 | faults u32}
//! ```

use core::mem::{align_of, size_of};

use psyche_sdk::Address;

use crate::rules::{payouts, round_seed, vote_digest, weights};
use crate::{add, sub, Competition, CompetitionError as E, BOARD_ACCOUNT, MAX_SUBMISSIONS, MAX_VALIDATORS};

macro_rules! le_int {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name([u8; size_of::<$t>()]);

        impl $name {
            pub const fn get(&self) -> $t {
                <$t>::from_le_bytes(self.0)
            }

            pub fn set(&mut self, v: $t) {
                self.0 = v.to_le_bytes();
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                self.get().fmt(f)
            }
        }
    };
}

le_int!(
    /// A little-endian u16 at any offset.
    U16, u16
);
le_int!(
    /// A little-endian u32 at any offset.
    U32, u32
);
le_int!(
    /// A little-endian u64 at any offset.
    U64, u64
);

/// Where a round is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RoundState {
    /// No round was ever opened.
    None = 0,
    /// Opened: waiting for a slot hash after the opening slot.
    SeedPending = 1,
    /// Seeded: validators evaluate and vote until the deadline.
    Evaluating = 2,
    /// A digest reached the quorum: paid; late votes are still checked.
    Final = 3,
    /// The deadline passed first: nothing paid, nobody faulted.
    Expired = 4,
}

impl RoundState {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => RoundState::None,
            1 => RoundState::SeedPending,
            2 => RoundState::Evaluating,
            3 => RoundState::Final,
            4 => RoundState::Expired,
            _ => return None,
        })
    }
}

/// Entry status.
pub const ENTRY_ACTIVE: u8 = 0;
/// Its model was invalid in the last final round; active again at the
/// miner's next commit.
pub const ENTRY_EXCLUDED: u8 = 1;
/// Validator status.
pub const VALIDATOR_ACTIVE: u8 = 0;
pub const VALIDATOR_LEFT: u8 = 1;
/// Voted against a final result: its stake is forfeited, and it can never
/// join again.
pub const VALIDATOR_FAULTED: u8 = 2;

/// One vote of the round: a validator (its index) and its digest.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Vote {
    pub validator: u8,
    pub digest: [u8; 32],
}

/// The round under way (or the last one).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    pub number: U64,
    pub state: u8,
    pub open_slot: U64,
    /// While SeedPending: the opening slot (the seed comes from a later
    /// one); once seeded: the SlotHashes slot the seed came from.
    pub seed_slot: U64,
    pub seed: [u8; 32],
    pub deadline_slot: U64,
    /// submission_count at the opening: the entries the round covers.
    pub entries: U16,
    /// Bit i: entry i has a model the round evaluates.
    pub eligible: [u8; 32],
    /// The rules the round opened with (an update applies from the next
    /// round on, so validators evaluating one round never disagree over
    /// them).
    pub quorum: u8,
    pub pages: U16,
    pub epsilon_start_ppm: U32,
    pub epsilon_end_ppm: U32,
    pub epsilon_decay_slots: U64,
    pub vote_count: u8,
    pub votes: [Vote; MAX_VALIDATORS],
    pub final_digest: [u8; 32],
    /// Votes with the final digest (the quorum that made it final, then
    /// late ones).
    pub agreeing: u8,
    /// What the round paid out among its entries (`Competition::round_pot`).
    pub paid: U64,
}

/// A miner's entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub miner: [u8; 32],
    /// The slot of its current model's commit.
    pub slot: U64,
    /// The slot of its previous model's commit (0: none).
    pub prev_slot: U64,
    pub status: u8,
    pub earned: U64,
    pub claimed: U64,
    /// Its wins and weight (Q24) in the last final round it was in.
    pub wins: U16,
    pub weight: U32,
}

/// A validator.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Validator {
    pub key: [u8; 32],
    /// What it staked when it joined (0 once returned or forfeited).
    pub stake: U64,
    pub status: u8,
    pub votes: U32,
    pub faults: U32,
}

/// The board account's data.
#[repr(C)]
pub struct Board {
    pub discriminator: [u8; 8],
    pub competition: [u8; 32],
    pub submission_count: U16,
    pub validator_count: u8,
    pub round: Round,
    pub submissions: [Entry; MAX_SUBMISSIONS],
    pub validators: [Validator; MAX_VALIDATORS],
}

/// The board account's size.
pub const BOARD_SPACE: usize = size_of::<Board>();
const _: () = assert!(align_of::<Board>() == 1, "the board is read in place at any address");

/// The model a round evaluates for an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluated {
    Current,
    Prev,
}

/// The model a round opened at `open_slot` evaluates for an entry whose
/// current model was committed at `slot` and previous one at `prev_slot`
/// (0: none): the current one if it was committed before the opening, else
/// the previous one if there is one (a commit during a round never moves a
/// model the round evaluates: `Board::recommit`), else none.
pub fn evaluated_model(slot: u64, prev_slot: u64, open_slot: u64) -> Option<Evaluated> {
    if slot < open_slot {
        Some(Evaluated::Current)
    } else if prev_slot != 0 && prev_slot < open_slot {
        Some(Evaluated::Prev)
    } else {
        None
    }
}

impl Entry {
    /// Whether a round opened at `open_slot` evaluates this entry.
    pub fn eligible_at(&self, open_slot: u64) -> bool {
        self.status == ENTRY_ACTIVE && evaluated_model(self.slot.get(), self.prev_slot.get(), open_slot).is_some()
    }
}

fn bit(bitmap: &[u8; 32], i: usize) -> bool {
    bitmap.get(i / 8).is_some_and(|b| (b >> (i % 8)) & 1 == 1)
}

fn set_bit(bitmap: &mut [u8; 32], i: usize) {
    if let Some(b) = bitmap.get_mut(i / 8) {
        *b |= 1 << (i % 8);
    }
}

/// What round_tick does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// Open the next round.
    Open,
    /// Seed the open round from SlotHashes.
    Seed,
    /// Expire the round: its deadline passed before a quorum.
    Expire,
}

/// A round just opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    pub number: u64,
    pub entries: u16,
    pub eligible: u16,
}

/// A vote, with what the chain tells about it.
pub struct Ballot<'a> {
    pub validator: &'a Address,
    pub round: u64,
    pub table_hash: [u8; 32],
    /// One per entry of the round.
    pub wins: &'a [u16],
    /// Bit i: the validator found entry i's model invalid.
    pub invalid: [u8; 32],
    /// The current slot.
    pub now: u64,
    /// The pool's balance (0 without a pool).
    pub pool_balance: u64,
}

/// What a vote did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    /// The voter's index.
    pub validator: u8,
    pub digest: [u8; 32],
    /// Set when this vote made the round final.
    pub finalized: Option<Finalized>,
    /// Validators faulted by this vote (bit i: validator i): at the
    /// finalization every earlier vote for another digest, on a final round
    /// the voter itself when it disagrees.
    pub faulted: u32,
}

/// The result a vote's digest stands for: what finalize needs of it.
struct Outcome {
    digest: [u8; 32],
    valid: [u8; 32],
    agreeing: u8,
}

/// A round made final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finalized {
    /// The round's pot (`Competition::round_pot`).
    pub paid: u64,
    /// What its entries were credited (the pot, less the rounding).
    pub credited: u64,
    pub agreeing: u8,
}

impl Board {
    /// Views account data as a board: exactly BOARD_SPACE bytes.
    pub fn from_bytes(data: &[u8]) -> Option<&Board> {
        // SAFETY: Board is repr(C) of byte arrays (alignment 1, no padding,
        // every bit pattern valid) and `data` holds exactly its size.
        (data.len() == BOARD_SPACE).then(|| unsafe { &*(data.as_ptr() as *const Board) })
    }

    /// Views account data as a mutable board: exactly BOARD_SPACE bytes.
    pub fn from_bytes_mut(data: &mut [u8]) -> Option<&mut Board> {
        // SAFETY: as in from_bytes; the borrow of `data` is moved into the
        // returned reference.
        (data.len() == BOARD_SPACE).then(|| unsafe { &mut *(data.as_mut_ptr() as *mut Board) })
    }

    /// A new board of `competition` (over zeroed data).
    pub fn init(&mut self, competition: &Address) {
        self.discriminator = BOARD_ACCOUNT;
        self.competition = competition.to_bytes();
    }

    pub fn round_state(&self) -> RoundState {
        // Only this program writes the byte, always from a RoundState.
        RoundState::from_u8(self.round.state).unwrap_or(RoundState::None)
    }

    fn set_state(&mut self, s: RoundState) {
        self.round.state = s as u8;
    }

    /// The entries so far.
    pub fn entries(&self) -> &[Entry] {
        &self.submissions[..usize::from(self.submission_count.get()).min(MAX_SUBMISSIONS)]
    }

    /// The validators so far (active, left or faulted).
    pub fn validators(&self) -> &[Validator] {
        &self.validators[..usize::from(self.validator_count).min(MAX_VALIDATORS)]
    }

    fn validator_index(&self, key: &Address) -> Option<usize> {
        self.validators().iter().position(|v| &v.key == key.as_array())
    }

    /// The validator `key`, if it joined (and its slot was not reused).
    pub fn validator(&self, key: &Address) -> Option<&Validator> {
        self.validator_index(key).map(|i| &self.validators[i])
    }

    /// The votes of the round.
    pub fn votes(&self) -> &[Vote] {
        &self.round.votes[..usize::from(self.round.vote_count).min(MAX_VALIDATORS)]
    }

    fn voted(&self, validator: usize) -> bool {
        self.votes().iter().any(|v| usize::from(v.validator) == validator)
    }

    // ------------------------------------------------------------- entries

    /// A miner's first commit, at `slot`: a new entry; returns its index.
    pub fn add_entry(&mut self, miner: &Address, slot: u64) -> Result<u16, E> {
        let index = self.submission_count.get();
        let e = self.submissions.get_mut(usize::from(index)).ok_or(E::CompetitionFull)?;
        *e = Entry { miner: miner.to_bytes(), ..Entry::default() };
        e.slot.set(slot);
        // Note: index < MAX_SUBMISSIONS (256), checked by the get above.
        #[allow(clippy::arithmetic_side_effects)]
        self.submission_count.set(index + 1);
        Ok(index)
    }

    /// The entry `index` of `miner`.
    pub fn entry_of(&self, index: u16, miner: &Address) -> Result<&Entry, E> {
        self.entries().get(usize::from(index)).filter(|e| &e.miner == miner.as_array()).ok_or(E::SubmissionMismatch)
    }

    /// A later commit of entry `index` (of `miner`) at `slot`. The current
    /// model moves to prev only if it was committed before the last round
    /// opened; otherwise (a second commit during that round) it is
    /// overwritten. So prev always holds the model the last round evaluates
    /// when the current one came after its opening, and neither a round
    /// under way nor a late vote on a final one sees it change. Returns
    /// whether current moved to prev. The entry is active again.
    pub fn recommit(&mut self, index: u16, miner: &Address, slot: u64) -> Result<bool, E> {
        self.entry_of(index, miner)?;
        let open_slot = self.round.open_slot.get();
        let e = &mut self.submissions[usize::from(index)];
        let shift = e.slot.get() < open_slot;
        if shift {
            e.prev_slot = e.slot;
        }
        e.slot.set(slot);
        e.status = ENTRY_ACTIVE;
        Ok(shift)
    }

    /// What entry `index` (of `miner`) earned since its last claim.
    pub fn owed(&self, index: u16, miner: &Address) -> Result<u64, E> {
        let e = self.entry_of(index, miner)?;
        sub(e.earned.get(), e.claimed.get())
    }

    /// submission_claim: what entry `index` (of `miner`) earned since its
    /// last claim, now claimed (nothing changes on an error).
    pub fn claim(&mut self, c: &mut Competition, index: u16, miner: &Address) -> Result<u64, E> {
        let owed = self.owed(index, miner)?;
        if owed == 0 {
            return Err(E::NothingToClaim);
        }
        c.release(owed)?;
        let e = &mut self.submissions[usize::from(index)];
        e.claimed = e.earned;
        Ok(owed)
    }

    // ---------------------------------------------------------- validators

    /// validator_join: `key` joins with the competition's current stake, in
    /// a new slot or its own former one; a slot left by another key is
    /// reused once the board is full (unless it voted in the round, whose
    /// votes name slots). Returns (index, stake).
    pub fn join(&mut self, c: &mut Competition, key: &Address) -> Result<(u8, u64), E> {
        let index = match self.validator_index(key) {
            Some(i) => match self.validators[i].status {
                VALIDATOR_ACTIVE => return Err(E::ValidatorActive),
                VALIDATOR_FAULTED => return Err(E::ValidatorFaulted),
                _ => i,
            },
            None if usize::from(self.validator_count) < MAX_VALIDATORS => {
                let i = usize::from(self.validator_count);
                // Note: i < MAX_VALIDATORS (32).
                #[allow(clippy::arithmetic_side_effects)]
                let count = self.validator_count + 1;
                self.validator_count = count;
                i
            }
            None => (0..MAX_VALIDATORS)
                .find(|&i| self.validators[i].status == VALIDATOR_LEFT && !self.voted(i))
                .ok_or(E::ValidatorsFull)?,
        };
        let stake = c.validator_stake;
        c.stakes = add(c.stakes, stake)?;
        let v = &mut self.validators[index];
        if &v.key != key.as_array() {
            *v = Validator { key: key.to_bytes(), ..Validator::default() };
        }
        v.stake.set(stake);
        v.status = VALIDATOR_ACTIVE;
        // Note: index < MAX_VALIDATORS (32).
        Ok((index as u8, stake))
    }

    /// validator_leave: returns (index, stake). A validator whose vote is in
    /// the round being evaluated stays until the round is final or expired
    /// (a disagreeing vote is faulted at the finalization); a faulted one
    /// has nothing to take back.
    pub fn leave(&mut self, c: &mut Competition, key: &Address) -> Result<(u8, u64), E> {
        let index = self.validator_index(key).ok_or(E::NotValidator)?;
        match self.validators[index].status {
            VALIDATOR_ACTIVE => {}
            VALIDATOR_FAULTED => return Err(E::ValidatorFaulted),
            _ => return Err(E::NotValidator),
        }
        if self.round_state() == RoundState::Evaluating && self.voted(index) {
            return Err(E::ValidatorLocked);
        }
        let v = &mut self.validators[index];
        let stake = v.stake.get();
        c.stakes = sub(c.stakes, stake)?;
        v.stake.set(0);
        v.status = VALIDATOR_LEFT;
        // Note: index < MAX_VALIDATORS (32).
        Ok((index as u8, stake))
    }

    /// Faults validator `index`: its stake moves to the forfeited stakes
    /// (burned by stake_burn) and it can never join again.
    fn fault(&mut self, c: &mut Competition, index: usize) -> Result<(), E> {
        let v = &mut self.validators[index];
        let stake = v.stake.get();
        c.stakes = sub(c.stakes, stake)?;
        c.forfeited = add(c.forfeited, stake)?;
        v.stake.set(0);
        v.status = VALIDATOR_FAULTED;
        v.faults.set(v.faults.get().saturating_add(1));
        Ok(())
    }

    // -------------------------------------------------------------- rounds

    /// The entries a round opened at `open_slot` evaluates, and their count.
    pub fn eligible_at(&self, open_slot: u64) -> ([u8; 32], u16) {
        let mut bitmap = [0u8; 32];
        let mut count = 0u16;
        for (i, e) in self.entries().iter().enumerate() {
            if e.eligible_at(open_slot) {
                set_bit(&mut bitmap, i);
                count = count.saturating_add(1);
            }
        }
        (bitmap, count)
    }

    /// What round_tick does at slot `now` in competition `c`: expire a round
    /// past its deadline (also while paused), else (not paused) open a round
    /// once the last one is over, `round_slots` have passed since it opened
    /// (rounds come at most once per round length, so the reward per slot
    /// does not depend on how fast validators are) and an entry is
    /// eligible, or seed an open round once SlotHashes holds a slot after
    /// its opening (`newest_hash_slot`: its newest entry's slot; None when
    /// empty).
    pub fn tick_action(&self, c: &Competition, now: u64, newest_hash_slot: Option<u64>) -> Result<Tick, E> {
        let state = self.round_state();
        if state == RoundState::Evaluating && now > self.round.deadline_slot.get() {
            return Ok(Tick::Expire);
        }
        if c.paused {
            return Err(E::CompetitionPaused);
        }
        let due = self.round.number.get() == 0 || now >= self.round.open_slot.get().saturating_add(c.round_slots);
        match state {
            RoundState::None | RoundState::Final | RoundState::Expired if due && self.eligible_at(now).1 > 0 => Ok(Tick::Open),
            RoundState::SeedPending if newest_hash_slot.is_some_and(|s| s > self.round.seed_slot.get()) => Ok(Tick::Seed),
            _ => Err(E::NothingToTick),
        }
    }

    /// Opens the next round at slot `now` with the competition's rules; the
    /// last round's votes are cleared.
    pub fn open_round(&mut self, c: &Competition, now: u64) -> Result<Opened, E> {
        let number = self.round.number.get().checked_add(1).ok_or(E::MathOverflow)?;
        let (eligible, count) = self.eligible_at(now);
        let entries = self.submission_count.get();
        let r = &mut self.round;
        r.number.set(number);
        r.open_slot.set(now);
        r.seed_slot.set(now);
        r.seed = [0; 32];
        r.deadline_slot.set(0);
        r.entries.set(entries);
        r.eligible = eligible;
        r.quorum = c.quorum;
        r.pages.set(c.pages_per_round);
        r.epsilon_start_ppm.set(c.epsilon_start_ppm);
        r.epsilon_end_ppm.set(c.epsilon_end_ppm);
        r.epsilon_decay_slots.set(c.epsilon_decay_slots);
        r.vote_count = 0;
        r.votes = [Vote::default(); MAX_VALIDATORS];
        r.final_digest = [0; 32];
        r.agreeing = 0;
        r.paid.set(0);
        self.set_state(RoundState::SeedPending);
        Ok(Opened { number, entries, eligible: count })
    }

    /// Seeds the open round of `competition` from the SlotHashes entry
    /// (`slot`, `hash`) at slot `now`; votes are due by now + round_slots.
    pub fn seed_round(&mut self, competition: &Address, entry: (u64, &[u8; 32]), now: u64, round_slots: u64) {
        let (slot, hash) = entry;
        self.round.seed = round_seed(competition, self.round.number.get(), slot, hash);
        self.round.seed_slot.set(slot);
        self.round.deadline_slot.set(now.saturating_add(round_slots));
        self.set_state(RoundState::Evaluating);
    }

    /// The deadline passed without a quorum: nothing is paid, nobody faulted.
    pub fn expire_round(&mut self) {
        self.set_state(RoundState::Expired);
    }

    /// round_vote: checks and records the vote of `b.validator`; when its
    /// digest reaches the round's quorum the round becomes final and pays
    /// (`finalize`); on a final round a disagreeing vote faults its voter.
    pub fn vote(&mut self, c: &mut Competition, b: &Ballot<'_>) -> Result<Tally, E> {
        let index = self
            .validator_index(b.validator)
            .filter(|&i| self.validators[i].status == VALIDATOR_ACTIVE)
            .ok_or(E::NotValidator)?;
        if b.round != self.round.number.get() {
            return Err(E::WrongRound);
        }
        let state = self.round_state();
        match state {
            RoundState::Evaluating if b.now > self.round.deadline_slot.get() => return Err(E::RoundDeadlinePassed),
            RoundState::Evaluating | RoundState::Final => {}
            _ => return Err(E::RoundNotOpen),
        }
        if self.voted(index) {
            return Err(E::AlreadyVoted);
        }
        let valid = self.check_ballot(b)?;
        let digest = vote_digest(b.round, &self.round.seed, &b.table_hash, b.wins, &b.invalid);

        // Note: one vote per validator index (checked above), so
        // vote_count < MAX_VALIDATORS here.
        let n = usize::from(self.round.vote_count);
        // Note: index < MAX_VALIDATORS (32).
        let voter = index as u8;
        self.round.votes[n] = Vote { validator: voter, digest };
        #[allow(clippy::arithmetic_side_effects)]
        let count = self.round.vote_count + 1;
        self.round.vote_count = count;
        let v = &mut self.validators[index];
        v.votes.set(v.votes.get().saturating_add(1));

        let mut tally = Tally { validator: voter, digest, finalized: None, faulted: 0 };
        if state == RoundState::Final {
            if digest == self.round.final_digest {
                self.round.agreeing = self.round.agreeing.saturating_add(1);
            } else {
                self.fault(c, index)?;
                tally.faulted = 1 << index;
            }
            return Ok(tally);
        }
        let agreeing = self.votes().iter().filter(|v| v.digest == digest).count();
        if agreeing >= usize::from(self.round.quorum) {
            // Note: agreeing <= vote_count <= MAX_VALIDATORS (32).
            let result = Outcome { digest, valid, agreeing: agreeing as u8 };
            let (finalized, faulted) = self.finalize(c, b, &result)?;
            tally.finalized = Some(finalized);
            tally.faulted = faulted;
        }
        Ok(tally)
    }

    /// A vote's checks: one win count per entry of the round, invalid
    /// entries among the eligible ones, wins only for valid entries (eligible
    /// and not invalid), and at most pages * (valid - 1) each (every page
    /// against every other valid entry). Returns the valid entries.
    fn check_ballot(&self, b: &Ballot<'_>) -> Result<[u8; 32], E> {
        if b.wins.len() != usize::from(self.round.entries.get()) {
            return Err(E::BadVote);
        }
        let mut valid = [0u8; 32];
        let mut count = 0u32;
        for ((v, &eligible), &invalid) in valid.iter_mut().zip(&self.round.eligible).zip(&b.invalid) {
            if invalid & !eligible != 0 {
                return Err(E::BadVote);
            }
            *v = eligible & !invalid;
            count = count.saturating_add(v.count_ones());
        }
        let max = u32::from(self.round.pages.get()).saturating_mul(count.saturating_sub(1));
        for (i, &w) in b.wins.iter().enumerate() {
            if (w != 0 && !bit(&valid, i)) || u32::from(w) > max {
                return Err(E::BadVote);
            }
        }
        Ok(valid)
    }

    /// The round becomes final with the result `r` of ballot `b`: its
    /// entries share the round's pot by weight (softmax of their win
    /// shares), invalid ones are excluded until their next commit, and every
    /// earlier vote for another digest faults its validator. Returns the
    /// payout and the faulted validators.
    // Its weights buffer (1 KiB) stays out of the vote's frame.
    #[inline(never)]
    fn finalize(&mut self, c: &mut Competition, b: &Ballot<'_>, r: &Outcome) -> Result<(Finalized, u32), E> {
        let (digest, valid, agreeing) = (r.digest, &r.valid, r.agreeing);
        let pot = c.round_pot(b.pool_balance)?;
        let n = b.wins.len();
        let mut w = [0u32; MAX_SUBMISSIONS];
        weights(b.wins, valid, c.temperature_ppm, &mut w[..n]);
        let mut credited = 0u64;
        for (i, (&wins, &weight)) in b.wins.iter().zip(&w[..n]).enumerate() {
            let mut paid = [0u64; 1];
            payouts(pot, &[weight], &mut paid);
            let e = &mut self.submissions[i];
            e.earned.set(add(e.earned.get(), paid[0])?);
            e.wins.set(wins);
            e.weight.set(weight);
            if bit(&b.invalid, i) {
                e.status = ENTRY_EXCLUDED;
            }
            credited = add(credited, paid[0])?;
        }
        c.unclaimed = add(c.unclaimed, credited)?;
        c.total_paid = add(c.total_paid, credited)?;
        let mut faulted = 0u32;
        for k in 0..usize::from(self.round.vote_count) {
            let vote = self.round.votes[k];
            if vote.digest != digest {
                let i = usize::from(vote.validator);
                self.fault(c, i)?;
                faulted |= 1 << i;
            }
        }
        let r = &mut self.round;
        r.final_digest = digest;
        r.agreeing = agreeing;
        r.paid.set(pot);
        self.set_state(RoundState::Final);
        Ok((Finalized { paid: pot, credited, agreeing }, faulted))
    }
}
