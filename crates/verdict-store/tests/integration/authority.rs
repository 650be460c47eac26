//! Authority tried by hand through a PostgreSQL login that holds only its own role: the write
//! routines themselves refuse what the store refuses, and a refusal appends nothing.
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
use verdict_core::contracts::{Role, UnavailableReason};
use verdict_store::{
    Access, Actor, DocKind, ExecutionHead, GrantRecord, GrantScope, Location, PointerKind,
    RunAdmission, RunStatus, ScopeKind, StoreClock, Table,
};

/// A login of the principal's own database role, storing the principal first if need be.
pub(crate) async fn connect_as(
    t: &TestStore,
    name: &str,
    role: Role,
) -> (sqlx::PgConnection, String) {
    principal_login(t, name, role).await
}

async fn try_sql(conn: &mut sqlx::PgConnection, sql: &str) -> Result<(), String> {
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn head_text(digest: &str, generation: u64) -> String {
    let v = json!({"generation": generation, "subject_digest": digest});
    String::from_utf8(verdict_core::canonical::to_vec(&v)).unwrap()
}

/// The call of cas_execution that moves `ex-1` from `old` (at `revision`) to `new`.
fn cas_execution_call(revision: u64, old: &str, new: &str) -> String {
    let change = json!({
        "pointer": "execution", "name": "ex-1", "revision": revision + 1,
        "old": serde_json::from_str::<serde_json::Value>(old).unwrap(),
        "new": serde_json::from_str::<serde_json::Value>(new).unwrap(),
    });
    let body = String::from_utf8(verdict_core::canonical::to_vec(&change)).unwrap();
    let digest = verdict_store::records::row_digest("store.pointer-change", body.as_bytes());
    let key = verdict_store::records::pointer_change_key("execution", "ex-1", revision + 1);
    format!(
        "SELECT * FROM verdict.cas_execution('{OPERATOR}', 'operator', 'ex-1', {revision}, '{old}', '{new}', '{key}', '{digest}', '{body}')"
    )
}

/// Issue 13, attack 5: by hand, the operator's routine moved an execution from generation 2
/// back to 1, and the old pass applied again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_pointer_never_moves_back_even_by_hand() {
    let t = postgres().await;
    let store = t.store.as_ref();
    let producer = Actor::new(PRODUCER, Role::Producer);
    let op = Actor::new(OPERATOR, Role::Operator);
    let (s1, s2) = (subject("ex-1", 1), subject("ex-1", 2));
    let (d1, d2) = (subject_digest(&s1), subject_digest(&s2));
    store.put(&producer, DocKind::Subject, &s1).await.unwrap();
    store.put(&producer, DocKind::Subject, &s2).await.unwrap();
    store
        .set_current_subject(&op, "ex-1", None, &d1)
        .await
        .unwrap();
    let at_1 = ExecutionHead {
        subject_digest: d1.clone(),
        generation: 1,
    };
    let moved = store
        .set_current_subject(&op, "ex-1", Some(&at_1), &d2)
        .await
        .unwrap();
    // The store refuses it first...
    let at_2 = ExecutionHead {
        subject_digest: d2.clone(),
        generation: 2,
    };
    assert!(
        store
            .set_current_subject(&op, "ex-1", Some(&at_2), &d1)
            .await
            .is_err()
    );
    // ...and the database refuses it by hand, to the subject at its generation or to a head
    // that names another generation than its subject's.
    let (mut conn, login) = connect_as(&t, OPERATOR, Role::Operator).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;
    let current = moved.value.clone().unwrap();
    for (new, says) in [
        (
            head_text(d1.as_str(), 1),
            "cannot go back from generation 2 to 1",
        ),
        (head_text(d1.as_str(), 2), "is not a stored subject of it"),
    ] {
        let err = try_sql(
            &mut conn,
            &cas_execution_call(moved.revision, &current, &new),
        )
        .await
        .unwrap_err();
        assert!(err.contains(says), "{err}");
    }
    // The routine still moves it forward (the same call shape, so the refusal above is about
    // the generation).
    let s3 = subject("ex-1", 3);
    let d3 = subject_digest(&s3);
    store.put(&producer, DocKind::Subject, &s3).await.unwrap();
    try_sql(
        &mut conn,
        &cas_execution_call(moved.revision, &current, &head_text(d3.as_str(), 3)),
    )
    .await
    .unwrap();
    let p = store
        .pointer(PointerKind::Execution, "ex-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.execution().unwrap().unwrap().generation, 3);
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 2);
    conn.close().await.unwrap();
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
        .await
        .unwrap();
    t.cleanup().await;
}

