//! One handler per instruction. Each destructures its accounts, decodes its
//! arguments, runs every account check, lets the interface decide, then
//! calls other programs and writes its own accounts.

mod competition_close;
mod competition_create;
mod competition_update;
mod competition_withdraw;
mod round_tick;
mod round_vote;
mod stake_burn;
mod submission_claim;
mod submission_commit;
mod validator_join;
mod validator_leave;

pub use competition_close::competition_close;
pub use competition_create::competition_create;
pub use competition_update::competition_update;
pub use competition_withdraw::competition_withdraw;
pub use round_tick::round_tick;
pub use round_vote::round_vote;
pub use stake_burn::stake_burn;
pub use submission_claim::submission_claim;
pub use submission_commit::submission_commit;
pub use validator_join::validator_join;
pub use validator_leave::validator_leave;

use psyche_competition_interface::{
    Board, Competition, CompetitionError as E, Submission, BOARD_ACCOUNT, COMPETITION_ACCOUNT, COMPETITION_SEED, ID,
    SUBMISSION_ACCOUNT, SUBMISSION_SEED,
};
use psyche_sdk::borsh::{BorshError, Writer};
use psyche_sdk::cpi::system::CreatePda;
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::Rent;
use psyche_sdk::token::{mint_decimals, token_account};
use psyche_sdk::{pda, validate, AccountView, Address, ErrorCode, ProgramError, ProgramResult};

/// Checks that `competition` is a Competition of this program at its PDA
/// (stored bump) and decodes it.
fn load_competition(competition: &AccountView) -> Result<Competition, ProgramError> {
    validate::initialized(competition, &ID, &COMPETITION_ACCOUNT)?;
    let c = {
        let data = competition.try_borrow()?;
        Competition::decode(&data).map_err(BorshError::account)?
    };
    let bump = [c.bump];
    let expected = pda::create_program_address(&[COMPETITION_SEED, c.id.as_bytes(), &bump], &ID)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if competition.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(c)
}

/// `load_competition` of a competition that is still open.
fn load_open(competition: &AccountView) -> Result<Competition, ProgramError> {
    let c = load_competition(competition)?;
    if c.closed {
        return Err(E::CompetitionClosed.fail());
    }
    Ok(c)
}

/// Writes the competition back (its size never changes).
fn store_competition(competition: &AccountView, c: &Competition) -> ProgramResult {
    let mut data = competition.try_borrow_mut()?;
    serialized(c.encode(&mut data))
}

/// The signer must be the competition's authority.
fn require_authority(c: &Competition, authority: &AccountView) -> ProgramResult {
    validate::signer(authority)?;
    if authority.address() != &c.authority {
        return Err(E::AuthorityMismatch.fail());
    }
    Ok(())
}

/// Checks that `board` is the board of the competition `c` at
/// `competition`: `c.board`, writable, this program's, the exact size, and
/// naming the competition.
fn check_board(board: &AccountView, c: &Competition, competition: &AccountView) -> ProgramResult {
    validate::writable(board)?;
    if board.address() != &c.board {
        return Err(E::BoardMismatch.fail());
    }
    validate::initialized(board, &ID, &BOARD_ACCOUNT)?;
    let data = board.try_borrow()?;
    let b = Board::from_bytes(&data).ok_or_else(|| ErrorCode::AccountDidNotDeserialize.fail())?;
    if &b.competition != competition.address().as_array() {
        return Err(E::BoardMismatch.fail());
    }
    Ok(())
}

/// Runs `f` on a board `check_board` accepted, in place (it is ~21 KB: never
/// copied).
fn with_board<T>(board: &AccountView, f: impl FnOnce(&mut Board) -> Result<T, E>) -> Result<T, ProgramError> {
    let mut data = board.try_borrow_mut()?;
    let b = Board::from_bytes_mut(&mut data).ok_or_else(|| ErrorCode::AccountDidNotDeserialize.fail())?;
    f(b).map_err(|e| e.fail())
}

