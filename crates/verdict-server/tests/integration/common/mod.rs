//! Shared by the server's tests: a fresh store per test on each backend, a populated world
//! (principals with tokens, grants, a policy), a real server on a loopback port, and builders
//! for the documents a change goes through.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;
use verdict_engine::{Engine, Principal};
use verdict_server::AppState;
use verdict_store::{Access, Location, OpenOptions, ScopeKind, Store};

pub const EXEC: &str = "ex-1";
pub const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

/// The wall clock, as the server reads it: engine calls made directly by a test happen at the
/// same time as the server's.
pub fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Timestamp::from_unix_nanos(i128::try_from(nanos).unwrap())
}

/// Runs `body` once on a fresh SQLite store and once on a fresh PostgreSQL database, then
/// checks each store's audit chain is intact.
pub async fn on_both<F, Fut>(body: F)
where
    F: Fn(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let store = verdict_store::open(&Location::Sqlite(dir.path().join("verdict.db")))
        .await
        .unwrap();
    body(store.clone()).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "sqlite audit chain broken"
    );

    let scratch = verdict_store::scratch::ScratchPostgres::create("server").unwrap();
    let options = OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    body(store.clone()).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "postgres audit chain broken"
    );
}

/// Where a test store lives, so a test can damage it from outside the store's own code.
#[derive(Debug, Clone)]
pub enum Backing {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Backing {
    /// From now on, every insert into the denials table fails: the store cannot record a
    /// refusal (a full disk, a lost privilege).
    pub async fn refuse_denials(&self) {
        match self {
            Self::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.execute_batch(
                    "CREATE TRIGGER test_no_denials BEFORE INSERT ON denials \
                     BEGIN SELECT RAISE(ABORT, 'denials refused by the test'); END;",
                )
                .unwrap();
            }
            Self::Postgres(url) => {
                use sqlx::{Connection as _, Executor as _};
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                conn.execute(
                    "CREATE FUNCTION verdict.test_no_denials() RETURNS trigger LANGUAGE plpgsql AS \
                     $$ BEGIN RAISE EXCEPTION 'denials refused by the test'; END $$; \
                     CREATE TRIGGER test_no_denials BEFORE INSERT ON verdict.denials \
                     FOR EACH ROW EXECUTE FUNCTION verdict.test_no_denials();",
                )
                .await
                .unwrap();
                conn.close().await.unwrap();
            }
        }
    }

    /// Undoes [`Backing::refuse_denials`].
    pub async fn accept_denials(&self) {
        match self {
            Self::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.execute_batch("DROP TRIGGER test_no_denials;").unwrap();
            }
            Self::Postgres(url) => {
                use sqlx::{Connection as _, Executor as _};
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                conn.execute(
                    "DROP TRIGGER test_no_denials ON verdict.denials; \
                     DROP FUNCTION verdict.test_no_denials();",
                )
                .await
                .unwrap();
                conn.close().await.unwrap();
            }
        }
    }
}

/// [`on_both`], telling the body where each store lives.
pub async fn on_both_backed<F, Fut>(body: F)
where
    F: Fn(Arc<dyn Store>, Backing) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verdict.db");
    let store = verdict_store::open(&Location::Sqlite(path.clone()))
        .await
        .unwrap();
    body(store.clone(), Backing::Sqlite(path)).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "sqlite audit chain broken"
    );

    let scratch = verdict_store::scratch::ScratchPostgres::create("serverb").unwrap();
    let options = OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    body(store.clone(), Backing::Postgres(scratch.url().to_owned())).await;
    assert!(
        store.verify_audit(None).await.unwrap().is_intact(),
        "postgres audit chain broken"
    );
}

/// Runs `body` with two handles on one fresh store, as two server processes would open it: one
/// SQLite file opened twice, then one PostgreSQL database opened twice.
pub async fn on_both_twice<F, Fut>(body: F)
where
    F: Fn(Arc<dyn Store>, Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let at = verdict_store::Location::Sqlite(dir.path().join("verdict.db"));
    let first = verdict_store::open(&at).await.unwrap();
    let second = verdict_store::open(&at).await.unwrap();
    body(first, second).await;

    let scratch = verdict_store::scratch::ScratchPostgres::create("twice").unwrap();
    let options = verdict_store::OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..verdict_store::OpenOptions::default()
    };
    let first = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    let second = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    listening(&first).await;
    listening(&second).await;
    body(first, second).await;
}

