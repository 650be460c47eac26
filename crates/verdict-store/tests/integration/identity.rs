//! Per-principal identity (schema version 7), tried through real PostgreSQL logins: each
//! principal's own login, and a service login that acts for principals with `SET ROLE`. Every
//! write routine refuses a call whose identity does not act for the principal it names, and a
//! refusal appends nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use sqlx::{Connection as _, Executor as _};
use verdict_core::contracts::Role;
use verdict_store::{
    Access, Actor, DocKind, ExecutionHead, GrantRecord, GrantScope, Location, OpenOptions,
    PrincipalRecord, ScopeKind, Table, token_sha256,
};

/// [`try_sql`], a refusal as its SQLSTATE and message.
async fn try_sql_state(conn: &mut sqlx::PgConnection, sql: &str) -> Result<(), (String, String)> {
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| {
            let code = e
                .as_database_error()
                .and_then(|d| d.code())
                .map(|c| c.into_owned())
                .unwrap_or_default();
            (code, e.to_string())
        })
}

async fn try_sql(conn: &mut sqlx::PgConnection, sql: &str) -> Result<(), String> {
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A count read through `conn`, as its login sees the rows.
async fn count_as(conn: &mut sqlx::PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(conn)
        .await
        .unwrap()
}

fn canonical(v: &serde_json::Value) -> String {
    String::from_utf8(verdict_core::canonical::to_vec(v)).unwrap()
}

/// The single-record and the batched call of `table`'s routine appending `doc` as `principal`
/// in `role`, and the one-statement write calling the batched one (schema 41) as the identity
/// the connection acts as: every attack tried through the routines is tried through it too.
fn put_calls(table: Table, principal: &str, role: &str, doc: &serde_json::Value) -> [String; 3] {
    let body = canonical(doc);
    let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let key = verdict_store::records::key_of_value(table, doc, &digest).unwrap();
    put_calls_keyed(table, principal, role, doc, &key)
}

/// [`put_calls`] under `key`, for a body the store itself would not take.
fn put_calls_keyed(
    table: Table,
    principal: &str,
    role: &str,
    doc: &serde_json::Value,
    key: &str,
) -> [String; 3] {
    let body = canonical(doc);
    let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let body = body.replace('\'', "''");
    [
        format!(
            "SELECT r_seq FROM verdict.put_one_{}('{principal}', '{role}', '{key}', '{digest}', '{body}', NULL)",
            table.name()
        ),
        format!(
            "SELECT r_seq FROM verdict.put_{}('{principal}', '{role}', ARRAY['{key}'], ARRAY['{digest}'], ARRAY['{body}'], ARRAY[NULL])",
            table.name()
        ),
        format!(
            "SELECT r_seq FROM verdict.write(nullif(current_setting('role'), 'none'), NULL, \
             '{principal}', '{role}', NULL, NULL, NULL, NULL, ARRAY['{}'], ARRAY['{key}'], \
             ARRAY['{digest}'], ARRAY['{body}'], ARRAY[NULL], ARRAY[false], NULL, NULL, NULL, \
             NULL, 'jobs')",
            table.name()
        ),
    ]
}

/// The call of cas_execution moving `execution` from `old` (at `revision`; `None` when it has
/// no head yet) to `new`, as `principal` in `role`.
fn cas_execution(
    principal: &str,
    role: &str,
    execution: &str,
    revision: u64,
    old: Option<&ExecutionHead>,
    new: &ExecutionHead,
) -> String {
    cas_execution_value(
        principal,
        role,
        execution,
        revision,
        old,
        serde_json::to_value(new).unwrap(),
    )
}

/// [`cas_execution`] to any value, for one the store itself would not write.
fn cas_execution_value(
    principal: &str,
    role: &str,
    execution: &str,
    revision: u64,
    old: Option<&ExecutionHead>,
    new_value: serde_json::Value,
) -> String {
    let old_value = old.map_or(serde_json::Value::Null, |h| {
        serde_json::to_value(h).unwrap()
    });
    let change = json!({
        "pointer": "execution", "name": execution, "revision": revision + 1,
        "old": old_value, "new": new_value,
    });
    let body = canonical(&change);
    let digest = verdict_store::records::row_digest("store.pointer-change", body.as_bytes());
    let key = verdict_store::records::pointer_change_key("execution", execution, revision + 1);
    let old_text = old.map_or("NULL".to_owned(), |_| {
        format!("'{}'", canonical(&old_value))
    });
    format!(
        "SELECT * FROM verdict.cas_execution('{principal}', '{role}', '{execution}', {revision}, {old_text}, '{}', '{key}', '{digest}', '{body}')",
        canonical(&new_value)
    )
}

/// The audit chain has not moved since `seq` and still verifies.
async fn nothing_appended(t: &TestStore, seq: u64) {
    assert_eq!(t.store.audit_head().await.unwrap().unwrap().seq, seq);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}

async fn head_seq(t: &TestStore) -> u64 {
    t.store.audit_head().await.unwrap().unwrap().seq
}

fn write_grant(id: &str, principal: &str, execution: &str) -> GrantRecord {
    GrantRecord {
        grant_id: id.parse().unwrap(),
        principal: principal.parse().unwrap(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: execution.parse().unwrap(),
        },
        access: Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    }
}

/// A producer's own login calls put_one_principals (and put_principals) to mint an operator:
/// refused, by EXECUTE and by the identity check, with nothing appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_login_cannot_mint_an_operator() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let seq = head_seq(&t).await;
    let minted = PrincipalRecord {
        name: "mallory".parse().unwrap(),
        role: Role::Operator,
        token_sha256: token_sha256("mallory's token"),
    };
    let doc = serde_json::to_value(&minted).unwrap();
    for principal in [PRODUCER, OPERATOR] {
        for sql in put_calls(Table::Principals, principal, "operator", &doc) {
            let err = try_sql(&mut conn, &sql).await.unwrap_err();
            assert!(err.contains("permission denied"), "{sql}: {err}");
        }
    }
    // Nor through the operators' group role, which it is no member of.
    let err = try_sql(&mut conn, &format!("SET ROLE \"{}operator\"", t.prefix))
        .await
        .unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    conn.close().await.unwrap();
    assert!(t.store.principal("mallory").await.unwrap().is_none());
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// A verifier's login writes a result naming another verifier, for that verifier's own run:
/// refused, though the call claims the other verifier throughout and the run is theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_login_cannot_write_as_another_verifier() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    // reviewer-1 holds run vrun-1 (populate); reviewer-2 logs in and writes reviewer-1's result.
    let (mut conn, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    let seq = head_seq(&t).await;
    let s = subject_digest(&subject("ex-1", 1));
    let doc = result(&s, 1, "vrun-1", vec![]);
    for sql in put_calls(Table::VerificationResults, VERIFIER, "verifier", &doc) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(
            err.contains("does not act for principal reviewer-1 in role verifier"),
            "{sql}: {err}"
        );
    }
    // Nor a status of reviewer-1's run.
    let event = json!({"run_id": "vrun-1", "n": 9, "status": "completed"});
    for sql in put_calls(Table::RunEvents, VERIFIER, "verifier", &event) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains("does not act for principal"), "{sql}: {err}");
    }
    // Nor by becoming reviewer-1's identity.
    let theirs = verdict_store::principal_db_role(&t.prefix, &t.db, VERIFIER);
    let err = try_sql(&mut conn, &format!("SET ROLE \"{theirs}\""))
        .await
        .unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    conn.close().await.unwrap();
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// A human's login signs a decision as another human (the body and the call both name bob):
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_login_cannot_sign_as_another_human() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "bob", Role::Human).await;
    let (mut conn, _) = principal_login(&t, HUMAN, Role::Human).await;
    let seq = head_seq(&t).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let mut as_bob = human(&s, &p);
    as_bob["principal"] = json!("bob");
    as_bob["id"] = json!("hd-bob");
    for sql in put_calls(Table::HumanDecisions, "bob", "human", &as_bob) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(
            err.contains("does not act for principal bob in role human"),
            "{sql}: {err}"
        );
    }
    conn.close().await.unwrap();
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// A service login (a member of `<prefix>service`, not a superuser) writes nothing as itself,
/// nor through a group role; it acts for a principal only after `SET ROLE` to that principal's
/// identity, and then only as that principal. A store opened with it works, acting for each
/// principal in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_login_writes_only_as_the_principal_it_set_role_to() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), PRODUCER, Role::Producer).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    // A producer's evidence needs its write grant too (schema version 21).
    grant_write(t.store.as_ref(), "g-producer", PRODUCER, "ex-1").await;
    let login = format!("{}svc_login", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}service\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let seq = head_seq(&t).await;
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence_by(&s, "ev-svc", PRODUCER, "producer");
    let calls = put_calls(Table::CheckEvidence, PRODUCER, "producer", &ev);
    // As itself.
    for sql in &calls {
        let err = try_sql(&mut conn, sql).await.unwrap_err();
        assert!(
            err.contains(&format!("database identity {login} does not act")),
            "{sql}: {err}"
        );
    }
    // Through the producers' group role.
    try_sql(&mut conn, &format!("SET ROLE \"{}producer\"", t.prefix))
        .await
        .unwrap();
    for sql in &calls {
        let err = try_sql(&mut conn, sql).await.unwrap_err();
        assert!(err.contains("does not act for principal"), "{sql}: {err}");
    }
    // As the runner (whose role may write evidence too), naming the producer.
    let runner = verdict_store::principal_db_role(&t.prefix, &t.db, RUNNER);
    try_sql(&mut conn, &format!("SET ROLE \"{runner}\""))
        .await
        .unwrap();
    for sql in &calls {
        let err = try_sql(&mut conn, sql).await.unwrap_err();
        assert!(
            err.contains("does not act for principal agent-coder-1"),
            "{sql}: {err}"
        );
    }
    nothing_appended(&t, seq).await;
    // As the producer itself, it writes.
    let producer = verdict_store::principal_db_role(&t.prefix, &t.db, PRODUCER);
    try_sql(&mut conn, &format!("SET ROLE \"{producer}\""))
        .await
        .unwrap();
    try_sql(&mut conn, &calls[0]).await.unwrap();
    conn.close().await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    // The store, opened with the service login, acts for each principal through its identity.
    let store = verdict_store::open_with(
        &Location::Postgres(url),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 4,
        },
    )
    .await
    .unwrap();
    let runner = Actor::new(RUNNER, Role::Runner);
    store
        .put(&runner, DocKind::Evidence, &evidence(&s, "ev-svc-runner"))
        .await
        .unwrap();
    store
        .put_batch(
            &Actor::new(PRODUCER, Role::Producer),
            &[(
                DocKind::Evidence,
                evidence_by(&s, "ev-svc-2", PRODUCER, "producer"),
            )],
        )
        .await
        .unwrap();
    // A principal with no identity on record (never stored) writes nothing through it.
    let stranger = Actor::new("stranger", Role::Runner);
    let before = head_seq(&t).await;
    let err = store
        .put(
            &stranger,
            DocKind::Evidence,
            &evidence_by(&s, "ev-x", "stranger", "runner"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("does not act for principal stranger"),
        "{err}"
    );
    nothing_appended(&t, before).await;
    drop(store);
    t.cleanup().await;
}

/// A producer's own login, a member of no operator role, puts a subject and moves its
/// execution forward; it cannot move another producer's execution, nor move its own back, nor
/// move it once its grant is revoked. Through the store and by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_login_moves_only_its_own_execution_forward() {
    // In no mission: the producer is granted its execution alone (a subject naming a mission
    // would need a write grant on that mission, schema 31).
    let subject = |execution: &str, generation: u64| {
        let mut s = subject(execution, generation);
        s.as_object_mut().unwrap().remove("mission");
        s
    };
    let t = postgres().await;
    let op = Actor::new(OPERATOR, Role::Operator);
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    register(t.store.as_ref(), "agent-other", Role::Producer).await;
    t.store
        .add_grant(&op, &write_grant("g-p", PRODUCER, "ex-1"))
        .await
        .unwrap();
    t.store
        .add_grant(&op, &write_grant("g-o", "agent-other", "ex-2"))
        .await
        .unwrap();
    let (conn, login) = principal_login(&t, PRODUCER, Role::Producer).await;
    conn.close().await.unwrap();
    let member: bool = t
        .count(&format!(
            "SELECT pg_has_role('{login}', '{}operator', 'MEMBER')::int::bigint",
            t.prefix
        ))
        .await
        == 1;
    assert!(!member, "the producer's login holds no operator role");
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    let as_producer = verdict_store::open_with(
        &Location::Postgres(url.clone()),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 2,
        },
    )
    .await
    .unwrap();
    let producer = Actor::new(PRODUCER, Role::Producer);
    let (s1, s2) = (subject("ex-1", 1), subject("ex-1", 2));
    let (d1, d2) = (subject_digest(&s1), subject_digest(&s2));
    as_producer
        .put(&producer, DocKind::Subject, &s1)
        .await
        .unwrap();
    as_producer
        .put(&producer, DocKind::Subject, &s2)
        .await
        .unwrap();
    as_producer
        .set_current_subject(&producer, "ex-1", None, &d1)
        .await
        .unwrap();
    let at_1 = ExecutionHead {
        subject_digest: d1.clone(),
        generation: 1,
    };
    let moved = as_producer
        .set_current_subject(&producer, "ex-1", Some(&at_1), &d2)
        .await
        .unwrap();
    assert_eq!(moved.revision, 2);
    let at_2 = ExecutionHead {
        subject_digest: d2.clone(),
        generation: 2,
    };
    // Another producer's execution, with a subject of its own put by the superuser store.
    let mut theirs = subject("ex-2", 1);
    theirs["producer"]["principal"] = json!("agent-other");
    let theirs_digest = subject_digest(&theirs);
    t.store
        .put(
            &Actor::new("agent-other", Role::Producer),
            DocKind::Subject,
            &theirs,
        )
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let err = as_producer
        .set_current_subject(&producer, "ex-2", None, &theirs_digest)
        .await
        .unwrap_err();
    // Since schema 23 the producer's login does not even read the other producer's subject (it
    // holds no grant on ex-2), so the store finds none to move to.
    assert!(
        err.to_string()
            .contains(&format!("subject {:?} not found", theirs_digest.as_str())),
        "{err}"
    );
    let err = as_producer
        .set_current_subject(&producer, "ex-1", Some(&at_2), &d1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot go back"), "{err}");
    // By hand, past the store's checks, the database refuses the same.
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let to_theirs = ExecutionHead {
        subject_digest: theirs_digest.clone(),
        generation: 1,
    };
    for (sql, says) in [
        (
            cas_execution(PRODUCER, "producer", "ex-2", 0, None, &to_theirs),
            "did not produce",
        ),
        (
            cas_execution(PRODUCER, "producer", "ex-1", 2, Some(&at_2), &at_1),
            "cannot go back",
        ),
        // Claiming to be the other producer, or an operator.
        (
            cas_execution("agent-other", "producer", "ex-2", 0, None, &to_theirs),
            "does not act for principal agent-other",
        ),
        (
            cas_execution(PRODUCER, "operator", "ex-1", 2, Some(&at_2), &at_1),
            "does not act for principal agent-coder-1 in role operator",
        ),
        // Schema 44: a head the engine's reader would refuse (a member more), which made every
        // operator's listing of executions fail.
        (
            cas_execution_value(PRODUCER, "producer", "ex-1", 2, Some(&at_2), {
                let mut v = serde_json::to_value(&at_2).unwrap();
                v["zz"] = json!(1);
                v
            }),
            "an execution's head is exactly",
        ),
    ] {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains(says), "{sql}: {err}");
    }
    nothing_appended(&t, seq).await;
    // Once its grant is revoked, not even forward.
    let s3 = subject("ex-1", 3);
    let d3 = subject_digest(&s3);
    as_producer
        .put(&producer, DocKind::Subject, &s3)
        .await
        .unwrap();
    revoke(t.store.as_ref(), "g-p").await;
    let seq = head_seq(&t).await;
    let at_3 = ExecutionHead {
        subject_digest: d3.clone(),
        generation: 3,
    };
    let err = try_sql(
        &mut conn,
        &cas_execution(PRODUCER, "producer", "ex-1", 2, Some(&at_2), &at_3),
    )
    .await
    .unwrap_err();
    assert!(err.contains("holds no write grant in force"), "{err}");
    let err = as_producer
        .set_current_subject(&producer, "ex-1", Some(&at_2), &d3)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no write grant"), "{err}");
    conn.close().await.unwrap();
    nothing_appended(&t, seq).await;
    drop(as_producer);
    t.cleanup().await;
}

/// `audit verify` recomputes every principal's identity: one recorded for a principal that is
/// not stored, or a principal's role made a member of another group role, is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_checks_the_identities() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    let verifier = verdict_store::principal_db_role(&t.prefix, &t.db, VERIFIER);
    t.raw(&format!("GRANT \"{}operator\" TO \"{verifier}\"", t.prefix))
        .await
        .unwrap();
    t.tamper(
        "principal_roles",
        &format!(
            "INSERT INTO verdict.principal_roles (db_role, principal, role) VALUES ('{}p_forged', 'ghost', 'operator')",
            t.prefix
        ),
    )
    .await;
    let report = t.store.verify_audit(None).await.unwrap();
    let found = |what: &str| {
        report
            .problems
            .iter()
            .any(|p| format!("{p:?}").contains(what))
    };
    assert!(found("ghost"), "{:#?}", report.problems);
    assert!(
        found(&format!("identity {verifier} is a member")),
        "{:#?}",
        report.problems
    );
    t.cleanup().await;
}