/// Checks that `submission` is a Submission of this program at its PDA
/// (stored bump) for `competition` and `miner`, and decodes it.
fn load_submission(submission: &AccountView, competition: &AccountView, miner: &Address) -> Result<Submission, ProgramError> {
    validate::initialized(submission, &ID, &SUBMISSION_ACCOUNT)?;
    let s = {
        let data = submission.try_borrow()?;
        Submission::decode(&data).map_err(BorshError::account)?
    };
    if &s.competition != competition.address() || &s.miner != miner {
        return Err(E::SubmissionMismatch.fail());
    }
    let bump = [s.bump];
    let expected = pda::create_program_address(&[SUBMISSION_SEED, s.competition.as_ref(), s.miner.as_ref(), &bump], &ID)
        .map_err(|_| ErrorCode::ConstraintSeeds.fail())?;
    if submission.address() != &expected {
        return Err(ErrorCode::ConstraintSeeds.fail());
    }
    Ok(s)
}

/// Writes a submission back.
fn store_submission(submission: &AccountView, s: &Submission) -> ProgramResult {
    let mut data = submission.try_borrow_mut()?;
    serialized(s.encode(&mut data))
}

/// The seeds of the Competition PDA, for signing as the pool's owner.
struct CompetitionSeeds<'a> {
    id: &'a [u8],
    bump: [u8; 1],
}

impl<'a> CompetitionSeeds<'a> {
    fn new(c: &'a Competition) -> Self {
        Self { id: c.id.as_bytes(), bump: [c.bump] }
    }

    fn seeds(&self) -> [Seed<'_>; 3] {
        [Seed::from(COMPETITION_SEED), Seed::from(self.id), Seed::from(&self.bump)]
    }
}

/// The pool accounts of an instruction that moves tokens: the competition's
/// pool, its reward mint and token program. Returns the mint's decimals.
fn check_pool(c: &Competition, pool: &AccountView, mint: &AccountView, token_program: &AccountView) -> Result<u8, ProgramError> {
    if !c.has_pool() || pool.address() != &c.pool {
        return Err(E::PoolMismatch.fail());
    }
    if mint.address() != &c.reward_mint {
        return Err(E::MintMismatch.fail());
    }
    validate::program(token_program, &c.token_program)?;
    mint_decimals::<E>(mint, &c.token_program)
}

/// The pool's balance (a token account of the reward mint owned by the
/// competition PDA); the caller checked its address.
fn pool_balance(c: &Competition, pool: &AccountView, competition: &AccountView) -> Result<u64, ProgramError> {
    Ok(token_account::<E>(pool, &c.token_program, &c.reward_mint, Some(competition.address()))?.amount)
}

/// Token accounts an instruction moves no tokens through are passed as the
/// program id (Anchor's absent optional account).
fn absent(accounts: &[&AccountView]) -> ProgramResult {
    accounts.iter().try_for_each(|a| validate::address(a, &ID))
}

/// Creates the program-owned PDA `account` of `size` bytes, rent paid by
/// `payer`.
fn create_pda(payer: &AccountView, account: &AccountView, size: usize, signer: &Signer<'_, '_>) -> ProgramResult {
    let lamports = Rent::get()?.minimum_balance(size)?;
    CreatePda { payer, account, lamports, space: size as u64, owner: &ID }.invoke_signed(signer)
}

/// Maps a full output buffer to Anchor's serialization error.
fn serialized<T>(r: Result<T, BorshError>) -> Result<T, ProgramError> {
    r.map_err(|_| ErrorCode::AccountDidNotSerialize.fail())
}

/// Emits an event whose Borsh payload `write` produces.
fn emit(discriminator: &[u8; 8], write: impl FnOnce(&mut Writer<'_>) -> Result<(), BorshError>) -> ProgramResult {
    let mut buf = [0u8; 256];
    let mut w = Writer::new(&mut buf);
    serialized(write(&mut w))?;
    let n = w.len();
    psyche_sdk::anchor::emit(discriminator, &buf[..n])
}
