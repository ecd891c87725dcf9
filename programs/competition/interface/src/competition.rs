//! The `Competition` account: the model constraints, the dataset and the
//! round rules (fixed at creation except the round rules), the reward pool,
//! and the sums that make up the pool's reserve.

use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::Address;

use crate::{
    add, sub, CompetitionError as E, ARCHITECTURE_LLAMA, COMPETITION_ACCOUNT, MAX_ID_LEN, MAX_LOCATION_LEN,
    MAX_PAGES_PER_ROUND, MAX_SEQ_LEN, MAX_TEMPERATURE_PPM, MAX_VALIDATORS, MIN_TEMPERATURE_PPM, PPM, PRECISION_MX8,
};

/// A string of at most N bytes kept inline (no allocator on chain), stored
/// as a Borsh string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Text<const N: usize> {
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    /// An empty text.
    pub const EMPTY: Self = Text { len: 0, bytes: [0; N] };

    /// `s`, or None when it holds more than N (<= 255) bytes.
    pub fn new(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        let len = u8::try_from(b.len()).ok().filter(|&l| usize::from(l) <= N)?;
        let mut bytes = [0u8; N];
        bytes[..b.len()].copy_from_slice(b);
        Some(Text { len, bytes })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads a Borsh string of at most N bytes.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, BorshError> {
        Self::new(r.string()?).ok_or(BorshError::InvalidTag)
    }
}

/// Size of a Competition account: fixed fields, the id and the data
/// location (neither ever changes).
// Note: callers pass lengths of at most 32 and 192.
#[allow(clippy::arithmetic_side_effects)]
pub const fn competition_space(id_len: usize, location_len: usize) -> usize {
    let model = 1 + 8 + 32 + 4 + 1;
    let data = 32 + (4 + location_len) + 4;
    let rules = 4 + 4 + 8 + 2 + 4 + 8;
    let pool = 32 * 3 + 8 + 8 + 1 + 1;
    8 + 1 + (4 + id_len) + 32 * 2 + model + data + rules + pool + 8 + 1 + 1 + 8 * 5
}

/// A decoded `Competition` account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Competition {
    pub bump: u8,
    /// The PDA seed, 1..=32 bytes.
    pub id: Text<MAX_ID_LEN>,
    pub authority: Address,
    /// The Board account (allocated by the client at creation).
    pub board: Address,
    // Model constraints.
    pub architecture: u8,
    pub max_params: u64,
    pub tokenizer_hash: [u8; 32],
    pub seq_len: u32,
    pub precision: u8,
    // The dataset: pages of sequences_per_page sequences under data_root.
    pub data_root: [u8; 32],
    pub data_location: Text<MAX_LOCATION_LEN>,
    pub sequences_per_page: u32,
    // Round rules (competition_update may change them; a round keeps the
    // ones it opened with).
    pub epsilon_start_ppm: u32,
    pub epsilon_end_ppm: u32,
    pub epsilon_decay_slots: u64,
    pub pages_per_round: u16,
    pub temperature_ppm: u32,
    pub round_slots: u64,
    /// All zero without a pool (then token_program and pool are too).
    pub reward_mint: Address,
    pub token_program: Address,
    /// The competition PDA's associated token account for the reward mint.
    pub pool: Address,
    pub reward_per_round: u64,
    pub validator_stake: u64,
    pub permissioned: bool,
    pub quorum: u8,
    pub created_slot: u64,
    pub paused: bool,
    pub closed: bool,
    /// Sum over entries of earned - claimed.
    pub unclaimed: u64,
    /// Stakes held for active validators.
    pub stakes: u64,
    /// Stakes of faulted validators, not burned yet.
    pub forfeited: u64,
    pub total_paid: u64,
    pub total_burned: u64,
}

/// competition_create's arguments, in wire order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompetitionParams<'a> {
    pub id: &'a str,
    pub architecture: u8,
    pub max_params: u64,
    pub tokenizer_hash: [u8; 32],
    pub seq_len: u32,
    pub precision: u8,
    pub data_root: [u8; 32],
    pub data_location: &'a str,
    pub sequences_per_page: u32,
    pub epsilon_start_ppm: u32,
    pub epsilon_end_ppm: u32,
    pub epsilon_decay_slots: u64,
    pub pages_per_round: u16,
    pub temperature_ppm: u32,
    pub round_slots: u64,
    pub reward_per_round: u64,
    pub validator_stake: u64,
    pub permissioned: bool,
    pub quorum: u8,
}

