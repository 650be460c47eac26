//! The API benchmarks (docs/benchmarks/verdict-api.md): what the HTTP face and the workers cost
//! on top of the engine and the store, each measured side by side with the same work done
//! without them, in one run, on SQLite and (with `--postgres`) on PostgreSQL.
//!
//! 1. Evidence appends, single: one check evidence document per `POST /v1/evidence`, over real
//!    HTTP on loopback from one keep-alive client, against `Store::put` of documents of the same
//!    shape on the same store, in alternating rounds.
//! 2. Gate runs: `POST /v1/executions/{id}/gate-runs` on one typical execution from many
//!    concurrent clients, each on a connection of its own: latency percentiles and throughput.
//! 3. End to end: subjects in, decisions out. Over the API with worker loops (`work_one`, and
//!    between claims the store's wake-up wait, as `verdict worker` runs them; each loop on a
//!    store handle of its own) and an instant fake model server on loopback, against the same
//!    flow called on the engine directly (no HTTP, no queue), with 1, 2 and 4 workers per role.
//!
//! Shared by the bench binary (`benches/api/main.rs`) and the server's smoke test, which runs
//! it with tiny counts so it cannot rot.

use serde::Serialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use verdict_core::contracts::{Role, Subject};
use verdict_core::digest::{self, Digest};
use verdict_engine::{
    ChecksKit, ChecksRun, DEFAULT_BACK_OFF, Engine, JobFailure, Principal, VerifierKit,
    VerifyInputs, VerifyOptions, WorkOptions, Worked, WorkerRole,
};
use verdict_judge::config::{ResolvedClass, VerifiersFile};
use verdict_server::AppState;
use verdict_store::scratch::ScratchPostgres;
use verdict_store::{
    Access, Actor, DocKind, Location, OpenOptions, ScopeKind, Store, StoreClock, Wakeup,
};

/// What a run measures and how much.
#[derive(Debug, Clone)]
pub struct Options {
    /// The admin URL of a PostgreSQL server where scratch databases may be made; none: SQLite
    /// only.
    pub postgres: Option<String>,
    /// Where SQLite stores are made (a fresh directory under the system's temporary one when
    /// none).
    pub sqlite_dir: Option<PathBuf>,
    /// Tiny counts: checks that every measurement still runs, measures nothing.
    pub smoke: bool,
    /// Multiplies every count.
    pub scale: f64,
    /// Concurrent clients of the gate-run measurement.
    pub clients: usize,
    /// Worker loops per role for the end-to-end measurement, one measurement each.
    pub workers: Vec<usize>,
    /// How long the client waiting for a decision waits before reading again, and, with
    /// `idle_sleep`, how long an idle worker loop sleeps.
    pub poll: Duration,
    /// The longest an idle worker loop waits for a wake-up before claiming again (what
    /// `verdict worker --poll-ms` bounds).
    pub worker_wait: Duration,
    /// Idle worker loops sleep `poll` and claim again instead of waiting for a wake-up: the
    /// loop as it was before wake-ups, kept for comparison.
    pub idle_sleep: bool,
    /// Executions each end-to-end row times (40 by default, scaled by `scale`): more make the
    /// rows' ratio steadier on a machine busy with other work.
    pub executions: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            postgres: None,
            sqlite_dir: None,
            smoke: false,
            scale: 1.0,
            clients: 50,
            workers: vec![1, 2, 4],
            poll: Duration::from_millis(5),
            worker_wait: Duration::from_secs(1),
            idle_sleep: false,
            executions: None,
        }
    }
}

impl Options {
    fn count(&self, full: u64, smoke: u64) -> u64 {
        if self.smoke {
            smoke
        } else {
            ((full as f64 * self.scale) as u64).max(smoke)
        }
    }
}

/// One line of the results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// What was measured.
    pub measurement: String,
    /// Operations timed.
    pub operations: u64,
    /// Wall time of those operations, in seconds.
    pub seconds: f64,
    /// Operations per second.
    pub per_second: f64,
    /// Median latency of one operation, in milliseconds, where latencies were kept.
    pub p50_ms: Option<f64>,
    /// Exchanges with the database per operation (`Store::round_trips`, counted on the
    /// store handle the flow used), where counted. A count, not a time: the same on every run.
    pub round_trips: Option<f64>,
    /// 99th percentile latency, in milliseconds.
    pub p99_ms: Option<f64>,
    /// This row's figure against its baseline (the row named in `target`).
    pub ratio: Option<f64>,
    /// The target, in words.
    pub target: Option<String>,
    /// Whether the target was met.
    pub met: Option<bool>,
}

impl Row {
    fn rate(backend: &'static str, measurement: String, ops: u64, elapsed: Duration) -> Self {
        Self {
            backend,
            measurement,
            operations: ops,
            seconds: elapsed.as_secs_f64(),
            per_second: ops as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: None,
            p99_ms: None,
            round_trips: None,
            ratio: None,
            target: None,
            met: None,
        }
    }
}

