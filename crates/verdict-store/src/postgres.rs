//! The PostgreSQL backend. Every write calls the SECURITY DEFINER routine of its table, which
//! holds the call to the principal the connection acts as: a write transaction first switches
//! to the database identity of the actor's principal (`SET LOCAL ROLE`), and the connection
//! kept for single appends is switched with `SET ROLE` when the actor changes. So the database
//! enforces who may write what; the routine appends the audit event and computes its hash.

use crate::actor::{Actor, ActorRole};
use crate::audit::{AuditEvent, ChainHead};
use crate::backend::{
    Backend, CasOutcome, Dialect, Drift, Filter, Prepared, PreparedCas, RawRow, RoundTrips,
    SubjectAndGrants, parse_digest, seq_from, to_i64,
};
use crate::error::{Result, StoreError};
use crate::location::redact_url;
use crate::migrations::{self, MigrationReport, SCHEMA_VERSION};
use crate::records::{Derivation, PointerKind, Table};
use crate::store::{Pointer, PrincipalInfo, Stored};
use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Executor as _, Postgres, Row as _};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// The connection kept for single appends and the role it acts in (`None`: the
/// login's own identity).
struct Kept {
    conn: PoolConnection<Postgres>,
    role: Option<String>,
    /// The manual time named on the connection for its session (`verdict.manual_now`), as
    /// [`PgBackend::begin_as`] names it for each transaction: its single appends are
    /// transactions of their own, and the routines check grants at the store's time.
    manual: Option<i64>,
}

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
    writer: Option<Mutex<Option<Kept>>>,
    /// A pool connection kept checked out for the plain reads a use case makes before it
    /// writes (who holds a token, the clock, a record, a principal's grants, a pointer), for
    /// the same reason: through the pool each would cost the pool's check of the connection
    /// besides the statement. It acts as the login itself, never as a principal. `None` inside
    /// until first use, or after a read on it failed; `None` outside when the pool has fewer
    /// than three connections, so that one is always left for transactions.
    reader: Option<Mutex<Option<PoolConnection<Postgres>>>>,
    prefix: String,
    /// Where the store is, with its credentials: a principal's login is given as this URL
    /// with the principal's user and password instead.
    url: String,
    /// The database role each principal acts as (schema version 7), as looked up once: the
    /// mapping is append-only, so what was found stays true.
    identities: Arc<std::sync::Mutex<HashMap<String, String>>>,
    describe: String,
    /// Round trips made through this handle and its snapshots ([`RoundTrips`]).
    trips: Arc<RoundTrips>,
    /// Set on a snapshot ([`Backend::snapshot`]): a connection of its own inside a read-only
    /// REPEATABLE READ transaction, which every read of this backend goes through.
    snapshot: Option<Mutex<sqlx::PgConnection>>,
    /// The handle's wake-ups for waiting workers ([`crate::jobs::JobQueue::wait_for_jobs`]).
    wakeups: Arc<crate::jobs::PgWakeups>,
    /// The time the handle's manual clock reads, named to the database at the start of each
    /// transaction the handle opens (`verdict.manual_now`), shared with its snapshots.
    manual: Arc<crate::backend::ManualTime>,
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

/// Whether `e` says the database is away rather than that it refused or failed the statement:
/// the socket failed (refused, reset, closed), no connection came free in time, the driver's
/// connection task died, or the server said so (SQLSTATE class 08, a connection exception;
/// 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now; 53300 too many
/// connections).
fn pg_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

/// The SQLSTATE the token routine raises for a revocation that would leave no operator
/// holding a token (schema version 35).
const LAST_OPERATOR: &str = "VRA01";

