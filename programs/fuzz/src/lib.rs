//! psyche-fuzz: random and mutated instructions against the deployed programs
//! (programs/target/deploy/*.so) in an SBPF VM, with invariants checked after
//! every instruction. See programs/README.md, "Fuzzing".
pub mod builtins;
pub mod keys;
pub mod pda;
pub mod runtime;
pub mod sbf;
pub mod competition;
pub mod coord;
pub mod fuzz;
pub mod gen;
pub mod invariants;
pub mod mutate;
pub mod report;
pub mod repro;
pub mod worlds;