/// What the worker loops of one end-to-end measurement did, counted: claims per execution do
/// not depend on how fast the machine is, only on how the loops wait.
#[derive(Debug, Clone, Serialize)]
pub struct Claims {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Worker loops per role.
    pub workers: usize,
    /// How idle loops waited: `wake-ups` or `sleep N ms`.
    pub idle: String,
    /// Executions taken to a decision.
    pub executions: u64,
    /// Claims made (`Engine::work_one` calls), until the last decision was read.
    pub claims: u64,
    /// Of those, claims that found no job.
    pub idle_claims: u64,
    /// Claims per execution.
    pub per_execution: f64,
    /// Waits ended by a signal (a notification on PostgreSQL, a claimable job seen on SQLite).
    pub signalled: u64,
    /// Waits ended by the listener (re)connecting (PostgreSQL).
    pub resumed: u64,
    /// Waits that reached their bound.
    pub timed_out: u64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Whether the counts were the smoke test's.
    pub smoke: bool,
    /// The machine's load average when the run ended (Linux), for the record.
    pub load_average: Option<String>,
    /// The rows, in the order measured.
    pub rows: Vec<Row>,
    /// The worker loops' claims, one line per end-to-end measurement.
    pub claims: Vec<Claims>,
}

impl Report {
    /// The rows as a Markdown table.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| backend | measurement | operations | seconds | per second | p50 ms | p99 ms | round trips / op | ratio | target | met |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
        );
        let ms = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.2}"));
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2} | {:.0} | {} | {} | {} | {} | {} | {} |\n",
                r.backend,
                r.measurement,
                r.operations,
                r.seconds,
                r.per_second,
                ms(r.p50_ms),
                ms(r.p99_ms),
                ms(r.round_trips),
                r.ratio.map_or_else(String::new, |v| format!("{v:.2}")),
                r.target.as_deref().unwrap_or(""),
                r.met.map_or("", |m| if m { "yes" } else { "no" }),
            ));
        }
        out
    }

    /// The worker loops' claim counts as a Markdown table.
    #[must_use]
    pub fn claims_table(&self) -> String {
        let mut out = String::from(
            "| backend | loops per role | idle loops | executions | claims | idle claims | claims per execution | signalled | resumed | timed out |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for c in &self.claims {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} |\n",
                c.backend,
                c.workers,
                c.idle,
                c.executions,
                c.claims,
                c.idle_claims,
                c.per_execution,
                c.signalled,
                c.resumed,
                c.timed_out,
            ));
        }
        out
    }
}

/// Runs every measurement on SQLite, then on PostgreSQL when an admin URL is given. Every
/// timed loop runs on the runtime's worker threads, as a server's and a client's tasks do.
pub async fn run(options: Options) -> Result<Report, String> {
    tokio::spawn(async move { run_all(&options).await })
        .await
        .map_err(err)?
}

async fn run_all(options: &Options) -> Result<Report, String> {
    let (mut rows, mut claims) = (Vec::new(), Vec::new());
    let dir = options.sqlite_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("verdict-api-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let sqlite = Backend::Sqlite(dir.join("verdict.db"));
    let result = backend_rows(options, &sqlite, &mut claims).await;
    let _ = std::fs::remove_dir_all(&dir);
    rows.extend(result?);
    if let Some(admin) = &options.postgres {
        let scratch = ScratchPostgres::create_at(admin, "apibench").map_err(|e| e.to_string())?;
        let pg = Backend::Postgres {
            location: scratch.location(),
            prefix: scratch.role_prefix(),
        };
        // The scratch database and its roles are dropped when `scratch` goes, failed or not.
        rows.extend(backend_rows(options, &pg, &mut claims).await?);
        drop(scratch);
    }
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    Ok(Report {
        smoke: options.smoke,
        load_average,
        rows,
        claims,
    })
}

/// Where a store lives; each measurement opens as many handles on it as it has processes.
enum Backend {
    Sqlite(PathBuf),
    Postgres { location: Location, prefix: String },
}

impl Backend {
    const fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres { .. } => "postgres",
        }
    }

    /// A handle as `verdict serve` or `verdict worker` opens one (the default pool).
    async fn open(&self) -> Result<Arc<dyn Store>, String> {
        self.open_sized(OpenOptions::default().max_connections)
            .await
    }

    /// A handle whose PostgreSQL pool holds at most `connections`: a worker loop does one thing
    /// at a time, and twelve loops with the default pool each, beside the server's, would ask
    /// for more connections than a default PostgreSQL (100) gives.
    async fn open_sized(&self, connections: u32) -> Result<Arc<dyn Store>, String> {
        let r = match self {
            Self::Sqlite(path) => verdict_store::open(&Location::Sqlite(path.clone())).await,
            Self::Postgres { location, prefix } => {
                let options = OpenOptions {
                    role_prefix: Some(prefix.clone()),
                    max_connections: connections,
                    ..OpenOptions::default()
                };
                verdict_store::open_with(location, &options).await
            }
        };
        r.map_err(|e| format!("opening the {} store: {e}", self.name()))
    }
}

/// The pool of each bench worker loop's store handle.
const WORKER_CONNECTIONS: u32 = 4;

