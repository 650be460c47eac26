//! Benchmark and load driver for verdict-store.
//!
//! `verdict-store-bench run [--sqlite-dir DIR] [--postgres ADMIN_URL] [--scale F]` measures
//! durable appends per second (evidence plus audit event, fsync on) against the raw ceiling of
//! the same database in the same run: single-row INSERTs of the same bytes with the same
//! durability. Single appends and their ceiling alternate in rounds, so both meet the same
//! disk. On PostgreSQL the writer is a registered runner with a write grant on the subject's
//! execution, appending through its own database identity, so the routine's identity and grant
//! checks are part of what is measured. It prints a Markdown table. `--only sqlite` or
//! `--only postgres` runs one
//! backend; `--only sqlite-batched` runs just SQLite's batched appends (for profiling).
//!
//! `--only postgres-bodies` measures what the write routines' checks of a body (schema version
//! 7: canonical form, key, size and audit field bounds) cost per append: the same routine calls
//! (`put_one_check_evidence`, one durable commit each, and `put_check_evidence`, 1000 records
//! per commit) on a database at the version before and one at the current version, in
//! alternating rounds of one run.
//!
//! `verdict-store-bench load --store URL --count N [--batch B]` appends N synthetic check
//! evidence documents in batches of B, printing `committed K` after each commit; the crash test
//! kills it mid-way.

use serde_json::{Value, json};
use sqlx::{Connection as _, Executor as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verdict_core::contracts::Role;
use verdict_core::digest;
use verdict_store::{Actor, DocKind, Location, OpenOptions, Store};

const USAGE: &str = "usage:
  verdict-store-bench run [--sqlite-dir DIR] [--postgres ADMIN_URL]
      [--only sqlite|sqlite-batched|postgres|postgres-bodies] [--scale F]
  verdict-store-bench load --store URL --count N [--batch B]";

const RUNNER: &str = "bench-runner";

/// The execution the bench's evidence is about.
const EXECUTION: &str = "bench-ex";

/// The one subject the bench's evidence is about (stored by [`register_writer`]).
fn bench_subject() -> Value {
    json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": EXECUTION, "generation": 1},
        "work_items": [{"kind": "work_package", "id": "wp-bench", "version": "1"}],
        "producer": {"principal": "bench-producer", "run": "bench-run"},
        "objective": {"revision": "obj-1", "digest": digest::raw(b"bench-objective").as_str()},
        "criteria": {"revision": "crit-1", "items": [
            {"id": "tests-pass", "text": "All unit tests pass", "required": true}
        ]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": digest::raw(b"bench-diff").as_str()}],
        "checks": [{"id": "unit-tests", "definition_digest": digest::raw(b"bench-definition").as_str(),
            "criteria": ["tests-pass"]}],
        "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "risk-1", "capabilities": []}
    })
}

/// The i-th synthetic evidence document (about the one bench subject).
fn evidence(i: u64) -> Value {
    json!({
        "id": format!("ev-{i}"),
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": digest::digest(digest::DigestKind::Subject, &bench_subject()).as_str(),
        "definition_digest": digest::raw(b"bench-definition").as_str(),
        "produced_by": {"principal": RUNNER, "role": "runner"},
        "outcome": "pass",
        "hard": true,
        "content_digest": digest::raw(&i.to_le_bytes()).as_str(),
        "observed_at": "2026-11-30T11:50:00Z",
        "freshness": {"kind": "content"}
    })
}

fn runner() -> Actor {
    Actor::new(RUNNER, Role::Runner)
}