/// The clock is chosen once, before the first principal, by the store and by the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clock_is_chosen_once_before_the_first_principal() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        let op = Actor::new(OPERATOR, Role::Operator);
        assert_eq!(store.clock().await.unwrap(), StoreClock::System);
        store
            .establish_clock(&op, StoreClock::Manual)
            .await
            .unwrap();
        assert_eq!(store.clock().await.unwrap(), StoreClock::Manual);
        assert!(
            store.now().await.is_err(),
            "a manual clock has no time until one is set"
        );
        store
            .set_manual_time(&"2026-11-30T12:00:00Z".parse().unwrap())
            .await
            .unwrap();
        assert!(
            store
                .establish_clock(&op, StoreClock::System)
                .await
                .is_err()
        );
        let producer = Actor::new(PRODUCER, Role::Producer);
        assert!(
            store
                .establish_clock(&producer, StoreClock::System)
                .await
                .is_err()
        );
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
    // On a store with a principal, not even by hand.
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, login) = connect_as(&t, OPERATOR, Role::Operator).await;
    let err = try_sql(
        &mut conn,
        "SELECT * FROM verdict.cas_clock('engine', 'operator', 'store', 0, NULL, '{\"clock\":\"manual\"}', 'k', 'd', 'b')",
    )
    .await
    .unwrap_err();
    assert!(err.contains("chosen once"), "{err}");
    conn.close().await.unwrap();
    t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
        .await
        .unwrap();
    t.cleanup().await;
}

/// A store is initialised in one transaction. With a fault injected where the first operator's
/// row is written, after the clock's, neither is kept: the chain is empty, the store keeps no
/// clock, and the next initialisation makes the store whole. A store holding a clock is then
/// refused another, writing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialisation_that_fails_half_way_leaves_an_empty_store() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        let (inject, remove) = match t.kind {
            Kind::Sqlite => (
                "CREATE TRIGGER injected_fault BEFORE INSERT ON principals \
                 BEGIN SELECT RAISE(ABORT, 'injected fault'); END;"
                    .to_owned(),
                "DROP TRIGGER injected_fault;".to_owned(),
            ),
            Kind::Postgres => (
                "CREATE FUNCTION public.injected_fault() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$; \
                 CREATE TRIGGER injected_fault BEFORE INSERT ON verdict.principals \
                 FOR EACH ROW EXECUTE FUNCTION public.injected_fault();"
                    .to_owned(),
                "DROP TRIGGER injected_fault ON verdict.principals; \
                 DROP FUNCTION public.injected_fault();"
                    .to_owned(),
            ),
        };
        t.raw(&inject).await.unwrap();
        let first = Actor::new("first-op", Role::Operator);
        let record = verdict_store::PrincipalRecord {
            name: "first-op".parse().unwrap(),
            role: Role::Operator,
            token_sha256: verdict_store::token_sha256("token-of-first-op"),
        };
        let err = store
            .initialise(&first, StoreClock::Manual, &record)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("injected fault"), "{err}");
        assert!(store.audit_head().await.unwrap().is_none(), "{:?}", t.kind);
        assert!(store.pointers(PointerKind::Clock).await.unwrap().is_empty());
        assert!(store.principal("first-op").await.unwrap().is_none());

        t.raw(&remove).await.unwrap();
        let stored = store
            .initialise(&first, StoreClock::Manual, &record)
            .await
            .unwrap();
        assert!(stored.inserted);
        assert_eq!(store.clock().await.unwrap(), StoreClock::Manual);
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, 2);
        // Initialised: another initialisation, with either clock, writes nothing.
        for clock in [StoreClock::Manual, StoreClock::System] {
            let other = verdict_store::PrincipalRecord {
                name: "second-op".parse().unwrap(),
                ..record.clone()
            };
            let second = Actor::new("second-op", Role::Operator);
            assert!(store.initialise(&second, clock, &other).await.is_err());
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, 2);
        assert!(store.principal("second-op").await.unwrap().is_none());
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// A gate run asks for the store's time and the chain's head in one read: the same time a
/// clock read gives, the same head `audit_head` gives, and on a manual clock the time set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_and_the_head_come_together_as_they_come_apart() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        let (_, head) = store.now_and_head().await.unwrap();
        assert_eq!(head, store.audit_head().await.unwrap());
        populate(store).await;
        let before = store.now().await.unwrap().unix_nanos();
        let (now, head) = store.now_and_head().await.unwrap();
        let after = store.now().await.unwrap().unix_nanos();
        assert!(
            before <= now.unix_nanos() && now.unix_nanos() <= after,
            "{before} {now} {after}"
        );
        assert!(head.is_some());
        assert_eq!(head, store.audit_head().await.unwrap());
        t.cleanup().await;
    }
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        let op = Actor::new(OPERATOR, Role::Operator);
        store
            .establish_clock(&op, StoreClock::Manual)
            .await
            .unwrap();
        assert!(
            store.now_and_head().await.is_err(),
            "a manual clock has no time until one is set"
        );
        let set: verdict_core::contracts::Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        store.set_manual_time(&set).await.unwrap();
        let (now, head) = store.now_and_head().await.unwrap();
        assert_eq!(now, set);
        assert_eq!(head, store.audit_head().await.unwrap());
        assert!(head.is_some(), "the clock's choice is on the chain");
        t.cleanup().await;
    }
}