async fn backend_rows(
    options: &Options,
    backend: &Backend,
    claims: &mut Vec<Claims>,
) -> Result<Vec<Row>, String> {
    let store = backend.open().await?;
    let w = world(store.clone()).await?;
    let server = Server::start(AppState::new(w.engine.clone())).await?;
    let fake = FakeModel::start().await?;
    let mut rows = evidence_appends(options, backend.name(), &w, &server).await?;
    rows.extend(gate_runs(options, backend.name(), &w, &server).await?);
    let mut round = 0;
    for &workers in &options.workers {
        round += 1;
        let (e2e, counted) =
            end_to_end(options, backend, &w, &server, &fake, workers, round).await?;
        rows.extend(e2e);
        claims.push(counted);
    }
    let report = store.verify_audit(None).await.map_err(|e| e.to_string())?;
    if !report.is_intact() {
        return Err(format!(
            "{}: the audit chain is broken after the run: {:?}",
            backend.name(),
            report.problems.first()
        ));
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// The world: principals, grants on one mission, a policy.

const MISSION: &str = "bench";
const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";
const OBJECTIVE: &str = "Retry a failed charge once";
const DIFF: &str = "--- a/pay.rs\n+++ b/pay.rs\n+    charge_again();\n";

struct World {
    engine: Engine,
    ops: Principal,
    coder: Principal,
    ci: Principal,
    rev: Principal,
    tokens: Tokens,
}

struct Tokens {
    ops: String,
    coder: String,
    ci: String,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

async fn world(store: Arc<dyn Store>) -> Result<World, String> {
    let engine = Engine::new(store, "merge");
    let ops_token = engine.init("ops", StoreClock::System).await.map_err(err)?;
    let ops = engine.authenticate(&ops_token).await.map_err(err)?;
    let until = "2099-01-01T00:00:00Z".parse().map_err(err)?;
    let mut made = Vec::new();
    for (name, role, access) in [
        ("coder", Role::Producer, Access::Write),
        ("ci", Role::Runner, Access::Write),
        ("rev", Role::Verifier, Access::Read),
    ] {
        let token = engine.add_principal(&ops, name, role).await.map_err(err)?;
        engine
            .grant(
                &ops,
                &format!("g-{name}"),
                name,
                ScopeKind::Mission,
                MISSION,
                access,
                &until,
            )
            .await
            .map_err(err)?;
        let p = engine.authenticate(&token).await.map_err(err)?;
        made.push((p, token));
    }
    let policy = json!({
        "schema": "verdict.policy/v1",
        "name": "merge",
        "revision": 1,
        "required_checks": ["unit-tests"],
        "required_verifiers": ["reviewer"],
    });
    engine.set_policy(&ops, &policy).await.map_err(err)?;
    let mut made = made.into_iter();
    let (Some((coder, coder_t)), Some((ci, ci_t)), Some((rev, _))) =
        (made.next(), made.next(), made.next())
    else {
        return Err("principals missing".into());
    };
    Ok(World {
        engine,
        ops,
        coder,
        ci,
        rev,
        tokens: Tokens {
            ops: ops_token,
            coder: coder_t,
            ci: ci_t,
        },
    })
}

/// A subject of `execution` in the bench's mission: `criteria` ids, each checked by the check
/// of the same index in `checks`; it pins [`OBJECTIVE`] and [`DIFF`].
fn subject(execution: &str, criteria: &[&str], checks: &[&str]) -> Value {
    let items: Vec<Value> = criteria
        .iter()
        .map(|c| json!({"id": c, "text": format!("{c} holds")}))
        .collect();
    let pinned: Vec<Value> = checks
        .iter()
        .zip(criteria)
        .map(|(k, c)| json!({"id": k, "definition_digest": DEF, "criteria": [c]}))
        .collect();
    json!({
        "schema": "verdict.subject/v1",
        "mission": MISSION,
        "execution": {"id": execution, "generation": 1},
        "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
        "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "obj-1", "digest": digest::raw(OBJECTIVE.as_bytes()).as_str()},
        "criteria": {"revision": "c-1", "items": items},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": digest::raw(DIFF.as_bytes()).as_str()}],
        "checks": pinned,
        "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "r-1", "capabilities": []}
    })
}

/// The runner's passing evidence `id` of `check` about `subject`; `n` makes its content unique.
fn evidence(subject: &Digest, check: &str, id: &str, n: u64) -> Value {
    json!({
        "id": id,
        "kind": "check",
        "check": check,
        "subject_digest": subject.as_str(),
        "definition_digest": DEF,
        "produced_by": {"principal": "ci", "role": "runner"},
        "outcome": "pass",
        "content_digest": digest::raw(&n.to_le_bytes()).as_str(),
        "observed_at": "2026-11-30T11:59:00Z",
        "freshness": {"kind": "content"}
    })
}

// ---------------------------------------------------------------------------------------------
// The server on loopback and its clients.

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Server {
    async fn start(state: AppState) -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(err)?;
        let addr = listener.local_addr().map_err(err)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = verdict_server::serve(listener, state, async move {
                let _ = stopped.await;
            })
            .await;
        });
        Ok(Self {
            base: format!("http://{addr}"),
            stop: Some(stop),
        })
    }
}

