//! Anchor's wire conventions: 8-byte discriminators computed at compile time,
//! instruction dispatch, and events.

use crate::hash::Sha256;
use crate::{ErrorCode, ProgramError, ProgramResult};

/// sha256("<namespace>:<name>")[..8].
pub const fn discriminator(namespace: &str, name: &str) -> [u8; 8] {
    let h = Sha256::new().update(namespace.as_bytes()).update(b":").update(name.as_bytes()).finalize();
    [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]
}

/// An instruction's discriminator; `name` is the snake_case handler name.
pub const fn instruction(name: &str) -> [u8; 8] {
    discriminator("global", name)
}

/// An account type's discriminator; `name` is the CamelCase type name.
pub const fn account(name: &str) -> [u8; 8] {
    discriminator("account", name)
}

/// An event type's discriminator; `name` is the CamelCase type name.
pub const fn event(name: &str) -> [u8; 8] {
    discriminator("event", name)
}

/// Splits instruction data into its discriminator and arguments.
pub fn split_instruction(data: &[u8]) -> Result<([u8; 8], &[u8]), ProgramError> {
    if data.len() < 8 {
        return Err(ErrorCode::InstructionMissing.fail());
    }
    let mut d = [0u8; 8];
    d.copy_from_slice(&data[..8]);
    Ok((d, &data[8..]))
}

/// Largest event (discriminator + Borsh payload) [`emit`] sends.
pub const MAX_EVENT_LEN: usize = 1024;

/// Emits an Anchor event: one "Program data:" log field holding the event's
/// discriminator followed by its Borsh payload, as `emit!` does.
pub fn emit(event_discriminator: &[u8; 8], payload: &[u8]) -> ProgramResult {
    let Some(len) = payload.len().checked_add(8).filter(|&len| len <= MAX_EVENT_LEN) else {
        return Err(ErrorCode::InstructionDidNotSerialize.into());
    };
    let mut buf = [0u8; MAX_EVENT_LEN];
    buf[..8].copy_from_slice(event_discriminator);
    buf[8..len].copy_from_slice(payload);
    crate::log::log_data(&[&buf[..len]]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_discriminators() {
        // Values produced by Anchor for these names.
        assert_eq!(instruction("initialize"), [175, 175, 109, 31, 13, 152, 155, 237]);
        assert_eq!(discriminator("global", "initialize"), instruction("initialize"));
        const ACC: [u8; 8] = account("NewAccount");
        assert_eq!(ACC, crate::hash::sha256(b"account:NewAccount")[..8]);
        assert_ne!(event("Transfer"), account("Transfer"));
    }

    #[test]
    fn split() {
        let data = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        let (d, rest) = split_instruction(&data).unwrap();
        assert_eq!(d, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(rest, &[9]);
        assert_eq!(split_instruction(&data[..7]), Err(ProgramError::Custom(100)));
    }

    #[test]
    fn oversized_event_is_refused() {
        let big = [0u8; MAX_EVENT_LEN];
        assert_eq!(emit(&event("Big"), &big), Err(ProgramError::Custom(103)));
        assert_eq!(emit(&event("Small"), &big[..MAX_EVENT_LEN - 8]), Ok(()));
    }
}
