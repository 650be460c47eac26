//! The engine's own records, denials and gate evaluations: tables of their own, written only by
//! the system and Gate roles, checked on the way in, re-hashed by `audit verify`, and present
//! after a store of schema version 1 is migrated.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::Role;
use verdict_store::{
    Actor, DocKind, ProblemKind, SCHEMA_VERSION, StoreError, Table, UNAUTHENTICATED,
};

fn system() -> Actor {
    Actor::system("verdict-engine")
}

async fn only_the_system_records_denials_and_only_the_gate_evaluations(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let p: verdict_core::digest::Digest = d("policy").parse().unwrap();
    for actor in [
        Actor::new(OPERATOR, Role::Operator),
        Actor::new(PRODUCER, Role::Producer),
        Actor::new(VERIFIER, Role::Verifier),
        Actor::gate("gate"),
    ] {
        let err = t
            .store
            .put(
                &actor,
                DocKind::Denial,
                &denial(PRODUCER, Some("producer"), "n"),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    }
    for actor in [
        Actor::new(OPERATOR, Role::Operator),
        Actor::new(PRODUCER, Role::Producer),
        system(),
    ] {
        let err = t
            .store
            .put(&actor, DocKind::Evaluation, &evaluation(&s, &p, &d("k")))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    }
    // Neither kind can be passed off as a verification request any more than the other way.
    let err = t
        .store
        .put(&system(), DocKind::Request, &request(&s))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    assert_eq!(
        t.count(&format!("SELECT count(*) FROM {}", t.table("audit_events")))
            .await,
        0
    );
}
both!(only_the_system_records_denials_and_only_the_gate_evaluations);

fn delivered(event: u64) -> serde_json::Value {
    json!({"schema": "verdict.webhook-delivered/v1", "webhook": "hook-1", "event": event,
        "at": "2026-12-01T00:00:00.000000Z"})
}

fn failed(event: u64) -> serde_json::Value {
    json!({"schema": "verdict.webhook-failure/v1", "webhook": "hook-1", "event": event,
        "attempts": 3, "error": "connection refused", "at": "2026-12-01T00:00:00.000000Z"})
}

/// Schema 19: the system role appends, besides denials, only the records of webhook deliveries
/// and failures (with their members); no other note, no request, no principal or grant. The
/// engine's principal writes in no other role. Each refusal appends nothing.
async fn the_system_appends_only_denials_and_webhook_delivery_records(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    t.store
        .put(&system(), DocKind::Request, &delivered(1))
        .await
        .unwrap();
    t.store
        .put(&system(), DocKind::Request, &failed(2))
        .await
        .unwrap();
    t.store
        .put(
            &system(),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "n"),
        )
        .await
        .unwrap();
    let head = || async { t.store.audit_head().await.unwrap().unwrap().seq };
    let before = head().await;
    let mut without_event = delivered(3);
    without_event.as_object_mut().unwrap().remove("event");
    let mut without_error = failed(3);
    without_error.as_object_mut().unwrap().remove("error");
    for doc in [
        request(&s),
        without_event,
        without_error,
        json!({"schema": "verdict.webhook/v1", "id": "evil", "url": "https://attacker.example/",
            "registered_by": OPERATOR}),
        json!({"schema": "verdict.webhook-removal/v1", "webhook": "hook-1", "removed_by": OPERATOR,
            "at": "2026-12-01T00:00:00.000000Z"}),
        json!({"schema": "verdict.cancellation/v1", "subject_digest": s.as_str()}),
        json!({"schema": "verdict.run-context/v1", "run_id": "run-1", "subject_digest": s.as_str()}),
        json!({"webhook": "hook-1", "event": 4, "at": "2026-12-01T00:00:00.000000Z"}),
    ] {
        let err = t
            .store
            .put(&system(), DocKind::Request, &doc)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{doc}: {err}");
    }
    let op = verdict_store::PrincipalRecord {
        name: "mallory".parse().unwrap(),
        role: Role::Operator,
        token_sha256: verdict_store::token_sha256("token-of-mallory"),
    };
    let err = t.store.add_principal(&system(), &op).await.unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    let grant = verdict_store::GrantRecord {
        grant_id: "g-mallory".parse().unwrap(),
        principal: "mallory".parse().unwrap(),
        scope: verdict_store::GrantScope {
            kind: verdict_store::ScopeKind::Execution,
            id: "ex-1".parse().unwrap(),
        },
        access: verdict_store::Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    let err = t.store.add_grant(&system(), &grant).await.unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    // The engine's principal in any other role: refused before anything is read.
    for role in [Role::Operator, Role::Producer] {
        let engine = Actor::new("verdict-engine", role);
        let err = t
            .store
            .put(&engine, DocKind::Request, &delivered(5))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Refused(_)), "{err}");
        let err = t.store.add_principal(&engine, &op).await.unwrap_err();
        assert!(matches!(err, StoreError::Refused(_)), "{err}");
    }
    let err = t
        .store
        .put(
            &Actor::gate("verdict-engine"),
            DocKind::Request,
            &delivered(5),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    assert_eq!(head().await, before);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
}
both!(the_system_appends_only_denials_and_webhook_delivery_records);

