//! Bodies and audit fields checked by the database: the PostgreSQL write routines, called by
//! hand through a login of the writer's role, refuse what the store would never send (a body
//! that is not canonical, a key the body does not derive, a body past the size limit, audit
//! fields out of bounds), and `audit verify` derives the derived columns in code instead of
//! running SQL kept in the catalog.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::authority::connect_as;
use crate::common;

use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use sqlx::Connection as _;
use verdict_core::contracts::Role;
use verdict_store::records::{self, MAX_BODY_BYTES, MAX_NAME_CHARS, row_digest};
use verdict_store::{Actor, ActorRole, DocKind, ProblemKind, Table};

fn canonical(v: &Value) -> String {
    String::from_utf8(verdict_core::canonical::to_vec(v)).unwrap()
}

/// A record as a caller hands it to a write routine.
#[derive(Clone)]
struct Call {
    table: Table,
    principal: String,
    role: &'static str,
    key: String,
    body: String,
    correlation: Option<String>,
}

impl Call {
    /// `body` as it is, keyed as its table derives the key from its canonical form (its digest
    /// for documents), with the digest of exactly these bytes.
    fn new(table: Table, principal: &str, role: &'static str, body: String) -> Self {
        let value: Value = serde_json::from_str(&body).unwrap();
        let canonical_digest = row_digest(table.domain(), canonical(&value).as_bytes());
        let key = records::key_of_value(table, &value, &canonical_digest)
            .unwrap_or_else(|_| canonical_digest.to_string());
        let key = if key == canonical_digest.as_str() {
            row_digest(table.domain(), body.as_bytes()).to_string()
        } else {
            key
        };
        Self {
            table,
            principal: principal.to_owned(),
            role,
            key,
            body,
            correlation: None,
        }
    }

    fn digest(&self) -> String {
        row_digest(self.table.domain(), self.body.as_bytes()).to_string()
    }
}

/// The database's refusal: its SQLSTATE and message.
type Refusal = (String, String);

fn refusal(e: sqlx::Error) -> Refusal {
    let db = e.as_database_error().expect("a refusal from the database");
    (
        db.code().unwrap_or_default().into_owned(),
        db.message().to_owned(),
    )
}

/// Calls `put_one_<table>`.
async fn put_one(conn: &mut sqlx::PgConnection, c: &Call) -> Result<(), Refusal> {
    let sql = format!(
        "SELECT r_seq FROM verdict.put_one_{}($1, $2, $3, $4, $5, $6)",
        c.table.name()
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&c.principal)
        .bind(c.role)
        .bind(&c.key)
        .bind(c.digest())
        .bind(&c.body)
        .bind(c.correlation.as_deref())
        .fetch_all(conn)
        .await
        .map(|_| ())
        .map_err(refusal)
}

/// Calls `put_<table>` with a run of one record in a transaction of the writer's role, as the
/// store's batches do.
async fn put_run(conn: &mut sqlx::PgConnection, c: &Call) -> Result<(), Refusal> {
    let sql = format!(
        "SELECT r_seq FROM verdict.put_{}($1, $2, $3, $4, $5, $6)",
        c.table.name()
    );
    let mut tx = conn.begin().await.unwrap();
    let result = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&c.principal)
        .bind(c.role)
        .bind(vec![c.key.clone()])
        .bind(vec![c.digest()])
        .bind(vec![c.body.clone()])
        .bind(vec![c.correlation.clone()])
        .fetch_all(&mut *tx)
        .await;
    match result {
        Ok(_) => {
            tx.commit().await.unwrap();
            Ok(())
        }
        Err(e) => Err(refusal(e)),
    }
}

/// A write grant on `ex-1` for `who`, which the routines require of a producer's requests and a
/// runner's evidence (schema 7).
async fn write_grant(store: &dyn verdict_store::Store, who: &str) {
    use verdict_store::{Access, GrantRecord, GrantScope, ScopeKind};
    let op = Actor::new(OPERATOR, Role::Operator);
    let grant = GrantRecord {
        grant_id: format!("g-write-{who}").parse().unwrap(),
        principal: who.parse().unwrap(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: "ex-1".parse().unwrap(),
        },
        access: Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    store.add_grant(&op, &grant).await.unwrap();
}

/// Both routines refuse the call with SQLSTATE 22023 and a message naming the table and `says`.
async fn refused_both_ways(conn: &mut sqlx::PgConnection, c: &Call, says: &str) {
    for (routine, outcome) in [
        ("put_one", put_one(conn, c).await),
        ("put", put_run(conn, c).await),
    ] {
        let (code, message) = outcome.expect_err(routine);
        assert_eq!(code, "22023", "{routine}: {message}");
        assert!(
            message.contains(c.table.name()) && message.contains(says),
            "{routine}: {message:?} should name {} and say {says:?}",
            c.table.name()
        );
    }
}

/// A verification request (any JSON object) whose canonical body is exactly `len` bytes.
fn request_of_len(s: &verdict_core::digest::Digest, len: usize) -> String {
    let empty = canonical(&json!({"pad": "", "subject_digest": s.as_str()}));
    let pad = "p".repeat(len - empty.len());
    let body = canonical(&json!({"pad": pad, "subject_digest": s.as_str()}));
    assert_eq!(body.len(), len);
    body
}

/// Moves the members of a canonical object into reverse order.
fn reordered(body: &str) -> String {
    let v: serde_json::Map<String, Value> = serde_json::from_str(body).unwrap();
    let members: Vec<String> = v
        .iter()
        .rev()
        .map(|(k, v)| format!("{}:{}", canonical(&json!(k)), canonical(v)))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// Every malformed body and out-of-bounds audit field, tried through both write routines by a
/// login of the writer's role: each is refused with SQLSTATE 22023 and nothing is appended; a
/// canonical body still appends through either routine, and the chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_routines_refuse_malformed_bodies() {
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let (mut runner, _) = connect_as(&t, RUNNER, Role::Runner).await;
    let (mut producer, _) = connect_as(&t, PRODUCER, Role::Producer).await;
    write_grant(store, RUNNER).await;
    write_grant(store, PRODUCER).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;

    let ev = canonical(&evidence(&s, "ev-bodies"));
    let evidence_call = |body: String| Call::new(Table::CheckEvidence, RUNNER, "runner", body);
    // Whitespace anywhere: after a name, around the body, a newline at the end.
    for body in [
        ev.replacen("\":", "\": ", 1),
        format!(" {ev}"),
        format!("{ev}\n"),
    ] {
        refused_both_ways(&mut runner, &evidence_call(body), "not in canonical form").await;
    }
    // Members out of order.
    refused_both_ways(
        &mut runner,
        &evidence_call(reordered(&ev)),
        "not in canonical form",
    )
    .await;
    // `produced_by` twice: jsonb keeps the last (the runner, so the writer check passes), the
    // stored text would say another producer first, and every later read of it fails.
    let twice = ev.replacen(
        "\"produced_by\":",
        "\"produced_by\":{\"principal\":\"someone-else\",\"role\":\"producer\"},\"produced_by\":",
        1,
    );
    assert_ne!(twice, ev);
    refused_both_ways(&mut runner, &evidence_call(twice), "not in canonical form").await;
    // A number written otherwise than verdict writes it, and an escape verdict does not write.
    for body in [
        ev.replacen("\"observed_at\":", "\"n\":1.0,\"observed_at\":", 1),
        ev.replacen("unit-tests", "unit\\u002dtests", 1),
    ] {
        refused_both_ways(&mut runner, &evidence_call(body), "not in canonical form").await;
    }
    // A canonical body under another key than its digest.
    let mut elsewhere = evidence_call(ev.clone());
    elsewhere.key = d("elsewhere");
    refused_both_ways(&mut runner, &elsewhere, "is stored under key").await;
    // Findings are keyed by id and version: not by the digest, nor by another version.
    let verifier_finding = canonical(&finding(&s, "f-bodies", 1));
    let mut wrong_version = Call::new(
        Table::Findings,
        VERIFIER,
        "verifier",
        verifier_finding.clone(),
    );
    assert_eq!(wrong_version.key, "f-bodies@1");
    wrong_version.key = "f-bodies@2".into();
    let (mut verifier, _) = connect_as(&t, VERIFIER, Role::Verifier).await;
    refused_both_ways(&mut verifier, &wrong_version, "is stored under key").await;

    // Past the 4 MiB limit, by one byte and by a mebibyte: refused before anything else.
    for len in [MAX_BODY_BYTES + 1, 5 << 20] {
        let call = Call::new(
            Table::VerificationRequests,
            PRODUCER,
            "producer",
            request_of_len(&s, len),
        );
        refused_both_ways(&mut producer, &call, "exceeds the limit of 4194304 bytes").await;
    }
    // Audit fields past their bounds.
    let small = Call::new(
        Table::VerificationRequests,
        PRODUCER,
        "producer",
        canonical(&json!({"note": "bodies", "subject_digest": s.as_str()})),
    );
    // A principal past its bound is no principal this login acts for: since schema 7 the
    // identity check, first in every routine, refuses it before the bounds are looked at (the
    // store's own bound is tried in `the_store_holds_audit_fields_to_the_same_bounds`).
    let mut long_principal = small.clone();
    long_principal.principal = "p".repeat(MAX_NAME_CHARS + 1);
    for (routine, outcome) in [
        ("put_one", put_one(&mut producer, &long_principal).await),
        ("put", put_run(&mut producer, &long_principal).await),
    ] {
        let (code, message) = outcome.expect_err(routine);
        assert_eq!(code, "42501", "{routine}: {message}");
        assert!(
            message.contains("does not act for principal"),
            "{routine}: {message}"
        );
    }
    let mut long_correlation = small.clone();
    long_correlation.correlation = Some("c".repeat(MAX_NAME_CHARS + 1));
    refused_both_ways(
        &mut producer,
        &long_correlation,
        "a correlation of 257 characters",
    )
    .await;
    let mut long_key = small.clone();
    long_key.key = "k".repeat(records::MAX_KEY_CHARS + 1);
    refused_both_ways(&mut producer, &long_key, "a key of 321 characters").await;

    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    assert!(store.verify_audit(None).await.unwrap().is_intact());

    // What the store itself would send goes through either routine, up to the limit itself.
    put_one(&mut runner, &evidence_call(ev)).await.unwrap();
    let mut at_limit = Call::new(
        Table::VerificationRequests,
        PRODUCER,
        "producer",
        request_of_len(&s, MAX_BODY_BYTES),
    );
    at_limit.correlation = Some("c".repeat(MAX_NAME_CHARS));
    put_run(&mut producer, &at_limit).await.unwrap();
    put_one(&mut producer, &small).await.unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 3);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);

    // The scratch store drops its principals' roles when it is cleaned up.
    for conn in [runner, producer, verifier] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