pub(crate) fn pg_err(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        match db.code().as_deref() {
            Some("42501") => return StoreError::Denied(db.message().to_owned()),
            Some("23505") => return StoreError::Duplicate(db.message().to_owned()),
            Some(LAST_OPERATOR) => return StoreError::LastOperator(db.message().to_owned()),
            // Schema 36: a principal's denials over their bound in time.
            Some("VRD01") => return StoreError::DenialBound(db.message().to_owned()),
            // U+0000 in text (22P05, untranslatable character) or a byte sequence the
            // database encoding refuses (22021): the input's fault, so sending it again
            // cannot help. The store's own checks refuse these first; this is the last line.
            Some("22P05" | "22021") => {
                return StoreError::Invalid {
                    what: "text",
                    message: pg_text(&e),
                };
            }
            _ => {}
        }
    }
    if pg_unavailable(&e) {
        return StoreError::Unavailable {
            backend: "postgres",
            message: pg_text(&e),
        };
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

/// The database role names for a prefix: the owner, one per actor role, the service role (a
/// member of every principal's own role, so a login granted it can act as any principal), then
/// the engine's own identity, which older chains name and which writes nothing since schema 19.
#[must_use]
pub fn role_names(prefix: &str) -> Vec<String> {
    std::iter::once(format!("{prefix}owner"))
        .chain(
            ActorRole::ALL
                .iter()
                .map(|r| format!("{prefix}{}", r.as_str())),
        )
        .chain([SERVICE_ROLE, ENGINE_ROLE].map(|r| format!("{prefix}{r}")))
        .collect()
}

/// The suffix of the role every principal's database role is granted to.
const SERVICE_ROLE: &str = "service";

/// The suffix of the role the engine's own principal acted as in the operator role until
/// schema 19. It is kept, as older chains name it, but is a member of no role of the store and
/// every write routine refuses it.
const ENGINE_ROLE: &str = "engine";

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn migration_sql(sql: &str, prefix: &str) -> String {
    let mut out = sql.replace("__PREFIX_LITERAL__", &format!("'{prefix}'"));
    out = out.replace("__OWNER__", &quote(&format!("{prefix}owner")));
    for role in ActorRole::ALL
        .iter()
        .map(|r| r.as_str())
        .chain([SERVICE_ROLE, ENGINE_ROLE])
    {
        let placeholder = format!("__{}__", role.to_uppercase());
        out = out.replace(&placeholder, &quote(&format!("{prefix}{role}")));
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
        execute_retrying(
            pool,
            &format!(
                "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN \
                 CREATE ROLE {} NOLOGIN; END IF; END $$",
                quote(&name)
            ),
        )
        .await?;
    }
    let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
        .fetch_one(pool)
        .await
        .map_err(pg_err)?;
    // The owner makes a role for every principal added (schema version 7), and grants it its
    // group role and to the service role; from PostgreSQL 16 on, that needs the admin option
    // on those roles as well as CREATEROLE.
    // The engine's identity is a member of no role of the store: it writes nothing (schema 19),
    // and a membership an older binary granted is revoked (per grantor from PostgreSQL 16 on).
    // The service role holds the operators' group role, so that a service login acting as
    // itself can initialise an empty store (the clock and the first operator naming itself,
    // all the routines take from a caller with no identity); it acts as every operator's
    // identity already, so that adds nothing else.
    let owner = quote(&format!("{prefix}owner"));
    let (service, operator) = (
        quote(&format!("{prefix}{SERVICE_ROLE}")),
        quote(&format!("{prefix}operator")),
    );
    let granted_by = if version >= 160_000 {
        " || coalesce(' GRANTED BY ' || quote_ident(m.grantor), '')"
    } else {
        ""
    };
    execute_retrying(
        pool,
        &format!(
            "DO $$ DECLARE m record; BEGIN \
             IF NOT (SELECT rolcreaterole FROM pg_roles WHERE rolname = '{prefix}owner') THEN \
             ALTER ROLE {owner} CREATEROLE; END IF; \
             IF NOT pg_has_role('{prefix}{SERVICE_ROLE}', '{prefix}operator', 'MEMBER') THEN \
             GRANT {operator} TO {service}; END IF; \
             FOR m IN SELECT g.rolname::text AS grp, gr.rolname::text AS grantor \
             FROM pg_auth_members am JOIN pg_roles e ON e.oid = am.member \
             JOIN pg_roles g ON g.oid = am.roleid LEFT JOIN pg_roles gr ON gr.oid = am.grantor \
             WHERE e.rolname = '{prefix}{ENGINE_ROLE}' AND starts_with(g.rolname, '{prefix}') LOOP \
             EXECUTE 'REVOKE ' || quote_ident(m.grp) || ' FROM ' || quote_ident('{prefix}{ENGINE_ROLE}'){granted_by}; \
             END LOOP; END $$"
        ),
    )
    .await?;
    if version >= 160_000 {
        for name in role_names(prefix).iter().skip(1) {
            execute_retrying(
                pool,
                &format!(
                    "GRANT {} TO {owner} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE",
                    quote(name)
                ),
            )
            .await?;
        }
    }
    Ok(())
}

/// Runs a statement that changes roles, which are shared by every database of the server: a
/// concurrent change of the same role fails with unique_violation, duplicate_object or "tuple
/// concurrently updated", each of which means: try again. A refusal is final.
async fn execute_retrying(pool: &PgPool, sql: &str) -> Result<()> {
    let mut attempt = 0;
    loop {
        match pool
            .execute(sqlx::raw_sql(AssertSqlSafe(sql.to_owned())))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if attempt < 5 && !is_denied(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            Err(e) => return Err(migrate_err(e)),
        }
    }
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

/// The start of the comment on `<prefix>owner` that marks a role prefix as the store of one
/// database, whose name follows. Roles belong to the whole cluster, so two stores under one
/// prefix would share their group roles, and each store's read policies give every row to its
/// operators' group. The comment lives in a shared catalogue: every database of the cluster
/// reads the same one.
const OWNER_MARK: &str = "verdict store of database ";

/// The text the comment on the engine's identity is set to while a prefix is claimed.
const ENGINE_COMMENT: &str =
    "verdict: the identity older audit chains name for the engine; it writes nothing";

/// The mark of `database` on `<prefix>owner`.
fn owner_mark(database: &str) -> String {
    format!("{OWNER_MARK}{database}")
}

/// The refusal of a role prefix the store of another database of the cluster was migrated
/// with. `migrated` says whether this database's store was migrated with it too (before
/// prefixes were marked): it keeps its prefix, so only moving one of the two stores helps.
fn prefix_taken(prefix: &str, other: &str, database: &str, migrated: bool) -> StoreError {
    let what_to_do = if migrated {
        format!(
            "the store of database {database:?} was migrated with it too, before prefixes were \
             marked, and a store keeps its prefix: move one of the two stores to a cluster of its \
             own (see \"One role prefix per store\" in docs/deployment.md)"
        )
    } else {
        format!("migrate database {database:?} with a --role-prefix of its own")
    };
    StoreError::Refused(format!(
        "role prefix {prefix:?} is taken by the store of database {other:?} on this cluster (the \
         comment on role {prefix}owner says so); roles belong to the whole cluster, so two stores \
         under one prefix would share their group roles and each store's operators would read \
         the other's rows; {what_to_do}"
    ))
}

/// Marks `prefix` as the store of the connected database on `<prefix>owner`, or refuses it when
/// the mark names another database that still exists (a mark naming a database since dropped
/// or renamed is taken over). A store migrated before prefixes were marked gets its mark here.
async fn claim_prefix(pool: &PgPool, prefix: &str, migrated: bool) -> Result<()> {
    let owner = format!("{prefix}owner");
    let mut tx = pool.begin().await.map_err(pg_err)?;
    // Claims of one prefix from several databases are serialised by a lock on a role of the
    // prefix: an advisory lock holds within one database only, while COMMENT ON ROLE locks the
    // role, a shared object, until the transaction ends. The engine identity's comment is set
    // for that (always to the same text), so the owner's mark is read only once no other claim
    // of the prefix is under way.
    let lock: String = sqlx::query_scalar("SELECT format('COMMENT ON ROLE %I IS %L', $1, $2)")
        .bind(format!("{prefix}{ENGINE_ROLE}"))
        .bind(ENGINE_COMMENT)
        .fetch_one(&mut *tx)
        .await
        .map_err(pg_err)?;
    tx.execute(sqlx::raw_sql(AssertSqlSafe(lock)))
        .await
        .map_err(migrate_err)?;
    let (database, mark): (String, Option<String>) = sqlx::query_as(
        "SELECT current_database()::text, shobj_description(r.oid, 'pg_authid') \
         FROM pg_roles r WHERE r.rolname = $1",
    )
    .bind(&owner)
    .fetch_one(&mut *tx)
    .await
    .map_err(pg_err)?;
    let ours = owner_mark(&database);
    match mark.as_deref() {
        None | Some("") => {}
        Some(m) if m == ours => return tx.commit().await.map_err(pg_err),
        Some(m) => {
            let Some(other) = m.strip_prefix(OWNER_MARK) else {
                return Err(StoreError::Refused(format!(
                    "role {owner} carries the comment {m:?}, which is no mark of a verdict store: \
                     role prefix {prefix:?} may be another application's; migrate database \
                     {database:?} with a --role-prefix of its own, or remove the comment if the \
                     role is this store's"
                )));
            };
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                    .bind(other)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(pg_err)?;
            if exists {
                return Err(prefix_taken(prefix, other, &database, migrated));
            }
        }
    }
    let mark: String = sqlx::query_scalar("SELECT format('COMMENT ON ROLE %I IS %L', $1, $2)")
        .bind(&owner)
        .bind(&ours)
        .fetch_one(&mut *tx)
        .await
        .map_err(pg_err)?;
    tx.execute(sqlx::raw_sql(AssertSqlSafe(mark)))
        .await
        .map_err(migrate_err)?;
    tx.commit().await.map_err(pg_err)
}

/// Applies pending migrations: creates the roles, marks the prefix as this database's, then
/// builds the schema, under an advisory lock.
async fn migrate_pool(pool: &PgPool, prefix: Option<&str>) -> Result<(MigrationReport, String)> {
    let stored = stored_prefix(pool).await?;
    let migrated = stored.is_some();
    let prefix = match (stored, prefix) {
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
    claim_prefix(pool, &prefix, migrated).await?;
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
        .map_err(|e| {
            if pg_unavailable(&e) {
                StoreError::Unavailable {
                    backend: "postgres",
                    message: format!("{}: {}", redact_url(url), pg_text(&e)),
                }
            } else {
                StoreError::Location {
                    location: redact_url(url),
                    message: pg_text(&e),
                }
            }
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

/// The record in columns `at` (seq), `at + 1` (key), `at + 2` (digest) and `at + 3` (body).
fn stored_at(table: Table, row: &PgRow, at: usize) -> Result<Stored> {
    let seq: i64 = row.try_get(at).map_err(pg_err)?;
    let key: String = row.try_get(at + 1).map_err(pg_err)?;
    let digest: String = row.try_get(at + 2).map_err(pg_err)?;
    Ok(Stored {
        table,
        seq: seq_from(table.name(), &key, seq)?,
        digest: parse_digest(table, &key, &digest)?,
        body: row.try_get(at + 3).map_err(pg_err)?,
        counted: None,
        inserted: false,
        key,
    })
}

/// A grant in columns `at` to `at + 3` and its revocation, if any, in the four after them.
fn grant_at(row: &PgRow, at: usize) -> Result<(Stored, Option<Stored>)> {
    let grant = stored_at(Table::Grants, row, at)?;
    let revoked: Option<i64> = row.try_get(at + 4).map_err(pg_err)?;
    let revocation = match revoked {
        Some(_) => Some(stored_at(Table::GrantRevocations, row, at + 4)?),
        None => None,
    };
    Ok((grant, revocation))
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
            reader: (max_connections >= 3).then(|| Mutex::new(None)),
            prefix,
            url: url.to_owned(),
            identities: Arc::default(),
            describe,
            trips: Arc::default(),
            snapshot: None,
            wakeups: Arc::new(crate::jobs::PgWakeups::new()),
            manual: Arc::default(),
        })
    }

    /// Appends one record on the kept connection, or through the pool when that connection is
    /// busy with another single append (concurrent writers then proceed as before) or there is
    /// none. The routine call is a transaction of its own either way.
    async fn put_one(&self, actor: &Actor, item: &Prepared) -> Result<Vec<Stored>> {
        let run = std::slice::from_ref(item);
        let role = self.identity(actor).await?;
        let Some(mut slot) = self.writer.as_ref().and_then(|w| w.try_lock().ok()) else {
            return Ok(self.write(actor, None, run, &[]).await?.stored);
        };
        let kept = match slot.as_mut() {
            Some(kept) => kept,
            None => slot.insert(Kept {
                conn: self.checkout().await?,
                role: None,
                manual: None,
            }),
        };
        // The connection acts as the actor's identity; it changes only when the actor does.
        let mut rows = Ok(Vec::new());
        if kept.role != role {
            let set = match &role {
                Some(r) => format!("SET ROLE {}", quote(r)),
                None => "RESET ROLE".to_owned(),
            };
            self.trips.add(1);
            rows = kept
                .conn
                .execute(sqlx::raw_sql(AssertSqlSafe(set)))
                .await
                .map(|_| Vec::new());
            if rows.is_ok() {
                kept.role.clone_from(&role);
            }
        }
        let manual = self.manual.get();
        if rows.is_ok() && kept.manual != manual {
            // A number, so nothing else can be spliced in.
            let set = manual.map_or_else(
                || "RESET verdict.manual_now".to_owned(),
                |micros| format!("SET verdict.manual_now = '{micros}'"),
            );
            self.trips.add(1);
            rows = kept
                .conn
                .execute(sqlx::raw_sql(AssertSqlSafe(set)))
                .await
                .map(|_| Vec::new());
            if rows.is_ok() {
                kept.manual = manual;
            }
        }
        if rows.is_ok() {
            rows = call_put_one(self.counted(&mut *kept.conn), actor, item).await;
        }
        // After any error the connection is closed rather than given back to the pool with a
        // principal's role set on it.
        if rows.is_err()
            && let Some(kept) = slot.take()
        {
            drop(kept.conn.detach());
        }
        settle_run(run, rows)
    }

    /// The channel the store notifies when a job becomes claimable, named by the role prefix
    /// as the store's roles are (notifications stay inside one database).
    pub(crate) fn jobs_channel(&self) -> String {
        format!("{}jobs", self.prefix)
    }

    /// The URL the store was opened with (credentials included).
    pub(crate) fn location_url(&self) -> &str {
        &self.url
    }

    pub(crate) fn wakeups(&self) -> &crate::jobs::PgWakeups {
        &self.wakeups
    }

    /// The database role `actor` acts as: the gate's and the system's own roles, else the role
    /// recorded for its principal. `None` for a principal with no role on record: the call then
    /// acts as the login itself, which the routines refuse unless it is a superuser.
    pub(crate) async fn identity(&self, actor: &Actor) -> Result<Option<String>> {
        match actor.role {
            ActorRole::Gate | ActorRole::System => {
                return Ok(Some(format!("{}{}", self.prefix, actor.role.as_str())));
            }
            _ => {}
        }
        if let Some(found) = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&actor.principal)
        {
            return Ok(Some(found.clone()));
        }
        let found: Option<String> =
            sqlx::query_scalar("SELECT db_role FROM verdict.principal_roles WHERE principal = $1")
                .bind(&actor.principal)
                .fetch_optional(self.pooled())
                .await
                .map_err(pg_err)?;
        if let Some(role) = &found {
            self.identities
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(actor.principal.clone(), role.clone());
        }
        Ok(found)
    }

    /// The pool, for one statement: counted as two round trips, the pool's check of the idle
    /// connection it hands out and the statement.
    pub(crate) fn pooled(&self) -> &PgPool {
        self.trips.add(2);
        &self.pool
    }

    /// `executor`, for one statement on a connection already held: one round trip.
    pub(crate) fn counted<E>(&self, executor: E) -> E {
        self.trips.add(1);
        executor
    }

    /// A connection out of the pool (its check on the way out counted).
    async fn checkout(&self) -> Result<PoolConnection<Postgres>> {
        self.trips.add(1);
        self.pool.acquire().await.map_err(pg_err)
    }

    /// The name of the database the store is in, which each principal's identity is named
    /// after ([`principal_db_role`]).
    async fn database(&self) -> Result<String> {
        sqlx::query_scalar("SELECT current_database()::text")
            .fetch_one(self.pooled())
            .await
            .map_err(pg_err)
    }

    /// Takes `principal`'s login back (with its note) if its identity may log in, then ends
    /// every session of the identity once that has committed. Run again, it appends nothing
    /// and ends what is left.
    async fn take_back(&self, actor: &Actor, principal: &str) -> Result<crate::store::LoginTaken> {
        let user = principal_db_role(&self.prefix, &self.database().await?, principal);
        let may_log_in: Option<bool> = sqlx::query_scalar(
            "SELECT r.rolcanlogin FROM pg_catalog.pg_roles r WHERE r.rolname = $1",
        )
        .bind(&user)
        .fetch_optional(self.pooled())
        .await
        .map_err(pg_err)?;
        if may_log_in == Some(true) {
            self.change_login(actor, principal, None).await?;
        }
        let sessions_left = self.end_sessions(actor, principal).await?;
        Ok(crate::store::LoginTaken {
            user,
            sessions_left,
        })
    }

    /// Gives `principal`'s identity a login with `password`, or takes it back (`None`), with
    /// its note, in one transaction committed here; returns the identity.
    async fn change_login(
        &self,
        actor: &Actor,
        principal: &str,
        password: Option<&str>,
    ) -> Result<String> {
        let role = self.identity(actor).await?;
        let mut tx = self.begin_as(role.as_deref()).await?;
        let user: String = sqlx::query_scalar("SELECT verdict.principal_login($1, $2, $3, $4)")
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(principal)
            .bind(password)
            .fetch_one(self.counted(&mut *tx))
            .await
            .map_err(pg_err)?;
        self.commit(tx).await?;
        Ok(user)
    }

    /// Ends every session of `principal`'s identity, whose login was taken back and committed
    /// (the routine refuses a login in use); returns how many are still open.
    async fn end_sessions(&self, actor: &Actor, principal: &str) -> Result<u32> {
        let role = self.identity(actor).await?;
        let mut tx = self.begin_as(role.as_deref()).await?;
        let left: i32 = sqlx::query_scalar("SELECT verdict.principal_sessions_end($1, $2, $3)")
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(principal)
            .fetch_one(self.counted(&mut *tx))
            .await
            .map_err(pg_err)?;
        self.commit(tx).await?;
        u32::try_from(left).map_err(|_| StoreError::Backend {
            backend: "postgres",
            message: format!("principal_sessions_end answered {left} sessions"),
        })
    }

    /// Commits `tx`: one round trip.
    pub(crate) async fn commit(&self, tx: sqlx::Transaction<'static, Postgres>) -> Result<()> {
        self.trips.add(1);
        tx.commit().await.map_err(pg_err)
    }

    /// The rows of a plain read, on the kept reader connection when it is free (one round
    /// trip), else through the pool, as before there was one. `make` builds the query, so that
    /// a read the kept connection could not answer because that connection is gone (the server
    /// restarted, or the connection was cut while it sat idle, which the pool would have noticed
    /// when handing out one of its own) is asked again, once, through the pool.
    async fn read<'q>(
        &self,
        make: impl Fn() -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    ) -> std::result::Result<Vec<PgRow>, sqlx::Error> {
        let Some(mut slot) = self.reader.as_ref().and_then(|r| r.try_lock().ok()) else {
            return make().fetch_all(self.pooled()).await;
        };
        let conn = match slot.as_mut() {
            Some(conn) => conn,
            None => {
                self.trips.add(1);
                slot.insert(self.pool.acquire().await?)
            }
        };
        self.trips.add(1);
        let rows = make().fetch_all(&mut **conn).await;
        let Err(e) = rows else { return rows };
        // After any error the connection is closed rather than kept or given back.
        if let Some(conn) = slot.take() {
            drop(conn.detach());
        }
        drop(slot);
        if pg_unavailable(&e) {
            make().fetch_all(self.pooled()).await
        } else {
            Err(e)
        }
    }

    /// The rows of a read, from the snapshot's transaction on a snapshot, else from the pool.
    async fn rows(
        &self,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> std::result::Result<Vec<PgRow>, sqlx::Error> {
        match &self.snapshot {
            Some(conn) => {
                self.trips.add(1);
                query.fetch_all(&mut *conn.lock().await).await
            }
            None => query.fetch_all(self.pooled()).await,
        }
    }

    /// Appends a denial through `put_own_denial`, acting as the login itself: the routine
    /// takes the principal from the session's identity and refuses a denial naming anyone else.
    async fn put_own_denial(&self, item: &Prepared) -> Result<Vec<Stored>> {
        let mut tx = self.begin_as(None).await?;
        let rows = sqlx::query(
            "SELECT r_seq, r_digest, r_body, r_inserted, r_counted \
             FROM verdict.put_own_denial($1, $2, $3)",
        )
        .bind(&item.key)
        .bind(item.digest.as_str())
        .bind(&item.body)
        .fetch_all(self.counted(&mut *tx))
        .await;
        let stored = settle_run(std::slice::from_ref(item), rows)?;
        self.commit(tx).await?;
        Ok(stored)
    }

    pub(crate) async fn begin_as(
        &self,
        role: Option<&str>,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        // One round trip: open the transaction and act as the identity for its duration (or as
        // the login itself, whatever role a pooled connection was left in), naming the time
        // of the handle's manual clock if one was set: on a store that keeps a manual clock the
        // routines read it as the store's time (a number, so nothing else can be spliced in).
        let time = self.manual.get().map_or_else(String::new, |micros| {
            format!("; SET LOCAL verdict.manual_now = '{micros}'")
        });
        // The settings come before the BEGIN, in the implicit transaction that a message of
        // several statements runs in and that BEGIN then makes explicit: a setting refused (a
        // role the login may not act as) ends the message before any BEGIN, leaving the
        // connection outside a transaction. Were it after, the connection would go back to the
        // pool inside an aborted transaction, and every later statement on it would fail.
        let begin = format!(
            "SET LOCAL ROLE {}{time}; BEGIN",
            role.map_or_else(|| "NONE".to_owned(), quote)
        );
        // The pool's check of the connection it hands out, then the BEGIN.
        self.trips.add(2);
        self.pool
            .begin_with(AssertSqlSafe(begin))
            .await
            .map_err(pg_err)
    }
}

/// The database role of principal `name` in database `database` (schema version 7): the prefix,
/// `p_`, and 20 hex digits of the SHA-256 of `<database>/<name>`, at most 62 bytes.
#[must_use]
pub fn principal_db_role(prefix: &str, database: &str, name: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let hash = Sha256::digest(format!("{database}/{name}").as_bytes());
    let hex: String = hash.iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("{prefix}p_{hex}")
}

impl PgBackend {
    /// How the identities on record differ from what the principals give (schema version 7):
    /// each principal acts as the role its name gives, in its own role, and that role is a
    /// member of its group role and of no other role of the store; nothing else acts but the
    /// built-in identities.
    async fn identity_drift(&self) -> Result<Vec<Drift>> {
        let db = self.database().await?;
        let principals = self
            .rows(sqlx::query(
                "SELECT key, seq, role FROM verdict.principals ORDER BY seq",
            ))
            .await
            .map_err(pg_err)?;
        let mapped = self
            .rows(sqlx::query(
                "SELECT m.db_role, m.principal, m.role, coalesce(array_agg(g.rolname::text) \
                 FILTER (WHERE g.rolname IS NOT NULL), '{}') \
                 FROM verdict.principal_roles m \
                 LEFT JOIN pg_roles r ON r.rolname = m.db_role \
                 LEFT JOIN pg_auth_members am ON am.member = r.oid \
                 LEFT JOIN pg_roles g ON g.oid = am.roleid \
                 GROUP BY m.db_role, m.principal, m.role ORDER BY m.db_role",
            ))
            .await
            .map_err(pg_err)?;
        let mut found: HashMap<String, (String, Option<String>, Vec<String>)> = HashMap::new();
        for r in &mapped {
            let db_role: String = r.try_get(0).map_err(pg_err)?;
            let principal: Option<String> = r.try_get(1).map_err(pg_err)?;
            let role: String = r.try_get(2).map_err(pg_err)?;
            let groups: Vec<String> = r.try_get(3).map_err(pg_err)?;
            found.insert(db_role, (role, principal, groups));
        }
        let mut expected: Vec<(String, Option<String>, String, Option<i64>)> = vec![
            (format!("{}gate", self.prefix), None, "gate".into(), None),
            (
                format!("{}system", self.prefix),
                None,
                "system".into(),
                None,
            ),
            (
                format!("{}{ENGINE_ROLE}", self.prefix),
                Some(ENGINE_IDENTITY.into()),
                "operator".into(),
                None,
            ),
        ];
        for r in &principals {
            let name: String = r.try_get(0).map_err(pg_err)?;
            let seq: i64 = r.try_get(1).map_err(pg_err)?;
            let role: Option<String> = r.try_get(2).map_err(pg_err)?;
            expected.push((
                principal_db_role(&self.prefix, &db, &name),
                Some(name),
                role.unwrap_or_default(),
                Some(seq),
            ));
        }
        let engine_identity = format!("{}{ENGINE_ROLE}", self.prefix);
        let mut drift = Vec::new();
        if let Some(detail) = self.prefix_mark_drift(&db).await? {
            drift.push(Drift {
                table: "store_meta".into(),
                key: Some("role_prefix".into()),
                seq: None,
                detail,
            });
        }
        let mut flag = |key: &str, seq: Option<i64>, detail: String| {
            drift.push(Drift {
                table: "principal_roles".into(),
                key: Some(key.to_owned()),
                seq,
                detail,
            });
        };
        for (db_role, principal, role, seq) in &expected {
            let who = principal.as_deref().unwrap_or(db_role);
            match found.remove(db_role) {
                None => flag(who, *seq, format!("no identity {db_role} is on record")),
                Some((r, p, groups)) => {
                    if r != *role || p != *principal {
                        flag(
                            who,
                            *seq,
                            format!(
                                "identity {db_role} acts for {} as {r}, not for {} as {role}",
                                p.as_deref().unwrap_or("anyone"),
                                principal.as_deref().unwrap_or("anyone")
                            ),
                        );
                    }
                    // The engine's identity, on record for the chain's older events, belongs
                    // to no role of the store: a membership would give it write power again
                    // (the routines refuse it anyway, schema 19).
                    if db_role == &engine_identity
                        && groups.iter().any(|g| g.starts_with(&self.prefix))
                    {
                        flag(
                            who,
                            *seq,
                            format!(
                                "identity {db_role} writes nothing, yet is a member of {groups:?}"
                            ),
                        );
                    }
                    // A principal's role belongs to its group role and to nothing else of the
                    // store's.
                    let own_group = format!("{}{role}", self.prefix);
                    if seq.is_some()
                        && (groups
                            .iter()
                            .any(|g| g.starts_with(&self.prefix) && *g != own_group)
                            || !groups.contains(&own_group))
                    {
                        flag(
                            who,
                            *seq,
                            format!(
                                "identity {db_role} is a member of {groups:?}, not of {own_group} alone"
                            ),
                        );
                    }
                }
            }
        }
        for (db_role, (role, principal, _)) in found {
            flag(
                &db_role,
                None,
                format!(
                    "identity {db_role} acts for {} as {role}, which is no stored principal",
                    principal.as_deref().unwrap_or("anyone")
                ),
            );
        }
        Ok(drift)
    }
}

impl PgBackend {
    /// What is wrong with the mark on `<prefix>owner` (set by every migration since schema
    /// 32): `None` when it names database `db`.
    async fn prefix_mark_drift(&self, db: &str) -> Result<Option<String>> {
        let owner = format!("{}owner", self.prefix);
        let rows = self
            .rows(
                sqlx::query(
                    "SELECT shobj_description(r.oid, 'pg_authid') FROM pg_roles r \
                     WHERE r.rolname = $1",
                )
                .bind(&owner),
            )
            .await
            .map_err(pg_err)?;
        let mark: Option<String> = match rows.first() {
            Some(r) => r.try_get(0).map_err(pg_err)?,
            None => return Ok(Some(format!("role {owner} does not exist"))),
        };
        let prefix = &self.prefix;
        Ok(match mark.as_deref() {
            Some(m) if m == owner_mark(db) => None,
            None | Some("") => Some(format!(
                "role {owner} carries no mark of database {db:?}: run `verdict store migrate` \
                 to mark role prefix {prefix:?} as this store's"
            )),
            Some(m) => match m.strip_prefix(OWNER_MARK) {
                Some(other) => Some(format!(
                    "role prefix {prefix:?} is marked as the store of database {other:?} (the \
                     comment on role {owner}), not of {db:?}: two stores share its roles, and \
                     each one's operators may read the other's rows (see \"One role prefix per \
                     store\" in docs/deployment.md)"
                )),
                None => Some(format!(
                    "role {owner} carries the comment {m:?}, not the mark of database {db:?}"
                )),
            },
        })
    }
}

/// `url` with its user and password replaced (both made of characters a URL takes as they are).
fn url_as(url: &str, user: &str, password: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{user}:{password}@{host}{tail}")
}

/// The engine's own principal, which `<prefix>engine` acted for in the operator role (its
/// notes: a refused result, a takeover, a run's context, webhooks). Since schema version 14
/// `init`, attestations and admission leases are written as the principal who acts, and since
/// 19 everything else too: the identity is on record, and writes nothing.
const ENGINE_IDENTITY: &str = crate::actor::ENGINE_PRINCIPAL;

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

/// The SQLSTATE `verdict.write` raises for a record stored under its key with another digest;
/// its detail is the record's place in the write (from 1) and the stored digest.
const CONFLICT: &str = "VRW01";

/// The conflict `e` reports, as [`Prepared::settle`] reports it, when it is one.
fn conflict_in(e: &sqlx::Error, items: &[Prepared]) -> Option<StoreError> {
    let sqlx::Error::Database(db) = e else {
        return None;
    };
    if db.code().as_deref() != Some(CONFLICT) {
        return None;
    }
    let detail = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?
        .detail()?;
    let (at, existing) = detail.split_once(' ')?;
    let item = items.get(at.parse::<usize>().ok()?.checked_sub(1)?)?;
    Some(item.conflict(existing))
}

/// What one [`PgBackend::write`] stored.
struct Written {
    /// The records, in the order given.
    stored: Vec<Stored>,
    /// The jobs enqueued, each once, in the order of their ids.
    enqueued: Vec<crate::jobs::Job>,
}

/// The columns `verdict.write` answers with before a job's own (schema 41).
const RECORD_COLUMNS: usize = 5;

impl PgBackend {
    /// A write of records with, optionally, a job's claim renewed before them (and the job
    /// ended after them when the claim completes it) and jobs enqueued after them, as one
    /// statement: `verdict.write` (schema 41) acts as `actor`'s identity and calls the same
    /// routines, in the same order, that a transaction of several statements called before, so
    /// the transaction commits as that statement ends and the audit chain's lock, which the
    /// first record takes, is never held across a round trip. A refusal by the database, a
    /// record already stored with another digest included, rolls back all of it. What is read
    /// from the answer afterwards (its rows' count and columns) is read after the commit: an
    /// error there reports a database answering what its routines never answer.
    async fn write(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        items: &[Prepared],
        jobs: &[crate::jobs::NewJob],
    ) -> Result<Written> {
        if let Some(claim) = claim {
            crate::jobs::check_lease(claim.lease)?;
        }
        let role = self.identity(actor).await?;
        let columns: Vec<String> = (1..=19).map(|i| format!("${i}")).collect();
        let sql = format!("SELECT * FROM verdict.write({})", columns.join(", "));
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(role)
            .bind(self.manual.get().map(|micros| micros.to_string()))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(claim.map(|c| c.job))
            .bind(claim.map(|c| c.fencing))
            .bind(claim.map(|c| crate::jobs::millis(c.lease)))
            .bind(claim.and_then(|c| c.completes.as_deref()))
            .bind(items.iter().map(|i| i.table.name()).collect::<Vec<_>>())
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .bind(items.iter().map(|i| i.digest.as_str()).collect::<Vec<_>>())
            .bind(items.iter().map(|i| i.body.as_str()).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.correlation.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.converge).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.request.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.class.as_str()).collect::<Vec<_>>())
            .bind(
                jobs.iter()
                    .map(|j| j.deadline.map(crate::jobs::millis))
                    .collect::<Vec<_>>(),
            )
            .bind(self.jobs_channel())
            .fetch_all(self.pooled())
            .await
            .map_err(|e| match (conflict_in(&e, items), claim) {
                (Some(conflict), _) => conflict,
                (None, Some(c)) => crate::jobs::routine_err(e, c.job, c.fencing),
                (None, None) => pg_err(e),
            })?;
        // The records' rows first (no job in them), then the job the claim ended, when it
        // did, then the jobs enqueued.
        let records = rows
            .iter()
            .take_while(|r| matches!(r.try_get::<Option<i64>, _>(RECORD_COLUMNS), Ok(None)))
            .count();
        let ended = usize::from(claim.is_some_and(|c| c.completes.is_some()));
        if records != items.len() || rows.len() < records + ended {
            return Err(StoreError::Backend {
                backend: "postgres",
                message: format!(
                    "verdict.write answered {} rows, {records} of them records, for {} records, \
                     {ended} job ended and {} enqueued",
                    rows.len(),
                    items.len(),
                    jobs.len()
                ),
            });
        }
        let mut stored = Vec::with_capacity(items.len());
        let mut rest = rows.as_slice();
        for run in items.chunk_by(|a, b| a.table == b.table) {
            // Counted above: the records' rows are there, one for each record.
            let (these, after) = rest.split_at_checked(run.len()).unwrap_or((rest, &[]));
            stored.extend(settle_rows(run, these)?);
            rest = after;
        }
        let enqueued =
            crate::jobs::jobs_at_pg(rest.get(ended..).unwrap_or_default(), RECORD_COLUMNS)?;
        Ok(Written { stored, enqueued })
    }
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
    settle_rows(run, &rows.map_err(pg_err)?)
}

