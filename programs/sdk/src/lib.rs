//! Psyche's on-chain SDK: what our programs need on top of pinocchio, within
//! the language subset that upstream LLVM's BPF backend accepts (see
//! programs/README.md).
//!
//! pinocchio provides the zero-copy input parser ([`AccountView`]), PDA
//! derivation and the C-ABI CPI syscall; this crate adds the entrypoint and panic
//! handler for the upstream `bpfel-unknown-none` target, logging without
//! `core::fmt`, Anchor's wire conventions (discriminators, Borsh, error codes,
//! events), account validation, CPI helpers for the System, SPL Token and
//! Associated Token programs, and the token account and mint checks.
//!
//! On the host (`cargo test`) everything compiles: hashing and encoding run
//! natively, logs are discarded, and syscalls that only the runtime can answer
//! (PDA derivation, sysvars, CPI) return [`ErrorCode::OnChainOnly`].
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

pub mod anchor;
pub mod base58;
pub mod borsh;
pub mod cpi;
pub mod error;
pub mod hash;
pub mod log;
pub mod mem;
pub mod panic;
pub mod pda;
pub mod sysvar;
pub mod token;
pub mod validate;

pub use error::ErrorCode;
pub use pinocchio;
pub use pinocchio::{error::ProgramError, AccountView, Address, ProgramResult};

/// Declares the program's entrypoint and panic handler.
///
/// `$process` has pinocchio's signature
/// `fn(&Address, &[AccountView], &[u8]) -> ProgramResult`. `$max_accounts`
/// (default 32) bounds the accounts parsed from the input: each costs 8 bytes of
/// the entrypoint's 4 KiB stack frame; extra accounts are ignored.
///
/// Only the `bpf` target gets the exported symbol and the panic handler, so the
/// same crate builds for host tests.
#[macro_export]
macro_rules! entrypoint {
    ($process:expr) => {
        $crate::entrypoint!($process, 32);
    };
    ($process:expr, $max_accounts:expr) => {
        /// The program's entrypoint, called by the SBPF loader.
        ///
        /// # Safety
        /// `input` must be the loader's serialized program input.
        #[cfg(target_arch = "bpf")]
        #[no_mangle]
        pub unsafe extern "C" fn entrypoint(input: *mut u8) -> u64 {
            // SAFETY: the runtime passes its serialized input, valid for the
            // whole instruction.
            unsafe {
                $crate::pinocchio::entrypoint::process_entrypoint::<{ $max_accounts }>(input, $process)
            }
        }

        // On the host the entrypoint does not exist; naming the processor keeps
        // it (and everything it calls) from being reported as dead code.
        #[cfg(not(target_arch = "bpf"))]
        const _: fn(&$crate::Address, &[$crate::AccountView], &[u8]) -> $crate::ProgramResult = $process;

        #[cfg(target_arch = "bpf")]
        #[panic_handler]
        fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
            $crate::panic::report(info)
        }
    };
}
