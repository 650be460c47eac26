//! What the store reads to answer one question about one execution is found through an index
//! (PostgreSQL), so that it does not grow with everything the store keeps: above all what a
//! write routine reads while it holds the audit chain's lock.

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
    many_executions(&t).await;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
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

/// 50 executions of 100 generations each, a request on each subject, and one cancellation note
/// for each execution among them, written behind the routines' back and analysed: only their
/// number and shape matter to the planner. With many subjects to an execution, finding a row
/// through the execution's subjects looks dear, and a planner with a cheaper-looking way reads
/// every row instead.
async fn many_executions(t: &TestStore) {
    t.tamper(
        "verification_requests",
        "INSERT INTO verdict.subjects (seq, key, digest, execution_id, generation, body) \
         SELECT 2000000 + i, 'sha256:' || repeat(md5('s' || i), 2), 'sha256:' || repeat(md5('s' || i), 2), \
           'ex-' || i % 50, i / 50 + 1, \
           jsonb_build_object('schema', 'verdict.subject/v1', 'mission', 'm-1', \
             'execution', jsonb_build_object('id', 'ex-' || i % 50, 'generation', i / 50 + 1), \
             'producer', jsonb_build_object('principal', 'agent-coder-1'))::text \
         FROM generate_series(1, 5000) AS i; \
         INSERT INTO verdict.verification_requests (seq, key, digest, subject_digest, body) \
         SELECT 1000000 + i, 'sha256:' || repeat(md5(i::text), 2), 'sha256:' || repeat(md5(i::text), 2), \
           'sha256:' || repeat(md5('s' || CASE WHEN i % 100 = 0 THEN 50 + i / 100 % 50 ELSE i END), 2), \
           CASE WHEN i % 100 = 0 \
             THEN jsonb_build_object('schema', 'verdict.cancellation/v1', \
               'subject_digest', 'sha256:' || repeat(md5('s' || (50 + i / 100 % 50)), 2), \
               'cancelled', jsonb_build_object('kind', 'execution', 'id', 'ex-' || i / 100 % 50), \
               'by', jsonb_build_object('principal', 'engine', 'role', 'operator'))::text \
             ELSE jsonb_build_object('schema', 'verdict.request/v1', \
               'subject_digest', 'sha256:' || repeat(md5('s' || i), 2))::text END \
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
    t.raw("ANALYZE verdict.subjects, verdict.verification_requests, verdict.audit_events")
        .await
        .unwrap();
}

/// Scans of verdict.verification_requests so far: (sequential, by index), as the statistics
/// collector has them.
async fn request_scans(t: &TestStore) -> (i64, i64) {
    let seq = t
        .count("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'verdict.verification_requests'::regclass")
        .await;
    let idx = t
        .count("SELECT coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relid = 'verdict.verification_requests'::regclass")
        .await;
    (seq, idx)
}

/// An execution's rows are read through the subject index, not by a join that reads every row
/// of the table (PostgreSQL): the table's scan counters around one `Store::list` of an
/// execution's requests. Counts reach the statistics when a connection goes idle, up to 10 s
/// later, so the test waits for the earlier ones to settle and then for the read's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executions_rows_are_read_through_the_subject_index() {
    let t = postgres().await;
    many_executions(&t).await;
    // What the store's own connections and the populating statement did reaches the counters
    // when each connection next goes idle or ends, at the latest 10 s later (PostgreSQL's idle
    // flush): the baseline is taken once they have held still for longer than that.
    let waited = std::time::Instant::now();
    let mut before = request_scans(&t).await;
    let mut still = std::time::Instant::now();
    while before.0 < 1 || still.elapsed() < std::time::Duration::from_secs(11) {
        assert!(waited.elapsed() < std::time::Duration::from_secs(60));
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let now = request_scans(&t).await;
        if now != before {
            (before, still) = (now, std::time::Instant::now());
        }
    }
    let rows = t
        .store
        .list(
            verdict_store::DocKind::Request,
            &verdict_store::About::Execution("ex-7".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        101,
        "ex-7's 100 requests and its cancellation note"
    );
    let waited = std::time::Instant::now();
    let after = loop {
        let now = request_scans(&t).await;
        if now != before {
            break now;
        }
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(30),
            "the read never reached the statistics"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        after.0, before.0,
        "the execution's requests were read by a sequential scan ({before:?} -> {after:?})"
    );
    t.cleanup().await;
}
