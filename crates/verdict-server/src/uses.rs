//! The engine's use cases as the server calls them. This is the one module that reads the
//! clock and hands `now` to the engine, so when the engine takes its time from the store only
//! this file changes; handlers never see a timestamp.

use verdict_core::contracts::{HumanVerdict, Timestamp};
use verdict_core::digest::Digest;
use verdict_engine::{Cancellation, Engine, GateRun, History, Principal, Result, Reviewed, Status};

/// The wall clock as a contract timestamp.
fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Timestamp::from_unix_nanos(i128::try_from(nanos).unwrap_or(0))
}

pub(crate) async fn authenticate(engine: &Engine, token: &str) -> Result<Principal> {
    engine.authenticate(token, &now()).await
}

pub(crate) async fn put_subject(
    engine: &Engine,
    caller: &Principal,
    doc: &serde_json::Value,
) -> Result<Digest> {
    engine.put_subject(caller, doc, &now()).await
}

pub(crate) async fn add_evidence(
    engine: &Engine,
    caller: &Principal,
    docs: &[serde_json::Value],
) -> Result<Vec<Digest>> {
    engine.add_evidence(caller, docs, &now()).await
}

pub(crate) async fn create_request(
    engine: &Engine,
    caller: &Principal,
    execution: &str,
    budget: &serde_json::Value,
) -> Result<Digest> {
    engine
        .create_request(caller, execution, budget, &now())
        .await
}

pub(crate) async fn gate_run(
    engine: &Engine,
    caller: &Principal,
    execution: &str,
) -> Result<GateRun> {
    engine.gate_run(caller, execution, &now()).await
}

pub(crate) async fn status(engine: &Engine, execution: &str) -> Result<Status> {
    engine.status(execution, &now()).await
}

pub(crate) async fn history(engine: &Engine, execution: &str) -> Result<History> {
    engine.history(execution, &now()).await
}

pub(crate) async fn cancel_execution(
    engine: &Engine,
    caller: &Principal,
    execution: &str,
    reason: &str,
) -> Result<Cancellation> {
    engine
        .cancel_execution(caller, execution, reason, &now())
        .await
}

pub(crate) async fn decide(
    engine: &Engine,
    caller: &Principal,
    execution: &str,
    verdict: HumanVerdict,
    reason: &str,
    reviewed: &Reviewed,
) -> Result<Digest> {
    engine
        .decide(caller, execution, verdict, reason, reviewed, &now())
        .await
}
