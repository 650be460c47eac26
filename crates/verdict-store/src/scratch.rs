//! Throwaway PostgreSQL databases for test suites and benchmarks: one database and one role
//! prefix per use, dropped when the guard is dropped, including when the test panics. A run
//! that was killed outright cannot drop anything, so every new scratch database first sweeps
//! away those left by processes that no longer exist.
//!
//! It needs a server where the admin URL may create databases and roles (the test machines'
//! local PostgreSQL with trust authentication); nothing in the store proper uses it.

use crate::error::{Result, StoreError};
use crate::location::Location;
use sqlx::{Connection as _, Executor as _, PgConnection, Row as _};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

/// Every scratch database's name starts with this, then `{label}_{pid}_{n}`.
const PREFIX: &str = "vscratch_";

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend {
        backend: "postgres",
        message: format!("scratch database: {e}"),
    }
}

/// A database made for one test or benchmark run, dropped (with its roles) on drop.
#[derive(Debug)]
pub struct ScratchPostgres {
    name: String,
    admin_url: String,
    url: String,
}

impl ScratchPostgres {
    /// The admin URL: `VERDICT_TEST_PG`, else the local server's `postgres` database.
    #[must_use]
    pub fn admin_url() -> String {
        std::env::var("VERDICT_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    /// Creates an empty database labelled `label` (lowercase letters and digits, at most 12),
    /// after sweeping the leftovers of dead processes. Blocking; callable from inside or
    /// outside an async runtime.
    pub fn create(label: &str) -> Result<Self> {
        Self::create_at(&Self::admin_url(), label)
    }

    /// As [`ScratchPostgres::create`], on the server of `admin_url` (a URL ending in the
    /// database to connect to for creating and dropping): what a benchmark given `--postgres`
    /// uses.
    pub fn create_at(admin_url: &str, label: &str) -> Result<Self> {
        if label.is_empty()
            || label.len() > 12
            || !label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(StoreError::Invalid {
                what: "scratch label",
                message: format!("{label:?} is not 1-12 lowercase letters and digits"),
            });
        }
        let admin_url = admin_url.to_owned();
        let (base, _) = admin_url
            .rsplit_once('/')
            .ok_or_else(|| StoreError::Invalid {
                what: "admin url",
                message: format!("{admin_url:?} names no database"),
            })?;
        let name = format!(
            "{PREFIX}{label}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let url = format!("{base}/{name}");
        let (admin, db) = (admin_url.clone(), name.clone());
        blocking(async move {
            let mut conn = PgConnection::connect(&admin).await.map_err(backend)?;
            sweep(&mut conn, &admin).await?;
            conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE DATABASE \"{db}\""
            ))))
            .await
            .map_err(backend)?;
            Ok(())
        })?;
        Ok(Self {
            name,
            admin_url,
            url,
        })
    }

    /// As [`ScratchPostgres::create`], with a store migrated there under the database's own
    /// role prefix ([`ScratchPostgres::role_prefix`]). A role prefix serves the store of one
    /// database of a cluster (schema 32), so scratch stores in use at once cannot all take the
    /// default one; a store opened without a prefix keeps the one it was migrated with.
    pub fn create_migrated(label: &str) -> Result<Self> {
        let scratch = Self::create(label)?;
        let (location, prefix) = (scratch.location(), scratch.role_prefix());
        blocking(async move { crate::migrate(&location, Some(&prefix)).await.map(|_| ()) })?;
        Ok(scratch)
    }

    /// The database's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A URL of the database, as the admin user.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where a store in this database lives.
    #[must_use]
    pub fn location(&self) -> Location {
        Location::Postgres(self.url.clone())
    }

    /// A role prefix owned by this database: its roles are dropped with it.
    #[must_use]
    pub fn role_prefix(&self) -> String {
        format!("{}_", self.name)
    }
}

impl Drop for ScratchPostgres {
    fn drop(&mut self) {
        let (admin, name) = (self.admin_url.clone(), self.name.clone());
        // A failed drop is left for the next sweep; a destructor must not panic.
        let _ = blocking(async move {
            let mut conn = PgConnection::connect(&admin).await.map_err(backend)?;
            drop_one(&mut conn, &admin, &name).await
        });
    }
}

/// Drops a scratch database and every role named after it, and the roles of its principals
/// (named after the store's role prefix, which may be another's).
async fn drop_one(conn: &mut PgConnection, admin: &str, name: &str) -> Result<()> {
    let principals = principal_roles(admin, name).await;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    ))))
    .await
    .map_err(backend)?;
    let prefix = format!("{name}_");
    let roles = sqlx::query("SELECT rolname FROM pg_roles")
        .fetch_all(&mut *conn)
        .await
        .map_err(backend)?;
    for row in roles {
        let role: String = row.try_get(0).map_err(backend)?;
        if role.starts_with(&prefix) || principals.contains(&role) {
            conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP ROLE IF EXISTS \"{role}\""
            ))))
            .await
            .map_err(backend)?;
        }
    }
    Ok(())
}