/// The call of cas_lease that gives `job` to the verifier at revision 1, from its parts.
async fn cas_lease(
    conn: &mut sqlx::PgConnection,
    job: &str,
    new: &str,
    key: &str,
    body: &str,
) -> Result<(), Refusal> {
    let mut tx = conn.begin().await.unwrap();
    let result =
        sqlx::query("SELECT * FROM verdict.cas_lease($1, 'verifier', $2, 0, NULL, $3, $4, $5, $6)")
            .bind(VERIFIER)
            .bind(job)
            .bind(new)
            .bind(key)
            .bind(row_digest("store.pointer-change", body.as_bytes()).to_string())
            .bind(body)
            .fetch_all(&mut *tx)
            .await;
    match result {
        Ok(_) => {
            tx.commit().await.unwrap();
            Ok(())
        }
        Err(e) => Err(refusal(e)),
    }
}

/// Compare-and-set by hand: a change record that is not canonical, under another key, with a
/// pointer name or value past its bound, or a new value that is not the change's own canonical
/// text, is refused; the well-formed change still moves the pointer.
/// Schema 13: a canonical body under the key it derives, from a writer allowed to write it, is
/// still refused (22023) when it is not a record of its table: a member its type requires is
/// missing, or it is no object at all. Nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_routines_refuse_bodies_missing_a_required_member() {
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let (mut runner, _) = connect_as(&t, RUNNER, Role::Runner).await;
    let (mut producer, _) = connect_as(&t, PRODUCER, Role::Producer).await;
    let (mut verifier, _) = connect_as(&t, VERIFIER, Role::Verifier).await;
    write_grant(store, RUNNER).await;
    write_grant(store, PRODUCER).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;

    let without = |doc: Value, member: &str| {
        let mut doc = doc;
        doc.as_object_mut().unwrap().remove(member).unwrap();
        canonical(&doc)
    };
    // Evidence without its freshness, and without the definition it was checked against.
    for member in ["freshness", "definition_digest"] {
        let call = Call::new(
            Table::CheckEvidence,
            RUNNER,
            "runner",
            without(evidence(&s, "ev-short"), member),
        );
        refused_both_ways(&mut runner, &call, "the body is not check evidence").await;
    }
    // A finding without its method; a result without its criteria.
    let mut call = Call::new(
        Table::Findings,
        VERIFIER,
        "verifier",
        without(finding(&s, "f-short", 1), "method"),
    );
    // The key the body derives (the store's reader refuses to derive it for a non-finding).
    call.key = "f-short@1".into();
    refused_both_ways(&mut verifier, &call, "the body is not a finding").await;
    let call = Call::new(
        Table::VerificationResults,
        VERIFIER,
        "verifier",
        without(result(&s, 1, "vrun-1", vec![]), "criteria"),
    );
    refused_both_ways(
        &mut verifier,
        &call,
        "the body is not a verification result",
    )
    .await;
    // A request that says it is one but lacks its budget; a body that is no object.
    let request = json!({
        "schema": "verdict.request/v1", "execution": "ex-1", "subject_digest": s.as_str(),
        "generation": 1, "gate": "merge", "policy_digest": d("policy"),
        "verifier_classes": ["reviewer"], "prior_blockers": [], "risk_class": "low",
        "budget": {}
    });
    let call = Call::new(
        Table::VerificationRequests,
        PRODUCER,
        "producer",
        without(request.clone(), "budget"),
    );
    refused_both_ways(
        &mut producer,
        &call,
        "the body is not a verification request",
    )
    .await;
    let mut listed = Call::new(
        Table::VerificationRequests,
        PRODUCER,
        "producer",
        "[]".into(),
    );
    listed.key = listed.digest();
    let (code, message) = put_one(&mut producer, &listed).await.unwrap_err();
    assert_eq!(code, "22023", "{message}");
    assert!(message.contains("not a request or a note"), "{message}");

    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    // The same records, whole, are stored.
    put_one(
        &mut runner,
        &Call::new(
            Table::CheckEvidence,
            RUNNER,
            "runner",
            canonical(&evidence(&s, "ev-short")),
        ),
    )
    .await
    .unwrap();
    put_one(
        &mut producer,
        &Call::new(
            Table::VerificationRequests,
            PRODUCER,
            "producer",
            canonical(&request),
        ),
    )
    .await
    .unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 2);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    for conn in [runner, producer, verifier] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_set_refuses_malformed_changes() {
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    // A lease names a run admitted to its taker (schema version 10).
    admit(&t, &subject_digest(&subject("ex-1", 1)), 1, "vrun-2").await;
    let (mut conn, _) = connect_as(&t, VERIFIER, Role::Verifier).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;
    let holder = |name: &str| json!({"expires_at": "2099-01-01T00:00:00Z", "holder": name});
    let change = |job: &str, new: &Value| {
        canonical(&json!({"pointer": "lease", "name": job, "revision": 1, "old": null, "new": new}))
    };
    let new = holder(VERIFIER);
    let new_text = canonical(&new);
    let body = change("run vrun-2", &new);
    let key = records::pointer_change_key("lease", "run vrun-2", 1);

    let refused = |outcome: Result<(), Refusal>, says: &str| {
        let (code, message) = outcome.unwrap_err();
        assert_eq!(code, "22023", "{message}");
        assert!(
            message.contains("pointer_changes") && message.contains(says),
            "{message:?} should say {says:?}"
        );
    };
    refused(
        cas_lease(
            &mut conn,
            "run vrun-2",
            &new_text,
            &key,
            &body.replacen(",", ", ", 1),
        )
        .await,
        "not in canonical form",
    );
    refused(
        cas_lease(&mut conn, "run vrun-2", &new_text, &key, &reordered(&body)).await,
        "not in canonical form",
    );
    refused(
        cas_lease(
            &mut conn,
            "run vrun-2",
            &new_text,
            "lease:1:run vrun-3",
            &body,
        )
        .await,
        "is stored under key",
    );
    // The new value the pointer would keep, spelt with a space: jsonb finds it equal to the
    // change's, but the pointer keeps its text.
    refused(
        cas_lease(
            &mut conn,
            "run vrun-2",
            &new_text.replacen(":", ": ", 1),
            &key,
            &body,
        )
        .await,
        "not the canonical text",
    );
    let long = "j".repeat(MAX_NAME_CHARS + 1);
    refused(
        cas_lease(
            &mut conn,
            &long,
            &new_text,
            &records::pointer_change_key("lease", &long, 1),
            &change(&long, &new),
        )
        .await,
        "a pointer name of 257 characters",
    );
    let big =
        json!({"expires_at": "2099-01-01T00:00:00Z", "holder": VERIFIER, "pad": "x".repeat(4100)});
    refused(
        cas_lease(
            &mut conn,
            "run vrun-2",
            &canonical(&big),
            &key,
            &change("run vrun-2", &big),
        )
        .await,
        "a pointer value of",
    );
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    cas_lease(&mut conn, "run vrun-2", &new_text, &key, &body)
        .await
        .unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 1);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// The schema's owner rewrites a derived column's comment (where the expression each column
