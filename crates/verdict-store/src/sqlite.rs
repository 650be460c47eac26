//! The embedded backend: one SQLite file in WAL mode with `synchronous=FULL`.
//!
//! Writers take `BEGIN IMMEDIATE`, which serialises them across threads and processes (the
//! audit chain has one head); the busy timeout makes a second writer wait instead of failing.

use crate::actor::{Actor, ActorRole};
use crate::audit::{AuditEvent, ChainHead, EventFields, GENESIS_HASH, now_utc};
use crate::backend::{
    Backend, CasOutcome, Dialect, Drift, Filter, Prepared, PreparedCas, RawRow, RoundTrips,
    SubjectAndGrants, parse_digest, seq_from, to_i64,
};
use crate::error::{Result, StoreError, last_operator_message};
use crate::migrations::{self, MigrationReport, SCHEMA_VERSION};
use crate::records::{PointerKind, Table};
use crate::store::{ExecutionHead, Pointer, Stored};
use async_trait::async_trait;
use rusqlite::{
    CachedStatement, Connection, OpenFlags, OptionalExtension as _, Row, Statement, Transaction,
    TransactionBehavior, params,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a write waits for another connection's write to end before the store reports
/// the database busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);
/// The first pause of a write that found the database locked, doubled after each retry up to
/// [`BUSY_PAUSE_MAX`].
const BUSY_PAUSE_FIRST: Duration = Duration::from_micros(100);
const BUSY_PAUSE_MAX: Duration = Duration::from_millis(2);

/// Whether a write that found the database locked by another connection for the `n`th time in
/// a row (from 0) tries again, after pausing. SQLite's own busy timeout pauses 1, 2, 5, 10, 15,
/// 20, 25 ms and more between tries, many times longer than a write holds the lock (a fraction
/// of a millisecond), so that with a few processes writing one file the lock sat free while
/// each waiter slept; these pauses stay short. The pauses add up to [`BUSY_TIMEOUT`] at most.
fn busy_retry(n: i32) -> bool {
    match busy_pause(n) {
        Some(pause) => {
            std::thread::sleep(pause);
            true
        }
        None => false,
    }
}

/// The pause before retry `n` (from 0), or `None` once the pauses before it add up to
/// [`BUSY_TIMEOUT`].
fn busy_pause(n: i32) -> Option<Duration> {
    let n = u32::try_from(n).ok()?;
    // Doubling from the first pause: 100, 200, 400, 800, 1600 µs, then the most, 2 ms.
    let doubling = (BUSY_PAUSE_MAX.as_micros() / BUSY_PAUSE_FIRST.as_micros()).ilog2();
    let (before, pause) = if n <= doubling {
        // The pauses before retry n are FIRST * (2^n - 1).
        (
            BUSY_PAUSE_FIRST.saturating_mul((1u32 << n) - 1),
            BUSY_PAUSE_FIRST.saturating_mul(1u32 << n),
        )
    } else {
        let ramp = BUSY_PAUSE_FIRST.saturating_mul((1u32 << (doubling + 1)) - 1);
        (
            ramp.saturating_add(BUSY_PAUSE_MAX.saturating_mul(n - doubling - 1)),
            BUSY_PAUSE_MAX,
        )
    };
    (before < BUSY_TIMEOUT).then(|| pause.min(BUSY_PAUSE_MAX))
}

/// Makes a connection wait for another's write as [`busy_retry`] says.
fn wait_when_busy(conn: &Connection) -> Result<()> {
    conn.busy_handler(Some(busy_retry)).map_err(err)
}
const WAL_CHECKPOINT_PAGES: i64 = 16_384;

pub(crate) struct SqliteBackend {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    /// Calls made on the database's thread ([`RoundTrips`]).
    trips: Arc<RoundTrips>,
    /// Moved on after each change this handle makes to the job queue: its own commits do not
    /// move the file's `data_version` for its own connection, which is what waits watch.
    queue_changes: tokio::sync::watch::Sender<u64>,
    /// The time the handle's manual clock reads, shared with its snapshots.
    manual: Arc<crate::backend::ManualTime>,
}

pub(crate) fn err(e: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(f, Some(msg)) = &e
        && (f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
    {
        return StoreError::Duplicate(msg.clone());
    }
    // Another writer held the database past the busy timeout: it is away for now, and the
    // same call may succeed later.
    if let rusqlite::Error::SqliteFailure(f, _) = &e
        && matches!(
            f.code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        )
    {
        return StoreError::Unavailable {
            backend: "sqlite",
            message: e.to_string(),
        };
    }
    StoreError::Backend {
        backend: "sqlite",
        message: e.to_string(),
    }
}

fn location(path: &Path, message: String) -> StoreError {
    StoreError::Location {
        location: format!("sqlite:{}", path.display()),
        message,
    }
}

/// Creates the database file, when there is none yet, readable and writable by its owner alone:
/// the store holds every piece of evidence and the principals' token hashes, and SQLite gives
/// the WAL and shared-memory files it creates beside it the database file's mode.
fn create_private(path: &Path) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(location(path, format!("cannot create it: {e}"))),
    }
}

/// Opens (creating it if needed) the database file with the store's settings.
fn connect(path: &Path) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| location(path, format!("cannot create its directory: {e}")))?;
    }
    create_private(path)?;
    let conn = Connection::open(path).map_err(|e| location(path, e.to_string()))?;
    wait_when_busy(&conn)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(location(
            path,
            format!("cannot use WAL mode (journal mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    // Checkpoint the WAL every 64 MiB rather than every 4 MiB: a page changed by many commits
    // (index pages above all) is then copied into the database file once, not once per commit.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)
        .map_err(err)?;
    // A 64 MiB page cache keeps the indexes a batch touches in memory instead of re-reading
    // them from the WAL for every lookup (the default is 2 MiB).
    conn.pragma_update(None, "cache_size", -65_536)
        .map_err(err)?;
    conn.set_prepared_statement_cache_capacity(256);
    Ok(conn)
}

fn version(conn: &Connection) -> Result<i64> {
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    if !has_table {
        return Ok(0);
    }
    conn.query_row(
        "SELECT coalesce(max(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
    .map_err(err)
}

fn migrate_conn(conn: &mut Connection) -> Result<MigrationReport> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let from = version(&tx)?;
    if from > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: from,
            supported: SCHEMA_VERSION,
        });
    }
    for m in migrations::SQLITE.iter().filter(|m| m.version > from) {
        tx.execute_batch(m.sql).map_err(err)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![m.version, m.name, now_utc()],
        )
        .map_err(err)?;
    }
    let to = version(&tx)?;
    tx.commit().map_err(err)?;
    Ok(MigrationReport { from, to })
}