async fn malformed_records_are_refused(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let p: verdict_core::digest::Digest = d("policy").parse().unwrap();
    let good = evaluation(&s, &p, &d("k"));
    let mut bad = Vec::new();
    let mut v = good.clone();
    v["schema"] = json!("verdict.denial/v1");
    bad.push(v);
    let mut pair = [d("a"), d("b")];
    pair.sort();
    let mut v = good.clone();
    v["evidence"] = json!([pair[1], pair[0]]);
    bad.push(v);
    let mut v = good.clone();
    v["verifications"] = json!([pair[0], pair[0]]);
    bad.push(v);
    let mut v = good.clone();
    v["prior_findings"] = json!([{"id": "f-2", "version": 1}, {"id": "f-1", "version": 1}]);
    bad.push(v);
    let mut v = good.clone();
    v["extra"] = json!(true);
    bad.push(v);
    let mut v = good.clone();
    v["now"] = json!("yesterday");
    bad.push(v);
    for v in bad {
        let err = t
            .store
            .put(&Actor::gate("gate"), DocKind::Evaluation, &v)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid { .. }), "{v}: {err}");
    }
    let good = denial(UNAUTHENTICATED, None, "n");
    let mut bad = Vec::new();
    // Without a role, the record must name the marker, not a principal.
    bad.push(denial(PRODUCER, None, "n"));
    // A token fingerprint is short hex and only on unauthenticated attempts.
    let mut v = good.clone();
    v["token_fingerprint"] =
        json!("vdt_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    bad.push(v);
    let mut v = denial(PRODUCER, Some("producer"), "n");
    v["token_fingerprint"] = json!("0123abcd");
    bad.push(v);
    let mut v = good.clone();
    v["nonce"] = json!("short");
    bad.push(v);
    let mut v = good.clone();
    v["code"] = json!("Permission Denied");
    bad.push(v);
    let mut v = good.clone();
    v["token"] = json!("vdt_secret");
    bad.push(v);
    for v in bad {
        let err = t
            .store
            .put(&system(), DocKind::Denial, &v)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid { .. }), "{v}: {err}");
    }
    let mut v = good.clone();
    v["token_fingerprint"] = json!("0123abcd");
    t.store.put(&system(), DocKind::Denial, &v).await.unwrap();
}
both!(malformed_records_are_refused);

async fn records_are_listed_by_key_subject_and_principal(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let s = subject_digest(&subject("ex-1", 1));
    let key: verdict_core::digest::Digest = d("key-1").parse().unwrap();
    let evaluations = t.store.evaluations(&key).await.unwrap();
    assert_eq!(evaluations.len(), 1);
    assert_eq!(evaluations[0].table, Table::GateEvaluations);
    assert_eq!(
        evaluations[0].value().unwrap()["evaluation_key"],
        key.as_str()
    );
    let by_subject = t
        .store
        .list(DocKind::Evaluation, &verdict_store::About::Subject(s))
        .await
        .unwrap();
    assert_eq!(by_subject, evaluations);
    assert!(
        t.store
            .evaluations(&d("other").parse().unwrap())
            .await
            .unwrap()
            .is_empty()
    );
    // Each refusal is a row of its own, even when it repeats another word for word but for
    // its nonce; storing the same bytes again appends nothing.
    let again = t
        .store
        .put(
            &system(),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "nonce-1"),
        )
        .await
        .unwrap();
    assert!(!again.inserted);
    t.store
        .put(
            &system(),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "nonce-2"),
        )
        .await
        .unwrap();
    t.store
        .put(
            &system(),
            DocKind::Denial,
            &denial(UNAUTHENTICATED, None, "nonce-3"),
        )
        .await
        .unwrap();
    let all = t.store.denials(0, 100).await.unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
    let after_first = t.store.denials(all[0].seq, 100).await.unwrap();
    assert_eq!(after_first, all[1..].to_vec());
    assert_eq!(t.store.denials(0, 1).await.unwrap(), all[..1].to_vec());
    assert_eq!(t.store.denials_of(PRODUCER).await.unwrap().len(), 2);
    let anonymous = t.store.denials_of(UNAUTHENTICATED).await.unwrap();
    assert_eq!(anonymous.len(), 1);
    assert!(anonymous[0].value().unwrap().get("role").is_none());
    let err = t
        .store
        .list(
            DocKind::Denial,
            &verdict_store::About::Execution("ex-1".into()),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    // The audit event names the system role and the principal refused.
    let events = t.store.audit_events(0, 10_000).await.unwrap();
    let e = events.iter().find(|e| e.table == "denials").unwrap();
    assert_eq!(
        (e.role.as_str(), e.principal.as_str()),
        ("system", "verdict-engine")
    );
    assert_eq!(e.correlation.as_deref(), Some(PRODUCER));
    let e = events
        .iter()
        .find(|e| e.table == "gate_evaluations")
        .unwrap();
    assert_eq!(e.role, "gate");
}
both!(records_are_listed_by_key_subject_and_principal);