/// Sends one request and returns its status and body; any other status than `expect` fails.
async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: &str,
    body: Option<Vec<u8>>,
    expect: &[u16],
) -> Result<Value, String> {
    let mut req = client.request(method, url).bearer_auth(token);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    if !expect.contains(&status) {
        return Err(format!(
            "{url}: status {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{url}: {e}"))
}

fn to_bytes(v: &Value) -> Result<Vec<u8>, String> {
    serde_json::to_vec(v).map_err(err)
}

// ---------------------------------------------------------------------------------------------
// 1. Evidence appends, single.

/// How many rounds the sides alternate in.
const ROUNDS: u64 = 6;

/// The ways one evidence document is appended, from the whole API down to the store.
#[derive(Clone, Copy)]
enum Side {
    /// `POST /v1/evidence` over HTTP.
    Api,
    /// `Engine::authenticate` and `Engine::add_evidence`: what the route calls, without HTTP.
    EngineAuth,
    /// `Engine::add_evidence` alone, as an already authenticated principal.
    Engine,
    /// `Store::put`.
    Store,
}

const SIDES: [Side; 4] = [Side::Api, Side::EngineAuth, Side::Engine, Side::Store];

async fn evidence_appends(
    options: &Options,
    backend: &'static str,
    w: &World,
    server: &Server,
) -> Result<Vec<Row>, String> {
    let subject_digest = w
        .engine
        .put_subject(&w.coder, &subject("ev-1", &["tests-pass"], &["unit-tests"]))
        .await
        .map_err(err)?;
    let per_round = options.count(2000, ROUNDS) / ROUNDS;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/evidence", server.base);
    let store = w.engine.store().clone();
    let runner = Actor::new("ci", Role::Runner);
    let mut n = 0u64;
    let mut next = |count: u64| -> Vec<Value> {
        (0..count)
            .map(|_| {
                n += 1;
                evidence(&subject_digest, "unit-tests", &format!("ev-{n}"), n)
            })
            .collect()
    };
    // Appends `docs` one at a time, the `side` way; the HTTP bodies are built before the clock
    // starts, as the documents are: building them is the caller's work.
    let append = |side: Side, docs: Vec<Value>| {
        let (client, url, store, runner) = (&client, &url, &store, &runner);
        async move {
            let bodies: Vec<Vec<u8>> = match side {
                Side::Api => docs
                    .iter()
                    .map(|doc| to_bytes(&json!({"evidence": [doc]})))
                    .collect::<Result<_, _>>()?,
                _ => Vec::new(),
            };
            let trips = store.round_trips();
            let t = Instant::now();
            match side {
                Side::Api => {
                    for body in bodies {
                        let post = reqwest::Method::POST;
                        send(client, post, url, &w.tokens.ci, Some(body), &[201]).await?;
                    }
                }
                Side::EngineAuth => {
                    for doc in docs {
                        let ci = w.engine.authenticate(&w.tokens.ci).await.map_err(err)?;
                        w.engine.add_evidence(&ci, &[doc]).await.map_err(err)?;
                    }
                }
                Side::Engine => {
                    for doc in docs {
                        w.engine.add_evidence(&w.ci, &[doc]).await.map_err(err)?;
                    }
                }
                Side::Store => {
                    for doc in &docs {
                        store
                            .put(runner, DocKind::Evidence, doc)
                            .await
                            .map_err(err)?;
                    }
                }
            }
            let elapsed = t.elapsed();
            // The server, the engine and the store here all use this one store handle.
            Ok::<_, String>((elapsed, store.round_trips() - trips))
        }
    };
    // One untimed append each way: connections, statements and the route are warm.
    for side in SIDES {
        append(side, next(1)).await?;
    }
    let mut took = [Duration::ZERO; 4];
    let mut trips = [0u64; 4];
    let mut ratios = Vec::new();
    for r in 0..ROUNDS {
        // Each round starts with another side, so none always meets the disk first.
        let mut this = [Duration::ZERO; 4];
        for k in 0..SIDES.len() {
            let i = (k + r as usize) % SIDES.len();
            let (Some(side), Some(slot), Some(count)) =
                (SIDES.get(i), this.get_mut(i), trips.get_mut(i))
            else {
                continue;
            };
            let (elapsed, made) = append(*side, next(per_round)).await?;
            *slot = elapsed;
            *count += made;
        }
        let [api, _, _, raw] = this;
        ratios.push(raw.as_secs_f64() / api.as_secs_f64().max(1e-9));
        for (total, t) in took.iter_mut().zip(this) {
            *total += t;
        }
    }
    let ops = per_round * ROUNDS;
    let [api, engine_auth, engine, raw] = took;
    let per_op = |made: u64| Some(made as f64 / ops.max(1) as f64);
    let [api_trips, engine_auth_trips, engine_trips, raw_trips] = trips;
    let mut raw_row = Row::rate(
        backend,
        "store: `Store::put`, one evidence document per call".into(),
        ops,
        raw,
    );
    raw_row.round_trips = per_op(raw_trips);
    let mut rows = vec![raw_row.clone()];
    for (what, t, made) in [
        (
            "engine: `Engine::add_evidence`, one document per call",
            engine,
            engine_trips,
        ),
        (
            "engine: `Engine::authenticate` + `Engine::add_evidence`, one document per call",
            engine_auth,
            engine_auth_trips,
        ),
    ] {
        let mut row = Row::rate(backend, what.into(), ops, t);
        row.round_trips = per_op(made);
        row.ratio = Some(row.per_second / raw_row.per_second);
        row.target = Some("(× store; no target)".into());
        rows.push(row);
    }
    let mut api_row = Row::rate(
        backend,
        "API: one evidence document per `POST /v1/evidence`, 1 keep-alive client".into(),
        ops,
        api,
    );
    api_row.round_trips = per_op(api_trips);
    let ratio = api_row.per_second / raw_row.per_second;
    ratios.sort_by(f64::total_cmp);
    api_row.ratio = Some(ratio);
    api_row.target = Some(format!(
        "≥ 0.5 × store (rounds {:.2} to {:.2})",
        ratios.first().copied().unwrap_or(f64::NAN),
        ratios.last().copied().unwrap_or(f64::NAN)
    ));
    api_row.met = Some(ratio >= 0.5);
    rows.push(api_row);
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// 2. Gate runs from many clients.

/// A typical execution: three criteria, each with a check and its passing evidence, and a
/// reviewer's passing result citing them.
async fn typical(w: &World) -> Result<(), String> {
    let exec = "typical";
    let criteria = ["tests-pass", "lint-clean", "docs-built"];
    let checks = ["unit-tests", "lint", "docs"];
    let d = w
        .engine
        .put_subject(&w.coder, &subject(exec, &criteria, &checks))
        .await
        .map_err(err)?;
    let docs: Vec<Value> = checks
        .iter()
        .enumerate()
        .map(|(i, k)| evidence(&d, k, &format!("ev-{k}"), 1_000_000 + i as u64))
        .collect();
    w.engine.add_evidence(&w.ci, &docs).await.map_err(err)?;
    let req = w
        .engine
        .create_request(&w.coder, exec, &json!({}))
        .await
        .map_err(err)?;
    w.engine
        .admit(&w.ops, &req, "rev", "reviewer", "run-typical")
        .await
        .map_err(err)?;
    let rows: Vec<Value> = criteria
        .iter()
        .zip(checks)
        .map(|(c, k)| {
            json!({"id": c, "status": "passed", "method": "review", "evidence_refs": [format!("ev-{k}")]})
        })
        .collect();
    let result = json!({
        "id": "vr-typical",
        "verifier": {"principal": "rev", "class": "reviewer", "run": "run-typical"},
        "subject_digest": d.as_str(),
        "generation": 1,
        "status": "completed",
        "criteria": rows,
        "findings": [],
        "dispositions": []
    });
    w.engine.submit_result(&w.rev, &result).await.map_err(err)?;
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted.get(at).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// The latencies of `each` calls from each of `clients` concurrent tasks, all started together
/// after one untimed call each (whose decision must pass), and the wall time of all. `make`
/// makes each task's caller (an HTTP client of its own, say); a call returns the outcome.
async fn concurrently<M, C, Fut>(
    clients: usize,
    each: u64,
    make: M,
) -> Result<(Vec<Duration>, Duration), String>
where
    M: Fn() -> Result<C, String>,
    C: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    let start = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (call, start) = (make()?, start.clone());
        tasks.push(tokio::spawn(async move {
            let first = call().await;
            start.wait().await;
            let first = first?;
            if first != "pass" {
                return Err(format!("the typical execution does not pass: {first}"));
            }
            let mut took = Vec::new();
            for _ in 0..each {
                let t = Instant::now();
                call().await?;
                took.push(t.elapsed());
            }
            Ok::<_, String>(took)
        }));
    }
    start.wait().await;
    let t = Instant::now();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.map_err(err)??);
    }
    let elapsed = t.elapsed();
    all.sort();
    Ok((all, elapsed))
}