/// A schema's objects as `sqlite_master` holds them, by type and name: the table each belongs
/// to and the SQL that makes it. Only the statistics tables `ANALYZE` makes, as it makes them, are
/// left out (their rows steer the planner, and every read orders by seq, so never a result);
/// every other object is compared, whatever its name:
/// SQLite fires a trigger named `sqlite_…` that someone wrote into `sqlite_master` like any
/// other.
type SchemaObjects = std::collections::BTreeMap<(String, String), (String, Option<String>)>;

fn schema_objects(conn: &Connection) -> Result<SchemaObjects> {
    let mut stmt = conn
        .prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_master \
             WHERE NOT (type = 'table' AND ((name = 'sqlite_stat1' AND sql = 'CREATE TABLE sqlite_stat1(tbl,idx,stat)') \
             OR (name = 'sqlite_stat4' AND sql = 'CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)')))",
        )
        .map_err(err)?;
    let rows = stmt
        .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?))))
        .map_err(err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(err)
}

/// The objects the migrations up to `version` make, in a database of their own in memory.
fn migrated_schema(version: i64) -> Result<SchemaObjects> {
    let mut conn = Connection::open_in_memory().map_err(err)?;
    let tx = conn.transaction().map_err(err)?;
    for m in migrations::SQLITE.iter().filter(|m| m.version <= version) {
        tx.execute_batch(m.sql).map_err(err)?;
    }
    let objects = schema_objects(&tx)?;
    tx.rollback().map_err(err)?;
    Ok(objects)
}

/// What `PRAGMA integrity_check` finds wrong in the file (an index missing a row or holding one
/// its table lacks, a damaged page, a broken constraint), each line a drift; nothing for a
/// sound file.
fn integrity_drift(conn: &Connection) -> Result<Vec<Drift>> {
    let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(err)?;
    let lines = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(err)?;
    Ok(lines
        .into_iter()
        .filter(|l| l != "ok")
        .map(|l| Drift {
            table: "sqlite_master".to_owned(),
            key: None,
            seq: None,
            detail: format!("SQLite's integrity check of the file: {l}"),
        })
        .collect())
}

/// Every schema object of `conn` that is not what the migrations up to its version make: one
/// changed, one missing, one no migration makes.
fn schema_drift(conn: &Connection) -> Result<Vec<Drift>> {
    let version = version(conn)?;
    let found = schema_objects(conn)?;
    let made = migrated_schema(version)?;
    let drift = |(kind, name): &(String, String), table: &str, what: &str| Drift {
        table: table.to_owned(),
        key: Some(name.clone()),
        seq: None,
        detail: format!(
            "the schema's {kind} {name:?} {what} the migrations up to version {version} make"
        ),
    };
    let mut out = Vec::new();
    for (key, (table, sql)) in &made {
        match found.get(key) {
            None => out.push(drift(key, table, "is missing: it is one")),
            Some((t, s)) if t != table || s != sql => {
                out.push(drift(key, table, "is defined otherwise than"));
            }
            Some(_) => {}
        }
    }
    for (key, (table, _)) in &found {
        if !made.contains_key(key) {
            out.push(drift(key, table, "is not one"));
        }
    }
    Ok(out)
}

/// Applies pending migrations to the database at `path`.
pub(crate) fn migrate(path: &Path) -> Result<MigrationReport> {
    let mut conn = connect(path)?;
    migrate_conn(&mut conn)
}

fn counted_col(table: Table) -> &'static str {
    if table == Table::VerificationResults {
        "counted"
    } else {
        "NULL"
    }
}

type Raw = (i64, String, String, String, Option<bool>);

fn raw(row: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn to_stored(table: Table, raw: Raw) -> Result<Stored> {
    let (seq, key, digest, body, counted) = raw;
    Ok(Stored {
        table,
        seq: seq_from(table.name(), &key, seq)?,
        digest: parse_digest(table, &key, &digest)?,
        key,
        body,
        inserted: false,
        counted,
    })
}

fn find_sql(table: Table) -> String {
    format!(
        "SELECT seq, key, digest, body, {} FROM {} WHERE key = ?1",
        counted_col(table),
        table.name()
    )
}

/// The insert of a row; only verification results carry `counted`.
fn insert_sql(table: Table) -> String {
    if table == Table::VerificationResults {
        format!(
            "INSERT INTO {} (seq, key, digest, body, counted) VALUES (?1, ?2, ?3, ?4, ?5)",
            table.name()
        )
    } else {
        format!(
            "INSERT INTO {} (seq, key, digest, body) VALUES (?1, ?2, ?3, ?4)",
            table.name()
        )
    }
}

const INSERT_EVENT: &str = "INSERT INTO audit_events (seq, prev_hash, hash, event_type, tbl, key, \
     principal, role, payload_digest, correlation, recorded_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

/// The statements of one table, taken from the cache once per transaction rather than once
/// per row: formatting the SQL text and hashing it for the cache lookup is per-row work a
/// batch does not need.
struct TableStatements<'c> {
    table: Table,
    find: CachedStatement<'c>,
    insert: CachedStatement<'c>,
}

/// The statements an append transaction uses, by table.
struct Statements<'c> {
    conn: &'c Connection,
    tables: Vec<TableStatements<'c>>,
}