/// A runner whose grant was revoked files evidence by hand, a human with no grant records a
/// decision, a producer with no grant puts a subject or a request: each routine refuses, at the
/// database's clock, and nothing is appended. With a grant in force the same calls go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_need_a_grant_are_refused_without_one_in_force() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    revoke(t.store.as_ref(), "g-runner").await;
    let mut conns = vec![
        principal_login(&t, RUNNER, Role::Runner).await.0,
        principal_login(&t, HUMAN, Role::Human).await.0,
        principal_login(&t, PRODUCER, Role::Producer).await.0,
    ];
    let seq = head_seq(&t).await;
    let mut decision = human(&s, &p);
    decision["id"] = json!("hd-granted");
    // Not the request populate stored: a stored key is returned as it is, with no check.
    let mut fresh_request = request(&s);
    fresh_request["classes"] = json!(["reviewer", "security"]);
    // (which login, the two calls of one write)
    let cases = [
        (
            0,
            put_calls(
                Table::CheckEvidence,
                RUNNER,
                "runner",
                &evidence(&s, "ev-late"),
            ),
        ),
        (
            1,
            put_calls(Table::HumanDecisions, HUMAN, "human", &decision),
        ),
        (
            2,
            put_calls(Table::Subjects, PRODUCER, "producer", &subject("ex-1", 2)),
        ),
        (
            2,
            put_calls(
                Table::VerificationRequests,
                PRODUCER,
                "producer",
                &fresh_request,
            ),
        ),
    ];
    for (which, calls) in &cases {
        for sql in calls {
            let err = try_sql(&mut conns[*which], sql).await.expect_err(sql);
            assert!(
                err.contains("holds no write grant in force"),
                "{sql}: {err}"
            );
        }
    }
    nothing_appended(&t, seq).await;
    // With grants in force, the same calls are taken.
    grant_write(t.store.as_ref(), "g-runner-2", RUNNER, "ex-1").await;
    grant_write(t.store.as_ref(), "g-alice", HUMAN, "ex-1").await;
    grant_write(t.store.as_ref(), "g-coder-ex1", PRODUCER, "ex-1").await;
    // The subject names mission m-17, which needs a write grant on it (schema 31).
    grant_mission_write(t.store.as_ref(), "g-coder-m17", PRODUCER, "m-17").await;
    let seq = head_seq(&t).await;
    for (which, calls) in &cases {
        try_sql(&mut conns[*which], &calls[0]).await.unwrap();
    }
    assert_eq!(head_seq(&t).await, seq + 4);
    for conn in conns {
        conn.close().await.unwrap();
    }
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// An operator's own login writes as the engine's principal (whose notes count as the
/// engine's), or becomes the engine's, the gate's or the system's identity: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_login_cannot_write_as_the_engine_the_gate_or_the_system() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, _) = principal_login(&t, OPERATOR, Role::Operator).await;
    let seq = head_seq(&t).await;
    let note = json!({"schema": "verdict.cancellation/v1", "subject_digest": d("s")});
    for sql in put_calls(
        Table::VerificationRequests,
        "verdict-engine",
        "operator",
        &note,
    ) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(
            err.contains("does not act for principal verdict-engine"),
            "{sql}: {err}"
        );
    }
    for builtin in ["engine", "gate", "system"] {
        let err = try_sql(&mut conn, &format!("SET ROLE \"{}{builtin}\"", t.prefix))
            .await
            .unwrap_err();
        assert!(err.contains("permission denied"), "{builtin}: {err}");
    }
    conn.close().await.unwrap();
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// Every principal group role could read every table, the principals' bodies and so their
/// token hashes included (schema version 10 takes that table from them). A runner's own login,
/// and an operator's, is refused the principals' rows; a store opened through the runner's
/// login still authenticates a token and looks principals up by name and lists them, without
/// any hash; the service login still reads the rows, as `audit verify` needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_login_reads_no_token_hash_yet_authenticates() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    let (mut as_runner, runner_login) = principal_login(&t, RUNNER, Role::Runner).await;
    let (mut as_operator, _) = principal_login(&t, OPERATOR, Role::Operator).await;
    for conn in [&mut as_runner, &mut as_operator] {
        for sql in [
            "SELECT body FROM verdict.principals",
            "SELECT token_sha256 FROM verdict.principals",
            "SELECT name FROM verdict.principals",
        ] {
            let err = try_sql(conn, sql).await.unwrap_err();
            assert!(err.contains("permission denied"), "{sql}: {err}");
        }
        // The routines give a row only for a hash the caller already holds, and names and
        // roles without any hash.
        let found: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM verdict.principal_by_token($1) WHERE r_key = $2",
        )
        .bind(token_sha256("token-1").as_str())
        .bind(VERIFIER)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(found, 1);
        let listed: Vec<String> =
            sqlx::query_scalar("SELECT r_name FROM verdict.principal_entries(NULL, 0, 100)")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        assert!(listed.iter().any(|n| n == VERIFIER), "{listed:?}");
    }
    // Offering another body under a stored principal's name gives no body back: the write
    // routines used to return the stored row, token hash and all.
    let guess = json!({"name": VERIFIER, "role": "verifier",
                       "token_sha256": token_sha256("a-guess").as_str()});
    let [one, batch, write] = put_calls(Table::Principals, OPERATOR, "operator", &guess);
    for sql in [one, batch] {
        let sql = sql.replacen("SELECT r_seq", "SELECT count(r_body)", 1);
        let bodies: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut as_operator)
            .await
            .unwrap();
        assert_eq!(bodies, 0);
    }
    // The one-statement write settles the row itself and refuses the conflict, naming the
    // stored row's digest (as the routines answer it) and nothing of its body.
    let (code, err) = try_sql_state(&mut as_operator, &write).await.unwrap_err();
    assert_eq!(code, "VRW01", "{err}");
    assert!(!err.contains(token_sha256("token-1").as_str()), "{err}");
    let err = t
        .store
        .add_principal(
            &Actor::new(OPERATOR, Role::Operator),
            &PrincipalRecord {
                name: VERIFIER.parse().unwrap(),
                role: Role::Verifier,
                token_sha256: token_sha256("a-guess"),
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, verdict_store::StoreError::Conflict { .. }),
        "{err}"
    );
    as_runner.close().await.unwrap();
    as_operator.close().await.unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let as_runner = verdict_store::open_with(
        &Location::Postgres(url.replacen("postgres@", &format!("{runner_login}@"), 1)),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 2,
        },
    )
    .await
    .unwrap();
    let me = as_runner
        .principal_by_token_hash(&token_sha256(&format!("token-of-{RUNNER}")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((me.name.as_str(), me.role), (RUNNER, Role::Runner));
    assert!(
        as_runner
            .principal_by_token_hash(&token_sha256("no-such-token"))
            .await
            .unwrap()
            .is_none()
    );
    let verifier = as_runner.principal(VERIFIER).await.unwrap().unwrap();
    assert_eq!(verifier.role, Role::Verifier);
    assert!(as_runner.principal("nobody").await.unwrap().is_none());
    let all = as_runner.principals(0, 100).await.unwrap();
    assert!(all.iter().any(|p| p.name.as_str() == RUNNER), "{all:?}");
    // Reading rows of the principals table through the runner's login is refused too.
    let err = as_runner.rows(Table::Principals, 0, 10).await.unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    drop(as_runner);
    // The service login reads the rows itself: `audit verify` re-hashes every one.
    let service = format!("{}svc_reader", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{service}\" LOGIN IN ROLE \"{}service\"",
        t.prefix
    ))
    .await
    .unwrap();
    let mut as_service =
        sqlx::PgConnection::connect(&url.replacen("postgres@", &format!("{service}@"), 1))
            .await
            .unwrap();
    try_sql(&mut as_service, "SELECT body FROM verdict.principals")
        .await
        .unwrap();
    as_service.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema version 11, by hand through principals' own logins: a verifier appends a run and its
/// note only admitting itself, under a grant in force; a producer ends a run only as
/// `cancelled`, only once it has itself recorded cancelling the run's execution. Each refusal
/// appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_logins_admit_only_themselves_and_end_only_runs_of_what_they_cancelled() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let s = subject_digest(&subject("ex-1", 1));
    // Since schema 13 a verifier admits itself only under a request as the engine writes it.
    let p = current_policy(&t).await;
    let req = t
        .store
        .put(
            &Actor::new(OPERATOR, Role::Operator),
            DocKind::Request,
            &engine_request(&s, 1, &p, None),
        )
        .await
        .unwrap()
        .digest;
    let admission = |verifier: &str, run: &str| {
        json!({"run_id": run, "request_digest": req.as_str(), "subject_digest": s.as_str(),
               "verifier": verifier, "class": "reviewer", "admitted_generation": 1})
    };
    let note = |verifier: &str, run: &str| {
        json!({"schema": "verdict.admission/v1", "run_id": run, "request_digest": req.as_str(),
               "subject_digest": s.as_str(), "generation": 1, "verifier": verifier,
               "class": "reviewer", "preflight": {"outcome": "pass", "skipped": false, "reasons": []}})
    };
    let (mut rev, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    let seq = head_seq(&t).await;
    let refused = [
        // Another verifier's admission; its own without a grant; a note naming another; a
        // request; an engine note of another kind.
        (
            put_calls(
                Table::VerifierRuns,
                "reviewer-2",
                "verifier",
                &admission(VERIFIER, "vrun-9"),
            ),
            "may admit only itself",
        ),
        (
            put_calls(
                Table::VerifierRuns,
                "reviewer-2",
                "verifier",
                &admission("reviewer-2", "vrun-9"),
            ),
            "may admit only itself",
        ),
        (
            put_calls(
                Table::VerificationRequests,
                "reviewer-2",
                "verifier",
                &note(VERIFIER, "vrun-9"),
            ),
            "only the note of its own admission",
        ),
        (
            put_calls(
                Table::VerificationRequests,
                "reviewer-2",
                "verifier",
                &request(&s),
            ),
            "only the note of its own admission",
        ),
        (
            put_calls(
                Table::VerificationRequests,
                "reviewer-2",
                "verifier",
                &json!({"schema": "verdict.cancellation/v1", "subject_digest": s.as_str(), "verifier": "reviewer-2"}),
            ),
            "only the note of its own admission",
        ),
    ];
    for (calls, why) in &refused {
        for sql in calls {
            let err = try_sql(&mut rev, sql).await.unwrap_err();
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    nothing_appended(&t, seq).await;
    // With a grant in force it admits itself, run and note (in one transaction, as the store
    // writes them: since schema 13 the note needs its run stored in the same transaction).
    grant_write(t.store.as_ref(), "g-rev-2", "reviewer-2", "ex-1").await;
    let seq = head_seq(&t).await;
    let [run_one, ..] = put_calls(
        Table::VerifierRuns,
        "reviewer-2",
        "verifier",
        &admission("reviewer-2", "vrun-9"),
    );
    let [note_one, ..] = put_calls(
        Table::VerificationRequests,
        "reviewer-2",
        "verifier",
        &note("reviewer-2", "vrun-9"),
    );
    try_sql(&mut rev, &format!("BEGIN; {run_one}; {note_one}; COMMIT"))
        .await
        .unwrap();
    assert_eq!(head_seq(&t).await, seq + 2);
    rev.close().await.unwrap();

    // The producer of ex-1 ends the run only once it has recorded cancelling ex-1 itself.
    grant_write(t.store.as_ref(), "g-coder-ex1", PRODUCER, "ex-1").await;
    let (mut coder, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let cancelled = json!({"run_id": "vrun-9", "n": 1, "status": "cancelled"});
    let started = json!({"run_id": "vrun-9", "n": 1, "status": "started"});
    let seq = head_seq(&t).await;
    for sql in put_calls(Table::RunEvents, PRODUCER, "producer", &cancelled) {
        let err = try_sql(&mut coder, &sql).await.unwrap_err();
        assert!(err.contains("may only cancel a run"), "{sql}: {err}");
    }
    nothing_appended(&t, seq).await;
    let record = json!({
        "schema": "verdict.cancellation/v1", "cancelled": {"kind": "execution", "id": "ex-1"},
        "subject_digest": s.as_str(), "by": {"principal": PRODUCER, "role": "producer"},
        "reason": "withdrawn", "at": "2026-11-30T12:00:00Z"
    });
    let [one, ..] = put_calls(Table::VerificationRequests, PRODUCER, "producer", &record);
    try_sql(&mut coder, &one).await.unwrap();
    for sql in put_calls(Table::RunEvents, PRODUCER, "producer", &started) {
        let err = try_sql(&mut coder, &sql).await.unwrap_err();
        assert!(err.contains("may only cancel a run"), "{sql}: {err}");
    }
    let [one, ..] = put_calls(Table::RunEvents, PRODUCER, "producer", &cancelled);
    try_sql(&mut coder, &one).await.unwrap();
    coder.close().await.unwrap();
    let run = t.store.run("vrun-9").await.unwrap().unwrap();
    assert_eq!(run.status(), Some(verdict_store::RunStatus::Cancelled));
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// A request as the engine writes it (`verdict.request/v1`) for `subject` at `generation`, under
/// gate `merge` pinning `policy`, asking for class `reviewer`, with a run cap when given.
fn engine_request(
    subject: &verdict_core::digest::Digest,
    generation: u64,
    policy: &str,
    max_runs: Option<u32>,
) -> serde_json::Value {
    let budget = max_runs.map_or_else(|| json!({}), |n| json!({"max_runs": n}));
    json!({
        "schema": "verdict.request/v1", "execution": "ex-1", "subject_digest": subject.as_str(),
        "generation": generation, "gate": "merge", "policy_digest": policy,
        "verifier_classes": ["reviewer"], "prior_blockers": [], "risk_class": "low",
        "budget": budget
    })
}

async fn job_count(t: &TestStore) -> usize {
    t.store
        .queue()
        .jobs(&verdict_store::JobFilter::default())
        .await
        .unwrap()
        .len()
}

/// Schema 20: the queue's routines, called by hand, take from a producer's login only jobs of
/// its own subject's stored requests, with no deadline past and the classes the request asks
/// for; and a lease of at most a day from a worker's. Each refusal queues nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_takes_from_a_login_only_what_its_caller_may_queue() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s = subject_digest(&subject("ex-1", 1));
    let p = current_policy(&t).await;
    let request = t
        .store
        .put(&op, DocKind::Request, &engine_request(&s, 1, &p, None))
        .await
        .unwrap()
        .digest
        .to_string();
    let (mut own, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let (mut other, _) = principal_login(&t, "coder-2", Role::Producer).await;
    let enqueue = |who: &str, jobs: &[(&str, &str, &str, &str)]| {
        let list = |i: usize| {
            jobs.iter()
                .map(|j| [j.0, j.1, j.2, j.3][i].to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "SELECT id FROM verdict.job_enqueue('{who}', 'producer', ARRAY[{}]::text[], ARRAY[{}]::text[], ARRAY[{}]::text[], ARRAY[{}]::bigint[])",
            list(0),
            list(1),
            list(2),
            list(3)
        )
    };
    let r = format!("'{request}'");
    let before = job_count(&t).await;
    let held = "may queue only jobs with no deadline past";
    for (mine, who, jobs) in [
        // Another producer, for this producer's request.
        (false, "coder-2", vec![("'gate'", r.as_str(), "''", "NULL")]),
        // A request that is not stored.
        (
            true,
            PRODUCER,
            vec![("'gate'", "'sha256:0000'", "''", "NULL")],
        ),
        // A deadline already past.
        (true, PRODUCER, vec![("'gate'", r.as_str(), "''", "-1")]),
        // A class the request does not ask for, and a verify job with none.
        (
            true,
            PRODUCER,
            vec![("'verify'", r.as_str(), "'security'", "NULL")],
        ),
        (true, PRODUCER, vec![("'verify'", r.as_str(), "''", "NULL")]),
        // A checks job with a class.
        (
            true,
            PRODUCER,
            vec![("'checks'", r.as_str(), "'x'", "NULL")],
        ),
    ] {
        let conn = if mine { &mut own } else { &mut other };
        let err = try_sql(conn, &enqueue(who, &jobs)).await.unwrap_err();
        assert!(err.contains(held), "{jobs:?}: {err}");
    }
    assert_eq!(
        job_count(&t).await,
        before,
        "a refused enqueue queued something"
    );
    // The request's own jobs, by its producer.
    try_sql(
        &mut own,
        &enqueue(
            PRODUCER,
            &[
                ("'checks'", r.as_str(), "''", "NULL"),
                ("'verify'", r.as_str(), "'reviewer'", "NULL"),
                ("'gate'", r.as_str(), "''", "3600000"),
            ],
        ),
    )
    .await
    .unwrap();
    assert_eq!(job_count(&t).await, before + 3);

    // A lease longer than a day, taken or renewed by hand: refused.
    let (mut runner, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let err = try_sql(
        &mut runner,
        &format!("SELECT id FROM verdict.job_claim('{RUNNER}', 'runner', 'checks', 'h', 86400001)"),
    )
    .await
    .unwrap_err();
    assert!(err.contains("is not 1 ms to a day"), "{err}");
    let claimed = t
        .store
        .queue()
        .jobs(&verdict_store::JobFilter::default())
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.kind == verdict_store::JobKind::Checks)
        .unwrap();
    assert_eq!(claimed.state, verdict_store::JobState::Ready);
    try_sql(
        &mut runner,
        &format!("SELECT id FROM verdict.job_claim('{RUNNER}', 'runner', 'checks', 'h', 86400000)"),
    )
    .await
    .unwrap();
    let err = try_sql(
        &mut runner,
        &format!(
            "SELECT id FROM verdict.job_heartbeat('{RUNNER}', 'runner', {}, 1, 86400001)",
            claimed.id
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("is not 1 ms to a day"), "{err}");
    for conn in [own, other, runner] {
        conn.close().await.unwrap();
    }
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// The run and the admission note of `verifier` for run `run` under `request`.
fn self_admission(
    verifier: &str,
    run: &str,
    request: &str,
    subject: &str,
    generation: u64,
    class: &str,
) -> (serde_json::Value, serde_json::Value) {
    (
        json!({"run_id": run, "request_digest": request, "subject_digest": subject,
               "verifier": verifier, "class": class, "admitted_generation": generation}),
        json!({"schema": "verdict.admission/v1", "run_id": run, "request_digest": request,
               "subject_digest": subject, "generation": generation, "verifier": verifier,
               "class": class, "preflight": {"outcome": "pass", "skipped": false, "reasons": []}}),
    )
}

/// The current policy of gate `merge` after `populate`.
async fn current_policy(t: &TestStore) -> String {
    let op = Actor::new(OPERATOR, Role::Operator);
    t.store
        .put(&op, DocKind::Policy, &policy(4))
        .await
        .unwrap()
        .digest
        .to_string()
}

/// Schema 13: a verifier's own login admitting itself by hand is held to what the engine
/// checks of an admission: a stored engine request for the run's subject that asks for the
/// run's class, the execution's current subject at the run's generation, the gate's current
/// policy, and the request's run cap (counted under the chain lock); its note only with its own
/// run in the same transaction. Every refusal appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifiers_own_admission_is_held_to_its_request_cap_and_current_subject() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s = subject_digest(&subject("ex-1", 1));
    let p = current_policy(&t).await;
    // A later subject of ex-1, stored but never made current.
    let s2 = t
        .store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &subject("ex-1", 2),
        )
        .await
        .unwrap()
        .digest;
    let mut stored = Vec::new();
    for doc in [
        engine_request(&s, 1, &p, Some(1)),
        engine_request(&s2, 2, &p, None),
        engine_request(&s, 1, &d("an-older-policy"), None),
        request(&s),
    ] {
        let row = t.store.put(&op, DocKind::Request, &doc).await.unwrap();
        stored.push(row.digest.to_string());
    }
    let [capped, stale, old_policy, not_engine] = <[String; 4]>::try_from(stored).unwrap();
    let (mut rev, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    grant_write(t.store.as_ref(), "g-rev-2", "reviewer-2", "ex-1").await;
    let seq = head_seq(&t).await;
    let held = "may admit itself only under a stored request";
    for (run, why) in [
        // A class the request does not ask for.
        (
            self_admission("reviewer-2", "vrun-a", &capped, s.as_str(), 1, "security").0,
            held,
        ),
        // A request for a subject that is not the execution's current one.
        (
            self_admission("reviewer-2", "vrun-a", &stale, s2.as_str(), 2, "reviewer").0,
            held,
        ),
        // A request pinning a policy that is not the gate's current one.
        (
            self_admission(
                "reviewer-2",
                "vrun-a",
                &old_policy,
                s.as_str(),
                1,
                "reviewer",
            )
            .0,
            held,
        ),
        // A document of the requests table that is no engine request.
        (
            self_admission(
                "reviewer-2",
                "vrun-a",
                &not_engine,
                s.as_str(),
                1,
                "reviewer",
            )
            .0,
            held,
        ),
        // Another generation than the subject's.
        (
            self_admission("reviewer-2", "vrun-a", &capped, s.as_str(), 2, "reviewer").0,
            held,
        ),
    ] {
        for sql in put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run) {
            let err = try_sql(&mut rev, &sql).await.unwrap_err();
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    // A note with no run of its own stored in the same transaction.
    let (run, note) = self_admission("reviewer-2", "vrun-a", &capped, s.as_str(), 1, "reviewer");
    for sql in put_calls(Table::VerificationRequests, "reviewer-2", "verifier", &note) {
        let err = try_sql(&mut rev, &sql).await.unwrap_err();
        assert!(err.contains("only with its own run"), "{sql}: {err}");
    }
    // Nor with its run committed on its own before.
    let [run_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run);
    let [note_one, ..] = put_calls(Table::VerificationRequests, "reviewer-2", "verifier", &note);
    nothing_appended(&t, seq).await;
    try_sql(&mut rev, &run_one).await.unwrap();
    let err = try_sql(&mut rev, &note_one).await.unwrap_err();
    assert!(err.contains("only with its own run"), "{err}");
    assert_eq!(head_seq(&t).await, seq + 1);

    // The cap of one run is used up: another run under the request is refused, however it
    // is sent, and so is its note.
    let (run_b, note_b) =
        self_admission("reviewer-2", "vrun-b", &capped, s.as_str(), 1, "reviewer");
    for sql in put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run_b) {
        let err = try_sql(&mut rev, &sql).await.unwrap_err();
        assert!(
            err.contains("admitted all the runs its budget allows"),
            "{sql}: {err}"
        );
    }
    let [run_b_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run_b);
    let [note_b_one, ..] = put_calls(
        Table::VerificationRequests,
        "reviewer-2",
        "verifier",
        &note_b,
    );
    let err = try_sql(
        &mut rev,
        &format!("BEGIN; {run_b_one}; {note_b_one}; COMMIT"),
    )
    .await
    .unwrap_err();
    assert!(err.contains("admitted all the runs"), "{err}");
    try_sql(&mut rev, "ROLLBACK").await.unwrap();
    nothing_appended(&t, seq + 1).await;

    // Under a request with no cap, the run and its note in one transaction are stored.
    let open = t
        .store
        .put(&op, DocKind::Request, &engine_request(&s, 1, &p, None))
        .await
        .unwrap()
        .digest
        .to_string();
    let (run_c, note_c) = self_admission("reviewer-2", "vrun-c", &open, s.as_str(), 1, "reviewer");
    let [run_c_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run_c);
    let [note_c_one, ..] = put_calls(
        Table::VerificationRequests,
        "reviewer-2",
        "verifier",
        &note_c,
    );
    let seq = head_seq(&t).await;
    try_sql(
        &mut rev,
        &format!("BEGIN; {run_c_one}; {note_c_one}; COMMIT"),
    )
    .await
    .unwrap();
    assert_eq!(head_seq(&t).await, seq + 2);
    rev.close().await.unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Schema 13: the gate's own identity stores a decision only together with its evaluation
/// record (same evaluation key, subject and policy) written in the same transaction, and claims
/// gate jobs only under a stored operator's name. Each refusal appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_login_stores_a_decision_only_with_its_evaluation_record() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "op-1", Role::Operator).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p: verdict_core::digest::Digest = current_policy(&t).await.parse().unwrap();
    let login = format!("{}gate_login", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}gate\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    let mut gate = sqlx::PgConnection::connect(&url).await.unwrap();
    try_sql(&mut gate, &format!("SET ROLE \"{}gate\"", t.prefix))
        .await
        .unwrap();
    let key = d("forged");
    let forged = decision(&s, &p, &key, "pass");
    let seq = head_seq(&t).await;
    let refused = "only with its evaluation record";
    // A decision alone.
    for sql in put_calls(Table::GateDecisions, "op-1", "gate", &forged) {
        let err = try_sql(&mut gate, &sql).await.unwrap_err();
        assert!(err.contains(refused), "{sql}: {err}");
    }
    // With a record of the same key for another subject, or under another policy.
    let [decision_one, decision_batch, decision_write] =
        put_calls(Table::GateDecisions, "op-1", "gate", &forged);
    let other_subject: verdict_core::digest::Digest = d("other-subject").parse().unwrap();
    let other_policy: verdict_core::digest::Digest = d("other-policy").parse().unwrap();
    for record in [
        evaluation(&other_subject, &p, &key),
        evaluation(&s, &other_policy, &key),
    ] {
        let [record_one, ..] = put_calls(Table::GateEvaluations, "op-1", "gate", &record);
        for sql in [&decision_one, &decision_batch, &decision_write] {
            let err = try_sql(&mut gate, &format!("BEGIN; {record_one}; {sql}; COMMIT"))
                .await
                .unwrap_err();
            assert!(err.contains(refused), "{sql}: {err}");
            try_sql(&mut gate, "ROLLBACK").await.unwrap();
        }
    }
    nothing_appended(&t, seq).await;
    // With its record committed on its own before: not the same transaction.
    let [record_one, ..] = put_calls(
        Table::GateEvaluations,
        "op-1",
        "gate",
        &evaluation(&s, &p, &key),
    );
    try_sql(&mut gate, &record_one).await.unwrap();
    for sql in [&decision_one, &decision_batch] {
        let err = try_sql(&mut gate, sql).await.unwrap_err();
        assert!(err.contains(refused), "{sql}: {err}");
    }
    nothing_appended(&t, seq + 1).await;
    // Its record and the decision in one transaction, as the engine writes them, are stored.
    let key2 = d("key-2");
    let [record2, ..] = put_calls(
        Table::GateEvaluations,
        "op-1",
        "gate",
        &evaluation(&s, &p, &key2),
    );
    let [decision2, ..] = put_calls(
        Table::GateDecisions,
        "op-1",
        "gate",
        &decision(&s, &p, &key2, "pass"),
    );
    try_sql(&mut gate, &format!("BEGIN; {record2}; {decision2}; COMMIT"))
        .await
        .unwrap();
    assert_eq!(head_seq(&t).await, seq + 3);

    // Gate jobs only under a stored operator's name: not a name no principal has, nor a
    // verifier's.
    for name in ["mallory", VERIFIER] {
        let err = try_sql(
            &mut gate,
            &format!("SELECT * FROM verdict.job_claim('{name}', 'gate', 'gate', 'h-1', 60000)"),
        )
        .await
        .unwrap_err();
        assert!(
            err.contains("only under a stored operator's name"),
            "{name}: {err}"
        );
    }
    try_sql(
        &mut gate,
        "SELECT * FROM verdict.job_claim('op-1', 'gate', 'gate', 'h-1', 60000)",
    )
    .await
    .unwrap();
    gate.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema 13: giving a principal a login of its own appends, in the same transaction, a note
/// (`verdict.db-login/v1`) written by the operator who gave it, naming the principal and its
/// database identity; given by hand through the operator's own login too. No login is given
/// without its note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_given_is_recorded_in_the_audit_chain() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "op-1", Role::Operator).await;
    register(t.store.as_ref(), PRODUCER, Role::Producer).await;
    let seq = head_seq(&t).await;
    let given = t
        .store
        .give_login(&Actor::new("op-1", Role::Operator), VERIFIER)
        .await
        .unwrap();
    let note_of = |event: &verdict_store::AuditEvent| {
        assert_eq!(
            (
                event.table.as_str(),
                event.principal.as_str(),
                event.role.as_str()
            ),
            ("verification_requests", "op-1", "operator")
        );
        event
            .payload_digest
            .parse::<verdict_core::digest::Digest>()
            .unwrap()
    };
    let events = t.store.audit_events(seq, 10).await.unwrap();
    assert_eq!(events.len(), 1, "{events:#?}");
    let row = t
        .store
        .get(DocKind::Request, &note_of(&events[0]))
        .await
        .unwrap()
        .unwrap();
    let note: verdict_store::LoginNote = row.decode().unwrap();
    assert_eq!(note.schema, verdict_store::LOGIN_NOTE_SCHEMA);
    assert_eq!(note.principal.as_str(), VERIFIER);
    assert_eq!(note.db_role, given.user);
    assert_eq!(note.by.principal.as_str(), "op-1");

    // By hand, through the operator's own login: the note comes with the login.
    let (mut op, _) = principal_login(&t, "op-1", Role::Operator).await;
    let seq = head_seq(&t).await;
    try_sql(
        &mut op,
        &format!(
            "SELECT verdict.principal_login('op-1', 'operator', '{PRODUCER}', repeat('x', 40))"
        ),
    )
    .await
    .unwrap();
    op.close().await.unwrap();
    let events = t.store.audit_events(seq, 10).await.unwrap();
    assert_eq!(events.len(), 1, "{events:#?}");
    let row = t
        .store
        .get(DocKind::Request, &note_of(&events[0]))
        .await
        .unwrap()
        .unwrap();
    let note: verdict_store::LoginNote = row.decode().unwrap();
    assert_eq!(note.principal.as_str(), PRODUCER);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// The password verifier PostgreSQL keeps for `login` (read as the superuser): the test server
/// trusts every connection, so what shows that a password was replaced is what it keeps.
async fn password_of(t: &TestStore, login: &str) -> Option<String> {
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar("SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1")
        .bind(login)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

/// The login notes appended since `seq`, as (schema, principal, operator).
async fn login_notes_since(t: &TestStore, seq: u64) -> Vec<(String, String, String)> {
    let mut notes = Vec::new();
    for e in t.store.audit_events(seq, 100).await.unwrap() {
        let digest = e
            .payload_digest
            .parse::<verdict_core::digest::Digest>()
            .unwrap();
        let row = t
            .store
            .get(DocKind::Request, &digest)
            .await
            .unwrap()
            .unwrap();
        let note: verdict_store::LoginNote = row.decode().unwrap();
        notes.push((
            note.schema,
            note.principal.to_string(),
            note.by.principal.to_string(),
        ));
    }
    notes
}

/// Schema 42: a password that leaked is replaced by giving the login again, and a login is
/// taken back; either way every session opened with what the identity had before is ended once
/// the change commits, and the change is recorded by a note of the operator who made it. Only
/// an operator may do either: a producer's own login calling the routines by hand is refused,
/// ends nothing and appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_given_again_or_taken_back_leaves_no_session_of_the_old_one() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "op-1", Role::Operator).await;
    let op = Actor::new("op-1", Role::Operator);
    let first = t.store.give_login(&op, VERIFIER).await.unwrap();
    let kept = password_of(&t, &first.user).await;
    assert!(kept.is_some());
    let mut leaked = sqlx::PgConnection::connect(&first.url).await.unwrap();
    try_sql(&mut leaked, "SELECT 1").await.unwrap();

    // An operator's own login cannot end the sessions of a login in use by hand: only those
    // of a login taken back, which its note records.
    let (mut own, _) = principal_login(&t, "op-1", Role::Operator).await;
    let (code, message) = try_sql_state(
        &mut own,
        &format!("SELECT verdict.principal_sessions_end('op-1', 'operator', '{VERIFIER}')"),
    )
    .await
    .unwrap_err();
    assert_eq!(code, "55000", "{message}");
    own.close().await.unwrap();
    try_sql(&mut leaked, "SELECT 1").await.unwrap();

    // Given again: taken back, its sessions ended, then given with a new password.
    let seq = head_seq(&t).await;
    let again = t.store.give_login(&op, VERIFIER).await.unwrap();
    assert_eq!(again.user, first.user);
    assert_ne!(again.password, first.password);
    assert_ne!(password_of(&t, &first.user).await, kept);
    assert!(
        try_sql(&mut leaked, "SELECT 1").await.is_err(),
        "the old session is open"
    );
    let note = |schema: &str| (schema.to_owned(), VERIFIER.to_owned(), "op-1".to_owned());
    assert_eq!(
        login_notes_since(&t, seq).await,
        [
            note(verdict_store::LOGIN_TAKEN_NOTE_SCHEMA),
            note(verdict_store::LOGIN_NOTE_SCHEMA)
        ]
    );

    // Not an operator's to do: refused by the database, nothing ended, nothing appended.
    let mut open = sqlx::PgConnection::connect(&again.url).await.unwrap();
    let (mut producer, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let seq = head_seq(&t).await;
    for sql in [
        format!("SELECT verdict.principal_login('{PRODUCER}', 'producer', '{VERIFIER}', NULL)"),
        format!("SELECT verdict.principal_sessions_end('{PRODUCER}', 'producer', '{VERIFIER}')"),
        format!("SELECT verdict.principal_sessions_end('op-1', 'operator', '{VERIFIER}')"),
    ] {
        let (code, message) = try_sql_state(&mut producer, &sql).await.unwrap_err();
        assert_eq!(code, "42501", "{sql}: {message}");
    }
    producer.close().await.unwrap();
    assert_eq!(head_seq(&t).await, seq);
    try_sql(&mut open, "SELECT 1").await.unwrap();

    let taken = t.store.take_login(&op, VERIFIER).await.unwrap();
    assert_eq!(
        (taken.user.as_str(), taken.sessions_left),
        (first.user.as_str(), 0)
    );
    assert!(
        try_sql(&mut open, "SELECT 1").await.is_err(),
        "the session is open"
    );
    let refused = sqlx::PgConnection::connect(&again.url).await.unwrap_err();
    assert!(
        refused.to_string().contains("not permitted to log in"),
        "{refused}"
    );
    assert_eq!(password_of(&t, &first.user).await, None);
    assert_eq!(
        login_notes_since(&t, seq).await,
        [note(verdict_store::LOGIN_TAKEN_NOTE_SCHEMA)]
    );
    // Taken back again: nothing to record, nothing left open.
    let seq = head_seq(&t).await;
    let taken = t.store.take_login(&op, VERIFIER).await.unwrap();
    assert_eq!(taken.sessions_left, 0);
    assert_eq!(head_seq(&t).await, seq);
    // Only the login: the principal still authenticates by its token, and a login given
    // again opens connections.
    assert!(t.store.principal(VERIFIER).await.unwrap().is_some());
    let back = t.store.give_login(&op, VERIFIER).await.unwrap();
    sqlx::PgConnection::connect(&back.url)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let e = t
        .store
        .take_login(&Actor::new(PRODUCER, Role::Producer), VERIFIER)
        .await
        .unwrap_err();
    assert!(
        matches!(e, verdict_store::StoreError::Forbidden { .. }),
        "{e}"
    );
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// A SQLite store has no logins to give or take back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_has_no_login_to_give_or_take() {
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let seq = head_seq(&t).await;
    let given = t.store.give_login(&op, VERIFIER).await.unwrap_err();
    let taken = t.store.take_login(&op, VERIFIER).await.unwrap_err();
    for e in [given, taken] {
        assert!(e.to_string().contains("no database logins"), "{e}");
    }
    assert_eq!(head_seq(&t).await, seq);
}

/// A login `<prefix><name>` as a deployment's service login has it: not a superuser, a member
/// of the service role and of the built-in identities. Returns its URL.
async fn service_login(t: &TestStore, name: &str) -> String {
    let login = format!("{}{name}", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{p}service\", \"{p}engine\", \"{p}gate\", \"{p}system\"",
        p = t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    url.replacen("postgres@", &format!("{login}@"), 1)
}

fn operator_record(name: &str) -> PrincipalRecord {
    PrincipalRecord {
        name: name.parse().unwrap(),
        role: Role::Operator,
        token_sha256: token_sha256(&format!("token-of-{name}")),
    }
}

/// Schema 14: the store's clock and first operator are written as that operator itself, not as
/// the engine's principal, through a service login that is no superuser; once the store holds
/// a principal, the same login (as itself, or as the engine's identity) cannot write another
/// "first" operator, and nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_operator_is_written_as_itself_and_only_on_an_empty_store() {
    let t = postgres().await;
    let url = service_login(&t, "svc_first").await;
    let store = verdict_store::open_with(
        &Location::Postgres(url.clone()),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 4,
        },
    )
    .await
    .unwrap();
    let first = Actor::new("first-op", Role::Operator);
    store
        .initialise(
            &first,
            verdict_store::StoreClock::System,
            &operator_record("first-op"),
        )
        .await
        .unwrap();
    let events = store.audit_events(0, 10).await.unwrap();
    let writers: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.principal.as_str(), e.role.as_str()))
        .collect();
    assert_eq!(writers, [("first-op", "operator"); 2]);

    let seq = head_seq(&t).await;
    let mallory = serde_json::to_value(operator_record("mallory")).unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for sql in put_calls(Table::Principals, "mallory", "operator", &mallory) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(
            err.contains("does not act for principal mallory"),
            "{sql}: {err}"
        );
    }
    try_sql(&mut conn, &format!("SET ROLE \"{}engine\"", t.prefix))
        .await
        .unwrap();
    // The engine's identity may call no routine at all (schema 19).
    for sql in put_calls(Table::Principals, "mallory", "operator", &mallory) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(err.contains("permission denied"), "{sql}: {err}");
    }
    conn.close().await.unwrap();
    let err = store
        .add_principal(
            &Actor::new("mallory", Role::Operator),
            &operator_record("mallory"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("does not act for principal mallory"),
        "{err}"
    );
    let err = store
        .establish_clock(
            &Actor::new("mallory", Role::Operator),
            verdict_store::StoreClock::Manual,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, verdict_store::StoreError::CasFailed { .. })
            || err.to_string().contains("chosen once"),
        "{err}"
    );
    nothing_appended(&t, seq).await;
    drop(store);
    t.cleanup().await;
}

/// On an empty store the routines take the first operator only as itself: a record naming
/// another principal, in another role, or two records at once, are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_store_takes_only_one_operator_naming_itself() {
    let t = postgres().await;
    let url = service_login(&t, "svc_empty").await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let ops = serde_json::to_value(operator_record("ops")).unwrap();
    let mut producer = ops.clone();
    producer["role"] = json!("producer");
    for (principal, role, doc) in [
        ("mallory", "operator", &ops),
        ("ops", "producer", &producer),
        ("ops", "operator", &producer),
    ] {
        for sql in put_calls(Table::Principals, principal, role, doc) {
            let err = try_sql(&mut conn, &sql).await.unwrap_err();
            assert!(err.contains("does not act for principal"), "{sql}: {err}");
        }
    }
    // Itself and another operator in one call.
    let parts = |doc: &serde_json::Value| {
        let body = canonical(doc);
        let digest =
            verdict_store::records::row_digest(Table::Principals.domain(), body.as_bytes());
        let key = verdict_store::records::key_of_value(Table::Principals, doc, &digest).unwrap();
        (key, digest.to_string(), body)
    };
    let ((k1, d1, b1), (k2, d2, b2)) = (
        parts(&ops),
        parts(&serde_json::to_value(operator_record("ops-2")).unwrap()),
    );
    let err = try_sql(
        &mut conn,
        &format!(
            "SELECT r_seq FROM verdict.put_principals('ops', 'operator', ARRAY['{k1}', '{k2}'], \
             ARRAY['{d1}', '{d2}'], ARRAY['{b1}', '{b2}'], ARRAY[NULL, NULL]::text[])"
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("does not act for principal"), "{err}");
    assert!(t.store.audit_head().await.unwrap().is_none());
    let [one, ..] = put_calls(Table::Principals, "ops", "operator", &ops);
    try_sql(&mut conn, &one).await.unwrap();
    conn.close().await.unwrap();
    assert_eq!(head_seq(&t).await, 1);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// The run and the admission note of `verifier` for run `run` under `request` at generation 1,
/// with preflight's verdict `skipped`.
fn admission_with(
    verifier: &str,
    run: &str,
    request: &str,
    subject: &str,
    skipped: bool,
) -> (serde_json::Value, serde_json::Value) {
    let (run_doc, mut note) = self_admission(verifier, run, request, subject, 1, "reviewer");
    note["preflight"] = if skipped {
        json!({"outcome": "rework", "skipped": true, "reasons": ["check_failed: unit-tests"]})
    } else {
        json!({"outcome": "pass", "skipped": false, "reasons": []})
    };
    (run_doc, note)
}

/// Schema 14: a verifier admitting itself by hand is held to preflight's stored verdict and to
/// the execution's cancellation. A note in which preflight decided needs its run ended in the
/// same transaction; a note saying preflight did not decide is refused while an operator's
/// note for the same request and generation says it did and no evidence came since; no run is
/// admitted on a cancelled execution, by a verifier or an operator. Each refusal appends
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifiers_own_admission_is_held_to_preflight_and_cancellation() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s = subject_digest(&subject("ex-1", 1));
    let p = current_policy(&t).await;
    let req = t
        .store
        .put(&op, DocKind::Request, &engine_request(&s, 1, &p, None))
        .await
        .unwrap()
        .digest
        .to_string();
    let (mut rev, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    grant_write(t.store.as_ref(), "g-rev-2", "reviewer-2", "ex-1").await;
    // An operator's admission in which preflight decided: its run is ended with it.
    let (run, note) = admission_with("reviewer-2", "vrun-p1", &req, s.as_str(), true);
    let admission: verdict_store::RunAdmission = serde_json::from_value(run).unwrap();
    t.store
        .admit_run_noted(&op, &admission, &note)
        .await
        .unwrap();
    let ended = t.store.run("vrun-p1").await.unwrap().unwrap();
    assert_eq!(ended.status(), Some(verdict_store::RunStatus::Cancelled));
    let by_hand = |run: &serde_json::Value, note: &serde_json::Value, end: bool| {
        let [run_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", run);
        let [note_one, ..] = put_calls(Table::VerificationRequests, "reviewer-2", "verifier", note);
        let end_one = if end {
            let event = json!({"run_id": run["run_id"], "n": 1, "status": "cancelled"});
            let [one, ..] = put_calls(Table::RunEvents, "reviewer-2", "verifier", &event);
            format!("{one};")
        } else {
            String::new()
        };
        format!("BEGIN; {run_one}; {note_one}; {end_one} COMMIT")
    };
    let seq = head_seq(&t).await;
    // Its own note saying preflight did not decide.
    let (run, note) = admission_with("reviewer-2", "vrun-p2", &req, s.as_str(), false);
    let err = try_sql(&mut rev, &by_hand(&run, &note, false))
        .await
        .unwrap_err();
    assert!(err.contains("preflight already decided"), "{err}");
    try_sql(&mut rev, "ROLLBACK").await.unwrap();
    // A note saying it decided, with the run left open.
    let (run, note) = admission_with("reviewer-2", "vrun-p3", &req, s.as_str(), true);
    let err = try_sql(&mut rev, &by_hand(&run, &note, false))
        .await
        .unwrap_err();
    assert!(err.contains("must end cancelled"), "{err}");
    nothing_appended(&t, seq).await;
    // Decided, and ended in the same transaction: stored.
    try_sql(&mut rev, &by_hand(&run, &note, true))
        .await
        .unwrap();
    assert_eq!(head_seq(&t).await, seq + 3);
    // New evidence about the subject: preflight may now decide otherwise, and the note is
    // taken.
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    t.store
        .put(
            &Actor::new(RUNNER, Role::Runner),
            DocKind::Evidence,
            &evidence(&s, "ev-after"),
        )
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let (run, note) = admission_with("reviewer-2", "vrun-p4", &req, s.as_str(), false);
    try_sql(&mut rev, &by_hand(&run, &note, false))
        .await
        .unwrap();
    assert_eq!(head_seq(&t).await, seq + 2);

    // The producer cancels ex-1: no run is admitted on it any more.
    register(t.store.as_ref(), PRODUCER, Role::Producer).await;
    grant_write(t.store.as_ref(), "g-coder-ex1", PRODUCER, "ex-1").await;
    let record = json!({
        "schema": "verdict.cancellation/v1", "cancelled": {"kind": "execution", "id": "ex-1"},
        "subject_digest": s.as_str(), "by": {"principal": PRODUCER, "role": "producer"},
        "reason": "withdrawn", "at": "2026-11-30T12:00:00Z"
    });
    t.store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Request,
            &record,
        )
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let (run, note) = admission_with("reviewer-2", "vrun-c1", &req, s.as_str(), false);
    let err = try_sql(&mut rev, &by_hand(&run, &note, false))
        .await
        .unwrap_err();
    assert!(err.contains("was cancelled"), "{err}");
    try_sql(&mut rev, "ROLLBACK").await.unwrap();
    for sql in put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run) {
        let err = try_sql(&mut rev, &sql).await.unwrap_err();
        assert!(err.contains("was cancelled"), "{sql}: {err}");
    }
    let admission: verdict_store::RunAdmission = serde_json::from_value(run).unwrap();
    let err = t
        .store
        .admit_run_noted(&op, &admission, &note)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("was cancelled"), "{err}");
    nothing_appended(&t, seq).await;
    rev.close().await.unwrap();
    t.cleanup().await;
}

/// Schema 14: the gate's identity stores a decision only under the name of a stored principal
/// that may gate: an operator, or a principal holding a grant in force on the decision's
/// execution. A name no principal has, or a stored verifier with no grant there, is refused,
/// with its evaluation record in the same transaction; nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_is_stored_only_under_the_name_of_one_who_may_gate() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "reviewer-3", Role::Verifier).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p: verdict_core::digest::Digest = current_policy(&t).await.parse().unwrap();
    let login = format!("{}gate_login", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}gate\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    let mut gate = sqlx::PgConnection::connect(&url).await.unwrap();
    try_sql(&mut gate, &format!("SET ROLE \"{}gate\"", t.prefix))
        .await
        .unwrap();
    let both = |name: &str, key: &str| {
        let [record, ..] = put_calls(
            Table::GateEvaluations,
            name,
            "gate",
            &evaluation(&s, &p, key),
        );
        let [decision, ..] = put_calls(
            Table::GateDecisions,
            name,
            "gate",
            &decision(&s, &p, key, "pass"),
        );
        format!("BEGIN; {record}; {decision}; COMMIT")
    };
    let seq = head_seq(&t).await;
    for (name, key) in [("mallory", "k-forged"), ("reviewer-3", "k-grantless")] {
        let err = try_sql(&mut gate, &both(name, &d(key))).await.unwrap_err();
        assert!(
            err.contains("only under the name of a stored operator"),
            "{name}: {err}"
        );
        try_sql(&mut gate, "ROLLBACK").await.unwrap();
    }
    nothing_appended(&t, seq).await;
    // A verifier holding a grant on ex-1 may run the gate, and so may a stored operator.
    try_sql(&mut gate, &both(VERIFIER, &d("k-verifier")))
        .await
        .unwrap();
    register(t.store.as_ref(), "op-1", Role::Operator).await;
    let seq = head_seq(&t).await;
    try_sql(&mut gate, &both("op-1", &d("k-operator")))
        .await
        .unwrap();
    assert_eq!(head_seq(&t).await, seq + 2);
    gate.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// The record a verifier's own login appends of run `run` of job `job` taken over, naming
/// `claimant` and the tokens.
fn takeover(
    claimant: &str,
    run: &str,
    subject: &str,
    job: i64,
    stale: i64,
    fencing: i64,
) -> serde_json::Value {
    json!({"schema": "verdict.run-takeover/v1", "run_id": run, "subject_digest": subject,
           "job": job, "stale_fencing": stale, "fencing": fencing,
           "taken_by": {"principal": claimant, "role": "verifier"},
           "reason": "its lease lapsed", "at": "2026-01-01T00:00:00Z"})
}

/// The record of a refused result of `run`.
fn refusal(run: &str, subject: &str) -> serde_json::Value {
    json!({"schema": "verdict.result-refusal/v1", "run_id": run, "subject_digest": subject,
           "result_digest": d("a refused result"), "reason": "invalid_output",
           "detail": "no row for tests-pass", "at": "2026-01-01T00:00:00Z"})
}

/// Schema 15: a verifier's own login records a verify job's runs only under the claim it holds.
/// It cannot record the takeover of a run of a job it does not hold, end another verifier's
/// run, nor record a refused result of another verifier's run (SQLSTATE 42501, nothing
/// appended); a verifier whose claim was taken over cannot record a refused result even of its
/// own run; the holder of the claim that superseded the run's records the takeover and ends
/// the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_login_records_a_jobs_runs_only_under_the_claim_it_holds() {
    use std::time::Duration;
    use verdict_store::{JobKind, NewJob};
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s = subject_digest(&subject("ex-1", 1));
    let p = current_policy(&t).await;
    let req = t
        .store
        .put(&op, DocKind::Request, &engine_request(&s, 1, &p, Some(1)))
        .await
        .unwrap()
        .digest;
    let (mut first, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    let (mut second, _) = principal_login(&t, "reviewer-3", Role::Verifier).await;
    grant_write(t.store.as_ref(), "g-rev-2", "reviewer-2", "ex-1").await;
    grant_write(t.store.as_ref(), "g-rev-3", "reviewer-3", "ex-1").await;
    let queue = t.store.queue();
    let job = queue
        .enqueue_jobs(
            &op,
            &[NewJob {
                kind: JobKind::Verify,
                request: req.clone(),
                class: "reviewer".into(),
                deadline: None,
            }],
        )
        .await
        .unwrap()[0]
        .id;
    // reviewer-2 claims the job with a lease that lapses at once and admits its run.
    let r2 = Actor::new("reviewer-2", Role::Verifier);
    let c1 = queue
        .claim_job(&r2, JobKind::Verify, "h-2", Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((c1.id, c1.fencing), (job, 1));
    let run1 = format!("job-{job}-1");
    let (run, note) = self_admission("reviewer-2", &run1, req.as_str(), s.as_str(), 1, "reviewer");
    let [run_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &run);
    let [note_one, ..] = put_calls(Table::VerificationRequests, "reviewer-2", "verifier", &note);
    try_sql(&mut first, &format!("BEGIN; {run_one}; {note_one}; COMMIT"))
        .await
        .unwrap();

    // reviewer-3 holds no claim of the job: no takeover record, no end of reviewer-2's run,
    // no refused-result record of it.
    let seq = head_seq(&t).await;
    let end = json!({"run_id": run1, "n": 1, "status": "cancelled"});
    for (table, doc, why) in [
        (
            Table::VerificationRequests,
            takeover("reviewer-3", &run1, s.as_str(), job, 1, 2),
            "only while it holds the claim",
        ),
        (Table::RunEvents, end.clone(), "does not belong to verifier"),
        (
            Table::VerificationRequests,
            refusal(&run1, s.as_str()),
            "only about a run of its own",
        ),
    ] {
        for sql in put_calls(table, "reviewer-3", "verifier", &doc) {
            let err = second
                .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())))
                .await
                .unwrap_err();
            let db = err.as_database_error().unwrap();
            assert_eq!(db.code().as_deref(), Some("42501"), "{sql}: {err}");
            assert!(err.to_string().contains(why), "{sql}: {err}");
        }
    }
    nothing_appended(&t, seq).await;

    // reviewer-3 takes the job over (claim 2). reviewer-2, whose claim is stale, records no
    // refused result even of its own run, and cannot record the takeover in its own name.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let r3 = Actor::new("reviewer-3", Role::Verifier);
    let c2 = queue
        .claim_job(&r3, JobKind::Verify, "h-3", Duration::from_secs(600))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((c2.id, c2.fencing), (job, 2));
    let seq = head_seq(&t).await;
    for (doc, why) in [
        (
            refusal(&run1, s.as_str()),
            "records it only while it holds that claim",
        ),
        (
            takeover("reviewer-2", &run1, s.as_str(), job, 1, 2),
            "only while it holds the claim",
        ),
    ] {
        for sql in put_calls(Table::VerificationRequests, "reviewer-2", "verifier", &doc) {
            let err = try_sql(&mut first, &sql).await.unwrap_err();
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    // Nor does the claimant name another as the claimant, or a token it does not hold.
    for doc in [
        takeover("reviewer-2", &run1, s.as_str(), job, 1, 2),
        takeover("reviewer-3", &run1, s.as_str(), job, 1, 3),
    ] {
        for sql in put_calls(Table::VerificationRequests, "reviewer-3", "verifier", &doc) {
            try_sql(&mut second, &sql).await.unwrap_err();
        }
    }
    nothing_appended(&t, seq).await;

    // The claimant records the takeover and ends the run, in its own name.
    let [record, ..] = put_calls(
        Table::VerificationRequests,
        "reviewer-3",
        "verifier",
        &takeover("reviewer-3", &run1, s.as_str(), job, 1, 2),
    );
    let [ended, ..] = put_calls(Table::RunEvents, "reviewer-3", "verifier", &end);
    try_sql(&mut second, &record).await.unwrap();
    try_sql(&mut second, &ended).await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 2);
    let events = t.store.audit_events(seq, 10).await.unwrap();
    assert!(
        events
            .iter()
            .all(|e| e.principal == "reviewer-3" && e.role == "verifier"),
        "{events:#?}"
    );
    // The run cap of one counts the run ended by its claimant's takeover no more: the claimant
    // admits its own run.
    let run2 = format!("job-{job}-2");
    let (run, note) = self_admission("reviewer-3", &run2, req.as_str(), s.as_str(), 1, "reviewer");
    let [run_one, ..] = put_calls(Table::VerifierRuns, "reviewer-3", "verifier", &run);
    let [note_one, ..] = put_calls(Table::VerificationRequests, "reviewer-3", "verifier", &note);
    try_sql(
        &mut second,
        &format!("BEGIN; {run_one}; {note_one}; COMMIT"),
    )
    .await
    .unwrap();
    first.close().await.unwrap();
    second.close().await.unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// `at` moved by `secs` seconds (back when negative).
fn shifted(
    at: &verdict_core::contracts::Timestamp,
    secs: i64,
) -> verdict_core::contracts::Timestamp {
    verdict_core::contracts::Timestamp::from_unix_nanos(
        at.unix_nanos() + i128::from(secs) * 1_000_000_000,
    )
}

/// Names `at` as the store's time on a manual-clock store to the routines `conn` calls, as the
/// store does at the start of each transaction.
async fn name_time(conn: &mut sqlx::PgConnection, at: &verdict_core::contracts::Timestamp) {
    let micros = at.unix_nanos().div_euclid(1000);
    try_sql(conn, &format!("SET verdict.manual_now = '{micros}'"))
        .await
        .unwrap();
}

/// The SQLSTATE and the message of the error `sql` must fail with.
async fn refusal_of(conn: &mut sqlx::PgConnection, sql: &str) -> (String, String) {
    let err = conn
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
        .await
        .unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|db| db.code())
        .map(std::borrow::Cow::into_owned)
        .unwrap_or_default();
    (code, err.to_string())
}

/// When the current claim of job `id` lapses.
async fn lease_until(t: &TestStore, id: i64) -> verdict_core::contracts::Timestamp {
    let jobs = t
        .store
        .queue()
        .jobs(&verdict_store::JobFilter::default())
        .await
        .unwrap();
    let job = jobs.into_iter().find(|j| j.id == id).unwrap();
    assert_eq!(job.state, verdict_store::JobState::Running);
    job.lease_until.unwrap()
}

/// The store on a manual clock set to 2026-11-30T12:00Z, then [`populate`]d.
async fn populate_on_a_manual_clock(store: &dyn verdict_store::Store) {
    let op = Actor::new(OPERATOR, Role::Operator);
    store
        .establish_clock(&op, verdict_store::StoreClock::Manual)
        .await
        .unwrap();
    store
        .set_manual_time(&"2026-11-30T12:00:00Z".parse().unwrap())
        .await
        .unwrap();
    populate(store).await;
}

/// Admits, as the operator, `VERIFIER`'s run of claim `fencing` of verify job `job` (the
/// request [`job_request`] `seed`, class `reviewer`), as the claim's worker would; its run id.
async fn admit_attempt(
    store: &dyn verdict_store::Store,
    job: i64,
    fencing: i64,
    seed: &str,
) -> String {
    let run = format!("job-{job}-{fencing}");
    store
        .admit_run(
            &Actor::new(OPERATOR, Role::Operator),
            &verdict_store::RunAdmission {
                run_id: run.parse().unwrap(),
                request_digest: job_request(seed),
                subject_digest: subject_digest(&subject("ex-1", 1)),
                verifier: VERIFIER.parse().unwrap(),
                class: "reviewer".parse().unwrap(),
                admitted_generation: 1,
            },
        )
        .await
        .unwrap();
    run
}

/// Schema 17: a claim whose lease lapsed at the store's time writes nothing under it, though no
/// other claim took the job. On a store that keeps a manual clock, moved past the lease: every
/// write made under a verify job's claim (a renewal, a refused result's record, a run's event,
/// a completion, a failure; for the claim that took the job over, the takeover record and the
/// run end it makes) is refused through the store (`StaleClaim`) and, on PostgreSQL, through the
/// verifier's own login calling the routines (SQLSTATE 42501, or VRJ01 for a renewal), also
/// when the login names no time; nothing is appended and the chain verifies. With the store's
/// time back inside the lease the same writes are made.
async fn a_claim_whose_lease_lapsed_writes_nothing_under_it(t: &TestStore) {
    use std::time::Duration;
    use verdict_store::{JobClaim, JobKind, NewJob, RunStatus, StoreError};
    const OTHER: &str = "reviewer-2";
    let store = t.store.as_ref();
    let op = Actor::new(OPERATOR, Role::Operator);
    populate_on_a_manual_clock(store).await;
    register(store, OTHER, Role::Verifier).await;
    grant_write(store, "g-rev-2", OTHER, "ex-1").await;
    let s = subject_digest(&subject("ex-1", 1));
    // A stored request about ex-1, which both verifiers' grants cover: a verify job is claimed
    // only under a grant covering its request (schema 27).
    store
        .put(
            &op,
            verdict_store::DocKind::Request,
            &request_doc("ex-1", "lapse"),
        )
        .await
        .unwrap();
    let queue = store.queue();
    let job = queue
        .enqueue_jobs(
            &op,
            &[NewJob {
                kind: JobKind::Verify,
                request: job_request("lapse"),
                class: "reviewer".into(),
                deadline: None,
            }],
        )
        .await
        .unwrap()[0]
        .id;
    let lease = Duration::from_secs(60);
    let (first, second) = (
        Actor::new(VERIFIER, Role::Verifier),
        Actor::new(OTHER, Role::Verifier),
    );
    let c1 = queue
        .claim_job(&first, JobKind::Verify, "h-1", lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((c1.id, c1.fencing), (job, 1));
    // The claim's own attempt, for the job's request (schema 38 admits a run of this name only
    // so).
    let run1 = admit_attempt(store, job, 1, "lapse").await;
    let claim1 = JobClaim::new(job, 1, lease);
    let stale = |err: StoreError, fencing: i64| {
        assert!(
            matches!(err, StoreError::StaleClaim { job: j, fencing: f } if j == job && f == fencing),
            "{err}"
        );
    };

    // The first claim's lease lapses; nobody has taken the job.
    let until = lease_until(t, job).await;
    store.set_manual_time(&shifted(&until, 1)).await.unwrap();
    let seq = head_seq(t).await;
    let refused = refusal(&run1, s.as_str());
    stale(queue.heartbeat(&first, job, 1, lease).await.unwrap_err(), 1);
    stale(
        store
            .put_claimed(&first, &claim1, DocKind::Request, &refused)
            .await
            .unwrap_err(),
        1,
    );
    stale(
        store
            .record_run_status_claimed(&first, &claim1, &run1, RunStatus::Started, None)
            .await
            .unwrap_err(),
        1,
    );
    stale(
        queue
            .complete_job(&first, job, 1, "late")
            .await
            .unwrap_err(),
        1,
    );
    stale(
        queue
            .fail_job(&first, job, 1, "late", None)
            .await
            .unwrap_err(),
        1,
    );
    nothing_appended(t, seq).await;
    assert_eq!(
        lease_until(t, job).await,
        until,
        "the lapsed claim renewed nothing"
    );
    let mut by_hand = None;
    if t.kind == Kind::Postgres {
        let (mut conn, _) = principal_login(t, VERIFIER, Role::Verifier).await;
        // A login that names no time on a manual-clock store is refused wherever the time counts.
        for sql in put_calls(Table::VerificationRequests, VERIFIER, "verifier", &refused) {
            let (code, err) = refusal_of(&mut conn, &sql).await;
            assert_eq!(code, "42501", "{sql}: {err}");
            assert!(err.contains("names no time"), "{sql}: {err}");
        }
        name_time(&mut conn, &shifted(&until, 1)).await;
        for sql in put_calls(Table::VerificationRequests, VERIFIER, "verifier", &refused) {
            let (code, err) = refusal_of(&mut conn, &sql).await;
            assert_eq!(code, "42501", "{sql}: {err}");
            assert!(
                err.contains("records it only while it holds that claim"),
                "{sql}: {err}"
            );
        }
        let renewal = format!(
            "SELECT * FROM verdict.job_heartbeat('{VERIFIER}', 'verifier', {job}, 1, 60000)"
        );
        let (code, err) = refusal_of(&mut conn, &renewal).await;
        assert_eq!(code, "VRJ01", "{err}");
        assert!(err.contains("lapsed"), "{err}");
        nothing_appended(t, seq).await;
        by_hand = Some(conn);
    }

    // Back inside the lease, the same writes are made: by hand on PostgreSQL, through the store
    // on both backends.
    store.set_manual_time(&shifted(&until, -1)).await.unwrap();
    let mut appended = 0;
    if let Some(conn) = by_hand.as_mut() {
        name_time(conn, &shifted(&until, -1)).await;
        let mut other = refused.clone();
        other["detail"] = json!("written by hand");
        let [one, ..] = put_calls(Table::VerificationRequests, VERIFIER, "verifier", &other);
        try_sql(conn, &one).await.unwrap();
        appended += 1;
    }
    store
        .put_claimed(&first, &claim1, DocKind::Request, &refused)
        .await
        .unwrap();
    store
        .record_run_status_claimed(&first, &claim1, &run1, RunStatus::Started, None)
        .await
        .unwrap();
    assert_eq!(head_seq(t).await, seq + appended + 2);

    // The first claim lapses again and the second verifier takes the job over; then its own
    // lease lapses before it records the takeover.
    let until = lease_until(t, job).await;
    store.set_manual_time(&shifted(&until, 1)).await.unwrap();
    let c2 = queue
        .claim_job(&second, JobKind::Verify, "h-2", lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((c2.id, c2.fencing), (job, 2));
    let claim2 = JobClaim::new(job, 2, lease);
    let until = lease_until(t, job).await;
    store.set_manual_time(&shifted(&until, 1)).await.unwrap();
    let record = takeover(OTHER, &run1, s.as_str(), job, 1, 2);
    let seq = head_seq(t).await;
    stale(
        store
            .put_claimed(&second, &claim2, DocKind::Request, &record)
            .await
            .unwrap_err(),
        2,
    );
    stale(
        store
            .record_run_status_claimed(&second, &claim2, &run1, RunStatus::Cancelled, None)
            .await
            .unwrap_err(),
        2,
    );
    nothing_appended(t, seq).await;
    if let Some(conn) = by_hand.take() {
        conn.close().await.unwrap();
        let (mut conn, _) = principal_login(t, OTHER, Role::Verifier).await;
        name_time(&mut conn, &shifted(&until, 1)).await;
        let end = json!({"run_id": run1, "n": 2, "status": "cancelled"});
        for (table, doc, why) in [
            (
                Table::VerificationRequests,
                &record,
                "only while it holds the claim",
            ),
            (Table::RunEvents, &end, "does not belong to verifier"),
        ] {
            for sql in put_calls(table, OTHER, "verifier", doc) {
                let (code, err) = refusal_of(&mut conn, &sql).await;
                assert_eq!(code, "42501", "{sql}: {err}");
                assert!(err.contains(why), "{sql}: {err}");
            }
        }
        nothing_appended(t, seq).await;
        conn.close().await.unwrap();
    }
    // Inside the second claim's lease the takeover is recorded and the run ended.
    store.set_manual_time(&shifted(&until, -1)).await.unwrap();
    store
        .put_claimed(&second, &claim2, DocKind::Request, &record)
        .await
        .unwrap();
    store
        .record_run_status_claimed(&second, &claim2, &run1, RunStatus::Cancelled, None)
        .await
        .unwrap();
    assert_eq!(head_seq(t).await, seq + 2);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(a_claim_whose_lease_lapsed_writes_nothing_under_it);

/// A write made under a claim that completes its job (`JobClaim::completes`) lands with the
/// job's end in one transaction, or neither lands: under a lapsed lease, or refused, it appends
/// nothing and leaves the job running under the same claim; made, it appends its record and the
/// job is done with the claim's outcome, after which the claim renews, completes and writes
/// nothing more, and the request's gate job, which waited for it, may be claimed.
async fn a_write_that_completes_its_job_lands_with_the_jobs_end_or_not_at_all(t: &TestStore) {
    use std::time::Duration;
    use verdict_store::{ActorRole, JobClaim, JobKind, JobState, NewJob, RunStatus, StoreError};
    let store = t.store.as_ref();
    let op = Actor::new(OPERATOR, Role::Operator);
    populate_on_a_manual_clock(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    store
        .put(
            &op,
            verdict_store::DocKind::Request,
            &request_doc("ex-1", "ends"),
        )
        .await
        .unwrap();
    let queue = store.queue();
    let new_job = |kind| NewJob {
        kind,
        request: job_request("ends"),
        class: if kind == JobKind::Verify {
            "reviewer"
        } else {
            ""
        }
        .into(),
        deadline: None,
    };
    let jobs = queue
        .enqueue_jobs(&op, &[new_job(JobKind::Verify), new_job(JobKind::Gate)])
        .await
        .unwrap();
    let job = jobs[0].id;
    let lease = Duration::from_secs(60);
    let first = Actor::new(VERIFIER, Role::Verifier);
    let claimed = queue
        .claim_job(&first, JobKind::Verify, "h-1", lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((claimed.id, claimed.fencing), (job, 1));
    let run = admit_attempt(store, job, 1, "ends").await;
    let claim = JobClaim::new(job, 1, lease);
    let ending = claim.completing(format!("{run} ended"));
    register(store, GATEKEEPER, Role::Operator).await;
    let gate = Actor {
        principal: GATEKEEPER.into(),
        role: ActorRole::Gate,
    };
    let still_running = |what: &'static str| async move {
        let now = queue.job(job).await.unwrap().unwrap();
        assert_eq!(
            (now.state, now.fencing, now.outcome.as_deref()),
            (JobState::Running, 1, None),
            "{what}"
        );
    };

    // Under a lapsed lease: refused, nothing appended, the job not ended.
    let until = lease_until(t, job).await;
    store.set_manual_time(&shifted(&until, 1)).await.unwrap();
    let seq = head_seq(t).await;
    let err = store
        .record_run_status_claimed(&first, &ending, &run, RunStatus::Started, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::StaleClaim { .. }), "{err}");
    nothing_appended(t, seq).await;
    still_running("a lapsed claim").await;

    // Inside the lease, a write the store refuses before its transaction (a refused result's
    // record naming a run of no verifier) ends nothing either; nor does one refused inside the
    // transaction, after the claim was checked and renewed: a result whose finding takes the
    // place (id and version) of another finding already stored, met only when its row is
    // inserted.
    store.set_manual_time(&shifted(&until, -1)).await.unwrap();
    let err = store
        .put_claimed(
            &first,
            &ending,
            DocKind::Request,
            &refusal("job-0-1", s.as_str()),
        )
        .await
        .unwrap_err();
    assert!(!matches!(err, StoreError::StaleClaim { .. }), "{err}");
    nothing_appended(t, seq).await;
    still_running("a write refused before its transaction").await;
    let mut taken = finding(&s, "f-1", 1);
    taken["severity"] = json!("minor");
    let err = store
        .put_claimed(
            &first,
            &ending,
            DocKind::Verification,
            &result(&s, 1, &run, vec![taken]),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    nothing_appended(t, seq).await;
    still_running("a write refused in its transaction").await;
    assert!(
        queue
            .claim_job(&gate, JobKind::Gate, "g-1", lease)
            .await
            .unwrap()
            .is_none(),
        "the gate job waits for the running verify job"
    );

    // Made: the record and the job's end together.
    store
        .record_run_status_claimed(&first, &ending, &run, RunStatus::Started, None)
        .await
        .unwrap();
    assert_eq!(head_seq(t).await, seq + 1);
    let done = queue.job(job).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.fencing, done.outcome.as_deref()),
        (JobState::Done, 1, Some(format!("{run} ended").as_str()))
    );
    assert!(done.done_at.is_some() && done.lease_until.is_none());
    // The claim ended with its job: it renews, completes and writes nothing more.
    let stale = |err: StoreError| {
        assert!(
            matches!(err, StoreError::StaleClaim { job: j, fencing: 1 } if j == job),
            "{err}"
        );
    };
    stale(queue.heartbeat(&first, job, 1, lease).await.unwrap_err());
    stale(
        queue
            .complete_job(&first, job, 1, "again")
            .await
            .unwrap_err(),
    );
    stale(
        store
            .record_run_status_claimed(&first, &claim, &run, RunStatus::Completed, None)
            .await
            .unwrap_err(),
    );
    assert_eq!(head_seq(t).await, seq + 1);
    let gated = queue
        .claim_job(&gate, JobKind::Gate, "g-1", lease)
        .await
        .unwrap()
        .expect("the gate job is claimable once the verify job ended");
    assert_eq!(gated.id, jobs[1].id);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(a_write_that_completes_its_job_lands_with_the_jobs_end_or_not_at_all);

/// A run's status written again under a claim that completes its job appends nothing (the
/// status is the run's already) and still completes the job, so that a caller told the write
/// was made may count the job done.
async fn a_repeated_status_that_completes_its_job_still_completes_it(t: &TestStore) {
    use std::time::Duration;
    use verdict_store::{JobClaim, JobKind, JobState, NewJob, RunStatus};
    let store = t.store.as_ref();
    let op = Actor::new(OPERATOR, Role::Operator);
    populate_on_a_manual_clock(store).await;
    store
        .put(&op, DocKind::Request, &request_doc("ex-1", "again"))
        .await
        .unwrap();
    let queue = store.queue();
    let job = queue
        .enqueue_jobs(
            &op,
            &[NewJob {
                kind: JobKind::Verify,
                request: job_request("again"),
                class: "reviewer".into(),
                deadline: None,
            }],
        )
        .await
        .unwrap()[0]
        .id;
    let lease = Duration::from_secs(60);
    let first = Actor::new(VERIFIER, Role::Verifier);
    queue
        .claim_job(&first, JobKind::Verify, "h-1", lease)
        .await
        .unwrap()
        .unwrap();
    let run = admit_attempt(store, job, 1, "again").await;
    let claim = JobClaim::new(job, 1, lease);
    store
        .record_run_status_claimed(&first, &claim, &run, RunStatus::Started, None)
        .await
        .unwrap();
    let seq = head_seq(t).await;
    store
        .record_run_status_claimed(
            &first,
            &claim.completing("ended by a repeat"),
            &run,
            RunStatus::Started,
            None,
        )
        .await
        .unwrap();
    nothing_appended(t, seq).await;
    let done = queue.job(job).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.fencing, done.outcome.as_deref()),
        (JobState::Done, 1, Some("ended by a repeat"))
    );
}
both!(a_repeated_status_that_completes_its_job_still_completes_it);

/// A verification request and its jobs are stored in one transaction
/// (`Store::put_request_enqueuing`): a caller who may not enqueue stores neither; stored, the
/// jobs are about the stored request's digest and ready at once; storing it again adds
/// nothing and answers with the same jobs. A refusal of the jobs by the store (a producer's job
/// of a record that is not a request of its own: PostgreSQL's routine since schema version 20,
/// SQLite's store code since 41) takes the request back with them.
async fn a_request_and_its_jobs_are_stored_together_or_not_at_all(t: &TestStore) {
    use std::time::Duration;
    use verdict_store::{JobFilter, JobKind, JobState, RequestJob, StoreError};
    let store = t.store.as_ref();
    populate(store).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let queue = store.queue();
    let jobs = [
        RequestJob {
            kind: JobKind::Verify,
            class: "reviewer".into(),
            deadline: None,
        },
        RequestJob {
            kind: JobKind::Gate,
            class: String::new(),
            deadline: Some(Duration::from_secs(600)),
        },
    ];
    let of = |seed: &str| JobFilter {
        request: Some(job_request(seed)),
        ..JobFilter::default()
    };
    let seq = head_seq(t).await;
    for actor in [
        Actor::new(RUNNER, Role::Runner),
        Actor::new(VERIFIER, Role::Verifier),
    ] {
        let err = store
            .put_request_enqueuing(&actor, &request_doc("ex-1", "together"), &jobs)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Forbidden { .. } | StoreError::Denied(_)),
            "{err}"
        );
    }
    nothing_appended(t, seq).await;
    assert!(queue.jobs(&of("together")).await.unwrap().is_empty());
    assert!(
        store
            .get(DocKind::Request, &job_request("together"))
            .await
            .unwrap()
            .is_none()
    );

    // The store refuses a producer's jobs of a record that is not a request of its own making;
    // the request, appended first in the same transaction, goes with them.
    let producer = Actor::new(PRODUCER, Role::Producer);
    let err = store
        .put_request_enqueuing(&producer, &request_doc("ex-1", "theirs"), &jobs)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Denied(_)), "{err}");
    nothing_appended(t, seq).await;
    assert!(queue.jobs(&of("theirs")).await.unwrap().is_empty());
    assert!(
        store
            .get(DocKind::Request, &job_request("theirs"))
            .await
            .unwrap()
            .is_none()
    );

    let (stored, queued) = store
        .put_request_enqueuing(&op, &request_doc("ex-1", "together"), &jobs)
        .await
        .unwrap();
    assert_eq!(stored.digest, job_request("together"));
    assert_eq!(head_seq(t).await, seq + 1, "one record: the request");
    assert_eq!(
        queued
            .iter()
            .map(|j| (j.kind, j.class.as_str(), &j.request, j.state))
            .collect::<Vec<_>>(),
        [
            (JobKind::Verify, "reviewer", &stored.digest, JobState::Ready),
            (JobKind::Gate, "", &stored.digest, JobState::Ready),
        ]
    );
    assert!(queued[0].deadline_at.is_none() && queued[1].deadline_at.is_some());
    assert_eq!(queue.jobs(&of("together")).await.unwrap(), queued);
    // Again: nothing is added, and the same jobs answer.
    let (again, requeued) = store
        .put_request_enqueuing(&op, &request_doc("ex-1", "together"), &jobs)
        .await
        .unwrap();
    assert_eq!(again.digest, stored.digest);
    assert_eq!(requeued, queued);
    assert_eq!(head_seq(t).await, seq + 1);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}