fn latency_row(backend: &'static str, what: String, all: &[Duration], elapsed: Duration) -> Row {
    let mut row = Row::rate(backend, what, all.len() as u64, elapsed);
    row.p50_ms = Some(percentile(all, 0.50));
    row.p99_ms = Some(percentile(all, 0.99));
    row
}

async fn gate_runs(
    options: &Options,
    backend: &'static str,
    w: &World,
    server: &Server,
) -> Result<Vec<Row>, String> {
    typical(w).await?;
    let clients = if options.smoke {
        4
    } else {
        options.clients.max(1)
    };
    let each = options.count(20, 2);
    // What the route calls, without HTTP: the engine's share of a gate run's latency.
    let direct = || {
        let (engine, token) = (w.engine.clone(), w.tokens.ops.clone());
        Ok(move || {
            let (engine, token) = (engine.clone(), token.clone());
            async move {
                let ops = engine.authenticate(&token).await.map_err(err)?;
                let run = engine.gate_run(&ops, "typical").await.map_err(err)?;
                Ok(run.decision.outcome.as_str().to_owned())
            }
        })
    };
    let (all, elapsed) = concurrently(clients, each, direct).await?;
    let engine_row = latency_row(
        backend,
        format!(
            "engine: `Engine::authenticate` + `Engine::gate_run`, typical execution, {clients} concurrent tasks"
        ),
        &all,
        elapsed,
    );
    // Over HTTP: each client on a connection of its own.
    let url = format!("{}/v1/executions/typical/gate-runs", server.base);
    let over_http = || {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .map_err(err)?;
        let (url, token) = (url.clone(), w.tokens.ops.clone());
        Ok(move || {
            let (client, url, token) = (client.clone(), url.clone(), token.clone());
            async move {
                let post = reqwest::Method::POST;
                let body = send(&client, post, &url, &token, None, &[200, 201]).await?;
                Ok(body
                    .pointer("/decision/outcome")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned())
            }
        })
    };
    let (all, elapsed) = concurrently(clients, each, over_http).await?;
    let mut api_row = latency_row(
        backend,
        format!(
            "API: `POST /v1/executions/{{id}}/gate-runs`, typical execution, {clients} concurrent clients"
        ),
        &all,
        elapsed,
    );
    if backend == "postgres" {
        let p99 = api_row.p99_ms.unwrap_or(f64::NAN);
        api_row.target = Some("p99 < 20 ms".into());
        api_row.met = Some(p99 < 20.0);
    }
    // The same runs while one more client appends evidence to another execution: every append
    // moves the audit chain, so no run can be answered from the engine's cache and each
    // evaluates (finding its decision stored, it still appends nothing).
    let busy = busy_execution(w).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let appended = Arc::new(AtomicU64::new(0));
    let appender = {
        let (client, url) = (
            reqwest::Client::new(),
            format!("{}/v1/evidence", server.base),
        );
        let (token, stop, appended) = (w.tokens.ci.clone(), stop.clone(), appended.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let doc = evidence(&busy, "unit-tests", &format!("ev-busy-{n}"), 9_000_000 + n);
                let body = to_bytes(&json!({"evidence": [doc]}))?;
                let post = reqwest::Method::POST;
                send(&client, post, &url, &token, Some(body), &[201]).await?;
                appended.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(())
        })
    };
    let before = appended.load(Ordering::Relaxed);
    let busy_run = concurrently(clients, each, over_http).await;
    let during = appended.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    appender.await.map_err(err)??;
    let (all, elapsed) = busy_run?;
    let busy_row = latency_row(
        backend,
        format!(
            "API: `POST /v1/executions/{{id}}/gate-runs`, typical execution, {clients} concurrent clients, while 1 client appends evidence to another execution ({during} appends meanwhile)"
        ),
        &all,
        elapsed,
    );
    Ok(vec![engine_row, api_row, busy_row])
}

