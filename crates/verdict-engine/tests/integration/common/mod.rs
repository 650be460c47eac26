//! Shared by the engine's tests: one fresh store per test on each backend, a populated world
//! (principals, grants, policy) and builders for the documents a change goes through.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::{Digest, DigestKind, digest};
use verdict_engine::{Engine, Principal};
use verdict_store::{Access, Location, OpenOptions, ScopeKind, Store, StoreClock};

pub const EXEC: &str = "ex-1";
pub const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn now() -> Timestamp {
    ts("2026-11-30T12:00:00Z")
}

/// Runs `body` once on a fresh SQLite store and once on a fresh PostgreSQL database, then
/// checks each store's audit chain is intact.
pub async fn on_both<F, Fut>(body: F)
where
    F: Fn(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()>,
{
    on_both_at(|store, _| body(store)).await;
}

/// [`on_both`], handing `body` the store's location too, for a test that reaches the database
/// beside the store (to inject a fault).
pub async fn on_both_at<F, Fut>(body: F)
where
    F: Fn(Arc<dyn Store>, Location) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let location = Location::Sqlite(dir.path().join("verdict.db"));
    let store = verdict_store::open(&location).await.unwrap();
    body(store.clone(), location).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "sqlite audit chain broken"
    );

    // The guard drops the database and its roles when this returns or unwinds.
    let scratch = verdict_store::scratch::ScratchPostgres::create("engine").unwrap();
    let options = OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    body(store.clone(), scratch.location()).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "postgres audit chain broken"
    );
}

/// An engine with an operator, a producer, a runner, two verifiers and a human, each granted
/// on [`EXEC`], and a policy that needs unit tests and a reviewer.
pub struct World {
    pub engine: Engine,
    pub ops: Principal,
    pub coder: Principal,
    pub ci: Principal,
    pub rev: Principal,
    pub rev2: Principal,
    pub alice: Principal,
}

pub async fn world(store: Arc<dyn Store>) -> World {
    // A manual clock: the tests decide what time it is, and the store takes it from nowhere
    // else.
    world_on(store, StoreClock::Manual).await
}

/// [`world`] on a store keeping `clock`; a manual one starts at [`now`].
pub async fn world_on(store: Arc<dyn Store>, clock: StoreClock) -> World {
    let engine = Engine::new(store, "merge");
    let t = engine.init("ops", clock).await.unwrap();
    if clock == StoreClock::Manual {
        engine.store().set_manual_time(&now()).await.unwrap();
    }
    let ops = engine.authenticate(&t).await.unwrap();
    // On PostgreSQL that first question started the handle's listener, which moves the
    // credential epoch once it listens (what was kept before was kept unheard): wait for it,
    // as for a long-running engine, so that what the tests keep from here on stays kept.
    if engine.describe_store().starts_with("postgres") {
        assert_eq!(
            engine
                .store()
                .queue()
                .wait_for_jobs(
                    verdict_store::JobKind::Checks,
                    std::time::Duration::from_secs(60)
                )
                .await
                .unwrap(),
            verdict_store::Wakeup::Resumed,
            "the handle did not start listening"
        );
    }
    let mut who = Vec::new();
    for (name, role, access) in [
        ("coder", "producer", Access::Write),
        ("ci", "runner", Access::Write),
        ("rev", "verifier", Access::Read),
        ("rev2", "verifier", Access::Read),
        ("alice", "human", Access::Write),
    ] {
        let role = serde_json::from_value(json!(role)).unwrap();
        let token = engine.add_principal(&ops, name, role).await.unwrap();
        let p = engine.authenticate(&token).await.unwrap();
        engine
            .grant(
                &ops,
                &format!("g-{name}"),
                name,
                ScopeKind::Execution,
                EXEC,
                access,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        who.push(p);
    }
    engine.set_policy(&ops, &policy(1)).await.unwrap();
    let [coder, ci, rev, rev2, alice] = <[Principal; 5]>::try_from(who).unwrap();
    World {
        engine,
        ops,
        coder,
        ci,
        rev,
        rev2,
        alice,
    }
}

pub fn policy(revision: u64) -> Value {
    json!({
        "schema": "verdict.policy/v1",
        "name": "merge",
        "revision": revision,
        "required_checks": ["unit-tests"],
        "required_verifiers": ["reviewer"],
    })
}

/// A subject of [`EXEC`] at `generation`; `diff` names the change's content.
pub fn subject(generation: u64, diff: &str) -> Value {
    json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": EXEC, "generation": generation},
        "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
        "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "obj-1", "digest": DEF},
        "criteria": {"revision": "c-1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": verdict_core::digest::raw(diff.as_bytes()).as_str()}],
        "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "r-1", "capabilities": []}
    })
}

