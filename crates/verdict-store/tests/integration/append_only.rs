//! Append-only, enforced by the database: hand-written UPDATE, DELETE, TRUNCATE and REPLACE
//! fail on every evidence table; pointers move only by an audited compare-and-set; on
//! PostgreSQL a producer connection cannot write what judges its work, even by hand.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use sqlx::{Connection as _, Executor as _};
use verdict_core::contracts::Role;
use verdict_store::{
    Actor, ActorRole, DocKind, ExecutionHead, LeaseHolder, PointerKind, StoreError, Table,
};

/// Every append-only table, with the audit log and the migration log.
fn evidence_tables() -> Vec<&'static str> {
    let mut v: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
    v.extend(["audit_events", "schema_migrations"]);
    v
}

async fn row_counts(t: &TestStore) -> Vec<i64> {
    let mut counts = Vec::new();
    for name in evidence_tables() {
        counts.push(
            t.count(&format!("SELECT count(*) FROM {}", t.table(name)))
                .await,
        );
    }
    counts
}

async fn hand_written_changes_fail_on_every_evidence_table(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let before = row_counts(t).await;
    assert!(
        before.iter().all(|&n| n > 0),
        "every table holds rows: {before:?}"
    );
    for name in evidence_tables() {
        let table = t.table(name);
        let column = match name {
            "audit_events" => "hash",
            "schema_migrations" => "name",
            _ => "body",
        };
        let update = t
            .raw(&format!("UPDATE {table} SET {column} = '{{}}'"))
            .await;
        let err = update.expect_err(&format!("UPDATE on {name} must fail"));
        assert!(err.contains("append-only"), "{name}: {err}");
        let err = t
            .raw(&format!("DELETE FROM {table}"))
            .await
            .expect_err(&format!("DELETE on {name} must fail"));
        assert!(err.contains("append-only"), "{name}: {err}");
        match t.kind {
            Kind::Postgres => {
                let err = t
                    .raw(&format!("TRUNCATE {table}"))
                    .await
                    .expect_err(&format!("TRUNCATE on {name} must fail"));
                assert!(err.contains("append-only"), "{name}: {err}");
                let err = t
                    .raw(&format!("TRUNCATE {table} CASCADE"))
                    .await
                    .expect_err(&format!("TRUNCATE CASCADE on {name} must fail"));
                assert!(err.contains("append-only"), "{name}: {err}");
            }
            Kind::Sqlite => {
                // REPLACE deletes the old row without firing DELETE triggers; it must fail too.
                let sql = if name == "schema_migrations" {
                    format!(
                        "INSERT OR REPLACE INTO {table} SELECT version, 'evil', applied_at FROM {table}"
                    )
                } else if name == "audit_events" {
                    format!("INSERT OR REPLACE INTO {table} SELECT * FROM {table}")
                } else if name == "verification_results" {
                    format!(
                        "INSERT OR REPLACE INTO {table} (seq, key, digest, body, counted) SELECT seq, key, digest, body, 1 FROM {table}"
                    )
                } else {
                    format!(
                        "INSERT OR REPLACE INTO {table} (seq, key, digest, body) SELECT seq, key, digest, body || ' ' FROM {table}"
                    )
                };
                let err = t
                    .raw(&sql)
                    .await
                    .expect_err(&format!("REPLACE on {name} must fail"));
                assert!(err.contains("append-only"), "{name}: {err}");
                let upsert = format!(
                    "INSERT INTO {table} SELECT * FROM {table} WHERE true ON CONFLICT DO UPDATE SET {column} = 'x'"
                );
                if name != "verification_results"
                    && name != "schema_migrations"
                    && name != "audit_events"
                {
                    // Generated columns cannot be inserted; the upsert is spelled with the stored ones.
                    let upsert = format!(
                        "INSERT INTO {table} (seq, key, digest, body) SELECT seq, key, digest, body FROM {table} WHERE true \
                         ON CONFLICT DO UPDATE SET body = 'x'"
                    );
                    assert!(t.raw(&upsert).await.is_err(), "upsert on {name}");
                } else {
                    assert!(t.raw(&upsert).await.is_err(), "upsert on {name}");
                }
            }
        }
    }
    assert_eq!(row_counts(t).await, before, "nothing changed");
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(hand_written_changes_fail_on_every_evidence_table);

async fn pointers_move_only_with_an_audited_change(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let pointers = t.table("pointers");
    let changes_before = t
        .count(&format!(
            "SELECT count(*) FROM {}",
            t.table("pointer_changes")
        ))
        .await;
    for sql in [
        format!("DELETE FROM {pointers}"),
        format!("UPDATE {pointers} SET value = NULL WHERE pointer = 'execution'"),
        format!(
            "UPDATE {pointers} SET revision = revision + 1, value = NULL WHERE pointer = 'execution'"
        ),
        format!("UPDATE {pointers} SET name = 'ex-2' WHERE pointer = 'execution'"),
        format!(
            "INSERT INTO {pointers} (pointer, name, revision, value) VALUES ('gate', 'other', 1, NULL)"
        ),
    ] {
        let err = t.raw(&sql).await.expect_err(&sql);
        assert!(err.contains("pointer"), "{sql}: {err}");
    }
    if t.kind == Kind::Postgres {
        assert!(t.raw(&format!("TRUNCATE {pointers}")).await.is_err());
    }
    let head = t
        .store
        .pointer(PointerKind::Execution, "ex-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.revision, 1);
    assert!(head.execution().unwrap().is_some());
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) FROM {}",
            t.table("pointer_changes")
        ))
        .await,
        changes_before
    );
}
both!(pointers_move_only_with_an_audited_change);

