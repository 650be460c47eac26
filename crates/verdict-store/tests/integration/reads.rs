//! What each PostgreSQL login reads (schema version 23), tried with plain SQL: a principal's own
//! identity, logged in or set with SET ROLE, reads only the rows of executions it holds a grant
//! in force on, what it wrote, its own grants and its own denials; an operator's login and the
//! service login read every row, and the service's plans carry no check. SQLite has no logins:
//! whoever opens the file reads all of it (docs/deployment.md).
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
use verdict_store::{Actor, DocKind, JobKind, NewJob, Stored};

/// A producer with a grant on `ex-2` only, and a subject of its own there.
const OUTSIDER: &str = "outsider";

async fn one(conn: &mut sqlx::PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Every table of the store's schema, as the catalogue lists it.
async fn tables(conn: &mut sqlx::PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_catalog.pg_class c \
         WHERE c.relnamespace = 'verdict'::regnamespace AND c.relkind IN ('r', 'p') \
         ORDER BY 1",
    )
    .fetch_all(conn)
    .await
    .unwrap()
}

/// The rows of execution `ex-1` (populated), each as a count over one table.
fn of_ex1(s1: &str, request: &str) -> Vec<(&'static str, String)> {
    let about = |t: &'static str| {
        (
            t,
            format!("SELECT count(*) FROM verdict.{t} WHERE subject_digest = '{s1}'"),
        )
    };
    vec![
        ("subjects", format!("SELECT count(*) FROM verdict.subjects WHERE key = '{s1}'")),
        about("check_evidence"),
        about("verification_requests"),
        about("verifier_runs"),
        ("run_events", "SELECT count(*) FROM verdict.run_events WHERE run_id = 'vrun-1'".to_owned()),
        about("verification_results"),
        about("findings"),
        about("human_decisions"),
        about("gate_decisions"),
        about("gate_evaluations"),
        (
            "pointers",
            "SELECT count(*) FROM verdict.pointers WHERE (pointer = 'execution' AND name = 'ex-1') \
             OR (pointer = 'lease' AND name = 'run vrun-1')"
                .to_owned(),
        ),
        (
            "pointer_changes",
            "SELECT count(*) FROM verdict.pointer_changes WHERE pointer IN ('execution', 'lease') \
             AND name IN ('ex-1', 'run vrun-1')"
                .to_owned(),
        ),
        ("blobs", format!("SELECT count(*) FROM verdict.blobs WHERE key = '{}'", d("objective"))),
        ("jobs", format!("SELECT count(*) FROM verdict.jobs WHERE request = '{request}'")),
        (
            "audit_events",
            format!(
                "SELECT count(*) FROM verdict.audit_events WHERE (key = '{s1}' \
                 OR tbl IN ('check_evidence', 'verifier_runs', 'run_events', 'verification_results', \
                 'findings', 'human_decisions', 'gate_decisions', 'gate_evaluations'))"
            ),
        ),
    ]
}

/// ex-1 populated (its verifier, VERIFIER, holds a read grant on it, and g-1 of its grants is
/// revoked), a blob its subject names, a job of its request, and OUTSIDER with a subject, a
/// grant and a denial of its own on ex-2. Returns ex-1's subject digest and request digest.
async fn two_executions(t: &TestStore) -> (String, String) {
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    register(t.store.as_ref(), OUTSIDER, Role::Producer).await;
    let op = Actor::new(OPERATOR, Role::Operator);
    let s1 = subject_digest(&subject("ex-1", 1));
    // The subject's objective, named by its digest, put by the subject's producer (the subject,
    // stored before the bytes, vouches for them as theirs: schema 44).
    register(t.store.as_ref(), PRODUCER, Role::Producer).await;
    t.store
        .put_blob(&Actor::new(PRODUCER, Role::Producer), b"objective", None)
        .await
        .unwrap();
    let req: Stored = t
        .store
        .put(&op, DocKind::Request, &request(&s1))
        .await
        .unwrap();
    t.store
        .queue()
        .enqueue_jobs(
            &op,
            &[NewJob {
                kind: JobKind::Checks,
                request: req.digest.clone(),
                class: String::new(),
                deadline: None,
            }],
        )
        .await
        .unwrap();
    grant_write(t.store.as_ref(), "g-out", OUTSIDER, "ex-2").await;
    let mut s2 = subject("ex-2", 1);
    s2["producer"]["principal"] = serde_json::json!(OUTSIDER);
    // In no mission: the outsider is granted ex-2 alone, and a grant on m-17 would read ex-1
    // (a subject naming a mission needs one, schema 31).
    s2.as_object_mut().unwrap().remove("mission");
    // Naming ex-1's objective would open its bytes to the outsider (a subject it reads names it).
    s2["objective"]["digest"] = serde_json::json!(d("another objective"));
    t.store
        .put(&Actor::new(OUTSIDER, Role::Producer), DocKind::Subject, &s2)
        .await
        .unwrap();
    t.store
        .put(
            &Actor::system("verdict-engine"),
            DocKind::Denial,
            &denial(OUTSIDER, Some("producer"), "nonce-out"),
        )
        .await
        .unwrap();
    (s1.to_string(), req.digest.to_string())
}