/// was derived with used to be read from by `audit verify`) into SQL with an effect, then
/// changes a derived column behind the routines' back. `audit verify`, run by the superuser,
/// never runs the planted SQL and still reports the changed column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_runs_no_sql_from_the_catalog() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let owner = format!("\"{}owner\"", t.prefix);
    let note = "derived from the body by the write routine: ";
    t.raw(&format!(
        "SET ROLE {owner}; \
         CREATE FUNCTION verdict.planted() RETURNS text LANGUAGE plpgsql AS $$ \
           BEGIN RAISE EXCEPTION 'the planted SQL ran as %', current_user; END $$; \
         COMMENT ON COLUMN verdict.check_evidence.subject_digest IS \
           '{note}((body)::jsonb ->> ''subject_digest'') || verdict.planted()'; \
         COMMENT ON COLUMN verdict.principals.name IS \
           '{note}pg_read_file(''PG_VERSION'') || verdict.planted()'; \
         RESET ROLE;"
    ))
    .await
    .unwrap();
    // It would run, were it evaluated.
    let err = t.raw("SELECT verdict.planted()").await.unwrap_err();
    assert!(err.contains("the planted SQL ran"), "{err}");
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);

    // The owner switches the table's guards off, changes the subject a piece of evidence is
    // filed under, and puts the guards back.
    let seq = t.count("SELECT min(seq) FROM verdict.check_evidence").await;
    t.raw(&format!(
        "BEGIN; SET LOCAL ROLE {owner}; \
         ALTER TABLE verdict.check_evidence DISABLE TRIGGER check_evidence_append_only; \
         ALTER TABLE verdict.check_evidence NO FORCE ROW LEVEL SECURITY; \
         GRANT UPDATE ON verdict.check_evidence TO {owner}; \
         UPDATE verdict.check_evidence SET subject_digest = 'sha256:{}' WHERE seq = {seq}; \
         REVOKE UPDATE ON verdict.check_evidence FROM {owner}; \
         ALTER TABLE verdict.check_evidence FORCE ROW LEVEL SECURITY; \
         ALTER TABLE verdict.check_evidence ENABLE TRIGGER check_evidence_append_only; COMMIT;",
        "0".repeat(64)
    ))
    .await
    .unwrap();
    let report = t.store.verify_audit(None).await.unwrap();
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let p = &report.problems[0];
    assert_eq!(p.kind, ProblemKind::Modified);
    assert_eq!(p.seq, Some(u64::try_from(seq).unwrap()));
    assert_eq!(p.table, "check_evidence");
    assert!(p.detail.contains("column subject_digest"), "{p}");
    t.cleanup().await;
}

/// The table of derived columns in code names every column the schema derives from a body,
/// with its type, and nothing else: a column it missed would go unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_derived_columns_in_code_are_the_schemas() {
    let t = postgres().await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let in_schema: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod) \
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'verdict' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped \
           AND a.attgenerated <> 's' AND c.relname <> 'pointer_changes' \
           AND a.attname NOT IN ('seq', 'key', 'digest', 'body', 'counted', 'bytes') \
           AND c.relname IN (SELECT unnest($1::text[])) \
         ORDER BY 1, 2",
    )
    .bind(Table::ALL.iter().map(|t| t.name()).collect::<Vec<_>>())
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut in_code: Vec<(String, String, String)> = Table::ALL
        .iter()
        .flat_map(|t| {
            t.derived_columns().iter().map(|c| {
                (
                    t.name().to_owned(),
                    c.column.to_owned(),
                    if c.integer { "bigint" } else { "text" }.to_owned(),
                )
            })
        })
        .collect();
    in_code.sort();
    assert_eq!(in_code, in_schema);
    assert_eq!(in_code.len(), 52);
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// The store holds every record to the same audit field bounds on both backends before it
/// writes: a pointer name past 256 characters never reaches the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_holds_audit_fields_to_the_same_bounds() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let runner = Actor::new(RUNNER, Role::Runner);
        let length = store.audit_head().await.unwrap().unwrap().seq;
        let holder = verdict_store::LeaseHolder {
            holder: RUNNER.parse().unwrap(),
            expires_at: "2099-01-01T00:00:00Z".parse().unwrap(),
        };
        let long = "j".repeat(MAX_NAME_CHARS + 1);
        assert!(
            store
                .cas_lease(&runner, &long, None, Some(&holder))
                .await
                .is_err()
        );
        // A document past the size limit.
        let s = subject_digest(&subject("ex-1", 1));
        let big: Value = serde_json::from_str(&request_of_len(&s, MAX_BODY_BYTES + 1)).unwrap();
        let producer = Actor::new(PRODUCER, Role::Producer);
        let err = store
            .put(&producer, DocKind::Request, &big)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// The functions the routines check bodies with run only inside the routines: no principal role
/// may call them, and each has a fixed search_path like every routine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_checks_are_callable_only_by_the_routines() {
    let t = postgres().await;
    for function in [
        "_jcs_number(numeric)",
        "_jcs_key(text)",
        "_jcs(jsonb, boolean)",
        "_canonical(jsonb, text)",
        "_refuse_bounds(text, text, text, text, text, text, text)",
    ] {
        for r in ActorRole::ALL {
            let may = t
                .count(&format!(
                    "SELECT has_function_privilege('{}{}', 'verdict.{function}', 'EXECUTE')::int::bigint",
                    t.prefix,
                    r.as_str()
                ))
                .await;
            assert_eq!(may, 0, "{} may call {function}", r.as_str());
        }
    }
    t.cleanup().await;
}

/// Documents of every shape verdict writes (deep nesting, fractions and integers at the edges
/// of their range, strings needing every kind of escape, names ordered by UTF-16 code units
/// where that differs from their bytes) append through the store (U+0000 aside: PostgreSQL's
/// jsonb cannot hold it, and refused it before schema version 8 too): the database rebuilds
/// exactly the canonical form verdict wrote. The same document with members swapped five levels
/// down is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_writes_the_canonical_form_verdict_writes() {
    let numbers = json!([
        0,
        -1,
        9_007_199_254_740_991_i64,
        -9_007_199_254_740_991_i64,
        0.1,
        -2.5,
        123.456,
        1.5e-7,
        0.000_001,
        333_333_333.333_333_3,
        1e-300,
        5e-324,
        9_007_199_254_740.993,
        4.35,
        0.5e-6
    ]);
    let strings = json!([
        "",
        "plain",
        "quote \" backslash \\ slash /",
        "\u{1}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1f}",
        "\u{7f}\u{2028}\u{2029}é\u{1f600}\u{fb33}\u{e000}\u{ffff}"
    ]);
    // U+1F600 sorts before U+FB33 and U+E000 by UTF-16 code units, after them by bytes.
    let names = json!({"a": 1, "\u{1f600}": 2, "\u{fb33}": 3, "\u{e000}": 4, "b\u{1}": 5, "b": 6});
    let deep = json!({"l1": {"l2": [{"l3": {"l4": {"l5": {"z": [names.clone()], "a": numbers.clone()}}}}]}});
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let producer = Actor::new(PRODUCER, Role::Producer);
        let s = subject_digest(&subject("ex-1", 1));
        for (i, shape) in [
            numbers.clone(),
            strings.clone(),
            names.clone(),
            deep.clone(),
        ]
        .into_iter()
        .enumerate()
        {
            let doc = json!({"shape": shape, "n": i, "subject_digest": s.as_str()});
            let row = store.put(&producer, DocKind::Request, &doc).await.unwrap();
            assert!(row.inserted, "{i}");
        }
        if t.kind == Kind::Postgres {
            let (mut conn, _) = connect_as(&t, PRODUCER, Role::Producer).await;
            write_grant(store, PRODUCER).await;
            let doc = json!({"shape": deep, "n": "again", "subject_digest": s.as_str()});
            let body = canonical(&doc);
            // "z" and "a" five levels down, swapped.
            let swapped = body.replacen("{\"a\":[0,", "{\"z\":[{}],\"a\":[0,", 1);
            let swapped = swapped.replacen("],\"z\":[{\"a\":1", "],\"y\":[{\"a\":1", 1);
            assert_ne!(swapped, body);
            let call = Call::new(Table::VerificationRequests, PRODUCER, "producer", swapped);
            refused_both_ways(&mut conn, &call, "not in canonical form").await;
            put_one(
                &mut conn,
                &Call::new(Table::VerificationRequests, PRODUCER, "producer", body),
            )
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
        let report = store.verify_audit(None).await.unwrap();
        assert!(report.is_intact(), "{:#?}", report.problems);
        t.cleanup().await;
    }
}

