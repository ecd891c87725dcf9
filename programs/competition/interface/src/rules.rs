//! Win, weight and payout arithmetic (SPEC.md "Arithmetic"). Placeholder.
