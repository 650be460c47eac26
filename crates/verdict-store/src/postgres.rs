//! The PostgreSQL backend. Every write calls the SECURITY DEFINER routine of its table, which
//! holds the call to the role the connection acts in: a batch first drops to the database role
//! of the actor's role (`SET LOCAL ROLE`), a single append is one routine call on a connection
//! kept for single appends. So the database enforces who may write what; the routine appends
//! the audit event and computes its hash.

use crate::actor::{Actor, ActorRole};
use crate::audit::{AuditEvent, ChainHead};
use crate::backend::{
    Backend, CasOutcome, Drift, Filter, Prepared, PreparedCas, RawRow, parse_digest, seq_from,
    to_i64,
};
use crate::error::{Result, StoreError};
use crate::location::redact_url;
use crate::migrations::{self, MigrationReport, SCHEMA_VERSION};
use crate::records::{PointerKind, Table};
use crate::store::{Pointer, Stored};
use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Executor as _, Postgres, Row as _};
use std::time::Duration;
use tokio::sync::Mutex;

/// The role prefix used when none is configured.
pub const DEFAULT_ROLE_PREFIX: &str = "verdict_";

/// Advisory lock key serialising migrations of one database.
const MIGRATE_LOCK: i64 = 8_531_478_330_712_965_378;

pub(crate) struct PgBackend {
    pub(crate) pool: PgPool,
    /// A pool connection kept checked out for single appends, so that one costs one round trip:
    /// a connection taken from the pool and given back for every call adds a ping on acquire
    /// and another on release. `None` inside until first use, or after the connection failed;
    /// `None` outside when the pool has a single connection, which cannot be set aside.
    writer: Option<Mutex<Option<PoolConnection<Postgres>>>>,
    prefix: String,
    describe: String,
    /// Set on a snapshot ([`Backend::snapshot`]): a connection of its own inside a read-only
    /// REPEATABLE READ transaction, which every read of this backend goes through.
    snapshot: Option<Mutex<sqlx::PgConnection>>,
}

/// The text of an error from sqlx. For an error the server sent, its message and SQLSTATE:
/// sqlx's own text of it ends with the line of the server's C source that raised it, which
/// tells a reader nothing.
fn pg_text(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => format!(
            "the database said: {} (SQLSTATE {})",
            db.message(),
            db.code().unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

pub(crate) fn pg_err(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        match db.code().as_deref() {
            Some("42501") => return StoreError::Denied(db.message().to_owned()),
            Some("23505") => return StoreError::Duplicate(db.message().to_owned()),
            _ => {}
        }
    }
    StoreError::Backend {
        backend: "postgres",
        message: pg_text(&e),
    }
}

/// Whether `prefix` can start a role name without quoting surprises.
fn check_prefix(prefix: &str) -> Result<()> {
    let b = prefix.as_bytes();
    let ok = matches!(b.first(), Some(b'a'..=b'z' | b'_'))
        && b.len() <= 40
        && b.iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "role prefix",
            message: format!("{prefix:?} does not match ^[a-z_][a-z0-9_]{{0,39}}$"),
        })
    }
}