/// The single-record and the batched call of a table's write routine for `doc`.
fn put_calls(table: Table, principal: &str, role: &str, doc: &serde_json::Value) -> [String; 2] {
    let body = String::from_utf8(verdict_core::canonical::to_vec(doc)).unwrap();
    let digest = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let key = verdict_store::records::key_of_value(table, doc, &digest).unwrap();
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
    ]
}

/// Issue 13, attack 4: a verifier whose grant was revoked wrote its result straight through
/// the write routine, with nothing on record about the lapsed grant, and the Gate passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_verifier_cannot_write_its_result_by_hand() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let op = Actor::new(OPERATOR, Role::Operator);
        let verifier = Actor::new(VERIFIER, Role::Verifier);
        let s = subject_digest(&subject("ex-1", 1));
        let req = store
            .put(&op, DocKind::Request, &request(&s))
            .await
            .unwrap();
        store
            .admit_run(
                &op,
                &RunAdmission {
                    run_id: "vrun-2".parse().unwrap(),
                    request_digest: req.digest.clone(),
                    subject_digest: s.clone(),
                    verifier: VERIFIER.parse().unwrap(),
                    class: "reviewer".parse().unwrap(),
                    admitted_generation: 1,
                },
            )
            .await
            .unwrap();
        // populate revoked one of the verifier's grants after its first run; the other goes now.
        revoke(store, "g-2").await;
        let doc = result(&s, 1, "vrun-2", vec![]);
        let length = store.audit_head().await.unwrap().unwrap().seq;
        let err = store
            .put(&verifier, DocKind::Verification, &doc)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no grant in force"), "{err}");
        if t.kind == Kind::Postgres {
            let (mut conn, login) = connect_as(&t, VERIFIER, Role::Verifier).await;
            for sql in put_calls(Table::VerificationResults, VERIFIER, "verifier", &doc) {
                let err = try_sql(&mut conn, &sql).await.unwrap_err();
                assert!(err.contains("no grant in force"), "{err}");
            }
            conn.close().await.unwrap();
            t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
                .await
                .unwrap();
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
        // Once its run is on record as ended for the lapsed grant, the result is kept, as
        // history that never counts (what the engine does).
        store
            .record_run_status(
                &op,
                "vrun-2",
                RunStatus::Unavailable,
                Some(UnavailableReason::GrantRevoked),
            )
            .await
            .unwrap();
        store
            .put(&verifier, DocKind::Verification, &doc)
            .await
            .unwrap();
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// Issue 13, attack 7: a runner login took the `admit <request>` lease until 2099 through
/// cas_lease, and the operator's admissions then failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_lease_cannot_be_squatted() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let runner = Actor::new(RUNNER, Role::Runner);
        let until_2099 = verdict_store::LeaseHolder {
            holder: RUNNER.parse().unwrap(),
            expires_at: "2099-01-01T00:00:00Z".parse().unwrap(),
        };
        let job = format!("{}{}", verdict_store::ADMISSION_LEASE_PREFIX, d("request"));
        // The runner is a stored principal, so that on PostgreSQL it has an identity to log in as.
        register(store, RUNNER, Role::Runner).await;
        let length = store.audit_head().await.unwrap().unwrap().seq;
        let err = store
            .cas_lease(&runner, &job, None, Some(&until_2099))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("admission lease"), "{err}");
        if t.kind == Kind::Postgres {
            let (mut conn, login) = connect_as(&t, RUNNER, Role::Runner).await;
            let new = String::from_utf8(verdict_core::canonical::to_vec(
                &serde_json::to_value(&until_2099).unwrap(),
            ))
            .unwrap();
            let call = |name: &str, new: &str| lease_call(RUNNER, "runner", name, new);
            let err = try_sql(&mut conn, &call(&job, &new)).await.unwrap_err();
            assert!(err.contains("admission lease"), "{err}");
            // Nor a lease of its own name held for someone else.
            let theirs = new.replace(RUNNER, VERIFIER);
            let err = try_sql(&mut conn, &call("job-1", &theirs))
                .await
                .unwrap_err();
            assert!(err.contains("only its own leases"), "{err}");
            // Nor, since schema version 10, its own lease under a name of its choosing.
            let err = try_sql(&mut conn, &call("job-1", &new)).await.unwrap_err();
            assert!(err.contains("a lease is named"), "{err}");
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
            conn.close().await.unwrap();
            t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
                .await
                .unwrap();
        }
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// The by-hand call of cas_lease by `principal` in `role` taking lease `name` at revision 1,
/// with `new` (canonical text) as its value.
fn lease_call(principal: &str, role: &str, name: &str, new: &str) -> String {
    let change = json!({"pointer": "lease", "name": name, "revision": 1, "old": null,
                        "new": serde_json::from_str::<serde_json::Value>(new).unwrap()});
    let body = String::from_utf8(verdict_core::canonical::to_vec(&change)).unwrap();
    let digest = verdict_store::records::row_digest("store.pointer-change", body.as_bytes());
    let key = verdict_store::records::pointer_change_key("lease", name, 1);
    format!(
        "SELECT * FROM verdict.cas_lease('{principal}', '{role}', '{name}', 0, NULL, '{new}', '{key}', '{digest}', '{body}')"
    )
}

