//! Storing documents and records: idempotence, validation, authority by role, listings,
//! runs, results and converging gate decisions, on both backends.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{Role, Timestamp, UnavailableReason};
use verdict_core::digest::{self, DigestKind};
use verdict_store::{
    About, Access, Actor, DocKind, GrantRecord, GrantScope, PrincipalRecord, Revocation,
    RunAdmission, RunStatus, ScopeKind, StoreError, token_sha256,
};

fn runner() -> Actor {
    Actor::new(RUNNER, Role::Runner)
}
fn producer() -> Actor {
    Actor::new(PRODUCER, Role::Producer)
}
fn operator() -> Actor {
    Actor::new(OPERATOR, Role::Operator)
}
fn verifier() -> Actor {
    Actor::new(VERIFIER, Role::Verifier)
}

/// Puts `doc` as `actor` and returns why the store refused it (anything else fails the test).
async fn refused(t: &TestStore, actor: &Actor, kind: DocKind, doc: &serde_json::Value) -> String {
    match t.store.put(actor, kind, doc).await {
        Err(StoreError::Refused(why)) => why,
        other => panic!("{kind:?} as {actor:?}: expected a refusal, got {other:?}"),
    }
}

async fn head_seq(t: &TestStore) -> u64 {
    t.store.audit_head().await.unwrap().map_or(0, |h| h.seq)
}

async fn assert_intact(t: &TestStore) {
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}