pub fn sd(subject: &Value) -> Digest {
    digest(DigestKind::Subject, subject)
}

/// Runner check evidence for a subject.
pub fn evidence(subject: &Digest, outcome: &str, principal: &str, role: &str) -> Value {
    json!({
        "id": format!("ev-{}-{}", &subject.as_str()[7..19], outcome),
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": subject.as_str(),
        "definition_digest": DEF,
        "produced_by": {"principal": principal, "role": role},
        "outcome": outcome,
        "content_digest": DEF,
        "observed_at": "2026-11-30T11:59:00Z",
        "freshness": {"kind": "content"}
    })
}

/// A reviewer's result for a run, passing `tests-pass` on the given evidence.
pub fn result(verifier: &str, run: &str, subject: &Digest, generation: u64, ev_id: &str) -> Value {
    json!({
        "id": format!("vr-{run}"),
        "verifier": {"principal": verifier, "class": "reviewer", "run": run},
        "subject_digest": subject.as_str(),
        "generation": generation,
        "status": "completed",
        "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": [ev_id]}],
        "findings": [],
        "dispositions": []
    })
}

/// Puts a subject of `generation` (change `diff`) with the runner's `outcome` evidence; returns
/// the subject digest and the evidence id.
pub async fn subject_with_evidence(
    w: &World,
    generation: u64,
    diff: &str,
    outcome: &str,
) -> (Digest, String) {
    let d = w
        .engine
        .put_subject(&w.coder, &subject(generation, diff))
        .await
        .unwrap();
    let ev = evidence(&d, outcome, "ci", "runner");
    w.engine
        .add_evidence(&w.ci, std::slice::from_ref(&ev))
        .await
        .unwrap();
    (d, ev["id"].as_str().unwrap().to_owned())
}

/// The producer's request for the current subject, with `budget`.
pub async fn request(w: &World, budget: Value) -> Digest {
    w.engine
        .create_request(&w.coder, EXEC, &budget)
        .await
        .unwrap()
}

/// Puts a subject with passing evidence, a request and an admitted reviewer run; returns the
/// subject digest, the evidence id and the request digest.
pub async fn prepared(
    w: &World,
    generation: u64,
    diff: &str,
    run: &str,
) -> (Digest, String, Digest) {
    let (d, ev) = subject_with_evidence(w, generation, diff, "pass").await;
    let req = request(w, json!({"max_runs": 1})).await;
    let pre = w
        .engine
        .admit(&w.ops, &req, "rev", "reviewer", run)
        .await
        .unwrap();
    assert!(!pre.skipped, "{pre:?}");
    (d, ev, req)
}

/// A subject that passes the gate, from subject to decision.
pub async fn passed(w: &World, generation: u64, diff: &str, run: &str) -> Digest {
    let (d, ev, _) = prepared(w, generation, diff, run).await;
    let sub = w
        .engine
        .submit_result(&w.rev, &result("rev", run, &d, generation, &ev))
        .await
        .unwrap();
    assert!(sub.counted);
    let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(
        g.decision.outcome.as_str(),
        "pass",
        "{:?}",
        g.decision.reasons
    );
    d
}

/// The execution's current subject and the gate's current policy, as `status` shows them: what
/// a person who reviewed them now names in a decision.
pub async fn reviewed(w: &World) -> verdict_engine::Reviewed {
    let status = w.engine.status(&w.ops, EXEC).await.unwrap();
    verdict_engine::Reviewed {
        subject_digest: status.head.unwrap().subject_digest,
        policy_digest: status.gate.unwrap().policy_digest,
        decision_key: None,
    }
}

/// Stores, as alice, an approval of what `status` shows now that names the risk table's review
/// as what it clears: a human decision row on a subject whose evaluation needs no person (which
/// `decide` refuses to approve), for the tests about what any later row does.
pub async fn approval_as_stored(w: &World, reason: &str) -> Digest {
    let seen = reviewed(w).await;
    let doc = json!({
        "id": format!("hd-stored-{}", &seen.subject_digest.as_str()[7..19]),
        "principal": "alice",
        "role": "human",
        "subject_digest": seen.subject_digest.as_str(),
        "policy_digest": seen.policy_digest.as_str(),
        "decision": "approve",
        "reason": reason,
        "decided_at": now().to_string(),
        "clears": [{"code": "human_review_required"}]
    });
    w.engine
        .store()
        .put(
            &w.alice.actor(),
            verdict_store::DocKind::HumanDecision,
            &doc,
        )
        .await
        .unwrap()
        .digest
}

