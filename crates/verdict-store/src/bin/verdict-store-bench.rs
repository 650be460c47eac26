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
//! `--only postgres-checks` breaks a single append down by check: in a scratch database, each
//! top-level check of `put_one_check_evidence` (and, batched, of `put_check_evidence`) is
//! removed in turn from a copy of the routine made from its own definition, and each copy is
//! called in the server against the whole routine in paired, alternating rounds; it prints
//! each check's microseconds and share of an append (the median of the rounds, with their
//! spread), and what the previous schema version's routine costs more.
//!
//! `--only postgres-breakdown` shows where a single append's time goes: the raw INSERT, the bare
//! routine call over one connection, and `Store::put` end to end, each also without waiting for
//! the WAL flush, in alternating rounds of one run; the WAL each writes, the store's round trips,
//! the server's time in each function the routine calls, and the client's preparation alone.
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
      [--only sqlite|sqlite-batched|postgres|postgres-bodies|postgres-checks|postgres-breakdown]
      [--scale F]
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
    if only.is_some_and(|o| {
        ![
            "sqlite",
            "sqlite-batched",
            "postgres",
            "postgres-bodies",
            "postgres-checks",
            "postgres-breakdown",
        ]
        .contains(&o)
    }) {
        return Err(USAGE.to_owned());
    }
    if only == Some("postgres-checks") {
        let admin = args.value("--postgres").ok_or(USAGE)?;
        let lines = bench_checks(admin, scale).await?;
        println!(
            "Microseconds per append by the server's clock, calls in one transaction (no commit), \
             median of paired rounds against the whole routine.\n"
        );
        println!(
            "| routine | check removed | µs per append | % of the append | rounds' range | rounds |"
        );
        println!("|---|---|---:|---:|---|---:|");
        for line in lines {
            println!("{line}");
        }
        return Ok(());
    }
    if only == Some("postgres-breakdown") {
        let admin = args.value("--postgres").ok_or(USAGE)?;
        for line in bench_breakdown(admin, scale).await? {
            println!("{line}");
        }
        return Ok(());
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
    // Every role of the prefix but the owner (done above): the actor roles, then the service
    // and engine roles, as `role_names` lists them.
    for name in verdict_store::role_names(prefix).iter().skip(1) {
        let suffix = name.strip_prefix(prefix).unwrap_or(name);
        out = out.replace(
            &format!("__{}__", suffix.to_uppercase()),
            &format!("\"{name}\""),
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

/// A routine `--only postgres-checks` breaks down: the single-append routine of check evidence
/// or, in the batched flavour, the routine for records in arrays.
struct Flavour {
    /// Its name in the report and in the variants' names.
    name: &'static str,
    /// The routine, in schema `verdict`.
    routine: &'static str,
    /// Its argument types, as `regprocedure` reads them.
    args: &'static str,
    /// Appends per measurement: calls of the single routine, or records in one batched call.
    per_measure: u64,
    /// How the timing function calls a variant `{v}` with the measurement's records in
    /// `p_bodies` and `p_digests` (both keys and digests), as the runner.
    call: &'static str,
}

const FLAVOURS: [Flavour; 2] = [
    Flavour {
        name: "single",
        routine: "put_one_check_evidence",
        args: "text, text, text, text, text, text",
        per_measure: 100,
        call: "FOR i IN 1 .. array_length(p_bodies, 1) LOOP
        PERFORM {v}({runner}, 'runner', p_digests[i], p_digests[i], p_bodies[i], NULL);
    END LOOP;",
    },
    Flavour {
        name: "batched",
        routine: "put_check_evidence",
        args: "text, text, text[], text[], text[], text[]",
        per_measure: 200,
        call: "PERFORM count(*) FROM {v}({runner}, 'runner', p_digests, p_digests, p_bodies,
        array_fill(NULL::text, ARRAY[array_length(p_bodies, 1)]));",
    },
];

/// One top-level check of a routine: an `IF` block of its body, nested blocks included, that
/// refuses something (raises, or calls the routine that raises the bounds' refusal). Lines are
/// counted from 0 in the routine's definition.
#[derive(Debug, Clone)]
struct Check {
    label: String,
    first: usize,
    last: usize,
}

/// The top-level checks of a routine's definition (as `pg_get_functiondef` prints it), in order.
/// Blocks are found by their `IF` and `END IF;` lines, which is how every write routine is
/// written; a block that does not refuse (a lookup's outcome, a cache) is not a check.
fn top_level_checks(def: &str) -> Result<Vec<Check>, String> {
    let lines: Vec<&str> = def.lines().collect();
    let begin = lines
        .iter()
        .position(|l| *l == "BEGIN")
        .ok_or("the routine's definition has no BEGIN line")?;
    let mut checks = Vec::new();
    let (mut depth, mut first) = (0usize, 0usize);
    for (n, line) in lines.iter().enumerate().skip(begin + 1) {
        let t = line.trim_start();
        if t.starts_with("IF ") || t.starts_with("IF(") {
            if depth == 0 {
                first = n;
            }
            depth += 1;
        } else if t.starts_with("END IF;") {
            depth = depth
                .checked_sub(1)
                .ok_or_else(|| format!("line {}: END IF; closes no IF", n + 1))?;
            let block = lines.get(first..=n).unwrap_or_default().join("\n");
            if depth == 0 && (block.contains("RAISE EXCEPTION") || block.contains("_refuse_bounds"))
            {
                checks.push(Check {
                    label: check_label(&block),
                    first,
                    last: n,
                });
            }
        }
    }
    if depth != 0 {
        return Err(format!("{depth} IF block(s) left open"));
    }
    Ok(checks)
}

/// A check's name in the report: what its refusal says, in a few words.
fn check_label(block: &str) -> String {
    const KNOWN: [(&str, &str); 9] = [
        (
            "does not act for principal",
            "identity (the database identity acts for the principal)",
        ),
        ("may not write", "role (this table's, the connection's)"),
        (
            "_refuse_bounds",
            "bounds (body, key, principal, correlation)",
        ),
        ("does not match the body", "digest of the body"),
        ("canonical form", "canonical form (RFC 8785)"),
        ("stored under key", "key derived from the body"),
        ("an object holding each of", "required members"),
        (
            "holds no write grant",
            "write grant in force (subject, grants, revocations, clock)",
        ),
        ("says it was produced by", "writer's claim (produced_by)"),
    ];
    if let Some((_, label)) = KNOWN.iter().find(|(needle, _)| block.contains(needle)) {
        return (*label).to_owned();
    }
    // Else the refusal's own text.
    block
        .split("RAISE EXCEPTION '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .map_or_else(|| "a check".to_owned(), str::to_owned)
}

/// `def` as the routine `name` in schema `breakdown`, without the lines of `removed`.
fn variant(
    def: &str,
    routine: &str,
    name: &str,
    removed: Option<&Check>,
) -> Result<String, String> {
    let from = format!("FUNCTION verdict.{routine}(");
    if !def.contains(&from) {
        return Err(format!("the definition of {routine} does not name it"));
    }
    let renamed = def.replacen(&from, &format!("FUNCTION breakdown.{name}("), 1);
    Ok(renamed
        .lines()
        .enumerate()
        .filter(|(n, _)| removed.is_none_or(|c| *n < c.first || *n > c.last))
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The median, the quartiles and the extremes of `values` (nearest rank).
struct Spread {
    median: f64,
    low: f64,
    q1: f64,
    q3: f64,
    high: f64,
}

fn spread(values: &[f64]) -> Spread {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
        v.get(i).copied().unwrap_or(f64::NAN)
    };
    Spread {
        median: at(0.5),
        low: at(0.0),
        q1: at(0.25),
        q3: at(0.75),
        high: at(1.0),
    }
}

/// `--only postgres-checks`: what each top-level check of the evidence routines costs per append.
/// In a scratch database migrated to the current schema, with the bench's runner registered,
/// each routine's definition is read back and created again in a schema of its own (owned by the
/// store's owner, as the routine is): whole, without one check (one variant per check), and as
/// the previous schema version defined it (read from a second scratch database). A timing
/// function per variant calls it in the server, as the runner's identity, for a measurement's
/// records in one transaction (no commit between the calls), and returns the microseconds per
/// append by the server's clock. Every variant is measured against the whole routine in pairs,
/// alternating which goes first, in many short rounds; a check's cost is the median over the
/// rounds of the pair's difference.
async fn bench_checks(admin: &str, scale: f64) -> Result<Vec<String>, String> {
    let pid = std::process::id();
    let prefix = format!("vbench{pid}_");
    let dbs = [
        format!("verdict_bench_{pid}_checks"),
        format!("verdict_bench_{pid}_previous"),
    ];
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .ok_or("--postgres needs a URL ending in /DATABASE")?;
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .map_err(|e| e.to_string())?;
    for db in &dbs {
        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{db}\""
        ))))
        .await
        .map_err(|e| e.to_string())?;
    }
    let result = bench_checks_in(
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
    // The runner's own identity, made when it was registered.
    if let Some(db) = dbs.first() {
        let role = verdict_store::principal_db_role(&prefix, db, RUNNER);
        let _ = conn
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP ROLE IF EXISTS \"{role}\""
            ))))
            .await;
    }
    result
}