/// Another execution of the bench's mission, with a subject whose evidence the busy client
/// appends.
async fn busy_execution(w: &World) -> Result<Digest, String> {
    w.engine
        .put_subject(&w.coder, &subject("busy", &["tests-pass"], &["unit-tests"]))
        .await
        .map_err(err)
}

// ---------------------------------------------------------------------------------------------
// 3. End to end, with an instant fake model.

/// An OpenAI-compatible chat completions server on loopback that answers at once: every
/// criterion passed, citing the diff, with the nonce of the request echoed.
struct FakeModel {
    url: String,
}

impl FakeModel {
    async fn start() -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(err)?;
        let url = format!("http://{}/v1", listener.local_addr().map_err(err)?);
        let app = axum::Router::new().fallback(answer);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { url })
    }

    fn classes(&self) -> Result<VerifiersFile, String> {
        let doc = json!({"version": 1, "classes": {"reviewer": {
            "provider": {"kind": "openai", "base_url": self.url, "model": "judge-model"},
            "cache": false,
            "budget": {"timeout_s": 30, "max_attempts": 2, "backoff_ms": 10}}}});
        VerifiersFile::parse(doc.to_string().as_bytes(), "verifiers").map_err(err)
    }
}

async fn answer(body: axum::body::Bytes) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let system = req
        .pointer("/messages/0/content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tag = "Rules for this request (nonce ";
    let nonce = system
        .find(tag)
        .and_then(|at| system.get(at + tag.len()..at + tag.len() + 32))
        .unwrap_or_default();
    let reply = json!({"nonce": nonce, "findings": [], "dispositions": [],
        "criteria": [{"id": "tests-pass", "status": "passed", "evidence_refs": ["diff"],
                      "rationale": "the diff retries once"}]});
    axum::Json(json!({
        "id": "c-1", "model": "judge-model", "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.to_string()}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
    .into_response()
}

struct Classes(VerifiersFile);

impl verdict_engine::ClassSource for Classes {
    fn resolve(&self, name: &str) -> Result<ResolvedClass, String> {
        self.0
            .class(name, std::path::Path::new("."))
            .map_err(|e| e.to_string())
    }
}

fn inputs() -> VerifyInputs {
    VerifyInputs {
        objective: OBJECTIVE.as_bytes().to_vec(),
        resources: vec![("diff".to_owned(), DIFF.as_bytes().to_vec())],
    }
}

/// The verifier worker's kit: the pinned bytes from memory, the fake model's class.
struct Verifier(Classes);

#[async_trait::async_trait]
impl VerifierKit for Verifier {
    async fn inputs(&self, _subject: &Subject) -> Result<VerifyInputs, String> {
        Ok(inputs())
    }
    fn classes(&self) -> &dyn verdict_engine::ClassSource {
        &self.0
    }
}

/// The runner worker's kit: the subject's one check, passed, at once (the engine files it).
struct Checks;

#[async_trait::async_trait]
impl ChecksKit for Checks {
    async fn run_checks(
        &self,
        _caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        Ok(ChecksRun {
            evidence: vec![passing(subject_digest)],
            outcome: "1 check".into(),
        })
    }
}

fn passing(subject_digest: &Digest) -> Value {
    static N: AtomicU64 = AtomicU64::new(2_000_000);
    let n = N.fetch_add(1, Ordering::Relaxed);
    evidence(subject_digest, "unit-tests", "ev-unit-tests", n)
}

fn e2e_subject(execution: &str) -> Value {
    subject(execution, &["tests-pass"], &["unit-tests"])
}

/// `n` executions from subject to a passing decision, called on the engine directly by
/// `concurrency` tasks: no HTTP, no queue.
async fn in_process(
    w: &World,
    fake: &FakeModel,
    n: u64,
    concurrency: usize,
    tag: &str,
) -> Result<Duration, String> {
    let classes = Arc::new(Classes(fake.classes()?));
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (engine, coder, ci, rev, ops) = (
            w.engine.clone(),
            w.coder.clone(),
            w.ci.clone(),
            w.rev.clone(),
            w.ops.clone(),
        );
        let (classes, next, tag) = (classes.clone(), next.clone(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(());
                }
                let exec = format!("{tag}-{i}");
                let d = engine
                    .put_subject(&coder, &e2e_subject(&exec))
                    .await
                    .map_err(err)?;
                let req = engine
                    .create_request(&coder, &exec, &json!({}))
                    .await
                    .map_err(err)?;
                engine
                    .add_evidence(&ci, &[passing(&d)])
                    .await
                    .map_err(err)?;
                engine
                    .verify_request(&rev, &req, &inputs(), &*classes, &VerifyOptions::default())
                    .await
                    .map_err(err)?;
                let run = engine.gate_run(&ops, &exec).await.map_err(err)?;
                if run.decision.outcome.as_str() != "pass" {
                    return Err(format!("{exec}: {:?}", run.decision));
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(err)??;
    }
    Ok(t.elapsed())
}

/// What the worker loops did, counted as they go.
#[derive(Default)]
struct Counts {
    claims: AtomicU64,
    idle: AtomicU64,
    signalled: AtomicU64,
    resumed: AtomicU64,
    timed_out: AtomicU64,
}

/// Executions each worker loop's share of the untimed warm-up holds (four loops per role take
/// four times as many).
const WARM_UP_PER_LOOP: u64 = 4;

/// Worker loops, `per_role` of each role, each on a store handle of its own (as each
/// `verdict worker` process has: on PostgreSQL its own pool and listening connection), until
/// stopped. An idle loop waits for a wake-up, at most `options.worker_wait` (or, with
/// `options.idle_sleep`, sleeps `options.poll`). A job that fails is recorded in `failures`.
struct Workers {
    stop: Arc<AtomicBool>,
    stopping: Arc<tokio::sync::Notify>,
    tasks: Vec<tokio::task::JoinHandle<Result<(), String>>>,
    failures: Arc<Mutex<Vec<String>>>,
    /// The counts each loop adds to, taken afresh at the top of every iteration, so that one
    /// iteration's claim, idle claim and wake-up are counted together.
    counts: Arc<Mutex<Arc<Counts>>>,
    /// Moved on when the counts are replaced; each loop says which one it last saw.
    epoch: Arc<AtomicU64>,
    seen: Arc<Vec<AtomicU64>>,
    nudge: Arc<tokio::sync::Notify>,
}

impl Workers {
    async fn start(
        backend: &Backend,
        w: &World,
        fake: &FakeModel,
        per_role: usize,
        options: &Options,
    ) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(tokio::sync::Notify::new());
        let failures = Arc::new(Mutex::new(Vec::new()));
        let counts = Arc::new(Mutex::new(Arc::new(Counts::default())));
        let epoch = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(
            (0..3 * per_role)
                .map(|_| AtomicU64::new(0))
                .collect::<Vec<_>>(),
        );
        let nudge = Arc::new(tokio::sync::Notify::new());
        let verifier: Arc<dyn VerifierKit> = Arc::new(Verifier(Classes(fake.classes()?)));
        let checks: Arc<dyn ChecksKit> = Arc::new(Checks);
        let (poll, wait, idle_sleep) = (options.poll, options.worker_wait, options.idle_sleep);
        let mut tasks = Vec::new();
        for k in 0..per_role {
            for (caller, role) in [
                (w.ci.clone(), WorkerRole::Runner),
                (w.rev.clone(), WorkerRole::Verifier),
                (w.ops.clone(), WorkerRole::Gate),
            ] {
                let engine = Engine::new(backend.open_sized(WORKER_CONNECTIONS).await?, "merge");
                let options = WorkOptions {
                    holder: format!("bench-{}-{k}", role.as_str()),
                    lease: Duration::from_secs(60),
                    verifier: Some(verifier.clone()),
                    checks: Some(checks.clone()),
                    back_off: DEFAULT_BACK_OFF,
                };
                let (stop, stopping, failures, slot) = (
                    stop.clone(),
                    stopping.clone(),
                    failures.clone(),
                    counts.clone(),
                );
                let (epoch, seen, nudge) = (epoch.clone(), seen.clone(), nudge.clone());
                let me = tasks.len();
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        let now = epoch.load(Ordering::SeqCst);
                        let counts = slot.lock().map_err(err)?.clone();
                        if let Some(s) = seen.get(me) {
                            s.store(now, Ordering::SeqCst);
                        }
                        counts.claims.fetch_add(1, Ordering::Relaxed);
                        match engine
                            .work_one(&caller, role, &options)
                            .await
                            .map_err(err)?
                        {
                            Worked::Idle => {
                                counts.idle.fetch_add(1, Ordering::Relaxed);
                                if idle_sleep {
                                    tokio::time::sleep(poll).await;
                                    continue;
                                }
                                let woke = tokio::select! {
                                    woke = engine.wait_for_jobs(&caller, role, wait) => woke.map_err(err)?,
                                    () = stopping.notified() => continue,
                                    () = nudge.notified() => continue,
                                };
                                let counter = match woke {
                                    Wakeup::Signalled => &counts.signalled,
                                    Wakeup::Resumed => &counts.resumed,
                                    Wakeup::TimedOut => &counts.timed_out,
                                };
                                counter.fetch_add(1, Ordering::Relaxed);
                            }
                            Worked::Done(_) => {}
                            Worked::Failed { job, why } => {
                                if let Ok(mut f) = failures.lock() {
                                    f.push(format!("job {} ({:?}): {why}", job.id, job.kind));
                                }
                            }
                            Worked::Lost { job } => {
                                if let Ok(mut f) = failures.lock() {
                                    f.push(format!("job {} lost its claim", job.id));
                                }
                            }
                        }
                    }
                    Ok(())
                }));
            }
        }
        Ok(Self {
            stop,
            stopping,
            tasks,
            failures,
            counts,
            epoch,
            seen,
            nudge,
        })
    }

    /// Counts again from nothing: new counts, then waits until every loop has begun an
    /// iteration on them (waking the idle ones), so no claim begun before is counted after.
    async fn recount(&self) -> Result<(), String> {
        *self.counts.lock().map_err(err)? = Arc::new(Counts::default());
        let now = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let t = Instant::now();
        while !self.seen.iter().all(|s| s.load(Ordering::SeqCst) >= now) {
            if t.elapsed() > Duration::from_secs(30) {
                return Err("the worker loops did not come round to the new counts".into());
            }
            self.nudge.notify_waiters();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// The counts so far, for `executions` executions on `backend` with `per_role` loops.
    fn claims(
        &self,
        backend: &'static str,
        per_role: usize,
        executions: u64,
        options: &Options,
    ) -> Claims {
        let c = self
            .counts
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        let claims = c.claims.load(Ordering::Relaxed);
        Claims {
            backend,
            workers: per_role,
            idle: if options.idle_sleep {
                format!("sleep {} ms", options.poll.as_millis())
            } else {
                "wake-ups".to_owned()
            },
            executions,
            claims,
            idle_claims: c.idle.load(Ordering::Relaxed),
            per_execution: claims as f64 / executions.max(1) as f64,
            signalled: c.signalled.load(Ordering::Relaxed),
            resumed: c.resumed.load(Ordering::Relaxed),
            timed_out: c.timed_out.load(Ordering::Relaxed),
        }
    }

    fn failure(&self) -> Option<String> {
        self.failures.lock().ok().and_then(|f| f.first().cloned())
    }

    async fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::SeqCst);
        self.stopping.notify_waiters();
        for task in self.tasks {
            task.await.map_err(err)??;
        }
        Ok(())
    }
}