/// The same count through the database superuser, and `conn` (asserted equal), for every table.
async fn reads_every_row(t: &TestStore, conn: &mut sqlx::PgConnection, who: &str) {
    let mut admin = sqlx::PgConnection::connect(&pg_url(t)).await.unwrap();
    for table in tables(&mut admin).await {
        let sql = format!("SELECT count(*) FROM verdict.{table}");
        if table == "principals" || table == "chain_lock" || table == "credential_changes" {
            // The principals are closed to every group role since schema 10, operators'
            // included, and so are the changes of their tokens (schema 30); the chain's lock
            // table holds no row and no role but the owner may touch it (schema 28).
            continue;
        }
        let all = one(&mut admin, &sql).await;
        assert_eq!(
            one(conn, &sql).await,
            all,
            "{who} reads every row of {table}"
        );
    }
    admin.close().await.unwrap();
}

fn pg_url(t: &TestStore) -> String {
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    url.clone()
}

/// Through its own login, a principal reads, with plain SQL, the rows of the execution it holds
/// a grant on and none of another's: subjects, evidence, requests, runs and their events,
/// results, findings, human and gate decisions, evaluations, pointers, blobs, jobs and the audit
/// events of all of them; only its own grants (and their revocations) and its own denials. Its
/// identity set by a service login with SET ROLE reads the same. An operator's login and the
/// service login read every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_login_reads_only_what_its_grants_cover() {
    let t = postgres().await;
    let (s1, req) = two_executions(&t).await;
    let (mut verifier, _) = principal_login(&t, VERIFIER, Role::Verifier).await;
    let (mut outsider, outsider_role) = principal_login(&t, OUTSIDER, Role::Producer).await;
    let (mut operator, _) = principal_login(&t, "op-2", Role::Operator).await;
    let mut admin = sqlx::PgConnection::connect(&pg_url(&t)).await.unwrap();

    // ex-1's rows: the verifier, holding a grant on it, reads each; the outsider none.
    for (table, sql) in of_ex1(&s1, &req) {
        let all = one(&mut admin, &sql).await;
        assert!(all > 0, "{table}: ex-1 has rows ({sql})");
        assert_eq!(
            one(&mut verifier, &sql).await,
            all,
            "the verifier reads ex-1's {table}"
        );
        assert_eq!(
            one(&mut outsider, &sql).await,
            0,
            "the outsider reads no {table} of ex-1"
        );
        assert_eq!(
            one(&mut operator, &sql).await,
            all,
            "an operator reads ex-1's {table}"
        );
    }
    // Its own subject, grant and denial, the outsider reads; no one else's grant or denial.
    let own_subject = "SELECT count(*) FROM verdict.subjects WHERE execution_id = 'ex-2'";
    assert_eq!(one(&mut outsider, own_subject).await, 1);
    assert_eq!(one(&mut verifier, own_subject).await, 0);
    let pairs = [
        (&mut outsider, OUTSIDER, 1_i64, 0_i64, 1_i64),
        (&mut verifier, VERIFIER, 2, 1, 0),
    ];
    for (conn, name, grants, revoked, denials) in pairs {
        assert_eq!(
            one(
                conn,
                &format!("SELECT count(*) FROM verdict.grants WHERE principal = '{name}'")
            )
            .await,
            grants,
            "{name} reads its own grants"
        );
        assert_eq!(
            one(
                conn,
                &format!("SELECT count(*) FROM verdict.grants WHERE principal <> '{name}'")
            )
            .await,
            0,
            "{name} reads no one else's grant"
        );
        assert_eq!(
            one(conn, "SELECT count(*) FROM verdict.grant_revocations").await,
            revoked
        );
        assert_eq!(
            one(
                conn,
                &format!("SELECT count(*) FROM verdict.denials WHERE principal = '{name}'")
            )
            .await,
            denials,
            "{name} reads its own denials"
        );
        assert_eq!(
            one(
                conn,
                &format!("SELECT count(*) FROM verdict.denials WHERE principal <> '{name}'")
            )
            .await,
            0,
            "{name} reads no one else's denial"
        );
        // The audit events it reads record only rows it reads, or are its own acts.
        assert_eq!(
            one(
                conn,
                &format!(
                    "SELECT count(*) FROM verdict.audit_events WHERE principal <> '{name}' \
                     AND ((tbl = 'grants' AND key NOT IN (SELECT key FROM verdict.grants)) \
                       OR (tbl = 'denials' AND key NOT IN (SELECT key FROM verdict.denials)) \
                       OR (tbl = 'subjects' AND key NOT IN (SELECT key FROM verdict.subjects)))"
                )
            )
            .await,
            0,
            "{name} reads no event of a row hidden from it"
        );
    }
    // The rows are there: the superuser reads the denial naming the producer of ex-1.
    assert_eq!(
        one(
            &mut admin,
            &format!("SELECT count(*) FROM verdict.denials WHERE principal = '{PRODUCER}'")
        )
        .await,
        1
    );
    // The principals' rows, and the changes of their tokens, stay closed to every principal's
    // login.
    for conn in [&mut verifier, &mut outsider, &mut operator] {
        for table in ["principals", "credential_changes"] {
            let err = conn
                .execute(sqlx::AssertSqlSafe(format!(
                    "SELECT count(*) FROM verdict.{table}"
                )))
                .await
                .unwrap_err();
            assert!(err.to_string().contains("permission denied"), "{err}");
        }
    }
    // The outsider's identity set by a service login reads as its own login does.
    let mut service = sqlx::PgConnection::connect(&service_login(&t, "svc_reads").await)
        .await
        .unwrap();
    reads_every_row(&t, &mut service, "the service login").await;
    service
        .execute(sqlx::AssertSqlSafe(format!("SET ROLE \"{outsider_role}\"")))
        .await
        .unwrap();
    for (table, sql) in of_ex1(&s1, &req) {
        assert_eq!(
            one(&mut service, &sql).await,
            0,
            "as the outsider, the service reads no {table} of ex-1"
        );
    }
    assert_eq!(one(&mut service, own_subject).await, 1);
    service.execute("RESET ROLE").await.unwrap();
    reads_every_row(&t, &mut operator, "an operator's login").await;
    for conn in [verifier, outsider, operator, service, admin] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

