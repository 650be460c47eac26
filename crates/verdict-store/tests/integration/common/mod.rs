//! Shared by the integration tests: a fresh store on each backend, raw access for tampering,
//! and contract documents to store.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use sqlx::{Connection as _, Executor as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use verdict_core::digest::{Digest, DigestKind, digest};
use verdict_store::{Location, OpenOptions, Store};

/// The PostgreSQL server the tests use (a superuser connection to an existing database).
pub fn pg_admin_url() -> String {
    std::env::var("VERDICT_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn pg_url_for(db: &str) -> String {
    let admin = pg_admin_url();
    let (base, _) = admin.rsplit_once('/').expect("database in VERDICT_TEST_PG");
    format!("{base}/{db}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// A store of its own: a temporary SQLite file, or a fresh PostgreSQL database with role names
/// of its own.
pub struct TestStore {
    pub kind: Kind,
    pub store: Arc<dyn Store>,
    pub location: Location,
    pub prefix: String,
    pub db: String,
    dir: Option<tempfile::TempDir>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn unique(tag: &str) -> String {
    format!(
        "{tag}{}_{}_",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

pub async fn sqlite() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let location = Location::Sqlite(dir.path().join("verdict.db"));
    let store = verdict_store::open(&location).await.unwrap();
    TestStore {
        kind: Kind::Sqlite,
        store,
        location,
        prefix: String::new(),
        db: String::new(),
        dir: Some(dir),
    }
}

/// A store made at schema version 1 with one principal appended (the way a binary of that
/// version wrote it), then migrated by this binary. Returns the store and the migration report.
pub async fn migrated_from_v1(kind: Kind) -> (TestStore, verdict_store::MigrationReport) {
    use verdict_store::audit::{AuditEvent, GENESIS_HASH};
    let body = String::from_utf8(verdict_core::canonical::to_vec(&json!({
        "name": "ops",
        "role": "operator",
        "token_sha256": verdict_store::token_sha256("token-ops").as_str(),
    })))
    .unwrap();
    let dg = verdict_store::records::row_digest("store.principal", body.as_bytes()).to_string();
    let v1 = verdict_store::migrations::SQLITE
        .iter()
        .chain(verdict_store::migrations::POSTGRES)
        .filter(|m| m.version == 1)
        .map(|m| m.sql)
        .collect::<Vec<_>>();
    let (location, prefix, db, dir) = match kind {
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("verdict.db");
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(v1[0]).unwrap();
            let mut event = AuditEvent {
                seq: 1,
                prev_hash: GENESIS_HASH.into(),
                hash: String::new(),
                event_type: "append".into(),
                table: "principals".into(),
                key: "ops".into(),
                principal: "verdict-engine".into(),
                role: "operator".into(),
                payload_digest: dg.clone(),
                correlation: Some("ops".into()),
                recorded_at: "2026-11-30T12:00:00.000000Z".into(),
            };
            event.hash = event.compute_hash();
            conn.execute(
                "INSERT INTO audit_events (seq, prev_hash, hash, event_type, tbl, key, principal, role, \
                 payload_digest, correlation, recorded_at) VALUES (1, ?1, ?2, 'append', 'principals', 'ops', \
                 'verdict-engine', 'operator', ?3, 'ops', ?4)",
                rusqlite::params![event.prev_hash, event.hash, dg, event.recorded_at],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO principals (seq, key, digest, body) VALUES (1, 'ops', ?1, ?2)",
                rusqlite::params![dg, body],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, 'init', '2026-11-30T12:00:00Z')",
                [],
            )
            .unwrap();
            (
                Location::Sqlite(path),
                String::new(),
                String::new(),
                Some(dir),
            )
        }
        Kind::Postgres => {
            let (db, url) = create_pg_db().await;
            let prefix = unique("vt");
            create_pg_roles(&prefix).await;
            let sql = pg_migration_sql(v1[1], &prefix);
            let put = format!(
                "SELECT * FROM verdict.put_principals('verdict-engine', 'operator', ARRAY['ops'], \
                 ARRAY['{dg}'], ARRAY['{}'], ARRAY['ops'])",
                body.replace('\'', "''")
            );
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "BEGIN; {sql}; INSERT INTO verdict.schema_migrations (version, name) VALUES (1, 'init'); {put}; COMMIT;"
            ))))
            .await
            .unwrap();
            (Location::Postgres(url), prefix, db, None)
        }
    };
    let old = OpenOptions {
        migrate: false,
        role_prefix: (!prefix.is_empty()).then(|| prefix.clone()),
        ..OpenOptions::default()
    };
    let err = verdict_store::open_with(&location, &old)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            verdict_store::StoreError::SchemaTooOld { found: 1, .. }
        ),
        "{err}"
    );
    let report = verdict_store::migrate(&location, old.role_prefix.as_deref())
        .await
        .unwrap();
    let store = verdict_store::open_with(
        &location,
        &OpenOptions {
            migrate: false,
            ..old
        },
    )
    .await
    .unwrap();
    let t = TestStore {
        kind,
        store,
        location,
        prefix,
        db,
        dir,
    };
    (t, report)
}