/// A lease held by `holder` until 2099.
fn held_by(holder: &str) -> verdict_store::LeaseHolder {
    verdict_store::LeaseHolder {
        holder: holder.parse().unwrap(),
        expires_at: "2099-01-01T00:00:00Z".parse().unwrap(),
    }
}

/// A runner or verifier took any lease name it liked, holding itself (schema version 10 ties a
/// lease to its purpose): a lease named for another verifier's run, for a run never admitted
/// or for nothing at all is refused, in the store and by cas_lease itself, and appends
/// nothing; a verifier's lease of its own run, and an operator's admission lease of a stored
/// request, are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_taken_only_for_the_callers_own_run() {
    const OTHER: &str = "verifier-2";
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        register(store, RUNNER, Role::Runner).await;
        register(store, OTHER, Role::Verifier).await;
        let s = subject_digest(&subject("ex-1", 1));
        admit(&t, &s, 1, "vrun-2").await;
        admit(&t, &s, 1, "vrun-3").await;
        let (runner, verifier, other, op) = (
            Actor::new(RUNNER, Role::Runner),
            Actor::new(VERIFIER, Role::Verifier),
            Actor::new(OTHER, Role::Verifier),
            Actor::new(OPERATOR, Role::Operator),
        );
        let length = store.audit_head().await.unwrap().unwrap().seq;
        let refused = [
            // Another verifier's run, a run never admitted, a made-up name.
            (&runner, "run vrun-2".to_owned(), held_by(RUNNER)),
            (&runner, "run vrun-9".to_owned(), held_by(RUNNER)),
            (&runner, "job-1".to_owned(), held_by(RUNNER)),
            (&other, "run vrun-2".to_owned(), held_by(OTHER)),
            (&verifier, "job-1".to_owned(), held_by(VERIFIER)),
            // An operator's lease names a stored request or run too.
            (&op, "job-1".to_owned(), held_by(OPERATOR)),
            (
                &op,
                format!("admit {}", d("no-such-request")),
                held_by(OPERATOR),
            ),
        ];
        for (actor, name, holder) in &refused {
            let err = store
                .cas_lease(actor, name, None, Some(holder))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, verdict_store::StoreError::Refused(m) if m.contains("lease")),
                "{} taking {name:?}: {err}",
                actor.principal
            );
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
        store
            .cas_lease(&verifier, "run vrun-2", None, Some(&held_by(VERIFIER)))
            .await
            .unwrap();
        let request = store
            .put(&op, DocKind::Request, &request(&s))
            .await
            .unwrap();
        store
            .cas_lease(
                &op,
                &format!("admit {}", request.digest),
                None,
                Some(&held_by(OPERATOR)),
            )
            .await
            .unwrap();
        if t.kind == Kind::Postgres {
            let length = store.audit_head().await.unwrap().unwrap().seq;
            let text = |h: &verdict_store::LeaseHolder| {
                String::from_utf8(verdict_core::canonical::to_vec(
                    &serde_json::to_value(h).unwrap(),
                ))
                .unwrap()
            };
            let (mut as_runner, runner_login) = connect_as(&t, RUNNER, Role::Runner).await;
            for (name, says) in [
                ("run vrun-3", "no run"),
                ("run vrun-9", "no run"),
                ("job-1", "a lease is named"),
            ] {
                let sql = lease_call(RUNNER, "runner", name, &text(&held_by(RUNNER)));
                let err = try_sql(&mut as_runner, &sql).await.unwrap_err();
                assert!(err.contains(says), "{name}: {err}");
            }
            let (mut as_other, other_login) = connect_as(&t, OTHER, Role::Verifier).await;
            let sql = lease_call(OTHER, "verifier", "run vrun-3", &text(&held_by(OTHER)));
            let err = try_sql(&mut as_other, &sql).await.unwrap_err();
            assert!(err.contains("no run"), "{err}");
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
            let (mut as_verifier, verifier_login) = connect_as(&t, VERIFIER, Role::Verifier).await;
            let sql = lease_call(
                VERIFIER,
                "verifier",
                "run vrun-3",
                &text(&held_by(VERIFIER)),
            );
            try_sql(&mut as_verifier, &sql).await.unwrap();
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 1);
            for (conn, login) in [
                (as_runner, runner_login),
                (as_other, other_login),
                (as_verifier, verifier_login),
            ] {
                conn.close().await.unwrap();
                t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
                    .await
                    .unwrap();
            }
        }
        let report = store.verify_audit(None).await.unwrap();
        assert!(report.is_intact(), "{:#?}", report.problems);
        t.cleanup().await;
    }
}

