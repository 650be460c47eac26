//! Migrations: applied on first use and by `migrate`, idempotent, safe to run concurrently on
//! databases that share role names, and a schema newer than the binary is refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use verdict_store::{Location, OpenOptions, SCHEMA_VERSION, StoreError};

async fn a_newer_schema_is_refused(t: &TestStore) {
    let table = t.table("schema_migrations");
    t.raw(&format!("INSERT INTO {table} (version, name, applied_at) VALUES (99, 'from the future', '2030-01-01T00:00:00Z')"))
        .await
        .unwrap();
    let options = OpenOptions {
        role_prefix: (!t.prefix.is_empty()).then(|| t.prefix.clone()),
        ..OpenOptions::default()
    };
    let err = verdict_store::open_with(&t.location, &options)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("newer than this verdict supports"),
        "{err}"
    );
    let err = verdict_store::migrate(&t.location, options.role_prefix.as_deref())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err}");
    // The store that was open before keeps working on what it knows, but says what it found.
    assert_eq!(t.store.schema_version().await.unwrap(), 99);
}
both!(a_newer_schema_is_refused);

async fn migrate_is_idempotent(t: &TestStore) {
    let prefix = (!t.prefix.is_empty()).then(|| t.prefix.clone());
    let report = verdict_store::migrate(&t.location, prefix.as_deref())
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (SCHEMA_VERSION, SCHEMA_VERSION));
    assert_eq!(t.store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let rows = t
        .count(&format!(
            "SELECT count(*) FROM {}",
            t.table("schema_migrations")
        ))
        .await;
    assert_eq!(rows, SCHEMA_VERSION);
}
both!(migrate_is_idempotent);

#[tokio::test]
async fn sqlite_is_created_on_first_use_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("home").join("verdict.db");
    let location = Location::Sqlite(path.clone());
    let no_migrate = OpenOptions {
        migrate: false,
        ..OpenOptions::default()
    };
    let err = verdict_store::open_with(&location, &no_migrate)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::SchemaTooOld { found: 0, .. }),
        "{err}"
    );
    let store = verdict_store::open(&location).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // Not a database at all: a clear error, not a guess.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a database file, not at all, really").unwrap();
    let err = verdict_store::open(&Location::Sqlite(junk))
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("junk.db") || err.to_string().contains("not a database"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_sharing_role_names_migrate_concurrently() {
    // Role names are global to the server: four databases with one prefix, migrated at once.
    let prefix = unique("vshared");
    let mut dbs = Vec::new();
    for _ in 0..4 {
        dbs.push(create_pg_db().await);
    }
    let mut tasks = Vec::new();
    for (_, url) in &dbs {
        let location = Location::Postgres(url.clone());
        let prefix = prefix.clone();
        tasks.push(tokio::spawn(async move {
            verdict_store::migrate(&location, Some(&prefix)).await
        }));
    }
    for task in tasks {
        let report = task.await.unwrap().unwrap();
        assert_eq!((report.from, report.to), (0, SCHEMA_VERSION));
    }
    // Each works, and each refuses to be reopened under other role names.
    for (_, url) in &dbs {
        let location = Location::Postgres(url.clone());
        let store = verdict_store::open(&location).await.unwrap();
        populate(store.as_ref()).await;
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        let other = OpenOptions {
            role_prefix: Some("verdict_other_".into()),
            ..OpenOptions::default()
        };
        let err = verdict_store::open_with(&location, &other)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains(&prefix), "{err}");
    }
    let bad = OpenOptions {
        role_prefix: Some("Bad-Prefix".into()),
        ..OpenOptions::default()
    };
    let (db, url) = create_pg_db().await;
    let err = verdict_store::open_with(&Location::Postgres(url), &bad)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                what: "role prefix",
                ..
            }
        ),
        "{err}"
    );
    drop_pg(&db, "").await;
    for (i, (db, _)) in dbs.iter().enumerate() {
        drop_pg(db, if i + 1 == dbs.len() { &prefix } else { "" }).await;
    }
}