/// Makes the bench's writer a real runner: a registered principal holding a write grant on the
/// execution of a stored subject. On PostgreSQL its appends then run in its own database
/// identity (`SET ROLE`), so every check a runner's append meets (the identity, its grant at
/// the database's clock, the body's) is measured, not skipped as for a superuser with no role
/// set. The operator and producer here are never registered: the setup runs as the bench's
/// own (superuser) login.
async fn register_writer(store: &Arc<dyn Store>) -> Result<(), String> {
    use verdict_store::{Access, GrantRecord, GrantScope, PrincipalRecord, ScopeKind};
    let op = Actor::new("bench-operator", Role::Operator);
    let parse = |what: &str, e: String| format!("bench setup: {what}: {e}");
    store
        .put(
            &Actor::new("bench-producer", Role::Producer),
            DocKind::Subject,
            &bench_subject(),
        )
        .await
        .map_err(|e| parse("subject", e.to_string()))?;
    let record = PrincipalRecord {
        name: RUNNER
            .parse()
            .map_err(|e| parse("runner", format!("{e}")))?,
        role: Role::Runner,
        token_sha256: verdict_store::token_sha256("bench-runner-token"),
    };
    store
        .add_principal(&op, &record)
        .await
        .map_err(|e| parse("runner", e.to_string()))?;
    let grant = GrantRecord {
        grant_id: "g-bench-runner"
            .parse()
            .map_err(|e| parse("grant", format!("{e}")))?,
        principal: record.name.clone(),
        scope: GrantScope {
            kind: ScopeKind::Execution,
            id: EXECUTION
                .parse()
                .map_err(|e| parse("grant", format!("{e}")))?,
        },
        access: Access::Write,
        expires_at: "2099-12-31T00:00:00Z"
            .parse()
            .map_err(|e| parse("grant", format!("{e}")))?,
    };
    store
        .add_grant(&op, &grant)
        .await
        .map_err(|e| parse("grant", e.to_string()))?;
    Ok(())
}

struct Args(Vec<String>);

impl Args {
    fn value(&self, flag: &str) -> Option<&str> {
        self.0
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.0.get(i + 1))
            .map(String::as_str)
    }
    fn number<T: std::str::FromStr>(&self, flag: &str, default: T) -> Result<T, String> {
        self.value(flag).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("{flag} {v:?} is not a number"))
        })
    }
}

fn main() -> ExitCode {
    let args = Args(std::env::args().skip(1).collect());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("verdict-store-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match args.0.first().map(String::as_str) {
        Some("load") => runtime.block_on(load(&args)),
        Some("run") => runtime.block_on(run(&args)),
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("verdict-store-bench: {e}");
            ExitCode::from(2)
        }
    }
}