async fn a_stale_compare_and_set_fails_and_changes_nothing(t: &TestStore) {
    let op = Actor::new(OPERATOR, Role::Operator);
    let producer = Actor::new(PRODUCER, Role::Producer);
    let (s1, s2) = (subject("ex-1", 1), subject("ex-1", 2));
    let (d1, d2) = (subject_digest(&s1), subject_digest(&s2));
    t.store.put(&producer, DocKind::Subject, &s1).await.unwrap();
    t.store.put(&producer, DocKind::Subject, &s2).await.unwrap();
    let first = t
        .store
        .set_current_subject(&op, "ex-1", None, &d1)
        .await
        .unwrap();
    assert_eq!(first.revision, 1);
    let snapshot = || async {
        (
            t.store
                .pointer(PointerKind::Execution, "ex-1")
                .await
                .unwrap(),
            t.store.audit_head().await.unwrap(),
            t.count(&format!(
                "SELECT count(*) FROM {}",
                t.table("pointer_changes")
            ))
            .await,
        )
    };
    let before = snapshot().await;
    // Expecting no subject when there is one.
    let err = t
        .store
        .set_current_subject(&op, "ex-1", None, &d2)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::CasFailed { .. }), "{err}");
    // Expecting another head than the current one.
    let wrong = ExecutionHead {
        subject_digest: d2.clone(),
        generation: 2,
    };
    let err = t
        .store
        .set_current_subject(&op, "ex-1", Some(&wrong), &d2)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expected"), "{err}");
    assert_eq!(
        snapshot().await,
        before,
        "a failed compare-and-set changes nothing"
    );

    // Generations never go back, and a subject of another execution is not this one's.
    let current = ExecutionHead {
        subject_digest: d1.clone(),
        generation: 1,
    };
    t.store
        .set_current_subject(&op, "ex-1", Some(&current), &d2)
        .await
        .unwrap();
    let now = ExecutionHead {
        subject_digest: d2.clone(),
        generation: 2,
    };
    let err = t
        .store
        .set_current_subject(&op, "ex-1", Some(&now), &d1)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = t
        .store
        .set_current_subject(&op, "ex-9", None, &d1)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = t
        .store
        .set_current_subject(&producer, "ex-1", Some(&now), &d2)
        .await
        .unwrap_err();
    // A producer moves only its own execution, and only under a write grant in force; this one
    // holds none.
    assert!(
        matches!(&err, StoreError::Refused(m) if m.contains("holds no write grant")),
        "{err}"
    );

    // Eight writers race from the same expected value: exactly one wins.
    let s3 = subject("ex-1", 3);
    let d3 = subject_digest(&s3);
    t.store.put(&producer, DocKind::Subject, &s3).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = t.store.clone();
        let (op, now, d3) = (op.clone(), now.clone(), d3.clone());
        tasks.push(tokio::spawn(async move {
            store
                .set_current_subject(&op, "ex-1", Some(&now), &d3)
                .await
        }));
    }
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => wins += 1,
            Err(StoreError::CasFailed { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(
        t.store
            .pointer(PointerKind::Execution, "ex-1")
            .await
            .unwrap()
            .unwrap()
            .revision,
        3
    );

    // Gate pointers: the revision only goes forward.
    let p4 = t.store.put(&op, DocKind::Policy, &policy(4)).await.unwrap();
    let p3 = t.store.put(&op, DocKind::Policy, &policy(3)).await.unwrap();
    let g = t
        .store
        .set_gate_policy(&op, "merge", None, &p4.digest)
        .await
        .unwrap();
    let at4 = g.gate().unwrap().unwrap();
    let err = t
        .store
        .set_gate_policy(&op, "merge", Some(&at4), &p3.digest)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = t
        .store
        .set_gate_policy(&op, "merge", None, &p4.digest)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::CasFailed { .. }), "{err}");

    // Leases: named for a run admitted to the taker (schema version 10), taken for oneself
    // only, released only by the holder, stale ones refused.
    admit(t, &d1, 1, "vrun-l").await;
    let job = "run vrun-l";
    let runner = Actor::new(RUNNER, Role::Runner);
    let verifier = Actor::new(VERIFIER, Role::Verifier);
    let mine = LeaseHolder {
        holder: VERIFIER.parse().unwrap(),
        expires_at: "2026-11-30T12:05:00Z".parse().unwrap(),
    };
    let theirs = LeaseHolder {
        holder: RUNNER.parse().unwrap(),
        expires_at: "2026-11-30T12:05:00Z".parse().unwrap(),
    };
    let err = t
        .store
        .cas_lease(&verifier, job, None, Some(&theirs))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    t.store
        .cas_lease(&verifier, job, None, Some(&mine))
        .await
        .unwrap();
    let err = t
        .store
        .cas_lease(&verifier, job, None, Some(&mine))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::CasFailed { .. }), "{err}");
    let err = t
        .store
        .cas_lease(&runner, job, Some(&mine), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let released = t
        .store
        .cas_lease(&verifier, job, Some(&mine), None)
        .await
        .unwrap();
    assert_eq!((released.revision, released.value.as_deref()), (2, None));
    t.store
        .cas_lease(&verifier, job, None, Some(&mine))
        .await
        .unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(a_stale_compare_and_set_fails_and_changes_nothing);

/// Connects to the test database as the principal's own database role (schema version 7),
/// storing the principal first if need be.
async fn connect_as(t: &TestStore, name: &str, role: Role) -> (sqlx::PgConnection, String) {
    principal_login(t, name, role).await
}

async fn try_sql(conn: &mut sqlx::PgConnection, sql: &str) -> Result<(), String> {
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_connection_cannot_write_judgement_even_by_hand() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    // The producer files its own evidence under a write grant (schema version 21).
    grant_write(t.store.as_ref(), "g-own-evidence", PRODUCER, "ex-1").await;
    let (mut conn, login) = connect_as(&t, PRODUCER, Role::Producer).await;
    let s = subject_digest(&subject("ex-1", 1));
    let body = serde_json::to_string(&result(&s, 1, "vrun-1", vec![])).unwrap();
    for table in [
        "verification_results",
        "findings",
        "human_decisions",
        "gate_decisions",
        "gate_evaluations",
        "denials",
    ] {
        let sql = format!(
            "INSERT INTO verdict.{table} (seq, key, digest, body) SELECT seq + 1000, key || 'x', digest, body FROM verdict.{table}"
        );
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains("permission denied"), "{table}: {err}");
    }
    for sql in [
        "INSERT INTO verdict.audit_events (seq, key) VALUES (999, 'k')",
        "INSERT INTO verdict.pointers (pointer, name, revision) VALUES ('gate', 'x', 1)",
    ] {
        let err = try_sql(&mut conn, sql).await.unwrap_err();
        assert!(err.contains("permission denied"), "{sql}: {err}");
    }
    for (table, call) in [
        ("verification_results", "put_verification_results"),
        ("findings", "put_findings"),
        ("human_decisions", "put_human_decisions"),
        ("gate_decisions", "put_gate_decisions"),
        ("gate_evaluations", "put_gate_evaluations"),
        ("denials", "put_denials"),
    ] {
        let sql = format!(
            "SELECT * FROM verdict.{call}('{PRODUCER}', 'producer', ARRAY['k'], ARRAY['d'], ARRAY['{}'], ARRAY[NULL])",
            body.replace('\'', "''")
        );
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains("permission denied"), "{table}: {err}");
    }
    // Nor can it pass itself off as another role through a routine it may call.
    let ev = evidence(&s, "ev-forged");
    let canon = String::from_utf8(verdict_core::canonical::to_vec(&ev)).unwrap();
    let dg = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &ev);
    let sql = format!(
        "SELECT * FROM verdict.put_check_evidence('{RUNNER}', 'runner', ARRAY['{dg}'], ARRAY['{dg}'], ARRAY['{}'], ARRAY[NULL])",
        canon.replace('\'', "''")
    );
    let err = try_sql(&mut conn, &sql).await.unwrap_err();
    assert!(
        err.contains("does not act for principal ci-runner in role runner"),
        "{err}"
    );
    for sql in [
        "UPDATE verdict.check_evidence SET body = body",
        "DELETE FROM verdict.check_evidence",
        "TRUNCATE verdict.check_evidence",
        "UPDATE verdict.pointers SET value = NULL",
        "SELECT * FROM verdict._audit('append', 'subjects', 'k', 'd', 'p', 'producer', NULL)",
        "SELECT verdict._claim('gate')",
    ] {
        let err = try_sql(&mut conn, sql).await.unwrap_err();
        assert!(err.contains("permission denied"), "{sql}: {err}");
    }
    // Nor file, in its own role, evidence that says a runner produced it.
    let sql = format!(
        "SELECT * FROM verdict.put_check_evidence('{PRODUCER}', 'producer', ARRAY['{dg}'], ARRAY['{dg}'], ARRAY['{}'], ARRAY[NULL])",
        canon.replace('\'', "''")
    );
    let err = try_sql(&mut conn, &sql).await.unwrap_err();
    assert!(
        err.contains("says it was produced by ci-runner as runner"),
        "{err}"
    );
    // What it may do, it does through its routine.
    let own = evidence_by(&s, "ev-own", PRODUCER, "producer");
    let canon = String::from_utf8(verdict_core::canonical::to_vec(&own)).unwrap();
    let dg = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &own);
    let sql = format!(
        "SELECT * FROM verdict.put_check_evidence('{PRODUCER}', 'producer', ARRAY['{dg}'], ARRAY['{dg}'], ARRAY['{}'], ARRAY[NULL])",
        canon.replace('\'', "''")
    );
    try_sql(&mut conn, &sql).await.unwrap();
    // Reading is allowed.
    try_sql(&mut conn, "SELECT count(*) FROM verdict.gate_decisions")
        .await
        .unwrap();
    conn.close().await.unwrap();
    t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    t.cleanup().await;
}

