//! The `Submission` account: a miner's entry in one competition, with its
//! current model and the one before it (the one a round under way may still
//! be evaluating).

use psyche_sdk::borsh::{BorshError, Reader, Writer};
use psyche_sdk::Address;

use crate::{Competition, CompetitionError as E, Text, MAX_REPO_LEN, SUBMISSION_ACCOUNT};

/// The largest encoding of a model: commitment, revision, params, slot, repo.
// Note: constants.
#[allow(clippy::arithmetic_side_effects)]
const MODEL_SPACE: usize = 32 + 32 + 8 + 8 + 4 + MAX_REPO_LEN;

/// Size of a Submission account: room for two models with the longest repo,
/// so a commit never reallocates (the bytes after the encoding are zero).
// Note: constants.
#[allow(clippy::arithmetic_side_effects)]
pub const SUBMISSION_SPACE: usize = 8 + 1 + 32 + 32 + 2 + 2 * MODEL_SPACE;

/// A committed model: `commitment = sha256(checkpoint bytes ‖ miner)`,
/// `revision = sha256(checkpoint bytes)` (its name on the hub:
/// `<repo>/<hex revision>.safetensors`), the parameter count it declares,
/// the slot of the commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    pub commitment: [u8; 32],
    pub revision: [u8; 32],
    pub params: u64,
    pub slot: u64,
    pub repo: Text<MAX_REPO_LEN>,
}

impl Model {
    /// No model (a submission's `prev` until a commit moves `current` there).
    pub const NONE: Model = Model { commitment: [0; 32], revision: [0; 32], params: 0, slot: 0, repo: Text::EMPTY };

    fn read(r: &mut Reader<'_>) -> Result<Self, BorshError> {
        Ok(Model { commitment: r.array()?, revision: r.array()?, params: r.u64()?, slot: r.u64()?, repo: Text::read(r)? })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BorshError> {
        w.bytes(&self.commitment)?.bytes(&self.revision)?.u64(self.params)?.u64(self.slot)?.byte_vec(self.repo.as_bytes())?;
        Ok(())
    }
}

/// submission_commit's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit<'a> {
    pub commitment: [u8; 32],
    pub revision: [u8; 32],
    pub params: u64,
    pub repo: &'a str,
}

impl<'a> Commit<'a> {
    pub fn decode(args: &'a [u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(args);
        let c = Commit { commitment: r.array()?, revision: r.array()?, params: r.u64()?, repo: r.string()? };
        r.finish()?;
        Ok(c)
    }

    /// The model this commit makes at `slot`, checked against the
    /// competition's constraints as far as the chain can see them (the
    /// validators check the file itself).
    pub fn model(&self, c: &Competition, slot: u64) -> Result<Model, E> {
        if self.params == 0 {
            return Err(E::InvalidParams);
        }
        if self.params > c.max_params {
            return Err(E::ModelTooLarge);
        }
        let repo = Text::new(self.repo).filter(|t| !t.is_empty()).ok_or(E::InvalidRepo)?;
        Ok(Model { commitment: self.commitment, revision: self.revision, params: self.params, slot, repo })
    }
}

/// A decoded `Submission` account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    pub bump: u8,
    pub competition: Address,
    pub miner: Address,
    /// The miner's entry on the board, fixed at its first commit.
    pub index: u16,
    pub current: Model,
    pub prev: Model,
}

impl Submission {
    /// The record of a first commit.
    pub fn new(bump: u8, competition: Address, miner: Address, index: u16, model: Model) -> Self {
        Submission { bump, competition, miner, index, current: model, prev: Model::NONE }
    }

    /// A later commit: `model` becomes current; the current one moves to
    /// prev when `shift` (`Board::recommit` decides, so that the model a
    /// round evaluates never changes under it), else it is overwritten.
    pub fn commit(&mut self, model: Model, shift: bool) {
        if shift {
            self.prev = self.current;
        }
        self.current = model;
    }

    /// Decodes account data, discriminator included (the zeros after the
    /// encoding are not read).
    pub fn decode(data: &[u8]) -> Result<Self, BorshError> {
        let mut r = Reader::new(data);
        if r.array::<8>()? != SUBMISSION_ACCOUNT {
            return Err(BorshError::InvalidTag);
        }
        Ok(Submission {
            bump: r.u8()?,
            competition: r.address()?,
            miner: r.address()?,
            index: r.u16()?,
            current: Model::read(&mut r)?,
            prev: Model::read(&mut r)?,
        })
    }

    /// Writes the account data, discriminator included, and zeroes the rest
    /// (a shorter repo leaves no stale bytes).
    pub fn encode(&self, out: &mut [u8]) -> Result<(), BorshError> {
        let mut w = Writer::new(out);
        w.bytes(&SUBMISSION_ACCOUNT)?.u8(self.bump)?.address(&self.competition)?.address(&self.miner)?.u16(self.index)?;
        self.current.write(&mut w)?;
        self.prev.write(&mut w)?;
        let n = w.len();
        psyche_sdk::mem::fill(&mut out[n..], 0);
        Ok(())
    }
}