async fn a_changed_byte_in_a_stored_evaluation_or_denial_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let evaluations = t.table("gate_evaluations");
    let seq_e = t
        .count(&format!("SELECT seq FROM {evaluations} LIMIT 1"))
        .await;
    // Move the evaluation's `now` by one second, keeping the JSON valid and canonical.
    t.tamper(
        "gate_evaluations",
        &format!("UPDATE {evaluations} SET body = replace(body, '12:00:00Z', '12:00:01Z')"),
    )
    .await;
    let denials = t.table("denials");
    let seq_d = t.count(&format!("SELECT seq FROM {denials} LIMIT 1")).await;
    t.tamper(
        "denials",
        &format!("UPDATE {denials} SET body = replace(body, 'agent-coder-1', 'agent-coder-2')"),
    )
    .await;
    let r = t.store.verify_audit(None).await.unwrap();
    // Each changed row is reported, and nothing else. (On PostgreSQL a changed body also
    // leaves the columns derived from it behind, which is reported on the same row.)
    let changed = [(seq_e, "gate_evaluations"), (seq_d, "denials")];
    assert!(
        r.problems.iter().all(|p| p.kind == ProblemKind::Modified
            && changed.iter().any(
                |(seq, table)| p.seq == Some(u64::try_from(*seq).unwrap()) && p.table == *table
            )),
        "{:#?}",
        r.problems
    );
    for (seq, table) in changed {
        assert!(
            r.problems.iter().any(|p| p.kind == ProblemKind::Modified
                && p.seq == Some(u64::try_from(seq).unwrap())
                && p.table == table),
            "{table}: {:#?}",
            r.problems
        );
    }
}
both!(a_changed_byte_in_a_stored_evaluation_or_denial_is_caught);