/// The call of the single-record routine that appends `doc` to `table` as `principal` in
/// `role`, with the key and digest the store would give it.
fn put_one(table: Table, principal: &str, role: &str, doc: &serde_json::Value) -> String {
    let body = String::from_utf8(verdict_core::canonical::to_vec(doc)).unwrap();
    let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let key = verdict_store::records::key_of_value(table, doc, &digest).unwrap();
    format!(
        "SELECT r_seq FROM verdict.put_one_{}('{principal}', '{role}', '{key}', '{digest}', '{}', NULL)",
        table.name(),
        body.replace('\'', "''")
    )
}

/// The same append through the routine for runs of records.
fn put_run(table: Table, principal: &str, role: &str, doc: &serde_json::Value) -> String {
    let body = String::from_utf8(verdict_core::canonical::to_vec(doc)).unwrap();
    let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let key = verdict_store::records::key_of_value(table, doc, &digest).unwrap();
    format!(
        "SELECT r_seq FROM verdict.put_{}('{principal}', '{role}', ARRAY['{key}'], ARRAY['{digest}'], ARRAY['{}'], ARRAY[NULL])",
        table.name(),
        body.replace('\'', "''")
    )
}

/// Each case (table, principal named in the call, body, expected message) is refused through the
/// routine for a single record and through the one for runs of records, and appends nothing.
async fn refused_both_ways(
    t: &TestStore,
    conn: &mut sqlx::PgConnection,
    role: &str,
    cases: &[(Table, &str, serde_json::Value, &str)],
) {
    let head = t.store.audit_head().await.unwrap().unwrap();
    for (table, principal, doc, expected) in cases {
        for sql in [
            put_one(*table, principal, role, doc),
            put_run(*table, principal, role, doc),
        ] {
            let err = try_sql(conn, &sql).await.unwrap_err();
            assert!(err.contains(expected), "{sql}: {err}");
        }
    }
    assert_eq!(t.store.audit_head().await.unwrap().unwrap(), head);
}