/// A grant revoked, or expired, no longer opens an execution's rows to its holder's login; the
/// rows it wrote itself stay readable to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_reads_nothing_but_what_its_holder_wrote() {
    let t = postgres().await;
    let (s1, req) = two_executions(&t).await;
    let (mut verifier, _) = principal_login(&t, VERIFIER, Role::Verifier).await;
    revoke(t.store.as_ref(), "g-2").await;
    let mut admin = sqlx::PgConnection::connect(&pg_url(&t)).await.unwrap();
    for (table, sql) in of_ex1(&s1, &req) {
        // What the verifier wrote itself (its run's events and lease, its result and finding,
        // and their audit events) it still reads; nothing else of ex-1.
        let own = match table {
            "run_events" | "verification_results" | "findings" | "audit_events" => {
                one(&mut admin, &format!("{sql} AND seq IN (SELECT seq FROM verdict.audit_events WHERE principal = '{VERIFIER}')")).await
            }
            "pointer_changes" => 1,
            _ => 0,
        };
        assert_eq!(
            one(&mut verifier, &sql).await,
            own,
            "{table} of ex-1 after the revocation"
        );
    }
    let written = one(
        &mut verifier,
        &format!("SELECT count(*) FROM verdict.verification_results WHERE subject_digest = '{s1}'"),
    )
    .await;
    assert_eq!(written, 1, "the verifier reads the result it wrote");
    admin.close().await.unwrap();
    // Both its grants, and their revocations, stay its own to read.
    assert_eq!(
        one(
            &mut verifier,
            "SELECT count(*) FROM verdict.grant_revocations"
        )
        .await,
        2
    );
    verifier.close().await.unwrap();
    t.cleanup().await;
}