impl<'a> CompetitionParams<'a> {
    pub fn decode(args: &'a [u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(args);
        let p = CompetitionParams {
            id: r.string()?,
            architecture: r.u8()?,
            max_params: r.u64()?,
            tokenizer_hash: r.array()?,
            seq_len: r.u32()?,
            precision: r.u8()?,
            data_root: r.array()?,
            data_location: r.string()?,
            sequences_per_page: r.u32()?,
            epsilon_start_ppm: r.u32()?,
            epsilon_end_ppm: r.u32()?,
            epsilon_decay_slots: r.u64()?,
            pages_per_round: r.u16()?,
            temperature_ppm: r.u32()?,
            round_slots: r.u64()?,
            reward_per_round: r.u64()?,
            validator_stake: r.u64()?,
            permissioned: r.bool()?,
            quorum: r.u8()?,
        };
        r.finish()?;
        Ok(p)
    }
}

/// What competition_create knows besides its arguments.
pub struct CompetitionKeys {
    pub bump: u8,
    pub authority: Address,
    pub board: Address,
    /// All zero without a pool.
    pub reward_mint: Address,
    pub token_program: Address,
    pub pool: Address,
    pub created_slot: u64,
}

/// competition_update's arguments: each rule it changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompetitionUpdate {
    pub epsilon_start_ppm: Option<u32>,
    pub epsilon_end_ppm: Option<u32>,
    pub epsilon_decay_slots: Option<u64>,
    pub pages_per_round: Option<u16>,
    pub temperature_ppm: Option<u32>,
    pub round_slots: Option<u64>,
    pub reward_per_round: Option<u64>,
    pub validator_stake: Option<u64>,
    pub quorum: Option<u8>,
    pub paused: Option<bool>,
}

macro_rules! option {
    ($r:expr, $read:ident) => {
        if $r.option_tag()? {
            Some($r.$read()?)
        } else {
            None
        }
    };
}

impl CompetitionUpdate {
    pub fn decode(args: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(args);
        let u = CompetitionUpdate {
            epsilon_start_ppm: option!(r, u32),
            epsilon_end_ppm: option!(r, u32),
            epsilon_decay_slots: option!(r, u64),
            pages_per_round: option!(r, u16),
            temperature_ppm: option!(r, u32),
            round_slots: option!(r, u64),
            reward_per_round: option!(r, u64),
            validator_stake: option!(r, u64),
            quorum: option!(r, u8),
            paused: option!(r, bool),
        };
        r.finish()?;
        Ok(u)
    }
}

impl Competition {
    /// A new competition from competition_create's arguments, checked.
    pub fn new(p: &CompetitionParams<'_>, k: &CompetitionKeys) -> Result<Self, E> {
        let c = Competition {
            bump: k.bump,
            id: Text::new(p.id).ok_or(E::InvalidId)?,
            authority: k.authority.clone(),
            board: k.board.clone(),
            architecture: p.architecture,
            max_params: p.max_params,
            tokenizer_hash: p.tokenizer_hash,
            seq_len: p.seq_len,
            precision: p.precision,
            data_root: p.data_root,
            data_location: Text::new(p.data_location).ok_or(E::InvalidDataLocation)?,
            sequences_per_page: p.sequences_per_page,
            epsilon_start_ppm: p.epsilon_start_ppm,
            epsilon_end_ppm: p.epsilon_end_ppm,
            epsilon_decay_slots: p.epsilon_decay_slots,
            pages_per_round: p.pages_per_round,
            temperature_ppm: p.temperature_ppm,
            round_slots: p.round_slots,
            reward_mint: k.reward_mint.clone(),
            token_program: k.token_program.clone(),
            pool: k.pool.clone(),
            reward_per_round: p.reward_per_round,
            validator_stake: p.validator_stake,
            permissioned: p.permissioned,
            quorum: p.quorum,
            created_slot: k.created_slot,
            paused: false,
            closed: false,
            unclaimed: 0,
            stakes: 0,
            forfeited: 0,
            total_paid: 0,
            total_burned: 0,
        };
        c.check()?;
        Ok(c)
    }

