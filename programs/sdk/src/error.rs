//! Errors numbered like Anchor's, so clients (Anchor's TS client, anchor-go)
//! decode familiar names: framework failures reuse Anchor's codes, program
//! errors start at 6000 ([`define_errors!`](crate::define_errors)).

use crate::log::Message;
use crate::ProgramError;

/// Anchor's framework error codes that our validation helpers return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    InstructionMissing = 100,
    InstructionFallbackNotFound = 101,
    InstructionDidNotDeserialize = 102,
    InstructionDidNotSerialize = 103,
    ConstraintMut = 2000,
    ConstraintHasOne = 2001,
    ConstraintSigner = 2002,
    ConstraintRaw = 2003,
    ConstraintOwner = 2004,
    ConstraintRentExempt = 2005,
    ConstraintSeeds = 2006,
    ConstraintExecutable = 2007,
    ConstraintAddress = 2012,
    ConstraintZero = 2013,
    ConstraintSpace = 2019,
    AccountDiscriminatorAlreadySet = 3000,
    AccountDiscriminatorNotFound = 3001,
    AccountDiscriminatorMismatch = 3002,
    AccountDidNotDeserialize = 3003,
    AccountDidNotSerialize = 3004,
    AccountNotEnoughKeys = 3005,
    AccountNotMutable = 3006,
    AccountOwnedByWrongProgram = 3007,
    InvalidProgramId = 3008,
    InvalidProgramExecutable = 3009,
    AccountNotSigner = 3010,
    AccountNotSystemOwned = 3011,
    AccountNotInitialized = 3012,
    AccountNotProgramData = 3013,
    AccountSysvarMismatch = 3015,
    AccountReallocExceedsLimit = 3016,
    AccountDuplicateReallocs = 3017,
    DeclaredProgramIdMismatch = 4100,
    InvalidNumericConversion = 4102,
    /// SDK-specific, host builds only: the call needs the Solana runtime.
    OnChainOnly = 4900,
}

impl ErrorCode {
    /// Every code, in declaration (and numeric) order.
    pub const ALL: [ErrorCode; 35] = {
        use ErrorCode::*;
        [
            InstructionMissing, InstructionFallbackNotFound, InstructionDidNotDeserialize, InstructionDidNotSerialize,
            ConstraintMut, ConstraintHasOne, ConstraintSigner, ConstraintRaw, ConstraintOwner, ConstraintRentExempt,
            ConstraintSeeds, ConstraintExecutable, ConstraintAddress, ConstraintZero, ConstraintSpace,
            AccountDiscriminatorAlreadySet, AccountDiscriminatorNotFound, AccountDiscriminatorMismatch,
            AccountDidNotDeserialize, AccountDidNotSerialize, AccountNotEnoughKeys, AccountNotMutable,
            AccountOwnedByWrongProgram, InvalidProgramId, InvalidProgramExecutable, AccountNotSigner,
            AccountNotSystemOwned, AccountNotInitialized, AccountNotProgramData, AccountSysvarMismatch,
            AccountReallocExceedsLimit, AccountDuplicateReallocs, DeclaredProgramIdMismatch, InvalidNumericConversion,
            OnChainOnly,
        ]
    };