both!(a_request_and_its_jobs_are_stored_together_or_not_at_all);

/// The batched call of `table`'s routine appending `docs`, in order, as `principal` in `role`.
fn batch_call(table: Table, principal: &str, role: &str, docs: &[serde_json::Value]) -> String {
    let (mut keys, mut digests, mut bodies) = (Vec::new(), Vec::new(), Vec::new());
    for doc in docs {
        let body = canonical(doc);
        let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
        keys.push(format!(
            "'{}'",
            verdict_store::records::key_of_value(table, doc, &digest).unwrap()
        ));
        digests.push(format!("'{digest}'"));
        bodies.push(format!("'{}'", body.replace('\'', "''")));
    }
    format!(
        "SELECT r_seq FROM verdict.put_{}('{principal}', '{role}', ARRAY[{}], ARRAY[{}], ARRAY[{}], \
         array_fill(NULL::text, ARRAY[{}]))",
        table.name(),
        keys.join(", "),
        digests.join(", "),
        bodies.join(", "),
        docs.len()
    )
}

/// Schema version 16 checks a batch's grant once per subject its records name in turn, not once
/// per record. A runner granted on one execution files, by hand, batches whose records are about
/// that execution's subject and another's, in every order (the other subject first, last, and
/// between records of the granted one); a producer granted on one execution puts subjects of
/// two. Each batch is refused whole and appends nothing. The same batches about the granted
/// subject alone are taken, with one event per record in order and the chain intact, also when
/// some of their keys are stored already.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_checked_for_every_subject_its_records_name() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let producer = Actor::new(PRODUCER, Role::Producer);
    t.store
        .put(&producer, DocKind::Subject, &subject("ex-2", 1))
        .await
        .unwrap();
    let (s1, s2) = (
        subject_digest(&subject("ex-1", 1)),
        subject_digest(&subject("ex-2", 1)),
    );
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    grant_write(t.store.as_ref(), "g-coder-ex1", PRODUCER, "ex-1").await;
    let (mut runner, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let (mut coder, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let seq = head_seq(&t).await;
    let refused = [
        vec![evidence(&s2, "ev-a"), evidence(&s1, "ev-b")],
        vec![evidence(&s1, "ev-a"), evidence(&s2, "ev-b")],
        vec![
            evidence(&s1, "ev-a"),
            evidence(&s1, "ev-b"),
            evidence(&s2, "ev-c"),
            evidence(&s1, "ev-d"),
        ],
        vec![
            evidence(&s1, "ev-a"),
            evidence(&s2, "ev-b"),
            evidence(&s2, "ev-c"),
        ],
    ];
    for docs in &refused {
        let sql = batch_call(Table::CheckEvidence, RUNNER, "runner", docs);
        let err = try_sql(&mut runner, &sql).await.expect_err(&sql);
        assert!(
            err.contains("holds no write grant in force"),
            "{sql}: {err}"
        );
    }
    let sql = batch_call(
        Table::Subjects,
        PRODUCER,
        "producer",
        &[subject("ex-1", 2), subject("ex-2", 2)],
    );
    let err = try_sql(&mut coder, &sql).await.expect_err(&sql);
    assert!(
        err.contains("holds no write grant in force"),
        "{sql}: {err}"
    );
    nothing_appended(&t, seq).await;

    // About the granted subject alone: taken, one event per record, in the records' order.
    let docs = [
        evidence(&s1, "ev-a"),
        evidence(&s1, "ev-b"),
        evidence(&s1, "ev-c"),
    ];
    let seqs: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(batch_call(
        Table::CheckEvidence,
        RUNNER,
        "runner",
        &docs,
    )))
    .fetch_all(&mut runner)
    .await
    .unwrap();
    let first = i64::try_from(seq).unwrap() + 1;
    assert_eq!(seqs, [first, first + 1, first + 2]);
    // Two of them again, around a new one: the stored rows come back, one event is appended.
    let seqs: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(batch_call(
        Table::CheckEvidence,
        RUNNER,
        "runner",
        &[docs[1].clone(), evidence(&s1, "ev-d"), docs[0].clone()],
    )))
    .fetch_all(&mut runner)
    .await
    .unwrap();
    assert_eq!(seqs, [first + 1, first + 3, first]);
    // The subjects name mission m-17, which needs a write grant on it (schema 31).
    grant_mission_write(t.store.as_ref(), "g-coder-m17", PRODUCER, "m-17").await;
    try_sql(
        &mut coder,
        &batch_call(
            Table::Subjects,
            PRODUCER,
            "producer",
            &[subject("ex-1", 2), subject("ex-1", 3)],
        ),
    )
    .await
    .unwrap();
    assert_eq!(head_seq(&t).await, seq + 7);
    let named: Vec<(u64, String)> = t
        .store
        .audit_events(seq, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.key))
        .collect();
    let key = |doc: &serde_json::Value| {
        let body = canonical(doc);
        verdict_store::records::row_digest(Table::CheckEvidence.domain(), body.as_bytes())
            .to_string()
    };
    assert_eq!(
        named.iter().take(4).cloned().collect::<Vec<_>>(),
        [
            (seq + 1, key(&docs[0])),
            (seq + 2, key(&docs[1])),
            (seq + 3, key(&docs[2])),
            (seq + 4, key(&evidence(&s1, "ev-d"))),
        ]
    );
    runner.close().await.unwrap();
    coder.close().await.unwrap();
    nothing_appended(&t, seq + 7).await;
    t.cleanup().await;
}