/// [`settle_run`] of rows already read.
fn settle_rows(run: &[Prepared], rows: &[PgRow]) -> Result<Vec<Stored>> {
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
    for (item, row) in run.iter().zip(rows) {
        let seq: i64 = row.try_get(0).map_err(pg_err)?;
        let digest: String = row.try_get(1).map_err(pg_err)?;
        let inserted: bool = row.try_get(3).map_err(pg_err)?;
        // A principal's stored body comes back only to a call offering exactly it (schema
        // version 10); without it the digests differ, and settling refuses the record.
        let body: Option<String> = row.try_get(2).map_err(pg_err)?;
        let stored = Stored {
            table: item.table,
            key: item.key.clone(),
            seq: seq_from(item.table.name(), &item.key, seq)?,
            digest: parse_digest(item.table, &item.key, &digest)?,
            body: body.unwrap_or_default(),
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

/// Rows read at once when the derived columns are checked.
const DRIFT_PAGE: u32 = 5000;

#[async_trait]
impl Backend for PgBackend {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn manual_time(&self) -> &crate::backend::ManualTime {
        &self.manual
    }

    fn round_trips(&self) -> u64 {
        self.trips.get()
    }

    async fn binds_evidence_grants(&self, actor: &Actor) -> Result<bool> {
        // Every write acts as the principal's own database identity (SET ROLE), and the
        // evidence routines refuse a runner's evidence without a write grant in force (schema
        // version 7). A principal with no identity on record would act as the login itself,
        // which a superuser login is not held to: such a call is checked in code.
        Ok(actor.role == ActorRole::Runner && self.identity(actor).await?.is_some())
    }

    async fn subject_and_grants(&self, key: &str, principal: &str) -> Result<SubjectAndGrants> {
        // Both in one statement: the subject's row first (part 0), then each grant (part 1)
        // with its revocation's columns, NULL where there is none.
        let rows = self
            .read(|| {
                sqlx::query(
                    "SELECT 0 AS part, s.seq, s.key, s.digest, s.body, \
                     NULL::bigint, NULL::text, NULL::text, NULL::text \
                     FROM verdict.subjects s WHERE s.key = $1 \
                     UNION ALL \
                     SELECT 1, g.seq, g.key, g.digest, g.body, r.seq, r.key, r.digest, r.body \
                     FROM verdict.grants g LEFT JOIN verdict.grant_revocations r ON r.key = g.key \
                     WHERE g.principal = $2 ORDER BY 1, 2",
                )
                .bind(key)
                .bind(principal)
            })
            .await
            .map_err(pg_err)?;
        let mut subject = None;
        let mut grants = Vec::with_capacity(rows.len());
        for row in &rows {
            let part: i32 = row.try_get(0).map_err(pg_err)?;
            if part == 0 {
                subject = Some(stored_at(Table::Subjects, row, 1)?);
            } else {
                grants.push(grant_at(row, 1)?);
            }
        }
        Ok((subject, grants))
    }

    async fn grants_with_revocations(
        &self,
        principal: &str,
    ) -> Result<Vec<(Stored, Option<Stored>)>> {
        let rows = self
            .read(|| {
                sqlx::query(
                    "SELECT g.seq, g.key, g.digest, g.body, r.seq, r.key, r.digest, r.body \
                     FROM verdict.grants g LEFT JOIN verdict.grant_revocations r ON r.key = g.key \
                     WHERE g.principal = $1 ORDER BY g.seq",
                )
                .bind(principal)
            })
            .await
            .map_err(pg_err)?;
        rows.iter().map(|row| grant_at(row, 0)).collect()
    }

    async fn schema_version(&self) -> Result<i64> {
        pool_version(self.pooled()).await
    }

    async fn clock_now(&self) -> Result<verdict_core::contracts::Timestamp> {
        // The database's clock, so every client of one store reads the same time.
        let rows = self
            .read(|| {
                sqlx::query("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
            })
            .await
            .map_err(pg_err)?;
        let micros: i64 = rows
            .first()
            .ok_or_else(|| StoreError::Backend {
                backend: "postgres",
                message: "the clock query returned no row".into(),
            })?
            .try_get(0)
            .map_err(pg_err)?;
        Ok(verdict_core::contracts::Timestamp::from_unix_nanos(
            i128::from(micros) * 1000,
        ))
    }

    async fn append(&self, actor: &Actor, items: Vec<Prepared>) -> Result<Vec<Stored>> {
        if let [item] = items.as_slice() {
            // One record: the routine call is a transaction of its own on a connection already
            // acting as the actor's identity, so it is one round trip instead of three; a
            // refusal leaves nothing behind.
            let put = self.put_one(actor, item).await;
            // A store opened through a principal's own login cannot act as the system identity
            // that records denials; the refusal that login met is recorded through the one
            // routine its identity may call to append a denial naming itself (schema 22).
            if let Err(StoreError::Denied(first)) = &put
                && actor.role == ActorRole::System
                && item.table == Table::Denials
            {
                return self.put_own_denial(item).await.map_err(|e| {
                    StoreError::Denied(format!("{first}; and as the login's own denial: {e}"))
                });
            }
            return put;
        }
        Ok(self.write(actor, None, &items, &[]).await?.stored)
    }

    async fn put_blob(
        &self,
        actor: &Actor,
        item: Prepared,
        // put_blobs derives the holder's row from the same body itself (schema version 27).
        _holder: Prepared,
        bytes: Vec<u8>,
    ) -> Result<Stored> {
        let role = self.identity(actor).await?;
        let mut tx = self.begin_as(role.as_deref()).await?;
        let rows = sqlx::query(
            "SELECT r_seq, r_digest, r_body, r_inserted, r_counted \
             FROM verdict.put_blobs($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(&item.key)
        .bind(item.digest.as_str())
        .bind(&item.body)
        .bind(item.correlation.as_deref())
        .bind(bytes)
        .fetch_all(self.counted(&mut *tx))
        .await;
        let stored = settle_run(std::slice::from_ref(&item), rows)?;
        self.commit(tx).await?;
        stored.into_iter().next().ok_or(StoreError::NotFound {
            what: "blobs",
            key: item.key,
        })
    }

    async fn blob_bytes(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let rows = self
            .rows(sqlx::query("SELECT bytes FROM verdict.blobs WHERE key = $1").bind(key))
            .await
            .map_err(pg_err)?;
        rows.first()
            .map(|r| r.try_get::<Vec<u8>, _>(0).map_err(pg_err))
            .transpose()
    }

    async fn append_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        items: Vec<Prepared>,
    ) -> Result<Vec<Stored>> {
        // The claim is renewed first (a stale one writes nothing) and the job, when the claim
        // completes it, ends after its last effect, in the same statement.
        Ok(self.write(actor, Some(claim), &items, &[]).await?.stored)
    }

    async fn append_enqueuing(
        &self,
        actor: &Actor,
        items: Vec<Prepared>,
        jobs: Vec<crate::jobs::NewJob>,
    ) -> Result<(Vec<Stored>, Vec<crate::jobs::Job>)> {
        // The jobs after the rows they are about, in the same statement: a refusal of either
        // leaves neither.
        let written = self.write(actor, None, &items, &jobs).await?;
        let jobs = crate::jobs::enqueued_in_order(&jobs, &written.enqueued)?;
        Ok((written.stored, jobs))
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
        let role = self.identity(actor).await?;
        let mut tx = self.begin_as(role.as_deref()).await?;
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
            .fetch_one(self.counted(&mut *tx))
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
        if !ok {
            self.trips.add(1);
            tx.rollback().await.map_err(pg_err)?;
            let absent = pointer.revision == 0 && pointer.value.is_none();
            return Ok((CasOutcome::Stale((!absent).then_some(pointer)), Vec::new()));
        }
        let mut out = Vec::with_capacity(items.len());
        for run in items.chunk_by(|a, b| a.table == b.table) {
            // A refused item drops the transaction, undoing the move with it.
            out.extend(put_run(self.counted(&mut *tx), actor, run).await?);
        }
        self.commit(tx).await?;
        Ok((CasOutcome::Done(pointer), out))
    }

    async fn find(&self, table: Table, filter: Filter) -> Result<Vec<Stored>> {
        let sql = format!(
            "SELECT seq, key, digest, body, {} FROM verdict.{} WHERE {} ORDER BY seq",
            counted_col(table),
            table.name(),
            filter.clause(table, Dialect::Postgres)
        );
        let rows = self
            .read(|| sqlx::query(AssertSqlSafe(sql.clone())).bind(filter.value()))
            .await
            .map_err(pg_err)?;
        rows.iter().map(|r| row_to_stored(table, r)).collect()
    }

    async fn principal_by_token(&self, token_sha256: &str) -> Result<Option<Stored>> {
        // Through the routine (schema version 10): no principal's identity reads the table.
        let rows = self
            .read(||
                sqlx::query(
                    "SELECT r_seq, r_key, r_digest, r_body, NULL::boolean FROM verdict.principal_by_token($1)",
                )
                .bind(token_sha256),
            )
            .await
            .map_err(pg_err)?;
        Ok(rows
            .iter()
            .map(|r| row_to_stored(Table::Principals, r))
            .collect::<Result<Vec<_>>>()?
            .pop())
    }

    async fn token_changes(&self, principal: &str) -> Result<u64> {
        // Through the routine (schema version 30): no principal's identity reads the table.
        let rows = self
            .read(|| sqlx::query("SELECT verdict.token_changes_of($1)").bind(principal))
            .await
            .map_err(pg_err)?;
        let n: i64 = match rows.first() {
            Some(row) => row.try_get(0).map_err(pg_err)?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn token_hash_held(&self, token_sha256: &str) -> Result<bool> {
        // No principal's identity reads a token hash; the write routine refuses a hash held
        // before, under the chain lock, in the transaction of the change.
        let _ = token_sha256;
        Ok(false)
    }

    fn token_changes_heard(&self) -> u64 {
        // Listening starts with the first question, and the count moves once it listens, so
        // what was kept before is asked again then. What is kept while the listener cannot
        // connect is bounded by its keeper's own limit on how long it keeps an answer.
        if tokio::runtime::Handle::try_current().is_ok() {
            let _ = self
                .wakeups()
                .start(self.location_url(), &self.jobs_channel());
        }
        self.wakeups().token_changes_heard()
    }

    async fn principal_entries(
        &self,
        name: Option<&str>,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<PrincipalInfo>> {
        let rows =
            sqlx::query("SELECT r_seq, r_name, r_role FROM verdict.principal_entries($1, $2, $3)")
                .bind(name)
                .bind(after_seq)
                .bind(i64::from(limit))
                .fetch_all(self.pooled())
                .await
                .map_err(pg_err)?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(pg_err)?;
                let name: Option<String> = r.try_get(1).map_err(pg_err)?;
                let role: Option<String> = r.try_get(2).map_err(pg_err)?;
                let key = name.clone().unwrap_or_default();
                let corrupt = |message: String| StoreError::Corrupt {
                    table: Table::Principals.name(),
                    key: key.clone(),
                    message,
                };
                Ok(PrincipalInfo {
                    name: name
                        .as_deref()
                        .unwrap_or_default()
                        .parse()
                        .map_err(|e| corrupt(format!("name: {e}")))?,
                    role: serde_json::from_value(serde_json::Value::String(
                        role.unwrap_or_default(),
                    ))
                    .map_err(|e| corrupt(format!("role: {e}")))?,
                    seq: seq_from(Table::Principals.name(), &key, seq)?,
                })
            })
            .collect()
    }

    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>> {
        let rows = self
            .read(||
                sqlx::query("SELECT pointer, name, revision, value FROM verdict.pointers WHERE pointer = $1 AND name = $2")
                    .bind(kind.as_str())
                    .bind(name),
            )
            .await
            .map_err(pg_err)?;
        rows.first().map(row_to_pointer).transpose()
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
        // would no longer be caught by re-hashing the body. Each is derived again here, in
        // code, from the parsed body ([`Table::derived_columns`]), and compared with what is
        // stored: this reads only data, never SQL kept in the database (a column's comment
        // can be rewritten by the schema's owner, and whoever runs `audit verify` would run
        // it).
        let mut drift = Vec::new();
        for table in Table::ALL {
            let columns = table.derived_columns();
            if columns.is_empty() {
                continue;
            }
            let list: String = columns
                .iter()
                .map(|c| format!(", {}::text", c.column))
                .collect();
            let sql = format!(
                "SELECT seq, key, body{list} FROM verdict.{} WHERE seq > $1 ORDER BY seq LIMIT $2",
                table.name()
            );
            let mut after = i64::MIN;
            loop {
                let rows = self
                    .rows(
                        sqlx::query(AssertSqlSafe(sql.clone()))
                            .bind(after)
                            .bind(i64::from(DRIFT_PAGE)),
                    )
                    .await
                    .map_err(pg_err)?;
                for r in &rows {
                    let seq: i64 = r.try_get(0).map_err(pg_err)?;
                    after = seq;
                    let body: String = r.try_get(2).map_err(pg_err)?;
                    // Read as jsonb reads it (the last of a repeated name wins): a body the
                    // strict reader refuses is reported by the row's own checks.
                    let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) else {
                        continue;
                    };
                    for (i, c) in columns.iter().enumerate() {
                        let stored: Option<String> = r.try_get(i + 3).map_err(pg_err)?;
                        if let Derivation::Value(derived) = c.derive(&value)
                            && derived != stored
                        {
                            drift.push(Drift {
                                table: table.name().into(),
                                key: Some(r.try_get(1).map_err(pg_err)?),
                                seq: Some(seq),
                                detail: format!(
                                    "column {} no longer holds what the body gives: {} instead of {}",
                                    c.column,
                                    stored.as_deref().unwrap_or("NULL"),
                                    derived.as_deref().unwrap_or("NULL")
                                ),
                            });
                        }
                    }
                }
                if rows.len() < usize::try_from(DRIFT_PAGE).unwrap_or(usize::MAX) {
                    break;
                }
            }
        }
        drift.extend(self.identity_drift().await?);
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

    async fn clock_now_and_head(
        &self,
    ) -> Result<(verdict_core::contracts::Timestamp, Option<ChainHead>)> {
        if self.snapshot.is_some() {
            // A snapshot reads the head its transaction sees, as `audit_head` does there.
            let now = self.clock_now().await?;
            return Ok((now, self.audit_head().await?));
        }
        // One statement on the kept reader connection: the head as of the statement's snapshot
        // and the database's clock as the statement reads it.
        let rows = self
            .read(|| {
                sqlx::query(
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, h.seq, h.hash                      FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT seq, hash                      FROM verdict.audit_events ORDER BY seq DESC LIMIT 1) AS h ON true",
                )
            })
            .await
            .map_err(pg_err)?;
        let row = rows.first().ok_or_else(|| StoreError::Backend {
            backend: "postgres",
            message: "the clock and head query returned no row".into(),
        })?;
        let micros: i64 = row.try_get(0).map_err(pg_err)?;
        let seq: Option<i64> = row.try_get(1).map_err(pg_err)?;
        let head = match seq {
            Some(seq) => Some(ChainHead {
                seq: seq_from("audit_events", "", seq)?,
                hash: row.try_get(2).map_err(pg_err)?,
            }),
            None => None,
        };
        Ok((
            verdict_core::contracts::Timestamp::from_unix_nanos(i128::from(micros) * 1000),
            head,
        ))
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

    async fn give_login(&self, actor: &Actor, principal: &str) -> Result<crate::store::DbLogin> {
        let mut bytes = [0_u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| StoreError::Backend {
            backend: "postgres",
            message: format!("no randomness for a password: {e}"),
        })?;
        let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // A login in use is taken back first and its sessions ended: a session opened with
        // the old password could otherwise set a password of its own (any role may change its
        // own) between the new one's commit and the end of its sessions. A role that may not
        // log in cannot make itself one that may, so only once none is left is it given again.
        let left = self.take_back(actor, principal).await?.sessions_left;
        if left > 0 {
            return Err(StoreError::Refused(format!(
                "principal {principal}: its login was taken back, but {left} session(s) of it are still open and could not be ended (the store's owner role lacks pg_signal_backend); it is not given again while they are: grant pg_signal_backend to the owner, or end them as a superuser, then give it again"
            )));
        }
        let user = self.change_login(actor, principal, Some(&password)).await?;
        let url = url_as(&self.url, &user, &password);
        Ok(crate::store::DbLogin {
            user,
            password,
            url,
        })
    }

    async fn take_login(&self, actor: &Actor, principal: &str) -> Result<crate::store::LoginTaken> {
        self.take_back(actor, principal).await
    }

    async fn snapshot(&self) -> Result<Self> {
        // A connection taken out of the pool for good (it closes when the snapshot is
        // dropped, ending its transaction), so the pool never hands out one mid-transaction.
        // The pool's check, the BEGIN and the first query.
        self.trips.add(3);
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
            reader: None,
            prefix: self.prefix.clone(),
            url: self.url.clone(),
            identities: Arc::clone(&self.identities),
            describe: self.describe.clone(),
            trips: Arc::clone(&self.trips),
            snapshot: Some(Mutex::new(conn)),
            wakeups: Arc::clone(&self.wakeups),
            manual: Arc::clone(&self.manual),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_url_keeps_the_place_and_replaces_the_credentials() {
        assert_eq!(
            url_as(
                "postgres://svc:secret@db:5432/verdict?sslmode=require",
                "u",
                "p"
            ),
            "postgres://u:p@db:5432/verdict?sslmode=require"
        );
        assert_eq!(
            url_as("postgresql://db/verdict", "u", "p"),
            "postgresql://u:p@db/verdict"
        );
        assert_eq!(url_as("postgres://a@b", "u", "p"), "postgres://u:p@b");
    }

    /// An error as the server sends it: a message and a SQLSTATE.
    #[derive(Debug)]
    struct Said(&'static str);

    impl std::fmt::Display for Said {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "the server said {}", self.0)
        }
    }

    impl std::error::Error for Said {}

    impl sqlx::error::DatabaseError for Said {
        fn message(&self) -> &str {
            "the server said no"
        }

        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }

        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }

        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn said(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Said(code)))
    }

    fn io(kind: std::io::ErrorKind) -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::from(kind))
    }

    #[test]
    fn the_database_being_away_is_told_apart_from_a_refusal_or_a_failure() {
        for (what, e) in [
            (
                "connection refused",
                io(std::io::ErrorKind::ConnectionRefused),
            ),
            ("connection reset", io(std::io::ErrorKind::ConnectionReset)),
            ("connection closed", io(std::io::ErrorKind::UnexpectedEof)),
            ("pool timed out", sqlx::Error::PoolTimedOut),
            ("admin shutdown", said("57P01")),
            ("crash shutdown", said("57P02")),
            ("cannot connect now", said("57P03")),
            ("too many connections", said("53300")),
            ("connection failure", said("08006")),
        ] {
            let got = pg_err(e);
            assert!(got.is_unavailable(), "{what}: {got:?}");
            assert!(
                got.to_string().starts_with("postgres unavailable: "),
                "{what}: {got}"
            );
        }
        for (what, e) in [
            ("permission denied", said("42501")),
            ("unique violation", said("23505")),
            ("check violation", said("23514")),
            ("foreign key violation", said("23503")),
            ("raised by a routine", said("P0001")),
            ("bad input", said("22P02")),
            ("serialization failure", said("40001")),
            ("no row", sqlx::Error::RowNotFound),
            ("protocol", sqlx::Error::Protocol("garbled".into())),
        ] {
            let got = pg_err(e);
            assert!(!got.is_unavailable(), "{what}: {got:?}");
        }
    }

    #[test]
    fn a_principals_role_is_named_by_its_store_and_fits_a_role_name() {
        let a = principal_db_role("verdict_", "db1", "coder");
        assert_eq!(a.len(), "verdict_p_".len() + 20);
        assert!(a.starts_with("verdict_p_"));
        // Another database, or another principal, is another identity.
        assert_ne!(a, principal_db_role("verdict_", "db2", "coder"));
        assert_ne!(a, principal_db_role("verdict_", "db1", "coder2"));
        // The longest prefix the store takes still gives a name PostgreSQL keeps whole.
        assert!(principal_db_role(&"p".repeat(40), "db", "x").len() <= 63);
    }
}