/// Schema 14: a verifier admitting itself takes the admission lease of a request itself, no
/// longer through the engine's identity: only holding itself, for at most a minute (in the
/// store on both backends, and in cas_lease), and on PostgreSQL only for a stored request about
/// an execution it holds a grant in force on. Every refusal appends nothing; a runner still
/// takes no admission lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_takes_an_admission_lease_only_for_itself_and_for_a_minute() {
    const GRANTLESS: &str = "reviewer-3";
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        register(store, GRANTLESS, Role::Verifier).await;
        let s = subject_digest(&subject("ex-1", 1));
        let op = Actor::new(OPERATOR, Role::Operator);
        let policy = store
            .put(&op, DocKind::Policy, &policy(4))
            .await
            .unwrap()
            .digest;
        let request = json!({
            "schema": "verdict.request/v1", "execution": "ex-1", "subject_digest": s.as_str(),
            "generation": 1, "gate": "merge", "policy_digest": policy.as_str(),
            "verifier_classes": ["reviewer"], "prior_blockers": [], "risk_class": "low",
            "budget": {"max_runs": 1}
        });
        let req = store
            .put(&op, DocKind::Request, &request)
            .await
            .unwrap()
            .digest;
        let job = format!("{}{req}", verdict_store::ADMISSION_LEASE_PREFIX);
        let verifier = Actor::new(VERIFIER, Role::Verifier);
        let now = store.now().await.unwrap();
        let within = verdict_store::LeaseHolder {
            holder: VERIFIER.parse().unwrap(),
            expires_at: now.plus_seconds(verdict_store::ADMISSION_LEASE_SECONDS),
        };
        let length = store.audit_head().await.unwrap().unwrap().seq;
        // Until 2099, or held for another verifier.
        let err = store
            .cas_lease(&verifier, &job, None, Some(&held_by(VERIFIER)))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("at most 60 seconds"), "{err}");
        let for_another = verdict_store::LeaseHolder {
            holder: GRANTLESS.parse().unwrap(),
            expires_at: within.expires_at.clone(),
        };
        let err = store
            .cas_lease(&verifier, &job, None, Some(&for_another))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("only its own leases"), "{err}");
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
        // Its own, for a minute: taken, and released.
        store
            .cas_lease(&verifier, &job, None, Some(&within))
            .await
            .unwrap();
        store
            .cas_lease(&verifier, &job, Some(&within), None)
            .await
            .unwrap();
        if t.kind == Kind::Postgres {
            let text = |h: &verdict_store::LeaseHolder| {
                String::from_utf8(verdict_core::canonical::to_vec(
                    &serde_json::to_value(h).unwrap(),
                ))
                .unwrap()
            };
            let length = store.audit_head().await.unwrap().unwrap().seq;
            // By hand through the verifier's own login: until 2099, or for another.
            let (mut rev, rev_login) = connect_as(&t, VERIFIER, Role::Verifier).await;
            let err = try_sql(
                &mut rev,
                &lease_call(VERIFIER, "verifier", &job, &text(&held_by(VERIFIER))),
            )
            .await
            .unwrap_err();
            assert!(err.contains("at most 60 seconds"), "{err}");
            let err = try_sql(
                &mut rev,
                &lease_call(VERIFIER, "verifier", &job, &text(&for_another)),
            )
            .await
            .unwrap_err();
            assert!(err.contains("only its own leases"), "{err}");
            // Schema 44: a value the engine's reader would refuse, which would have stopped
            // every later admission under the request: a time not in RFC 3339 UTC form (one
            // PostgreSQL reads, already past), a member more.
            for bad in [
                format!(r#"{{"expires_at":"2000-01-01 00:00:00+00","holder":"{VERIFIER}"}}"#),
                format!(
                    r#"{{"expires_at":"{}","holder":"{VERIFIER}","zz":1}}"#,
                    within.expires_at
                ),
            ] {
                let err = try_sql(&mut rev, &lease_call(VERIFIER, "verifier", &job, &bad))
                    .await
                    .unwrap_err();
                assert!(err.contains("a lease is exactly"), "{bad}: {err}");
            }
            // A verifier with no grant on the request's execution, through its own login.
            let (mut other, other_login) = connect_as(&t, GRANTLESS, Role::Verifier).await;
            let theirs = verdict_store::LeaseHolder {
                holder: GRANTLESS.parse().unwrap(),
                expires_at: store.now().await.unwrap().plus_seconds(30),
            };
            let err = try_sql(
                &mut other,
                &lease_call(GRANTLESS, "verifier", &job, &text(&theirs)),
            )
            .await
            .unwrap_err();
            assert!(err.contains("holds a grant in force on"), "{err}");
            // Nor in the name of the engine's principal, whose identity neither login is.
            let engine = verdict_store::LeaseHolder {
                holder: "verdict-engine".parse().unwrap(),
                expires_at: theirs.expires_at.clone(),
            };
            let err = try_sql(
                &mut other,
                &lease_call("verdict-engine", "operator", &job, &text(&engine)),
            )
            .await
            .unwrap_err();
            assert!(
                err.contains("does not act for principal verdict-engine"),
                "{err}"
            );
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
            // Its own lease, for 30 seconds, by hand.
            let mine = verdict_store::LeaseHolder {
                holder: VERIFIER.parse().unwrap(),
                expires_at: store.now().await.unwrap().plus_seconds(30),
            };
            let current = store
                .pointer(PointerKind::Lease, &job)
                .await
                .unwrap()
                .unwrap();
            let change = json!({"pointer": "lease", "name": job, "revision": current.revision + 1,
                                "old": null, "new": serde_json::to_value(&mine).unwrap()});
            let body = String::from_utf8(verdict_core::canonical::to_vec(&change)).unwrap();
            let digest =
                verdict_store::records::row_digest("store.pointer-change", body.as_bytes());
            let key =
                verdict_store::records::pointer_change_key("lease", &job, current.revision + 1);
            try_sql(
                &mut rev,
                &format!(
                    "SELECT * FROM verdict.cas_lease('{VERIFIER}', 'verifier', '{job}', {}, NULL, '{}', '{key}', '{digest}', '{body}')",
                    current.revision,
                    text(&mine)
                ),
            )
            .await
            .unwrap();
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 1);
            // Schema 44: taking it again while it holds (a renewal every minute would hold
            // every other admission to the request off for good) is refused.
            let again = verdict_store::LeaseHolder {
                holder: VERIFIER.parse().unwrap(),
                expires_at: store.now().await.unwrap().plus_seconds(50),
            };
            let change = json!({"pointer": "lease", "name": job, "revision": current.revision + 2,
                                "old": serde_json::to_value(&mine).unwrap(),
                                "new": serde_json::to_value(&again).unwrap()});
            let body = String::from_utf8(verdict_core::canonical::to_vec(&change)).unwrap();
            let digest =
                verdict_store::records::row_digest("store.pointer-change", body.as_bytes());
            let key =
                verdict_store::records::pointer_change_key("lease", &job, current.revision + 2);
            let err = try_sql(
                &mut rev,
                &format!(
                    "SELECT * FROM verdict.cas_lease('{VERIFIER}', 'verifier', '{job}', {}, '{}', '{}', '{key}', '{digest}', '{body}')",
                    current.revision + 1,
                    text(&mine),
                    text(&again)
                ),
            )
            .await
            .unwrap_err();
            assert!(
                err.contains("taken only once the one held has lapsed"),
                "{err}"
            );
            assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 1);
            rev.close().await.unwrap();
            other.close().await.unwrap();
            for login in [rev_login, other_login] {
                t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
                    .await
                    .unwrap();
            }
        }
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// Schema 17: on a store that keeps a manual clock, cas_lease itself holds a verifier's own
/// admission lease to 60 seconds from the store's time (the time the store names to the
/// database in each transaction), no longer to nothing. The store's time is years from the
/// database's clock, so a limit measured from that clock would refuse both leases. Through the
/// verifier's own login: a call naming no time is refused, a lease to 61 seconds past the
/// store's time is refused, one to 60 seconds is taken; each refusal appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_manual_clock_the_database_holds_an_admission_lease_to_a_minute_of_the_stores_time() {
    let t = postgres().await;
    let store = t.store.as_ref();
    let op = Actor::new(OPERATOR, Role::Operator);
    store
        .establish_clock(&op, StoreClock::Manual)
        .await
        .unwrap();
    let start: verdict_core::contracts::Timestamp = "2031-06-01T12:00:00Z".parse().unwrap();
    store.set_manual_time(&start).await.unwrap();
    populate(store).await;
    let s = subject_digest(&subject("ex-1", 1));
    let policy = store
        .put(&op, DocKind::Policy, &policy(4))
        .await
        .unwrap()
        .digest;
    let request = json!({
        "schema": "verdict.request/v1", "execution": "ex-1", "subject_digest": s.as_str(),
        "generation": 1, "gate": "merge", "policy_digest": policy.as_str(),
        "verifier_classes": ["reviewer"], "prior_blockers": [], "risk_class": "low",
        "budget": {"max_runs": 1}
    });
    let req = store
        .put(&op, DocKind::Request, &request)
        .await
        .unwrap()
        .digest;
    let job = format!("{}{req}", verdict_store::ADMISSION_LEASE_PREFIX);
    let until = |secs: u64| {
        let held = verdict_store::LeaseHolder {
            holder: VERIFIER.parse().unwrap(),
            expires_at: start.plus_seconds(secs),
        };
        String::from_utf8(verdict_core::canonical::to_vec(
            &serde_json::to_value(&held).unwrap(),
        ))
        .unwrap()
    };
    let (mut rev, login) = connect_as(&t, VERIFIER, Role::Verifier).await;
    let length = store.audit_head().await.unwrap().unwrap().seq;
    let err = try_sql(
        &mut rev,
        &lease_call(VERIFIER, "verifier", &job, &until(30)),
    )
    .await
    .unwrap_err();
    assert!(err.contains("names no time"), "{err}");
    let micros = start.unix_nanos().div_euclid(1000);
    try_sql(&mut rev, &format!("SET verdict.manual_now = '{micros}'"))
        .await
        .unwrap();
    let err = try_sql(
        &mut rev,
        &lease_call(VERIFIER, "verifier", &job, &until(61)),
    )
    .await
    .unwrap_err();
    assert!(err.contains("at most 60 seconds"), "{err}");
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
    try_sql(
        &mut rev,
        &lease_call(VERIFIER, "verifier", &job, &until(60)),
    )
    .await
    .unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length + 1);
    rev.close().await.unwrap();
    t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
        .await
        .unwrap();
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// Stores subject `doc` as the superuser with no role set on PostgreSQL (whom the database
/// does not bind), or through the store on SQLite, so the store's own move can be tried.
async fn store_unbound(t: &TestStore, producer: &str, doc: &serde_json::Value) {
    match &t.location {
        Location::Sqlite(_) => {
            t.store
                .put(&Actor::new(producer, Role::Producer), DocKind::Subject, doc)
                .await
                .unwrap();
        }
        Location::Postgres(_) => {
            let body = String::from_utf8(verdict_core::canonical::to_vec(doc)).unwrap();
            let digest =
                verdict_store::records::row_digest(Table::Subjects.domain(), body.as_bytes());
            let body = body.replace('\'', "''");
            t.raw(&format!(
                "SELECT r_seq FROM verdict.put_one_subjects('{producer}', 'producer', '{digest}', '{digest}', '{body}', NULL)"
            ))
            .await
            .unwrap();
        }
    }
}