async fn load(args: &Args) -> Result<(), String> {
    let url = args.value("--store").ok_or(USAGE)?;
    let count: u64 = args.number("--count", 1000)?;
    let batch: u64 = args.number("--batch", 1)?;
    let store = verdict_store::open(&Location::parse(url).map_err(|e| e.to_string())?)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = std::io::stdout();
    let mut i = 0;
    while i < count {
        let end = (i + batch.max(1)).min(count);
        let docs: Vec<(DocKind, Value)> =
            (i..end).map(|n| (DocKind::Evidence, evidence(n))).collect();
        store
            .put_batch(&runner(), &docs)
            .await
            .map_err(|e| e.to_string())?;
        i = end;
        writeln!(out, "committed {i}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One measured rate.
struct Rate {
    what: String,
    ops: u64,
    elapsed: Duration,
}

impl Rate {
    fn per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn scaled(base: u64, scale: f64) -> u64 {
    ((base as f64 * scale) as u64).max(10)
}

async fn run(args: &Args) -> Result<(), String> {
    let scale: f64 = args.number("--scale", 1.0)?;
    let only = args.value("--only");
    if only
        .is_some_and(|o| !["sqlite", "sqlite-batched", "postgres", "postgres-bodies"].contains(&o))
    {
        return Err(USAGE.to_owned());
    }
    if only == Some("postgres-bodies") {
        let admin = args.value("--postgres").ok_or(USAGE)?;
        let lines = bench_bodies(admin, scale).await?;
        println!(
            "| routine | schema | appends | seconds | per second | after / before | µs per append, after − before |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|");
        for line in lines {
            println!("{line}");
        }
        return Ok(());
    }
    let mut lines = Vec::new();
    let body_len = verdict_core::canonical::to_vec(&evidence(0)).len();
    if only.is_none_or(|o| o.starts_with("sqlite")) {
        let dir = args.value("--sqlite-dir").map_or_else(
            || std::env::temp_dir().join(format!("verdict-bench-{}", std::process::id())),
            PathBuf::from,
        );
        let result = bench_sqlite(&dir, scale, only == Some("sqlite-batched")).await;
        let _ = std::fs::remove_dir_all(&dir);
        lines.extend(result?);
    }
    if let Some(admin) = args
        .value("--postgres")
        .filter(|_| only.is_none_or(|o| o == "postgres"))
    {
        lines.extend(bench_postgres(admin, scale).await?);
    }
    println!("Evidence body: {body_len} bytes of canonical JSON; every commit durable (fsync).\n");
    println!("| measurement | operations | seconds | per second | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

fn row(rate: &Rate, ratio: Option<(f64, &str)>) -> String {
    let (r, target) = ratio.map_or((String::new(), String::new()), |(r, t)| {
        (format!("{r:.2}"), t.to_owned())
    });
    format!(
        "| {} | {} | {:.2} | {:.0} | {r} | {target} |",
        rate.what,
        rate.ops,
        rate.elapsed.as_secs_f64(),
        rate.per_sec()
    )
}

/// Single appends one after another, from a task on the runtime's workers like each client of
/// the raw ceiling: awaited on the thread that blocks on the runtime instead, every round trip
/// would also wait for a worker to hand the reply over to that thread. The documents are built
/// before the clock starts, as the raw ceiling's body is: building them is the caller's work.
async fn store_single(
    store: &Arc<dyn Store>,
    what: &str,
    docs: Vec<Value>,
) -> Result<Rate, String> {
    let store = Arc::clone(store);
    let ops = docs.len() as u64;
    let elapsed = tokio::spawn(async move {
        let t = Instant::now();
        for doc in &docs {
            store
                .put(&runner(), DocKind::Evidence, doc)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(t.elapsed())
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(Rate {
        what: what.to_owned(),
        ops,
        elapsed,
    })
}

/// How many rounds the single appends and their raw ceiling alternate in.
const ROUNDS: u64 = 6;

/// Single appends against the raw single-row ceiling, measured in alternating rounds (the raw
/// inserts first in every other round), so both meet the same disk and the same neighbours: the
/// disk's commit time drifts by a factor of two within minutes on a shared machine, and a ratio
/// of two runs minutes apart measures that drift as much as the store. Returns both totals and
/// the ratio of each round.
async fn paired_single<F, Fut>(
    store: &Arc<dyn Store>,
    what: &str,
    n: u64,
    mut raw: F,
) -> Result<(Rate, Rate, Vec<f64>), String>
where
    F: FnMut(u64, u64) -> Fut,
    Fut: std::future::Future<Output = Result<Rate, String>>,
{
    let per_round = (n / ROUNDS).max(1);
    let mut raw_total: Option<Rate> = None;
    let mut store_total: Option<Rate> = None;
    let mut ratios = Vec::new();
    for r in 0..ROUNDS {
        let docs: Vec<Value> = (r * per_round..(r + 1) * per_round).map(evidence).collect();
        let (raw_rate, store_rate) = if r % 2 == 0 {
            let raw_rate = raw(r, per_round).await?;
            (raw_rate, store_single(store, what, docs).await?)
        } else {
            let store_rate = store_single(store, what, docs).await?;
            (raw(r, per_round).await?, store_rate)
        };
        ratios.push(store_rate.per_sec() / raw_rate.per_sec());
        raw_total = Some(add(raw_total, raw_rate));
        store_total = Some(add(store_total, store_rate));
    }
    match (raw_total, store_total) {
        (Some(raw), Some(single)) => Ok((raw, single, ratios)),
        _ => Err("no rounds were run".into()),
    }
}

fn add(total: Option<Rate>, rate: Rate) -> Rate {
    match total {
        None => rate,
        Some(t) => Rate {
            what: t.what,
            ops: t.ops + rate.ops,
            elapsed: t.elapsed + rate.elapsed,
        },
    }
}

/// The ratio of the totals, then the range and median of the rounds' own ratios.
fn paired_row(raw: &Rate, single: &Rate, ratios: &[f64], target: &str) -> String {
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted.get(n / 2).copied().unwrap_or(f64::NAN),
        n => {
            let (a, b) = (sorted.get(n / 2 - 1), sorted.get(n / 2));
            a.zip(b).map_or(f64::NAN, |(a, b)| (a + b) / 2.0)
        }
    };
    let (lo, hi) = (
        sorted.first().copied().unwrap_or(f64::NAN),
        sorted.last().copied().unwrap_or(f64::NAN),
    );
    row(
        single,
        Some((
            single.per_sec() / raw.per_sec(),
            &format!("{target} (rounds: {lo:.2} to {hi:.2}, median {median:.2})"),
        )),
    )
}

async fn store_batched(
    store: &Arc<dyn Store>,
    what: &str,
    start: u64,
    n: u64,
    batch: u64,
) -> Result<Rate, String> {
    let docs: Vec<Vec<(DocKind, Value)>> = (0..n / batch)
        .map(|b| {
            (start + b * batch..start + (b + 1) * batch)
                .map(|i| (DocKind::Evidence, evidence(i)))
                .collect()
        })
        .collect();
    let t = Instant::now();
    for chunk in &docs {
        store
            .put_batch(&runner(), chunk)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(Rate {
        what: what.to_owned(),
        ops: n / batch * batch,
        elapsed: t.elapsed(),
    })
}

async fn bench_sqlite(dir: &Path, scale: f64, batched_only: bool) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    if batched_only {
        let store = verdict_store::open(&Location::Sqlite(dir.join("store.db")))
            .await
            .map_err(|e| e.to_string())?;
        let batched = store_batched(
            &store,
            "SQLite store, batched appends (1000 per commit)",
            1_000_000,
            scaled(50_000, scale),
            1000,
        )
        .await?;
        check_intact(&store, "sqlite").await?;
        return Ok(vec![row(
            &batched,
            Some((batched.per_sec() / 20_000.0, "≥ 20,000/s")),
        )]);
    }
    let body = String::from_utf8(verdict_core::canonical::to_vec(&evidence(0)))
        .map_err(|e| e.to_string())?;
    let n_single = scaled(3000, scale);
    let store = verdict_store::open(&Location::Sqlite(dir.join("store.db")))
        .await
        .map_err(|e| e.to_string())?;
    let (raw, single, ratios) =
        paired_single(&store, "SQLite store, single appends", n_single, |r, n| {
            raw_sqlite_task(dir.join(format!("raw-{r}.db")), body.clone(), n)
        })
        .await?;
    let batched = store_batched(
        &store,
        "SQLite store, batched appends (1000 per commit)",
        1_000_000,
        scaled(50_000, scale),
        1000,
    )
    .await?;
    check_intact(&store, "sqlite").await?;
    Ok(vec![
        row(&raw, None),
        paired_row(&raw, &single, &ratios, "≥ 0.5 × raw"),
        row(&batched, Some((batched.per_sec() / 20_000.0, "≥ 20,000/s"))),
    ])
}

async fn check_intact(store: &Arc<dyn Store>, backend: &str) -> Result<(), String> {
    let report = store.verify_audit(None).await.map_err(|e| e.to_string())?;
    if report.is_intact() {
        Ok(())
    } else {
        Err(format!(
            "{backend} audit chain broken: {:?}",
            report.problems.first()
        ))
    }
}

fn better(a: Rate, b: Rate) -> Rate {
    if a.per_sec() >= b.per_sec() { a } else { b }
}

async fn raw_sqlite_task(path: PathBuf, body: String, n: u64) -> Result<Rate, String> {
    tokio::task::spawn_blocking(move || raw_sqlite(&path, &body, n))
        .await
        .map_err(|e| e.to_string())?
}

fn raw_sqlite(path: &Path, body: &str, n: u64) -> Result<Rate, String> {
    let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| e.to_string())?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| e.to_string())?;
    // The store's own WAL checkpoint interval, so both sides are tuned alike.
    conn.pragma_update(None, "wal_autocheckpoint", 16_384)
        .map_err(|e| e.to_string())?;
    conn.execute_batch(
        "CREATE TABLE raw (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body TEXT NOT NULL)",
    )
    .map_err(|e| e.to_string())?;
    let mut stmt = conn
        .prepare("INSERT INTO raw (key, body) VALUES (?1, ?2)")
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    for i in 0..n {
        stmt.execute(rusqlite::params![format!("k{i}"), body])
            .map_err(|e| e.to_string())?;
    }
    Ok(Rate {
        what: "SQLite raw ceiling: single-row INSERT, WAL, synchronous=FULL".into(),
        ops: n,
        elapsed: t.elapsed(),
    })
}

async fn raw_pg(url: &str, body: &str, clients: u64, per_client: u64) -> Result<Rate, String> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tasks = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(
            sqlx::PgConnection::connect(url)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let t = Instant::now();
    for (c, mut conn) in conns.into_iter().enumerate() {
        let body = body.to_owned();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                sqlx::query("INSERT INTO raw (key, body) VALUES ($1, $2)")
                    .bind(format!("c{c}-{i}-{run}"))
                    .bind(&body)
                    .execute(&mut conn)
                    .await?;
            }
            Ok::<_, sqlx::Error>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    }
    Ok(Rate {
        what: format!("PostgreSQL raw ceiling: single-row INSERT, {clients} client(s)"),
        ops: clients * per_client,
        elapsed: t.elapsed(),
    })
}

async fn bench_postgres(admin: &str, scale: f64) -> Result<Vec<String>, String> {
    let db = format!("verdict_bench_{}", std::process::id());
    let prefix = format!("vbench{}_", std::process::id());
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .map_err(|e| e.to_string())?;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{db}\""
    ))))
    .await
    .map_err(|e| e.to_string())?;
    let url = match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{db}"),
        None => return Err("--postgres needs a URL ending in /DATABASE".into()),
    };
    let result = bench_postgres_in(&url, &prefix, scale).await;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
    ))))
    .await
    .map_err(|e| e.to_string())?;
    for role in verdict_store::role_names(&prefix) {
        let _ = conn
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP ROLE IF EXISTS \"{role}\""
            ))))
            .await;
    }
    result
}