impl<'c> Statements<'c> {
    const fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            tables: Vec::new(),
        }
    }

    fn of(&mut self, table: Table) -> Result<&mut TableStatements<'c>> {
        let at = self.tables.iter().position(|t| t.table == table);
        let at = match at {
            Some(at) => at,
            None => {
                self.tables.push(TableStatements {
                    table,
                    find: self.conn.prepare_cached(&find_sql(table)).map_err(err)?,
                    insert: self.conn.prepare_cached(&insert_sql(table)).map_err(err)?,
                });
                self.tables.len() - 1
            }
        };
        self.tables.get_mut(at).ok_or_else(|| StoreError::Backend {
            backend: "sqlite",
            message: format!("no statements prepared for {}", table.name()),
        })
    }
}

impl TableStatements<'_> {
    fn find(&mut self, key: &str) -> Result<Option<Stored>> {
        let raw = self.find.query_row([key], raw).optional().map_err(err)?;
        raw.map(|r| to_stored(self.table, r)).transpose()
    }
}

/// Fails unless a statement that must store one row stored exactly one: a trigger written into
/// the file that drops rows (`RAISE(IGNORE)`) makes an insert store nothing and still succeed.
fn one_row(changed: usize, what: &str) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::Backend {
            backend: "sqlite",
            message: format!(
                "storing {what} changed {changed} rows, not one: the file's schema is not the one its migrations make (run `verdict audit verify`)"
            ),
        })
    }
}

fn insert_event_fields(stmt: &mut Statement<'_>, e: &EventFields<'_>, hash: &str) -> Result<()> {
    let changed = stmt
        .execute(params![
            to_i64(e.seq, "audit seq")?,
            e.prev_hash,
            hash,
            e.event_type,
            e.table,
            e.key,
            e.principal,
            e.role,
            e.payload_digest,
            e.correlation,
            e.recorded_at
        ])
        .map_err(err)?;
    one_row(changed, "an audit event")
}

fn head(tx: &Connection) -> Result<Option<ChainHead>> {
    let row: Option<(i64, String)> = tx
        .prepare_cached("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
        .map_err(err)?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(err)?;
    row.map(|(seq, hash)| {
        Ok(ChainHead {
            seq: seq_from("audit_events", "", seq)?,
            hash,
        })
    })
    .transpose()
}

fn insert_event(tx: &Connection, e: &AuditEvent) -> Result<()> {
    let mut stmt = tx.prepare_cached(INSERT_EVENT).map_err(err)?;
    insert_event_fields(&mut stmt, &e.fields(), &e.hash)
}

fn insert_row(
    stmt: &mut Statement<'_>,
    item: &Prepared,
    seq: u64,
    counted: Option<bool>,
) -> Result<()> {
    let seq = to_i64(seq, "audit seq")?;
    let digest = item.digest.as_str();
    let changed = if item.table == Table::VerificationResults {
        stmt.execute(params![seq, item.key, digest, item.body, counted])
    } else {
        stmt.execute(params![seq, item.key, digest, item.body])
    }
    .map_err(err)?;
    one_row(changed, &format!("{} {}", item.table.name(), item.key))
}

/// Whether a result about `subject` at `generation` counts now: the subject is its
/// execution's current one at that generation.
fn counts_now(tx: &Connection, subject: &str, generation: u64) -> Result<bool> {
    let value: Option<Option<String>> = tx
        .prepare_cached(
            "SELECT p.value FROM subjects s JOIN pointers p ON p.pointer = 'execution' AND p.name = s.execution_id \
             WHERE s.key = ?1",
        )
        .map_err(err)?
        .query_row([subject], |r| r.get(0))
        .optional()
        .map_err(err)?;
    let head = value
        .flatten()
        .and_then(|v| serde_json::from_str::<ExecutionHead>(&v).ok());
    Ok(head.is_some_and(|h| h.subject_digest.as_str() == subject && h.generation == generation))
}

/// A principal's grants, each with its revocation if stored, in seq order: one statement.
fn grants_of(conn: &Connection, principal: &str) -> Result<Vec<(Stored, Option<Stored>)>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT g.seq, g.key, g.digest, g.body, r.seq, r.key, r.digest, r.body \
             FROM grants g LEFT JOIN grant_revocations r ON r.key = g.key \
             WHERE g.principal = ?1 ORDER BY g.seq",
        )
        .map_err(err)?;
    let rows = stmt
        .query_map([principal], |r| {
            let grant: Raw = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, None);
            let revocation: Option<i64> = r.get(4)?;
            let revocation = match revocation {
                Some(seq) => Some((seq, r.get(5)?, r.get(6)?, r.get(7)?, None)),
                None => None,
            };
            Ok((grant, revocation))
        })
        .map_err(err)?
        .collect::<rusqlite::Result<Vec<(Raw, Option<Raw>)>>>()
        .map_err(err)?;
    rows.into_iter()
        .map(|(g, r)| {
            Ok((
                to_stored(Table::Grants, g)?,
                r.map(|r| to_stored(Table::GrantRevocations, r))
                    .transpose()?,
            ))
        })
        .collect()
}

fn pointer_row(tx: &Connection, kind: PointerKind, name: &str) -> Result<Option<Pointer>> {
    let row: Option<(i64, Option<String>)> = tx
        .prepare_cached("SELECT revision, value FROM pointers WHERE pointer = ?1 AND name = ?2")
        .map_err(err)?
        .query_row([kind.as_str(), name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(err)?;
    row.map(|(revision, value)| {
        Ok(Pointer {
            kind,
            name: name.to_owned(),
            revision: seq_from("pointers", name, revision)?,
            value,
        })
    })
    .transpose()
}

/// Refuses a runner's check evidence unless the runner holds a write grant in force at the
/// store's time, not revoked, on the execution (or mission) of the stored subject it is about:
/// what PostgreSQL's evidence routines hold a runner to, checked here under the write lock the
/// append holds, so that no revocation or expiry comes between the check and the write, and a
/// caller need not read the grants first ([`Backend::binds_evidence_grants`]). As on
/// PostgreSQL, where a call acting for no principal's identity is the login's own, an actor
/// whose name no stored runner has is not held to it: every principal the engine acts for is
/// stored, and whoever writes the file without the engine controls it anyway.
fn evidence_under_a_write_grant(
    tx: &Connection,
    actor: &Actor,
    item: &Prepared,
    manual: Option<i64>,
) -> Result<()> {
    let stored_runner: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM principals p WHERE p.key = ?1 AND p.role = 'runner')",
        )
        .map_err(err)?
        .query_row([&actor.principal], |r| r.get(0))
        .map_err(err)?;
    if !stored_runner {
        return Ok(());
    }
    let evidence: verdict_core::contracts::CheckEvidence = serde_json::from_str(&item.body)
        .map_err(|e| StoreError::Invalid {
            what: "check evidence",
            message: e.to_string(),
        })?;
    let now = crate::jobs::store_now_sqlite(tx, manual)?;
    if grant_covers_subject(
        tx,
        &actor.principal,
        evidence.subject_digest.as_str(),
        now,
        true,
    )? {
        return Ok(());
    }
    Err(StoreError::Forbidden {
        principal: actor.principal.clone(),
        role: actor.role.as_str(),
        target: "check evidence about a subject on which it holds no write grant in force",
    })
}