/// The service login's plans carry no read check (its policy is the constant it was), while a
/// producer's login's plan calls the check: the service pays nothing for the scoping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_logins_plans_carry_no_read_check() {
    let t = postgres().await;
    let (s1, _) = two_executions(&t).await;
    let (mut outsider, _) = principal_login(&t, OUTSIDER, Role::Producer).await;
    let mut service = sqlx::PgConnection::connect(&service_login(&t, "svc_plans").await)
        .await
        .unwrap();
    let queries = [
        format!("SELECT * FROM verdict.subjects WHERE key = '{s1}'"),
        format!("SELECT * FROM verdict.check_evidence WHERE subject_digest = '{s1}' ORDER BY seq"),
        "SELECT * FROM verdict.audit_events WHERE seq > 0 ORDER BY seq LIMIT 100".to_owned(),
        "SELECT * FROM verdict.grants WHERE principal = 'x' ORDER BY seq".to_owned(),
        "SELECT * FROM verdict.jobs WHERE kind = 'checks' AND state = 'ready'".to_owned(),
    ];
    for sql in &queries {
        let plan = |rows: Vec<String>| rows.join("\n");
        let explain = format!("EXPLAIN (VERBOSE, COSTS OFF) {sql}");
        let as_service = plan(
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain.clone()))
                .fetch_all(&mut service)
                .await
                .unwrap(),
        );
        let as_outsider = plan(
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
                .fetch_all(&mut outsider)
                .await
                .unwrap(),
        );
        assert!(
            !as_service.contains("verdict._read"),
            "{sql}:\n{as_service}"
        );
        assert!(
            as_outsider.contains("verdict._read"),
            "{sql}:\n{as_outsider}"
        );
    }
    for conn in [outsider, service] {
        conn.close().await.unwrap();
    }
    t.cleanup().await;
}

/// Every table of the schema, as the catalogue lists it, has row security enabled and forced,
/// and a read policy open to every role only where everyone reads (the policies, the store's
/// settings, its schema versions and the identities' names); every other table is read through
/// a policy for the principals' groups that calls the check. A table added without them fails
/// here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_keeps_forced_row_security_and_a_scoped_read_policy() {
    let t = postgres().await;
    let mut admin = sqlx::PgConnection::connect(&pg_url(&t)).await.unwrap();
    let open = [
        "policies",
        "principal_roles",
        "schema_migrations",
        "store_meta",
    ];
    let all = tables(&mut admin).await;
    assert!(all.len() >= 23, "{all:?}");
    for table in &all {
        let forced: bool = sqlx::query_scalar(
            "SELECT c.relrowsecurity AND c.relforcerowsecurity FROM pg_catalog.pg_class c \
             WHERE c.relnamespace = 'verdict'::regnamespace AND c.relname = $1",
        )
        .bind(table)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert!(forced, "{table} has no forced row security");
        let policies: Vec<(Vec<String>, String)> = sqlx::query_as(
            "SELECT roles::text[], coalesce(qual, '') FROM pg_catalog.pg_policies \
             WHERE schemaname = 'verdict' AND tablename = $1 AND cmd = 'SELECT'",
        )
        .bind(table)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        let to_public = policies
            .iter()
            .any(|(roles, _)| roles.iter().any(|r| r == "public"));
        assert_eq!(
            to_public,
            open.contains(&table.as_str()),
            "{table}: {policies:?}"
        );
        // A table no principal's group may select at all (the duty leases) needs no scoped
        // policy: the privilege already refuses the read.
        let selectable: bool = sqlx::query_scalar("SELECT has_table_privilege($1, $2, 'SELECT')")
            .bind(format!("{}producer", t.prefix))
            .bind(format!("verdict.{table}"))
            .fetch_one(&mut admin)
            .await
            .unwrap();
        if !open.contains(&table.as_str()) && selectable {
            let scoped = policies.iter().any(|(roles, qual)| {
                roles.contains(&format!("{}producer", t.prefix)) && qual.contains("verdict._read")
            });
            assert!(scoped, "{table} has no scoped read policy: {policies:?}");
        }
    }
    admin.close().await.unwrap();
    t.cleanup().await;
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
    pg_url(t).replacen("postgres@", &format!("{login}@"), 1)
}