/// The write routines of the schema as the catalogue lists them (so a routine added later is
/// tried too): every SECURITY DEFINER routine that is no trigger and not internal, but the two
/// that only read. Each with its signature, name and identity arguments.
async fn write_routines(t: &TestStore) -> Vec<(String, String, String)> {
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    let routines: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, p.proname::text, \
         pg_get_function_identity_arguments(p.oid) FROM pg_catalog.pg_proc p \
         WHERE p.pronamespace = 'verdict'::regnamespace AND p.prosecdef \
           AND p.prorettype <> 'trigger'::regtype AND NOT starts_with(p.proname, '_') \
           AND p.proname NOT IN ('principal_by_token', 'principal_entries', 'token_changes_of') \
         ORDER BY 1",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    // 15 tables with two routines each, blobs, four pointers, five job routines, the login's.
    assert!(routines.len() >= 41, "{routines:?}");
    routines
}

/// A call of routine `name` as `principal` in `role`, with a plausible argument for each of its
/// parameters (`args`, as the catalogue gives them): a put routine of a table gets a record of
/// that table (a webhook registration for the requests table), with its key and digest.
fn plausible_call(name: &str, args: &str, principal: &str, role: &str) -> String {
    let table = Table::ALL
        .into_iter()
        .find(|t| name == format!("put_{}", t.name()) || name == format!("put_one_{}", t.name()));
    let doc = match table {
        Some(Table::VerificationRequests) => json!({
            "schema": "verdict.webhook/v1", "id": "evil", "url": "https://attacker.example/",
            "scope": {"kind": "all"}, "event_types": [], "secret_sha256": d("secret"),
            "registered_by": principal, "at": "2026-12-01T00:00:00.000000Z",
        }),
        Some(Table::Principals) => serde_json::to_value(operator_record("mallory")).unwrap(),
        Some(Table::Grants) => {
            serde_json::to_value(write_grant("g-mallory", "mallory", "ex-1")).unwrap()
        }
        _ => json!({"schema": "verdict.note/v1", "id": "n-1"}),
    };
    let body = canonical(&doc);
    let digest = verdict_store::records::row_digest(
        table.map_or("store.request", Table::domain),
        body.as_bytes(),
    );
    let key = table
        .and_then(|t| verdict_store::records::key_of_value(t, &doc, &digest).ok())
        .unwrap_or_else(|| digest.to_string());
    let q = |v: &str| format!("'{}'", v.replace('\'', "''"));
    let values: Vec<String> = args
        .split(", ")
        .map(|arg| {
            let (param, ty) = arg.split_once(' ').unwrap();
            let text = match param {
                "p_principal" => principal.to_owned(),
                "p_role" => role.to_owned(),
                "p_key" | "p_keys" => key.clone(),
                "p_digest" | "p_digests" => digest.to_string(),
                "p_body" | "p_bodies" | "p_new" => body.clone(),
                "p_kind" | "p_kinds" => "verify".to_owned(),
                "p_password" => "p".repeat(40),
                _ => "x-1".to_owned(),
            };
            match ty {
                "text" => format!("{}::text", q(&text)),
                "text[]" => format!("ARRAY[{}]::text[]", q(&text)),
                "bigint" => "1::bigint".to_owned(),
                "bigint[]" => "ARRAY[1]::bigint[]".to_owned(),
                "bytea" => "'\\x00'::bytea".to_owned(),
                other => panic!("{name}: no plausible {other} for {param}"),
            }
        })
        .collect();
    format!("SELECT * FROM verdict.{name}({})", values.join(", "))
}