/// `n` executions over the API: `concurrency` clients post each subject, then its request
/// with its jobs (one call, one transaction), all over HTTP, then wait for every decision, reading each execution's
/// status over HTTP, while the workers work.
async fn over_api(
    w: &World,
    server: &Server,
    workers: &Workers,
    n: u64,
    concurrency: usize,
    poll: Duration,
    tag: &str,
) -> Result<Duration, String> {
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (token, base) = (w.tokens.coder.clone(), server.base.clone());
        let (next, tag) = (next.clone(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(mine);
                }
                let exec = format!("{tag}-{i}");
                let body = to_bytes(&e2e_subject(&exec))?;
                let url = format!("{base}/v1/subjects");
                send(
                    &client,
                    reqwest::Method::POST,
                    &url,
                    &token,
                    Some(body),
                    &[201],
                )
                .await?;
                // The request and its jobs in one call, stored in one transaction.
                let body = to_bytes(&json!({"execution": exec, "jobs": {}}))?;
                let url = format!("{base}/v1/requests");
                let stored = send(
                    &client,
                    reqwest::Method::POST,
                    &url,
                    &token,
                    Some(body),
                    &[201],
                )
                .await?;
                let queued = stored.get("jobs").and_then(Value::as_array).map(Vec::len);
                if queued != Some(3) {
                    return Err(format!(
                        "{exec}: the request's jobs were not queued: {stored}"
                    ));
                }
                mine.push(exec);
            }
        }));
    }
    let mut pending = std::collections::VecDeque::new();
    for task in tasks {
        pending.extend(task.await.map_err(err)??);
    }
    let client = reqwest::Client::new();
    let mut last_progress = Instant::now();
    while let Some(exec) = pending.front() {
        let url = format!("{}/v1/executions/{exec}/status", server.base);
        let status = send(
            &client,
            reqwest::Method::GET,
            &url,
            &w.tokens.coder,
            None,
            &[200],
        )
        .await?;
        let decision = status
            .get("applicable")
            .filter(|v| !v.is_null())
            .or_else(|| status.get("latest").filter(|v| !v.is_null()));
        if let Some(d) = decision {
            if d.pointer("/decision/outcome") != Some(&json!("pass")) {
                return Err(format!("{exec}: {d}"));
            }
            pending.pop_front();
            last_progress = Instant::now();
            continue;
        }
        if let Some(f) = workers.failure() {
            return Err(format!("a worker failed: {f}"));
        }
        if last_progress.elapsed() > Duration::from_secs(120) {
            return Err(format!("no decision for {exec} in two minutes"));
        }
        tokio::time::sleep(poll).await;
    }
    Ok(t.elapsed())
}