/// The database role names for a prefix: the owner, then one per actor role.
#[must_use]
pub fn role_names(prefix: &str) -> Vec<String> {
    std::iter::once(format!("{prefix}owner"))
        .chain(
            ActorRole::ALL
                .iter()
                .map(|r| format!("{prefix}{}", r.as_str())),
        )
        .collect()
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn migration_sql(sql: &str, prefix: &str) -> String {
    let mut out = sql.replace("__PREFIX_LITERAL__", &format!("'{prefix}'"));
    out = out.replace("__OWNER__", &quote(&format!("{prefix}owner")));
    for role in ActorRole::ALL {
        let placeholder = format!("__{}__", role.as_str().to_uppercase());
        out = out.replace(&placeholder, &quote(&format!("{prefix}{}", role.as_str())));
    }
    out
}

async fn version(conn: &mut sqlx::PgConnection) -> Result<i64> {
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('verdict.schema_migrations') IS NOT NULL")
            .fetch_one(&mut *conn)
            .await
            .map_err(pg_err)?;
    if !exists {
        return Ok(0);
    }
    sqlx::query_scalar("SELECT coalesce(max(version), 0)::bigint FROM verdict.schema_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(pg_err)
}

async fn pool_version(pool: &PgPool) -> Result<i64> {
    let mut conn = pool.acquire().await.map_err(pg_err)?;
    version(&mut conn).await
}

async fn stored_prefix(pool: &PgPool) -> Result<Option<String>> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('verdict.store_meta') IS NOT NULL")
        .fetch_one(pool)
        .await
        .map_err(pg_err)?;
    if !exists {
        return Ok(None);
    }
    sqlx::query_scalar("SELECT value FROM verdict.store_meta WHERE key = 'role_prefix'")
        .fetch_optional(pool)
        .await
        .map_err(pg_err)
}

/// What a role that migrates must be allowed to do, for the message when it may not.
const MIGRATE_NEEDS: &str = "migrating needs a superuser, or a role with CREATEROLE that may \
     create a schema in this database (its owner, say)";

/// A refusal while making roles or the schema, with what migrating needs; other errors as they
/// are.
fn migrate_err(e: sqlx::Error) -> StoreError {
    match pg_err(e) {
        StoreError::Denied(m) => StoreError::Denied(format!("{MIGRATE_NEEDS}: {m}")),
        other => other,
    }
}

/// Creates the roles that do not exist yet. Role names are global to the server, so several
/// databases (and concurrent migrations) may share them; a lost creation race is retried.
async fn ensure_roles(pool: &PgPool, prefix: &str) -> Result<()> {
    for name in role_names(prefix) {
        let sql = format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN \
             CREATE ROLE {} NOLOGIN; END IF; END $$",
            quote(&name)
        );
        let mut attempt = 0;
        loop {
            match pool
                .execute(sqlx::raw_sql(AssertSqlSafe(sql.clone())))
                .await
            {
                Ok(_) => break,
                // Concurrent CREATE ROLE fails with unique_violation, duplicate_object or
                // "tuple concurrently updated"; each means: look again. A refusal is final.
                Err(e) if attempt < 5 && !is_denied(&e) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
                }
                Err(e) => return Err(migrate_err(e)),
            }
        }
    }
    Ok(())
}

fn is_denied(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42501"))
}

/// Makes the session user a member of every role of the prefix it is not a member of yet: it
/// must act as the owner to migrate (`CREATE SCHEMA ... AUTHORIZATION`, `SET ROLE`), and as the
/// principal roles to write. A superuser is a member of everything already.
async fn grant_roles_to_session_user(pool: &PgPool, prefix: &str) -> Result<()> {
    let superuser: bool =
        sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = session_user")
            .fetch_one(pool)
            .await
            .map_err(pg_err)?;
    if superuser {
        return Ok(());
    }
    for name in role_names(prefix) {
        let member: bool = sqlx::query_scalar("SELECT pg_has_role(session_user, $1, 'MEMBER')")
            .bind(&name)
            .fetch_one(pool)
            .await
            .map_err(pg_err)?;
        if member {
            continue;
        }
        let sql = format!("GRANT {} TO SESSION_USER", quote(&name));
        pool.execute(sqlx::raw_sql(AssertSqlSafe(sql)))
            .await
            .map_err(migrate_err)?;
    }
    Ok(())
}

/// The refusal of a role prefix other than the one a database was first migrated with: its
/// roles and the grants on its routines are named by that prefix, so it cannot change.
fn prefix_kept(stored: &str, asked: &str) -> StoreError {
    StoreError::Refused(format!(
        "this database was migrated with role prefix {stored:?}, not {asked:?}; a database keeps \
         the prefix it was first migrated with, so leave out --role-prefix (or give {stored:?}), \
         or migrate a new database with {asked:?}"
    ))
}