    /// The rules every competition keeps (one error each, in this order).
    pub fn check(&self) -> Result<(), E> {
        if self.id.is_empty() {
            return Err(E::InvalidId);
        }
        if self.architecture > ARCHITECTURE_LLAMA {
            return Err(E::InvalidArchitecture);
        }
        if self.precision > PRECISION_MX8 {
            return Err(E::InvalidPrecision);
        }
        if self.max_params == 0 {
            return Err(E::InvalidMaxParams);
        }
        if self.seq_len == 0 || self.seq_len > MAX_SEQ_LEN {
            return Err(E::InvalidSeqLen);
        }
        if self.sequences_per_page == 0 {
            return Err(E::InvalidSequencesPerPage);
        }
        if self.data_location.is_empty() {
            return Err(E::InvalidDataLocation);
        }
        if self.epsilon_start_ppm > PPM || self.epsilon_end_ppm > self.epsilon_start_ppm {
            return Err(E::InvalidEpsilon);
        }
        if self.pages_per_round == 0 || self.pages_per_round > MAX_PAGES_PER_ROUND {
            return Err(E::InvalidPagesPerRound);
        }
        if !(MIN_TEMPERATURE_PPM..=MAX_TEMPERATURE_PPM).contains(&self.temperature_ppm) {
            return Err(E::InvalidTemperature);
        }
        if self.round_slots == 0 {
            return Err(E::InvalidRoundSlots);
        }
        if self.quorum == 0 || usize::from(self.quorum) > MAX_VALIDATORS {
            return Err(E::InvalidQuorum);
        }
        if !self.has_pool() && (self.reward_per_round != 0 || self.validator_stake != 0) {
            return Err(E::RewardsWithoutPool);
        }
        Ok(())
    }

    /// competition_update: applies `u` when the result keeps every rule
    /// (nothing changes on an error). The constraints and the dataset never
    /// change; a round under way keeps the rules it opened with.
    pub fn update(&mut self, u: &CompetitionUpdate) -> Result<(), E> {
        if u == &CompetitionUpdate::default() {
            return Err(E::EmptyUpdate);
        }
        let mut c = self.clone();
        c.epsilon_start_ppm = u.epsilon_start_ppm.unwrap_or(c.epsilon_start_ppm);
        c.epsilon_end_ppm = u.epsilon_end_ppm.unwrap_or(c.epsilon_end_ppm);
        c.epsilon_decay_slots = u.epsilon_decay_slots.unwrap_or(c.epsilon_decay_slots);
        c.pages_per_round = u.pages_per_round.unwrap_or(c.pages_per_round);
        c.temperature_ppm = u.temperature_ppm.unwrap_or(c.temperature_ppm);
        c.round_slots = u.round_slots.unwrap_or(c.round_slots);
        c.reward_per_round = u.reward_per_round.unwrap_or(c.reward_per_round);
        c.validator_stake = u.validator_stake.unwrap_or(c.validator_stake);
        c.quorum = u.quorum.unwrap_or(c.quorum);
        c.paused = u.paused.unwrap_or(c.paused);
        c.check()?;
        *self = c;
        Ok(())
    }

    /// Whether the competition has a reward pool (a reward mint).
    pub fn has_pool(&self) -> bool {
        self.reward_mint != Address::new_from_array([0; 32])
    }

    /// Tokens the pool must keep: rewards credited and not claimed, stakes
    /// held, forfeited stakes not burned yet.
    pub fn reserve(&self) -> Result<u64, E> {
        add(add(self.unclaimed, self.stakes)?, self.forfeited)
    }

    /// The pool's tokens nobody is owed, of a `balance`.
    pub fn unallocated(&self, balance: u64) -> Result<u64, E> {
        Ok(balance.saturating_sub(self.reserve()?))
    }

    /// What a round that becomes final pays: reward_per_round, or what the
    /// pool holds beyond its reserve when that is less (nothing without a
    /// pool).
    pub fn round_pot(&self, balance: u64) -> Result<u64, E> {
        if !self.has_pool() {
            return Ok(0);
        }
        Ok(self.reward_per_round.min(self.unallocated(balance)?))
    }