/// The database, not only the store, holds a row's claims to its writer: a connection in a role
/// that may call a write routine still cannot file a result for a run never admitted to its
/// verifier (or admitted for another class, subject or generation), findings about a subject it
/// holds no run for, a status for another verifier's run, a human decision signed by someone
/// else, another producer's work, or evidence that says another principal or role produced it.
/// Every refusal appends nothing; the honest calls that follow each group are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cannot_write_claims_of_another_writer_even_by_hand() {
    use serde_json::json;
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    // The producer files its own evidence under a write grant (schema version 21).
    grant_write(t.store.as_ref(), "g-own-evidence", PRODUCER, "ex-1").await;
    let s = subject_digest(&subject("ex-1", 1));
    // In no mission: the producer is granted ex-9 alone (a subject naming a mission would need a
    // write grant on that mission, schema 31).
    let mut other_subject = subject("ex-9", 1);
    other_subject.as_object_mut().unwrap().remove("mission");
    let other = subject_digest(&other_subject);
    let with_verifier = |field: &str, value: &str| {
        let mut r = result(&s, 1, "vrun-1", vec![]);
        r["verifier"][field] = json!(value);
        r
    };
    let results = Table::VerificationResults;

    let (mut conn, verifier_login) = connect_as(&t, VERIFIER, Role::Verifier).await;
    let not_admitted = "run vrun-1 was not admitted for verifier reviewer-1";
    refused_both_ways(
        &t,
        &mut conn,
        "verifier",
        &[
            (
                results,
                VERIFIER,
                result(&s, 1, "vrun-never", vec![]),
                "run vrun-never was not admitted for verifier reviewer-1",
            ),
            (
                results,
                VERIFIER,
                result(&s, 2, "vrun-1", vec![]),
                "generation 2",
            ),
            (
                results,
                VERIFIER,
                with_verifier("class", "security"),
                "class security",
            ),
            (
                results,
                VERIFIER,
                result(&other, 1, "vrun-1", vec![]),
                not_admitted,
            ),
            // Another verifier principal, through reviewer-1's identity, on reviewer-1's run.
            (
                results,
                "reviewer-2",
                with_verifier("principal", "reviewer-2"),
                "does not act for principal reviewer-2 in role verifier",
            ),
            // A result that names another verifier than the one writing it.
            (
                results,
                VERIFIER,
                with_verifier("principal", "reviewer-2"),
                "names verifier reviewer-2, but reviewer-1 is writing it",
            ),
            (
                Table::Findings,
                VERIFIER,
                finding(&other, "f-stray", 1),
                "reviewer-1 holds no run admitted for subject",
            ),
            (
                Table::RunEvents,
                "reviewer-2",
                json!({"run_id": "vrun-1", "n": 9, "status": "completed"}),
                "does not act for principal reviewer-2 in role verifier",
            ),
        ],
    )
    .await;
    // What the verifier may write, it writes by hand too.
    let honest = result(&s, 1, "vrun-1", vec![finding(&s, "f-honest", 1)]);
    for sql in [
        put_one(
            Table::Findings,
            VERIFIER,
            "verifier",
            &finding(&s, "f-honest", 1),
        ),
        put_run(results, VERIFIER, "verifier", &honest),
    ] {
        try_sql(&mut conn, &sql).await.unwrap();
    }
    conn.close().await.unwrap();

    let (mut conn, human_login) = connect_as(&t, HUMAN, Role::Human).await;
    // Its decisions need its write grant (schema version 7), so what is refused below is the
    // signature.
    grant_write(t.store.as_ref(), "g-alice", HUMAN, "ex-1").await;
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let mut signed = human(&s, &p);
    signed["principal"] = json!("bob");
    refused_both_ways(
        &t,
        &mut conn,
        "human",
        &[(
            Table::HumanDecisions,
            HUMAN,
            signed,
            "is signed by bob, not by alice",
        )],
    )
    .await;
    let mut own = human(&s, &p);
    own["id"] = json!("hd-2");
    try_sql(
        &mut conn,
        &put_one(Table::HumanDecisions, HUMAN, "human", &own),
    )
    .await
    .unwrap();
    conn.close().await.unwrap();

    let (mut conn, producer_login) = connect_as(&t, PRODUCER, Role::Producer).await;
    grant_write(t.store.as_ref(), "g-coder", PRODUCER, "ex-9").await;
    let forged = "says it was produced by";
    refused_both_ways(
        &t,
        &mut conn,
        "producer",
        &[
            (
                Table::Subjects,
                "agent-other",
                other_subject.clone(),
                "does not act for principal agent-other in role producer",
            ),
            (
                Table::CheckEvidence,
                PRODUCER,
                evidence_by(&s, "ev-f1", RUNNER, "producer"),
                forged,
            ),
            (
                Table::CheckEvidence,
                PRODUCER,
                evidence_by(&s, "ev-f2", PRODUCER, "runner"),
                forged,
            ),
            (
                Table::CheckEvidence,
                PRODUCER,
                evidence_by(&s, "ev-f3", "agent-other", "producer"),
                forged,
            ),
        ],
    )
    .await;
    for sql in [
        put_one(Table::Subjects, PRODUCER, "producer", &other_subject),
        put_run(
            Table::CheckEvidence,
            PRODUCER,
            "producer",
            &evidence_by(&s, "ev-mine", PRODUCER, "producer"),
        ),
    ] {
        try_sql(&mut conn, &sql).await.unwrap();
    }
    conn.close().await.unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    for login in [verifier_login, human_login, producer_login] {
        t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    }
    t.cleanup().await;
}