/// Waits until a PostgreSQL handle listens on the store's channel, as a server's handle does
/// soon after its first request. A handle moves its credential epoch when it starts listening
/// (a change of token made before was not heard), so a test that counts what a principal
/// cache keeps starts once that has happened.
pub async fn listening(store: &Arc<dyn Store>) {
    assert_eq!(
        store
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

/// A server on a loopback port, stopped when dropped.
pub struct Server {
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn serve(state: AppState) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        verdict_server::serve(listener, state, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Server {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        stop: Some(stop),
    }
}

/// What a response carried: status, content type and the body as JSON (null when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Server {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        let raw = body.map(|b| (serde_json::to_vec(b).unwrap(), "application/json"));
        self.send_raw(method, path, token, raw).await
    }

    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<(Vec<u8>, &str)>,
    ) -> Reply {
        self.send_with(method, path, token, body, &[]).await
    }

    /// A request with extra headers; a JSON body is given as a value.
    pub async fn send_headers(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let raw = body.map(|b| (serde_json::to_vec(b).unwrap(), "application/json"));
        self.send_with(method, path, token, raw, headers).await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<(Vec<u8>, &str)>,
        headers: &[(&str, &str)],
    ) -> Reply {
        self.send_via(&self.client, method, path, token, body, headers)
            .await
    }

    /// A request from the loopback address `from` (any of 127.0.0.0/8), as a client with an
    /// address of its own would send it.
    pub async fn send_from(
        &self,
        from: std::net::IpAddr,
        method: &str,
        path: &str,
        token: Option<&str>,
    ) -> Reply {
        let client = reqwest::Client::builder()
            .local_address(from)
            .no_proxy()
            .build()
            .unwrap();
        self.send_via(&client, method, path, token, None, &[]).await
    }

    async fn send_via(
        &self,
        client: &reqwest::Client,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<(Vec<u8>, &str)>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = client.request(method, format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some((bytes, media)) = body {
            req = req.header("content-type", media).body(bytes);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let content_type = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let bytes = resp.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else if content_type.starts_with("text/plain") {
            // `/metrics` only; every other answer must be JSON.
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {bytes:?}"))
        };
        Reply {
            status,
            content_type,
            headers,
            body,
        }
    }
}

/// Asserts `reply` is a problem document with `status` and `code`.
pub fn assert_problem(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(reply.content_type, "application/problem+json", "{reply:?}");
    let b = &reply.body;
    assert_eq!(b["status"], status, "{reply:?}");
    assert_eq!(b["code"], code, "{reply:?}");
    assert_eq!(
        b["type"],
        format!("urn:verdict:problem:{code}"),
        "{reply:?}"
    );
    assert!(
        b["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{reply:?}"
    );
    assert!(
        b["detail"].as_str().is_some_and(|t| !t.is_empty()),
        "{reply:?}"
    );
    assert!(b["retryable"].is_boolean(), "{reply:?}");
}

/// An engine with an operator, a producer, a runner, a verifier and a human, each granted on
/// [`EXEC`], a policy that needs unit tests and a reviewer, and each principal's token.
pub struct World {
    pub engine: Engine,
    pub ops: Principal,
    pub rev: Principal,
    pub tokens: std::collections::BTreeMap<&'static str, String>,
}

impl World {
    pub fn token(&self, name: &str) -> &str {
        &self.tokens[name]
    }

    pub async fn denials(&self) -> Vec<Value> {
        self.engine
            .store()
            .denials(0, 10_000)
            .await
            .unwrap()
            .iter()
            .map(|s| s.value().unwrap())
            .collect()
    }
}

pub async fn world(store: Arc<dyn Store>) -> World {
    let engine = Engine::new(store, "merge");
    let mut tokens = std::collections::BTreeMap::new();
    let t = engine
        .init("ops", verdict_store::StoreClock::System)
        .await
        .unwrap();
    let ops = engine.authenticate(&t).await.unwrap();
    tokens.insert("ops", t);
    for (name, role, access) in [
        ("coder", "producer", Access::Write),
        ("ci", "runner", Access::Write),
        ("rev", "verifier", Access::Read),
        ("alice", "human", Access::Write),
    ] {
        let role = serde_json::from_value(json!(role)).unwrap();
        let token = engine.add_principal(&ops, name, role).await.unwrap();
        engine
            .grant(
                &ops,
                &format!("g-{name}"),
                name,
                ScopeKind::Execution,
                EXEC,
                access,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        tokens.insert(name, token);
    }
    let rev = engine.authenticate(&tokens["rev"]).await.unwrap();
    engine.set_policy(&ops, &policy()).await.unwrap();
    World {
        engine,
        ops,
        rev,
        tokens,
    }
}

pub fn policy() -> Value {
    json!({
        "schema": "verdict.policy/v1",
        "name": "merge",
        "revision": 1,
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

/// Runner check evidence for a subject.
pub fn evidence(subject: &str, outcome: &str) -> Value {
    json!({
        "id": format!("ev-{}-{}", &subject[7..19], outcome),
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": subject,
        "definition_digest": DEF,
        "produced_by": {"principal": "ci", "role": "runner"},
        "outcome": outcome,
        "content_digest": DEF,
        "observed_at": "2026-11-30T11:59:00Z",
        "freshness": {"kind": "content"}
    })
}

/// A reviewer's result for a run, passing `tests-pass` on the given evidence.
pub fn result(run: &str, subject: &Digest, generation: u64, ev_id: &str) -> Value {
    json!({
        "id": format!("vr-{run}"),
        "verifier": {"principal": "rev", "class": "reviewer", "run": run},
        "subject_digest": subject.as_str(),
        "generation": generation,
        "status": "completed",
        "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": [ev_id]}],
        "findings": [],
        "dispositions": []
    })
}

/// The seq of the audit chain's last event (0 when empty).
pub async fn head_seq(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

/// The audit events appended after `seq`.
pub async fn events_after(w: &World, seq: u64) -> Vec<verdict_store::AuditEvent> {
    w.engine.store().audit_events(seq, 10_000).await.unwrap()
}

/// Asserts that `reply` is a 403 with `code` and that exactly one audit event, a denial of
/// `who` with that code, was appended after `before`.
pub async fn assert_denied_once(w: &World, before: u64, reply: &Reply, who: &str, code: &str) {
    assert_problem(reply, 403, code);
    assert_eq!(reply.body["retryable"], false);
    let after = events_after(w, before).await;
    assert_eq!(after.len(), 1, "{who}: {after:?}");
    assert_eq!(after[0].table, "denials", "{who}: {after:?}");
    let denial = w.denials().await.pop().unwrap();
    assert_eq!(denial["principal"], who);
    assert_eq!(denial["code"], code);
}