/// The admin URL, connecting as another user to another database.
fn url_as(user: &str, db: &str) -> String {
    let admin = pg_admin_url();
    let (scheme, rest) = admin.split_once("://").expect("scheme in VERDICT_TEST_PG");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let (host, _) = host.split_once('/').expect("database in VERDICT_TEST_PG");
    format!("{scheme}://{user}@{host}/{db}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_owner_with_createrole_migrates_without_superuser() {
    use sqlx::{Connection as _, Executor as _};
    let prefix = unique("vmig");
    let (login, plain) = (format!("{prefix}login"), format!("{prefix}plain"));
    let db = unique("verdict_t");
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    for sql in [
        format!("CREATE ROLE \"{login}\" LOGIN CREATEROLE"),
        format!("CREATE ROLE \"{plain}\" LOGIN"),
        format!("CREATE DATABASE \"{db}\" OWNER \"{login}\""),
    ] {
        admin
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
            .await
            .unwrap();
    }
    // A login role that may not create roles is refused with what migrating needs, and leaves
    // neither roles nor a schema behind.
    let err = verdict_store::migrate(&Location::Postgres(url_as(&plain, &db)), Some(&prefix))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, StoreError::Denied(m) if m.contains("CREATEROLE")),
        "{err}"
    );
    let made: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)")
            .bind(&prefix)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(made, 2, "only the two login roles the test made");

    // The database's owner with CREATEROLE, no superuser, migrates and writes.
    let location = Location::Postgres(url_as(&login, &db));
    let report = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (0, SCHEMA_VERSION));
    let options = OpenOptions {
        role_prefix: Some(prefix.clone()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&location, &options).await.unwrap();
    // Without a superuser every write acts as a stored principal's identity (schema version
    // 7): the first operator adds itself (schema 14; the engine's own identity writes nothing
    // since schema 19), then the others.
    let first_op = verdict_store::Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    let first = verdict_store::PrincipalRecord {
        name: OPERATOR.parse().unwrap(),
        role: verdict_core::contracts::Role::Operator,
        token_sha256: verdict_store::token_sha256("token-of-engine"),
    };
    store.add_principal(&first_op, &first).await.unwrap();
    for (name, role) in [
        (PRODUCER, verdict_core::contracts::Role::Producer),
        (RUNNER, verdict_core::contracts::Role::Runner),
        (HUMAN, verdict_core::contracts::Role::Human),
    ] {
        register(store.as_ref(), name, role).await;
        grant_write(store.as_ref(), &format!("g-{name}"), name, "ex-1").await;
    }
    // populate's subject names mission m-17 (schema 31).
    grant_mission_write(store.as_ref(), "g-producer-m17", PRODUCER, "m-17").await;
    populate(store.as_ref()).await;
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    drop(store);

    // Every table belongs to the owner role, not to the login role that migrated.
    let admin_db = format!(
        "{}/{db}",
        pg_admin_url().rsplit_once('/').expect("database").0
    );
    let mut conn = sqlx::PgConnection::connect(&admin_db).await.unwrap();
    let owners: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'verdict'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(owners, vec![format!("{prefix}owner")]);
    let superuser: bool = sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = $1")
        .bind(&login)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(!superuser);
    drop(conn);
    drop_pg(&db, &prefix).await;
}

/// Schema version 5 splices its checks into each write routine at the one line that parses the
/// body. A routine that does not have exactly one such line (edited by hand, say) must stop the
/// migration: nothing of version 5 is applied, no routine is left half-changed, and once the
/// routine is put back the same migration goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_5_refuses_a_routine_it_cannot_splice_and_changes_nothing() {
    use sqlx::{Connection as _, Executor as _};
    let (db, url) = create_pg_db().await;
    let prefix = unique("vmig");
    create_pg_roles(&prefix).await;
    let owner = format!("\"{prefix}owner\"");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for m in verdict_store::migrations::POSTGRES
        .iter()
        .filter(|m| m.version <= 4)
    {
        let sql = pg_migration_sql(m.sql, &prefix);
        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; {sql}; INSERT INTO verdict.schema_migrations (version, name) VALUES ({}, '{}'); COMMIT;",
            m.version, m.name
        ))))
        .await
        .unwrap();
    }
    let single = "v_doc := p_body::jsonb;";
    let rewrite = |from: &str, to: &str| {
        format!(
            "SET ROLE {owner}; DO $$ BEGIN EXECUTE replace(pg_get_functiondef(\
             'verdict.put_one_findings(text, text, text, text, text, text)'::regprocedure), \
             '{from}', '{to}'); END $$; RESET ROLE;"
        )
    };
    let twice = format!("{single} {single}");
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(rewrite(single, &twice))))
        .await
        .unwrap();
    let definition = |name: &str| {
        format!(
            "SELECT pg_get_functiondef('verdict.{name}(text, text, text, text, text, text)'::regprocedure)"
        )
    };
    let spliced = async |conn: &mut sqlx::PgConnection| -> bool {
        let def: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(definition("put_one_check_evidence")))
                .fetch_one(conn)
                .await
                .unwrap();
        def.contains("says it was produced by")
    };

    let location = Location::Postgres(url.clone());
    let err = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "verdict.put_one_findings(text, text, text, text, text, text): the body is parsed 2 times, not once"
        ),
        "{err}"
    );
    let version: i32 = sqlx::query_scalar("SELECT max(version) FROM verdict.schema_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(version, 4);
    // The routines the migration had already spliced before it met this one are as they were.
    assert!(!spliced(&mut conn).await);

    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(rewrite(&twice, single))))
        .await
        .unwrap();
    let report = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (4, SCHEMA_VERSION));
    assert!(spliced(&mut conn).await);
    drop(conn);
    drop_pg(&db, &prefix).await;
}

/// A new SQLite store's file, and the WAL and shared-memory files SQLite keeps beside it, are
/// readable by their owner alone: every piece of evidence and the principals' token hashes are
/// in them.
#[cfg(unix)]
#[tokio::test]
async fn a_new_sqlite_store_is_readable_by_its_owner_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    let t = sqlite().await;
    let verdict_store::Location::Sqlite(path) = &t.location else {
        panic!("not a SQLite store");
    };
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
}