/// Whether `principal` holds a grant in force at `now` (microseconds), not revoked, on the
/// execution (or the mission) of stored subject `subject`, with write access when `write`. A
/// subject not stored is covered by nothing.
pub(crate) fn grant_covers_subject(
    conn: &Connection,
    principal: &str,
    subject: &str,
    now: i64,
    write: bool,
) -> Result<bool> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT g.body FROM subjects s \
             JOIN grants g ON g.principal = ?2 AND ((g.scope_kind = 'execution' \
               AND g.scope_id = s.execution_id) OR (g.scope_kind = 'mission' \
               AND g.scope_id = json_extract(s.body, '$.mission'))) \
             WHERE s.key = ?1 \
               AND NOT EXISTS (SELECT 1 FROM grant_revocations v WHERE v.grant_id = g.key)",
        )
        .map_err(err)?;
    let mut rows = stmt.query(params![subject, principal]).map_err(err)?;
    while let Some(row) = rows.next().map_err(err)? {
        let body: String = row.get(0).map_err(err)?;
        let grant: crate::records::GrantRecord =
            serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                table: "grants",
                key: principal.to_owned(),
                message: e.to_string(),
            })?;
        if grant.expires_at.unix_nanos() > i128::from(now) * 1000
            && (!write || grant.access == crate::records::Access::Write)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Appends `items` as `actor` in the caller's write transaction. `manual` is the handle's manual
/// time, if set: the store's time a runner's grant is checked at
/// ([`evidence_under_a_write_grant`]).
fn append_tx(
    tx: &Transaction<'_>,
    actor: &Actor,
    items: Vec<Prepared>,
    manual: Option<i64>,
) -> Result<Vec<Stored>> {
    let (mut seq, mut prev_hash) =
        head(tx)?.map_or((0, GENESIS_HASH.to_owned()), |h| (h.seq, h.hash));
    let now = now_utc();
    let mut statements = Statements::new(tx);
    let mut insert_event = tx.prepare_cached(INSERT_EVENT).map_err(err)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let table = statements.of(item.table)?;
        if let Some(existing) = table.find(&item.key)? {
            out.push(item.settle(existing)?);
            continue;
        }
        if item.table == Table::Principals {
            no_principal_reads_like(tx, &item.key)?;
        }
        if item.table == Table::VerifierRuns {
            job_run_under_its_claim(tx, &item.key, &item.body)?;
        }
        let counted = match &item.counts_for {
            Some((subject, generation)) => Some(counts_now(tx, subject, *generation)?),
            None => None,
        };
        if item.table == Table::Denials {
            denial_within_bound(tx, &item.body)?;
        }
        if item.table == Table::CheckEvidence && actor.role == ActorRole::Runner {
            evidence_under_a_write_grant(tx, actor, &item, manual)?;
        }
        if item.table == Table::HumanDecisions && actor.role == ActorRole::Human {
            human_decision_on_what_is_current(tx, &actor.principal, &item.key, &item.body)?;
        }
        let event = EventFields {
            seq: seq + 1,
            prev_hash: &prev_hash,
            event_type: "append",
            table: item.table.name(),
            key: &item.key,
            principal: &actor.principal,
            role: actor.role.as_str(),
            payload_digest: item.digest.as_str(),
            correlation: item.correlation.as_deref(),
            recorded_at: &now,
        };
        let hash = event.hash();
        insert_event_fields(&mut insert_event, &event, &hash)?;
        insert_row(&mut table.insert, &item, event.seq, counted)?;
        if item.table == Table::CredentialChanges {
            an_operator_keeps_a_token(tx, &item.key)?;
        }
        seq = event.seq;
        prev_hash = hash;
        out.push(Stored {
            table: item.table,
            key: item.key,
            digest: item.digest,
            body: item.body,
            seq,
            inserted: true,
            counted,
        });
    }
    Ok(out)
}

/// After the change of token keyed `key` is inserted, in its transaction: a revocation of an
/// operator's token is refused (and rolls back with the transaction) when it leaves no
/// operator holding a token, since nobody could then act as an operator again and `init`
/// refuses a store that has principals. A rotation always leaves a token. The PostgreSQL
/// routine holds the same (schema version 35).
fn an_operator_keeps_a_token(tx: &Connection, key: &str) -> Result<()> {
    let revoked: Option<String> = tx
        .prepare_cached(
            "SELECT c.principal FROM credential_changes c JOIN principals p ON p.key = c.principal \
             WHERE c.key = ?1 AND c.token_sha256 IS NULL AND p.role = 'operator'",
        )
        .map_err(err)?
        .query_row([key], |r| r.get(0))
        .optional()
        .map_err(err)?;
    let Some(operator) = revoked else {
        return Ok(());
    };
    let kept: bool = tx
        .prepare_cached(OPERATOR_HOLDS_A_TOKEN)
        .map_err(err)?
        .query_row([], |r| r.get(0))
        .map_err(err)?;
    if kept {
        Ok(())
    } else {
        Err(StoreError::LastOperator(last_operator_message(&operator)))
    }
}