async fn end_to_end(
    options: &Options,
    backend: &Backend,
    w: &World,
    server: &Server,
    fake: &FakeModel,
    workers: usize,
    round: usize,
) -> Result<(Vec<Row>, Claims), String> {
    let n = options
        .executions
        .filter(|_| !options.smoke)
        .unwrap_or_else(|| options.count(40, 2));
    let name = backend.name();
    let direct = in_process(w, fake, n, workers, &format!("d{round}")).await?;
    let pool = Workers::start(backend, w, fake, workers, options).await?;
    // Untimed first: each loop's connections prepare the routines' statements and the
    // database compiles their functions once per connection, which a long-running worker
    // has long done; the claims are counted from the timed executions on.
    let warm = over_api(
        w,
        server,
        &pool,
        options.count(WARM_UP_PER_LOOP, 1) * workers as u64,
        workers,
        options.poll,
        &format!("w{round}"),
    )
    .await;
    if let Err(e) = warm {
        pool.stop().await?;
        return Err(e);
    }
    if let Err(e) = pool.recount().await {
        pool.stop().await?;
        return Err(e);
    }
    let api = over_api(
        w,
        server,
        &pool,
        n,
        workers,
        options.poll,
        &format!("a{round}"),
    )
    .await;
    // Counted when the last decision was read, before the loops are told to stop.
    let claims = pool.claims(name, workers, n, options);
    pool.stop().await?;
    let api = api?;
    let direct_row = Row::rate(
        name,
        format!("end to end, in process: engine calls, no HTTP, no queue, {workers} task(s)"),
        n,
        direct,
    );
    let mut api_row = Row::rate(
        name,
        format!(
            "end to end, API + workers: {workers} worker loop(s) per role, {workers} client(s)"
        ),
        n,
        api,
    );
    let ratio = api_row.per_second / direct_row.per_second;
    api_row.ratio = Some(ratio);
    api_row.target = Some("≥ 0.5 × in process".into());
    api_row.met = Some(ratio >= 0.5);
    Ok((vec![direct_row, api_row], claims))
}