/// The database roles of the principals stored in scratch database `name` (none when it has no
/// store, or cannot be read).
async fn principal_roles(admin: &str, name: &str) -> Vec<String> {
    let Some((base, _)) = admin.rsplit_once('/') else {
        return Vec::new();
    };
    let Ok(mut conn) = PgConnection::connect(&format!("{base}/{name}")).await else {
        return Vec::new();
    };
    let roles = sqlx::query_scalar(
        "SELECT m.db_role FROM verdict.principal_roles m JOIN verdict.principals p \
         ON p.name = m.principal",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    let _ = conn.close().await;
    roles
}

/// Drops the scratch databases of processes that no longer run.
async fn sweep(conn: &mut PgConnection, admin: &str) -> Result<()> {
    let rows = sqlx::query("SELECT datname FROM pg_database")
        .fetch_all(&mut *conn)
        .await
        .map_err(backend)?;
    for row in rows {
        let name: String = row.try_get(0).map_err(backend)?;
        if owner_pid(&name).is_some_and(|pid| !process_exists(pid)) {
            drop_one(conn, admin, &name).await?;
        }
    }
    Ok(())
}

/// The process id inside a scratch database's name.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.split('_');
    let (_label, pid, _n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    pid.parse().ok()
}

fn process_exists(pid: u32) -> bool {
    // Where /proc is missing nothing is swept: leaking beats dropping a live run's database.
    !std::path::Path::new("/proc/self").exists()
        || std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Runs `f` to completion on a runtime of its own, on a thread of its own, so the caller may
/// be synchronous or inside any runtime (drops happen in both).
fn blocking<F>(f: F) -> Result<()>
where
    F: Future<Output = Result<()>> + Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(backend)?
            .block_on(f)
    })
    .join()
    .map_err(|_| backend("the worker thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_names_carry_a_pid() {
        assert_eq!(owner_pid("vscratch_engine_4242_7"), Some(4242));
        assert_eq!(owner_pid("vscratch_engine_4242"), None);
        assert_eq!(owner_pid("vscratch_engine_4242_7_x"), None);
        assert_eq!(owner_pid("verdict_engine_4242_7"), None);
        assert_eq!(owner_pid("vscratch_engine_pid_7"), None);
    }

    #[test]
    fn this_process_exists() {
        assert!(process_exists(std::process::id()));
    }

    /// Runs one admin statement, or counts databases named `count`.
    fn admin(sql: Option<String>, count: Option<&str>) -> i64 {
        let count = count.map(str::to_owned);
        let n = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(-1));
        let out = n.clone();
        blocking(async move {
            let mut c = PgConnection::connect(&ScratchPostgres::admin_url())
                .await
                .map_err(backend)?;
            if let Some(sql) = sql {
                c.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
                    .await
                    .map_err(backend)?;
            }
            if let Some(name) = count {
                let found: i64 = sqlx::query("SELECT count(*) FROM pg_database WHERE datname = $1")
                    .bind(name)
                    .fetch_one(&mut c)
                    .await
                    .map_err(backend)?
                    .try_get(0)
                    .map_err(backend)?;
                out.store(found, Ordering::SeqCst);
            }
            Ok(())
        })
        .unwrap();
        n.load(Ordering::SeqCst)
    }

    #[test]
    fn a_scratch_database_is_dropped_with_its_guard_even_on_panic() {
        let db = ScratchPostgres::create("selftest").unwrap();
        let name = db.name().to_owned();
        assert_eq!(admin(None, Some(&name)), 1);
        let unwound = std::panic::catch_unwind(move || {
            let _guard = db;
            std::panic::resume_unwind(Box::new("a failing test"));
        });
        assert!(unwound.is_err());
        assert_eq!(
            admin(None, Some(&name)),
            0,
            "the database outlived its guard"
        );
        assert!(ScratchPostgres::create("Bad").is_err());
    }

    #[test]
    fn leftovers_of_a_dead_process_are_swept() {
        // A pid above the kernel's maximum can belong to no process.
        const DEAD: &str = "vscratch_selftest_4999999_0";
        admin(
            Some(format!("DROP DATABASE IF EXISTS \"{DEAD}\" WITH (FORCE)")),
            None,
        );
        admin(Some(format!("CREATE DATABASE \"{DEAD}\"")), None);
        let _fresh = ScratchPostgres::create("selftest").unwrap();
        assert_eq!(
            admin(None, Some(DEAD)),
            0,
            "a dead process's database was kept"
        );
    }
}
