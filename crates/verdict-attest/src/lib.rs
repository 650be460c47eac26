//! # verdict-attest: decisions others can check without the database
//!
//! One job: turn a stored gate decision into signed statements in the formats supply-chain
//! tools read, and check such statements. A decision becomes an in-toto Statement v1 with a
//! SLSA Verification Summary predicate (`PASSED` only for `pass`, the exact outcome and reasons
//! in a namespaced field, optionally the whole gate bundle), and each check evidence the Gate
//! counted an in-toto test-result statement; each statement is signed with ed25519 in a DSSE
//! envelope. The same evidence can be written as JUnit XML, and a decision as GitHub check-run
//! and commit-status bodies.
//!
//! The crate is pure: no store, no clock, no network, no files. Callers hand it documents and
//! keys and write what it returns.
//!
//! Verification follows the DSSE protocol's order: the signature over the pre-authentication
//! encoding first, then the payload type, then the statement; an embedded bundle is evaluated
//! again with the Gate and must reproduce the decision byte for byte.
//!
//! ```
//! use verdict_attest::dsse::{Envelope, pae};
//! let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
//! assert_eq!(
//!     pae("http://example.com/HelloWorld", b"hello world"),
//!     b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
//! );
//! let envelope = Envelope::sign("application/vnd.in-toto+json", b"{}", &key);
//! let verified = envelope.verify(&[key.verifying_key()], "application/vnd.in-toto+json")?;
//! assert_eq!(verified.body, b"{}");
//! // The same bytes under another payload type are refused, after the signature is checked.
//! assert!(envelope.verify(&[key.verifying_key()], "application/json").is_err());
//! # Ok::<(), verdict_attest::AttestError>(())
//! ```

pub mod attestation;
pub mod dsse;
mod error;
pub mod github;
pub mod junit;
pub mod keys;
pub mod statement;

pub use attestation::{Attestation, DecisionInput, Pins, Refusal, Report, attest, verify};
pub use error::AttestError;
pub use statement::Clock;