async fn bench_postgres_in(url: &str, prefix: &str, scale: f64) -> Result<Vec<String>, String> {
    let body = String::from_utf8(verdict_core::canonical::to_vec(&evidence(0)))
        .map_err(|e| e.to_string())?;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    conn.execute(
        "CREATE TABLE raw (id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, body text NOT NULL)",
    )
    .await
    .map_err(|e| e.to_string())?;
    let n_single = scaled(2000, scale);
    let n_eight = scaled(1000, scale);
    let options = OpenOptions {
        role_prefix: Some(prefix.to_owned()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&Location::Postgres(url.to_owned()), &options)
        .await
        .map_err(|e| e.to_string())?;
    register_writer(&store).await?;
    let (raw1, single, ratios) = paired_single(
        &store,
        "PostgreSQL store, single appends",
        n_single,
        |_, n| raw_pg(url, &body, 1, n),
    )
    .await?;
    // The eight-client ceiling is measured before and after the batches and the better run
    // counts, so a noisy neighbour cannot flatter that ratio.
    let raw8_before = raw_pg(url, &body, 8, n_eight).await?;
    let batched = store_batched(
        &store,
        "PostgreSQL store, batched appends (1000 per commit)",
        1_000_000,
        scaled(20_000, scale),
        1000,
    )
    .await?;
    let raw8 = better(raw8_before, raw_pg(url, &body, 8, n_eight).await?);
    check_intact(&store, "postgres").await?;
    Ok(vec![
        row(&raw1, None),
        row(&raw8, None),
        paired_row(&raw1, &single, &ratios, "≥ 0.5 × raw, 1 client"),
        row(
            &batched,
            Some((batched.per_sec() / raw8.per_sec(), "≥ 0.5 × raw, 8 clients")),
        ),
    ])
}

/// The migration that makes the write routines check bodies: "before" is the schema without it.
const BODIES_MIGRATION: &str = "bodies_checked_by_the_database";

/// A PostgreSQL migration's SQL with its role placeholders filled in for `prefix` (as the store
/// fills them when it migrates).
fn filled(sql: &str, prefix: &str) -> String {
    let mut out = sql.replace("__PREFIX_LITERAL__", &format!("'{prefix}'"));
    out = out.replace("__OWNER__", &format!("\"{prefix}owner\""));
    for role in verdict_store::ActorRole::ALL {
        out = out.replace(
            &format!("__{}__", role.as_str().to_uppercase()),
            &format!("\"{prefix}{}\"", role.as_str()),
        );
    }
    out
}

/// Calls of the evidence routines by hand, as the runner role, on one database.
struct Routine {
    conn: sqlx::PgConnection,
}

impl Routine {
    fn record(i: u64) -> Result<(String, String), String> {
        let body = String::from_utf8(verdict_core::canonical::to_vec(&evidence(i)))
            .map_err(|e| e.to_string())?;
        let digest = verdict_store::records::row_digest("evidence", body.as_bytes()).to_string();
        Ok((digest, body))
    }

    /// `n` single appends from `start`, one durable commit each.
    async fn single(&mut self, start: u64, n: u64) -> Result<Duration, String> {
        let records: Vec<(String, String)> = (start..start + n)
            .map(Self::record)
            .collect::<Result<_, _>>()?;
        let t = Instant::now();
        for (digest, body) in &records {
            sqlx::query(
                "SELECT r_seq FROM verdict.put_one_check_evidence($1, 'runner', $2, $2, $3, NULL)",
            )
            .bind(RUNNER)
            .bind(digest)
            .bind(body)
            .fetch_all(&mut self.conn)
            .await
            .map_err(|e| e.to_string())?;
        }
        Ok(t.elapsed())
    }

    /// `n` appends from `start` in calls of 1000 records, one commit each.
    async fn batched(&mut self, start: u64, n: u64) -> Result<Duration, String> {
        let mut calls = Vec::new();
        for b in 0..n / 1000 {
            let records: Vec<(String, String)> = (start + b * 1000..start + (b + 1) * 1000)
                .map(Self::record)
                .collect::<Result<_, _>>()?;
            calls.push(records);
        }
        let t = Instant::now();
        for records in &calls {
            let mut tx = self.conn.begin().await.map_err(|e| e.to_string())?;
            sqlx::query(
                "SELECT r_seq FROM verdict.put_check_evidence($1, 'runner', $2, $2, $3, $4)",
            )
            .bind(RUNNER)
            .bind(records.iter().map(|r| r.0.as_str()).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.1.as_str()).collect::<Vec<_>>())
            .bind(vec![None::<String>; records.len()])
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| e.to_string())?;
            tx.commit().await.map_err(|e| e.to_string())?;
        }
        Ok(t.elapsed())
    }
}