/// Characters of every kind a string can hold (U+0000 aside, which jsonb cannot): the ones
/// escaped by name or as `\u00xx`, the quote and backslash, the solidus, brackets and
/// punctuation the structure also uses, ones ordered otherwise by UTF-16 code units than by
/// their bytes (U+E000 to U+FFFF against supplementary ones), and any other.
fn arb_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => proptest::char::range('a', 'e'),
        2 => proptest::char::range('\u{1}', '\u{1f}'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('/'),
        1 => prop::sample::select(vec!['{', '}', '[', ']', ':', ',', ' ']),
        1 => prop::sample::select(vec!['\u{7f}', '\u{2028}', 'é', '\u{fb33}', '\u{e000}', '\u{ffff}']),
        1 => prop::sample::select(vec!['\u{1f600}', '\u{10000}', '\u{10ffff}']),
        1 => any::<char>().prop_filter("jsonb holds no U+0000", |c| *c != '\0'),
    ]
}

fn arb_string(len: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(arb_char(), 0..len).prop_map(|v| v.into_iter().collect())
}

/// Numbers as verdict's reader takes them: integers and doubles within ±(2^53 − 1), either side
/// of where ECMAScript switches to exponents, and subnormals.
fn arb_number() -> impl Strategy<Value = Value> {
    const SAFE: i64 = 9_007_199_254_740_991;
    prop_oneof![
        (-SAFE..=SAFE).prop_map(|n| json!(n)),
        (-1000_i64..1000).prop_map(|n| json!(n)),
        (-(1_i64 << 20)..(1_i64 << 20), -30_i32..30)
            .prop_map(|(m, e)| m as f64 * 10_f64.powi(e))
            .prop_filter("within the reader's range", |f| f.abs() <= SAFE as f64)
            .prop_map(|f| json!(f)),
        any::<f64>()
            .prop_filter("finite, within the reader's range", |f| f.is_finite()
                && f.abs() <= SAFE as f64)
            .prop_map(|f| json!(f)),
        prop::num::f64::SUBNORMAL.prop_map(|f| json!(f)),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_number(),
        arb_string(8).prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(arb_string(4), inner, 0..7)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// How a text departs from the canonical form at the `at`-th object (in document order) with
/// enough members: two neighbouring members swapped, or one written twice.
#[derive(Clone, Copy)]
enum Twist {
    Swap,
    Twice,
}

/// `v` written as the canonical form would, but for `twist`.
fn write_twisted(v: &Value, twist: Twist, at: &mut Option<usize>, pick: usize, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_twisted(item, twist, at, pick, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            let mut twice = None;
            let enough = match twist {
                Twist::Swap => members.len() >= 2,
                Twist::Twice => !members.is_empty(),
            };
            if enough {
                match *at {
                    Some(0) => {
                        match twist {
                            Twist::Swap => {
                                let j = pick % (members.len() - 1);
                                members.swap(j, j + 1);
                            }
                            Twist::Twice => twice = Some(pick % members.len()),
                        }
                        *at = None;
                    }
                    Some(n) => *at = Some(n - 1),
                    None => {}
                }
            }
            out.push('{');
            let mut first = true;
            for (i, (k, v)) in members.iter().enumerate() {
                for _ in 0..if twice == Some(i) { 2 } else { 1 } {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    out.push_str(&canonical(&Value::String((*k).clone())));
                    out.push(':');
                    write_twisted(v, twist, at, pick, out);
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&canonical(scalar)),
    }
}

/// Where a canonical text can be spelt otherwise: the places between its tokens, each
/// character or escape inside its strings, and its numbers (byte ranges).
struct Spots {
    gaps: Vec<usize>,
    units: Vec<(usize, usize)>,
    numbers: Vec<(usize, usize)>,
}

fn spots(c: &str) -> Spots {
    let b = c.as_bytes();
    let mut s = Spots {
        gaps: vec![0, c.len()],
        units: vec![],
        numbers: vec![],
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while b[i] != b'"' {
                    let start = i;
                    i += match b[i] {
                        b'\\' if b[i + 1] == b'u' => 6,
                        b'\\' => 2,
                        _ => c[i..].chars().next().unwrap().len_utf8(),
                    };
                    s.units.push((start, i));
                }
                i += 1;
            }
            b'{' | b'[' | b':' | b',' => {
                i += 1;
                s.gaps.push(i);
            }
            b'}' | b']' => {
                s.gaps.push(i);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                s.numbers.push((start, i));
            }
            _ => i += 1,
        }
    }
    s
}

/// The same string character (or escape) spelt another way JSON allows, if there is one.
fn respelt_unit(u: &str, pick: usize) -> Option<String> {
    if let Some(rest) = u.strip_prefix('\\') {
        let code = match rest.as_bytes()[0] {
            b'"' => 0x22,
            b'\\' => 0x5c,
            b'b' => 0x8,
            b'f' => 0xc,
            b'n' => 0xa,
            b'r' => 0xd,
            b't' => 0x9,
            // `\u00xx`: upper-case hex, where it has letters.
            _ => {
                return rest[1..]
                    .bytes()
                    .any(|h| h.is_ascii_lowercase())
                    .then(|| format!("\\u{}", rest[1..].to_ascii_uppercase()));
            }
        };
        return Some(format!("\\u{code:04x}"));
    }
    let ch = u.chars().next()?;
    if ch == '/' && pick.is_multiple_of(2) {
        return Some("\\/".into());
    }
    let mut units = [0_u16; 2];
    Some(
        ch.encode_utf16(&mut units)
            .iter()
            .map(|w| {
                if pick.is_multiple_of(3) {
                    format!("\\u{w:04X}")
                } else {
                    format!("\\u{w:04x}")
                }
            })
            .collect(),
    )
}

/// The same number spelt another way JSON allows.
fn respelt_number(u: &str, pick: usize) -> String {
    if u.contains('e') {
        if pick.is_multiple_of(2) {
            u.replace('e', "E")
        } else if u.contains('+') {
            u.replace('+', "")
        } else {
            u.replace("e-", "e-0")
        }
    } else if u.contains('.') {
        if pick.is_multiple_of(2) {
            format!("{u}0")
        } else {
            format!("{u}e0")
        }
    } else if u == "0" {
        ["-0", "0.0", "0e0"][pick % 3].to_owned()
    } else {
        [format!("{u}.0"), format!("{u}e0"), format!("{u}E+00")][pick % 3].clone()
    }
}

/// Whether the reading of schema 18 leaves `c`, a canonical text, to the rebuild: it holds a
/// character U+E000 to U+FFFF, or a stretch between two strings holds a number other than an
/// integer of at most 15 digits among other tokens.
fn left_to_the_rebuild(c: &str) -> bool {
    if c.chars().any(|ch| ('\u{e000}'..='\u{ffff}').contains(&ch)) {
        return true;
    }
    let plain = |t: &str| {
        let digits = t.strip_prefix('-').unwrap_or(t);
        t == "0"
            || (digits.len() <= 15
                && !digits.starts_with('0')
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut stretches = vec![String::new()];
    let (mut in_string, mut escaped) = (false, false);
    for ch in c.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
                stretches.push(String::new());
            }
        } else if ch == '"' {
            in_string = true;
        } else {
            stretches.last_mut().unwrap().push(ch);
        }
    }
    stretches.iter().any(|s| {
        let tokens: Vec<&str> = s
            .split(|ch| "[]{}:,".contains(ch))
            .filter(|t| !t.is_empty())
            .collect();
        tokens.len() >= 2
            && tokens
                .iter()
                .any(|t| t.starts_with(|ch: char| ch == '-' || ch.is_ascii_digit()) && !plain(t))
    })
}