/// Schema version 21, through the store on both backends: a producer holding write grants on
/// missions moves another producer's execution to a subject naming another mission, or to its
/// own subject of the execution's mission; both refused, nothing appended. Granted the
/// execution by its id, it moves the execution, its mission kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_moves_an_execution_only_as_it_is_stored() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let op = Actor::new(OPERATOR, Role::Operator);
        register(store, "coder3", Role::Producer).await;
        for (id, mission) in [("g-m3", "m3"), ("g-m17", "m-17")] {
            let g = GrantRecord {
                grant_id: id.parse().unwrap(),
                principal: "coder3".parse().unwrap(),
                scope: GrantScope {
                    kind: ScopeKind::Mission,
                    id: mission.parse().unwrap(),
                },
                access: Access::Write,
                expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
            };
            store.add_grant(&op, &g).await.unwrap();
        }
        let at_1 = ExecutionHead {
            subject_digest: subject_digest(&subject("ex-1", 1)),
            generation: 1,
        };
        let coder3 = Actor::new("coder3", Role::Producer);
        let mut cases = Vec::new();
        for (mission, says) in [
            ("m3", "does not change its execution's mission"),
            (
                "m-17",
                "takes it over only with a write grant in force on the execution itself",
            ),
        ] {
            let mut s = subject("ex-1", 2);
            s["mission"] = json!(mission);
            s["producer"] = json!({"principal": "coder3", "run": "run-c3"});
            store_unbound(&t, "coder3", &s).await;
            cases.push((subject_digest(&s), says));
        }
        let seq = store.audit_head().await.unwrap().unwrap().seq;
        for (d, says) in &cases {
            let err = store
                .set_current_subject(&coder3, "ex-1", Some(&at_1), d)
                .await
                .unwrap_err();
            assert!(err.to_string().contains(says), "{err}");
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, seq);
        grant_write(store, "g-ex1-c3", "coder3", "ex-1").await;
        let err = store
            .set_current_subject(&coder3, "ex-1", Some(&at_1), &cases[0].0)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(cases[0].1), "{err}");
        store
            .set_current_subject(&coder3, "ex-1", Some(&at_1), &cases[1].0)
            .await
            .unwrap();
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// Schema 38: a run named as a verify job's attempt (`job-<job>-<fencing>`) is stored only while
/// that job runs under that claim's token, held by the run's verifier, for the run's request and
/// class, whoever admits it (here an operator, who may admit any verifier): by the store's own
/// call and, on PostgreSQL, by the operator's login calling the routine by hand. Any other name
/// is stored as before, and a refusal appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_attempts_run_name_is_admitted_only_under_its_claim() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let op = Actor::new(OPERATOR, Role::Operator);
        let verifier = Actor::new(VERIFIER, Role::Verifier);
        let s = subject_digest(&subject("ex-1", 1));
        let req = store
            .put(&op, DocKind::Request, &request(&s))
            .await
            .unwrap();
        let jobs = store
            .queue()
            .enqueue_jobs(
                &op,
                &[verdict_store::NewJob {
                    kind: verdict_store::JobKind::Verify,
                    request: req.digest.clone(),
                    class: "reviewer".into(),
                    deadline: None,
                }],
            )
            .await
            .unwrap();
        let job = jobs[0].id;
        let admission = |run: &str| RunAdmission {
            run_id: run.parse().unwrap(),
            request_digest: req.digest.clone(),
            subject_digest: s.clone(),
            verifier: VERIFIER.parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            admitted_generation: 1,
        };
        // The operator's login is given before counting: giving it appends a note.
        let login = match t.kind {
            Kind::Postgres => Some(connect_as(&t, OPERATOR, Role::Operator).await),
            Kind::Sqlite => None,
        };
        let length = store.audit_head().await.unwrap().unwrap().seq;
        // Before any claim, and for a job that does not exist.
        for run in [format!("job-{job}-1"), format!("job-{}-1", job + 100)] {
            let err = store.admit_run(&op, &admission(&run)).await.unwrap_err();
            assert!(
                err.to_string()
                    .contains("only the verifier holding that claim"),
                "{err}"
            );
        }
        if let Some((mut conn, login)) = login {
            let doc = serde_json::to_value(admission(&format!("job-{job}-1"))).unwrap();
            for sql in put_calls(Table::VerifierRuns, OPERATOR, "operator", &doc) {
                let err = try_sql(&mut conn, &sql).await.unwrap_err();
                assert!(
                    err.contains("only the verifier holding that claim"),
                    "{err}"
                );
            }
            conn.close().await.unwrap();
            t.raw(&format!("ALTER ROLE \"{login}\" NOLOGIN"))
                .await
                .unwrap();
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, length);
        // Claimed: the claim's own attempt is admitted, an earlier or later token's is not.
        let claimed = store
            .queue()
            .claim_job(
                &verifier,
                verdict_store::JobKind::Verify,
                "worker-1",
                std::time::Duration::from_secs(60),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((claimed.id, claimed.fencing), (job, 1));
        let err = store
            .admit_run(&op, &admission(&format!("job-{job}-2")))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("only the verifier holding that claim"),
            "{err}"
        );
        store
            .admit_run(&op, &admission(&format!("job-{job}-1")))
            .await
            .unwrap();
        // A name of another form is untouched.
        store.admit_run(&op, &admission("job-x-1")).await.unwrap();
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}