async fn bench_checks_in(
    url: &str,
    previous: &str,
    prefix: &str,
    scale: f64,
) -> Result<Vec<String>, String> {
    let err = |what: &'static str| move |e: sqlx::Error| format!("{what}: {e}");
    let options = OpenOptions {
        role_prefix: Some(prefix.to_owned()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&Location::Postgres(url.to_owned()), &options)
        .await
        .map_err(|e| e.to_string())?;
    register_writer(&store).await?;
    let version = verdict_store::SCHEMA_VERSION;
    // The previous schema version, for its routines' text.
    let mut old = sqlx::PgConnection::connect(previous)
        .await
        .map_err(err("previous schema"))?;
    for m in verdict_store::migrations::POSTGRES
        .iter()
        .filter(|m| m.version < version)
    {
        let sql = format!(
            "BEGIN; {} INSERT INTO verdict.schema_migrations (version, name) VALUES ({}, '{}'); COMMIT;",
            filled(m.sql, prefix),
            m.version,
            m.name
        );
        old.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
            .await
            .map_err(err("previous schema"))?;
    }
    let mut admin = sqlx::PgConnection::connect(url)
        .await
        .map_err(err("scratch database"))?;
    let db: String = sqlx::query_scalar("SELECT current_database()::text")
        .fetch_one(&mut admin)
        .await
        .map_err(err("scratch database"))?;
    let owner = format!("\"{prefix}owner\"");
    admin
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA breakdown AUTHORIZATION {owner}; GRANT USAGE ON SCHEMA breakdown TO PUBLIC;
             CREATE TABLE breakdown.bodies (i bigint PRIMARY KEY, body text NOT NULL, digest text NOT NULL);
             GRANT SELECT ON breakdown.bodies TO PUBLIC;"
        ))))
        .await
        .map_err(err("breakdown schema"))?;
    let rounds = ((24.0 * scale) as u64).max(4);
    // Each flavour's checks and variants: the whole routine first, then the previous version's,
    // then one without each check.
    let mut plans = Vec::new();
    for f in &FLAVOURS {
        let signature = format!("verdict.{}({})", f.routine, f.args);
        let def: String = sqlx::query_scalar("SELECT pg_get_functiondef($1::regprocedure)")
            .bind(&signature)
            .fetch_one(&mut admin)
            .await
            .map_err(err("routine"))?;
        let before: String = sqlx::query_scalar("SELECT pg_get_functiondef($1::regprocedure)")
            .bind(&signature)
            .fetch_one(&mut old)
            .await
            .map_err(err("previous routine"))?;
        let checks = top_level_checks(&def).map_err(|e| format!("{signature}: {e}"))?;
        if checks.is_empty() {
            return Err(format!("{signature}: no checks found"));
        }
        let mut sql = vec![
            format!("SET ROLE {owner};"),
            format!(
                "{};",
                variant(&def, f.routine, &format!("{}_whole", f.name), None)?
            ),
            format!(
                "{};",
                variant(&before, f.routine, &format!("{}_previous", f.name), None)?
            ),
        ];
        for (i, c) in checks.iter().enumerate() {
            sql.push(format!(
                "{};",
                variant(&def, f.routine, &format!("{}_without_{i}", f.name), Some(c))?
            ));
        }
        let mut names = vec![format!("{}_whole", f.name), format!("{}_previous", f.name)];
        names.extend((0..checks.len()).map(|i| format!("{}_without_{i}", f.name)));
        for v in &names {
            let call = f
                .call
                .replace("{v}", &format!("breakdown.{v}"))
                .replace("{runner}", &format!("'{RUNNER}'"));
            sql.push(format!(
                "GRANT EXECUTE ON FUNCTION breakdown.{v}({}) TO PUBLIC;
CREATE FUNCTION breakdown.time_{v}(p_bodies text[], p_digests text[]) RETURNS float8
LANGUAGE plpgsql AS $t$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    {call}
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / array_length(p_bodies, 1);
END $t$;
GRANT EXECUTE ON FUNCTION breakdown.time_{v}(text[], text[]) TO PUBLIC;",
                f.args
            ));
        }
        sql.push("RESET ROLE;".to_owned());
        admin
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.join("\n"))))
            .await
            .map_err(|e| format!("{signature}: its variants: {e}"))?;
        plans.push((f, checks, names));
    }
    // The bodies every measurement appends, made before any is timed.
    let needed: u64 = plans
        .iter()
        .map(|(f, _, names)| rounds * (names.len() as u64 - 1) * 2 * f.per_measure)
        .sum();
    let first = 10_000_000u64;
    let mut i = first;
    while i < first + needed {
        let end = (i + 5000).min(first + needed);
        let mut ids = Vec::new();
        let mut bodies = Vec::new();
        let mut digests = Vec::new();
        for n in i..end {
            let (digest, body) = Routine::record(n)?;
            ids.push(i64::try_from(n).map_err(|e| e.to_string())?);
            bodies.push(body);
            digests.push(digest);
        }
        sqlx::query(
            "INSERT INTO breakdown.bodies (i, body, digest) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])",
        )
        .bind(ids)
        .bind(bodies)
        .bind(digests)
        .execute(&mut admin)
        .await
        .map_err(err("bodies"))?;
        i = end;
    }
    admin
        .execute("ANALYZE breakdown.bodies")
        .await
        .map_err(err("bodies"))?;
    // The runner's own identity calls every variant, as the store would.
    let identity = verdict_store::principal_db_role(prefix, &db, RUNNER);
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .map_err(err("runner"))?;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET ROLE \"{identity}\""
    ))))
    .await
    .map_err(err("runner"))?;
    // results[flavour][contender]: (whole, contender) per round.
    let mut results: Vec<Vec<Vec<(f64, f64)>>> = plans
        .iter()
        .map(|(_, _, names)| vec![Vec::new(); names.len() - 1])
        .collect();
    let mut next = first;
    for round in 0..rounds {
        for ((f, _, names), per_flavour) in plans.iter().zip(results.iter_mut()) {
            let Some((whole, contenders)) = names.split_first() else {
                continue;
            };
            for (c, (name, out)) in contenders.iter().zip(per_flavour.iter_mut()).enumerate() {
                // The whole routine goes first in every other pair.
                let whole_first = (round + c as u64).is_multiple_of(2);
                let order = if whole_first {
                    [whole, name]
                } else {
                    [name, whole]
                };
                let mut times = [0.0f64; 2];
                for (slot, v) in times.iter_mut().zip(order) {
                    *slot = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                        "SELECT breakdown.time_{v}(array_agg(body ORDER BY i), array_agg(digest ORDER BY i))
                         FROM breakdown.bodies WHERE i >= $1 AND i < $2"
                    )))
                    .bind(i64::try_from(next).map_err(|e| e.to_string())?)
                    .bind(i64::try_from(next + f.per_measure).map_err(|e| e.to_string())?)
                    .fetch_one(&mut conn)
                    .await
                    .map_err(|e| format!("{v}: {e}"))?;
                    next += f.per_measure;
                }
                let [a, b] = times;
                out.push(if whole_first { (a, b) } else { (b, a) });
            }
        }
    }
    let mut lines = Vec::new();
    for ((f, checks, _), per_flavour) in plans.iter().zip(&results) {
        let wholes: Vec<f64> = per_flavour.iter().flatten().map(|(w, _)| *w).collect();
        let whole = spread(&wholes);
        let what = match f.name {
            "single" => format!("{}, one call per append", f.routine),
            _ => format!("{}, {} records per call", f.routine, f.per_measure),
        };
        lines.push(format!(
            "| {what} | whole routine (schema {version}) | {:.1} | 100 | {:.1} to {:.1} (quartiles {:.1} to {:.1}) | {} |",
            whole.median,
            whole.low,
            whole.high,
            whole.q1,
            whole.q3,
            wholes.len()
        ));
        for (c, pairs) in per_flavour.iter().enumerate() {
            // The previous version: what it costs more than the current one; a check: what
            // the whole routine costs more than the routine without it.
            let (label, diffs): (String, Vec<f64>) = match c.checked_sub(1) {
                None => (
                    format!("schema {} routine instead, more by", version - 1),
                    pairs.iter().map(|(w, o)| o - w).collect(),
                ),
                Some(k) => (
                    checks
                        .get(k)
                        .map_or_else(|| "a check".to_owned(), |c| c.label.clone()),
                    pairs.iter().map(|(w, o)| w - o).collect(),
                ),
            };
            let s = spread(&diffs);
            lines.push(format!(
                "| {what} | {label} | {:.1} | {:.1} | {:.1} to {:.1} (quartiles {:.1} to {:.1}) | {} |",
                s.median,
                100.0 * s.median / whole.median,
                s.low,
                s.high,
                s.q1,
                s.q3,
                diffs.len()
            ));
        }
    }
    Ok(lines)
}