async fn check_migrated(t: &TestStore, report: verdict_store::MigrationReport) {
    assert_eq!((report.from, report.to), (1, SCHEMA_VERSION));
    assert_eq!(t.store.schema_version().await.unwrap(), SCHEMA_VERSION);
    // What version 1 wrote is still there and still verifies.
    let ops = t.store.principal("ops").await.unwrap().unwrap();
    assert_eq!(ops.role, Role::Operator);
    let r = t.store.verify_audit(None).await.unwrap();
    assert!(r.is_intact(), "{:#?}", r.problems);
    assert_eq!(r.events, 1);
    // The new tables take records, audited after the old chain, and refuse changes.
    t.store
        .put(
            &system(),
            DocKind::Denial,
            &denial(UNAUTHENTICATED, None, "n"),
        )
        .await
        .unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let stored = t
        .store
        .put(
            &Actor::gate("gate"),
            DocKind::Evaluation,
            &evaluation(&s, &d("p").parse().unwrap(), &d("k")),
        )
        .await
        .unwrap();
    assert_eq!(stored.seq, 3);
    for table in ["denials", "gate_evaluations"] {
        let name = t.table(table);
        let err = t
            .raw(&format!("UPDATE {name} SET body = body"))
            .await
            .unwrap_err();
        assert!(err.contains("append-only"), "{table}: {err}");
        let err = t.raw(&format!("DELETE FROM {name}")).await.unwrap_err();
        assert!(err.contains("append-only"), "{table}: {err}");
    }
    let r = t.store.verify_audit(None).await.unwrap();
    assert!(r.is_intact(), "{:#?}", r.problems);
    assert_eq!((r.events, r.rows), (3, 3));
    // Migrating again changes nothing.
    let prefix = (!t.prefix.is_empty()).then(|| t.prefix.clone());
    let again = verdict_store::migrate(&t.location, prefix.as_deref())
        .await
        .unwrap();
    assert_eq!((again.from, again.to), (SCHEMA_VERSION, SCHEMA_VERSION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_1_store_migrates_to_2_on_sqlite() {
    let (t, report) = migrated_from_v1(Kind::Sqlite).await;
    check_migrated(&t, report).await;
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_1_store_migrates_to_2_on_postgres() {
    let (t, report) = migrated_from_v1(Kind::Postgres).await;
    check_migrated(&t, report).await;
    // The system role is created for a database migrated from version 1, and it alone may
    // call the denial routine.
    let granted = t
        .count(&format!(
            "SELECT count(*) FROM pg_roles WHERE has_function_privilege(rolname, \
             'verdict.put_denials(text, text, text[], text[], text[], text[])', 'EXECUTE') \
             AND starts_with(rolname, '{}')",
            t.prefix
        ))
        .await;
    assert_eq!(granted, 2, "the owner and the system role");
    t.cleanup().await;
}

/// Appends as many denials of the producer as the bound allows; returns the first one's seq.
async fn denials_up_to_the_bound(t: &TestStore) -> u64 {
    let mut first = None;
    for n in 0..verdict_store::DENIALS_PER_MINUTE {
        let stored = t
            .store
            .put(
                &system(),
                DocKind::Denial,
                &denial(PRODUCER, Some("producer"), &format!("p-{n}")),
            )
            .await
            .unwrap();
        assert!(stored.inserted, "{n}");
        first.get_or_insert(stored.seq);
    }
    first.unwrap()
}

/// Schema 36: past `DENIALS_PER_MINUTE` denials naming one principal within a minute, a denial
/// is refused (`DenialBound`) and appends nothing; another principal's, and the unauthenticated
/// ones, are appended as before, and the chain verifies. On PostgreSQL a trigger on the table
/// holds the bound, whichever routine writes.
async fn a_principals_denials_are_bounded_in_a_minute(t: &TestStore) {
    denials_up_to_the_bound(t).await;
    let head = t.store.audit_head().await.unwrap().unwrap().seq;
    let err = t
        .store
        .put(
            &system(),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "past"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::DenialBound(_)), "{err}");
    assert!(
        err.to_string()
            .contains("were recorded within the last minute"),
        "{err}"
    );
    assert_eq!(t.store.audit_head().await.unwrap().unwrap().seq, head);
    for doc in [
        denial(VERIFIER, Some("verifier"), "v"),
        denial(UNAUTHENTICATED, None, "u"),
    ] {
        assert!(
            t.store
                .put(&system(), DocKind::Denial, &doc)
                .await
                .unwrap()
                .inserted
        );
    }
    assert_eq!(t.store.audit_head().await.unwrap().unwrap().seq, head + 2);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(a_principals_denials_are_bounded_in_a_minute);

/// The bound slides with the audit clock: once the oldest of a principal's 60 recent denials
/// was recorded more than a minute ago, exactly one more is appended, and the next is refused
/// again. (The oldest event's time is moved back by hand, as waiting a minute would; the chain
/// no longer verifies after that, which is not what this test is about.)
async fn a_denial_leaves_the_bound_a_minute_after_it_was_recorded(t: &TestStore) {
    let oldest = denials_up_to_the_bound(t).await;
    let put = |seed: &'static str| async move {
        t.store
            .put(
                &system(),
                DocKind::Denial,
                &denial(PRODUCER, Some("producer"), seed),
            )
            .await
    };
    assert!(matches!(put("over").await, Err(StoreError::DenialBound(_))));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let moved = |secs: i128| {
        verdict_core::contracts::Timestamp::from_unix_nanos(
            i128::try_from(now).unwrap() - secs * 1_000_000_000,
        )
    };
    let events = t.table("audit_events");
    // Fifty seconds ago is still within the minute: refused.
    t.tamper(
        "audit_events",
        &format!(
            "UPDATE {events} SET recorded_at = '{}' WHERE seq = {oldest}",
            moved(50).as_str()
        ),
    )
    .await;
    assert!(matches!(
        put("still-over").await,
        Err(StoreError::DenialBound(_))
    ));
    // Seventy seconds ago is not: one more is appended, and the one after it is refused.
    t.tamper(
        "audit_events",
        &format!(
            "UPDATE {events} SET recorded_at = '{}' WHERE seq = {oldest}",
            moved(70).as_str()
        ),
    )
    .await;
    assert!(put("slid").await.unwrap().inserted);
    assert!(matches!(
        put("over-again").await,
        Err(StoreError::DenialBound(_))
    ));
}
both!(a_denial_leaves_the_bound_a_minute_after_it_was_recorded);