/// A stored runner's check evidence is written only under a write grant in force on the
/// execution of the subject it is about, checked by the write itself on both backends
/// (`Store::binds_evidence_grants`), so a caller that does not read the grants first still
/// cannot file evidence without one: with none, after the grant's revocation, and about a
/// subject not stored, the write is refused and nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runners_evidence_is_written_only_under_a_write_grant_in_force() {
    for t in [sqlite().await, postgres().await] {
        let store = t.store.as_ref();
        populate(store).await;
        let (name, runner) = ("ci-bound", Actor::new("ci-bound", Role::Runner));
        register(store, name, Role::Runner).await;
        assert!(
            store.binds_evidence_grants(&runner).await.unwrap(),
            "{:?}",
            t.kind
        );
        let s = subject_digest(&subject("ex-1", 1));
        let put = |id: &str, about: &verdict_core::digest::Digest| {
            let doc = evidence_by(about, id, name, "runner");
            let runner = &runner;
            async move { store.put(runner, DocKind::Evidence, &doc).await }
        };
        let refused = |e: verdict_store::StoreError| {
            let text = e.to_string();
            assert!(text.contains("grant"), "{:?}: {text}", t.kind);
        };

        let head = store.audit_head().await.unwrap().unwrap().seq;
        refused(put("ev-no-grant", &s).await.unwrap_err());
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, head);

        grant_write(store, "g-ci-bound", name, "ex-1").await;
        let head = store.audit_head().await.unwrap().unwrap().seq;
        assert!(put("ev-granted", &s).await.unwrap().inserted);
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, head + 1);

        // About a subject not stored: no grant covers it.
        let unknown = verdict_core::digest::raw(b"no such subject");
        let head = store.audit_head().await.unwrap().unwrap().seq;
        refused(put("ev-unknown", &unknown).await.unwrap_err());

        revoke(store, "g-ci-bound").await;
        let head_after_revocation = store.audit_head().await.unwrap().unwrap().seq;
        assert_eq!(head_after_revocation, head + 1, "only the revocation");
        refused(put("ev-revoked", &s).await.unwrap_err());
        assert_eq!(
            store.audit_head().await.unwrap().unwrap().seq,
            head_after_revocation
        );
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        t.cleanup().await;
    }
}