    /// competition_withdraw: the authority takes at most the unallocated tokens.
    pub fn check_withdraw(&self, amount: u64, balance: u64) -> Result<(), E> {
        if amount > self.unallocated(balance)? {
            return Err(E::WithdrawExceedsUnallocated);
        }
        Ok(())
    }

    /// stake_burn: takes the forfeited stakes to burn (nothing changes on an
    /// error).
    pub fn take_forfeited(&mut self) -> Result<u64, E> {
        let amount = self.forfeited;
        if amount == 0 {
            return Err(E::NothingToBurn);
        }
        self.total_burned = add(self.total_burned, amount)?;
        self.forfeited = 0;
        Ok(amount)
    }

    /// Records a claim of `amount` credited rewards.
    pub fn release(&mut self, amount: u64) -> Result<(), E> {
        self.unclaimed = sub(self.unclaimed, amount)?;
        Ok(())
    }

    /// competition_close needs nothing reserved: every reward claimed, every
    /// stake returned and every forfeited stake burned.
    pub fn check_closable(&self) -> Result<(), E> {
        if self.unclaimed != 0 {
            return Err(E::UnclaimedRewardsRemain);
        }
        if self.stakes != 0 {
            return Err(E::StakesRemain);
        }
        if self.forfeited != 0 {
            return Err(E::BurnPending);
        }
        Ok(())
    }

    /// Decodes account data, discriminator included.
    pub fn decode(data: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != COMPETITION_ACCOUNT {
            return Err(BorshError::InvalidTag);
        }
        let c = Competition {
            bump: r.u8()?,
            id: Text::read(&mut r)?,
            authority: r.address()?,
            board: r.address()?,
            architecture: r.u8()?,
            max_params: r.u64()?,
            tokenizer_hash: r.array()?,
            seq_len: r.u32()?,
            precision: r.u8()?,
            data_root: r.array()?,
            data_location: Text::read(&mut r)?,
            sequences_per_page: r.u32()?,
            epsilon_start_ppm: r.u32()?,
            epsilon_end_ppm: r.u32()?,
            epsilon_decay_slots: r.u64()?,
            pages_per_round: r.u16()?,
            temperature_ppm: r.u32()?,
            round_slots: r.u64()?,
            reward_mint: r.address()?,
            token_program: r.address()?,
            pool: r.address()?,
            reward_per_round: r.u64()?,
            validator_stake: r.u64()?,
            permissioned: r.bool()?,
            quorum: r.u8()?,
            created_slot: r.u64()?,
            paused: r.bool()?,
            closed: r.bool()?,
            unclaimed: r.u64()?,
            stakes: r.u64()?,
            forfeited: r.u64()?,
            total_paid: r.u64()?,
            total_burned: r.u64()?,
        };
        r.finish()?;
        Ok(c)
    }

    /// Writes the account data, discriminator included.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), BorshError> {
        Writer::new(out)
            .bytes(&COMPETITION_ACCOUNT)?
            .u8(self.bump)?
            .byte_vec(self.id.as_bytes())?
            .address(&self.authority)?
            .address(&self.board)?
            .u8(self.architecture)?
            .u64(self.max_params)?
            .bytes(&self.tokenizer_hash)?
            .u32(self.seq_len)?
            .u8(self.precision)?
            .bytes(&self.data_root)?
            .byte_vec(self.data_location.as_bytes())?
            .u32(self.sequences_per_page)?
            .u32(self.epsilon_start_ppm)?
            .u32(self.epsilon_end_ppm)?
            .u64(self.epsilon_decay_slots)?
            .u16(self.pages_per_round)?
            .u32(self.temperature_ppm)?
            .u64(self.round_slots)?
            .address(&self.reward_mint)?
            .address(&self.token_program)?
            .address(&self.pool)?
            .u64(self.reward_per_round)?
            .u64(self.validator_stake)?
            .bool(self.permissioned)?
            .u8(self.quorum)?
            .u64(self.created_slot)?
            .bool(self.paused)?
            .bool(self.closed)?
            .u64(self.unclaimed)?
            .u64(self.stakes)?
            .u64(self.forfeited)?
            .u64(self.total_paid)?
            .u64(self.total_burned)?;
        Ok(())
    }

    /// The account size of this competition.
    pub fn space(&self) -> usize {
        competition_space(self.id.as_bytes().len(), self.data_location.as_bytes().len())
    }
}