/// Applies pending migrations: creates the roles, then the schema, under an advisory lock.
async fn migrate_pool(pool: &PgPool, prefix: Option<&str>) -> Result<(MigrationReport, String)> {
    let prefix = match (stored_prefix(pool).await?, prefix) {
        (Some(stored), Some(asked)) if stored != asked => {
            return Err(prefix_kept(&stored, asked));
        }
        (Some(stored), _) => stored,
        (None, asked) => asked.unwrap_or(DEFAULT_ROLE_PREFIX).to_owned(),
    };
    check_prefix(&prefix)?;
    let found = pool_version(pool).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    ensure_roles(pool, &prefix).await?;
    grant_roles_to_session_user(pool, &prefix).await?;
    let mut tx = pool.begin().await.map_err(pg_err)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(pg_err)?;
    let from = version(&mut tx).await?;
    if from > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: from,
            supported: SCHEMA_VERSION,
        });
    }
    for m in migrations::POSTGRES.iter().filter(|m| m.version > from) {
        tx.execute(sqlx::raw_sql(AssertSqlSafe(migration_sql(m.sql, &prefix))))
            .await
            .map_err(migrate_err)?;
        sqlx::query("INSERT INTO verdict.schema_migrations (version, name) VALUES ($1, $2)")
            .bind(i32::try_from(m.version).unwrap_or(i32::MAX))
            .bind(m.name)
            .execute(&mut *tx)
            .await
            .map_err(pg_err)?;
    }
    let to = version(&mut tx).await?;
    tx.commit().await.map_err(pg_err)?;
    Ok((MigrationReport { from, to }, prefix))
}

async fn connect(url: &str, max_connections: u32) -> Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(Duration::from_secs(30))
        .connect(url)
        .await
        .map_err(|e| StoreError::Location {
            location: redact_url(url),
            message: pg_text(&e),
        })
}

/// Applies pending migrations to the database at `url`.
pub(crate) async fn migrate(url: &str, prefix: Option<&str>) -> Result<MigrationReport> {
    let pool = connect(url, 2).await?;
    let result = migrate_pool(&pool, prefix).await.map(|(r, _)| r);
    pool.close().await;
    result
}

fn counted_col(table: Table) -> &'static str {
    if table == Table::VerificationResults {
        "counted"
    } else {
        "NULL::boolean"
    }
}

fn row_to_stored(table: Table, row: &PgRow) -> Result<Stored> {
    let seq: i64 = row.try_get(0).map_err(pg_err)?;
    let key: String = row.try_get(1).map_err(pg_err)?;
    let digest: String = row.try_get(2).map_err(pg_err)?;
    Ok(Stored {
        table,
        seq: seq_from(table.name(), &key, seq)?,
        digest: parse_digest(table, &key, &digest)?,
        body: row.try_get(3).map_err(pg_err)?,
        counted: row.try_get(4).map_err(pg_err)?,
        inserted: false,
        key,
    })
}

fn row_to_pointer(row: &PgRow) -> Result<Pointer> {
    let kind: String = row.try_get(0).map_err(pg_err)?;
    let name: String = row.try_get(1).map_err(pg_err)?;
    let revision: i64 = row.try_get(2).map_err(pg_err)?;
    let k = PointerKind::from_name(&kind).ok_or_else(|| StoreError::Corrupt {
        table: "pointers",
        key: format!("{kind}:{name}"),
        message: "unknown pointer kind".into(),
    })?;
    Ok(Pointer {
        kind: k,
        revision: seq_from("pointers", &name, revision)?,
        value: row.try_get(3).map_err(pg_err)?,
        name,
    })
}

