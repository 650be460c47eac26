//! What a write routine reads while it holds the audit chain's lock is found through an index
//! (PostgreSQL), so that a turn at the chain does not grow with everything the store keeps.

use crate::common::*;
use sqlx::{Connection, Executor};
use verdict_store::Location;

/// The question the run-admission trigger asks (schema 14: was the run's execution
/// cancelled?), taken from the trigger's own source and planned as PL/pgSQL plans it once it
/// keeps a generic plan (the execution a parameter), over a table of requests large enough
/// that reading all of them is what a planner without the index chooses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_admission_finds_its_executions_cancellation_through_an_index() {
    let t = postgres().await;
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    // 50 executions of 100 generations each, a request on each subject, and one cancellation
    // note for each execution among them, written behind the routines' back: only their number and shape
    // matter to the planner. With many subjects to an execution, finding the cancellation
    // through the execution's subjects looks dear, and without the index the planner reads
    // every request instead.
    t.tamper(
        "verification_requests",
        "INSERT INTO verdict.subjects (seq, key, digest, execution_id, generation, body) \
         SELECT 2000000 + i, 'sha256:' || md5('s' || i), 'sha256:' || md5('s' || i), \
           'ex-' || i % 50, i / 50 + 1, \
           jsonb_build_object('schema', 'verdict.subject/v1', 'mission', 'm-1', \
             'execution', jsonb_build_object('id', 'ex-' || i % 50, 'generation', i / 50 + 1), \
             'producer', jsonb_build_object('principal', 'agent-coder-1'))::text \
         FROM generate_series(1, 5000) AS i; \
         INSERT INTO verdict.verification_requests (seq, key, digest, subject_digest, body) \
         SELECT 1000000 + i, 'sha256:' || md5(i::text), 'sha256:' || md5(i::text), \
           'sha256:' || md5('s' || CASE WHEN i % 100 = 0 THEN 50 + i / 100 % 50 ELSE i END), \
           CASE WHEN i % 100 = 0 \
             THEN jsonb_build_object('schema', 'verdict.cancellation/v1', \
               'subject_digest', 'sha256:' || md5('s' || (50 + i / 100 % 50)), \
               'cancelled', jsonb_build_object('kind', 'execution', 'id', 'ex-' || i / 100 % 50), \
               'by', jsonb_build_object('principal', 'engine', 'role', 'operator'))::text \
             ELSE jsonb_build_object('schema', 'verdict.request/v1', \
               'subject_digest', 'sha256:' || md5('s' || i))::text END \
         FROM generate_series(1, 5000) AS i; \
         INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, \
           principal, role, payload_digest, recorded_at) \
         SELECT seq, '-', '-', 'append', 'subjects', key, 'agent-coder-1', 'producer', \
           digest, '2026-12-01T00:00:00Z' FROM verdict.subjects WHERE seq >= 2000000 \
         UNION ALL \
         SELECT seq, '-', '-', 'append', 'verification_requests', key, 'agent-coder-1', \
           'producer', digest, '2026-12-01T00:00:00Z' \
         FROM verdict.verification_requests WHERE seq >= 1000000",
    )
    .await;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    conn.execute("ANALYZE verdict.subjects, verdict.verification_requests, verdict.audit_events")
        .await
        .unwrap();
    let source: String = sqlx::query_scalar(
        "SELECT prosrc FROM pg_proc WHERE oid = 'verdict._run_on_live_execution'::regproc",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let open = "IF EXISTS (";
    let start = source.find(open).expect("the trigger asks EXISTS") + open.len();
    let end = start + source[start..].find(") THEN").unwrap();
    let question = source[start..end].replace("v_execution", "$1");
    conn.execute(sqlx::AssertSqlSafe(format!(
        "SET plan_cache_mode = force_generic_plan; PREPARE question(text) AS SELECT EXISTS ({question})"
    )))
    .await
    .unwrap();
    let plan: Vec<String> = sqlx::query_scalar("EXPLAIN EXECUTE question('ex-7')")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("verification_requests_cancelled_execution")
            && !plan.contains("Seq Scan on verification_requests"),
        "the cancellation is not looked up by its index:\n{plan}"
    );
    t.cleanup().await;
}