/// The canonical text of `v` and texts of the same JSON that are not canonical: whitespace
/// between tokens, members out of order, a member named twice, a string character or escape
/// spelt otherwise, a number spelt otherwise. Texts that came out canonical are left out.
fn spellings(v: &Value, picks: (usize, usize, usize)) -> (String, Vec<String>) {
    let c = canonical(v);
    let (p, q, r) = picks;
    let mut texts = vec![];
    for twist in [Twist::Swap, Twist::Twice] {
        let mut out = String::new();
        write_twisted(v, twist, &mut Some(p % 4), q, &mut out);
        texts.push(out);
    }
    let s = spots(&c);
    let gap = s.gaps[q % s.gaps.len()];
    texts.push(format!(
        "{}{}{}",
        &c[..gap],
        [" ", "\n", "\t", "\r"][r % 4],
        &c[gap..]
    ));
    if !s.units.is_empty() {
        let (from, to) = s.units[p % s.units.len()];
        if let Some(other) = respelt_unit(&c[from..to], r) {
            texts.push(format!("{}{other}{}", &c[..from], &c[to..]));
        }
    }
    if !s.numbers.is_empty() {
        let (from, to) = s.numbers[r % s.numbers.len()];
        texts.push(format!(
            "{}{}{}",
            &c[..from],
            respelt_number(&c[from..to], q),
            &c[to..]
        ));
    }
    texts.retain(|t| *t != c);
    (c, texts)
}

/// What the database makes of each text: `_canonical` (schema 18), the rebuild `_jcs` that
/// `_canonical` was until schema 16 (same expression, same order), and the reading of the text
/// alone (`_canonical` with every way to the rebuild made to return NULL instead).
async fn read_by_the_database(
    conn: &mut sqlx::PgConnection,
    texts: &[String],
) -> Vec<(Option<String>, Option<String>, Option<String>)> {
    sqlx::query_as(
        r"SELECT verdict._canonical(u.t::jsonb, u.t),
                 verdict._jcs(u.t::jsonb, octet_length(u.t) <> length(u.t) AND u.t ~ '[\uE000-\uFFFF]'),
                 pg_temp.canonical_read(u.t::jsonb, u.t)
          FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY u.i",
    )
    .bind(texts)
    .fetch_all(conn)
    .await
    .unwrap()
}

/// `c`, verdict's canonical text of some JSON, and `others`, texts of the same JSON that are not
/// canonical, as the database reads them: `_canonical` returns for each exactly what the
/// schema-16 rebuild returns, and the text itself exactly for `c`; the reading alone never
/// returns anything but `c`, and returns `c` unless `read` is false (nesting past the reader's
/// limit) or `left_to_the_rebuild` says why not.
async fn read_as_before(
    conn: &mut sqlx::PgConnection,
    c: &str,
    others: Vec<String>,
    read: bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let texts: Vec<String> = std::iter::once(c.to_owned()).chain(others).collect();
    let read = read && !left_to_the_rebuild(c);
    let outcomes = read_by_the_database(conn, &texts).await;
    for (text, (now, before, alone)) in texts.iter().zip(outcomes) {
        prop_assert_eq!(&now, &before, "{} changed its verdict", text);
        let canonical = text == c;
        prop_assert_eq!(
            now.as_ref() == Some(text),
            canonical,
            "{} (verdict writes {})",
            text,
            c
        );
        if alone.is_some() {
            prop_assert_eq!(alone.as_ref(), Some(text), "{}", text);
            prop_assert!(
                canonical,
                "the reading alone accepts {} (verdict writes {})",
                text,
                c
            );
        }
        if canonical && read {
            prop_assert_eq!(
                alone.as_ref(),
                Some(text),
                "the reading alone refuses {}",
                text
            );
        }
    }
    Ok(())
}

/// The canonical-form check of schema 18, differentially: over generated JSON of every shape
/// (strings with every kind of character and escape, numbers of every shape, nested objects and
/// arrays, names ordered otherwise by UTF-16 code units than by bytes), the text verdict writes
/// and texts of the same JSON spelt otherwise (whitespace, members swapped or named twice,
/// escapes and numbers spelt otherwise), and nesting on either side of the reader's limit:
/// `_canonical` returns for every text exactly what the schema-16 rebuild returns, so it accepts
/// (returns the text itself) exactly verdict's canonical text; the reading of the text alone
/// never accepts anything else, and accepts verdict's text itself unless it goes to the rebuild
/// for a reason the migration gives (a character U+E000 to U+FFFF, nesting past 128 levels, a
/// number other than a plain integer among other tokens). PostgreSQL only: SQLite has no such
/// function (the store checks bodies in code on both backends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_reads_the_canonical_form_as_verdict_writes_it() {
    use proptest::test_runner::{Config, TestRunner};
    let t = postgres().await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let def: String = sqlx::query_scalar(
        "SELECT pg_get_functiondef('verdict._canonical(jsonb, text)'::regprocedure)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(def.matches("RETURN verdict._jcs(p, ").count(), 4, "{def}");
    let read = def
        .replace(
            "FUNCTION verdict._canonical(",
            "FUNCTION pg_temp.canonical_read(",
        )
        .replace("RETURN verdict._jcs(p, true);", "RETURN NULL;")
        .replace("RETURN verdict._jcs(p, false);", "RETURN NULL;");
    assert!(!read.contains("_jcs(") && !read.contains("verdict._canonical("));
    sqlx::query(sqlx::AssertSqlSafe(read))
        .execute(&mut conn)
        .await
        .unwrap();

    // Nesting up to the reader's 128 levels, and past it, objects and arrays; the same with two
    // members swapped at the bottom.
    for depth in [127, 128, 129, 300] {
        for (open, close) in [("{\"a\":", "}"), ("[", "]")] {
            let c = format!(
                "{}{{\"b\":1,\"c\":2}}{}",
                open.repeat(depth - 1),
                close.repeat(depth - 1)
            );
            let swapped = c.replace("{\"b\":1,\"c\":2}", "{\"c\":2,\"b\":1}");
            let reads = depth <= 128;
            read_as_before(&mut conn, &c, vec![swapped], reads)
                .await
                .unwrap();
            let (_, _, alone) = read_by_the_database(&mut conn, std::slice::from_ref(&c))
                .await
                .remove(0);
            assert_eq!(alone.is_some(), reads, "{depth} levels");
        }
    }

    let conn = tokio::sync::Mutex::new(conn);
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: 384,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (arb_value(), any::<(usize, usize, usize)>());
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(v, picks)| {
            let (c, others) = spellings(&v, picks);
            handle
                .block_on(async { read_as_before(&mut *conn.lock().await, &c, others, true).await })
        })
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    conn.into_inner().close().await.unwrap();
    t.cleanup().await;
}

/// Schema 24: the JSON Schemas the migration holds as literals are exactly the ones the code
/// generates now (`verdict schema`), so a change of a contract type that is not carried into a
/// new migration fails here instead of drifting silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schemas_the_database_holds_are_the_ones_the_code_generates() {
    let t = postgres().await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    for name in verdict_core::schema::NAMES {
        let held: Option<String> = sqlx::query_scalar("SELECT verdict._contract_schema($1)::text")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let held: Value = serde_json::from_str(&held.expect(name)).unwrap();
        assert_eq!(
            Some(held),
            verdict_core::schema::schema(name),
            "the schema of {name} held by migration 0023 is not the one the code generates"
        );
    }
    conn.close().await.unwrap();
    t.cleanup().await;
}