impl PgBackend {
    /// Connects, checks the schema version, and migrates on first use when `migrate` is set.
    pub(crate) async fn open(
        url: &str,
        migrate: bool,
        prefix: Option<&str>,
        max_connections: u32,
    ) -> Result<Self> {
        let pool = connect(url, max_connections).await?;
        let found = pool_version(&pool).await?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        let prefix = if found < SCHEMA_VERSION {
            if !migrate {
                return Err(StoreError::SchemaTooOld {
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            migrate_pool(&pool, prefix).await?.1
        } else {
            let stored = stored_prefix(&pool)
                .await?
                .ok_or_else(|| StoreError::Corrupt {
                    table: "store_meta",
                    key: "role_prefix".into(),
                    message: "missing".into(),
                })?;
            if let Some(asked) = prefix.filter(|p| *p != stored) {
                return Err(prefix_kept(&stored, asked));
            }
            stored
        };
        // The prefix is part of where the store is: its roles are named by it.
        let describe = format!("{} (role prefix {prefix:?})", redact_url(url));
        Ok(Self {
            pool,
            writer: (max_connections >= 2).then(|| Mutex::new(None)),
            prefix,
            describe,
            snapshot: None,
        })
    }

    /// Appends one record on the kept connection, or through the pool when that connection is
    /// busy with another single append (concurrent writers then proceed as before) or there is
    /// none. The routine call is a transaction of its own either way.
    async fn put_one(&self, actor: &Actor, item: &Prepared) -> Result<Vec<Stored>> {
        let run = std::slice::from_ref(item);
        let Some(mut slot) = self.writer.as_ref().and_then(|w| w.try_lock().ok()) else {
            return settle_run(run, call_put_one(&self.pool, actor, item).await);
        };
        let conn = match slot.as_mut() {
            Some(conn) => conn,
            None => slot.insert(self.pool.acquire().await.map_err(pg_err)?),
        };
        let rows = call_put_one(&mut **conn, actor, item).await;
        // After any error the connection goes back to the pool, which tests it and drops it if
        // it is broken: a server ending the session reports that as a database error too.
        if rows.is_err() {
            *slot = None;
        }
        settle_run(run, rows)
    }

    /// The rows of a read, from the snapshot's transaction on a snapshot, else from the pool.
    async fn rows(
        &self,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> std::result::Result<Vec<PgRow>, sqlx::Error> {
        match &self.snapshot {
            Some(conn) => query.fetch_all(&mut *conn.lock().await).await,
            None => query.fetch_all(&self.pool).await,
        }
    }

    async fn begin_as(
        &self,
        role: ActorRole,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        // One round trip: open the transaction and drop to the role for its duration.
        let begin = format!(
            "BEGIN; SET LOCAL ROLE {}",
            quote(&format!("{}{}", self.prefix, role.as_str()))
        );
        self.pool
            .begin_with(AssertSqlSafe(begin))
            .await
            .map_err(pg_err)
    }
}

/// Calls the write routine of a run of records of one table, returning its rows.
async fn call_put<'c>(
    executor: impl sqlx::PgExecutor<'c>,
    actor: &Actor,
    run: &[Prepared],
) -> std::result::Result<Vec<PgRow>, sqlx::Error> {
    let Some(first) = run.first() else {
        return Ok(Vec::new());
    };
    let sql = format!(
        "SELECT r_seq, r_digest, r_body, r_inserted, r_counted FROM verdict.put_{}($1, $2, $3, $4, $5, $6)",
        first.table.name()
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(run.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
        .bind(run.iter().map(|i| i.digest.as_str()).collect::<Vec<_>>())
        .bind(run.iter().map(|i| i.body.as_str()).collect::<Vec<_>>())
        .bind(
            run.iter()
                .map(|i| i.correlation.as_deref())
                .collect::<Vec<_>>(),
        )
        .fetch_all(executor)
        .await
}

/// Calls the single-record write routine of a record's table (the same checks and writes as
/// the routine for runs, without the arrays and the loop around them), returning its row.
async fn call_put_one<'c>(
    executor: impl sqlx::PgExecutor<'c>,
    actor: &Actor,
    item: &Prepared,
) -> std::result::Result<Vec<PgRow>, sqlx::Error> {
    let sql = format!(
        "SELECT r_seq, r_digest, r_body, r_inserted, r_counted FROM verdict.put_one_{}($1, $2, $3, $4, $5, $6)",
        item.table.name()
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(&item.key)
        .bind(item.digest.as_str())
        .bind(&item.body)
        .bind(item.correlation.as_deref())
        .fetch_all(executor)
        .await
}

/// Appends a run of records of one table with one call of its write routine.
async fn put_run<'c>(
    executor: impl sqlx::PgExecutor<'c>,
    actor: &Actor,
    run: &[Prepared],
) -> Result<Vec<Stored>> {
    settle_run(run, call_put(executor, actor, run).await)
}

/// The stored rows of a run from the routine's answer, settling each record that was already
/// stored against the stored row.
fn settle_run(
    run: &[Prepared],
    rows: std::result::Result<Vec<PgRow>, sqlx::Error>,
) -> Result<Vec<Stored>> {
    let rows = rows.map_err(pg_err)?;
    let Some(first) = run.first() else {
        return Ok(Vec::new());
    };
    if rows.len() != run.len() {
        return Err(StoreError::Backend {
            backend: "postgres",
            message: format!(
                "put_{} returned {} rows for {} records",
                first.table.name(),
                rows.len(),
                run.len()
            ),
        });
    }
    let mut out = Vec::with_capacity(run.len());
    for (item, row) in run.iter().zip(&rows) {
        let seq: i64 = row.try_get(0).map_err(pg_err)?;
        let digest: String = row.try_get(1).map_err(pg_err)?;
        let inserted: bool = row.try_get(3).map_err(pg_err)?;
        let stored = Stored {
            table: item.table,
            key: item.key.clone(),
            seq: seq_from(item.table.name(), &item.key, seq)?,
            digest: parse_digest(item.table, &item.key, &digest)?,
            body: row.try_get(2).map_err(pg_err)?,
            inserted,
            counted: row.try_get(4).map_err(pg_err)?,
        };
        out.push(if inserted {
            stored
        } else {
            item.settle(stored)?
        });
    }
    Ok(out)
}

/// How migration 3 marks a derived column's comment, followed by the column's expression.
const DERIVED_NOTE: &str = "derived from the body by the write routine: ";
/// How many columns migration 3 turned from generated into derived ones.
const DERIVED_COLUMNS: usize = 47;

#[async_trait]
impl Backend for PgBackend {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn schema_version(&self) -> Result<i64> {
        pool_version(&self.pool).await
    }

    async fn clock_now(&self) -> Result<verdict_core::contracts::Timestamp> {
        // The database's clock, so every client of one store reads the same time.
        let micros: i64 =
            sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
                .fetch_one(&self.pool)
                .await
                .map_err(pg_err)?;
        Ok(verdict_core::contracts::Timestamp::from_unix_nanos(
            i128::from(micros) * 1000,
        ))
    }

    async fn append(&self, actor: &Actor, items: Vec<Prepared>) -> Result<Vec<Stored>> {
        if let [item] = items.as_slice() {
            // One record: the routine call is a transaction of its own, so it is one round trip
            // instead of three. The routine checks the role claim itself (the session must be a
            // member of the claimed role, and the role one its table allows), which is what
            // `SET LOCAL ROLE` adds on the batched path; a refusal leaves nothing behind.
            return self.put_one(actor, item).await;
        }
        let mut tx = self.begin_as(actor.role).await?;
        let mut out = Vec::with_capacity(items.len());
        // One call per run of consecutive items of one table, in order.
        for run in items.chunk_by(|a, b| a.table == b.table) {
            // A refused item drops the transaction, rolling back the whole batch.
            out.extend(put_run(&mut *tx, actor, run).await?);
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(out)
    }

    async fn cas(&self, actor: &Actor, cas: PreparedCas) -> Result<CasOutcome> {
        let mut tx = self.begin_as(actor.role).await?;
        let sql = format!(
            "SELECT r_ok, r_revision, r_value, r_seq FROM verdict.cas_{}($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            cas.kind.as_str()
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(&cas.name)
            .bind(to_i64(cas.expected_revision, "pointer revision")?)
            .bind(cas.expected.as_deref())
            .bind(cas.new.as_deref())
            .bind(&cas.change.key)
            .bind(cas.change.digest.as_str())
            .bind(&cas.change.body)
            .fetch_one(&mut *tx)
            .await
            .map_err(pg_err)?;
        let ok: bool = row.try_get(0).map_err(pg_err)?;
        let revision: i64 = row.try_get(1).map_err(pg_err)?;
        let value: Option<String> = row.try_get(2).map_err(pg_err)?;
        let pointer = Pointer {
            kind: cas.kind,
            name: cas.name.clone(),
            revision: seq_from("pointers", &cas.name, revision)?,
            value,
        };
        if ok {
            tx.commit().await.map_err(pg_err)?;
            Ok(CasOutcome::Done(pointer))
        } else {
            tx.rollback().await.map_err(pg_err)?;
            let absent = pointer.revision == 0 && pointer.value.is_none();
            Ok(CasOutcome::Stale((!absent).then_some(pointer)))
        }
    }

    async fn find(&self, table: Table, filter: Filter) -> Result<Vec<Stored>> {
        let sql = format!(
            "SELECT seq, key, digest, body, {} FROM verdict.{} WHERE {} ORDER BY seq",
            counted_col(table),
            table.name(),
            filter.clause(table, "$1").replace("{schema}", "verdict.")
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(filter.value())
            .fetch_all(&self.pool)
            .await
            .map_err(pg_err)?;
        rows.iter().map(|r| row_to_stored(table, r)).collect()
    }

    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>> {
        let row = sqlx::query("SELECT pointer, name, revision, value FROM verdict.pointers WHERE pointer = $1 AND name = $2")
            .bind(kind.as_str())
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(pg_err)?;
        row.as_ref().map(row_to_pointer).transpose()
    }

    async fn pointers(&self) -> Result<Vec<Pointer>> {
        let rows = self
            .rows(sqlx::query(
                "SELECT pointer, name, revision, value FROM verdict.pointers ORDER BY pointer, name",
            ))
            .await
            .map_err(pg_err)?;
        rows.iter().map(row_to_pointer).collect()
    }

    async fn derived_drift(&self) -> Result<Vec<Drift>> {
        // Since schema version 3 the write routines fill these columns from the body, so a
        // column changed behind the routines' back (triggers disabled by a superuser, say)
        // would no longer be caught by re-hashing the body: each is checked against the
        // expression it was derived with, kept as the column's comment by migration 3.
        let derived = self
            .rows(
                sqlx::query(
                    "SELECT c.relname::text, quote_ident(c.relname::text), quote_ident(a.attname::text), \
                     substr(d.description, length($1) + 1) \
                     FROM pg_description d JOIN pg_class c ON c.oid = d.objoid \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid \
                     WHERE n.nspname = 'verdict' AND d.classoid = 'pg_class'::regclass \
                       AND starts_with(d.description, $1) ORDER BY 1, 3",
                )
                .bind(DERIVED_NOTE),
            )
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| {
                Ok::<_, sqlx::Error>((
                    r.try_get::<String, _>(0)?,
                    r.try_get::<String, _>(1)?,
                    r.try_get::<String, _>(2)?,
                    r.try_get::<String, _>(3)?,
                ))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(pg_err)?;
        let mut drift = Vec::new();
        if derived.len() != DERIVED_COLUMNS {
            drift.push(Drift {
                table: "schema".into(),
                key: None,
                seq: None,
                detail: format!(
                    "{} derived columns are on record, the schema made {DERIVED_COLUMNS}",
                    derived.len()
                ),
            });
        }
        for (table, quoted_table, column, expr) in derived {
            let sql = format!(
                "SELECT key, seq FROM verdict.{quoted_table} \
                 WHERE {column} IS DISTINCT FROM ({expr}) ORDER BY seq LIMIT 100"
            );
            let rows = self
                .rows(sqlx::query(AssertSqlSafe(sql)))
                .await
                .map_err(pg_err)?;
            for r in rows {
                drift.push(Drift {
                    table: table.clone(),
                    key: Some(r.try_get(0).map_err(pg_err)?),
                    seq: Some(r.try_get(1).map_err(pg_err)?),
                    detail: format!("column {column} no longer holds what the body gives"),
                });
            }
        }
        Ok(drift)
    }

    async fn scan(&self, table: Table, after_seq: i64, limit: u32) -> Result<Vec<RawRow>> {
        let sql = format!(
            "SELECT seq, key, digest, body, {} FROM verdict.{} WHERE seq > $1 ORDER BY seq LIMIT $2",
            counted_col(table),
            table.name()
        );
        let rows = self
            .rows(
                sqlx::query(AssertSqlSafe(sql))
                    .bind(after_seq)
                    .bind(i64::from(limit)),
            )
            .await
            .map_err(pg_err)?;
        rows.iter()
            .map(|r| {
                Ok(RawRow {
                    seq: r.try_get(0).map_err(pg_err)?,
                    key: r.try_get(1).map_err(pg_err)?,
                    digest: r.try_get(2).map_err(pg_err)?,
                    body: r.try_get(3).map_err(pg_err)?,
                    counted: r.try_get(4).map_err(pg_err)?,
                })
            })
            .collect()
    }

    async fn audit_events(&self, after_seq: u64, limit: u32) -> Result<Vec<AuditEvent>> {
        let rows = self
            .rows(
                sqlx::query(
                    "SELECT seq, prev_hash, hash, event_type, tbl, key, principal, role, payload_digest, correlation, \
                     recorded_at FROM verdict.audit_events WHERE seq > $1 ORDER BY seq LIMIT $2",
                )
                .bind(to_i64(after_seq, "seq")?)
                .bind(i64::from(limit)),
            )
            .await
            .map_err(pg_err)?;
        rows.iter()
            .map(|r| {
                let key: String = r.try_get(5).map_err(pg_err)?;
                let seq: i64 = r.try_get(0).map_err(pg_err)?;
                Ok(AuditEvent {
                    seq: seq_from("audit_events", &key, seq)?,
                    prev_hash: r.try_get(1).map_err(pg_err)?,
                    hash: r.try_get(2).map_err(pg_err)?,
                    event_type: r.try_get(3).map_err(pg_err)?,
                    table: r.try_get(4).map_err(pg_err)?,
                    key,
                    principal: r.try_get(6).map_err(pg_err)?,
                    role: r.try_get(7).map_err(pg_err)?,
                    payload_digest: r.try_get(8).map_err(pg_err)?,
                    correlation: r.try_get(9).map_err(pg_err)?,
                    recorded_at: r.try_get(10).map_err(pg_err)?,
                })
            })
            .collect()
    }

    async fn audit_head(&self) -> Result<Option<ChainHead>> {
        let rows = self
            .rows(sqlx::query(
                "SELECT seq, hash FROM verdict.audit_events ORDER BY seq DESC LIMIT 1",
            ))
            .await
            .map_err(pg_err)?;
        rows.first()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(pg_err)?;
                Ok(ChainHead {
                    seq: seq_from("audit_events", "", seq)?,
                    hash: r.try_get(1).map_err(pg_err)?,
                })
            })
            .transpose()
    }

    async fn snapshot(&self) -> Result<Self> {
        // A connection taken out of the pool for good (it closes when the snapshot is
        // dropped, ending its transaction), so the pool never hands out one mid-transaction.
        let mut conn = self.pool.acquire().await.map_err(pg_err)?.detach();
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(pg_err)?;
        // The first query fixes what the transaction sees.
        conn.execute("SELECT 1 FROM verdict.audit_events LIMIT 1")
            .await
            .map_err(pg_err)?;
        Ok(Self {
            pool: self.pool.clone(),
            writer: None,
            prefix: self.prefix.clone(),
            describe: self.describe.clone(),
            snapshot: Some(Mutex::new(conn)),
        })
    }
}