async fn put_is_idempotent_and_returns_the_stored_row(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence(&s, "ev-1");
    let first = t
        .store
        .put(&runner(), DocKind::Evidence, &ev)
        .await
        .unwrap();
    assert!(first.inserted);
    assert_eq!(first.digest, digest::digest(DigestKind::Evidence, &ev));
    assert_eq!(first.key, first.digest.to_string());
    assert_eq!(first.body.as_bytes(), verdict_core::canonical::to_vec(&ev));
    let again = t
        .store
        .put(&runner(), DocKind::Evidence, &ev)
        .await
        .unwrap();
    assert!(!again.inserted);
    assert_eq!(
        (again.seq, &again.body, &again.digest),
        (first.seq, &first.body, &first.digest)
    );
    assert_eq!(
        head_seq(t).await,
        first.seq,
        "a repeated put appends no audit event"
    );

    // A carried digest is checked and not stored; the row is the same document.
    let mut carried = ev.clone();
    carried["digest"] = json!(first.digest.as_str());
    let same = t
        .store
        .put(&runner(), DocKind::Evidence, &carried)
        .await
        .unwrap();
    assert_eq!((same.seq, same.inserted), (first.seq, false));
    assert_eq!(same.body, first.body);

    // A carried digest that does not match is tampering: refused, nothing written.
    let mut forged = evidence(&s, "ev-2");
    forged["digest"] = json!(first.digest.as_str());
    let err = t
        .store
        .put(&runner(), DocKind::Evidence, &forged)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("does not match"), "{err}");

    let got = t
        .store
        .get(DocKind::Evidence, &first.digest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.body, first.body);
    assert!(
        t.store
            .get(DocKind::Evidence, &digest::raw(b"nothing"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(head_seq(t).await, 1);
    assert_intact(t).await;
}
both!(put_is_idempotent_and_returns_the_stored_row);

async fn invalid_documents_are_refused_with_where(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let mut typo = evidence(&s, "ev-1");
    typo["outcom"] = json!("pass");
    let err = t
        .store
        .put(&runner(), DocKind::Evidence, &typo)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("outcom"), "{err}");

    let mut bad_id = evidence(&s, "ev-1");
    bad_id["id"] = json!("EV 1");
    let err = t
        .store
        .put(&runner(), DocKind::Evidence, &bad_id)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/id"), "{err}");

    // A gate decision without an evaluation key cannot be stored: there is nothing to
    // converge on.
    let p = digest::digest(DigestKind::Policy, &policy(4));
    let mut keyless = decision(&s, &p, &d("key"), "blocked");
    keyless["evaluation_key"] = json!(null);
    let err = t
        .store
        .put(&Actor::gate("gate"), DocKind::Decision, &keyless)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("evaluation_key"), "{err}");

    let err = t
        .store
        .put(
            &operator(),
            DocKind::Request,
            &json!(["not", "an", "object"]),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    let err = t
        .store
        .put(
            &operator(),
            DocKind::Request,
            &json!({"subject_digest": "sha256:ABC"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/subject_digest"), "{err}");

    let err = t
        .store
        .put(
            &Actor::new("", Role::Runner),
            DocKind::Evidence,
            &evidence(&s, "ev-1"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { what: "actor", .. }),
        "{err}"
    );
    assert_eq!(head_seq(t).await, 0, "nothing was written");
}
both!(invalid_documents_are_refused_with_where);

/// U+0000 in any string or member name is refused by the store itself, on SQLite as on
/// PostgreSQL (which could not hold it), naming where, before anything is written.
async fn u0000_is_refused_alike_on_both_backends(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let mut in_value = evidence(&s, "ev-1");
    in_value["check"] = json!("unit\u{0}tests");
    let mut deep = subject("ex-1", 1);
    deep["work_items"] = json!([{"kind": "work_package", "id": "wp-1", "version": "1\u{0}"}]);
    let note = json!({"schema": "verdict.note-test/v1", "text\u{0}": "x"});
    for (actor, kind, doc, at) in [
        (runner(), DocKind::Evidence, in_value, "/check"),
        (producer(), DocKind::Subject, deep, "/work_items/0/version"),
        (operator(), DocKind::Request, note, "/text"),
    ] {
        let err = t.store.put(&actor, kind, &doc).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Invalid { message, .. } if message.contains("U+0000") && message.contains(at)),
            "{kind:?}: {err}"
        );
    }
    assert_eq!(head_seq(t).await, 0, "nothing was written");
}
both!(u0000_is_refused_alike_on_both_backends);

async fn roles_are_enforced_by_the_store(t: &TestStore) {
    let subj = subject("ex-1", 1);
    let s = subject_digest(&subj);
    let p = digest::digest(DigestKind::Policy, &policy(4));
    // The producer cannot write what judges its work.
    for (kind, doc) in [
        (DocKind::Verification, result(&s, 1, "vrun-1", vec![])),
        (DocKind::Finding, finding(&s, "f-1", 1)),
        (DocKind::HumanDecision, human(&s, &p)),
        (DocKind::Decision, decision(&s, &p, &d("key"), "pass")),
        (DocKind::Policy, policy(4)),
    ] {
        let err = t.store.put(&producer(), kind, &doc).await.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Forbidden {
                    role: "producer",
                    ..
                }
            ),
            "{kind:?}: {err}"
        );
    }
    // Only the gate writes gate decisions, not even the operator.
    let err = t
        .store
        .put(
            &operator(),
            DocKind::Decision,
            &decision(&s, &p, &d("key"), "pass"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    // Evidence is written only by the principal and role it names.
    refused(
        t,
        &Actor::new("someone-else", Role::Runner),
        DocKind::Evidence,
        &evidence(&s, "ev-1"),
    )
    .await;
    refused(
        t,
        &Actor::new(RUNNER, Role::Producer),
        DocKind::Evidence,
        &evidence(&s, "ev-1"),
    )
    .await;
    // A human decides only in their own name.
    refused(
        t,
        &Actor::new("mallory", Role::Human),
        DocKind::HumanDecision,
        &human(&s, &p),
    )
    .await;
    // A producer registers only its own work.
    refused(
        t,
        &Actor::new("other-agent", Role::Producer),
        DocKind::Subject,
        &subj,
    )
    .await;
    assert_eq!(head_seq(t).await, 0, "nothing was written");

    t.store
        .put(&producer(), DocKind::Subject, &subj)
        .await
        .unwrap();
    t.store
        .put(
            &Actor::new(HUMAN, Role::Human),
            DocKind::HumanDecision,
            &human(&s, &p),
        )
        .await
        .unwrap();
    assert_intact(t).await;
}
both!(roles_are_enforced_by_the_store);

async fn listings_follow_subjects_and_executions(t: &TestStore) {
    let s1 = subject("ex-1", 1);
    let s2 = subject("ex-1", 2);
    let other = subject("ex-2", 1);
    for s in [&s1, &s2, &other] {
        t.store.put(&producer(), DocKind::Subject, s).await.unwrap();
    }
    let (d1, d2, d3) = (
        subject_digest(&s1),
        subject_digest(&s2),
        subject_digest(&other),
    );
    let batch: Vec<_> = [(&d1, "ev-a"), (&d2, "ev-b"), (&d2, "ev-c"), (&d3, "ev-d")]
        .into_iter()
        .map(|(s, id)| (DocKind::Evidence, evidence(s, id)))
        .collect();
    let stored = t.store.put_batch(&runner(), &batch).await.unwrap();
    assert_eq!(stored.len(), 4);
    assert!(stored.windows(2).all(|w| w[0].seq < w[1].seq));

    let of = |rows: Vec<verdict_store::Stored>| -> Vec<String> {
        rows.iter()
            .map(|r| r.value().unwrap()["id"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let by_subject = t
        .store
        .list(DocKind::Evidence, &About::Subject(d2.clone()))
        .await
        .unwrap();
    assert_eq!(of(by_subject), ["ev-b", "ev-c"]);
    let by_exec = t
        .store
        .list(DocKind::Evidence, &About::Execution("ex-1".into()))
        .await
        .unwrap();
    assert_eq!(of(by_exec), ["ev-a", "ev-b", "ev-c"]);
    let subjects = t
        .store
        .list(DocKind::Subject, &About::Execution("ex-1".into()))
        .await
        .unwrap();
    assert_eq!(
        subjects
            .iter()
            .map(|r| r.digest.clone())
            .collect::<Vec<_>>(),
        [d1.clone(), d2.clone()]
    );

    let p = t
        .store
        .put(&operator(), DocKind::Policy, &policy(4))
        .await
        .unwrap();
    for (s, key) in [(&d2, "k2"), (&d1, "k1"), (&d3, "k3")] {
        put_decision(t.store.as_ref(), &decision(s, &p.digest, &d(key), "pass")).await;
    }
    let decisions = t
        .store
        .list(DocKind::Decision, &About::Execution("ex-1".into()))
        .await
        .unwrap();
    let keys: Vec<String> = decisions.iter().map(|r| r.key.clone()).collect();
    assert_eq!(
        keys,
        [d("k2"), d("k1")],
        "decisions of an execution, in the order they were made"
    );
    let by_key = t
        .store
        .decision_by_key(&d("k1").parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_key.value().unwrap()["subject_digest"], d1.as_str());

    // A batch is all or nothing: one refused item leaves no trace of the others.
    let before = head_seq(t).await;
    let mut bad = evidence(&d1, "ev-z");
    bad["outcome"] = json!("maybe");
    let err = t
        .store
        .put_batch(
            &runner(),
            &[
                (DocKind::Evidence, evidence(&d1, "ev-y")),
                (DocKind::Evidence, bad),
            ],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert_eq!(head_seq(t).await, before);
    assert_eq!(
        t.store
            .list(DocKind::Evidence, &About::Subject(d1.clone()))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_intact(t).await;
}
both!(listings_follow_subjects_and_executions);

async fn results_need_an_admitted_run_and_count_only_while_current(t: &TestStore) {
    let s1 = subject("ex-1", 1);
    let s2 = subject("ex-1", 2);
    let (d1, d2) = (subject_digest(&s1), subject_digest(&s2));
    for s in [&s1, &s2] {
        t.store.put(&producer(), DocKind::Subject, s).await.unwrap();
    }
    // Not admitted: refused.
    refused(
        t,
        &verifier(),
        DocKind::Verification,
        &result(&d1, 1, "vrun-1", vec![]),
    )
    .await;

    admit(t, &d1, 1, "vrun-1").await;
    // A run for the wrong generation cannot be admitted.
    let req = t
        .store
        .list(DocKind::Request, &About::Subject(d1.clone()))
        .await
        .unwrap();
    let err = t
        .store
        .admit_run(
            &operator(),
            &RunAdmission {
                run_id: "vrun-x".parse().unwrap(),
                request_digest: req[0].digest.clone(),
                subject_digest: d1.clone(),
                verifier: VERIFIER.parse().unwrap(),
                class: "reviewer".parse().unwrap(),
                admitted_generation: 7,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");

    // Another verifier cannot write for this run; nor can the result claim another generation.
    let mut stolen = result(&d1, 1, "vrun-1", vec![]);
    stolen["verifier"]["principal"] = json!("reviewer-2");
    refused(
        t,
        &Actor::new("reviewer-2", Role::Verifier),
        DocKind::Verification,
        &stolen,
    )
    .await;
    refused(
        t,
        &verifier(),
        DocKind::Verification,
        &result(&d1, 2, "vrun-1", vec![]),
    )
    .await;

    // No current subject yet: the result is history.
    let f1 = finding(&d1, "f-1", 1);
    let r = t
        .store
        .put(
            &verifier(),
            DocKind::Verification,
            &result(&d1, 1, "vrun-1", vec![f1.clone()]),
        )
        .await
        .unwrap();
    assert_eq!(r.counted, Some(false));
    // Its finding was stored with it, as written.
    let f = t
        .store
        .finding(&"f-1".parse().unwrap(), 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.digest, digest::digest(DigestKind::Finding, &f1));
    // A finding version is immutable: other content under the same id and version is refused.
    let mut changed = f1.clone();
    changed["severity"] = json!("minor");
    let err = t
        .store
        .put(&verifier(), DocKind::Finding, &changed)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                table: "findings",
                ..
            }
        ),
        "{err}"
    );
    let mut v2 = changed.clone();
    v2["version"] = json!(2);
    t.store
        .put(&verifier(), DocKind::Finding, &v2)
        .await
        .unwrap();

    // Current subject and generation: the result counts.
    t.store
        .set_current_subject(&operator(), "ex-1", None, &d1)
        .await
        .unwrap();
    admit(t, &d1, 1, "vrun-2").await;
    let r2 = t
        .store
        .put(
            &verifier(),
            DocKind::Verification,
            &result(&d1, 1, "vrun-2", vec![]),
        )
        .await
        .unwrap();
    assert_eq!(r2.counted, Some(true));

    // The execution moves on: a late result for generation 1 is kept, as history.
    let head = t
        .store
        .pointer(verdict_store::PointerKind::Execution, "ex-1")
        .await
        .unwrap()
        .unwrap();
    t.store
        .set_current_subject(&operator(), "ex-1", head.execution().unwrap().as_ref(), &d2)
        .await
        .unwrap();
    admit(t, &d1, 1, "vrun-3").await;
    let late = t
        .store
        .put(
            &verifier(),
            DocKind::Verification,
            &result(&d1, 1, "vrun-3", vec![]),
        )
        .await
        .unwrap();
    assert_eq!(late.counted, Some(false));
    let listed = t
        .store
        .list(DocKind::Verification, &About::Subject(d1.clone()))
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|r| r.counted).collect::<Vec<_>>(),
        [Some(false), Some(true), Some(false)]
    );
    assert_eq!(
        t.store
            .list(DocKind::Finding, &About::Subject(d1.clone()))
            .await
            .unwrap()
            .len(),
        2
    );
    assert_intact(t).await;
}
both!(results_need_an_admitted_run_and_count_only_while_current);

/// A verifier files findings only about a subject it holds an admitted run for: alone, or inside
/// a result for a run it was admitted to. Each refusal appends nothing.
async fn findings_need_a_run_admitted_on_their_subject(t: &TestStore) {
    let (s1, s2) = (subject("ex-1", 1), subject("ex-2", 1));
    let (d1, d2) = (subject_digest(&s1), subject_digest(&s2));
    for s in [&s1, &s2] {
        t.store.put(&producer(), DocKind::Subject, s).await.unwrap();
    }
    let before = head_seq(t).await;
    let why = refused(
        t,
        &verifier(),
        DocKind::Finding,
        &finding(&d1, "f-early", 1),
    )
    .await;
    assert!(why.contains("holds no run admitted for subject"), "{why}");
    admit(t, &d1, 1, "vrun-1").await;
    let before_admitted = head_seq(t).await;
    assert!(before_admitted > before);
    // Admitted on d1, not on d2: a finding about d2 is refused alone and inside a d1 result.
    refused(t, &verifier(), DocKind::Finding, &finding(&d2, "f-2", 1)).await;
    let mixed = result(&d1, 1, "vrun-1", vec![finding(&d2, "f-2", 1)]);
    refused(t, &verifier(), DocKind::Verification, &mixed).await;
    // Another verifier holds no run on d1.
    refused(
        t,
        &Actor::new("reviewer-2", Role::Verifier),
        DocKind::Finding,
        &finding(&d1, "f-1", 1),
    )
    .await;
    assert_eq!(head_seq(t).await, before_admitted);
    // The admitted verifier files about d1, alone and inside its result.
    t.store
        .put(&verifier(), DocKind::Finding, &finding(&d1, "f-1", 1))
        .await
        .unwrap();
    t.store
        .put(
            &verifier(),
            DocKind::Verification,
            &result(&d1, 1, "vrun-1", vec![finding(&d1, "f-1", 2)]),
        )
        .await
        .unwrap();
    assert_eq!(head_seq(t).await, before_admitted + 3);
    assert_intact(t).await;
}
both!(findings_need_a_run_admitted_on_their_subject);

async fn run_status_is_appended_never_rewritten(t: &TestStore) {
    let s = subject("ex-1", 1);
    let d1 = subject_digest(&s);
    t.store
        .put(&producer(), DocKind::Subject, &s)
        .await
        .unwrap();
    admit(t, &d1, 1, "vrun-1").await;
    let started = t
        .store
        .record_run_status(&verifier(), "vrun-1", RunStatus::Started, None)
        .await
        .unwrap();
    let again = t
        .store
        .record_run_status(&verifier(), "vrun-1", RunStatus::Started, None)
        .await
        .unwrap();
    assert_eq!((again.seq, again.inserted), (started.seq, false));
    let err = t
        .store
        .record_run_status(
            &Actor::new("reviewer-2", Role::Verifier),
            "vrun-1",
            RunStatus::Cancelled,
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = t
        .store
        .record_run_status(&verifier(), "vrun-1", RunStatus::Unavailable, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    t.store
        .record_run_status(
            &verifier(),
            "vrun-1",
            RunStatus::Unavailable,
            Some(UnavailableReason::Timeout),
        )
        .await
        .unwrap();
    let err = t
        .store
        .record_run_status(&operator(), "vrun-1", RunStatus::Completed, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already ended"), "{err}");
    let err = t
        .store
        .record_run_status(&producer(), "vrun-1", RunStatus::Completed, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    let run = t.store.run("vrun-1").await.unwrap().unwrap();
    assert_eq!(run.status(), Some(RunStatus::Unavailable));
    assert_eq!(run.events.iter().map(|e| e.n).collect::<Vec<_>>(), [1, 2]);
    assert!(t.store.run("nope").await.unwrap().is_none());
    assert_intact(t).await;
}
both!(run_status_is_appended_never_rewritten);

async fn sixteen_concurrent_evaluations_of_one_key_store_one_decision(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    // The operator the gate runs under is stored first (schema 14), so the events counted
    // below are the policy's, the record's and the decision's.
    register(t.store.as_ref(), GATEKEEPER, Role::Operator).await;
    let registered = t.store.audit_head().await.unwrap().unwrap().seq;
    let p = t
        .store
        .put(&operator(), DocKind::Policy, &policy(4))
        .await
        .unwrap();
    let key = d("evaluation");
    // Separate handles (connections) on SQLite; one pool of 16 connections on PostgreSQL.
    let mut handles = Vec::new();
    for _ in 0..16 {
        handles.push(match t.kind {
            Kind::Sqlite => t.reopen().await,
            Kind::Postgres => t.store.clone(),
        });
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(16));
    let mut tasks = Vec::new();
    for (i, store) in handles.into_iter().enumerate() {
        // Half of them even bring different bytes under the same key: the first one wins and
        // everybody reads it back.
        let doc = decision(
            &s,
            &p.digest,
            &key,
            if i % 2 == 0 { "pass" } else { "blocked" },
        );
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            put_decision(store.as_ref(), &doc).await
        }));
    }
    let mut rows = Vec::new();
    for task in tasks {
        rows.push(task.await.unwrap());
    }
    assert_eq!(rows.iter().filter(|r| r.inserted).count(), 1);
    assert!(
        rows.iter()
            .all(|r| r.body == rows[0].body && r.digest == rows[0].digest && r.seq == rows[0].seq)
    );
    let n = t
        .count(&format!(
            "SELECT count(*) FROM {}",
            t.table("gate_decisions")
        ))
        .await;
    assert_eq!(n, 1);
    let events = t
        .count(&format!("SELECT count(*) FROM {}", t.table("audit_events")))
        .await;
    assert_eq!(
        events - i64::try_from(registered).unwrap(),
        3,
        "one event for the policy, one for the evaluation record, one for the decision"
    );
    assert_intact(t).await;
}
both!(sixteen_concurrent_evaluations_of_one_key_store_one_decision);

async fn principals_keep_token_hashes_and_grants_are_revoked_by_appending(t: &TestStore) {
    let token = "vt_secret_token_value_0001";
    let rec = PrincipalRecord {
        name: "reviewer-\"1\\".parse().unwrap(),
        role: Role::Verifier,
        token_sha256: token_sha256(token),
    };
    let err = t.store.add_principal(&producer(), &rec).await.unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    let op = Actor::new("op \"quoted\" \\ ünïcode", Role::Operator);
    t.store.add_principal(&op, &rec).await.unwrap();
    assert!(!t.store.add_principal(&op, &rec).await.unwrap().inserted);
    let found = t
        .store
        .principal_by_token_hash(&token_sha256(token))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, rec);
    assert!(
        t.store
            .principal_by_token_hash(&token_sha256("other"))
            .await
            .unwrap()
            .is_none()
    );
    let leaked = t
        .count(&format!(
            "SELECT count(*) FROM {} WHERE body LIKE '%{token}%'",
            t.table("principals")
        ))
        .await;
    assert_eq!(leaked, 0, "the token itself is never stored");
    // The same name with another role or token is another principal: refused.
    let mut changed = rec.clone();
    changed.role = Role::Operator;
    let err = t.store.add_principal(&op, &changed).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    // Another name cannot share a token.
    let mut twin = rec.clone();
    twin.name = "twin".parse().unwrap();
    let err = t.store.add_principal(&op, &twin).await.unwrap_err();
    assert!(matches!(err, StoreError::Duplicate(_)), "{err}");

    let grant = GrantRecord {
        grant_id: "g-1".parse().unwrap(),
        principal: rec.name.clone(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: "ex-1".parse().unwrap(),
        },
        access: Access::Read,
        expires_at: "2026-12-31T00:00:00Z".parse().unwrap(),
    };
    t.store.add_grant(&op, &grant).await.unwrap();
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let grants = t.store.grants_for(rec.name.as_str()).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert!(grants[0].is_active(&now));
    let revocation = Revocation {
        grant_id: "g-1".parse().unwrap(),
        revoked_at: "2026-11-30T11:00:00Z".parse().unwrap(),
        reason: "run cancelled".into(),
    };
    t.store.revoke_grant(&op, &revocation).await.unwrap();
    assert!(
        !t.store
            .revoke_grant(&op, &revocation)
            .await
            .unwrap()
            .inserted
    );
    let mut other = revocation.clone();
    other.reason = "changed my mind".into();
    assert!(matches!(
        t.store.revoke_grant(&op, &other).await.unwrap_err(),
        StoreError::Conflict { .. }
    ));
    let grants = t.store.grants_for(rec.name.as_str()).await.unwrap();
    assert_eq!(grants[0].revocation.as_ref(), Some(&revocation));
    assert!(!grants[0].is_active(&now));
    let mut missing = revocation.clone();
    missing.grant_id = "g-404".parse().unwrap();
    assert!(matches!(
        t.store.revoke_grant(&op, &missing).await.unwrap_err(),
        StoreError::NotFound { .. }
    ));
    // The grant row itself is unchanged: revocation never updates it.
    let rows = t
        .count(&format!("SELECT count(*) FROM {}", t.table("grants")))
        .await;
    assert_eq!(rows, 1);
    assert_intact(t).await;
}
both!(principals_keep_token_hashes_and_grants_are_revoked_by_appending);

/// A stored person's decision is held, in the transaction that appends it, to what the engine
/// checks first: an approval names the reasons it clears, and the policy and subject it names
/// are a gate's current policy and its execution's current subject. Each breach is refused on
/// both backends and appends nothing; the decision on what is current is stored.
async fn a_persons_decision_is_stored_only_on_what_is_current(t: &TestStore) {
    let store = t.store.as_ref();
    populate(store).await;
    register(store, "bob", Role::Human).await;
    grant_write(store, "g-bob", "bob", "ex-1").await;
    let bob = Actor::new("bob", Role::Human);
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let stored_other = store
        .put(
            &Actor::new(OPERATOR, Role::Operator),
            DocKind::Policy,
            &policy(7),
        )
        .await
        .unwrap();
    let mine = |id: &str, policy: &verdict_core::digest::Digest| {
        let mut doc = human(&s, policy);
        doc["id"] = json!(id);
        doc["principal"] = json!("bob");
        doc
    };
    let mut without_clears = mine("hd-b1", &p);
    without_clears.as_object_mut().unwrap().remove("clears");
    let length = store.audit_head().await.unwrap().unwrap().seq;
    for (what, doc) in [
        ("an approval naming nothing it clears", without_clears),
        (
            "a stored policy no gate has",
            mine("hd-b2", &stored_other.digest),
        ),
    ] {
        let outcome = store.put(&bob, DocKind::HumanDecision, &doc).await;
        assert!(outcome.is_err(), "{what}: {outcome:?}");
    }
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    store
        .put(&bob, DocKind::HumanDecision, &mine("hd-b3", &p))
        .await
        .unwrap();
    // The execution moves on: the old subject is no longer current.
    let next = subject("ex-1", 2);
    let next_digest = store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &next,
        )
        .await
        .unwrap()
        .digest;
    let head = verdict_store::ExecutionHead {
        subject_digest: s.clone(),
        generation: 1,
    };
    store
        .set_current_subject(
            &Actor::new(OPERATOR, Role::Operator),
            "ex-1",
            Some(&head),
            &next_digest,
        )
        .await
        .unwrap();
    let length = store.audit_head().await.unwrap().unwrap().seq;
    let outcome = store
        .put(&bob, DocKind::HumanDecision, &mine("hd-b4", &p))
        .await;
    assert!(outcome.is_err(), "a subject no longer current: {outcome:?}");
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
}
both!(a_persons_decision_is_stored_only_on_what_is_current);