/// A run named as a verify job's attempt (`job-<job>-<fencing>`, [`crate::records::job_run`])
/// is admitted only while that job is running under that claim's token, held by the run's
/// verifier, for the run's request and class: nobody takes the name of another's attempt first.
/// The PostgreSQL trigger holds the same (schema version 38).
fn job_run_under_its_claim(tx: &Connection, key: &str, body: &str) -> Result<()> {
    let Some((job, fencing)) = crate::records::job_run(key) else {
        return Ok(());
    };
    let admission: crate::records::RunAdmission = verdict_core::contracts::decode_plain(
        &verdict_core::json::parse(body.as_bytes()).map_err(|e| StoreError::Invalid {
            what: "verifier_runs",
            message: e.to_string(),
        })?,
    )
    .map_err(|e| StoreError::Invalid {
        what: "verifier_runs",
        message: e.to_string(),
    })?;
    let held: bool = tx
        .prepare_cached(
            "SELECT count(*) > 0 FROM jobs WHERE id = ?1 AND fencing = ?2 AND kind = 'verify' \
             AND state = 'running' AND principal = ?3 AND request = ?4 AND class = ?5",
        )
        .map_err(err)?
        .query_row(
            params![
                job,
                fencing,
                admission.verifier.as_str(),
                admission.request_digest.as_str(),
                admission.class.as_str()
            ],
            |r| r.get(0),
        )
        .map_err(err)?;
    if held {
        Ok(())
    } else {
        Err(StoreError::Refused(format!(
            "run {key:?} names attempt {fencing} of verify job {job}; only the verifier holding that claim admits it"
        )))
    }
}

/// A new principal `name` whose look-alike skeleton
/// ([`verdict_core::contracts::primitives::name_skeleton`]) is another stored principal's is
/// refused in the transaction that would append it, so two look-alikes added at once cannot
/// both be stored. The PostgreSQL trigger holds the same (schema version 35).
fn no_principal_reads_like(tx: &Connection, name: &str) -> Result<()> {
    use verdict_core::contracts::primitives::name_skeleton;
    let skeleton = name_skeleton(name);
    let mut stmt = tx
        .prepare_cached("SELECT key FROM principals WHERE key <> ?1")
        .map_err(err)?;
    let keys = stmt
        .query_map([name], |r| r.get::<_, String>(0))
        .map_err(err)?;
    for key in keys {
        let key = key.map_err(err)?;
        if name_skeleton(&key) == skeleton {
            return Err(StoreError::Invalid {
                what: "principal name",
                message: format!(
                    "{name:?} reads like principal {key:?}, already stored (both read as \
                     {skeleton:?})"
                ),
            });
        }
    }
    Ok(())
}

/// A stored person's decision, in the transaction that appends it: an approval names the
/// reasons it clears, the policy it names is a gate's current policy and the subject its
/// execution's current subject; otherwise it is refused. The engine checks the same before it
/// writes; here the store holds it against any other writer, as the PostgreSQL trigger does for
/// every principal acting as its own identity (schemas 21 and 34): an actor that is not a
/// stored person is held to none of it there either.
fn human_decision_on_what_is_current(
    tx: &Connection,
    principal: &str,
    key: &str,
    body: &str,
) -> Result<()> {
    let (stored, approval_without_clears, policy_current, subject_current): (
        bool,
        bool,
        bool,
        bool,
    ) = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM principals p WHERE p.key = ?2 AND p.role = 'human'),                     json_extract(?1, '$.decision') = 'approve'                         AND json_type(?1, '$.clears') IS NOT 'array',                     EXISTS (SELECT 1 FROM pointers g WHERE g.pointer = 'gate'                         AND json_extract(g.value, '$.policy_digest') = json_extract(?1, '$.policy_digest')),                     EXISTS (SELECT 1 FROM subjects s JOIN pointers x                         ON x.pointer = 'execution' AND x.name = s.execution_id                         WHERE s.key = json_extract(?1, '$.subject_digest')                         AND json_extract(x.value, '$.subject_digest') = s.key)",
        )
        .map_err(err)?
        .query_row(rusqlite::params![body, principal], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(err)?;
    if !stored {
        return Ok(());
    }
    let why = if approval_without_clears {
        "an approval names the human_required reasons it clears"
    } else if !policy_current {
        "the policy it names is no gate's current policy"
    } else if !subject_current {
        "the subject it names is not its execution's current subject"
    } else {
        return Ok(());
    };
    Err(StoreError::Refused(format!("human decision {key}: {why}")))
}