/// Schema 24: through a principal's own login, with the grant it needs and every claim right, a
/// body whose member has the wrong value or type, or a member its type does not have, is
/// refused (22023, naming the table, the key and the member) by either routine, and nothing is
/// appended; the same records made whole are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_own_login_cannot_store_a_body_its_schema_refuses() {
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let (mut runner, _) = connect_as(&t, RUNNER, Role::Runner).await;
    let (mut human_login, _) = connect_as(&t, HUMAN, Role::Human).await;
    let (mut verifier, _) = connect_as(&t, VERIFIER, Role::Verifier).await;
    write_grant(store, RUNNER).await;
    write_grant(store, HUMAN).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;

    let with = |doc: Value, member: &str, value: Value| {
        let mut doc = doc;
        doc[member] = value;
        canonical(&doc)
    };
    let mut decision = human(&s, &p);
    decision["id"] = json!("hd-schema");
    let human_call = |body: String| Call::new(Table::HumanDecisions, HUMAN, "human", body);
    // A decision that is neither approve nor reject.
    refused_both_ways(
        &mut human_login,
        &human_call(with(decision.clone(), "decision", json!("maybe"))),
        "does not conform to its schema: /decision",
    )
    .await;
    // A role other than human, written by the human itself.
    refused_both_ways(
        &mut human_login,
        &human_call(with(decision.clone(), "role", json!("operator"))),
        "does not conform to its schema: /role",
    )
    .await;
    let ev = evidence(&s, "ev-schema");
    let evidence_call = |body: String| Call::new(Table::CheckEvidence, RUNNER, "runner", body);
    // A member check evidence does not have, and the digest it may carry only outside the store.
    for (member, value) in [("note", json!("x")), ("digest", json!(d("x")))] {
        refused_both_ways(
            &mut runner,
            &evidence_call(with(ev.clone(), member, value)),
            &format!("does not conform to its schema: /{member}: the member"),
        )
        .await;
    }
    // Members of the wrong type.
    for (member, value) in [
        ("hard", json!("yes")),
        ("outcome", json!(1)),
        ("observed_at", json!("yesterday")),
    ] {
        refused_both_ways(
            &mut runner,
            &evidence_call(with(ev.clone(), member, value)),
            &format!("does not conform to its schema: /{member}"),
        )
        .await;
    }
    // Numbers out of range: a negative age, a fractional one.
    for age in [json!(-1), json!(1.5)] {
        refused_both_ways(
            &mut runner,
            &evidence_call(with(
                ev.clone(),
                "freshness",
                json!({"kind": "time", "max_age_s": age}),
            )),
            "does not conform to its schema: /freshness",
        )
        .await;
    }
    // A finding whose severity is no severity, nested where the verifier's result holds it;
    // a result of a negative generation.
    let mut bad_finding = finding(&s, "f-schema", 1);
    bad_finding["severity"] = json!("catastrophic");
    let mut call = Call::new(
        Table::Findings,
        VERIFIER,
        "verifier",
        canonical(&bad_finding),
    );
    call.key = "f-schema@1".into();
    refused_both_ways(
        &mut verifier,
        &call,
        "does not conform to its schema: /severity",
    )
    .await;
    let call = Call::new(
        Table::VerificationResults,
        VERIFIER,
        "verifier",
        canonical(&result(&s, 1, "vrun-1", vec![bad_finding])),
    );
    refused_both_ways(
        &mut verifier,
        &call,
        "does not conform to its schema: /findings/0/severity",
    )
    .await;
    let call = Call::new(
        Table::VerificationResults,
        VERIFIER,
        "verifier",
        with(result(&s, 1, "vrun-1", vec![]), "generation", json!(-1)),
    );
    refused_both_ways(
        &mut verifier,
        &call,
        "does not conform to its schema: /generation",
    )
    .await;

    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    // The same records, whole, are stored.
    put_one(&mut human_login, &human_call(canonical(&decision)))
        .await
        .unwrap();
    put_run(&mut runner, &evidence_call(canonical(&ev)))
        .await
        .unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 2);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    for conn in [runner, human_login, verifier] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

