//! The Competition program's interface (skeleton: layouts and errors come with the
//! program; see ../../SPEC.md).
#![no_std]
// Tests may overflow freely: a debug-build overflow panics the test.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

pub mod rules;