    /// The code numbered `code`, if it is one of these (host tools name the
    /// error of a `ProgramError::Custom` with it).
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| *e as u32 == code)
    }

    /// The variant name, as Anchor's IDL and clients spell it.
    pub const fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            InstructionMissing => "InstructionMissing",
            InstructionFallbackNotFound => "InstructionFallbackNotFound",
            InstructionDidNotDeserialize => "InstructionDidNotDeserialize",
            InstructionDidNotSerialize => "InstructionDidNotSerialize",
            ConstraintMut => "ConstraintMut",
            ConstraintHasOne => "ConstraintHasOne",
            ConstraintSigner => "ConstraintSigner",
            ConstraintRaw => "ConstraintRaw",
            ConstraintOwner => "ConstraintOwner",
            ConstraintRentExempt => "ConstraintRentExempt",
            ConstraintSeeds => "ConstraintSeeds",
            ConstraintExecutable => "ConstraintExecutable",
            ConstraintAddress => "ConstraintAddress",
            ConstraintZero => "ConstraintZero",
            ConstraintSpace => "ConstraintSpace",
            AccountDiscriminatorAlreadySet => "AccountDiscriminatorAlreadySet",
            AccountDiscriminatorNotFound => "AccountDiscriminatorNotFound",
            AccountDiscriminatorMismatch => "AccountDiscriminatorMismatch",
            AccountDidNotDeserialize => "AccountDidNotDeserialize",
            AccountDidNotSerialize => "AccountDidNotSerialize",
            AccountNotEnoughKeys => "AccountNotEnoughKeys",
            AccountNotMutable => "AccountNotMutable",
            AccountOwnedByWrongProgram => "AccountOwnedByWrongProgram",
            InvalidProgramId => "InvalidProgramId",
            InvalidProgramExecutable => "InvalidProgramExecutable",
            AccountNotSigner => "AccountNotSigner",
            AccountNotSystemOwned => "AccountNotSystemOwned",
            AccountNotInitialized => "AccountNotInitialized",
            AccountNotProgramData => "AccountNotProgramData",
            AccountSysvarMismatch => "AccountSysvarMismatch",
            AccountReallocExceedsLimit => "AccountReallocExceedsLimit",
            AccountDuplicateReallocs => "AccountDuplicateReallocs",
            DeclaredProgramIdMismatch => "DeclaredProgramIdMismatch",
            InvalidNumericConversion => "InvalidNumericConversion",
            OnChainOnly => "OnChainOnly",
        }
    }

    /// Anchor's message for the code.
    pub const fn message(self) -> &'static str {
        use ErrorCode::*;
        match self {
            InstructionMissing => "8 byte instruction identifier not provided",
            InstructionFallbackNotFound => "Fallback functions are not supported",
            InstructionDidNotDeserialize => "The program could not deserialize the given instruction",
            InstructionDidNotSerialize => "The program could not serialize the given instruction",
            ConstraintMut => "A mut constraint was violated",
            ConstraintHasOne => "A has one constraint was violated",
            ConstraintSigner => "A signer constraint was violated",
            ConstraintRaw => "A raw constraint was violated",
            ConstraintOwner => "An owner constraint was violated",
            ConstraintRentExempt => "A rent exemption constraint was violated",
            ConstraintSeeds => "A seeds constraint was violated",
            ConstraintExecutable => "An executable constraint was violated",
            ConstraintAddress => "An address constraint was violated",
            ConstraintZero => "Expected zero account discriminant",
            ConstraintSpace => "A space constraint was violated",
            AccountDiscriminatorAlreadySet => "The account discriminator was already set on this account",
            AccountDiscriminatorNotFound => "No discriminator was found on the account",
            AccountDiscriminatorMismatch => "Account discriminator did not match what was expected",
            AccountDidNotDeserialize => "Failed to deserialize the account",
            AccountDidNotSerialize => "Failed to serialize the account",
            AccountNotEnoughKeys => "Not enough account keys given to the instruction",
            AccountNotMutable => "The given account is not mutable",
            AccountOwnedByWrongProgram => "The given account is owned by a different program than expected",
            InvalidProgramId => "Program ID was not as expected",
            InvalidProgramExecutable => "Program account is not executable",
            AccountNotSigner => "The given account did not sign",
            AccountNotSystemOwned => "The given account is not owned by the system program",
            AccountNotInitialized => "The program expected this account to be already initialized",
            AccountNotProgramData => "The given account is not a program data account",
            AccountSysvarMismatch => "The given public key does not match the required sysvar",
            AccountReallocExceedsLimit => "The account reallocation exceeds the MAX_PERMITTED_DATA_INCREASE limit",
            AccountDuplicateReallocs => "The account was duplicated for more than one reallocation",
            DeclaredProgramIdMismatch => "The declared program id does not match the actual program id",
            InvalidNumericConversion => "Error during numeric conversion",
            OnChainOnly => "This operation needs the Solana runtime",
        }
    }
}

