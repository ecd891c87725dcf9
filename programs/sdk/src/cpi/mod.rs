//! Cross-program invocations: pinocchio's C-ABI `invoke_signed` with typed
//! builders for the System, SPL Token and Associated Token programs, and
//! return data.

pub mod ata;
pub mod system;
pub mod token;

pub use pinocchio::cpi::{get_return_data, invoke, invoke_signed, set_return_data, ReturnData, Seed, Signer};
pub use pinocchio::instruction::{InstructionAccount, InstructionView};