/// Creates the NOLOGIN owner and principal roles of `prefix`, as a migration would.
pub async fn create_pg_roles(prefix: &str) {
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    for role in verdict_store::role_names(prefix) {
        admin
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE ROLE \"{role}\" NOLOGIN"
            ))))
            .await
            .unwrap();
    }
}

/// A PostgreSQL migration's SQL with its role placeholders filled in for `prefix`.
pub fn pg_migration_sql(sql: &str, prefix: &str) -> String {
    let mut sql = sql
        .replace("__PREFIX_LITERAL__", &format!("'{prefix}'"))
        .replace("__OWNER__", &format!("\"{prefix}owner\""));
    for role in verdict_store::ActorRole::ALL {
        sql = sql.replace(
            &format!("__{}__", role.as_str().to_uppercase()),
            &format!("\"{prefix}{}\"", role.as_str()),
        );
    }
    sql
}

/// Creates an empty database named after the test process and a counter.
pub async fn create_pg_db() -> (String, String) {
    let db = unique("verdict_t");
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    admin
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{db}\""
        ))))
        .await
        .unwrap();
    let url = pg_url_for(&db);
    (db, url)
}

pub async fn postgres() -> TestStore {
    postgres_with(16).await
}

pub async fn postgres_with(max_connections: u32) -> TestStore {
    let (db, url) = create_pg_db().await;
    let prefix = unique("vt");
    let location = Location::Postgres(url);
    let options = OpenOptions {
        role_prefix: Some(prefix.clone()),
        max_connections,
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&location, &options).await.unwrap();
    TestStore {
        kind: Kind::Postgres,
        store,
        location,
        prefix,
        db,
        dir: None,
    }
}

/// A second store under `t`'s role prefix, in a database of its own, as two stores migrated
/// before prefixes were marked share one (schema 32): the mark on the owner role is removed by
/// hand, so that migrating takes the prefix again. Drop it after `t`: both drop the roles.
pub async fn postgres_sharing_roles_with(t: &TestStore) -> TestStore {
    let (db, url) = create_pg_db().await;
    t.raw(&format!("COMMENT ON ROLE \"{}owner\" IS NULL", t.prefix))
        .await
        .unwrap();
    let location = Location::Postgres(url);
    let options = OpenOptions {
        role_prefix: Some(t.prefix.clone()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&location, &options).await.unwrap();
    TestStore {
        kind: Kind::Postgres,
        store,
        location,
        prefix: t.prefix.clone(),
        db,
        dir: None,
    }
}

pub async fn drop_pg(db: &str, prefix: &str) {
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    admin
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
        ))))
        .await
        .unwrap();
    if !prefix.is_empty() {
        // The principal roles and any login role a test made for itself.
        let roles: Vec<String> = sqlx::query_scalar(
            "SELECT rolname::text FROM pg_roles WHERE starts_with(rolname, $1) ORDER BY rolcanlogin DESC",
        )
        .bind(prefix)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        for role in roles {
            let _ = admin
                .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP ROLE IF EXISTS \"{role}\""
                ))))
                .await;
        }
    }
}

impl Drop for TestStore {
    // Also when a test panics: its database and roles must not outlive it.
    fn drop(&mut self) {
        if self.kind == Kind::Postgres && !self.db.is_empty() {
            let (db, prefix) = (
                std::mem::take(&mut self.db),
                std::mem::take(&mut self.prefix),
            );
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(drop_pg(&db, &prefix));
            })
            .join();
        }
    }
}

