//! # verdict-engine: the verification lifecycle
//!
//! One job: run verification as a system, combining the store, the core Gate, the checks and
//! the verifiers while enforcing docs/spec/applicability.md and authority.md end to end. Every action is taken as an
//! authenticated [`Principal`] and checked against its role and grants; every refusal is
//! audited; decisions are only ever computed here, from the store, and replay byte for byte.
//!
//! Main items:
//! - [`Engine`]: principals and tokens ([`Engine::init`], [`Engine::add_principal`]), grants,
//!   the gate policy, subjects and evidence, requests, runs with preflight, results, human
//!   decisions pinned to what was reviewed ([`Reviewed`]), cancellation
//!   ([`Engine::cancel_execution`], [`Engine::cancel_run`]), [`Engine::gate_run`] /
//!   [`Engine::gate_replay`], and [`Engine::status`] / [`Engine::history`] with derived
//!   applicability.
//! - [`ModelVerifier`]: what the engine calls for a run that preflight did not settle.
//! - [`quickstart`]: one real change walked through the whole flow.
//! - [`EngineError`]: typed refusals with stable codes (`permission_denied`,
//!   `self_verification_denied`, ...).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use verdict_engine::Engine;
//! let store = verdict_store::open(&verdict_store::Location::resolve(None)?).await?;
//! let engine = Engine::new(store, verdict_engine::DEFAULT_GATE);
//! // Only on an empty store; the token is shown once and stored only as its SHA-256.
//! let token = engine.init("ops", verdict_store::StoreClock::System).await?;
//! // A wrong token is refused, and the attempt is recorded as a denial. Every time that
//! // decides authority is the store's clock, never the caller's.
//! let ops = engine.authenticate(&token).await?;
//! // Reads are the caller's too: an operator reads every execution, anyone else only those
//! // its grants in force cover; a refused read is recorded as a denial.
//! let status = engine.status(&ops, "ex-1").await?;
//! assert!(status.applicable.is_none());
//! # Ok(()) }
//! ```

mod applicability;
pub mod attest;
mod budget;
mod cancel;
mod engine;
pub mod error;
pub mod events;
mod gate_run;
pub mod ledger;
mod ledger_read;
mod lineage;
mod listing;
mod notes;
pub mod quickstart;
mod runs;
pub mod scaffold;
mod subjects;
pub mod token;
pub mod webhooks;

pub use applicability::{DecisionView, History, NotApplicable, RunView, Status};
pub use budget::RequestBudget;
pub use engine::{DEFAULT_GATE, ENGINE_PRINCIPAL, Engine, Principal};
pub use error::{EngineError, Result};
pub use gate_run::{Collected, EVALUATION_RECORD_SCHEMA, GateRun};
pub use listing::{
    ExecutionView, GateView, GrantView, PrincipalView, RunDetail, RunEventView, SubjectEntry,
};
pub use notes::{
    CANCELLATION_SCHEMA, Cancellation, Cancelled, RESULT_REFUSAL_SCHEMA, Requester, ResultRefusal,
};
pub use runs::{
    ADMISSION_SCHEMA, ModelVerifier, Preflight, REQUEST_SCHEMA, RUN_CONTEXT_SCHEMA, RunContext,
    RunContextSchema, RunOutcome, RunReport, Submitted, VerifyTask,
};
pub use subjects::Reviewed;
