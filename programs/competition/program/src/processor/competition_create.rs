use psyche_competition_interface::{
    Board, Competition, CompetitionError as E, CompetitionKeys, CompetitionParams, BOARD_SPACE, COMPETITION_SEED, ID, MAX_ID_LEN,
};
use psyche_sdk::cpi::ata::{CreateIdempotent, ASSOCIATED_TOKEN_PROGRAM_ID};
use psyche_sdk::cpi::system::SYSTEM_PROGRAM_ID;
use psyche_sdk::cpi::{Seed, Signer};
use psyche_sdk::sysvar::{Clock, Rent};
use psyche_sdk::token::{check_mint, check_token_program};
use psyche_sdk::{validate, AccountView, Address, ErrorCode, ProgramResult};

use super::{create_pda, emit, store_competition};
use crate::COMPETITION_CREATED;

/// competition_create { id, architecture, max_params, tokenizer_hash,
/// seq_len, precision, data_root, data_location, sequences_per_page,
/// epsilon_start_ppm, epsilon_end_ppm, epsilon_decay_slots, pages_per_round,
/// temperature_ppm, round_slots, reward_per_round, validator_stake,
/// permissioned, quorum }: creates the Competition PDA ["Competition", id],
/// initializes the board (BOARD_SPACE bytes, which the client allocated,
/// zeroed, rent exempt and owned by this program, in the same transaction:
/// it is over the 10 KiB a CPI can create) and the pool, the PDA's
/// associated token account for the reward mint (Associated Token
/// `CreateIdempotent`). Without a pool, reward_mint, pool and token_program
/// are the program id (Anchor's absent account), and the competition pays
/// nothing and takes no stakes. The mint must hold tokens safely
/// (`check_collateral_mint`: no freeze authority, no Token-2022 extension
/// that could freeze, move, hook or tax them).
///
/// Accounts: 0. [WRITE, SIGNER] payer, 1. [SIGNER] authority, 2. [WRITE]
/// competition, 3. [WRITE] board, 4. [] reward_mint, 5. [WRITE] pool,
/// 6. [] token_program, 7. [] associated_token_program, 8. [] system_program.
pub fn competition_create(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [payer, authority, competition, board, mint, pool, token_program, ata_program, system_program] =
        validate::accounts::<9>(accounts)?;
    let p = CompetitionParams::decode(args)?;
    validate::signer(payer)?;
    validate::writable(payer)?;
    validate::signer(authority)?;
    validate::writable(competition)?;
    validate::writable(board)?;
    validate::program(ata_program, &ASSOCIATED_TOKEN_PROGRAM_ID)?;
    validate::program(system_program, &SYSTEM_PROGRAM_ID)?;
    let has_pool = mint.address() != &ID;
    if has_pool {
        validate::writable(pool)?;
        check_token_program(token_program)?;
        check_mint::<E>(mint, token_program.address())?;
    } else {
        super::absent(&[pool, token_program])?;
    }
    // The id is the PDA seed: one that no seed can hold is no id.
    if p.id.is_empty() || p.id.len() > MAX_ID_LEN {
        return Err(E::InvalidId.fail());
    }
    let bump = validate::pda(competition, &[COMPETITION_SEED, p.id.as_bytes()], &ID)?;
    // Only this program can give the PDA data or an owner, so a system-owned
    // PDA is uninitialized (possibly pre-funded by anyone).
    if !competition.owned_by(&SYSTEM_PROGRAM_ID) {
        return Err(E::CompetitionAlreadyExists.fail());
    }
    // A zeroed discriminator: never initialized, so never re-initialized.
    validate::uninitialized(board, &ID)?;
    if board.data_len() != BOARD_SPACE {
        return Err(ErrorCode::ConstraintSpace.fail());
    }
    let rent = Rent::get()?;
    if board.lamports() < rent.minimum_balance(BOARD_SPACE)? {
        return Err(ErrorCode::ConstraintRentExempt.fail());
    }
    let none = Address::new_from_array([0; 32]);
    let pick = |a: &AccountView| if has_pool { a.address().clone() } else { none.clone() };
    let keys = CompetitionKeys {
        bump,
        authority: authority.address().clone(),
        board: board.address().clone(),
        reward_mint: pick(mint),
        token_program: pick(token_program),
        pool: pick(pool),
        created_slot: Clock::get()?.slot,
    };
    let c = Competition::new(&p, &keys).map_err(|e| e.fail())?;

    let bump_seed = [bump];
    let seeds = [Seed::from(COMPETITION_SEED), Seed::from(p.id.as_bytes()), Seed::from(&bump_seed)];
    create_pda(payer, competition, c.space(), &Signer::from(&seeds))?;
    store_competition(competition, &c)?;
    {
        let mut data = board.try_borrow_mut()?;
        let b = Board::from_bytes_mut(&mut data).ok_or_else(|| ErrorCode::AccountDidNotDeserialize.fail())?;
        b.init(competition.address());
    }
    if has_pool {
        // The Associated Token program checks that `pool` is the PDA's
        // account for the mint, so the address stored is the pool's.
        CreateIdempotent { payer, account: pool, wallet: competition, mint, system_program, token_program }.invoke_signed(&[])?;
    }
    emit(&COMPETITION_CREATED, |w| {
        w.address(competition.address())?.address(authority.address())?.address(board.address())?.string(p.id)?;
        Ok(())
    })
}