/// One way of making a durable single append that `--only postgres-breakdown` times.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The raw ceiling: a prepared single-row INSERT of the same body, autocommit.
    Raw,
    /// The same INSERT with `synchronous_commit = off`: no wait for the WAL flush.
    RawNoFlush,
    /// The store's routine called directly over one connection acting as the runner's
    /// identity, autocommit, with the digest and body made beforehand.
    Routine,
    /// The same call with `synchronous_commit = off`.
    RoutineNoFlush,
    /// `Store::put` end to end.
    Store,
}

impl Way {
    const ALL: [Self; 5] = [
        Self::Raw,
        Self::Routine,
        Self::Store,
        Self::RawNoFlush,
        Self::RoutineNoFlush,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Raw => "(a) raw single-row INSERT, autocommit",
            Self::RawNoFlush => "(a') raw single-row INSERT, synchronous_commit off",
            Self::Routine => "(b) bare routine call put_one_check_evidence, autocommit",
            Self::RoutineNoFlush => "(b') bare routine call, synchronous_commit off",
            Self::Store => "(c) Store::put end to end",
        }
    }
}

/// The connections and records `--only postgres-breakdown` appends with.
struct Breakdown {
    store: Arc<dyn Store>,
    admin: sqlx::PgConnection,
    raw: sqlx::PgConnection,
    raw_no_flush: sqlx::PgConnection,
    routine: sqlx::PgConnection,
    routine_no_flush: sqlx::PgConnection,
    body: String,
    next: u64,
}