/// A single append is one routine call outside any `SET ROLE`, so it must work, and be held to
/// its claim, for a login that is only a member of its roles (not the superuser the other tests
/// connect as).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_login_appends_singly_only_in_its_own_role() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (conn, login) = connect_as(&t, RUNNER, Role::Runner).await;
    conn.close().await.unwrap();
    // The runner's own login (schema version 7): the store acts as the runner's identity, which
    // holds a write grant on the execution.
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let as_runner = verdict_store::open_with(
        &verdict_store::Location::Postgres(url.replacen("postgres@", &format!("{login}@"), 1)),
        &verdict_store::OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 2,
        },
    )
    .await
    .unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence(&s, "ev-by-member");
    let runner = Actor::new(RUNNER, Role::Runner);
    let first = as_runner
        .put(&runner, verdict_store::DocKind::Evidence, &ev)
        .await
        .unwrap();
    assert!(first.inserted);
    let again = as_runner
        .put(&runner, verdict_store::DocKind::Evidence, &ev)
        .await
        .unwrap();
    assert_eq!((again.inserted, again.seq), (false, first.seq));
    // Claiming a role the login does not hold is refused by the database, and appends nothing.
    let head = t.store.audit_head().await.unwrap();
    let verifier = Actor::new(VERIFIER, Role::Verifier);
    let err = as_runner
        .put(
            &verifier,
            verdict_store::DocKind::Verification,
            &result(&s, 1, "vrun-1", vec![]),
        )
        .await
        .unwrap_err();
    // Since schema 23 the runner's login does not read the verifier's grants, so the store
    // refuses before it calls the routine; by hand, the database refuses the call itself.
    assert!(
        err.to_string()
            .contains("verifier \"reviewer-1\" holds no grant in force"),
        "{err}"
    );
    let mut conn = sqlx::PgConnection::connect(&url.replacen("postgres@", &format!("{login}@"), 1))
        .await
        .unwrap();
    let body = serde_json::to_string(&result(&s, 1, "vrun-1", vec![])).unwrap();
    let err = try_sql(
        &mut conn,
        &format!(
            "SELECT * FROM verdict.put_one_verification_results('{VERIFIER}', 'verifier', 'k', 'd', '{body}', NULL)"
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    conn.close().await.unwrap();
    assert_eq!(t.store.audit_head().await.unwrap(), head);
    drop(as_runner);
    t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap_or(());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_is_granted_exactly_as_the_role_table_says() {
    let t = postgres().await;
    let role = |r: ActorRole| format!("{}{}", t.prefix, r.as_str());
    let check = |sql: String| {
        let t = &t;
        async move { t.count(&format!("SELECT ({sql})::int::bigint")).await == 1 }
    };
    for table in Table::ALL {
        if table == Table::PointerChanges {
            continue;
        }
        if table == Table::BlobHolders {
            // Appended only by put_blobs (schema version 27): no routine of its own, no
            // privilege to write it directly.
            let routines = t
                .count("SELECT count(*) FROM pg_proc WHERE proname LIKE 'put%blob_holders'")
                .await;
            assert_eq!(routines, 0);
            for r in ActorRole::ALL {
                for privilege in ["INSERT", "UPDATE", "DELETE", "TRUNCATE"] {
                    let has = check(format!(
                        "has_table_privilege('{}', 'verdict.blob_holders', '{privilege}')",
                        role(r)
                    ))
                    .await;
                    assert!(!has, "{} has {privilege} on blob_holders", r.as_str());
                }
            }
            continue;
        }
        if table == Table::CredentialChanges {
            // One routine for one change at a time (schema version 30), and no privilege to
            // read or write the table directly: the token hashes stay private.
            for r in ActorRole::ALL {
                let may = check(format!(
                    "has_function_privilege('{}', 'verdict.put_one_credential_changes(text, text, text, text, text, text)', 'EXECUTE')",
                    role(r)
                ))
                .await;
                assert_eq!(
                    may,
                    table.writers().contains(&r),
                    "{} credential_changes",
                    r.as_str()
                );
                for privilege in ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"] {
                    let has = check(format!(
                        "has_table_privilege('{}', 'verdict.credential_changes', '{privilege}')",
                        role(r)
                    ))
                    .await;
                    assert!(!has, "{} has {privilege} on credential_changes", r.as_str());
                }
            }
            let batched = t
                .count("SELECT count(*) FROM pg_proc WHERE proname = 'put_credential_changes'")
                .await;
            assert_eq!(batched, 0);
            continue;
        }
        if table == Table::Blobs {
            // One routine, taking the bytes beside the record (schema version 12).
            for r in ActorRole::ALL {
                let may = check(format!(
                    "has_function_privilege('{}', 'verdict.put_blobs(text, text, text, text, text, text, bytea)', 'EXECUTE')",
                    role(r)
                ))
                .await;
                assert_eq!(may, table.writers().contains(&r), "{} blobs", r.as_str());
                for privilege in ["INSERT", "UPDATE", "DELETE", "TRUNCATE"] {
                    let has = check(format!(
                        "has_table_privilege('{}', 'verdict.blobs', '{privilege}')",
                        role(r)
                    ))
                    .await;
                    assert!(!has, "{} has {privilege} on blobs", r.as_str());
                }
            }
            continue;
        }
        for r in ActorRole::ALL {
            let may = check(format!(
                "has_function_privilege('{}', 'verdict.put_{}(text, text, text[], text[], text[], text[])', 'EXECUTE')",
                role(r),
                table.name()
            ))
            .await;
            assert_eq!(
                may,
                table.writers().contains(&r),
                "{} {}",
                r.as_str(),
                table.name()
            );
            // The single-record routine (schema version 4) is granted exactly alike.
            let may_one = check(format!(
                "has_function_privilege('{}', 'verdict.put_one_{}(text, text, text, text, text, text)', 'EXECUTE')",
                role(r),
                table.name()
            ))
            .await;
            assert_eq!(
                may_one,
                table.writers().contains(&r),
                "{} put_one_{}",
                r.as_str(),
                table.name()
            );
            for privilege in ["INSERT", "UPDATE", "DELETE", "TRUNCATE"] {
                let has = check(format!(
                    "has_table_privilege('{}', 'verdict.{}', '{privilege}')",
                    role(r),
                    table.name()
                ))
                .await;
                assert!(!has, "{} has {privilege} on {}", r.as_str(), table.name());
            }
        }
    }
    // A principal's own denial (schema version 22): every principal's group role may record
    // one, the gate's and the system's identities may not.
    for r in ActorRole::ALL {
        let may = check(format!(
            "has_function_privilege('{}', 'verdict.put_own_denial(text, text, text)', 'EXECUTE')",
            role(r)
        ))
        .await;
        assert_eq!(
            may,
            !matches!(r, ActorRole::Gate | ActorRole::System),
            "{} put_own_denial",
            r.as_str()
        );
    }
    for kind in PointerKind::ALL {
        for r in ActorRole::ALL {
            let may = check(format!(
                "has_function_privilege('{}', 'verdict.cas_{}(text, text, text, bigint, text, text, text, text, text)', 'EXECUTE')",
                role(r),
                kind.as_str()
            ))
            .await;
            assert_eq!(
                may,
                kind.writers().contains(&r),
                "{} {}",
                r.as_str(),
                kind.as_str()
            );
        }
    }
    // Every table forces row security, and every routine has a fixed search_path.
    let unforced = t
        .count(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'verdict' AND c.relkind = 'r' AND NOT (c.relrowsecurity AND c.relforcerowsecurity)",
        )
        .await;
    assert_eq!(unforced, 0);
    let loose = t
        .count(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'verdict' AND NOT coalesce(p.proconfig::text LIKE '%search_path=verdict, pg_temp%', false)",
        )
        .await;
    assert_eq!(loose, 0);
    let definers = t
        .count(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'verdict' AND p.prosecdef",
        )
        .await;
    assert_eq!(
        definers, 61,
        "15 put routines, 15 single-record put routines, 4 compare-and-set routines (the clock's \
         included), the trigger that gives a new principal its identity, the routine that \
         gives it a login, 5 job queue routines, the two that authenticate a token and name \
         principals without reading their hashes, the one that stores a blob, and the check at \
         commit that a verifier's run preflight stopped was ended (schema 14); the one by which \
         a principal's identity records its own denial (schema 22); the ten checks the read \
         policies call (schema 23); the one that takes or \
         renews a duty lease (schema 26); the one that changes a token and the one that counts \
         a principal's changes without showing them (schema 30); the one by which the \
         operators' group reads every row only as an identity this store records (schema 32); \
         the one that ends the sessions of a login taken back (schema 42)"
    );
    // A duty lease (schema version 26) is held by the system identity alone.
    for r in ActorRole::ALL {
        let may = check(format!(
            "has_function_privilege('{}', 'verdict.duty_hold(text, text, text, text, bigint)', 'EXECUTE')",
            role(r)
        ))
        .await;
        assert_eq!(may, r == ActorRole::System, "{} duty_hold", r.as_str());
        for privilege in ["INSERT", "UPDATE", "DELETE", "TRUNCATE"] {
            let has = check(format!(
                "has_table_privilege('{}', 'verdict.duty_leases', '{privilege}')",
                role(r)
            ))
            .await;
            assert!(!has, "{} has {privilege} on duty_leases", r.as_str());
        }
    }
    // No group role reads the principals' bodies, which hold token hashes (schema version 10).
    for r in ActorRole::ALL {
        let reads = check(format!(
            "has_table_privilege('{}', 'verdict.principals', 'SELECT')",
            role(r)
        ))
        .await;
        assert!(!reads, "{} reads the principals' token hashes", r.as_str());
    }
    t.cleanup().await;
}

/// What a write routine may be handed by hand: a digest that is not the body's is refused, and
/// nothing is appended; a row inserted directly, derived columns and all, is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_checks_the_digest_and_a_direct_insert_fails() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, login) = connect_as(&t, PRODUCER, Role::Producer).await;
    let head = t.store.audit_head().await.unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence(&s, "ev-by-hand");
    let canon = String::from_utf8(verdict_core::canonical::to_vec(&ev)).unwrap();
    let dg = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &ev);
    // The digest of another document, and the right digest of a body changed by one byte.
    let other = verdict_core::digest::digest(
        verdict_core::digest::DigestKind::Evidence,
        &evidence(&s, "ev-other"),
    );
    for (key, digest, body) in [
        (dg.to_string(), other.to_string(), canon.clone()),
        (
            dg.to_string(),
            dg.to_string(),
            canon.replace("pass", "fail"),
        ),
    ] {
        let sql = format!(
            "SELECT * FROM verdict.put_check_evidence('{PRODUCER}', 'producer', ARRAY['{key}'], ARRAY['{digest}'], ARRAY['{}'], ARRAY[NULL])",
            body.replace('\'', "''")
        );
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains("does not match the body"), "{err}");
    }
    let sql = format!(
        "INSERT INTO verdict.check_evidence (seq, key, digest, body, subject_digest, evidence_id, check_id) \
         VALUES (9999, '{dg}', '{dg}', '{}', '{s}', 'ev-by-hand', 'unit-tests')",
        canon.replace('\'', "''")
    );
    let err = try_sql(&mut conn, &sql).await.unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(t.store.audit_head().await.unwrap(), head);
    conn.close().await.unwrap();
    t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    t.cleanup().await;
}

