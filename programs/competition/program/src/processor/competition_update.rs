use psyche_competition_interface::CompetitionUpdate;
use psyche_sdk::{validate, AccountView, ProgramResult};

use super::{load_open, require_authority, store_competition};

/// competition_update { epsilon_start_ppm?, epsilon_end_ppm?,
/// epsilon_decay_slots?, pages_per_round?, temperature_ppm?, round_slots?,
/// reward_per_round?, validator_stake?, quorum?, paused? }: the authority
/// changes the round rules, the reward and stake, or pauses (no commits, no
/// new or seeded rounds; a round past its deadline still expires, votes and
/// claims go on). Every rule of competition_create holds after it
/// (`EmptyUpdate` when nothing is given). The model constraints and the
/// dataset never change; a round under way keeps the rules it opened with,
/// and a changed stake applies to later joins.
///
/// Accounts: 0. [SIGNER] authority, 1. [WRITE] competition.
pub fn competition_update(accounts: &[AccountView], args: &[u8]) -> ProgramResult {
    let [authority, competition] = validate::accounts::<2>(accounts)?;
    let u = CompetitionUpdate::decode(args)?;
    validate::writable(competition)?;
    let mut c = load_open(competition)?;
    require_authority(&c, authority)?;
    c.update(&u).map_err(|e| e.fail())?;
    store_competition(competition, &c)
}
