//! Every read is the caller's: an operator reads everything, anyone else an execution only
//! while it holds a grant in force on it or its mission, and the platform's ledger is the
//! operators'. A refused read is a denial on record and nothing else; each on SQLite and
//! PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::digest::Digest;
use verdict_engine::{EngineError, Principal};
use verdict_store::{About, Access, DocKind, ScopeKind};

/// The execution the reader holds no grant on.
const OTHER: &str = "ex-2";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

async fn chain_length(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

async fn denials_of(w: &World, who: &str) -> usize {
    w.engine.store().denials_of(who).await.unwrap().len()
}

/// A verifier with a grant on `scope` until `expires`.
async fn reader(w: &World, scope: ScopeKind, id: &str, expires: &str) -> Principal {
    let role = serde_json::from_value(json!("verifier")).unwrap();
    let t = w
        .engine
        .add_principal(&w.ops, "reader", role)
        .await
        .unwrap();
    w.engine
        .grant(
            &w.ops,
            "g-reader",
            "reader",
            scope,
            id,
            Access::Read,
            &ts(expires),
        )
        .await
        .unwrap();
    w.engine.authenticate(&t).await.unwrap()
}

/// A subject of `execution` (the operator puts it), in `mission` if given.
async fn put_other(w: &World, execution: &str, mission: Option<&str>) -> Digest {
    let mut s = subject(1, "another change");
    s["execution"]["id"] = json!(execution);
    if let Some(m) = mission {
        s["mission"] = json!(m);
    }
    w.engine.put_subject(&w.ops, &s).await.unwrap()
}

/// The latest decision's evaluation key of `execution`.
async fn latest_key(w: &World, execution: &str) -> Digest {
    let h = w.engine.history(&w.ops, execution).await.unwrap();
    h.decisions
        .last()
        .and_then(|v| v.decision.evaluation_key.clone())
        .unwrap()
}

/// Every read of one execution the engine offers, as `who`: the read's name and its result.
async fn reads(
    w: &World,
    who: &Principal,
    execution: &str,
    key: &Digest,
) -> Vec<(&'static str, Result<(), EngineError>)> {
    let e = &w.engine;
    let current = w
        .engine
        .execution_head(&w.ops, execution)
        .await
        .unwrap()
        .unwrap()
        .subject_digest;
    vec![
        ("status", e.status(who, execution).await.map(drop)),
        ("history", e.history(who, execution).await.map(drop)),
        ("gate_replay", e.gate_replay(who, key).await.map(drop)),
        (
            "replay_with_bundle",
            e.replay_with_bundle(who, key).await.map(drop),
        ),
        ("collect", e.collect(who, execution).await.map(drop)),
        ("preflight", e.preflight(who, execution).await.map(drop)),
        (
            "admission_notes",
            e.admission_notes(who, execution).await.map(drop),
        ),
        (
            "execution_cancellation",
            e.execution_cancellation(who, execution).await.map(drop),
        ),
        (
            "execution_head",
            e.execution_head(who, execution).await.map(drop),
        ),
        (
            "prior_blockers",
            e.prior_blockers(who, execution, &current).await.map(drop),
        ),
        (
            "attestations",
            e.attestations(who, execution).await.map(drop),
        ),
        ("junit", e.junit(who, execution).await.map(drop)),
        (
            "github_payloads",
            e.github_payloads(who, execution, SHA).await.map(drop),
        ),
        (
            "ledger_attempts",
            e.ledger_attempts(who, execution).await.map(drop),
        ),
    ]
}

/// Each read is refused as `permission_denied` and appends exactly one audit event: its
/// denial, of `who`.
async fn refused_one_denial_each(w: &World, who: &Principal, execution: &str, key: &Digest) {
    let name = who.name().as_str();
    let chain = chain_length(w).await;
    let denied = denials_of(w, name).await;
    let results = reads(w, who, execution, key).await;
    let n = results.len() as u64;
    for (read, r) in results {
        let e = r.expect_err(read);
        assert_eq!(e.code(), "permission_denied", "{read}: {e}");
        assert!(e.to_string().contains(name), "{read}: {e}");
    }
    // `reads` looks the head up as the operator, which writes nothing.
    assert_eq!(chain_length(w).await, chain + n, "only the denials");
    assert_eq!(denials_of(w, name).await, denied + n as usize);
}

fn all_ok(results: Vec<(&'static str, Result<(), EngineError>)>) {
    for (read, r) in results {
        if let Err(e) = r {
            panic!("{read}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_scopes_every_read_and_a_revocation_ends_it() {
    on_both(|store| async move {
        let w = world(store).await;
        let a = passed(&w, 1, "change A", "run-1").await;
        let key_a = latest_key(&w, EXEC).await;
        put_other(&w, OTHER, None).await;
        w.engine.gate_run(&w.ops, OTHER).await.unwrap();
        let key_b = latest_key(&w, OTHER).await;
        let reader = reader(&w, ScopeKind::Execution, EXEC, "2027-01-01T00:00:00Z").await;

        // In scope: every read of A, and the run's context and a result of A.
        all_ok(reads(&w, &reader, EXEC, &key_a).await);
        w.engine.run_contexts(&reader, "run-1").await.unwrap();
        let row = w
            .engine
            .store()
            .list(DocKind::Verification, &About::Subject(a.clone()))
            .await
            .unwrap()
            .pop()
            .unwrap();
        assert!(w.engine.counts(&reader, &row).await.unwrap());

        // Out of scope: every read of B, and B's decision by its key even asked of A.
        refused_one_denial_each(&w, &reader, OTHER, &key_b).await;
        let e = w.engine.gate_replay(&reader, &key_b).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        // An execution nobody has put a subject for is no more readable than B.
        let e = w.engine.status(&reader, "ex-9").await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        let e = w.engine.show_execution(&reader, "ex-9").await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        let e = w.engine.show_execution(&w.ops, "ex-9").await.unwrap_err();
        assert_eq!(e.code(), "not_found", "{e}");
        // The platform's ledger is the operators'.
        let before = chain_length(&w).await;
        let e = w.engine.ledger(&reader, WINDOW).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(chain_length(&w).await, before + 1);

        // The operator reads everything.
        all_ok(reads(&w, &w.ops, EXEC, &key_a).await);
        all_ok(reads(&w, &w.ops, OTHER, &key_b).await);
        w.engine.ledger(&w.ops, WINDOW).await.unwrap();

        // Revoked, the grant reads nothing, A included.
        w.engine
            .revoke(&w.ops, "g-reader", "rotated out")
            .await
            .unwrap();
        refused_one_denial_each(&w, &reader, EXEC, &key_a).await;
        let e = w.engine.counts(&reader, &row).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        let e = w.engine.run_contexts(&reader, "run-1").await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        // The run's own verifier still holds its grant and reads its run's context.
        w.engine.run_contexts(&w.rev, "run-1").await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grant_reads_nothing_at_the_stores_time() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-1").await;
        let key = latest_key(&w, EXEC).await;
        let reader = reader(&w, ScopeKind::Execution, EXEC, "2026-12-01T00:00:00Z").await;
        all_ok(reads(&w, &reader, EXEC, &key).await);
        w.engine
            .store()
            .set_manual_time(&ts("2026-12-02T00:00:00Z"))
            .await
            .unwrap();
        refused_one_denial_each(&w, &reader, EXEC, &key).await;
        // The producer's own grant lapsed with it: producing a subject gives no read.
        w.engine
            .store()
            .set_manual_time(&ts("2027-01-02T00:00:00Z"))
            .await
            .unwrap();
        refused_one_denial_each(&w, &w.coder, EXEC, &key).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mission_grant_reads_the_executions_of_its_mission_only() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-1").await;
        let key_a = latest_key(&w, EXEC).await;
        put_other(&w, OTHER, Some("m-1")).await;
        w.engine.gate_run(&w.ops, OTHER).await.unwrap();
        let key_b = latest_key(&w, OTHER).await;
        let reader = reader(&w, ScopeKind::Mission, "m-1", "2027-01-01T00:00:00Z").await;
        all_ok(reads(&w, &reader, OTHER, &key_b).await);
        refused_one_denial_each(&w, &reader, EXEC, &key_a).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prior_findings_are_read_by_their_subjects_grant_not_the_requests() {
    on_both(|store| async move {
        let w = world(store).await;
        let (a, ev, req) = prepared(&w, 1, "change A", "run-1").await;
        let mut r = result("rev", "run-1", &a, 1, &ev);
        r["criteria"][0]["status"] = json!("failed");
        r["findings"] = json!([{
            "id": "f-leak", "version": 1, "criterion": "tests-pass", "type": "bug",
            "severity": "blocker", "scope": "change", "subject_digest": a.as_str(),
            "evidence_refs": [ev], "method": "review"
        }]);
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        put_other(&w, OTHER, None).await;
        // A request the caller writes itself, pinning a finding of an execution it may not read.
        let mut request: Value = w
            .engine
            .store()
            .get(DocKind::Request, &req)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        request["prior_blockers"] = json!([{"id": "f-leak", "version": 1}]);
        let request = verdict_engine::VerificationRequest::from_value(&request).unwrap();
        let outsider = reader(&w, ScopeKind::Execution, OTHER, "2027-01-01T00:00:00Z").await;
        let before = chain_length(&w).await;
        let e = w
            .engine
            .pinned_prior_findings(&outsider, &request)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(chain_length(&w).await, before + 1);
        assert_eq!(
            w.engine
                .pinned_prior_findings(&w.rev, &request)
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            w.engine
                .pinned_prior_findings(&w.ops, &request)
                .await
                .unwrap()
                .len(),
            1
        );
    })
    .await;
}

const WINDOW: verdict_engine::ledger::Window = verdict_engine::ledger::Window {
    attempts: 100,
    days: 30,
    min_sample: 1,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_naming_a_run_not_its_own_is_refused_alike_whether_it_is_stored_or_not() {
    on_both(|store| async move {
        let w = world(store).await;
        prepared(&w, 1, "change A", "run-a").await;
        let report = verdict_engine::RunReport {
            manifest: json!({"shown": []}),
            receipts: Vec::new(),
            detail: None,
            cache_key: None,
        };
        // `rev2` holds a grant on the execution but was not admitted to `run-a`, which is
        // `rev`'s; `run-z` is stored for no one.
        let mut said = Vec::new();
        for run in ["run-a", "run-z"] {
            let before = chain_length(&w).await;
            let denials = denials_of(&w, "rev2").await;
            let e = w
                .engine
                .record_run_context(&w.rev2, run, &report)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{e}");
            assert_eq!(chain_length(&w).await, before + 1, "{e}");
            assert_eq!(denials_of(&w, "rev2").await, denials + 1, "{e}");
            said.push(e.to_string().replace(run, "RUN"));
        }
        assert_eq!(said[0], said[1]);
        // An operator, who may see every run, is told which is not stored.
        let e = w
            .engine
            .record_run_context(&w.ops, "run-z", &report)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "not_found", "{e}");
    })
    .await;
}