/// Since schema version 4 a write routine makes its claim and length checks as one test and
/// repeats them one by one only when that test fails: each failure must still be refused with
/// its own error and append nothing, by the routine for runs of records and by the one for a
/// single record; a key repeated within one call, or called again, is appended once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_refuses_each_bad_call_and_appends_a_repeated_key_once() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    // The producer files its own evidence under a write grant (schema version 21).
    grant_write(t.store.as_ref(), "g-own-evidence", PRODUCER, "ex-1").await;
    let (mut conn, login) = connect_as(&t, PRODUCER, Role::Producer).await;
    let head = t.store.audit_head().await.unwrap().unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence_by(&s, "ev-repeated", PRODUCER, "producer");
    let canon = String::from_utf8(verdict_core::canonical::to_vec(&ev))
        .unwrap()
        .replace('\'', "''");
    let dg = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &ev);
    let call = |role: &str, keys: &str| {
        format!(
            "SELECT r_seq, r_inserted FROM verdict.put_check_evidence('{PRODUCER}', '{role}', \
             {keys}, ARRAY['{dg}', '{dg}'], ARRAY['{canon}', '{canon}'], ARRAY[NULL, NULL])"
        )
    };
    // The single-record routine, with a digest.
    let one = |role: &str, digest: &str| {
        format!(
            "SELECT r_seq, r_inserted FROM verdict.put_one_check_evidence('{PRODUCER}', '{role}', \
             '{dg}', '{digest}', '{canon}', NULL)"
        )
    };
    let both = format!("ARRAY['{dg}', '{dg}']");
    let set_role = format!("SET ROLE \"{}producer\"", t.prefix);
    // Since schema version 7 the identity acting is checked first: a role the principal does
    // not hold, or the producers' group role instead of the principal's own, is refused by it.
    let not_it = "does not act for principal agent-coder-1";
    let refused = [
        // A role the table does not take.
        (None, call("gate", &both), not_it),
        (None, one("gate", dg.as_str()), not_it),
        // A role the table takes, but not the principal's.
        (None, call("runner", &both), not_it),
        (None, one("runner", dg.as_str()), not_it),
        // The principal's own role claimed through the group role.
        (Some(set_role.clone()), call("producer", &both), not_it),
        (Some(set_role), one("producer", dg.as_str()), not_it),
        (
            None,
            call("producer", &format!("ARRAY['{dg}']")),
            "arrays of different lengths",
        ),
        (
            None,
            one("producer", &d("other")),
            "does not match the body",
        ),
    ];
    for (setup, sql, expected) in refused {
        if let Some(setup) = setup {
            try_sql(&mut conn, &setup).await.unwrap();
        }
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains(expected), "{sql}: {err}");
        try_sql(&mut conn, "RESET ROLE").await.unwrap();
    }
    // A superuser, which the identity check does not bind, is still held to the table's roles.
    for sql in [call("gate", &both), one("gate", dg.as_str())] {
        let err = t.raw(&sql).await.unwrap_err();
        assert!(
            err.contains("role gate may not write check_evidence"),
            "{sql}: {err}"
        );
    }
    assert_eq!(t.store.audit_head().await.unwrap().unwrap(), head);
    let rows: Vec<(i64, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(call("producer", &both)))
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let next = i64::try_from(head.seq).unwrap() + 1;
    assert_eq!(rows, vec![(next, true), (next, false)]);
    let again: Vec<(i64, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(one("producer", dg.as_str())))
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(again, vec![(next, false)]);
    let after = t.store.audit_head().await.unwrap().unwrap();
    assert_eq!(after.seq, head.seq + 1);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    conn.close().await.unwrap();
    t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    t.cleanup().await;
}