/// The execution's current subject, as the operator reads it.
pub async fn current_subject(w: &World) -> Digest {
    w.engine
        .execution_head(&w.ops, EXEC)
        .await
        .unwrap()
        .unwrap()
        .subject_digest
}

/// Why the execution's latest decision does not apply, as the operator reads it.
pub async fn latest_not_applicable(w: &World) -> Vec<verdict_engine::NotApplicable> {
    let status = w.engine.status(&w.ops, EXEC).await.unwrap();
    status.latest.unwrap().not_applicable
}

/// Gives `who` a grant `id` of `access` on [`EXEC`] until 2027, as the operator.
pub async fn grant_on_exec(w: &World, id: &str, who: &str, access: Access) {
    w.engine
        .grant(
            &w.ops,
            id,
            who,
            ScopeKind::Execution,
            EXEC,
            access,
            &ts("2027-01-01T00:00:00Z"),
        )
        .await
        .unwrap();
}

/// A verifier that counts every call that reaches it.
pub struct Counting(pub std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl verdict_engine::ModelVerifier for Counting {
    async fn verify(&self, task: &verdict_engine::VerifyTask) -> Result<Value, String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ev = task
            .evidence
            .first()
            .map(|e| e.id.to_string())
            .unwrap_or_default();
        Ok(result(
            task.verifier.as_str(),
            task.run_id.as_str(),
            &task.subject_digest,
            task.generation,
            &ev,
        ))
    }
}

/// Makes the database fail, from now on, every change that marks a job done, as a fault of the
/// database would (neither a refusal of the write nor a stale claim, so the store reports it
/// as the database failing on both backends): whatever the transaction making it wrote is
/// undone with it.
/// [`allow_job_ends`] takes it back.
pub async fn refuse_job_ends(location: &Location) {
    match location {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch(
                "CREATE TRIGGER injected_job_end BEFORE UPDATE ON jobs \
                 WHEN NEW.state = 'done' BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
            )
            .unwrap();
        }
        Location::Postgres(url) => {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(sqlx::raw_sql(
                "CREATE FUNCTION public.injected_job_end() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$; \
                 CREATE TRIGGER injected_job_end BEFORE UPDATE ON verdict.jobs FOR EACH ROW \
                 WHEN (NEW.state = 'done') EXECUTE FUNCTION public.injected_job_end();",
            ))
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// Takes back [`refuse_job_ends`].
pub async fn allow_job_ends(location: &Location) {
    match location {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch("DROP TRIGGER injected_job_end;")
                .unwrap();
        }
        Location::Postgres(url) => {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(sqlx::raw_sql(
                "DROP TRIGGER injected_job_end ON verdict.jobs; \
                 DROP FUNCTION public.injected_job_end();",
            ))
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// Makes the database refuse every row inserted into `table` from now on as a duplicate key,
/// as an administrator's trigger would: a fault the store meets inside its own transaction and
/// reports as a refusal that sending the same write again cannot cure.
pub async fn refuse_inserts(location: &Location, table: &str) {
    match location {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch(&format!(
                "CREATE TABLE injected_fault_key (k INTEGER PRIMARY KEY); \
                 INSERT INTO injected_fault_key VALUES (1); \
                 CREATE TRIGGER injected_fault BEFORE INSERT ON {table} BEGIN \
                 INSERT INTO injected_fault_key VALUES (1); END;"
            ))
            .unwrap();
        }
        Location::Postgres(url) => {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE FUNCTION public.injected_fault() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected fault' USING ERRCODE = '23505'; END $$; \
                 CREATE TRIGGER injected_fault BEFORE INSERT ON verdict.{table} \
                 FOR EACH ROW EXECUTE FUNCTION public.injected_fault();"
            ))))
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// Takes back [`refuse_inserts`]: the store's schema is again what its migrations made, as
/// `audit verify` checks.
pub async fn allow_inserts(location: &Location, table: &str) {
    match location {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch("DROP TRIGGER injected_fault; DROP TABLE injected_fault_key;")
                .unwrap();
        }
        Location::Postgres(url) => {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP TRIGGER injected_fault ON verdict.{table}; \
                 DROP FUNCTION public.injected_fault();"
            ))))
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}
