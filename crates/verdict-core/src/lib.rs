//! # verdict-core: the trusted core
//!
//! Everything that decides whether work passes lives here, and nothing else does: the data
//! contracts, the strict JSON reader, RFC 8785 canonical form, the domain-separated digests and
//! the Gate. The crate does no I/O, has no async code and reads no clock (`now` is an input),
//! so any stored decision can be replayed from its bundle, byte for byte.
//!
//! Main items:
//! - [`json::parse`]: the strict reader (duplicate keys, unsafe integers, NaN, bad UTF-8).
//! - [`canonical::to_vec`]: RFC 8785 canonical bytes.
//! - [`digest::digest`]: `digest(kind, doc)` with carried-digest tamper detection.
//! - [`contracts`]: subject, policy, evidence, verification, finding, human decision, bundle,
//!   decision.
//! - [`gate::evaluate`]: the Gate, one pure and total function from bundle bytes to a decision.
//!   A bundle that reads cleanly is read by an internal token reader (`tape`) that accepts
//!   exactly what [`json::parse`] accepts and hashes and decodes without building a tree.
//!
//! ```
//! let bundle = br#"{"schema": "verdict.gate-bundle/v1"}"#;
//! let decision = verdict_core::gate::evaluate(bundle);
//! // A bundle that breaks the contract is blocked, never guessed at.
//! assert_eq!(decision.outcome, verdict_core::contracts::Outcome::Blocked);
//! ```

pub mod canonical;
pub mod child_env;
pub mod contracts;
pub mod digest;
pub mod gate;
pub mod json;
pub mod loopback;
pub mod quote;
pub mod schema;
mod tape;