/// The columns derived from a body (subject digest, run id and so on) are filled by the write
/// routine from one parse of the body since schema version 3, no longer generated by the
/// database. Each must still hold exactly what its generation expression (kept as the column's
/// comment) gives, for every row of every table the routines write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_columns_hold_what_their_bodies_say() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p: verdict_core::digest::Digest = d("policy").parse().unwrap();
    t.store
        .put(
            &Actor::gate("gate"),
            DocKind::Evaluation,
            &evaluation(&s, &p, &d("k")),
        )
        .await
        .unwrap();
    t.store
        .put(
            &Actor::system("verdict-engine"),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "n"),
        )
        .await
        .unwrap();
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    const NOTE: &str = "derived from the body by the write routine: ";
    let derived: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text, substr(d.description, length($1) + 1) \
         FROM pg_description d JOIN pg_class c ON c.oid = d.objoid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid \
         WHERE n.nspname = 'verdict' AND d.classoid = 'pg_class'::regclass \
           AND starts_with(d.description, $1) ORDER BY 1, 2",
    )
    .bind(NOTE)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // Every table but pointer_changes (written by compare-and-set) had its generated columns
    // turned into derived ones; pointer_changes keeps its three.
    let tables: std::collections::BTreeSet<&str> =
        derived.iter().map(|(t, _, _)| t.as_str()).collect();
    let written: std::collections::BTreeSet<&str> = Table::ALL
        .iter()
        .filter(|t| !t.derived_columns().is_empty())
        .map(|t| t.name())
        .collect();
    assert_eq!(tables, written);
    assert_eq!(derived.len(), 52);
    let generated = t
        .count(
            "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'verdict' AND a.attgenerated = 's' AND c.relname <> 'pointer_changes'",
        )
        .await;
    assert_eq!(generated, 0);
    let mut checked = std::collections::BTreeSet::new();
    for (table, column, expr) in &derived {
        let rows = t
            .count(&format!("SELECT count(*) FROM verdict.{table}"))
            .await;
        let wrong = t
            .count(&format!(
                "SELECT count(*) FROM verdict.{table} WHERE {column} IS DISTINCT FROM ({expr})"
            ))
            .await;
        assert_eq!(
            wrong, 0,
            "{table}.{column}: {wrong} of {rows} rows differ from {expr}"
        );
        let set = t
            .count(&format!(
                "SELECT count(*) FROM verdict.{table} WHERE {column} IS NOT NULL"
            ))
            .await;
        if set > 0 {
            checked.insert(table.as_str());
        }
    }
    // populate and the two records above write every one of these tables.
    assert_eq!(checked, written);
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// A single append runs on a connection the store keeps for it. When the server drops that
/// connection, at most the append in flight fails (leaving nothing behind) and the next one
/// goes through on a fresh connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_appends_recover_from_a_dropped_connection() {
    let t = postgres().await;
    let runner = Actor::new(RUNNER, Role::Runner);
    let s = subject_digest(&subject("ex-1", 1));
    let before = t
        .store
        .put(&runner, DocKind::Evidence, &evidence(&s, "ev-before"))
        .await
        .unwrap();
    t.raw(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .await
    .unwrap();
    let doc = evidence(&s, "ev-after");
    let first = t.store.put(&runner, DocKind::Evidence, &doc).await;
    let again = t.store.put(&runner, DocKind::Evidence, &doc).await.unwrap();
    assert_eq!(again.seq, before.seq + 1);
    // Either the first went through (and the second found its row) or it left nothing.
    assert_eq!(again.inserted, first.is_err(), "{first:?}");
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    assert_eq!(
        t.count("SELECT count(*) FROM verdict.audit_events").await,
        2
    );
    t.cleanup().await;
}

