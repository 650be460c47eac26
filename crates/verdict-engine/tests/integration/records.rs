//! Where the engine keeps its own records: every refusal (unauthenticated attempts included) is
//! one row of `denials`, every gate evaluation one row of `gate_evaluations` that replay reads,
//! and neither is ever written among the verification requests. On SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{GateDecision, Role};
use verdict_store::{DenialRecord, DocKind, RunStatus, Store, UNAUTHENTICATED};

async fn denial_rows(store: &dyn Store) -> Vec<verdict_store::Stored> {
    store.denials(0, 10_000).await.unwrap()
}

/// Every body stored among the verification requests, by the audit events that appended them.
async fn request_bodies(store: &dyn Store) -> Vec<String> {
    let mut out = Vec::new();
    for e in store.audit_events(0, 10_000).await.unwrap() {
        if e.table == "verification_requests" {
            let d = e.payload_digest.parse().unwrap();
            out.push(store.get(DocKind::Request, &d).await.unwrap().unwrap().body);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_leaves_exactly_one_denial_row() {
    on_both(|store| async move {
        let w = world(store).await;
        let store = w.engine.store().clone();
        let before = denial_rows(store.as_ref()).await;
        let requests_before = request_bodies(store.as_ref()).await.len();
        let e = w
            .engine
            .add_principal(&w.coder, "mallory", Role::Operator)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied");
        let after = denial_rows(store.as_ref()).await;
        assert_eq!(after.len(), before.len() + 1, "exactly one row per refusal");
        let row = after.last().unwrap();
        let d: DenialRecord = row.decode().unwrap();
        assert_eq!(d.principal, "coder");
        assert_eq!(d.role, Some(Role::Producer));
        assert_eq!(d.code, "permission_denied");
        assert_eq!(d.action, "add principals");
        assert_eq!(d.message, e.to_string());
        assert_eq!(d.at, now());
        assert_eq!(d.token_fingerprint, None);
        // The same refusal again is a row of its own.
        w.engine
            .add_principal(&w.coder, "mallory", Role::Operator)
            .await
            .unwrap_err();
        assert_eq!(denial_rows(store.as_ref()).await.len(), before.len() + 2);
        // Written by the system role, audited, and never among the requests.
        let events = store.audit_events(row.seq - 1, 1).await.unwrap();
        assert_eq!(events[0].table, "denials");
        assert_eq!(events[0].role, "system");
        assert_eq!(events[0].correlation.as_deref(), Some("coder"));
        assert_eq!(request_bodies(store.as_ref()).await.len(), requests_before);
        // What is not a refusal of authority is not a denial.
        let e = w
            .engine
            .add_principal(&w.ops, "bad\u{200b}name", Role::Runner)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert_eq!(denial_rows(store.as_ref()).await.len(), before.len() + 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_attempt_is_recorded_without_the_token() {
    on_both(|store| async move {
        let w = world(store).await;
        let store = w.engine.store().clone();
        let before = denial_rows(store.as_ref()).await.len();
        let token = format!("vdt_{}", "5a".repeat(32));
        let e = w.engine.authenticate(&token).await.unwrap_err();
        assert_eq!(e.code(), "unauthenticated");
        let rows = denial_rows(store.as_ref()).await;
        assert_eq!(rows.len(), before + 1);
        let row = rows.last().unwrap();
        let d: DenialRecord = row.decode().unwrap();
        assert_eq!((d.principal.as_str(), d.role), (UNAUTHENTICATED, None));
        assert_eq!(d.code, "unauthenticated");
        assert_eq!(d.action, "authenticate");
        let fingerprint = d.token_fingerprint.clone().unwrap();
        assert_eq!(fingerprint.len(), 8);
        assert_eq!(fingerprint, verdict_store::token_fingerprint(&token));
        // Neither the token, nor its stored hash, nor a prefix of either is kept.
        let hash = verdict_store::token_sha256(&token);
        let hash_hex = hash.as_str().trim_start_matches("sha256:");
        for secret in [
            token.as_str(),
            &token[4..20],
            hash.as_str(),
            hash_hex,
            &hash_hex[..8],
        ] {
            assert!(!row.body.contains(secret), "{secret} in {}", row.body);
        }
        let events = store.audit_events(0, 10_000).await.unwrap();
        assert!(events.iter().all(|e| {
            !e.key.contains(&token[4..20])
                && e.correlation
                    .as_deref()
                    .is_none_or(|c| !c.contains(&token[4..20]))
        }));
        // The same wrong token again gives the same fingerprint, another one another.
        w.engine.authenticate(&token).await.unwrap_err();
        let other = format!("vdt_{}", "a5".repeat(32));
        w.engine.authenticate(&other).await.unwrap_err();
        let rows = denial_rows(store.as_ref()).await;
        let prints: Vec<Option<String>> = rows[before..]
            .iter()
            .map(|r| r.decode::<DenialRecord>().unwrap().token_fingerprint)
            .collect();
        assert_eq!(prints[0], prints[1]);
        assert_ne!(prints[0], prints[2]);
        // No token at all: a denial without a fingerprint.
        w.engine.authenticate("").await.unwrap_err();
        let last: DenialRecord = denial_rows(store.as_ref())
            .await
            .last()
            .unwrap()
            .decode()
            .unwrap();
        assert_eq!(
            (last.principal.as_str(), last.token_fingerprint),
            (UNAUTHENTICATED, None)
        );
        assert_eq!(store.denials_of(UNAUTHENTICATED).await.unwrap().len(), 4);
        // A valid token leaves no denial, and nobody can take the marker's name.
        let token = w
            .engine
            .add_principal(&w.ops, "rev3", Role::Verifier)
            .await
            .unwrap();
        let before = denial_rows(store.as_ref()).await.len();
        w.engine.authenticate(&token).await.unwrap();
        assert_eq!(denial_rows(store.as_ref()).await.len(), before);
        let e = w
            .engine
            .add_principal(&w.ops, UNAUTHENTICATED, Role::Verifier)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert_eq!(denial_rows(store.as_ref()).await.len(), before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_are_kept_apart_and_replay_reads_them() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let store = w.engine.store().clone();
        // Twice at the same `now`: the same evaluation, stored once.
        let again = w.engine.gate_run(&w.rev, EXEC).await.unwrap();
        assert!(!again.inserted);
        w.engine
            .put_subject(&w.coder, &subject(2, "change B"))
            .await
            .unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let decisions = store
            .list(
                DocKind::Decision,
                &verdict_store::About::Execution(EXEC.into()),
            )
            .await
            .unwrap();
        assert_eq!(decisions.len(), 2);
        for row in &decisions {
            let d: GateDecision = row.decode().unwrap();
            let key = d.evaluation_key.clone().unwrap();
            let records = store.evaluations(&key).await.unwrap();
            assert_eq!(records.len(), 1, "one record per evaluation");
            let v = records[0].value().unwrap();
            assert_eq!(
                v["subject_digest"],
                json!(d.subject_digest.as_ref().unwrap().as_str())
            );
            // Written by the Gate in the same transaction as the decision: adjacent seqs.
            assert_eq!(records[0].seq + 1, row.seq);
            let replayed = w.engine.gate_replay(&w.ops, &key).await.unwrap();
            assert_eq!(replayed.bytes, row.body);
            assert_eq!(
                replayed.decision.canonical_bytes().unwrap(),
                row.body.as_bytes()
            );
        }
        for body in request_bodies(store.as_ref()).await {
            assert!(!body.contains("verdict.evaluation-record/v1"), "{body}");
            assert!(!body.contains("verdict.denial/v1"), "{body}");
        }
        // A record the producer plants among its requests is not a record of anything.
        let key = decisions[0]
            .decode::<GateDecision>()
            .unwrap()
            .evaluation_key
            .unwrap();
        let mut forged = store.evaluations(&key).await.unwrap()[0].value().unwrap();
        forged["now"] = json!("2026-11-30T13:00:00Z");
        let err = store
            .put(&w.coder.actor(), DocKind::Evaluation, &forged)
            .await
            .unwrap_err();
        assert!(
            matches!(err, verdict_store::StoreError::Forbidden { .. }),
            "{err}"
        );
        assert_eq!(store.evaluations(&key).await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_kept_as_history_is_left_out_alike_by_gate_run_history_and_replay() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        w.engine
            .revoke(&w.ops, "g-rev", "reviewer rotated out")
            .await
            .unwrap();
        let later = ts("2026-11-30T12:00:01Z");
        w.engine.store().set_manual_time(&later).await.unwrap();
        let sub = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        assert!(!sub.counted);
        // The fact is in the store: the run ended unavailable for a revoked grant, recorded
        // before the result was appended.
        let store = w.engine.store().clone();
        let run = store.run("run-a").await.unwrap().unwrap();
        let last = run.events.last().unwrap();
        assert_eq!(last.status, RunStatus::Unavailable);
        assert_eq!(
            last.reason,
            Some(verdict_core::contracts::UnavailableReason::GrantRevoked)
        );
        // A fresh engine over the same store (nothing remembered) agrees everywhere.
        let fresh = verdict_engine::Engine::new(store.clone(), w.engine.gate());
        let row = store
            .get(DocKind::Verification, &sub.digest)
            .await
            .unwrap()
            .unwrap();
        assert!(!fresh.counts(&w.ops, &row).await.unwrap());
        let history = fresh.history(&w.ops, EXEC).await.unwrap();
        let view = history.runs.iter().find(|r| r.run_id == "run-a").unwrap();
        assert_eq!(
            (view.status.as_str(), view.counted),
            ("unavailable", Some(false))
        );
        assert!(
            fresh
                .collect(&w.ops, EXEC)
                .await
                .unwrap()
                .verifications
                .is_empty()
        );
        let g = fresh.gate_run(&w.ops, EXEC).await.unwrap();
        let key = g.decision.evaluation_key.clone().unwrap();
        let record = store.evaluations(&key).await.unwrap()[0].value().unwrap();
        assert_eq!(record["verifications"], json!([]));
        assert_ne!(g.decision.outcome, verdict_core::contracts::Outcome::Pass);
        let status = fresh.status(&w.ops, EXEC).await.unwrap();
        let current = status.applicable.unwrap();
        assert_eq!(current.decision.evaluation_key.as_ref(), Some(&key));
        assert_eq!(
            fresh.gate_replay(&w.ops, &key).await.unwrap().bytes,
            g.bytes
        );
    })
    .await;
}

/// What an engine of schema 1 did for the execution's current subject: evaluate, keep the
/// record among the requests (returned, not stored), store the decision.
async fn legacy_decision(w: &World) -> (verdict_core::digest::Digest, serde_json::Value, String) {
    let collected = w.engine.collect(&w.ops, EXEC).await.unwrap();
    let digests = |rows: &[verdict_store::Stored]| {
        let mut v: Vec<String> = rows.iter().map(|r| r.digest.to_string()).collect();
        v.sort();
        v
    };
    let decision = verdict_core::gate::evaluate_value(&collected.bundle(&now()).unwrap());
    let key = decision.evaluation_key.clone().unwrap();
    let record = json!({
        "schema": verdict_engine::EVALUATION_RECORD_SCHEMA,
        "evaluation_key": key.as_str(),
        "subject_digest": collected.subject.digest.as_str(),
        "policy_digest": collected.policy.digest.as_str(),
        "now": now().as_str(),
        "evidence": digests(&collected.evidence),
        "verifications": digests(&collected.verifications),
        "human_decisions": digests(&collected.human_decisions),
        "prior_findings": [],
    });
    let value = serde_json::to_value(&decision).unwrap();
    let store = w.engine.store();
    let body = if store.describe().starts_with("postgres") {
        legacy_put_postgres(store.as_ref(), &value).await
    } else {
        let stored = store
            .put(
                &verdict_store::Actor::gate("ops"),
                DocKind::Decision,
                &value,
            )
            .await
            .unwrap();
        assert!(stored.inserted);
        stored.body
    };
    assert!(store.evaluations(&key).await.unwrap().is_empty());
    (key, record, body)
}

/// A decision stored with no evaluation record, as a schema 1 store held it. Since schema 13
/// the gate's routine stores a decision only with its record, so the old row is reproduced the
/// way only the database's superuser (with no role set, not bound by the routines' checks)
/// still can: the routine called on its own connection. Returns the stored body.
async fn legacy_put_postgres(store: &dyn Store, value: &serde_json::Value) -> String {
    use sqlx::Connection as _;
    let body = String::from_utf8(verdict_core::canonical::to_vec(value)).unwrap();
    let digest = verdict_store::records::row_digest(
        verdict_store::Table::GateDecisions.domain(),
        body.as_bytes(),
    );
    let key = value["evaluation_key"].as_str().unwrap();
    // The store describes itself as its URL, followed by its role prefix.
    let described = store.describe();
    let url = described.split(" (").next().unwrap();
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let inserted: Option<bool> = sqlx::query_scalar(
        "SELECT r_inserted FROM verdict.put_one_gate_decisions('ops', 'gate', $1, $2, $3, NULL)",
    )
    .bind(key)
    .bind(digest.as_str())
    .bind(&body)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!(inserted, Some(true));
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_from_before_schema_2_replays_from_its_request_record_and_only_if_it_matches() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _, _) = prepared(&w, 1, "change A", "run-a").await;
        let store = w.engine.store().clone();
        let (key, record, bytes) = legacy_decision(&w).await;
        // A producer planted a record for the same key that leaves the evidence out; it is
        // tried and fails, the true one reproduces the bytes.
        let mut planted = record.clone();
        planted["evidence"] = json!([]);
        for doc in [&planted, &record] {
            store
                .put(&w.coder.actor(), DocKind::Request, doc)
                .await
                .unwrap();
        }
        assert_eq!(
            w.engine.gate_replay(&w.ops, &key).await.unwrap().bytes,
            bytes
        );
        // With only a planted record, replay refuses rather than vouching for the decision.
        w.engine
            .add_evidence(&w.ci, &[evidence(&d, "fail", "ci", "runner")])
            .await
            .unwrap();
        let (key, record, _) = legacy_decision(&w).await;
        let mut planted = record.clone();
        planted["evidence"] = json!([]);
        store
            .put(&w.coder.actor(), DocKind::Request, &planted)
            .await
            .unwrap();
        let e = w.engine.gate_replay(&w.ops, &key).await.unwrap_err();
        assert_eq!(e.code(), "replay_mismatch");
    })
    .await;
}