/// What the store itself refuses on either backend, before anything reaches the database: the
/// same bodies through the store's API, each refused as invalid, and nothing appended.
async fn the_store_refuses_a_body_its_schema_refuses(t: &TestStore) {
    let store = t.store.as_ref();
    populate(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    let length = store.audit_head().await.unwrap().unwrap().seq;
    let human_actor = Actor::new(HUMAN, Role::Human);
    let runner_actor = Actor::new(RUNNER, Role::Runner);
    let mut decision = human(&s, &p);
    decision["id"] = json!("hd-schema");
    let mut maybe = decision.clone();
    maybe["decision"] = json!("maybe");
    let ev = evidence(&s, "ev-schema");
    let mut bad = Vec::new();
    for (member, value) in [
        ("note", json!("x")),
        ("hard", json!("yes")),
        ("freshness", json!({"kind": "time", "max_age_s": -1})),
        ("freshness", json!({"kind": "content", "max_age_s": 5})),
    ] {
        let mut e = ev.clone();
        e[member] = value;
        bad.push(e);
    }
    let outcome = store
        .put(&human_actor, DocKind::HumanDecision, &maybe)
        .await;
    assert!(
        matches!(&outcome, Err(verdict_store::StoreError::Invalid { .. })),
        "{outcome:?}"
    );
    for e in &bad {
        let outcome = store.put(&runner_actor, DocKind::Evidence, e).await;
        assert!(
            matches!(&outcome, Err(verdict_store::StoreError::Invalid { .. })),
            "{e}: {outcome:?}"
        );
    }
    // The reader refuses a criterion's weight not above 0 and a struct written as an array of
    // its fields, so SQLite refuses what the database's schema check refuses on PostgreSQL.
    let producer_actor = Actor::new(PRODUCER, Role::Producer);
    for (pointer, value, named) in [
        ("/criteria/items/0/weight", json!(0), "weight"),
        ("/criteria/items/0/weight", json!(-1.5), "weight"),
        ("/execution", json!(["ex-array", 1]), "/execution"),
        (
            "/criteria/items/0",
            json!(["tests-pass", "All unit tests pass"]),
            "/criteria/items/0",
        ),
    ] {
        let mut bad = subject("ex-weight", 1);
        bad["criteria"]["items"][0]["weight"] = json!(1);
        *bad.pointer_mut(pointer).unwrap() = value;
        let outcome = store.put(&producer_actor, DocKind::Subject, &bad).await;
        assert!(
            matches!(&outcome, Err(verdict_store::StoreError::Invalid { message, .. }) if message.contains(named)),
            "{bad}: {outcome:?}"
        );
    }
    // A policy the Gate would refuse is never stored: PostgreSQL's schema check refuses a
    // `pass` fallback or rule and a repeated criterion, the store's reader refuses them (and
    // what no schema says: a repeated rule id, a rule that does not compile) on both.
    let operator = Actor::new(OPERATOR, Role::Operator);
    let rule = |id: &str, when: &str, outcome: &str| json!({"id": id, "when": when, "outcome": outcome, "reason": "r"});
    for (member, value) in [
        ("on_inconclusive", json!("pass")),
        ("on_contradiction", json!("pass")),
        ("required_criteria", json!(["tests-pass", "tests-pass"])),
        ("rules", json!([rule("r", "true", "pass")])),
        (
            "rules",
            json!([rule("r", "true", "rework"), rule("r", "false", "rework")]),
        ),
        ("rules", json!([rule("r", "((", "rework")])),
    ] {
        let mut p = policy(9);
        p[member] = value;
        let outcome = store.put(&operator, DocKind::Policy, &p).await;
        assert!(
            matches!(&outcome, Err(verdict_store::StoreError::Invalid { .. })),
            "{p}: {outcome:?}"
        );
    }
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
}
crate::both!(the_store_refuses_a_body_its_schema_refuses);

/// Runs `check` on `cases` generated bodies, each one of `docs` (its index given), whole or as a
/// [`mutated`] variant, from a runtime's worker thread; panics with the smallest failing case.
fn on_generated_bodies(
    docs: &[&Value],
    cases: u32,
    check: impl Fn(usize, &Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        any::<usize>(),
        any::<usize>(),
        any::<u8>(),
        any::<usize>(),
        any::<bool>(),
    );
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(which, pick, op, value, whole)| {
            let i = which % docs.len();
            let body = if whole {
                docs[i].clone()
            } else {
                mutated(docs[i], pick, op, value)
            };
            check(i, &body)
        })
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// A generated variant of a document: one member removed, one added, or one value replaced by a
/// value of another type or out of range, at any depth.
fn mutated(doc: &Value, pick: usize, op: u8, value: usize) -> Value {
    fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    at.push(k.clone());
                    paths(c, at, out);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    at.push(i.to_string());
                    paths(c, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let palette = [
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(9_007_199_254_740_991_u64),
        json!(""),
        json!("x"),
        json!("maybe"),
        json!("pass"),
        json!("approve"),
        json!("completed"),
        json!("blocker"),
        json!(d("palette")),
        json!("2026-11-30T12:00:00Z"),
        json!("a".repeat(300)),
        json!([]),
        json!(["x"]),
        json!({}),
        json!({"kind": "content"}),
        json!({"kind": "time", "max_age_s": 60}),
    ];
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    let path = &all[pick % all.len()];
    let mut out = doc.clone();
    let mut node = &mut out;
    for step in path {
        node = match node {
            Value::Object(m) => m.get_mut(step).unwrap(),
            Value::Array(a) => &mut a[step.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    match op % 3 {
        0 => {
            // Removes the node from its parent (the root is replaced instead).
            if let Some((last, parent)) = path.split_last() {
                let mut at = &mut out;
                for step in parent {
                    at = match at {
                        Value::Object(m) => m.get_mut(step).unwrap(),
                        Value::Array(a) => &mut a[step.parse::<usize>().unwrap()],
                        _ => unreachable!(),
                    };
                }
                match at {
                    Value::Object(m) => {
                        m.remove(last);
                    }
                    Value::Array(a) => {
                        a.remove(last.parse::<usize>().unwrap());
                    }
                    _ => unreachable!(),
                }
            } else {
                out = palette[value % palette.len()].clone();
            }
        }
        1 => match node {
            Value::Object(m) => {
                let name = ["note", "digest", "extra"][value % 3];
                m.insert(name.to_owned(), palette[value % palette.len()].clone());
            }
            other => *other = palette[value % palette.len()].clone(),
        },
        _ => *node = palette[value % palette.len()].clone(),
    }
    out
}

/// Whether the store's strict reader decodes `v` as the type `table` holds.
fn the_reader_accepts(table: &str, v: &Value) -> bool {
    use verdict_core::contracts::{
        CheckEvidence, Finding, GateDecision, HumanDecision, Policy, Subject, VerificationResult,
        decode_plain,
    };
    match table {
        "subjects" => decode_plain::<Subject>(v).is_ok(),
        "policies" => decode_plain::<Policy>(v).is_ok(),
        "check_evidence" => decode_plain::<CheckEvidence>(v).is_ok(),
        "verification_results" => decode_plain::<VerificationResult>(v).is_ok(),
        "findings" => decode_plain::<Finding>(v).is_ok(),
        // The reader also holds an approval's `clears` to its rules (once each, never on a
        // rejection), as the Gate does.
        "human_decisions" => decode_plain::<HumanDecision>(v)
            .is_ok_and(|h| verdict_core::gate::clears_problems(&h).is_empty()),
        "gate_decisions" => decode_plain::<GateDecision>(v).is_ok(),
        other => panic!("no reader for {other}"),
    }
}

/// Schema 24, differentially: over the documents of every table the check covers, whole and
/// with one member removed, added or given another value at any depth, the database's check
/// (the written-out conditions the routines run, and the walk of the schema that names what is
/// wrong) accepts exactly what the store's strict reader decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_holds_bodies_to_what_the_strict_reader_decodes() {
    let t = postgres().await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let conn = sqlx::PgConnection::connect(url).await.unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let p = d("policy");
    let p_digest: verdict_core::digest::Digest = p.parse().unwrap();
    let mut timed = evidence(&s, "ev-timed");
    timed["freshness"] = json!({"kind": "time", "max_age_s": 300});
    let mut full_finding = finding(&s, "f-full", 2);
    full_finding["location"] = json!({"resource": "diff", "path": "src/lib.rs", "line": 12});
    full_finding["confidence"] = json!(0.75);
    full_finding["remediation"] = json!("fix it");
    let mut full_result = result(&s, 3, "vrun-9", vec![full_finding.clone()]);
    full_result["verifier"]["runtime"] = json!({"provider": "p", "model": "m", "snapshot": "m-1"});
    full_result["context"] = json!({"digest": d("context"), "complete": true});
    let mut unavailable = result(&s, 1, "vrun-8", vec![]);
    unavailable["status"] = json!("unavailable");
    unavailable["unavailable_reason"] = json!("timeout");
    let mut weighted = subject("ex-1", 1);
    weighted["criteria"]["items"][0]["weight"] = json!(2.5);
    // Schema 33: the policy's pins, and a decision naming the reasons they raise.
    let mut pinned = policy(5);
    pinned["risk_floor"] = json!("high");
    pinned["required_criteria"] = json!(["tests-pass", "docs-updated"]);
    pinned["check_definitions"] = json!({"unit-tests": d("def"), "lint": d("lint")});
    let mut unpinned = decision(&s, &p_digest, &d("key2"), "blocked");
    unpinned["reasons"] = json!([
        {"code": "check_definition_unpinned", "outcome": "blocked", "check": "unit-tests", "detail": "pinned"},
        {"code": "criterion_absent", "outcome": "blocked", "criterion": "docs-updated", "detail": "absent"}
    ]);
    let docs: Vec<(&str, Value)> = vec![
        ("subjects", subject("ex-1", 1)),
        ("subjects", weighted),
        ("policies", policy(4)),
        ("policies", pinned),
        ("gate_decisions", unpinned),
        ("check_evidence", evidence(&s, "ev-1")),
        ("check_evidence", timed),
        ("verification_results", full_result),
        ("verification_results", unavailable),
        ("findings", full_finding),
        ("human_decisions", human(&s, &p_digest)),
        ("gate_decisions", decision(&s, &p_digest, &d("key"), "pass")),
    ];
    for (table, doc) in &docs {
        assert!(the_reader_accepts(table, doc), "{table}: {doc}");
    }

    let conn = tokio::sync::Mutex::new(conn);
    let handle = tokio::runtime::Handle::current();
    // How many generated bodies the reader accepted and refused: both must occur, or the
    // comparison proves nothing.
    let seen = std::sync::Mutex::new([0_usize; 2]);
    let originals: Vec<&Value> = docs.iter().map(|(_, doc)| doc).collect();
    on_generated_bodies(&originals, 2048, |i, body| {
        let table = &docs[i].0;
        let reader = the_reader_accepts(table, body);
        seen.lock().unwrap()[usize::from(reader)] += 1;
        let (conforms, why): (Option<bool>, Option<String>) = handle.block_on(async {
                sqlx::query_as(
                    "SELECT verdict._body_conforms($1, $2::jsonb), verdict._body_nonconformity($1, $2::jsonb)",
                )
                .bind(*table)
                .bind(canonical(body))
                .fetch_one(&mut *conn.lock().await)
                .await
                .unwrap()
            });
        prop_assert_eq!(conforms, Some(reader), "{} {}: {:?}", table, body, why);
        prop_assert_eq!(why.is_none(), reader, "{} {}: {:?}", table, body, why);
        Ok(())
    });
    let [refused, accepted] = *seen.lock().unwrap();
    assert!(
        refused > 50 && accepted > 50,
        "{refused} refused, {accepted} accepted"
    );
    conn.into_inner().close().await.unwrap();
    t.cleanup().await;
}

/// Both backends, differentially: the same generated documents (each kind of document whole,
/// and with one member removed, added or given another value at any depth), put by the same
/// principal on two stores that hold the same records, are stored with the same digest on both
/// or refused on both, for the same kind of reason. A body PostgreSQL's checks refuse and the
/// SQLite store takes (or the other way round) would make a pass depend on the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_store_and_refuse_the_same_bodies() {
    use verdict_store::StoreError;
    let stores = [sqlite().await, postgres().await];
    for t in &stores {
        populate(t.store.as_ref()).await;
    }
    let s = subject_digest(&subject("ex-1", 1));
    let p = verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &policy(4));
    for t in &stores {
        admit(t, &s, 1, "vrun-2").await;
        t.store
            .record_run_status(
                &Actor::new(VERIFIER, Role::Verifier),
                "vrun-2",
                verdict_store::RunStatus::Started,
                None,
            )
            .await
            .unwrap();
    }
    let mut second = human(&s, &p);
    second["id"] = json!("hd-2");
    second["decision"] = json!("reject");
    second.as_object_mut().unwrap().remove("clears");
    let mut weighted = subject("ex-1", 2);
    weighted["criteria"]["items"][0]["weight"] = json!(2.5);
    let mut timed = evidence(&s, "ev-timed");
    timed["freshness"] = json!({"kind": "time", "max_age_s": 300});
    // A policy with every member a mutation can break: fallbacks, a rule, pins.
    let mut full_policy = policy(6);
    full_policy["on_inconclusive"] = json!("rework");
    full_policy["on_contradiction"] = json!("blocked");
    full_policy["required_criteria"] = json!(["tests-pass", "docs-updated"]);
    full_policy["optional_criteria"] = json!(["style"]);
    full_policy["risk_floor"] = json!("medium");
    full_policy["risk"] = json!({"high": {"required_verifiers": ["security"], "human": true}});
    full_policy["check_definitions"] = json!({"unit-tests": d("def")});
    full_policy["rules"] = json!([
        {"id": "big", "when": "risk.class == 'high'", "outcome": "human_required", "reason": "high"}
    ]);
    let cases: Vec<(DocKind, Actor, Value)> = vec![
        (
            DocKind::Policy,
            Actor::new(OPERATOR, Role::Operator),
            full_policy,
        ),
        (
            DocKind::Subject,
            Actor::new(PRODUCER, Role::Producer),
            subject("ex-1", 2),
        ),
        (
            DocKind::Subject,
            Actor::new(PRODUCER, Role::Producer),
            weighted,
        ),
        (
            DocKind::Policy,
            Actor::new(OPERATOR, Role::Operator),
            policy(5),
        ),
        (
            DocKind::Evidence,
            Actor::new(RUNNER, Role::Runner),
            evidence(&s, "ev-9"),
        ),
        (DocKind::Evidence, Actor::new(RUNNER, Role::Runner), timed),
        (
            DocKind::Verification,
            Actor::new(VERIFIER, Role::Verifier),
            result(&s, 1, "vrun-2", vec![finding(&s, "f-2", 1)]),
        ),
        (
            DocKind::HumanDecision,
            Actor::new(HUMAN, Role::Human),
            second,
        ),
    ];
    // Which kind of answer a put got, for comparing across backends (messages differ).
    fn answer(r: &Result<verdict_store::Stored, StoreError>) -> String {
        match r {
            Ok(row) => format!("stored {}", row.digest),
            Err(StoreError::Invalid { .. }) => "invalid".into(),
            Err(StoreError::Forbidden { .. } | StoreError::Denied(_) | StoreError::Refused(_)) => {
                "refused".into()
            }
            Err(StoreError::NotFound { .. }) => "not found".into(),
            Err(StoreError::Conflict { .. } | StoreError::Duplicate(_)) => "conflict".into(),
            Err(other) => format!("{other}"),
        }
    }
    let handle = tokio::runtime::Handle::current();
    // How many generated bodies were stored and refused: both must occur.
    let seen = std::sync::Mutex::new([0_usize; 2]);
    let originals: Vec<&Value> = cases.iter().map(|(_, _, doc)| doc).collect();
    on_generated_bodies(&originals, 1024, |i, body| {
        let (kind, actor, _) = &cases[i];
        let [a, b] = [0, 1].map(|i| handle.block_on(stores[i].store.put(actor, *kind, body)));
        seen.lock().unwrap()[usize::from(a.is_ok())] += 1;
        prop_assert_eq!(
            answer(&a),
            answer(&b),
            "{:?} {}: SQLite {:?}, PostgreSQL {:?}",
            kind,
            body,
            a,
            b
        );
        Ok(())
    });
    let [refused, stored] = *seen.lock().unwrap();
    assert!(
        refused > 50 && stored > 20,
        "{refused} refused, {stored} stored"
    );
    // What each stored is the same, record for record.
    assert_eq!(
        audit_length(&stores[0]).await,
        audit_length(&stores[1]).await
    );
    for t in stores {
        t.cleanup().await;
    }
}

/// The audit chain's length: the sequence number of its head.
async fn audit_length(t: &TestStore) -> u64 {
    t.store.audit_head().await.unwrap().unwrap().seq
}

/// Schema 29: a pattern with one repeat is matched as a length test and the pattern with a star
/// in its place. Over strings generated around every bound (and past them, with characters of
/// the class and others), the rewritten test accepts exactly what the pattern accepts, for the
/// patterns the contract schemas use and for patterns of every quantifier; patterns it must not
/// rewrite (groups, alternatives, two repeats, a class escape) come back as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_matched_without_its_counted_repeat_accepts_the_same_strings() {
    use proptest::test_runner::{Config, TestRunner};
    let t = postgres().await;
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let conn = sqlx::PgConnection::connect(url).await.unwrap();
    let rewritten = |pattern: &str| {
        let pattern = pattern.to_owned();
        async move {
            let sql: String = sqlx::query_scalar("SELECT verdict._pattern_sql($1, $2)")
                .bind("$1")
                .bind(&pattern)
                .fetch_one(&mut sqlx::PgConnection::connect(url).await.unwrap())
                .await
                .unwrap();
            sql
        }
    };
    // Each pattern with how its likely matches are made: a start, characters of the repeated
    // atom, its bounds (the largest run tried when it has none), an end, and characters that
    // do not belong.
    let patterns: Vec<(&str, &str, &str, usize, usize, &str, &str)> = vec![
        (
            "^sha256:[0-9a-f]{64}$",
            "sha256:",
            "0123456789abcdef",
            64,
            64,
            "",
            "gA:",
        ),
        (
            "^[a-z0-9][a-z0-9._-]{0,127}$",
            "a",
            "az09._-",
            0,
            127,
            "",
            "A \u{e9}",
        ),
        ("^ab{2,4}c$", "a", "b", 2, 4, "c", "ax"),
        ("^[xy]+z$", "", "xy", 1, 40, "z", "q"),
        ("^.?q$", "", "q.\n\u{e9}", 0, 1, "q", ""),
        ("^a\\.b*$", "a.", "b", 0, 40, "", "x."),
        ("^[^\"]{3,}!$", "", "a\u{e9}!", 3, 40, "!", "\""),
        ("^k{5}$", "", "k", 5, 5, "", "K"),
    ];
    // Every pattern the contract schemas hold is among those checked here.
    for name in verdict_core::schema::NAMES {
        let schema = verdict_core::schema::schema(name).unwrap();
        let mut found = vec![];
        fn collect(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(p)) = m.get("pattern") {
                        out.push(p.clone());
                    }
                    m.values().for_each(|c| collect(c, out));
                }
                Value::Array(a) => a.iter().for_each(|c| collect(c, out)),
                _ => {}
            }
        }
        collect(&schema, &mut found);
        for p in found {
            let sql = rewritten(&p).await;
            assert!(
                patterns.iter().any(|(q, ..)| *q == p) || !sql.contains("length("),
                "{name}: the pattern {p} is rewritten ({sql}) but not tested here"
            );
        }
    }
    let mut cases = vec![];
    for (pattern, start, fill, min, max, end, other) in &patterns {
        let sql = rewritten(pattern).await;
        assert!(
            sql.contains("length("),
            "{pattern} was not rewritten: {sql}"
        );
        let chars = |s: &str| s.chars().collect::<Vec<char>>();
        cases.push((
            *pattern,
            *start,
            chars(fill),
            *min,
            *max,
            *end,
            chars(other),
            sql,
        ));
    }
    for kept in [
        "^(ab){2}$",
        "^a|b{2}$",
        "^a{2}b{2}$",
        "^\\d{3}$",
        "^a{2}",
        "a{2}$",
    ] {
        let sql = rewritten(kept).await;
        assert!(
            !sql.contains("length("),
            "{kept} must be matched as written: {sql}"
        );
    }

    let conn = tokio::sync::Mutex::new(conn);
    let handle = tokio::runtime::Handle::current();
    let seen = std::sync::Mutex::new([0_usize; 2]);
    let mut runner = TestRunner::new(Config {
        cases: 768,
        failure_persistence: None,
        ..Config::default()
    });
    // A string: the pattern's start (or not), a run of the repeated atom's characters from two
    // under its least to two over its most, its end (or not), and sometimes one character that
    // does not belong, put anywhere.
    let strategy = (
        any::<usize>(),
        any::<u8>(),
        any::<usize>(),
        proptest::collection::vec(any::<usize>(), 150),
        any::<(usize, usize)>(),
    );
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(which, flags, run, picks, (at, odd))| {
            let (pattern, start, fill, min, max, end, other, sql) = &cases[which % cases.len()];
            let lo = min.saturating_sub(2);
            let len = lo + run % (max + 3 - lo);
            let mut s: Vec<char> = Vec::new();
            if flags & 0b111 != 0 {
                s.extend(start.chars());
            }
            s.extend((0..len).map(|i| fill[picks[i % picks.len()] % fill.len()]));
            if flags & 0b111000 != 0 {
                s.extend(end.chars());
            }
            if flags & 0b1100_0000 == 0 && !other.is_empty() {
                let c = other[odd % other.len()];
                s.insert(at % (s.len() + 1), c);
            }
            let s: String = s.into_iter().collect();
            let (matched, tested): (bool, bool) = handle.block_on(async {
                // The test the database itself wrote for the pattern.
                sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT $1 ~ $2, {sql}")))
                    .bind(&s)
                    .bind(*pattern)
                    .fetch_one(&mut *conn.lock().await)
                    .await
                    .unwrap()
            });
            seen.lock().unwrap()[usize::from(matched)] += 1;
            prop_assert_eq!(matched, tested, "{:?} against {} and {}", s, pattern, sql);
            Ok(())
        })
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    let [refused, accepted] = *seen.lock().unwrap();
    assert!(
        refused > 100 && accepted > 100,
        "{refused} refused, {accepted} accepted"
    );
    conn.into_inner().close().await.unwrap();
    t.cleanup().await;
}