/// Schema 32: two stores on one cluster under one role prefix (both migrated before prefixes
/// were marked) share their group roles. An operator's login of store A, connected to store
/// B's database, is a member of B's operators' group, yet reads no row of B, as itself or
/// having set the group role; nor does a login made by hand a member of that group, in either
/// store. Each store's own operator still reads every row of its own store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_login_of_another_store_reads_nothing_of_this_one() {
    let a = postgres().await;
    populate(a.store.as_ref()).await;
    let b = postgres_sharing_roles_with(&a).await;
    two_executions(&b).await;
    let (mut op_a, op_a_role) = principal_login(&a, "op-a", Role::Operator).await;
    let (mut op_b, _) = principal_login(&b, "op-b", Role::Operator).await;
    reads_every_row(&a, &mut op_a, "store A's operator, in store A").await;
    reads_every_row(&b, &mut op_b, "store B's operator, in store B").await;
    let intruder = format!("{}intruder", a.prefix);
    a.raw(&format!(
        "CREATE ROLE \"{intruder}\" LOGIN IN ROLE \"{}operator\"",
        a.prefix
    ))
    .await
    .unwrap();

    let in_b = |user: &str| pg_url(&b).replacen("postgres@", &format!("{user}@"), 1);
    let mut a_in_b = sqlx::PgConnection::connect(&in_b(&op_a_role))
        .await
        .unwrap();
    let mut intruder_in_b = sqlx::PgConnection::connect(&in_b(&intruder)).await.unwrap();
    let mut intruder_in_a =
        sqlx::PgConnection::connect(&pg_url(&a).replacen("postgres@", &format!("{intruder}@"), 1))
            .await
            .unwrap();
    // The groups are shared: store A's operator is a member of the group B's policies name.
    let member = format!(
        "SELECT pg_has_role(current_user, '{}operator', 'MEMBER')::int::bigint",
        a.prefix
    );
    assert_eq!(one(&mut a_in_b, &member).await, 1);

    let mut admin_b = sqlx::PgConnection::connect(&pg_url(&b)).await.unwrap();
    let mut admin_a = sqlx::PgConnection::connect(&pg_url(&a)).await.unwrap();
    for set_group in [false, true] {
        if set_group {
            for conn in [&mut a_in_b, &mut intruder_in_b, &mut intruder_in_a] {
                conn.execute(sqlx::AssertSqlSafe(format!(
                    "SET ROLE \"{}operator\"",
                    a.prefix
                )))
                .await
                .unwrap();
            }
        }
        for table in tables(&mut admin_b).await {
            let sql = format!("SELECT count(*) FROM verdict.{table}");
            if ["principals", "chain_lock", "credential_changes"].contains(&table.as_str()) {
                // Closed to every group role (schemas 10, 28 and 30): not even a count.
                for conn in [&mut a_in_b, &mut intruder_in_b, &mut intruder_in_a] {
                    let refused = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.clone()))
                        .fetch_one(&mut *conn)
                        .await
                        .unwrap_err();
                    assert!(
                        refused.to_string().contains("permission denied"),
                        "{table}: {refused}"
                    );
                }
                continue;
            }
            // The rows are there to read.
            if ["grants", "audit_events", "subjects", "denials"].contains(&table.as_str()) {
                assert!(one(&mut admin_b, &sql).await > 0, "store B has {table}");
            }
            if ["grants", "audit_events", "subjects"].contains(&table.as_str()) {
                assert!(one(&mut admin_a, &sql).await > 0, "store A has {table}");
            }
            if [
                "policies",
                "store_meta",
                "schema_migrations",
                "principal_roles",
            ]
            .contains(&table.as_str())
            {
                // Readable by every role since schema 23: names and roles are not secret.
                continue;
            }
            assert_eq!(
                one(&mut a_in_b, &sql).await,
                0,
                "store A's operator reads no {table} of store B (group set: {set_group})"
            );
            assert_eq!(
                one(&mut intruder_in_b, &sql).await,
                0,
                "a member of the group reads no {table} of store B (group set: {set_group})"
            );
            assert_eq!(
                one(&mut intruder_in_a, &sql).await,
                0,
                "a member of the group reads no {table} of store A (group set: {set_group})"
            );
        }
    }
    for conn in [
        a_in_b,
        intruder_in_b,
        intruder_in_a,
        op_a,
        op_b,
        admin_a,
        admin_b,
    ] {
        conn.close().await.unwrap();
    }
    a.cleanup().await;
    b.cleanup().await;
}