/// Schema 19: a login granted only `<prefix>engine` (as itself, or having set that role) calls
/// every write routine: each is refused with SQLSTATE 42501, nothing is appended and the chain
/// verifies. Even with every group role granted to the engine's identity (as a binary of an
/// older schema, migrating another database that shares the role names, would grant one), each
/// routine refuses it itself; `audit verify` reports that membership, and not once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_identity_writes_nothing_through_any_routine() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let seq = head_seq(&t).await;
    let routines = write_routines(&t).await;
    let login = format!("{}engine_only", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}engine\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(&url.replacen("postgres@", &format!("{login}@"), 1))
        .await
        .unwrap();
    let refused = |err: sqlx::Error, sql: &str| {
        let db = err.as_database_error().unwrap();
        assert_eq!(db.code().as_deref(), Some("42501"), "{sql}: {err}");
        err.to_string()
    };
    for set_role in [false, true] {
        if set_role {
            try_sql(&mut conn, &format!("SET ROLE \"{}engine\"", t.prefix))
                .await
                .unwrap();
        }
        for (signature, name, args) in &routines {
            for principal in ["verdict-engine", OPERATOR] {
                let sql = plausible_call(name, args, principal, "operator");
                let err = conn
                    .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())))
                    .await
                    .unwrap_err();
                refused(err, &format!("{signature}: {sql}"));
            }
        }
    }
    nothing_appended(&t, seq).await;

    let groups = [
        "operator", "producer", "runner", "verifier", "human", "gate", "system",
    ]
    .map(|g| format!("\"{}{g}\"", t.prefix))
    .join(", ");
    t.raw(&format!("GRANT {groups} TO \"{}engine\"", t.prefix))
        .await
        .unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| format!("{p:?}").contains("writes nothing, yet is a member")),
        "{:#?}",
        report.problems
    );
    for (signature, name, args) in &routines {
        for role in ["operator", "system"] {
            let sql = plausible_call(name, args, "verdict-engine", role);
            let err = conn
                .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())))
                .await
                .unwrap_err();
            let message = refused(err, &format!("{signature}: {sql}"));
            assert!(
                message.contains("writes nothing (schema 19)"),
                "{signature}: {message}"
            );
        }
    }
    conn.close().await.unwrap();
    t.raw(&format!("REVOKE {groups} FROM \"{}engine\"", t.prefix))
        .await
        .unwrap();
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// Schema 19: the system identity appends, besides denials, only the records of webhook
/// deliveries and failures. A registration or any other note, a principal or a grant is refused
/// (42501), even were the identity granted every group role, and nothing is appended; a delivery
/// record goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_identity_appends_only_denials_and_delivery_records() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let login = format!("{}system_only", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}system\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(&url.replacen("postgres@", &format!("{login}@"), 1))
        .await
        .unwrap();
    try_sql(&mut conn, &format!("SET ROLE \"{}system\"", t.prefix))
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let s = subject_digest(&subject("ex-1", 1));
    let attempts = || {
        let mut calls = Vec::new();
        for doc in [
            json!({"schema": "verdict.webhook/v1", "id": "evil", "url": "https://attacker.example/",
                "registered_by": OPERATOR}),
            json!({"schema": "verdict.webhook-removal/v1", "webhook": "hook-1",
                "removed_by": OPERATOR, "at": "2026-12-01T00:00:00.000000Z"}),
            json!({"schema": "verdict.webhook-delivered/v1", "webhook": "hook-1"}),
            json!({"schema": "verdict.cancellation/v1", "subject_digest": s.as_str()}),
            request(&s),
        ] {
            calls.extend(put_calls(
                Table::VerificationRequests,
                "verdict-engine",
                "system",
                &doc,
            ));
        }
        calls.extend(put_calls(
            Table::Principals,
            "verdict-engine",
            "system",
            &serde_json::to_value(operator_record("mallory")).unwrap(),
        ));
        calls.extend(put_calls(
            Table::Grants,
            "verdict-engine",
            "system",
            &serde_json::to_value(write_grant("g-mallory", "mallory", "ex-1")).unwrap(),
        ));
        calls
    };
    for pass in ["as granted", "with every group role"] {
        if pass == "with every group role" {
            let groups = [
                "operator", "producer", "runner", "verifier", "human", "gate",
            ]
            .map(|g| format!("\"{}{g}\"", t.prefix))
            .join(", ");
            t.raw(&format!("GRANT {groups} TO \"{}system\"", t.prefix))
                .await
                .unwrap();
        }
        for sql in attempts() {
            let err = conn
                .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())))
                .await
                .unwrap_err();
            let db = err.as_database_error().unwrap();
            assert_eq!(db.code().as_deref(), Some("42501"), "{pass}: {sql}: {err}");
        }
        nothing_appended(&t, seq).await;
    }
    let groups = [
        "operator", "producer", "runner", "verifier", "human", "gate",
    ]
    .map(|g| format!("\"{}{g}\"", t.prefix))
    .join(", ");
    t.raw(&format!("REVOKE {groups} FROM \"{}system\"", t.prefix))
        .await
        .unwrap();
    let delivered = json!({"schema": "verdict.webhook-delivered/v1", "webhook": "hook-1",
        "event": 3, "at": "2026-12-01T00:00:00.000000Z"});
    let [one, ..] = put_calls(
        Table::VerificationRequests,
        "verdict-engine",
        "system",
        &delivered,
    );
    try_sql(&mut conn, &one).await.unwrap();
    conn.close().await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// A subject of ex-1 (as `populate` stores it, mission m-17) by `producer`, naming `mission`.