/// The functions the write triggers and routines call on every append are not SQL functions with
/// a SET clause: PostgreSQL never inlines such a function and plans its query again in every
/// transaction of a PL/pgSQL caller, which made each single append plan a query over
/// `pg_roles` (schema version 25). Each still answers as before, in a fresh transaction
/// every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_path_calls_no_function_planned_per_transaction() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let grant = verdict_store::GrantRecord {
        grant_id: "g-w".parse().unwrap(),
        principal: RUNNER.parse().unwrap(),
        scope: verdict_store::GrantScope {
            kind: verdict_store::ScopeKind::Execution,
            id: "ex-1".parse().unwrap(),
        },
        access: verdict_store::Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    t.store.add_grant(&op, &grant).await.unwrap();
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    // Each SQL function with a SET clause, and the trigger functions and put routines that call
    // it by name.
    let planned_per_transaction: Vec<(String, String)> = sqlx::query_as(
        "SELECT f.proname::text, c.proname::text FROM pg_proc f \
         JOIN pg_proc c ON c.pronamespace = f.pronamespace \
           AND c.prosrc ~ ('\\m' || f.proname || '\\(') \
         WHERE f.pronamespace = 'verdict'::regnamespace \
           AND f.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql') \
           AND f.proconfig IS NOT NULL AND c.oid <> f.oid \
           AND (c.prorettype = 'trigger'::regtype OR starts_with(c.proname, 'put_')) \
         ORDER BY 1, 2",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(planned_per_transaction, Vec::<(String, String)>::new());
    // The same answers as before, each call a transaction of its own, twice over.
    for _ in 0..2 {
        let unbound: bool = sqlx::query_scalar("SELECT verdict._unbound_superuser()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(unbound, "a superuser with no role set is unbound");
        for (principal, execution, mission, held) in [
            (RUNNER, "ex-1", None, true),
            (RUNNER, "ex-2", None, false),
            (RUNNER, "ex-2", Some("m-none"), false),
            (VERIFIER, "ex-1", None, false),
        ] {
            let found: bool =
                sqlx::query_scalar("SELECT verdict._write_grant_in_force($1, $2, $3)")
                    .bind(principal)
                    .bind(execution)
                    .bind(mission)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
            assert_eq!(found, held, "{principal} on {execution} ({mission:?})");
        }
    }
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET ROLE \"{}owner\"",
        t.prefix
    ))))
    .await
    .unwrap();
    for _ in 0..2 {
        let unbound: bool = sqlx::query_scalar("SELECT verdict._unbound_superuser()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(!unbound, "a connection acting as a role is bound");
    }
    conn.close().await.unwrap();
    t.cleanup().await;
}