impl TestStore {
    /// Drops the database and roles (the drop does it too, even after a panic).
    pub async fn cleanup(self) {
        drop(self);
    }

    /// Another handle on the same store (its own connection or pool).
    pub async fn reopen(&self) -> Arc<dyn Store> {
        let options = OpenOptions {
            role_prefix: (!self.prefix.is_empty()).then(|| self.prefix.clone()),
            ..OpenOptions::default()
        };
        verdict_store::open_with(&self.location, &options)
            .await
            .unwrap()
    }

    /// The qualified name of a table in hand-written SQL.
    pub fn table(&self, name: &str) -> String {
        match self.kind {
            Kind::Sqlite => name.to_owned(),
            Kind::Postgres => format!("verdict.{name}"),
        }
    }

    /// Runs hand-written SQL as the database superuser (PostgreSQL) or through a raw
    /// connection to the file (SQLite). Returns the database's error message on failure.
    pub async fn raw(&self, sql: &str) -> Result<(), String> {
        match &self.location {
            Location::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
                conn.busy_timeout(std::time::Duration::from_secs(10))
                    .unwrap();
                conn.execute_batch(sql).map_err(|e| e.to_string())
            }
            Location::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Tampering as someone who can switch the append-only triggers off.
    pub async fn tamper(&self, table: &str, sql: &str) {
        let wrapped = match self.kind {
            Kind::Sqlite => {
                // A raw connection with the file's triggers dropped and put back afterwards is
                // what an attacker with the file can do.
                let triggers = self.sqlite_triggers(table);
                let drops: String = triggers
                    .iter()
                    .map(|(n, _)| format!("DROP TRIGGER {n};"))
                    .collect();
                let creates: String = triggers.iter().map(|(_, s)| format!("{s};")).collect();
                format!("BEGIN; {drops} {sql}; {creates} COMMIT;")
            }
            Kind::Postgres => {
                format!("BEGIN; SET LOCAL session_replication_role = replica; {sql}; COMMIT;")
            }
        };
        self.raw(&wrapped)
            .await
            .unwrap_or_else(|e| panic!("tampering failed: {e}\n{wrapped}"));
    }

    /// Swaps the seqs of two rows of `table` (`audit_events` included) behind the store's back.
    pub async fn swap_seqs(&self, table: &str, a: i64, b: i64) {
        let name = self.table(table);
        self.tamper(
            table,
            &format!(
                "UPDATE {name} SET seq = -1 WHERE seq = {a}; UPDATE {name} SET seq = {a} WHERE seq = {b}; \
                 UPDATE {name} SET seq = {b} WHERE seq = -1"
            ),
        )
        .await;
    }

    fn sqlite_triggers(&self, table: &str) -> Vec<(String, String)> {
        let Location::Sqlite(path) = &self.location else {
            unreachable!()
        };
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?1")
            .unwrap();
        stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    /// One value from a hand-written query (integer).
    pub async fn count(&self, sql: &str) -> i64 {
        match &self.location {
            Location::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Location::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
                    .fetch_one(&mut conn)
                    .await
                    .unwrap()
            }
        }
    }
}

/// Runs one async test body on both backends.
#[macro_export]
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let t = $crate::common::sqlite().await;
                super::$name(&t).await;
                t.cleanup().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let t = $crate::common::postgres().await;
                super::$name(&t).await;
                t.cleanup().await;
            }
        }
    };
}

// ---- documents -------------------------------------------------------------------------

pub const PRODUCER: &str = "agent-coder-1";
pub const RUNNER: &str = "ci-runner";
pub const VERIFIER: &str = "reviewer-1";
pub const HUMAN: &str = "alice";
pub const OPERATOR: &str = "engine";
/// The stored operator under whose name [`put_decision`] runs the gate.
pub const GATEKEEPER: &str = "gatekeeper";

pub fn d(seed: &str) -> String {
    verdict_core::digest::raw(seed.as_bytes()).to_string()
}