fn subject_by(
    producer: &str,
    generation: u64,
    mission: Option<&str>,
    run: &str,
) -> serde_json::Value {
    let mut s = subject("ex-1", generation);
    s["producer"] = json!({"principal": producer, "run": run});
    match mission {
        Some(m) => s["mission"] = json!(m),
        None => {
            s.as_object_mut().unwrap().remove("mission");
        }
    }
    s
}

fn mission_grant(id: &str, principal: &str, mission: &str) -> GrantRecord {
    let mut g = write_grant(id, principal, "unused");
    g.scope = GrantScope {
        kind: ScopeKind::Mission,
        id: mission.parse().unwrap(),
    };
    g
}

/// Schema version 31, through a producer's own login: holding a write grant on one execution
/// only, it calls both subject routines with that execution's first subject naming a mission,
/// so that every grant on the mission would cover its work. Refused with SQLSTATE 42501, the
/// mission and the grant missing named, and nothing appended; a read grant on the mission does
/// not do either. The same subject without a mission is taken under the execution grant, and
/// with a write grant on the mission the subject naming it is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_login_names_a_mission_only_under_a_write_grant_on_it() {
    let t = postgres().await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let (mut coder, _) = principal_login(&t, "coder5", Role::Producer).await;
    grant_write(t.store.as_ref(), "g-c5", "coder5", "ex-5").await;
    let mut read_only = mission_grant("g-m5-read", "coder5", "m-5");
    read_only.access = Access::Read;
    t.store.add_grant(&op, &read_only).await.unwrap();
    let by_coder5 = |mission: Option<&str>, run: &str| {
        let mut s = subject("ex-5", 1);
        s["producer"] = json!({"principal": "coder5", "run": run});
        match mission {
            Some(m) => s["mission"] = json!(m),
            None => {
                s.as_object_mut().unwrap().remove("mission");
            }
        }
        s
    };
    let named = by_coder5(Some("m-5"), "run-5");
    let seq = head_seq(&t).await;
    for sql in put_calls(Table::Subjects, "coder5", "producer", &named) {
        let (code, err) = try_sql_state(&mut coder, &sql).await.expect_err(&sql);
        assert!(
            code == "42501"
                && err.contains(
                    "names mission m-5, but holds no write grant in force on mission m-5"
                ),
            "{sql}: {code} {err}"
        );
    }
    nothing_appended(&t, seq).await;

    // Without a mission the execution grant is enough.
    try_sql(
        &mut coder,
        &put_calls(
            Table::Subjects,
            "coder5",
            "producer",
            &by_coder5(None, "run-plain"),
        )[0],
    )
    .await
    .unwrap();
    // Under a write grant on the mission, the subject naming it is taken, by either routine.
    t.store
        .add_grant(&op, &mission_grant("g-m5", "coder5", "m-5"))
        .await
        .unwrap();
    let [one, ..] = put_calls(Table::Subjects, "coder5", "producer", &named);
    try_sql(&mut coder, &one).await.unwrap();
    let other = by_coder5(Some("m-5"), "run-batch");
    let [_, other_batch, _] = put_calls(Table::Subjects, "coder5", "producer", &other);
    try_sql(&mut coder, &other_batch).await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 4);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Schema version 21, through each principal's own login: a producer holding a write grant on
/// its own mission names it in a subject for another producer's execution, stores it by hand
/// and moves the execution to it; puts check evidence as a producer about another producer's
/// subject, or about its own without a grant; moves an execution back to a subject it left;
/// and a person records a decision on a policy that is no gate's current one, or in a role that
/// is not `human`. Each is refused with SQLSTATE 42501 and appends nothing. A grant on the
/// execution itself hands it over, its mission kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_write_to_an_execution_only_as_it_is_stored() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s1 = subject_digest(&subject("ex-1", 1));
    let at_1 = ExecutionHead {
        subject_digest: s1.clone(),
        generation: 1,
    };
    let (mut coder3, _) = principal_login(&t, "coder3", Role::Producer).await;
    let (mut coder, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let (mut alice, _) = principal_login(&t, HUMAN, Role::Human).await;
    t.store
        .add_grant(&op, &mission_grant("g-m3", "coder3", "m3"))
        .await
        .unwrap();
    grant_write(t.store.as_ref(), "g-alice", HUMAN, "ex-1").await;
    // Subjects the login may not store, and what the refusal says.
    let own_mission = subject_by("coder3", 2, Some("m3"), "run-c3");
    let their_mission = subject_by("coder3", 2, Some("m-17"), "run-c3");
    // Stored by the superuser with no role set, whom the database does not bind, to try the
    // moves.
    for s in [&own_mission, &their_mission] {
        t.raw(&put_calls(Table::Subjects, "coder3", "producer", s)[0])
            .await
            .unwrap();
    }
    let to = |s: &serde_json::Value| ExecutionHead {
        subject_digest: subject_digest(s),
        generation: 2,
    };
    let mut decision_policy = human(&s1, &subject_digest(&subject("ex-9", 1)));
    decision_policy["id"] = json!("hd-stale-policy");
    let current_policy =
        verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let mut decision_role = human(&s1, &current_policy);
    decision_role["id"] = json!("hd-not-human");
    decision_role["role"] = json!("reviewer");
    let seq = head_seq(&t).await;
    let mut refused = Vec::new();
    let mut fresh_own = own_mission.clone();
    fresh_own["producer"]["run"] = json!("run-c3-fresh");
    for sql in put_calls(Table::Subjects, "coder3", "producer", &fresh_own) {
        refused.push((0, sql, "does not change its execution's mission"));
    }
    refused.push((
        0,
        cas_execution(
            "coder3",
            "producer",
            "ex-1",
            1,
            Some(&at_1),
            &to(&own_mission),
        ),
        "does not change its execution's mission",
    ));
    for sql in put_calls(
        Table::CheckEvidence,
        "coder3",
        "producer",
        &evidence_by(&s1, "ev-c3", "coder3", "producer"),
    ) {
        refused.push((0, sql, "did not produce subject"));
    }
    for sql in put_calls(
        Table::CheckEvidence,
        PRODUCER,
        "producer",
        &evidence_by(&s1, "ev-own", PRODUCER, "producer"),
    ) {
        refused.push((1, sql, "holds no write grant in force"));
    }
    for sql in put_calls(Table::HumanDecisions, HUMAN, "human", &decision_policy) {
        refused.push((2, sql, "is no gate's current policy"));
    }
    // The store would not parse such a decision; its key is its digest. Since schema 24 the
    // role's schema (`human` only) refuses it before the check of schema 21 is reached.
    let role_key = verdict_store::records::row_digest(
        Table::HumanDecisions.domain(),
        canonical(&decision_role).as_bytes(),
    );
    let by_schema = put_calls_keyed(
        Table::HumanDecisions,
        HUMAN,
        "human",
        &decision_role,
        role_key.as_str(),
    );
    let conns = [&mut coder3, &mut coder, &mut alice];
    for (which, sql, says) in &refused {
        let (code, err) = try_sql_state(conns[*which], sql).await.expect_err(sql);
        assert!(err.contains(says) && code == "42501", "{sql}: {code} {err}");
    }
    for sql in &by_schema {
        let (code, err) = try_sql_state(conns[2], sql).await.expect_err(sql);
        assert!(
            err.contains("does not conform to its schema: /role") && code == "22023",
            "{sql}: {code} {err}"
        );
    }
    nothing_appended(&t, seq).await;

    // A grant on the mission the execution keeps still does not take it over.
    t.store
        .add_grant(&op, &mission_grant("g-m17", "coder3", "m-17"))
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let mut fresh_theirs = their_mission.clone();
    fresh_theirs["producer"]["run"] = json!("run-c3-fresh");
    let mut takeovers: Vec<String> =
        put_calls(Table::Subjects, "coder3", "producer", &fresh_theirs).into();
    takeovers.push(cas_execution(
        "coder3",
        "producer",
        "ex-1",
        1,
        Some(&at_1),
        &to(&their_mission),
    ));
    for sql in &takeovers {
        let (code, err) = try_sql_state(conns[0], sql).await.expect_err(sql);
        assert!(
            err.contains("takes it over only with a write grant in force on the execution itself")
                && code == "42501",
            "{sql}: {code} {err}"
        );
    }
    nothing_appended(&t, seq).await;

    // Handed over by a grant on the execution's id: taken, the mission kept.
    grant_write(t.store.as_ref(), "g-ex1-c3", "coder3", "ex-1").await;
    for sql in &takeovers {
        try_sql(conns[0], sql).await.unwrap();
    }
    let at_2 = to(&their_mission);
    // Within generation 2, on to another subject; back to the one it left is refused.
    let mut next = their_mission.clone();
    next["producer"]["run"] = json!("run-c3-next");
    try_sql(
        conns[0],
        &put_calls(Table::Subjects, "coder3", "producer", &next)[0],
    )
    .await
    .unwrap();
    let at_next = to(&next);
    try_sql(
        conns[0],
        &cas_execution("coder3", "producer", "ex-1", 2, Some(&at_2), &at_next),
    )
    .await
    .unwrap();
    let seq = head_seq(&t).await;
    let (code, err) = try_sql_state(
        conns[0],
        &cas_execution("coder3", "producer", "ex-1", 3, Some(&at_next), &at_2),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("only moves forward") && code == "42501",
        "{code} {err}"
    );
    nothing_appended(&t, seq).await;
    // Its own evidence, under its grant, is taken.
    try_sql(
        conns[0],
        &put_calls(
            Table::CheckEvidence,
            "coder3",
            "producer",
            &evidence_by(&at_next.subject_digest, "ev-c3-own", "coder3", "producer"),
        )[0],
    )
    .await
    .unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    for conn in [coder3, coder, alice] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

/// A store opened through a runner's own login cannot act as `<prefix>system`, which records
/// denials (schema version 22): the denial of a refusal it met is recorded through
/// put_own_denial, exactly once and naming the runner. By hand, the runner's login cannot make
/// that routine write a denial naming anyone else, in another role, with a token fingerprint,
/// another code, an extra member or an invented time, nor write through the system's routine;
/// each refusal appends nothing, and the chain still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_login_records_its_own_denial_and_no_one_elses() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    let (mut conn, login) = principal_login(&t, RUNNER, Role::Runner).await;
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let as_runner = verdict_store::open_with(
        &Location::Postgres(url.replacen("postgres@", &format!("{login}@"), 1)),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 2,
        },
    )
    .await
    .unwrap();
    let now = t.store.now().await.unwrap();
    let own = |seed: &str, principal: &str, role: &str| {
        let mut v = denial(principal, Some(role), seed);
        v["at"] = json!(now.as_str());
        v
    };
    let system = Actor::system("verdict-engine");

    let seq = head_seq(&t).await;
    let stored = as_runner
        .put(&system, DocKind::Denial, &own("own-1", RUNNER, "runner"))
        .await
        .unwrap();
    assert!(stored.inserted);
    let events = t.store.audit_events(seq, 10).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].table, "denials");
    let last = t.store.denials(0, 10_000).await.unwrap().pop().unwrap();
    assert_eq!(last.value().unwrap()["principal"], RUNNER);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);

    // Through the store: a denial naming the operator, or the runner in another role.
    let seq = head_seq(&t).await;
    for doc in [
        own("other-1", OPERATOR, "operator"),
        own("other-2", RUNNER, "operator"),
    ] {
        let err = as_runner
            .put(&system, DocKind::Denial, &doc)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("records only the denials of"),
            "{err}"
        );
    }
    // By hand, through the runner's login.
    let call = |doc: &serde_json::Value| {
        let body = canonical(doc);
        let digest = verdict_store::records::row_digest(Table::Denials.domain(), body.as_bytes());
        format!(
            "SELECT r_seq FROM verdict.put_own_denial('{digest}', '{digest}', '{}')",
            body.replace('\'', "''")
        )
    };
    let mut fingerprinted = own("fp", RUNNER, "runner");
    fingerprinted["token_fingerprint"] = json!("0123abcd");
    let mut unauthenticated = denial("unauthenticated", None, "un");
    unauthenticated["at"] = json!(now.as_str());
    let mut other_code = own("code", RUNNER, "runner");
    other_code["code"] = json!("conflict");
    let mut extra = own("extra", RUNNER, "runner");
    extra["subject_digest"] = json!(d("s"));
    let mut long = own("long", RUNNER, "runner");
    long["action"] = json!("a".repeat(1025));
    let mut old = own("old", RUNNER, "runner");
    old["at"] = json!("2020-01-01T00:00:00Z");
    for (doc, why) in [
        (
            own("other-3", VERIFIER, "verifier"),
            "records only the denials of",
        ),
        (fingerprinted, "not a denial of an authenticated principal"),
        (
            unauthenticated,
            "not a denial of an authenticated principal",
        ),
        (other_code, "outside its bounds"),
        (extra, "not a denial of an authenticated principal"),
        (long, "outside its bounds"),
        (old, "not the database's time"),
    ] {
        let err = try_sql(&mut conn, &call(&doc)).await.unwrap_err();
        assert!(err.contains(why), "{doc}: {err}");
    }
    // The system's own routine, and any other table, stay closed to the runner's login.
    for sql in put_calls(
        Table::Denials,
        "verdict-engine",
        "system",
        &own("sys", RUNNER, "runner"),
    ) {
        let err = try_sql(&mut conn, &sql).await.unwrap_err();
        assert!(
            err.contains("permission denied for function"),
            "{sql}: {err}"
        );
    }
    let err = try_sql(
        &mut conn,
        "INSERT INTO verdict.denials (seq, key, digest, body) VALUES (0, 'k', 'd', '{}')",
    )
    .await
    .unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    conn.close().await.unwrap();
    // The engine's identity, which acts for no principal and writes nothing (schema 19), records
    // nothing through it either: it may not even reach the schema.
    let err = t
        .raw(&format!(
            "SET ROLE \"{}engine\"; {}",
            t.prefix,
            call(&own("engine", RUNNER, "runner"))
        ))
        .await
        .unwrap_err();
    assert!(
        err.contains("permission denied") || err.contains("writes nothing (schema 19)"),
        "{err}"
    );
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// Schema 27: a producer's own login names in a subject only stored bytes it may read: ones it
/// put, or ones a subject of an execution it holds a grant on names. Naming another
/// execution's bytes by their digest is refused (`42501`) and appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_login_names_only_bytes_it_may_read() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let (mut mallory, _) = principal_login(&t, "mallory", Role::Producer).await;
    let (mut reader, _) = principal_login(&t, "coder2", Role::Producer).await;
    register(t.store.as_ref(), PRODUCER, Role::Producer).await;
    grant_write(t.store.as_ref(), "g-coder-ex1", PRODUCER, "ex-1").await;
    grant_mission_write(t.store.as_ref(), "g-coder-m17", PRODUCER, "m-17").await;
    grant_write(t.store.as_ref(), "g-mallory", "mallory", "ex-evil").await;
    grant_write(t.store.as_ref(), "g-coder2", "coder2", "ex-2").await;
    let secret = b"the bytes of ex-1";
    let digest = verdict_core::digest::raw(secret);
    t.store
        .put_blob(&Actor::new(PRODUCER, Role::Producer), secret, None)
        .await
        .unwrap();
    // Only ex-1 is in a mission (m-17, kept from populate's subject), which its producer
    // names under a write grant on it (schema 31).
    let naming = |execution: &str, producer: &str, run: &str| {
        let mut s = subject(execution, 1);
        s["producer"] = json!({"principal": producer, "run": run});
        s["resources"][0]["digest"] = json!(digest.as_str());
        if execution != "ex-1" {
            s.as_object_mut().unwrap().remove("mission");
        }
        s
    };
    t.store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &naming("ex-1", PRODUCER, "run-1"),
        )
        .await
        .unwrap();

    let seq = head_seq(&t).await;
    for sql in put_calls(
        Table::Subjects,
        "mallory",
        "producer",
        &naming("ex-evil", "mallory", "run-m"),
    ) {
        let (code, err) = try_sql_state(&mut mallory, &sql).await.expect_err(&sql);
        assert!(
            code == "42501" && err.contains("which it did not put"),
            "{sql}: {code} {err}"
        );
    }
    // coder2 may not either, until it holds a grant on ex-1, whose subject names the bytes.
    let theirs = put_calls(
        Table::Subjects,
        "coder2",
        "producer",
        &naming("ex-2", "coder2", "run-2"),
    );
    let (code, _) = try_sql_state(&mut reader, &theirs[0])
        .await
        .expect_err("no grant on ex-1 yet");
    assert_eq!(code, "42501");
    nothing_appended(&t, seq).await;
    t.store
        .add_grant(
            &op,
            &GrantRecord {
                grant_id: "g-coder2-read".parse().unwrap(),
                principal: "coder2".parse().unwrap(),
                scope: GrantScope {
                    kind: ScopeKind::Execution,
                    id: "ex-1".parse().unwrap(),
                },
                access: Access::Read,
                expires_at: "2099-01-01T00:00:00Z".parse().unwrap(),
            },
        )
        .await
        .unwrap();
    try_sql(&mut reader, &theirs[0]).await.unwrap();

    // Schema 44: mallory writes the digest into a criterion of its own subject (naming no
    // bytes, so the subject is taken), and names, as a resource, bytes not stored yet, which
    // coder then stores: its own login reads neither, since no subject it may read names the
    // first and vouches for the second.
    let blobs_read =
        |digest: String| format!("SELECT count(*) FROM verdict.blobs WHERE key = '{digest}'");
    let later = b"bytes coder stores later";
    let later_digest = verdict_core::digest::raw(later);
    let mut citing = naming("ex-evil", "mallory", "run-c");
    citing["resources"][0]["digest"] = json!(later_digest.as_str());
    citing["criteria"]["items"][0]["text"] = json!(format!("see {digest}"));
    try_sql(
        &mut mallory,
        &put_calls(Table::Subjects, "mallory", "producer", &citing)[0],
    )
    .await
    .unwrap();
    t.store
        .put_blob(&Actor::new(PRODUCER, Role::Producer), later, None)
        .await
        .unwrap();
    assert_eq!(
        count_as(&mut mallory, &blobs_read(digest.to_string())).await,
        0
    );
    assert_eq!(
        count_as(&mut mallory, &blobs_read(later_digest.to_string())).await,
        0
    );
    // coder2, whose subject names the first bytes under its read grant on ex-1, reads them.
    assert_eq!(
        count_as(&mut reader, &blobs_read(digest.to_string())).await,
        1
    );

    // Having put the same bytes itself (recorded as a holder, the bytes kept once), mallory
    // may name them.
    let before = head_seq(&t).await;
    let again = t
        .store
        .put_blob(&Actor::new("mallory", Role::Producer), secret, None)
        .await
        .unwrap();
    assert!(!again.inserted);
    // And, as a holder, read them (schema 44: the read policy compared the holder's own
    // columns, so a holder never could).
    assert_eq!(
        count_as(&mut mallory, &blobs_read(digest.to_string())).await,
        1
    );
    let events = t.store.audit_events(before, 10).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].table, "blob_holders");
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) FROM verdict.blobs WHERE key = '{digest}'"
        ))
        .await,
        1,
        "the bytes are kept once"
    );
    try_sql(
        &mut mallory,
        &put_calls(
            Table::Subjects,
            "mallory",
            "producer",
            &naming("ex-evil", "mallory", "run-m"),
        )[0],
    )
    .await
    .unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// The audit chain's lock (schema version 28) is one only the write routines take: a
