//! The Gate (CONTRACTS.md §6).
pub fn evaluate(_: &[u8]) -> crate::contracts::GateDecision { todo!() }