pub fn subject(execution: &str, generation: u64) -> Value {
    json!({
        "schema": "verdict.subject/v1",
        "mission": "m-17",
        "execution": {"id": execution, "generation": generation},
        "work_items": [{"kind": "work_package", "id": "wp-7", "version": "2"}],
        "producer": {"principal": PRODUCER, "run": "run-991"},
        "objective": {"revision": "obj-r4", "digest": d("objective")},
        "criteria": {"revision": "crit-r4", "items": [
            {"id": "tests-pass", "text": "All unit tests pass", "required": true}
        ]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": d("diff")}],
        "checks": [{"id": "unit-tests", "definition_digest": d("def"), "criteria": ["tests-pass"]}],
        "workflow_revision": "wf-2",
        "risk": {"class": "low", "revision": "risk-r1", "capabilities": []}
    })
}

pub fn subject_digest(s: &Value) -> Digest {
    digest(DigestKind::Subject, s)
}

pub fn policy(revision: u64) -> Value {
    json!({
        "schema": "verdict.policy/v1",
        "name": "merge",
        "revision": revision,
        "required_checks": ["unit-tests"],
        "required_verifiers": ["reviewer"]
    })
}

pub fn evidence(subject: &Digest, id: &str) -> Value {
    evidence_by(subject, id, RUNNER, "runner")
}

/// Check evidence that says `principal` produced it as `role`.
pub fn evidence_by(subject: &Digest, id: &str, principal: &str, role: &str) -> Value {
    json!({
        "id": id,
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": subject.as_str(),
        "definition_digest": d("def"),
        "produced_by": {"principal": principal, "role": role},
        "outcome": "pass",
        "hard": true,
        "content_digest": d(id),
        "observed_at": "2026-11-30T11:50:00Z",
        "freshness": {"kind": "content"}
    })
}

pub fn request(subject: &Digest) -> Value {
    json!({"schema": "verdict.verification-request/v1", "subject_digest": subject.as_str(), "classes": ["reviewer"]})
}

pub fn finding(subject: &Digest, id: &str, version: u64) -> Value {
    json!({
        "id": id,
        "version": version,
        "criterion": "tests-pass",
        "type": "bug",
        "severity": "blocker",
        "scope": "change",
        "subject_digest": subject.as_str(),
        "evidence_refs": ["diff"],
        "method": "model_review"
    })
}

pub fn result(subject: &Digest, generation: u64, run: &str, findings: Vec<Value>) -> Value {
    json!({
        "id": format!("vr-{run}"),
        "verifier": {"principal": VERIFIER, "class": "reviewer", "run": run},
        "subject_digest": subject.as_str(),
        "generation": generation,
        "status": "completed",
        "criteria": [{"id": "tests-pass", "status": "passed", "method": "model_review", "evidence_refs": ["diff"]}],
        "findings": findings,
        "dispositions": []
    })
}

pub fn human(subject: &Digest, policy: &Digest) -> Value {
    json!({
        "id": "hd-1",
        "principal": HUMAN,
        "role": "human",
        "subject_digest": subject.as_str(),
        "policy_digest": policy.as_str(),
        "decision": "approve",
        "reason": "looked at it",
        "decided_at": "2026-11-30T12:00:00Z",
        "clears": [{"code": "human_review_required"}]
    })
}

pub fn decision(subject: &Digest, policy: &Digest, key: &str, outcome: &str) -> Value {
    json!({
        "schema": "verdict.gate-decision/v1",
        "outcome": outcome,
        "evaluation_key": key,
        "subject_digest": subject.as_str(),
        "policy_digest": policy.as_str(),
        "evidence_set_digest": d("set"),
        "criteria": [],
        "reasons": [],
        "rework": [],
        "follow_ups": [],
        "unresolved_prior_blockers": [],
        "scores": {"c": null, "rec_v": null, "cat_v": null}
    })
}

/// Admits run `run` of the test verifier (class `reviewer`) on stored subject `s` at
/// `generation`, through a fresh verification request.
pub async fn admit(t: &TestStore, s: &Digest, generation: u64, run: &str) {
    let operator = verdict_store::Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    // The verifier's grant on the subject's execution, which its result needs.
    let subject: verdict_core::contracts::Subject = t
        .store
        .get(verdict_store::DocKind::Subject, s)
        .await
        .unwrap()
        .unwrap()
        .decode()
        .unwrap();
    t.store
        .add_grant(
            &operator,
            &verdict_store::GrantRecord {
                grant_id: format!("g-{run}").parse().unwrap(),
                principal: VERIFIER.parse().unwrap(),
                scope: verdict_store::GrantScope {
                    kind: verdict_store::ScopeKind::Execution,
                    id: subject.execution.id.as_str().parse().unwrap(),
                },
                access: verdict_store::Access::Read,
                expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
            },
        )
        .await
        .unwrap();
    let req = t
        .store
        .put(&operator, verdict_store::DocKind::Request, &request(s))
        .await
        .unwrap();
    t.store
        .admit_run(
            &operator,
            &verdict_store::RunAdmission {
                run_id: run.parse().unwrap(),
                request_digest: req.digest.clone(),
                subject_digest: s.clone(),
                verifier: VERIFIER.parse().unwrap(),
                class: "reviewer".parse().unwrap(),
                admitted_generation: generation,
            },
        )
        .await
        .unwrap();
}

/// Writes at least one row into every table and moves one pointer of each kind.
pub async fn populate(store: &dyn Store) {
    use verdict_core::contracts::Role;
    use verdict_store::*;
    let op = Actor::new(OPERATOR, Role::Operator);
    let subj = subject("ex-1", 1);
    let s = subject_digest(&subj);
    store
        .add_principal(
            &op,
            &PrincipalRecord {
                name: VERIFIER.parse().unwrap(),
                role: Role::Verifier,
                token_sha256: token_sha256("token-1"),
            },
        )
        .await
        .unwrap();
    let grant = GrantRecord {
        grant_id: "g-1".parse().unwrap(),
        principal: VERIFIER.parse().unwrap(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: "ex-1".parse().unwrap(),
        },
        access: Access::Read,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    store.add_grant(&op, &grant).await.unwrap();
    // A second grant that stays in force: a result needs its verifier's grant.
    let kept = GrantRecord {
        grant_id: "g-2".parse().unwrap(),
        ..grant
    };
    store.add_grant(&op, &kept).await.unwrap();
    store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &subj,
        )
        .await
        .unwrap();
    let p = store.put(&op, DocKind::Policy, &policy(4)).await.unwrap();
    store
        .set_gate_policy(&op, "merge", None, &p.digest)
        .await
        .unwrap();
    store
        .set_current_subject(&op, "ex-1", None, &s)
        .await
        .unwrap();
    let runner = Actor::new(RUNNER, Role::Runner);
    for i in 0..3 {
        store
            .put(
                &runner,
                DocKind::Evidence,
                &evidence(&s, &format!("ev-{i}")),
            )
            .await
            .unwrap();
    }
    let req = store
        .put(&op, DocKind::Request, &request(&s))
        .await
        .unwrap();
    store
        .admit_run(
            &op,
            &RunAdmission {
                run_id: "vrun-1".parse().unwrap(),
                request_digest: req.digest.clone(),
                subject_digest: s.clone(),
                verifier: VERIFIER.parse().unwrap(),
                class: "reviewer".parse().unwrap(),
                admitted_generation: 1,
            },
        )
        .await
        .unwrap();
    let verifier = Actor::new(VERIFIER, Role::Verifier);
    store
        .record_run_status(&verifier, "vrun-1", RunStatus::Started, None)
        .await
        .unwrap();
    store
        .put(
            &verifier,
            DocKind::Verification,
            &result(&s, 1, "vrun-1", vec![finding(&s, "f-1", 1)]),
        )
        .await
        .unwrap();
    store
        .record_run_status(&verifier, "vrun-1", RunStatus::Completed, None)
        .await
        .unwrap();
    // One of the verifier's grants is revoked once it is done.
    store
        .revoke_grant(
            &op,
            &Revocation {
                grant_id: "g-1".parse().unwrap(),
                revoked_at: "2026-11-30T13:00:00Z".parse().unwrap(),
                reason: "done".into(),
            },
        )
        .await
        .unwrap();
    store
        .put(
            &Actor::new(HUMAN, Role::Human),
            DocKind::HumanDecision,
            &human(&s, &p.digest),
        )
        .await
        .unwrap();
    put_decision(store, &decision(&s, &p.digest, &d("key-1"), "pass")).await;
    store
        .put(
            &Actor::system("verdict-engine"),
            DocKind::Denial,
            &denial(PRODUCER, Some("producer"), "nonce-1"),
        )
        .await
        .unwrap();
    // The bytes of the subject's objective (schema version 12).
    store
        .put_blob(&runner, b"the objective, in words", Some("text/plain"))
        .await
        .unwrap();
    // The same bytes put by another principal: recorded as holding them (schema version 27).
    store
        .put_blob(
            &Actor::new(OPERATOR, verdict_core::contracts::Role::Operator),
            b"the objective, in words",
            None,
        )
        .await
        .unwrap();
    // A principal whose token was replaced (schema version 30).
    register(store, "rotated", Role::Runner).await;
    store
        .change_token(
            &op,
            "rotated",
            Some(&token_sha256("rotated's second token")),
            &"2026-11-30T13:00:00Z".parse().unwrap(),
            "rotated",
        )
        .await
        .unwrap();
    // The verifier's lease of its own run (schema version 10: a lease names its purpose).
    let holder = LeaseHolder {
        holder: VERIFIER.parse().unwrap(),
        expires_at: "2026-11-30T12:05:00Z".parse().unwrap(),
    };
    store
        .cas_lease(&verifier, "run vrun-1", None, Some(&holder))
        .await
        .unwrap();
}

/// The record of a gate evaluation that read only the subject and the policy.
pub fn evaluation(subject: &Digest, policy: &Digest, key: &str) -> Value {
    json!({
        "schema": "verdict.evaluation-record/v1",
        "evaluation_key": key,
        "subject_digest": subject.as_str(),
        "policy_digest": policy.as_str(),
        "now": "2026-11-30T12:00:00Z",
        "evidence": [],
        "verifications": [],
        "human_decisions": [],
        "prior_findings": []
    })
}

/// Stores a gate decision as the engine does: in one transaction with its evaluation record
/// (same key, subject and policy), the record first, which PostgreSQL's routine requires since
/// schema 13. Returns the decision's row.
pub async fn put_decision(store: &dyn Store, doc: &Value) -> verdict_store::Stored {
    use verdict_store::{Actor, DocKind};
    let digest_at = |member: &str| -> Digest { doc[member].as_str().unwrap().parse().unwrap() };
    let record = evaluation(
        &digest_at("subject_digest"),
        &digest_at("policy_digest"),
        doc["evaluation_key"].as_str().unwrap(),
    );
    // Since schema 14 PostgreSQL stores a decision only under the name of a stored principal
    // that may gate.
    register(store, GATEKEEPER, verdict_core::contracts::Role::Operator).await;
    store
        .put_batch(
            &Actor::gate(GATEKEEPER),
            &[
                (DocKind::Evaluation, record),
                (DocKind::Decision, doc.clone()),
            ],
        )
        .await
        .unwrap()
        .pop()
        .unwrap()
}

/// A denial of `principal` (no role: an unauthenticated attempt); `seed` makes its nonce.
pub fn denial(principal: &str, role: Option<&str>, seed: &str) -> Value {
    let nonce = d(seed).trim_start_matches("sha256:").to_owned();
    let mut v = json!({
        "nonce": nonce,
        "principal": principal,
        "code": if role.is_some() { "permission_denied" } else { "unauthenticated" },
        "action": "submit a verification result",
        "message": "refused",
        "at": "2026-11-30T12:00:00Z"
    });
    if let Some(role) = role {
        v["role"] = json!(role);
    }
    v
}

/// A connection as principal `name` through its own database role (schema version 7), given a
/// login for the test; the principal is stored first, in `role`, when it is not yet. Returns
/// the connection and the login's name.
pub async fn principal_login(
    t: &TestStore,
    name: &str,
    role: verdict_core::contracts::Role,
) -> (sqlx::PgConnection, String) {
    register(t.store.as_ref(), name, role).await;
    let login = verdict_store::principal_db_role(&t.prefix, &t.db, name);
    t.raw(&format!("ALTER ROLE \"{login}\" LOGIN"))
        .await
        .unwrap();
    let Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let url = url.replacen("postgres@", &format!("{login}@"), 1);
    (sqlx::PgConnection::connect(&url).await.unwrap(), login)
}

/// Stores principal `name` in `role` unless it is stored already (added by [`OPERATOR`]).
pub async fn register(store: &dyn Store, name: &str, role: verdict_core::contracts::Role) {
    use verdict_store::{Actor, PrincipalRecord, token_sha256};
    if store.principal(name).await.unwrap().is_none() {
        let op = Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
        let record = PrincipalRecord {
            name: name.parse().unwrap(),
            role,
            token_sha256: token_sha256(&format!("token-of-{name}")),
        };
        store.add_principal(&op, &record).await.unwrap();
    }
}

/// Gives `principal` a write grant on `execution` until 2099 (added by [`OPERATOR`]): on
/// PostgreSQL the routines require one of a producer's subjects and requests, a runner's
/// evidence and a human's decisions (schema version 7).
pub async fn grant_write(store: &dyn Store, id: &str, principal: &str, execution: &str) {
    use verdict_store::{Access, Actor, GrantRecord, GrantScope, ScopeKind};
    let op = Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    let grant = GrantRecord {
        grant_id: id.parse().unwrap(),
        principal: principal.parse().unwrap(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: execution.parse().unwrap(),
        },
        access: Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    store.add_grant(&op, &grant).await.unwrap();
}

/// Revokes grant `id` (as [`OPERATOR`]).
pub async fn revoke(store: &dyn Store, id: &str) {
    use verdict_store::{Actor, Revocation};
    let op = Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    let revocation = Revocation {
        grant_id: id.parse().unwrap(),
        revoked_at: "2026-11-30T13:00:00Z".parse().unwrap(),
        reason: "rotated out".into(),
    };
    store.revoke_grant(&op, &revocation).await.unwrap();
}

/// Gives `principal` a write grant on mission `mission` until 2099 (added by [`OPERATOR`]): a
/// producer's subject naming a mission needs one (schema version 31).
pub async fn grant_mission_write(store: &dyn Store, id: &str, principal: &str, mission: &str) {
    use verdict_store::{Access, Actor, GrantRecord, GrantScope, ScopeKind};
    let op = Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    let grant = GrantRecord {
        grant_id: id.parse().unwrap(),
        principal: principal.parse().unwrap(),
        scope: GrantScope {
            kind: ScopeKind::Mission,
            id: mission.parse().unwrap(),
        },
        access: Access::Write,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    store.add_grant(&op, &grant).await.unwrap();
}

/// A request about subject 1 of `execution`, told apart by `seed`.
pub fn request_doc(execution: &str, seed: &str) -> Value {
    json!({
        "schema": "verdict.verification-request/v1",
        "subject_digest": subject_digest(&subject(execution, 1)).as_str(),
        "classes": ["reviewer"],
        "seed": seed,
    })
}

/// The key [`request_doc`] is stored under.
pub fn request_of(execution: &str, seed: &str) -> Digest {
    verdict_store::records::row_digest(
        verdict_store::Table::VerificationRequests.domain(),
        &verdict_core::canonical::to_vec(&request_doc(execution, seed)),
    )
}

/// [`request_of`] ex-1.
pub fn job_request(seed: &str) -> Digest {
    request_of("ex-1", seed)
}

/// Stores subject 1 of ex-1 and a request about it for each of `seeds`, and gives each of
/// `workers` a write grant on ex-1: a checks or verify job is claimed only under a grant that
/// covers its request (schema version 27).
pub async fn cover_requests(
    store: &dyn Store,
    seeds: &[&str],
    workers: &[(&str, verdict_core::contracts::Role)],
) {
    use verdict_store::{Actor, DocKind};
    for (name, role) in workers {
        register(store, name, *role).await;
        grant_write(store, &format!("g-jobs-{name}"), name, "ex-1").await;
    }
    store
        .put(
            &Actor::new(PRODUCER, verdict_core::contracts::Role::Producer),
            DocKind::Subject,
            &subject("ex-1", 1),
        )
        .await
        .unwrap();
    let op = Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    for seed in seeds {
        store
            .put(&op, DocKind::Request, &request_doc("ex-1", seed))
            .await
            .unwrap();
    }
}
