//! Pure logic of the Coordinator program (no syscalls, host-testable).
#![cfg_attr(not(test), no_std)]