/// principal's own login can neither lock the chain's table nor call the routine that does,
/// and holding the old advisory key in an idle session no longer holds up anyone's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_login_cannot_hold_the_chains_lock() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    let (mut conn, _login) = principal_login(&t, HUMAN, Role::Human).await;
    for sql in [
        "BEGIN; LOCK TABLE verdict.chain_lock IN EXCLUSIVE MODE",
        "BEGIN; LOCK TABLE verdict.chain_lock IN ACCESS SHARE MODE",
        "BEGIN; SELECT verdict.take_chain_lock()",
    ] {
        let err = conn.execute(sql).await.unwrap_err();
        assert!(
            err.to_string().contains("permission denied"),
            "{sql}: {err}"
        );
        conn.execute("ROLLBACK").await.unwrap();
    }
    // No routine takes the advisory key any more.
    let (left,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_proc WHERE pronamespace = 'verdict'::regnamespace \
         AND prosrc LIKE '%pg_advisory%'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(left, 0);
    // The old key, held by the human's idle session, blocks no write.
    conn.execute("SELECT pg_advisory_lock(8531478330712965377)")
        .await
        .unwrap();
    let write = register(t.store.as_ref(), "written-meanwhile", Role::Runner);
    tokio::time::timeout(std::time::Duration::from_secs(20), write)
        .await
        .expect("a write waited on a lock a principal's login holds");
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// A write the login may not make as the identity it asks for (a service login that is not a
/// member of `<prefix>system`, holding the webhook duty) is refused, and the connection it was
/// refused on goes back to the pool outside any transaction: the next write on it, as a
/// principal the login does act for, succeeds. Before `begin_as` set the identity ahead of its BEGIN,
/// the refused `SET LOCAL ROLE` left that connection in an aborted transaction and every later
/// statement on it failed (SQLSTATE 25P02).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_its_identity_leaves_the_connection_usable() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    let login = format!("{}svc_only", t.prefix);
    t.raw(&format!(
        "CREATE ROLE \"{login}\" LOGIN IN ROLE \"{}service\"",
        t.prefix
    ))
    .await
    .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    // One connection: whatever the refusal leaves on it, the next write meets.
    let store = verdict_store::open_with(
        &Location::Postgres(url),
        &OpenOptions {
            migrate: false,
            role_prefix: Some(t.prefix.clone()),
            max_connections: 1,
        },
    )
    .await
    .unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let runner = Actor::new(RUNNER, Role::Runner);
    for n in 0..3 {
        let err = store
            .queue()
            .hold_duty(
                &Actor::system(verdict_store::actor::ENGINE_PRINCIPAL),
                verdict_store::Duty::WebhookDelivery,
                "holder",
                std::time::Duration::from_secs(60),
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("permission denied to set role"),
            "{err}"
        );
        let before = head_seq(&t).await;
        store
            .put_batch(
                &runner,
                &[(
                    DocKind::Evidence,
                    evidence(&s, &format!("ev-after-refusal-{n}")),
                )],
            )
            .await
            .unwrap();
        assert_eq!(head_seq(&t).await, before + 1);
    }
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// A change of `principal`'s token (schema version 30): its `n`th, to `token` (none revokes).
fn token_change(principal: &str, n: u64, token: Option<&str>) -> serde_json::Value {
    let mut change = json!({
        "principal": principal, "n": n, "changed_at": "2026-12-01T00:00:00Z", "reason": "test",
    });
    if let Some(token) = token {
        change["token_sha256"] = json!(token_sha256(token).to_string());
    }
    change
}

/// Schema 30: the database itself holds who may change a token. A producer's own login calling
/// the routine directly may replace its own token and nothing else: revoking it, or revoking or
/// replacing a runner's (naming itself or the runner as the writer), is refused with 42501 and
/// appends nothing. An operator's login replaces the runner's token; after each change only the
/// token it names authenticates, and a hash held before is never taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_or_the_principal_itself_changes_a_token_in_the_database() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    let (mut conn, _) = principal_login(&t, PRODUCER, Role::Producer).await;
    let seq = head_seq(&t).await;
    let one = |principal: &str, role: &str, doc: &serde_json::Value| {
        let [one, ..] = put_calls(Table::CredentialChanges, principal, role, doc);
        one
    };
    for (writer, role, doc) in [
        (PRODUCER, "producer", token_change(RUNNER, 1, Some("new"))),
        (PRODUCER, "producer", token_change(RUNNER, 1, None)),
        (PRODUCER, "producer", token_change(PRODUCER, 1, None)),
        (RUNNER, "runner", token_change(RUNNER, 1, Some("new"))),
        (OPERATOR, "operator", token_change(RUNNER, 1, None)),
    ] {
        let sql = one(writer, role, &doc);
        let (code, err) = try_sql_state(&mut conn, &sql).await.unwrap_err();
        assert_eq!(code, "42501", "{sql}: {err}");
    }
    // There is no routine for batches of changes, and no role writes the table directly.
    let [_, batch, _] = put_calls(
        Table::CredentialChanges,
        PRODUCER,
        "producer",
        &token_change(PRODUCER, 1, Some("new")),
    );
    assert!(try_sql(&mut conn, &batch).await.is_err());
    let err = try_sql(&mut conn, "SELECT count(*) FROM verdict.credential_changes")
        .await
        .unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    nothing_appended(&t, seq).await;

    // Its own replacement goes through; its old token finds nobody, the new one finds it.
    let own = format!("token-of-{PRODUCER}");
    let found = |token: String| {
        let store = t.store.clone();
        async move {
            store
                .principal_by_token_hash(&token_sha256(&token))
                .await
                .unwrap()
                .map(|p| p.name.to_string())
        }
    };
    assert_eq!(found(own.clone()).await.as_deref(), Some(PRODUCER));
    try_sql(
        &mut conn,
        &one(
            PRODUCER,
            "producer",
            &token_change(PRODUCER, 1, Some("fresh")),
        ),
    )
    .await
    .unwrap();
    assert_eq!(found(own).await, None);
    assert_eq!(found("fresh".into()).await.as_deref(), Some(PRODUCER));
    // A hash held before (its own first token) is refused, as is a number out of turn, and
    // (schema 44) a time the store's reader would refuse, which `audit verify` would then
    // report as a modified row for good.
    let timed = |at: &str| {
        let mut doc = token_change(PRODUCER, 2, Some("later"));
        doc["changed_at"] = json!(at);
        doc
    };
    let by_key = |doc: serde_json::Value| {
        let [one, ..] = put_calls_keyed(
            Table::CredentialChanges,
            PRODUCER,
            "producer",
            &doc,
            &format!("{PRODUCER}#2"),
        );
        one
    };
    for sql in [
        one(
            PRODUCER,
            "producer",
            &token_change(PRODUCER, 2, Some(&format!("token-of-{PRODUCER}"))),
        ),
        one(
            PRODUCER,
            "producer",
            &token_change(PRODUCER, 3, Some("later")),
        ),
        by_key(timed("yesterday")),
        by_key(timed("2026-12-01 00:00:00+00")),
        by_key(timed("2026-02-30T00:00:00Z")),
        by_key(timed("2026-12-01T23:59:60Z")),
    ] {
        let (code, err) = try_sql_state(&mut conn, &sql).await.unwrap_err();
        assert_eq!(code, "22023", "{sql}: {err}");
    }
    // The same change at a time the reader takes is taken.
    try_sql(&mut conn, &by_key(timed("2026-12-01T23:59:59.5Z")))
        .await
        .unwrap();
    conn.close().await.unwrap();

    // An operator's login revokes the runner's token, then gives it a new one.
    let (mut ops, _) = principal_login(&t, OPERATOR, Role::Operator).await;
    let runner = format!("token-of-{RUNNER}");
    assert_eq!(found(runner.clone()).await.as_deref(), Some(RUNNER));
    try_sql(
        &mut ops,
        &one(OPERATOR, "operator", &token_change(RUNNER, 1, None)),
    )
    .await
    .unwrap();
    assert_eq!(found(runner.clone()).await, None);
    try_sql(
        &mut ops,
        &one(
            OPERATOR,
            "operator",
            &token_change(RUNNER, 2, Some("runner's next")),
        ),
    )
    .await
    .unwrap();
    assert_eq!(found(runner).await, None);
    assert_eq!(found("runner's next".into()).await.as_deref(), Some(RUNNER));
    ops.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema version 34, through a human's own login with the grant it needs, on the current
/// subject and policy: an approval that does not name the human_required reasons it clears
/// (no `clears`, or `clears` null) would clear every one of them, those that appear after it
/// too, so it is refused (42501) by either routine and nothing is appended; `clears` on a
/// rejection, or naming a reason twice, breaks the schema (22023). An approval that names what
/// it clears, and a rejection, are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_humans_login_cannot_append_an_approval_that_names_nothing_it_clears() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let s1 = subject_digest(&subject("ex-1", 1));
    let current_policy =
        verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let (mut alice, _) = principal_login(&t, HUMAN, Role::Human).await;
    grant_write(t.store.as_ref(), "g-alice", HUMAN, "ex-1").await;
    let mut named = human(&s1, &current_policy);
    assert!(named["clears"].is_array());
    named["id"] = json!("hd-named");
    let mut bare = named.clone();
    bare.as_object_mut().unwrap().remove("clears");
    bare["id"] = json!("hd-bare");
    let mut null = named.clone();
    null["clears"] = json!(null);
    null["id"] = json!("hd-null");
    let mut reject_naming = named.clone();
    reject_naming["decision"] = json!("reject");
    reject_naming["id"] = json!("hd-reject-naming");
    let mut twice = named.clone();
    twice["clears"] = json!([{"code": "human_review_required"}, {"code": "human_review_required"}]);
    twice["id"] = json!("hd-twice");

    let seq = head_seq(&t).await;
    for doc in [&bare, &null] {
        for sql in put_calls(Table::HumanDecisions, HUMAN, "human", doc) {
            let (code, err) = try_sql_state(&mut alice, &sql).await.expect_err(&sql);
            assert!(
                err.contains("an approval names the human_required reasons it clears")
                    && code == "42501",
                "{sql}: {code} {err}"
            );
        }
    }
    for (doc, says) in [(&reject_naming, "/"), (&twice, "/clears")] {
        for sql in put_calls(Table::HumanDecisions, HUMAN, "human", doc) {
            let (code, err) = try_sql_state(&mut alice, &sql).await.expect_err(&sql);
            assert!(
                err.contains(&format!("does not conform to its schema: {says}")) && code == "22023",
                "{sql}: {code} {err}"
            );
        }
    }
    nothing_appended(&t, seq).await;

    // Named, the approval is stored; a rejection names nothing and is stored too.
    let mut reject = bare.clone();
    reject["decision"] = json!("reject");
    reject["id"] = json!("hd-reject");
    for doc in [&named, &reject] {
        try_sql(
            &mut alice,
            &put_calls(Table::HumanDecisions, HUMAN, "human", doc)[1],
        )
        .await
        .unwrap();
    }
    assert_eq!(head_seq(&t).await, seq + 2);
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Schema 35: the database itself keeps an operator holding a token. The operator's own login,
/// calling the routine directly, cannot revoke its token while it is the only operator holding
/// one (SQLSTATE VRA01, nothing appended), nor once another operator's token is revoked and it
/// is the last again; it may rotate its own, and revoke another operator's while it holds one.
/// The store reads the refusal as [`StoreError::LastOperator`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_own_login_cannot_revoke_the_last_operators_token() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut ops, _) = principal_login(&t, OPERATOR, Role::Operator).await;
    let one = |whose: &str, n: u64, token: Option<&str>| {
        let [one, ..] = put_calls(
            Table::CredentialChanges,
            OPERATOR,
            "operator",
            &token_change(whose, n, token),
        );
        one
    };
    let refused = |(code, err): (String, String)| {
        assert_eq!(code, "VRA01", "{err}");
        assert!(
            err.contains(&format!(
                "operator \"{OPERATOR}\" would leave no operator holding a token"
            )),
            "{err}"
        );
    };
    // The other operator populate stored loses its token: this one is now the last.
    try_sql(&mut ops, &one(GATEKEEPER, 1, None)).await.unwrap();
    let seq = head_seq(&t).await;
    refused(
        try_sql_state(&mut ops, &one(OPERATOR, 1, None))
            .await
            .unwrap_err(),
    );
    nothing_appended(&t, seq).await;
    // A rotation leaves a token.
    try_sql(&mut ops, &one(OPERATOR, 1, Some("operator's next")))
        .await
        .unwrap();
    // With a second operator holding a token, that one's may be revoked; then this is the last.
    register(t.store.as_ref(), "second-operator", Role::Operator).await;
    try_sql(&mut ops, &one("second-operator", 1, None))
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    refused(
        try_sql_state(&mut ops, &one(OPERATOR, 2, None))
            .await
            .unwrap_err(),
    );
    nothing_appended(&t, seq).await;
    ops.close().await.unwrap();
    // Through the store, the same refusal, typed.
    let err = t
        .store
        .change_token(
            &Actor::new(OPERATOR, Role::Operator),
            OPERATOR,
            None,
            &"2026-12-01T00:00:00Z".parse().unwrap(),
            "leaving",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, verdict_store::StoreError::LastOperator(_)),
        "{err}"
    );
    nothing_appended(&t, seq).await;
    t.cleanup().await;
}

/// The body and calls of a principal `name` in `role`, added by `OPERATOR`.
fn principal_calls(name: &str, role: &str) -> [String; 3] {
    let doc = json!({
        "name": name, "role": role,
        "token_sha256": token_sha256(&format!("token-of-{name}")).to_string(),
    });
    put_calls_keyed(Table::Principals, OPERATOR, "operator", &doc, name)
}

/// Schema 35: the database holds a new principal's name to the engine's rules. An operator's
/// own login calling put_one_principals and put_principals by hand with `оperator` (a Cyrillic
/// `о`), or with a look-alike of a stored principal (`0perator` beside `operator`, `ci_runner`
/// beside `ci-runner`), is refused (22023) naming why, and nothing is appended; an honest name
/// is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_own_login_cannot_add_a_name_that_passes_for_another() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "operator", Role::Operator).await;
    register(t.store.as_ref(), "ci-runner", Role::Runner).await;
    let (mut ops, _) = principal_login(&t, OPERATOR, Role::Operator).await;
    let seq = head_seq(&t).await;
    for (name, why) in [
        ("\u{43e}perator", "may hold only ASCII letters"),
        ("agent coder", "may hold only ASCII letters"),
        ("0perator", "reads like principal \"operator\""),
        ("OPERATOR", "reads like principal \"operator\""),
        ("ci_runner", "reads like principal \"ci-runner\""),
        ("c1-runner", "reads like principal \"ci-runner\""),
    ] {
        for sql in principal_calls(name, "operator") {
            let (code, err) = try_sql_state(&mut ops, &sql).await.unwrap_err();
            assert_eq!(code, "22023", "{name}: {err}");
            assert!(err.contains(why), "{name}: {err}");
        }
        assert!(t.store.principal(name).await.unwrap().is_none());
    }
    nothing_appended(&t, seq).await;
    let [one, ..] = principal_calls("operator-3", "human");
    try_sql(&mut ops, &one).await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    ops.close().await.unwrap();
    t.cleanup().await;
}