/// Refuses the denial `body` when [`crate::DENIALS_PER_MINUTE`] denials naming its principal
/// were appended within the last 60 seconds (audit time, as `recorded_at` is written): among
/// that principal's latest denials only, so the check reads a bounded number of rows.
fn denial_within_bound(tx: &Transaction<'_>, body: &str) -> Result<()> {
    let since = crate::audit::audit_time(60);
    let (principal, recent): (Option<String>, u32) = tx
        .prepare_cached(
            "SELECT json_extract(?1, '$.principal'), \
                    (SELECT count(*) FROM (SELECT d.seq FROM denials d \
                         WHERE d.principal = json_extract(?1, '$.principal') \
                         ORDER BY d.seq DESC LIMIT ?3) AS recent \
                     JOIN audit_events e ON e.seq = recent.seq WHERE e.recorded_at >= ?2)",
        )
        .map_err(err)?
        .query_row(
            rusqlite::params![body, since, crate::DENIALS_PER_MINUTE],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(err)?;
    if recent >= crate::DENIALS_PER_MINUTE {
        return Err(StoreError::DenialBound(format!(
            "denials of {}: {} were recorded within the last minute, so this one is not appended (the refusal stands)",
            principal.as_deref().unwrap_or("?"),
            crate::DENIALS_PER_MINUTE
        )));
    }
    Ok(())
}

/// Whether some operator holds a token: its own record's while it never changed it, else the
/// one its latest change names.
const OPERATOR_HOLDS_A_TOKEN: &str = "SELECT EXISTS (SELECT 1 FROM principals p \
     WHERE p.role = 'operator' AND (\
       NOT EXISTS (SELECT 1 FROM credential_changes c WHERE c.principal = p.key) \
       OR EXISTS (SELECT 1 FROM credential_changes c WHERE c.principal = p.key \
         AND c.token_sha256 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM credential_changes d \
           WHERE d.principal = c.principal AND d.n > c.n))))";

/// Appends a blob's record and its bytes with the audit event, or returns the stored record
/// when its key (the digest of the same bytes) is stored already; then a writer other than the
/// stored one is appended once as a holder (`holder`), without the bytes.
fn put_blob_tx(
    tx: &Transaction<'_>,
    actor: &Actor,
    item: Prepared,
    holder: Prepared,
    bytes: &[u8],
) -> Result<Stored> {
    let existing = tx
        .prepare_cached(&find_sql(Table::Blobs))
        .map_err(err)?
        .query_row([&item.key], raw)
        .optional()
        .map_err(err)?;
    if let Some(existing) = existing {
        let existing = item.settle(to_stored(Table::Blobs, existing)?)?;
        let writer = existing.decode::<crate::records::BlobRecord>()?.writer;
        if writer.as_str() != actor.principal {
            let held: bool = tx
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM blob_holders WHERE blob = ?1 AND holder = ?2)",
                )
                .map_err(err)?
                .query_row(params![existing.key, actor.principal], |r| r.get(0))
                .map_err(err)?;
            if !held {
                // A holder record, which no clock decides.
                append_tx(tx, actor, vec![holder], None)?;
            }
        }
        return Ok(existing);
    }
    let (seq, prev_hash) = head(tx)?.map_or((0, GENESIS_HASH.to_owned()), |h| (h.seq, h.hash));
    let now = now_utc();
    let event = EventFields {
        seq: seq + 1,
        prev_hash: &prev_hash,
        event_type: "append",
        table: Table::Blobs.name(),
        key: &item.key,
        principal: &actor.principal,
        role: actor.role.as_str(),
        payload_digest: item.digest.as_str(),
        correlation: item.correlation.as_deref(),
        recorded_at: &now,
    };
    let hash = event.hash();
    let mut insert_event = tx.prepare_cached(INSERT_EVENT).map_err(err)?;
    insert_event_fields(&mut insert_event, &event, &hash)?;
    let at = to_i64(event.seq, "audit seq")?;
    let changed = tx
        .prepare_cached(
            "INSERT INTO blobs (seq, key, digest, body, bytes) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(err)?
        .execute(params![
            at,
            item.key,
            item.digest.as_str(),
            item.body,
            bytes
        ])
        .map_err(err)?;
    one_row(changed, &format!("blob {}", item.key))?;
    Ok(Stored {
        table: Table::Blobs,
        seq: event.seq,
        key: item.key,
        digest: item.digest,
        body: item.body,
        inserted: true,
        counted: None,
    })
}

/// The clock is chosen once, under its one name, before the store's first principal: checked
/// in the transaction that records it, so it cannot be chosen again or after the fact.
fn clock_may_be_chosen(tx: &Transaction<'_>, cas: &PreparedCas) -> Result<()> {
    let principals: i64 = tx
        .prepare_cached("SELECT count(*) FROM principals")
        .map_err(err)?
        .query_row([], |r| r.get(0))
        .map_err(err)?;
    if principals > 0 || cas.expected.is_some() || cas.name != crate::records::CLOCK_POINTER {
        return Err(StoreError::Refused(
            "the store's clock is chosen once, when the store is initialised, before its first principal".into(),
        ));
    }
    Ok(())
}

fn cas_tx(tx: &Transaction<'_>, actor: &Actor, cas: &PreparedCas) -> Result<CasOutcome> {
    if cas.kind == PointerKind::Clock {
        clock_may_be_chosen(tx, cas)?;
    }
    let current = pointer_row(tx, cas.kind, &cas.name)?;
    let (revision, value) = current
        .as_ref()
        .map_or((0, None), |p| (p.revision, p.value.clone()));
    if revision != cas.expected_revision || value != cas.expected {
        return Ok(CasOutcome::Stale(current));
    }
    let event = AuditEvent::next(
        head(tx)?.as_ref(),
        "cas",
        Table::PointerChanges.name(),
        &cas.change.key,
        &actor.principal,
        actor.role.as_str(),
        cas.change.digest.as_str(),
        cas.change.correlation.as_deref(),
        &now_utc(),
    );
    insert_event(tx, &event)?;
    let mut insert = tx
        .prepare_cached(&insert_sql(Table::PointerChanges))
        .map_err(err)?;
    insert_row(&mut insert, &cas.change, event.seq, None)?;
    let new_revision = to_i64(revision + 1, "pointer revision")?;
    let sql = if current.is_none() {
        "INSERT INTO pointers (pointer, name, revision, value) VALUES (?1, ?2, ?3, ?4)"
    } else {
        "UPDATE pointers SET revision = ?3, value = ?4 WHERE pointer = ?1 AND name = ?2"
    };
    let changed = tx
        .prepare_cached(sql)
        .map_err(err)?
        .execute(params![cas.kind.as_str(), cas.name, new_revision, cas.new])
        .map_err(err)?;
    one_row(
        changed,
        &format!("pointer {}:{}", cas.kind.as_str(), cas.name),
    )?;
    Ok(CasOutcome::Done(Pointer {
        kind: cas.kind,
        name: cas.name.clone(),
        revision: revision + 1,
        value: cas.new.clone(),
    }))
}