async fn bench_bodies(admin: &str, scale: f64) -> Result<Vec<String>, String> {
    let pid = std::process::id();
    let prefix = format!("vbench{pid}_");
    let dbs = [
        format!("verdict_bench_{pid}_before"),
        format!("verdict_bench_{pid}_after"),
    ];
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .map_err(|e| e.to_string())?;
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .ok_or("--postgres needs a URL ending in /DATABASE")?;
    for db in &dbs {
        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{db}\""
        ))))
        .await
        .map_err(|e| e.to_string())?;
    }
    let result = bench_bodies_in(
        &format!("{base}/{}", dbs[0]),
        &format!("{base}/{}", dbs[1]),
        &prefix,
        scale,
    )
    .await;
    for db in &dbs {
        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
        ))))
        .await
        .map_err(|e| e.to_string())?;
    }
    for role in verdict_store::role_names(&prefix) {
        let _ = conn
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP ROLE IF EXISTS \"{role}\""
            ))))
            .await;
    }
    result
}

async fn bench_bodies_in(
    before: &str,
    after: &str,
    prefix: &str,
    scale: f64,
) -> Result<Vec<String>, String> {
    // The current schema (which also creates the roles), then the one before the checks.
    verdict_store::migrate(&Location::Postgres(after.to_owned()), Some(prefix))
        .await
        .map_err(|e| e.to_string())?;
    let checked = verdict_store::migrations::POSTGRES
        .iter()
        .find(|m| m.name == BODIES_MIGRATION)
        .map(|m| m.version)
        .ok_or("no migration checks bodies")?;
    let mut old = Routine {
        conn: sqlx::PgConnection::connect(before)
            .await
            .map_err(|e| e.to_string())?,
    };
    for m in verdict_store::migrations::POSTGRES
        .iter()
        .filter(|m| m.version < checked)
    {
        let sql = format!(
            "BEGIN; {} INSERT INTO verdict.schema_migrations (version, name) VALUES ({}, '{}'); COMMIT;",
            filled(m.sql, prefix),
            m.version,
            m.name
        );
        old.conn
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
            .await
            .map_err(|e| e.to_string())?;
    }
    let new = Routine {
        conn: sqlx::PgConnection::connect(after)
            .await
            .map_err(|e| e.to_string())?,
    };
    let n_single = scaled(3000, scale);
    let n_batched = scaled(30_000, scale).max(1000) / 1000 * 1000;
    // Each schema's routine and what its single and batched appends took.
    let mut sides = [
        (old, Duration::ZERO, Duration::ZERO),
        (new, Duration::ZERO, Duration::ZERO),
    ];
    let (per_single, per_batched) = (
        (n_single / ROUNDS).max(1),
        (n_batched / ROUNDS / 1000).max(1) * 1000,
    );
    for r in 0..ROUNDS {
        // Each round, the other schema goes first.
        let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let Some((routine, single, batched)) = sides.get_mut(which) else {
                continue;
            };
            *single += routine.single(r * per_single, per_single).await?;
            *batched += routine
                .batched(1_000_000 + r * per_batched, per_batched)
                .await?;
        }
    }
    let [(_, single_old, batched_old), (_, single_new, batched_new)] = sides;
    let (single, batched) = ([single_old, single_new], [batched_old, batched_new]);
    let line = |routine: &str, ops: u64, times: [Duration; 2]| -> Vec<String> {
        let rate = |d: Duration| ops as f64 / d.as_secs_f64().max(1e-9);
        let micros = |d: Duration| d.as_secs_f64() * 1e6 / ops as f64;
        vec![
            format!(
                "| {routine} | {} (before) | {ops} | {:.2} | {:.0} | | |",
                checked - 1,
                times[0].as_secs_f64(),
                rate(times[0])
            ),
            format!(
                "| {routine} | {checked} (after) | {ops} | {:.2} | {:.0} | {:.2} | {:.1} |",
                times[1].as_secs_f64(),
                rate(times[1]),
                rate(times[1]) / rate(times[0]),
                micros(times[1]) - micros(times[0])
            ),
        ]
    };
    let mut lines = line(
        "put_one_check_evidence, one durable commit each",
        per_single * ROUNDS,
        single,
    );
    lines.extend(line(
        "put_check_evidence, 1000 per commit",
        per_batched * ROUNDS,
        batched,
    ));
    Ok(lines)
}