impl From<ErrorCode> for ProgramError {
    fn from(e: ErrorCode) -> Self {
        ProgramError::Custom(e as u32)
    }
}

/// Logs an error the way Anchor does, so explorers and Anchor's client show
/// it: "AnchorError occurred. Error Code: <name>. Error Number: <n>. Error
/// Message: <msg>.". (Five argument registers: code, and two per string.)
#[inline(never)]
pub fn log_error(code: u32, name: &str, message: &str) {
    let mut m = Message::<256>::new();
    m.str("AnchorError occurred. Error Code: ")
        .str(name)
        .str(". Error Number: ")
        .u64(code as u64)
        .str(". Error Message: ")
        .str(message)
        .str(".");
    m.log();
}

impl ErrorCode {
    /// Logs the error like Anchor and converts it.
    #[inline(always)]
    pub fn fail(self) -> ProgramError {
        log_error(self as u32, self.name(), self.message());
        ProgramError::Custom(self as u32)
    }
}

/// Declares a program's error enum, numbered from 6000 in declaration order
/// like Anchor's `#[error_code]`, with names and messages for logs and the IDL.
///
/// ```ignore
/// psyche_sdk::define_errors! {
///     pub enum CoordinatorError {
///         RunHalted = "The run is halted",
///         NotAuthorized = "The signer may not join this run",
///     }
/// }
/// ```
#[macro_export]
macro_rules! define_errors {
    ($vis:vis enum $name:ident { $first:ident = $first_msg:literal $(, $var:ident = $msg:literal)* $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u32)]
        $vis enum $name {
            $first = 6000,
            $($var,)*
        }

        impl $name {
            /// The error number (6000 + position).
            pub const fn code(self) -> u32 {
                self as u32
            }

            /// The variant name.
            pub const fn name(self) -> &'static str {
                match self {
                    $name::$first => stringify!($first),
                    $($name::$var => stringify!($var),)*
                }
            }

            /// The message.
            pub const fn message(self) -> &'static str {
                match self {
                    $name::$first => $first_msg,
                    $($name::$var => $msg,)*
                }
            }

            /// Logs the error like Anchor and converts it.
            #[inline(always)]
            pub fn fail(self) -> $crate::ProgramError {
                $crate::error::log_error(self.code(), self.name(), self.message());
                $crate::ProgramError::Custom(self.code())
            }
        }

        impl From<$name> for $crate::ProgramError {
            fn from(e: $name) -> Self {
                $crate::ProgramError::Custom(e as u32)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::define_errors! {
        enum TestError {
            First = "the first",
            Second = "the second",
            Third = "the third",
        }
    }

    #[test]
    fn anchor_numbers() {
        assert_eq!(ErrorCode::ConstraintSeeds as u32, 2006);
        assert_eq!(ErrorCode::AccountOwnedByWrongProgram as u32, 3007);
        assert_eq!(ErrorCode::AccountNotInitialized as u32, 3012);
        assert_eq!(ErrorCode::InstructionFallbackNotFound as u32, 101);
        assert_eq!(ProgramError::from(ErrorCode::ConstraintMut), ProgramError::Custom(2000));
        assert_eq!(ErrorCode::AccountNotSigner.name(), "AccountNotSigner");
    }

    #[test]
    fn every_code_is_listed_once_in_order() {
        for w in ErrorCode::ALL.windows(2) {
            assert!((w[0] as u32) < (w[1] as u32), "{:?} before {:?}", w[0], w[1]);
        }
        for e in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(e as u32), Some(e));
        }
        assert_eq!(ErrorCode::from_code(102), Some(ErrorCode::InstructionDidNotDeserialize));
        assert_eq!(ErrorCode::from_code(6000), None);
    }

    #[test]
    fn user_errors_start_at_6000() {
        assert_eq!(TestError::First.code(), 6000);
        assert_eq!(TestError::Third.code(), 6002);
        assert_eq!(TestError::Second.name(), "Second");
        assert_eq!(TestError::Third.message(), "the third");
        assert_eq!(ProgramError::from(TestError::Second), ProgramError::Custom(6001));
        assert_eq!(TestError::Second.fail(), ProgramError::Custom(6001));
    }
}