/// What one timed run of appends gave.
struct Timed {
    micros: f64,
    wal_bytes: f64,
    trips: f64,
}

impl Breakdown {
    /// `n` appends one way, one durable commit each (no flush wait for the `NoFlush` ways);
    /// microseconds, bytes of WAL the whole cluster wrote meanwhile, and the store's round
    /// trips, each per append.
    async fn timed(&mut self, way: Way, n: u64) -> Result<Timed, String> {
        let start = self.next;
        self.next += n;
        let records: Vec<(String, String)> = (start..start + n)
            .map(Routine::record)
            .collect::<Result<_, _>>()?;
        let docs: Vec<Value> = (start..start + n).map(evidence).collect();
        let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&mut self.admin)
            .await
            .map_err(|e| e.to_string())?;
        let trips = self.store.round_trips();
        let t = Instant::now();
        match way {
            Way::Raw | Way::RawNoFlush => {
                let conn = if way == Way::Raw {
                    &mut self.raw
                } else {
                    &mut self.raw_no_flush
                };
                for i in start..start + n {
                    sqlx::query("INSERT INTO raw (key, body) VALUES ($1, $2)")
                        .bind(format!("b-{i}"))
                        .bind(&self.body)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Way::Routine | Way::RoutineNoFlush => {
                let conn = if way == Way::Routine {
                    &mut self.routine
                } else {
                    &mut self.routine_no_flush
                };
                for (digest, body) in &records {
                    sqlx::query(
                        "SELECT r_seq, r_digest, r_body, r_inserted, r_counted \
                         FROM verdict.put_one_check_evidence($1, 'runner', $2, $2, $3, NULL)",
                    )
                    .bind(RUNNER)
                    .bind(digest)
                    .bind(body)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(|e| e.to_string())?;
                }
            }
            Way::Store => {
                let store = Arc::clone(&self.store);
                // On a worker, as `store_single` appends, for the same reason.
                tokio::spawn(async move {
                    for doc in &docs {
                        store
                            .put(&runner(), DocKind::Evidence, doc)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    Ok::<_, String>(())
                })
                .await
                .map_err(|e| e.to_string())??;
            }
        }
        let elapsed = t.elapsed();
        let trips = self.store.round_trips() - trips;
        let wal: f64 =
            sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8")
                .bind(lsn)
                .fetch_one(&mut self.admin)
                .await
                .map_err(|e| e.to_string())?;
        let per = n.max(1) as f64;
        Ok(Timed {
            micros: elapsed.as_secs_f64() * 1e6 / per,
            wal_bytes: wal / per,
            trips: trips as f64 / per,
        })
    }

    /// The WAL one statement writes by its own count (`EXPLAIN (ANALYZE, WAL)`: records, full
    /// page images, bytes), summed over `n` appends, per append; the commit record is not in it.
    async fn explained_wal(&mut self, routine: bool, n: u64) -> Result<[f64; 3], String> {
        let mut sum = [0.0f64; 3];
        for _ in 0..n {
            let i = self.next;
            self.next += 1;
            let lines: Vec<String> = if routine {
                let (digest, body) = Routine::record(i)?;
                sqlx::query_scalar(
                    "EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) \
                     SELECT r_seq FROM verdict.put_one_check_evidence($1, 'runner', $2, $2, $3, NULL)",
                )
                .bind(RUNNER)
                .bind(digest)
                .bind(body)
                .fetch_all(&mut self.routine)
                .await
            } else {
                sqlx::query_scalar(
                    "EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) \
                     INSERT INTO raw (key, body) VALUES ($1, $2)",
                )
                .bind(format!("b-{i}"))
                .bind(&self.body)
                .fetch_all(&mut self.raw)
                .await
            }
            .map_err(|e| e.to_string())?;
            // The plan's top node carries the statement's whole WAL usage.
            let wal = lines
                .iter()
                .map(|l| l.trim())
                .find(|l| l.starts_with("WAL:"))
                .unwrap_or("WAL:");
            for part in wal.split_whitespace().skip(1) {
                let (name, value) = part.split_once('=').unwrap_or((part, "0"));
                let value: f64 = value.parse().unwrap_or(0.0);
                match name {
                    "records" => sum[0] += value,
                    "fpi" => sum[1] += value,
                    "bytes" => sum[2] += value,
                    _ => {}
                }
            }
        }
        Ok(sum.map(|s| s / n.max(1) as f64))
    }
}

/// `--only postgres-breakdown`: where a single append's time goes. In a scratch database
/// with the bench's runner registered, the same evidence is appended five ways in alternating
/// rounds (each way first in turn), so all meet the same disk and the same neighbours: the raw
/// INSERT, the bare routine call, `Store::put`, and the first two without waiting for the WAL
/// flush. Then the server's own time in each function the routine calls
/// (`track_functions = 'all'` on the bare routine's connection, read from
/// `pg_stat_user_functions`), the WAL each statement writes by `EXPLAIN (ANALYZE, WAL)`, and
/// the client's preparation of a document (canonical form, digest, key) timed alone.
async fn bench_breakdown(admin: &str, scale: f64) -> Result<Vec<String>, String> {
    let pid = std::process::id();
    let db = format!("verdict_bench_{pid}_breakdown");
    let prefix = format!("vbench{pid}_");
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .ok_or("--postgres needs a URL ending in /DATABASE")?;
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .map_err(|e| e.to_string())?;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{db}\""
    ))))
    .await
    .map_err(|e| e.to_string())?;
    let result = bench_breakdown_in(&format!("{base}/{db}"), &db, &prefix, scale).await;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
    ))))
    .await
    .map_err(|e| e.to_string())?;
    let mut roles = verdict_store::role_names(&prefix);
    roles.push(verdict_store::principal_db_role(&prefix, &db, RUNNER));
    for role in roles {
        let _ = conn
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP ROLE IF EXISTS \"{role}\""
            ))))
            .await;
    }
    result
}