/// Schema 35: `verdict._name_skeleton` is verdict-core's `name_skeleton` written in SQL. Over
/// generated names (every mapped character and mark, `rn` and `vv` runs, case, other ASCII and
/// letters of other scripts) the database and the code give the same skeleton.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_computes_the_name_skeleton_as_the_code_does() {
    use proptest::strategy::{Strategy as _, ValueTree as _};
    use proptest::test_runner::{Config, TestRunner};
    use verdict_core::contracts::primitives::name_skeleton;
    let t = postgres().await;
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let strategy = proptest::string::string_regex(
        "(rn|vv|rrnn|vvv|[A-Za-z0-9]|[01il|5IOLS_.@+-]|\u{43e}|\u{3bf}|\u{e9}| ){0,24}",
    )
    .unwrap();
    let mut runner = TestRunner::new(Config::default());
    let mut names: Vec<String> = [
        "", "operator", "0perator", "OPERATOR", "admln", "rnrn", "vvvv", "rvvn", "r n", "I1il|",
        "_-.", "5S5s",
    ]
    .map(str::to_owned)
    .to_vec();
    for _ in 0..4000 {
        names.push(strategy.new_tree(&mut runner).unwrap().current());
    }
    let from_db: Vec<String> = sqlx::query_scalar(
        "SELECT verdict._name_skeleton(n) FROM unnest($1::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i",
    )
    .bind(&names)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(from_db.len(), names.len());
    for (name, db) in names.iter().zip(&from_db) {
        assert_eq!(db, &name_skeleton(name), "{name:?}");
    }
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// Schema 35: on a store that keeps a manual clock, the database applies a grant's expiry at
/// the store's time, as the engine does. A runner's and a human's own logins, naming a store's
/// time past their write grants' expiry, file evidence and record a decision by hand: refused
/// (no write grant in force), nothing appended. Naming a time before the expiry, the same
/// calls are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_expired_at_a_manual_stores_time_lets_no_login_write() {
    let t = postgres().await;
    let store = t.store.as_ref();
    let op = Actor::new(OPERATOR, Role::Operator);
    populate_on_a_manual_clock(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let expiry: verdict_core::contracts::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
    for (id, who, role) in [
        ("g-runner-exp", RUNNER, Role::Runner),
        ("g-alice-exp", HUMAN, Role::Human),
    ] {
        register(store, who, role).await;
        store
            .add_grant(
                &op,
                &GrantRecord {
                    expires_at: expiry.clone(),
                    ..write_grant(id, who, "ex-1")
                },
            )
            .await
            .unwrap();
    }
    let mut conns = vec![
        principal_login(&t, RUNNER, Role::Runner).await.0,
        principal_login(&t, HUMAN, Role::Human).await.0,
    ];
    let mut decision = human(&s, &p);
    decision["id"] = json!("hd-in-time");
    let cases = [
        (
            0,
            put_calls(
                Table::CheckEvidence,
                RUNNER,
                "runner",
                &evidence(&s, "ev-in-time"),
            ),
        ),
        (
            1,
            put_calls(Table::HumanDecisions, HUMAN, "human", &decision),
        ),
    ];
    // A second past the expiry at the store's time: refused, nothing appended.
    for conn in &mut conns {
        name_time(conn, &shifted(&expiry, 1)).await;
    }
    let seq = head_seq(&t).await;
    for (which, calls) in &cases {
        for sql in calls {
            let err = try_sql(&mut conns[*which], sql).await.expect_err(sql);
            assert!(
                err.contains("holds no write grant in force"),
                "{sql}: {err}"
            );
        }
    }
    nothing_appended(&t, seq).await;
    // A second before it: taken.
    for conn in &mut conns {
        name_time(conn, &shifted(&expiry, -1)).await;
    }
    for (which, calls) in &cases {
        try_sql(&mut conns[*which], &calls[0]).await.unwrap();
    }
    assert_eq!(head_seq(&t).await, seq + 2);
    for conn in conns {
        conn.close().await.unwrap();
    }
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Schema 35: a principal's own login that writes in an open transaction and then stays idle
/// holds the chain's lock only until another write waits for it more than the bound: that
/// writer ends the idle session (its transaction rolled back, so nothing of its write is
/// stored) and completes; the chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_idle_in_a_transaction_holding_the_chain_is_ended_by_the_next_writer() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    let (mut idle, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let s = subject_digest(&subject("ex-1", 1));
    let [one, ..] = put_calls(
        Table::CheckEvidence,
        RUNNER,
        "runner",
        &evidence(&s, "ev-held-idle"),
    );
    let stored = format!(
        "SELECT count(*) FROM {} WHERE body LIKE '%ev-held-idle%'",
        t.table("check_evidence")
    );
    idle.execute("BEGIN").await.unwrap();
    try_sql(&mut idle, &one).await.unwrap();
    let seq = head_seq(&t).await;
    // Another principal's write, made while the runner's session sits idle holding the lock.
    let write = register(t.store.as_ref(), "written-meanwhile", Role::Human);
    tokio::time::timeout(std::time::Duration::from_secs(90), write)
        .await
        .expect("a write waited for a session idle in its transaction");
    assert_eq!(head_seq(&t).await, seq + 1);
    assert!(
        t.store
            .principal("written-meanwhile")
            .await
            .unwrap()
            .is_some()
    );
    // The idle session was ended, and its write with it.
    assert!(idle.execute("COMMIT").await.is_err());
    assert_eq!(t.count(&stored).await, 0);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema 43: a login holding the chain's lock in a statement that does not end (a write, then
/// a sleep, in one statement) holds it only until another write waits for it past the bound for
/// a transaction: that writer ends the session (its write rolled back) and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_holding_the_chain_in_a_statement_that_does_not_end_is_ended_by_the_next_writer() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    let (mut holder, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let s = subject_digest(&subject("ex-1", 1));
    let [one, ..] = put_calls(
        Table::CheckEvidence,
        RUNNER,
        "runner",
        &evidence(&s, "ev-held-active"),
    );
    let stored = format!(
        "SELECT count(*) FROM {} WHERE body LIKE '%ev-held-active%'",
        t.table("check_evidence")
    );
    let seq = head_seq(&t).await;
    // The write and a sleep far past the test's own wait, in one statement.
    let held = tokio::spawn(async move {
        let outcome = try_sql(&mut holder, &format!("{one}; SELECT pg_sleep(600)")).await;
        let again = try_sql(&mut holder, "SELECT 1").await;
        (outcome, again)
    });
    // Wait until the holder's statement holds the chain's lock.
    let holding = "SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a \
         ON a.pid = l.pid WHERE l.granted AND l.relation = 'verdict.chain_lock'::regclass \
         AND a.query LIKE '%pg_sleep(600)%'";
    let mut waited = 0;
    while t.count(holding).await == 0 {
        waited += 1;
        assert!(waited < 300, "the holder never took the chain's lock");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let write = register(t.store.as_ref(), "written-meanwhile", Role::Human);
    tokio::time::timeout(std::time::Duration::from_secs(120), write)
        .await
        .expect("a write waited for a session holding the chain in a statement that never ends");
    assert_eq!(head_seq(&t).await, seq + 1);
    let (outcome, again) = held.await.unwrap();
    assert!(outcome.is_err(), "the holder's statement ended normally");
    assert!(again.is_err(), "the holder's session was not ended");
    assert_eq!(t.count(&stored).await, 0);
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema 43: a writer is ended for holding the chain's lock, not for having waited for it. A
/// superuser's session (never ended) holds the lock for 12 seconds while a runner's login waits
/// to write; once it has the lock, that writer holds it a few seconds more (a sleep in its
/// statement) while another write waits: the writer whose transaction is older than the bound
/// but which held the lock briefly completes, and so does the write behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_waited_long_for_the_chain_is_not_ended_for_it() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), RUNNER, Role::Runner).await;
    grant_write(t.store.as_ref(), "g-runner", RUNNER, "ex-1").await;
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut superuser = sqlx::PgConnection::connect(url).await.unwrap();
    superuser.execute("BEGIN").await.unwrap();
    superuser
        .execute("LOCK TABLE verdict.chain_lock IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let (mut waiter, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let s = subject_digest(&subject("ex-1", 1));
    let [one, ..] = put_calls(
        Table::CheckEvidence,
        RUNNER,
        "runner",
        &evidence(&s, "ev-waited-long"),
    );
    let waited = tokio::spawn(async move {
        let outcome = try_sql(&mut waiter, &format!("{one}; SELECT pg_sleep(4)")).await;
        waiter.close().await.unwrap();
        outcome
    });
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    superuser.execute("COMMIT").await.unwrap();
    let holding = "SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a \
         ON a.pid = l.pid WHERE l.granted AND l.relation = 'verdict.chain_lock'::regclass \
         AND a.query LIKE '%pg_sleep(4)%'";
    let mut polls = 0;
    while t.count(holding).await == 0 {
        polls += 1;
        assert!(
            polls < 300,
            "the waiting writer never took the chain's lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Its transaction began over 10 seconds ago; it has held the lock for less than 4.
    register(t.store.as_ref(), "written-behind", Role::Human).await;
    waited.await.unwrap().unwrap();
    let stored = format!(
        "SELECT count(*) FROM {} WHERE body LIKE '%ev-waited-long%'",
        t.table("check_evidence")
    );
    assert_eq!(t.count(&stored).await, 1);
    assert!(t.store.principal("written-behind").await.unwrap().is_some());
    superuser.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// Schema 43: a verifier's own login writes its run's events only as the next of the run
/// (numbered from 1, one after the last) and nothing after the run's end, whatever status or
/// number it picks: an event numbered past the next (to be read before the real end), one
/// numbered 0, one after the end, a `completed` after an operator's cancellation. Each refusal
/// appends nothing. And a login that may not read a stored event or finding, offering other
/// bytes under its key, is refused as a record it may not read, told neither its body nor its
/// digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifiers_own_login_writes_its_runs_events_in_order_and_none_after_the_end() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = current_policy(&t).await;
    let req = t
        .store
        .put(
            &Actor::new(OPERATOR, Role::Operator),
            DocKind::Request,
            &engine_request(&s, 1, &p, None),
        )
        .await
        .unwrap()
        .digest;
    grant_write(t.store.as_ref(), "g-rev-2", "reviewer-2", "ex-1").await;
    let (mut rev, _) = principal_login(&t, "reviewer-2", Role::Verifier).await;
    for run in ["vrun-7", "vrun-8"] {
        let (admission, note) =
            self_admission("reviewer-2", run, req.as_str(), s.as_str(), 1, "reviewer");
        let [run_one, ..] = put_calls(Table::VerifierRuns, "reviewer-2", "verifier", &admission);
        let [note_one, ..] =
            put_calls(Table::VerificationRequests, "reviewer-2", "verifier", &note);
        try_sql(&mut rev, &format!("BEGIN; {run_one}; {note_one}; COMMIT"))
            .await
            .unwrap();
    }
    let event = |run: &str, n: u64, status: &str| match status {
        "unavailable" => {
            json!({"run_id": run, "n": n, "status": status, "reason": "grant_revoked"})
        }
        _ => json!({"run_id": run, "n": n, "status": status}),
    };
    let refused = |event: serde_json::Value, why: &'static str| {
        let key = format!("{}#{}", event["run_id"].as_str().unwrap(), event["n"]);
        (
            put_calls_keyed(Table::RunEvents, "reviewer-2", "verifier", &event, &key),
            why,
        )
    };
    let seq = head_seq(&t).await;
    for (calls, why) in [
        refused(
            event("vrun-7", 1000, "unavailable"),
            "not the next of its run",
        ),
        refused(event("vrun-7", 2, "started"), "not the next of its run"),
        refused(event("vrun-7", 0, "completed"), "not a run event"),
        refused(
            json!({"run_id": "vrun-7", "n": 1, "status": "completed", "reason": "timeout"}),
            "not a run event",
        ),
        refused(
            json!({"run_id": "vrun-7", "n": 1, "status": "won"}),
            "not a run event",
        ),
        refused(
            json!({"run_id": "vrun-7", "n": 1, "status": "started", "by": "me"}),
            "not a run event",
        ),
    ] {
        for sql in &calls {
            let err = try_sql(&mut rev, sql).await.expect_err(sql);
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    nothing_appended(&t, seq).await;
    // In order it is taken: started, then its end; after the end nothing, in any number.
    for (n, status) in [(1, "started"), (2, "completed")] {
        let [one, ..] = put_calls(
            Table::RunEvents,
            "reviewer-2",
            "verifier",
            &event("vrun-7", n, status),
        );
        try_sql(&mut rev, &one).await.unwrap();
    }
    let seq = head_seq(&t).await;
    for (calls, why) in [
        refused(event("vrun-7", 3, "unavailable"), "nothing follows its end"),
        refused(event("vrun-7", 3, "started"), "nothing follows its end"),
        refused(
            event("vrun-7", 1000, "cancelled"),
            "nothing follows its end",
        ),
    ] {
        for sql in &calls {
            let err = try_sql(&mut rev, sql).await.expect_err(sql);
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    nothing_appended(&t, seq).await;
    let run = t.store.run("vrun-7").await.unwrap().unwrap();
    assert!(run.in_order());
    assert_eq!(run.status(), Some(verdict_store::RunStatus::Completed));

    // An operator cancels the other run: the verifier's `completed` after it, or numbered 0 to
    // be read before it, is refused.
    t.store
        .record_run_status(
            &Actor::new(OPERATOR, Role::Operator),
            "vrun-8",
            verdict_store::RunStatus::Cancelled,
            None,
        )
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    for (calls, why) in [
        refused(event("vrun-8", 0, "completed"), "not a run event"),
        refused(event("vrun-8", 2, "completed"), "nothing follows its end"),
    ] {
        for sql in &calls {
            let err = try_sql(&mut rev, sql).await.expect_err(sql);
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
    nothing_appended(&t, seq).await;
    assert_eq!(
        t.store.run("vrun-8").await.unwrap().unwrap().status(),
        Some(verdict_store::RunStatus::Cancelled)
    );

    // Another verifier, with no grant and no run, offers other bytes under a stored event's
    // key, or under a stored finding's: refused as a record it may not read, with nothing of
    // it answered (neither body nor digest), and nothing appended.
    let (mut nosy, _) = principal_login(&t, "nosy", Role::Verifier).await;
    t.store
        .put(
            &Actor::new(VERIFIER, Role::Verifier),
            DocKind::Finding,
            &finding(&s, "f-secret", 1),
        )
        .await
        .unwrap();
    let seq = head_seq(&t).await;
    let other = event("vrun-7", 2, "cancelled");
    let mut guessed = finding(&subject_digest(&subject("ex-9", 1)), "f-secret", 1);
    guessed["remediation"] = json!("a guess");
    let calls = [
        put_calls_keyed(Table::RunEvents, "nosy", "verifier", &other, "vrun-7#2"),
        put_calls(Table::Findings, "nosy", "verifier", &guessed),
    ];
    for sql in calls.iter().flatten() {
        let err = try_sql(&mut nosy, sql).await.expect_err(sql);
        assert!(err.contains("may not read"), "{sql}: {err}");
        assert!(!err.contains("sha256:"), "{sql}: {err}");
    }
    nothing_appended(&t, seq).await;
    // The same bytes it would have written get them back, as before.
    let same = event("vrun-7", 2, "completed");
    let [one, ..] = put_calls(Table::RunEvents, "reviewer-2", "verifier", &same);
    let sql = one.replacen("SELECT r_seq", "SELECT r_body", 1);
    let (body,): (Option<String>,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_one(&mut rev)
        .await
        .unwrap();
    assert_eq!(body.as_deref(), Some(canonical(&same).as_str()));
    nosy.close().await.unwrap();
    rev.close().await.unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Schema 36: a principal's own login calling put_own_denial by hand, as fast as it can,
/// appends at most `DENIALS_PER_MINUTE` denials a minute: the next call is refused (VRD01,
/// naming the bound) and appends nothing, and the chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_appending_its_own_denials_by_hand_is_held_to_the_bound() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, _login) = principal_login(&t, RUNNER, Role::Runner).await;
    let now = t.store.now().await.unwrap();
    let call = |seed: &str| {
        let mut doc = denial(RUNNER, Some("runner"), seed);
        doc["at"] = json!(now.as_str());
        let body = canonical(&doc);
        let digest = verdict_store::records::row_digest(Table::Denials.domain(), body.as_bytes());
        format!(
            "SELECT r_seq FROM verdict.put_own_denial('{digest}', '{digest}', '{}')",
            body.replace('\'', "''")
        )
    };
    for n in 0..verdict_store::DENIALS_PER_MINUTE {
        try_sql(&mut conn, &call(&format!("own-{n}")))
            .await
            .unwrap();
    }
    let seq = head_seq(&t).await;
    let (state, message) = try_sql_state(&mut conn, &call("past")).await.unwrap_err();
    assert_eq!(state, "VRD01", "{message}");
    assert!(
        message.contains("were recorded within the last minute"),
        "{message}"
    );
    assert_eq!(head_seq(&t).await, seq);
    conn.close().await.unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    t.cleanup().await;
}

/// A call of `verdict.write` (schema 41) acting as `identity` (an SQL expression), appending
/// `records` (each a table and a record of it) as `principal` in `role`, with `job` (the job
/// arguments: the claim, its lease and the outcome ending it) and no jobs enqueued.
fn write_sql(
    identity: &str,
    principal: &str,
    role: &str,
    records: &[(Table, &serde_json::Value)],
    job: &str,
) -> String {
    let quoted = |items: Vec<String>| {
        let items: Vec<String> = items
            .into_iter()
            .map(|i| format!("'{}'", i.replace('\'', "''")))
            .collect();
        format!("ARRAY[{}]::text[]", items.join(", "))
    };
    let mut parts: [Vec<String>; 4] = Default::default();
    for (table, doc) in records {
        let body = canonical(doc);
        let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
        let key = verdict_store::records::key_of_value(*table, doc, &digest).unwrap();
        parts[0].push(table.name().to_owned());
        parts[1].push(key);
        parts[2].push(digest.to_string());
        parts[3].push(body);
    }
    let nulls = vec!["NULL"; records.len()].join(", ");
    let falses = vec!["false"; records.len()].join(", ");
    let [tables, keys, digests, bodies] = parts.map(quoted);
    format!(
        "SELECT r_seq FROM verdict.write({identity}, NULL, '{principal}', '{role}', {job}, \
         {tables}, {keys}, {digests}, {bodies}, ARRAY[{nulls}]::text[], ARRAY[{falses}]::boolean[], \
         NULL, NULL, NULL, NULL, 'jobs')"
    )
}

/// Schema 41: the one-statement write any login may call grants that login nothing. A
/// producer's own login, through it, cannot act as an identity it is no member of (an operator's
/// group role, another principal's role), call anything but a table's put routine, or leave a
/// part of a refused write behind; a runner's login cannot write or end a job under a claim
/// that was taken over; malformed calls are refused before anything is written. The same
/// writes of what each may store go through, and a login that may act as others acts as the
/// identity named for the write's own steps only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_statement_write_grants_its_caller_nothing() {
    use verdict_store::{JobKind, JobState, NewJob};
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    let (mut conn, login) = principal_login(&t, PRODUCER, Role::Producer).await;
    grant_write(store, "g-w", PRODUCER, "ex-9").await;
    grant_mission_write(store, "g-m", PRODUCER, "m-17").await;
    let own = subject("ex-9", 1);
    let minted = json!({
        "name": "mallory", "role": "operator",
        "token_sha256": token_sha256("mallory's token").to_string(),
    });
    let seq = head_seq(&t).await;
    let no_job = "NULL, NULL, NULL, NULL";
    let as_login = "NULL";
    let subject_only = [(Table::Subjects, &own)];
    // Another identity: an operators' group role, another principal's own.
    let others = [
        format!("'{}operator'", t.prefix),
        format!(
            "'{}'",
            verdict_store::principal_db_role(&t.prefix, &t.db, VERIFIER)
        ),
    ];
    let mut refused: Vec<(String, &str, &str)> = others
        .iter()
        .map(|identity| {
            (
                write_sql(identity, PRODUCER, "producer", &subject_only, no_job),
                "42501",
                "permission denied to set role",
            )
        })
        .collect();
    refused.extend([
        // Its own subject, then an operator it may not mint: the subject is not kept.
        (
            write_sql(
                as_login,
                PRODUCER,
                "producer",
                &[(Table::Subjects, &own), (Table::Principals, &minted)],
                no_job,
            ),
            "42501",
            "permission denied",
        ),
        // An outcome with no job.
        (
            write_sql(
                as_login,
                PRODUCER,
                "producer",
                &subject_only,
                "NULL, NULL, NULL, 'done'",
            ),
            "22023",
            "an outcome names no job",
        ),
    ]);
    for (sql, code, says) in &refused {
        let (found, err) = try_sql_state(&mut conn, sql).await.expect_err(sql);
        assert_eq!(found, *code, "{sql}: {err}");
        assert!(err.contains(says), "{sql}: {err}");
    }
    // Only a table's put routine, named as a table: no other routine, no splice.
    let call = write_sql(as_login, PRODUCER, "producer", &subject_only, no_job);
    for table in [
        "blobs",
        "own_denial",
        "subjects(text",
        "Subjects",
        "subjects; SELECT 1",
    ] {
        let sql = call.replacen("ARRAY['subjects']", &format!("ARRAY['{table}']"), 1);
        assert_ne!(sql, call);
        let (found, err) = try_sql_state(&mut conn, &sql).await.expect_err(&sql);
        assert_eq!(found, "22023", "{sql}: {err}");
        assert!(err.contains("no table"), "{sql}: {err}");
    }
    // Arrays of unequal lengths.
    let sql = call.replacen("ARRAY[NULL]::text[]", "ARRAY[NULL, NULL]::text[]", 1);
    assert_ne!(sql, call);
    let (found, err) = try_sql_state(&mut conn, &sql).await.expect_err(&sql);
    assert_eq!(found, "22023", "{sql}: {err}");
    nothing_appended(&t, seq).await;
    // What it may store, it stores, as itself.
    try_sql(&mut conn, &call).await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    let event = t.store.audit_events(seq, 1).await.unwrap();
    assert_eq!(
        (event[0].table.as_str(), event[0].principal.as_str()),
        ("subjects", PRODUCER)
    );
    conn.close().await.unwrap();

    // A runner's claim taken over: its write under the old token, ending the job, is refused
    // as stale and leaves nothing; under the current token it lands with the job's end.
    cover_requests(store, &["one-statement"], &[(RUNNER, Role::Runner)]).await;
    let (mut runner, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let q = store.queue();
    let op = Actor::new(OPERATOR, Role::Operator);
    q.enqueue_jobs(
        &op,
        &[NewJob {
            kind: JobKind::Checks,
            request: job_request("one-statement"),
            class: String::new(),
            deadline: None,
        }],
    )
    .await
    .unwrap();
    let as_runner = Actor::new(RUNNER, Role::Runner);
    let lease = std::time::Duration::from_secs(60);
    let first = q
        .claim_job(&as_runner, JobKind::Checks, "h-1", lease)
        .await
        .unwrap()
        .unwrap();
    // Taken over: the attempt fails with a retry a millisecond later, and the job is claimed
    // again once it is ready.
    let retry = std::time::Duration::from_millis(1);
    q.fail_job(
        &as_runner,
        first.id,
        first.fencing,
        "taken over",
        Some(retry),
    )
    .await
    .unwrap();
    let mut second = None;
    for _ in 0..500 {
        second = q
            .claim_job(&as_runner, JobKind::Checks, "h-2", lease)
            .await
            .unwrap();
        if second.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let second = second.expect("the job was never claimable again");
    assert_eq!((second.id, second.fencing), (first.id, first.fencing + 1));
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence(&s, "ev-one-statement");
    let seq = head_seq(&t).await;
    let under = |fencing: i64| {
        write_sql(
            as_login,
            RUNNER,
            "runner",
            &[(Table::CheckEvidence, &ev)],
            &format!("{}, {fencing}, 60000, 'done'", first.id),
        )
    };
    let (found, err) = try_sql_state(&mut runner, &under(first.fencing))
        .await
        .unwrap_err();
    assert_eq!(found, "VRJ01", "{err}");
    nothing_appended(&t, seq).await;
    assert_eq!(
        q.job(first.id).await.unwrap().unwrap().state,
        JobState::Running
    );
    try_sql(&mut runner, &under(second.fencing)).await.unwrap();
    assert_eq!(head_seq(&t).await, seq + 1);
    let done = q.job(first.id).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.outcome.as_deref()),
        (JobState::Done, Some("done"))
    );
    runner.close().await.unwrap();

    // A login that may act as others (the test's own, a superuser that no identity check
    // binds while it acts as itself) is bound while the write acts as an identity, and is
    // itself again after it, inside the same transaction.
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    let theirs = verdict_store::principal_db_role(&t.prefix, &t.db, VERIFIER);
    let second_subject = subject("ex-9", 2);
    let as_verifier = write_sql(
        &format!("'{theirs}'"),
        PRODUCER,
        "producer",
        &[(Table::Subjects, &second_subject)],
        no_job,
    );
    // As the verifier's identity, which may not write subjects at all (the superuser itself
    // could).
    let (found, err) = try_sql_state(&mut admin, &as_verifier).await.unwrap_err();
    assert_eq!(found, "42501", "{err}");
    assert!(
        err.contains("permission denied for function put_one_subjects"),
        "{err}"
    );
    let as_producer = write_sql(
        &format!("'{login}'"),
        PRODUCER,
        "producer",
        &subject_only,
        no_job,
    );
    admin.execute("BEGIN").await.unwrap();
    admin
        .execute(sqlx::AssertSqlSafe(as_producer))
        .await
        .unwrap();
    let (user, role): (String, String) =
        sqlx::query_as("SELECT current_user::text, current_setting('role')")
            .fetch_one(&mut admin)
            .await
            .unwrap();
    admin.execute("COMMIT").await.unwrap();
    assert_ne!(user, login);
    assert_eq!(role, "none");
    admin.close().await.unwrap();
    assert_eq!(
        head_seq(&t).await,
        seq + 1,
        "the subject was stored already"
    );
    t.cleanup().await;
}