impl SqliteBackend {
    /// Opens the store at `path`, creating and migrating it on first use when `migrate` is set.
    pub(crate) async fn open(path: &Path, migrate: bool) -> Result<Self> {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || Self::open_blocking(path, migrate))
            .await
            .map_err(|e| StoreError::Backend {
                backend: "sqlite",
                message: format!("open task failed: {e}"),
            })?
    }

    fn open_blocking(path: PathBuf, migrate: bool) -> Result<Self> {
        let mut conn = connect(&path)?;
        let found = version(&conn)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < SCHEMA_VERSION {
            if !migrate {
                return Err(StoreError::SchemaTooOld {
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            migrate_conn(&mut conn)?;
        }
        Ok(Self {
            path,
            conn: Arc::new(Mutex::new(conn)),
            trips: Arc::default(),
            queue_changes: tokio::sync::watch::Sender::new(0),
            manual: Arc::default(),
        })
    }

    /// Tells this handle's waits that it changed the job queue.
    pub(crate) fn queue_changed(&self) {
        self.queue_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver of [`SqliteBackend::queue_changed`].
    pub(crate) fn queue_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.queue_changes.subscribe()
    }

    pub(crate) async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        self.trips.add(1);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().map_err(|_| StoreError::Backend {
                backend: "sqlite",
                message: "connection lock poisoned by a panicked writer".into(),
            })?;
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("database task failed: {e}"),
        })?
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn manual_time(&self) -> &crate::backend::ManualTime {
        &self.manual
    }

    fn round_trips(&self) -> u64 {
        self.trips.get()
    }

    async fn grants_with_revocations(
        &self,
        principal: &str,
    ) -> Result<Vec<(Stored, Option<Stored>)>> {
        let principal = principal.to_owned();
        self.with(move |conn| grants_of(conn, &principal)).await
    }

    async fn binds_evidence_grants(&self, actor: &Actor) -> Result<bool> {
        // Every append of a stored runner's evidence checks its grant under the write lock
        // (`evidence_under_a_write_grant`), and the engine acts only for stored principals:
        // answered without a read, so the engine's write stays one call.
        Ok(actor.role == ActorRole::Runner)
    }

    async fn subject_and_grants(&self, key: &str, principal: &str) -> Result<SubjectAndGrants> {
        let (key, principal) = (key.to_owned(), principal.to_owned());
        self.with(move |conn| {
            let subject = conn
                .prepare_cached(&find_sql(Table::Subjects))
                .map_err(err)?
                .query_row([&key], raw)
                .optional()
                .map_err(err)?
                .map(|r| to_stored(Table::Subjects, r))
                .transpose()?;
            Ok((subject, grants_of(conn, &principal)?))
        })
        .await
    }

    async fn schema_version(&self) -> Result<i64> {
        self.with(|c| version(c)).await
    }

    async fn clock_now(&self) -> Result<verdict_core::contracts::Timestamp> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| StoreError::Backend {
                backend: "sqlite",
                message: format!("the system clock is before 1970: {e}"),
            })?
            .as_nanos();
        let nanos = i128::try_from(nanos).map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("the system clock is out of range: {e}"),
        })?;
        Ok(verdict_core::contracts::Timestamp::from_unix_nanos(nanos))
    }

    async fn append(&self, actor: &Actor, items: Vec<Prepared>) -> Result<Vec<Stored>> {
        let (actor, manual) = (actor.clone(), self.manual.get());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            let out = append_tx(&tx, &actor, items, manual)?;
            tx.commit().map_err(err)?;
            Ok(out)
        })
        .await
    }

    async fn put_blob(
        &self,
        actor: &Actor,
        item: Prepared,
        holder: Prepared,
        bytes: Vec<u8>,
    ) -> Result<Stored> {
        let actor = actor.clone();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            let stored = put_blob_tx(&tx, &actor, item, holder, &bytes)?;
            tx.commit().map_err(err)?;
            Ok(stored)
        })
        .await
    }

    async fn blob_bytes(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = key.to_owned();
        self.with(move |conn| {
            conn.prepare_cached("SELECT bytes FROM blobs WHERE key = ?1")
                .map_err(err)?
                .query_row([key], |r| r.get(0))
                .optional()
                .map_err(err)
        })
        .await
    }

    async fn append_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        items: Vec<Prepared>,
    ) -> Result<Vec<Stored>> {
        let (actor, claim, manual) = (actor.clone(), claim.clone(), self.manual.get());
        let (out, completed) = self
            .with(move |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(err)?;
                // The claim is checked under the write lock the append holds too: no claim of
                // the job can come between the check and the write.
                crate::jobs::renew_claim_sqlite(&tx, &actor, &claim, manual)?;
                let out = append_tx(&tx, &actor, items, manual)?;
                // The job ends after its last effect, in the same transaction.
                let completed = crate::jobs::complete_claimed_sqlite(&tx, &actor, &claim, manual)?;
                tx.commit().map_err(err)?;
                Ok((out, completed))
            })
            .await?;
        if completed {
            self.queue_changed();
        }
        Ok(out)
    }

    async fn append_enqueuing(
        &self,
        actor: &Actor,
        items: Vec<Prepared>,
        jobs: Vec<crate::jobs::NewJob>,
    ) -> Result<(Vec<Stored>, Vec<crate::jobs::Job>)> {
        let (actor, manual) = (actor.clone(), self.manual.get());
        let out = self
            .with(move |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(err)?;
                let out = append_tx(&tx, &actor, items, manual)?;
                // The jobs after the rows they are about, in the same transaction.
                let jobs = crate::jobs::enqueue_sqlite(&tx, &actor, &jobs, manual)?;
                tx.commit().map_err(err)?;
                Ok((out, jobs))
            })
            .await?;
        self.queue_changed();
        Ok(out)
    }

    async fn cas(&self, actor: &Actor, cas: PreparedCas) -> Result<CasOutcome> {
        self.cas_then_append(actor, cas, Vec::new())
            .await
            .map(|(outcome, _)| outcome)
    }

    async fn cas_then_append(
        &self,
        actor: &Actor,
        cas: PreparedCas,
        items: Vec<Prepared>,
    ) -> Result<(CasOutcome, Vec<Stored>)> {
        let (actor, manual) = (actor.clone(), self.manual.get());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            let outcome = cas_tx(&tx, &actor, &cas)?;
            if !matches!(outcome, CasOutcome::Done(_)) {
                return Ok((outcome, Vec::new()));
            }
            let out = append_tx(&tx, &actor, items, manual)?;
            tx.commit().map_err(err)?;
            Ok((outcome, out))
        })
        .await
    }

    async fn find(&self, table: Table, filter: Filter) -> Result<Vec<Stored>> {
        self.with(move |conn| {
            let sql = format!(
                "SELECT seq, key, digest, body, {} FROM {} WHERE {} ORDER BY seq",
                counted_col(table),
                table.name(),
                filter.clause(table, Dialect::Sqlite)
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(err)?;
            let rows = stmt
                .query_map([filter.value()], raw)
                .map_err(err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err)?;
            rows.into_iter().map(|r| to_stored(table, r)).collect()
        })
        .await
    }

    async fn principal_by_token(&self, token_sha256: &str) -> Result<Option<Stored>> {
        // One read: the principal whose own record holds the hash while it never changed its
        // token, or the one whose latest change of token names it (schema version 30).
        let token_sha256 = token_sha256.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT p.seq, p.key, p.digest, p.body, NULL FROM principals p \
                     WHERE (p.token_sha256 = ?1 AND NOT EXISTS \
                         (SELECT 1 FROM credential_changes c WHERE c.principal = p.key)) \
                        OR p.key = (SELECT c.principal FROM credential_changes c \
                         WHERE c.token_sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM credential_changes d \
                             WHERE d.principal = c.principal AND d.n > c.n)) \
                     ORDER BY p.seq",
                )
                .map_err(err)?;
            let rows = stmt
                .query_map([token_sha256], raw)
                .map_err(err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err)?;
            Ok(rows
                .into_iter()
                .map(|r| to_stored(Table::Principals, r))
                .collect::<Result<Vec<_>>>()?
                .pop())
        })
        .await
    }

    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>> {
        let name = name.to_owned();
        self.with(move |conn| pointer_row(conn, kind, &name)).await
    }

    async fn pointers(&self) -> Result<Vec<Pointer>> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT pointer, name, revision, value FROM pointers ORDER BY pointer, name",
                )
                .map_err(err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })
                .map_err(err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err)?;
            rows.into_iter()
                .map(|(kind, name, revision, value)| {
                    let kind =
                        PointerKind::from_name(&kind).ok_or_else(|| StoreError::Corrupt {
                            table: "pointers",
                            key: format!("{kind}:{name}"),
                            message: "unknown pointer kind".into(),
                        })?;
                    Ok(Pointer {
                        kind,
                        revision: seq_from("pointers", &name, revision)?,
                        name,
                        value,
                    })
                })
                .collect()
        })
        .await
    }

    async fn derived_drift(&self) -> Result<Vec<Drift>> {
        // SQLite's derived columns are generated when read, so no row can hold a stale value;
        // but whoever writes the file can rewrite a column's definition (or a trigger, or an
        // index) in `sqlite_master` without touching a row or an event. So the definitions
        // themselves are compared with what this binary's migrations make.
        // And whoever writes the file can rebuild an index without a row (a changed index
        // definition, `REINDEX`, the definition put back): every read through that index then
        // misses the row while the walk, which reads tables in seq order, finds it. SQLite's own
        // integrity check compares every index with its table.
        self.with(|conn| {
            let mut drift = schema_drift(conn)?;
            drift.extend(integrity_drift(conn)?);
            Ok(drift)
        })
        .await
    }

    async fn scan(&self, table: Table, after_seq: i64, limit: u32) -> Result<Vec<RawRow>> {
        self.with(move |conn| {
            let sql = format!(
                "SELECT seq, key, digest, body, {} FROM {} WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                counted_col(table),
                table.name()
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(err)?;
            stmt.query_map(params![after_seq, limit], |r| {
                Ok(RawRow {
                    seq: r.get(0)?,
                    key: r.get(1)?,
                    digest: r.get(2)?,
                    body: r.get(3)?,
                    counted: r.get(4)?,
                })
            })
            .map_err(err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(err)
        })
        .await
    }

    async fn audit_events(&self, after_seq: u64, limit: u32) -> Result<Vec<AuditEvent>> {
        let after = to_i64(after_seq, "seq")?;
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, prev_hash, hash, event_type, tbl, key, principal, role, payload_digest, \
                     correlation, recorded_at FROM audit_events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                )
                .map_err(err)?;
            let rows = stmt
                .query_map(params![after, limit], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        AuditEvent {
                            seq: 0,
                            prev_hash: r.get(1)?,
                            hash: r.get(2)?,
                            event_type: r.get(3)?,
                            table: r.get(4)?,
                            key: r.get(5)?,
                            principal: r.get(6)?,
                            role: r.get(7)?,
                            payload_digest: r.get(8)?,
                            correlation: r.get(9)?,
                            recorded_at: r.get(10)?,
                        },
                    ))
                })
                .map_err(err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err)?;
            rows.into_iter()
                .map(|(seq, mut e)| {
                    e.seq = seq_from("audit_events", &e.key, seq)?;
                    Ok(e)
                })
                .collect()
        })
        .await
    }

    async fn audit_head(&self) -> Result<Option<ChainHead>> {
        self.with(|conn| head(conn)).await
    }

    async fn snapshot(&self) -> Result<Self> {
        // A connection of its own, read-only, inside a read transaction: in WAL mode it keeps
        // seeing the database as of its first read while the store's connection appends.
        let (path, trips) = (self.path.clone(), Arc::clone(&self.trips));
        let manual = Arc::clone(&self.manual);
        tokio::task::spawn_blocking(move || {
            let conn = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| location(&path, e.to_string()))?;
            wait_when_busy(&conn)?;
            conn.execute_batch("BEGIN DEFERRED").map_err(err)?;
            // The first read fixes what the transaction sees.
            conn.query_row("SELECT count(*) FROM audit_events", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(err)?;
            Ok(Self {
                path,
                conn: Arc::new(Mutex::new(conn)),
                trips,
                queue_changes: tokio::sync::watch::Sender::new(0),
                manual,
            })
        })
        .await
        .map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("snapshot task failed: {e}"),
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_write_pauses_briefly_and_gives_up_after_the_busy_timeout() {
        let pauses: Vec<Duration> = (0..).map_while(busy_pause).collect();
        assert_eq!(pauses.first(), Some(&BUSY_PAUSE_FIRST));
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]), "pauses shrink");
        assert!(pauses.iter().all(|p| *p <= BUSY_PAUSE_MAX));
        // The last retry begins before the timeout and none after it: the waits add up to the
        // timeout, within one pause.
        let total: Duration = pauses.iter().sum();
        assert!(total >= BUSY_TIMEOUT, "gave up after {total:?}");
        assert!(total < BUSY_TIMEOUT + BUSY_PAUSE_MAX, "waited {total:?}");
        assert!(busy_pause(-1).is_none());
    }
}