async fn bench_breakdown_in(
    url: &str,
    db: &str,
    prefix: &str,
    scale: f64,
) -> Result<Vec<String>, String> {
    let err = |what: &'static str| move |e: sqlx::Error| format!("{what}: {e}");
    let connect = || sqlx::PgConnection::connect(url);
    let mut admin = connect().await.map_err(err("scratch database"))?;
    admin
        .execute(
            "CREATE TABLE raw (id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, body text NOT NULL)",
        )
        .await
        .map_err(err("raw table"))?;
    let options = OpenOptions {
        role_prefix: Some(prefix.to_owned()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&Location::Postgres(url.to_owned()), &options)
        .await
        .map_err(|e| e.to_string())?;
    register_writer(&store).await?;
    let identity = verdict_store::principal_db_role(prefix, db, RUNNER);
    let mut routine = connect().await.map_err(err("routine"))?;
    // Only this connection's function calls are counted, so the counts are the bare calls'.
    routine
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET track_functions = 'all'; SET ROLE \"{identity}\""
        ))))
        .await
        .map_err(err("routine"))?;
    let mut routine_no_flush = connect().await.map_err(err("routine"))?;
    routine_no_flush
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET synchronous_commit = off; SET ROLE \"{identity}\""
        ))))
        .await
        .map_err(err("routine"))?;
    let raw = connect().await.map_err(err("raw"))?;
    let mut raw_no_flush = connect().await.map_err(err("raw"))?;
    raw_no_flush
        .execute("SET synchronous_commit = off")
        .await
        .map_err(err("raw"))?;
    let body = String::from_utf8(verdict_core::canonical::to_vec(&evidence(0)))
        .map_err(|e| e.to_string())?;
    let mut b = Breakdown {
        store,
        admin,
        raw,
        raw_no_flush,
        routine,
        routine_no_flush,
        body,
        next: 0,
    };
    // One warm-up append each way, outside the figures: the first call plans every statement.
    for way in Way::ALL {
        b.timed(way, 5).await?;
    }
    b.admin
        .execute("SELECT pg_stat_reset()")
        .await
        .map_err(err("statistics"))?;
    let per_round = scaled(400, scale);
    let mut figures: Vec<Vec<Timed>> = Way::ALL.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        for k in 0..Way::ALL.len() {
            let at = (k + round as usize) % Way::ALL.len();
            if let (Some(way), Some(out)) = (Way::ALL.get(at), figures.get_mut(at)) {
                out.push(b.timed(*way, per_round).await?);
            }
        }
    }
    // The bare calls' function times: this connection's counts flushed first.
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(&mut b.routine)
        .await
        .map_err(err("statistics"))?;
    let functions: Vec<(String, i64, f64, f64)> = sqlx::query_as(
        "SELECT funcname::text, calls, total_time, self_time FROM pg_stat_user_functions \
         WHERE schemaname = 'verdict' ORDER BY total_time DESC",
    )
    .fetch_all(&mut b.admin)
    .await
    .map_err(err("statistics"))?;
    let explained = 50;
    let raw_wal = b.explained_wal(false, explained).await?;
    let routine_wal = b.explained_wal(true, explained).await?;
    // The client's preparation of a document alone: what `Store::put` does before its round
    // trip (canonical form, digest, key from the decoded document).
    let docs: Vec<Value> = (0..per_round * ROUNDS)
        .map(|i| evidence(1_000_000 + i))
        .collect();
    let t = Instant::now();
    for doc in &docs {
        let body = verdict_core::canonical::to_vec(doc);
        let digest = verdict_store::records::row_digest("evidence", &body);
        verdict_store::records::key_of_value(verdict_store::Table::CheckEvidence, doc, &digest)?;
    }
    let prepare = t.elapsed().as_secs_f64() * 1e6 / docs.len().max(1) as f64;
    check_intact(&b.store, "postgres").await?;

    let median = |v: &[Timed], f: fn(&Timed) -> f64| spread(&v.iter().map(f).collect::<Vec<_>>());
    let raw_us = figures
        .first()
        .map_or(f64::NAN, |v| median(v, |t| t.micros).median);
    let mut lines = vec![
        format!(
            "{} appends per way in each of {ROUNDS} rounds, the ways in turn. Medians of the rounds (quartiles).\n",
            per_round
        ),
        "| way | µs per append | per second | × raw | WAL bytes per append, whole cluster | store round trips per append |".to_owned(),
        "|---|---:|---:|---:|---:|---:|".to_owned(),
    ];
    for (way, v) in Way::ALL.iter().zip(&figures) {
        let us = median(v, |t| t.micros);
        let wal = median(v, |t| t.wal_bytes);
        let trips = median(v, |t| t.trips);
        lines.push(format!(
            "| {} | {:.0} ({:.0} to {:.0}) | {:.0} | {:.2} | {:.0} ({:.0} to {:.0}) | {:.2} |",
            way.label(),
            us.median,
            us.q1,
            us.q3,
            1e6 / us.median,
            raw_us / us.median,
            wal.median,
            wal.q1,
            wal.q3,
            trips.median
        ));
    }
    let appends = (per_round * ROUNDS) as f64;
    lines.push(String::new());
    lines.push(format!(
        "Client's preparation of one document (canonical form, digest, key): {prepare:.1} µs."
    ));
    lines.push(String::new());
    lines.push(format!(
        "WAL by the statement's own count (EXPLAIN (ANALYZE, WAL), {explained} appends each, no commit record): \
         raw INSERT {:.1} records, {:.2} full pages, {:.0} bytes; routine {:.1} records, {:.2} full pages, {:.0} bytes.",
        raw_wal[0], raw_wal[1], raw_wal[2], routine_wal[0], routine_wal[1], routine_wal[2]
    ));
    lines.push(String::new());
    lines.push(format!(
        "Server time in the routine's functions over the bare calls ({appends:.0} appends, autocommit):\n"
    ));
    lines.push("| function | calls per append | µs per append, with what it calls | µs per append, its own |".to_owned());
    lines.push("|---|---:|---:|---:|".to_owned());
    for (name, calls, total, own) in &functions {
        lines.push(format!(
            "| {name} | {:.2} | {:.1} | {:.1} |",
            *calls as f64 / appends,
            total * 1000.0 / appends,
            own * 1000.0 / appends
        ));
    }
    Ok(lines)
}
